//! SQLite behind the ports: one writer beside a read pool on the file, in
//! WAL mode, and this backend's implementation of each port.

pub(crate) mod append;
mod bulk;
mod database;
mod log;
mod shows;
mod tables;
mod webhooks;

use std::str::FromStr;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;

use self::append::SqliteAppender;
use super::sql::Pools;
use super::{StoreError, StoreResult, ACQUIRE_TIMEOUT};

pub struct SqliteBackend {
    /// The one connection that writes: SQLite has a single writer, and
    /// queueing writers here (FIFO) beats SQLite's sleep-and-retry busy handler.
    pub(crate) write: SqlitePool,
    /// Appends go through one task that commits them in groups.
    pub(in crate::store) appender: SqliteAppender,
    pub(crate) read: SqlitePool,
    /// Counts this process's appends; see [`super::EventLog::appends`].
    pub(in crate::store) appended: tokio::sync::watch::Sender<u64>,
}

impl Pools for SqliteBackend {
    type Pool = SqlitePool;

    fn reads(&self) -> &SqlitePool {
        &self.read
    }

    fn writes(&self) -> &SqlitePool {
        &self.write
    }

    fn queries(&self) -> &SqlitePool {
        &self.read
    }
}

impl SqliteBackend {
    /// One writer and a read pool on the file, in WAL mode.
    pub(in crate::store) async fn connect(url: &str, connections: u32) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::BadUrl(e.to_string()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: a commit is on disk before the buyer is told "held"
            // or "booked"; NORMAL could lose the last commits on power loss.
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(ACQUIRE_TIMEOUT);
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await
            .map_err(StoreError::classify)?;
        let read = SqlitePoolOptions::new()
            .max_connections(connections)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .test_before_acquire(false)
            .connect_with(options.read_only(true))
            .await
            .map_err(StoreError::classify)?;
        let appender = SqliteAppender::start(write.clone());
        Ok(SqliteBackend {
            write,
            read,
            appender,
            appended: tokio::sync::watch::Sender::new(0),
        })
    }
}
