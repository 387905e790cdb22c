//! The application: built from settings, bound to a port (0 in tests), run
//! until a shutdown signal the caller supplies.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use tokio::net::{TcpListener, TcpSocket};

use crate::auth::TokenKeys;
use crate::checkout::CheckoutService;
use crate::clock::Clock;
use crate::holds::HoldService;
use crate::http::{router, AppState, Services};
use crate::inventory::Inventory;
use crate::payment::simulator::Simulator;
use crate::recovery::{Recovery, RECOVERY_INTERVAL};
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
    /// Base latency of the built-in payment simulator.
    pub payment_latency: std::time::Duration,
}

pub struct Application {
    listener: TcpListener,
    router: Router,
    state: AppState,
    recovery: Recovery,
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
        // One cache of inventory streams per process: every in-process
        // writer of a stream must go through the same slot (see streams.rs).
        let inventory = Arc::new(Inventory::default());
        let holds = HoldService::new(
            store.clone(),
            catalog.clone(),
            clock.clone(),
            inventory.clone(),
        );
        let payments = Arc::new(Simulator::new(
            store.clone(),
            clock.clone(),
            settings.payment_latency,
        ));
        let checkout = Arc::new(CheckoutService::new(
            store.clone(),
            catalog.clone(),
            clock.clone(),
            payments,
            inventory,
        ));
        let recovery = Recovery::new(checkout.clone());
        // Finish what a previous run left half way before taking requests.
        let report = recovery
            .run_once()
            .await
            .context("recovery of unfinished checkouts failed")?;
        if report.finished() > 0 {
            tracing::info!(?report, "finished checkouts left by the previous run");
        }
        let state: AppState = Arc::new(Services {
            store,
            catalog,
            holds,
            checkout,
            keys: TokenKeys::new(&settings.jwt_secret),
            clock,
        });
        let listener =
            bind(settings.addr).with_context(|| format!("cannot listen on {}", settings.addr))?;
        Ok(Self {
            listener,
            router: router(state.clone()),
            state,
            recovery,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// Serves until `shutdown` completes, then lets in-flight requests
    /// finish; the recovery worker runs beside it until then.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let worker = tokio::spawn(self.recovery.clone().run_periodically(
            RECOVERY_INTERVAL,
            async move {
                let mut stop_rx = stop_rx;
                let _ = stop_rx.wait_for(|stopped| *stopped).await;
            },
        ));
        let served = axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown)
            .await;
        let _ = stop_tx.send(true);
        let _ = worker.await;
        served
    }
}
