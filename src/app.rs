//! The application: built from settings, bound to a port (0 in tests), run
//! until a shutdown signal the caller supplies.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use tokio::net::{TcpListener, TcpSocket};

use crate::auth::TokenKeys;
use crate::clock::Clock;
use crate::holds::HoldService;
use crate::http::{router, AppState, Services};
use crate::shows::ShowCatalog;
use crate::store::Store;

/// Pending connections the kernel queues before we accept them. An onsale
/// opens thousands of connections in the same second; the usual 128 or 1024
/// would turn the excess into SYN retries a second later.
pub const LISTEN_BACKLOG: u32 = 4096;

#[derive(Debug, Clone)]
pub struct Settings {
    pub addr: SocketAddr,
    pub database_url: String,
    pub jwt_secret: String,
    /// PostgreSQL connections in the pool (SQLite: read connections).
    pub database_connections: u32,
}

pub struct Application {
    listener: TcpListener,
    router: Router,
    state: AppState,
}

fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

impl Application {
    /// Connects to the store, runs migrations and binds the listener.
    pub async fn build(settings: Settings, clock: Arc<dyn Clock>) -> anyhow::Result<Self> {
        let store = Arc::new(
            Store::connect(&settings.database_url, settings.database_connections)
                .await
                .context("cannot open the database")?,
        );
        store.migrate().await.context("cannot apply migrations")?;
        let catalog = Arc::new(ShowCatalog::default());
        let holds = HoldService::new(store.clone(), catalog.clone(), clock.clone());
        let state: AppState = Arc::new(Services {
            store,
            catalog,
            holds,
            keys: TokenKeys::new(&settings.jwt_secret),
            clock,
        });
        let listener =
            bind(settings.addr).with_context(|| format!("cannot listen on {}", settings.addr))?;
        Ok(Self {
            listener,
            router: router(state.clone()),
            state,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` completes, then lets in-flight requests finish.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown)
            .await
    }
}
