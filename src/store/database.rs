//! The database behind the ports: its pools on PostgreSQL (following the
//! primary across failovers, `primary.rs`) or SQLite (one writer beside a
//! read pool), and the [`Database`] port for what concerns the connection
//! itself (migrations, health, hosts).

use std::str::FromStr;
use std::sync::Arc;

use postgres_es::PostgresEventRepository;
use sqlite_es::SqliteEventRepository;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};

use super::error::{needs_ping, recheck_writable};
use super::log::postgres::PgAppender;
use super::log::sqlite::SqliteAppender;
use super::primary::{self, SessionAttrs};
use super::{on_store, port, StoreError, StoreResult, ACQUIRE_TIMEOUT, QUERY_POOL_CONNECTIONS};

pub struct PgBackend {
    pub(crate) pool: PgPool,
    /// Commands' appends, committed in groups.
    pub(super) appender: PgAppender,
    /// Counts this process's appends; see [`super::EventLog::appends`].
    pub(super) appended: tokio::sync::watch::Sender<u64>,
    /// Public queries only: see `QUERY_POOL_CONNECTIONS`.
    pub(crate) query: PgPool,
    pub(super) repo: PostgresEventRepository,
    /// The host in use among those `DATABASE_URL` names.
    pub(super) primary: Arc<primary::Primary>,
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

pub struct SqliteBackend {
    /// The one connection that writes: SQLite has a single writer, and
    /// queueing writers here (FIFO) beats SQLite's sleep-and-retry busy handler.
    pub(crate) write: SqlitePool,
    /// Appends go through one task that commits them in groups.
    pub(super) appender: SqliteAppender,
    pub(crate) read: SqlitePool,
    pub(super) repo: SqliteEventRepository,
    /// Counts this process's appends; see [`super::EventLog::appends`].
    pub(super) appended: tokio::sync::watch::Sender<u64>,
}

/// Which database a store is on. Only the persistence modules look.
pub enum Backend {
    Postgres(PgBackend),
    Sqlite(SqliteBackend),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Postgres,
    Sqlite,
}

impl Backend {
    pub(super) async fn connect(url: &str, connections: u32) -> StoreResult<Self> {
        let connections = connections.max(1);
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Self::connect_postgres(url, connections).await
        } else if url.starts_with("sqlite:") {
            Self::connect_sqlite(url, connections).await
        } else {
            Err(StoreError::BadUrl(format!(
                "DATABASE_URL must start with sqlite:// or postgres://, got {:?}",
                url.split(':').next().unwrap_or_default()
            )))
        }
    }

    /// The primary among the URL's hosts, the command and query pools on
    /// it, and the task that moves both when the primary changes.
    async fn connect_postgres(url: &str, connections: u32) -> StoreResult<Self> {
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
        let repo = PostgresEventRepository::new(pool.clone());
        let appender = PgAppender::start(pool.clone());
        Ok(Backend::Postgres(PgBackend {
            pool,
            appender,
            query,
            repo,
            appended: tokio::sync::watch::Sender::new(0),
            primary,
            _watcher: AbortOnDrop(watcher.abort_handle()),
        }))
    }

    /// One writer and a read pool on the file, in WAL mode.
    async fn connect_sqlite(url: &str, connections: u32) -> StoreResult<Self> {
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
        let repo = SqliteEventRepository::new(read.clone());
        let appender = SqliteAppender::start(write.clone());
        Ok(Backend::Sqlite(SqliteBackend {
            write,
            read,
            repo,
            appender,
            appended: tokio::sync::watch::Sender::new(0),
        }))
    }

    /// What `on_store!` matches on, for code that holds the backend itself.
    pub(crate) fn backend(&self) -> &Self {
        self
    }

    pub fn kind(&self) -> StoreKind {
        match self {
            Backend::Postgres(_) => StoreKind::Postgres,
            Backend::Sqlite(_) => StoreKind::Sqlite,
        }
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

port!(
    /// The connection itself: migrations, health, the hosts in use.
    Database
);

impl Database {
    /// The database host in use (PostgreSQL: the one of `DATABASE_URL`'s
    /// hosts that qualifies now, `None` while none does; SQLite: the file).
    pub fn database_host(&self) -> Option<String> {
        match self.backend() {
            Backend::Postgres(s) => s.primary.host().map(str::to_owned),
            Backend::Sqlite(_) => Some("sqlite".to_owned()),
        }
    }

    /// The hosts `DATABASE_URL` names (PostgreSQL), for messages.
    pub fn database_hosts(&self) -> Vec<String> {
        match self.backend() {
            Backend::Postgres(s) => s.primary.labels().into_iter().map(str::to_owned).collect(),
            Backend::Sqlite(_) => Vec::new(),
        }
    }

    pub fn kind(&self) -> StoreKind {
        self.backend().kind()
    }

    /// Applies the migrations of this store's dialect (idempotent), then, on
    /// PostgreSQL, the current bodies of our functions.
    pub async fn migrate(&self) -> StoreResult<()> {
        match self.backend() {
            Backend::Postgres(s) => {
                sqlx::migrate!("./migrations/postgres").run(&s.pool).await?;
                super::log::postgres::install_functions(&s.pool).await?;
            }
            Backend::Sqlite(s) => sqlx::migrate!("./migrations/sqlite").run(&s.write).await?,
        }
        Ok(())
    }

    /// Migrations this binary has that the database has not applied.
    pub async fn pending_migrations(&self) -> StoreResult<usize> {
        let migrator = match self.backend() {
            Backend::Postgres(_) => sqlx::migrate!("./migrations/postgres"),
            Backend::Sqlite(_) => sqlx::migrate!("./migrations/sqlite"),
        };
        let applied: Vec<i64> = on_store!(self, read pool => {
            sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)?
        });
        Ok(migrator
            .iter()
            .filter(|m| !applied.contains(&m.version))
            .count())
    }

    /// Does the database answer?
    pub async fn ping(&self) -> StoreResult<()> {
        on_store!(self, read pool => {
            sqlx::query("SELECT 1").execute(pool).await.map_err(StoreError::classify)?;
        });
        Ok(())
    }

    /// Runs one statement as it is (tools and benchmarks: never with input).
    pub async fn execute_raw(&self, sql: &str) -> StoreResult<u64> {
        on_store!(self, write pool => {
            let done = sqlx::query(sql).execute(pool).await.map_err(StoreError::classify)?;
            Ok(done.rows_affected())
        })
    }
}
