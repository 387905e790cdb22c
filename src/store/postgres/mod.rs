//! PostgreSQL behind the ports: the command and query pools on the primary
//! among `DATABASE_URL`'s hosts (following it across failovers,
//! `primary.rs`), and this backend's implementation of each port.

pub(crate) mod append;
mod bulk;
pub(crate) mod citus;
mod database;
mod log;
pub(crate) mod primary;
mod shows;
mod tables;
mod webhooks;

use std::sync::Arc;

use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

use self::append::PgAppender;
use self::primary::SessionAttrs;
use super::error::{needs_ping, recheck_writable};
use super::sql::Pools;
use super::{StoreError, StoreResult, ACQUIRE_TIMEOUT, QUERY_POOL_CONNECTIONS};

pub struct PgBackend {
    pub(crate) pool: PgPool,
    /// Commands' appends, committed in groups.
    pub(in crate::store) appender: PgAppender,
    /// Counts this process's appends; see [`super::EventLog::appends`].
    pub(in crate::store) appended: tokio::sync::watch::Sender<u64>,
    /// Public queries only: see `QUERY_POOL_CONNECTIONS`.
    pub(crate) query: PgPool,
    /// The host in use among those `DATABASE_URL` names.
    pub(in crate::store) primary: Arc<primary::Primary>,
    /// The task that keeps the pools on the primary; ends with the store.
    _watcher: AbortOnDrop,
}

/// Aborts a task of the store's when the store is dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Pools for PgBackend {
    type Pool = PgPool;

    fn reads(&self) -> &PgPool {
        &self.pool
    }

    fn writes(&self) -> &PgPool {
        &self.pool
    }

    fn queries(&self) -> &PgPool {
        &self.query
    }
}

impl PgBackend {
    /// The primary among the URL's hosts, the command and query pools on
    /// it, and the task that moves both when the primary changes.
    pub(in crate::store) async fn connect(url: &str, connections: u32) -> StoreResult<Self> {
        let hosts = primary::Hosts::parse(url)?;
        let (primary, watcher_conn) = primary::Primary::find(hosts).await?;
        let pool = pg_pool(&primary, connections)
            .await
            .map_err(StoreError::classify)?;
        let query = pg_pool(&primary, QUERY_POOL_CONNECTIONS)
            .await
            .map_err(StoreError::classify)?;
        let watcher = tokio::spawn(
            primary
                .clone()
                .watch(vec![pool.clone(), query.clone()], watcher_conn),
        );
        let appender = PgAppender::start(pool.clone());
        Ok(PgBackend {
            pool,
            appender,
            query,
            appended: tokio::sync::watch::Sender::new(0),
            primary,
            _watcher: AbortOnDrop(watcher.abort_handle()),
        })
    }
}

/// A pool of `size` connections to the primary, each checked to qualify
/// when opened and, before use, dropped if it predates a switch of host.
async fn pg_pool(primary: &Arc<primary::Primary>, size: u32) -> Result<PgPool, sqlx::Error> {
    let (before, after) = (primary.clone(), primary.clone());
    PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        // A ping on every acquire doubles the round trips of a short
        // command; a dead connection surfaces as an error instead.
        .test_before_acquire(false)
        // ... except for one that may have outlived its server,
        // and none opened before the pools moved to another host.
        .before_acquire(move |conn, meta| {
            let primary = before.clone();
            Box::pin(async move {
                if primary.opened_before_switch(meta.age) {
                    return Ok(false);
                }
                if primary.attrs() == SessionAttrs::ReadWrite && recheck_writable() {
                    return Ok(primary::qualifies(conn, SessionAttrs::ReadWrite)
                        .await
                        .unwrap_or(false));
                }
                if !needs_ping(meta.idle_for) {
                    return Ok(true);
                }
                Ok(sqlx::Connection::ping(conn).await.is_ok())
            })
        })
        // A new connection must be to a host that qualifies: the
        // pools may still point at a primary just demoted. (Any
        // host that answers qualifies for `any`.)
        .after_connect(move |conn, _| {
            let primary = after.clone();
            Box::pin(async move {
                if primary.attrs() == SessionAttrs::Any
                    || primary::qualifies(conn, SessionAttrs::ReadWrite).await?
                {
                    Ok(())
                } else {
                    Err(sqlx::Error::Configuration(
                        "this database host is read-only now".into(),
                    ))
                }
            })
        })
        .connect_with(primary.options())
        .await
}
