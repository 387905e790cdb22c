//! Persistence: the event log, the read models and the few command-side
//! tables, on PostgreSQL (production) or SQLite (embedded default).
//!
//! Streams are loaded through the cqrs-es repositories of postgres-es and
//! sqlite-es. Appends are our own: one transaction writes the events of every
//! stream a command touched, at the sequences it decided on, together with
//! the read-model rows those events produce (see [`batch`]). A
//! duplicate `(aggregate_type, aggregate_id, sequence)` anywhere in the batch
//! refuses the whole batch, which is what makes a multi-seat hold all or
//! nothing; and a projection written in the same transaction can never be
//! left behind by a crash.
//!
//! Both stores share their SQL where the dialects agree (`$n` parameters
//! work in both); the [`on_store!`] macro expands one body for each pool type.

mod batch;
mod bulk;
mod checkouts;
pub use checkouts::WaitingCheckout;
mod document;
mod error;
mod flat;
mod holds;
mod log;
mod payments;
mod postgres;
mod primary;
use primary::SessionAttrs;
mod quiesce;
mod shows;
mod sqlite;
mod tables;
mod webhooks;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use cqrs_es::persist::{PersistedEventRepository, SerializedEvent};
use cqrs_es::Aggregate;
use postgres_es::PostgresEventRepository;
use sqlite_es::SqliteEventRepository;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};

pub use batch::{
    AppendBatch, AppendOutcome, CheckpointMove, IdempotencyKeyRow, NewEvent, MAX_EVENTS_PER_BATCH,
};
use error::{needs_ping, recheck_writable, retry_read};
pub use error::{
    StoreError, StoreResult, PING_IDLE_CONNECTIONS_AFTER, READ_RETRIES_ON_CONNECTION_LOSS,
};
pub use holds::{HoldRecord, IdempotencyEntry};
pub use log::{LogEvent, LogFilter, LogScan};
pub use payments::{LedgerCharge, SimCharge, SimPayment};
pub use quiesce::Quiesced;
pub use shows::{PoolFigures, ShowInsert, WHOLE_SHOW};
pub use tables::{Projection, Tables};
pub use webhooks::{
    AttemptRecord, AttemptVerdict, ClaimedDelivery, DeliveryId, DeliveryRow, DeliveryStatus,
    EndpointId, EndpointRow, NewDelivery, RetryOutcome, WebhookEventType,
};

/// Default size of the connection pool: PostgreSQL connections, or read
/// connections to a SQLite file (beside its one writer). Commands hold a
/// connection only for their reads and their one append transaction, never
/// while waiting on a lock or a payment, so a few dozen serve thousands of
/// concurrent requests.
pub const DEFAULT_POOL_CONNECTIONS: u32 = 16;

/// PostgreSQL connections kept for public queries (availability), apart from
/// the pool commands use. In an onsale every command pool connection is busy
/// and requests queue for one; a buyer refreshing the seat map must not wait
/// behind that queue for a read that takes a millisecond. (On SQLite, reads
/// already have their own pool beside the one writer.)
pub const QUERY_POOL_CONNECTIONS: u32 = 4;

/// How long a request waits for a database connection before the answer is
/// 503 `busy`. Past this the database is not answering in time, and a quick
/// refusal with `Retry-After` beats a client timeout. docs/api.md promises
/// the 503 within 5 s: this leaves a second for the rest of the request
/// (while the server refuses connections, the pool retries connecting until
/// this deadline, so a request during an outage is answered just after it).
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(4);

pub struct PgStore {
    pool: PgPool,
    /// Commands' appends, committed in groups.
    appender: postgres::PgAppender,
    /// Counts this process's appends; see [`Store::appends`].
    appended: tokio::sync::watch::Sender<u64>,
    /// Public queries only: see `QUERY_POOL_CONNECTIONS`.
    query: PgPool,
    repo: PostgresEventRepository,
    /// The host in use among those `DATABASE_URL` names.
    primary: Arc<primary::Primary>,
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

pub struct SqliteStore {
    /// The one connection that writes: SQLite has a single writer, and
    /// queueing writers here (FIFO) beats SQLite's sleep-and-retry busy handler.
    write: SqlitePool,
    /// Appends go through one task that commits them in groups.
    appender: sqlite::SqliteAppender,
    read: SqlitePool,
    repo: SqliteEventRepository,
    /// Counts this process's appends; see [`Store::appends`].
    appended: tokio::sync::watch::Sender<u64>,
}

pub enum Store {
    Postgres(PgStore),
    Sqlite(SqliteStore),
}

/// Expands `$body` once per store with `$pool` bound to the pool for reads
/// (`read`) or writes (`write`); on PostgreSQL both are the one pool. `query`
/// is for public queries: PostgreSQL's query pool, SQLite's read pool.
macro_rules! on_store {
    ($store:expr, query $pool:ident => $body:expr) => {
        match $store {
            $crate::store::Store::Postgres(s) => {
                let $pool = &s.query;
                $body
            }
            $crate::store::Store::Sqlite(s) => {
                let $pool = &s.read;
                $body
            }
        }
    };
    ($store:expr, read $pool:ident => $body:expr) => {
        match $store {
            $crate::store::Store::Postgres(s) => {
                let $pool = &s.pool;
                $body
            }
            $crate::store::Store::Sqlite(s) => {
                let $pool = &s.read;
                $body
            }
        }
    };
    ($store:expr, write $pool:ident => $body:expr) => {
        match $store {
            $crate::store::Store::Postgres(s) => {
                let $pool = &s.pool;
                $body
            }
            $crate::store::Store::Sqlite(s) => {
                let $pool = &s.write;
                $body
            }
        }
    };
}
pub(crate) use on_store;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Postgres,
    Sqlite,
}

impl Store {
    /// Opens the store a `DATABASE_URL` names: `postgres://` or `postgresql://`
    /// for PostgreSQL, `sqlite://PATH` for a SQLite file (created if missing).
    pub async fn connect(url: &str, connections: u32) -> StoreResult<Self> {
        let connections = connections.max(1);
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let hosts = primary::Hosts::parse(url)?;
            let (primary, watcher_conn) = primary::Primary::find(hosts).await?;
            let open = |size: u32| {
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
            };
            let pool = open(connections).await.map_err(StoreError::classify)?;
            let query = open(QUERY_POOL_CONNECTIONS)
                .await
                .map_err(StoreError::classify)?;
            let watcher = tokio::spawn(
                primary
                    .clone()
                    .watch(vec![pool.clone(), query.clone()], watcher_conn),
            );
            let repo = PostgresEventRepository::new(pool.clone());
            let appender = postgres::PgAppender::start(pool.clone());
            Ok(Store::Postgres(PgStore {
                pool,
                appender,
                query,
                repo,
                appended: tokio::sync::watch::Sender::new(0),
                primary,
                _watcher: AbortOnDrop(watcher.abort_handle()),
            }))
        } else if url.starts_with("sqlite:") {
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
            let appender = sqlite::SqliteAppender::start(write.clone());
            Ok(Store::Sqlite(SqliteStore {
                write,
                read,
                repo,
                appender,
                appended: tokio::sync::watch::Sender::new(0),
            }))
        } else {
            Err(StoreError::BadUrl(format!(
                "DATABASE_URL must start with sqlite:// or postgres://, got {:?}",
                url.split(':').next().unwrap_or_default()
            )))
        }
    }

    fn appended(&self) -> &tokio::sync::watch::Sender<u64> {
        match self {
            Store::Postgres(s) => &s.appended,
            Store::Sqlite(s) => &s.appended,
        }
    }

    /// Changes after every batch of events this process appends (a count,
    /// not a position): what wakes a reader tailing the log in-process
    /// instead of polling it. Appends by other processes are not seen here
    /// (on PostgreSQL, `live::wake` carries them with LISTEN/NOTIFY).
    pub fn appends(&self) -> tokio::sync::watch::Receiver<u64> {
        self.appended().subscribe()
    }

    /// The database host in use (PostgreSQL: the one of `DATABASE_URL`'s
    /// hosts that qualifies now, `None` while none does; SQLite: the file).
    pub fn database_host(&self) -> Option<String> {
        match self {
            Store::Postgres(s) => s.primary.host().map(str::to_owned),
            Store::Sqlite(_) => Some("sqlite".to_owned()),
        }
    }

    /// The hosts `DATABASE_URL` names (PostgreSQL), for messages.
    pub fn database_hosts(&self) -> Vec<String> {
        match self {
            Store::Postgres(s) => s.primary.labels().into_iter().map(str::to_owned).collect(),
            Store::Sqlite(_) => Vec::new(),
        }
    }

    /// Changes when the PostgreSQL host in use changes or is lost (`None`
    /// on SQLite): what tells a connection held for long, such as a LISTEN,
    /// to move.
    pub fn host_changes(&self) -> Option<tokio::sync::watch::Receiver<Option<usize>>> {
        match self {
            Store::Postgres(s) => Some(s.primary.changes()),
            Store::Sqlite(_) => None,
        }
    }

    /// The PostgreSQL pool, for what only PostgreSQL has (a LISTEN
    /// connection, held for as long as it listens).
    pub fn postgres_pool(&self) -> Option<&PgPool> {
        match self {
            Store::Postgres(s) => Some(&s.pool),
            Store::Sqlite(_) => None,
        }
    }

    /// `pg_notify(channel, '')` on PostgreSQL (a no-op on SQLite), on the
    /// pool kept for public queries: a notification after an append never
    /// waits behind, or takes a connection from, the commands.
    pub async fn notify(&self, channel: &str) -> StoreResult<()> {
        if let Store::Postgres(s) = self {
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(channel)
                .execute(&s.query)
                .await
                .map_err(StoreError::classify)?;
        }
        Ok(())
    }

    pub fn kind(&self) -> StoreKind {
        match self {
            Store::Postgres(_) => StoreKind::Postgres,
            Store::Sqlite(_) => StoreKind::Sqlite,
        }
    }

    /// Applies the migrations of this store's dialect (idempotent), then, on
    /// PostgreSQL, the current bodies of our functions.
    pub async fn migrate(&self) -> StoreResult<()> {
        match self {
            Store::Postgres(s) => {
                sqlx::migrate!("./migrations/postgres").run(&s.pool).await?;
                postgres::install_functions(&s.pool).await?;
            }
            Store::Sqlite(s) => sqlx::migrate!("./migrations/sqlite").run(&s.write).await?,
        }
        Ok(())
    }

    /// Migrations this binary has that the database has not applied.
    pub async fn pending_migrations(&self) -> StoreResult<usize> {
        let migrator = match self {
            Store::Postgres(_) => sqlx::migrate!("./migrations/postgres"),
            Store::Sqlite(_) => sqlx::migrate!("./migrations/sqlite"),
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

    /// Events of one stream with a sequence above `after`, in order, through
    /// the cqrs-es repository of the store.
    pub async fn stream_events<A: Aggregate>(
        &self,
        aggregate_id: &str,
        after: usize,
    ) -> StoreResult<Vec<SerializedEvent>> {
        if after > 0 {
            return self.events_after(A::TYPE, aggregate_id, after).await;
        }
        retry_read(move || async move {
            let result = match self {
                Store::Postgres(s) => s.repo.get_events::<A>(aggregate_id).await,
                Store::Sqlite(s) => s.repo.get_events::<A>(aggregate_id).await,
            };
            result.map_err(StoreError::from_persistence)
        })
        .await
    }

    /// What `get_last_events` of the cqrs-es repositories returns, with the
    /// sequence bound as a parameter: the crates format it into the SQL text,
    /// so every call is a new statement to parse and plan, and the prepared
    /// statement cache of each connection churns.
    async fn events_after(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        after: usize,
    ) -> StoreResult<Vec<SerializedEvent>> {
        const SQL: &str =
            "SELECT sequence, event_type, event_version, payload, metadata FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence > $3 ORDER BY sequence";
        type Row = (i64, String, String, serde_json::Value, serde_json::Value);
        let rows: Vec<Row> = retry_read(move || async move {
            on_store!(self, read pool => {
                sqlx::query_as(SQL)
                    .bind(aggregate_type)
                    .bind(aggregate_id)
                    .bind(after as i64)
                    .fetch_all(pool)
                    .await
                    .map_err(StoreError::classify)
            })
        })
        .await?;
        Ok(rows
            .into_iter()
            .map(|(sequence, event_type, event_version, payload, metadata)| {
                SerializedEvent::new(
                    aggregate_id.to_owned(),
                    sequence.max(0) as usize,
                    aggregate_type.to_owned(),
                    event_type,
                    event_version,
                    payload,
                    metadata,
                )
            })
            .collect())
    }

    /// `(position, recorded_at_us)` of every event in global order (diagnostics).
    pub async fn positions(&self) -> StoreResult<Vec<(i64, i64)>> {
        on_store!(self, read pool => {
            sqlx::query_as("SELECT position, recorded_at_us FROM events ORDER BY position")
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    /// Runs one statement as it is (tools and benchmarks: never with input).
    pub async fn execute_raw(&self, sql: &str) -> StoreResult<u64> {
        on_store!(self, write pool => {
            let done = sqlx::query(sql).execute(pool).await.map_err(StoreError::classify)?;
            Ok(done.rows_affected())
        })
    }

    /// Number of events in the log (for tests and diagnostics).
    pub async fn count_events(&self) -> StoreResult<i64> {
        on_store!(self, read pool => {
            let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events")
                .fetch_one(pool)
                .await
                .map_err(StoreError::classify)?;
            Ok(count)
        })
    }
}

impl Store {
    /// Appends the batch in one transaction. Returns `Conflict` (and writes
    /// nothing) if any stream already has an event at one of the sequences.
    pub async fn append(&self, batch: &AppendBatch) -> StoreResult<AppendOutcome> {
        if batch.events.len() > MAX_EVENTS_PER_BATCH {
            return Err(StoreError::TooLarge(format!(
                "a batch of {} events; one transaction holds at most {MAX_EVENTS_PER_BATCH}",
                batch.events.len()
            )));
        }
        if let Store::Postgres(s) = self {
            if s.primary.host().is_none() {
                // No host accepts writes now (a failover under way): say so
                // at once rather than after the pool's acquire timeout.
                return Err(StoreError::Unavailable(
                    "no database host accepts writes now".into(),
                ));
            }
        }
        let document = document::Document::of(batch);
        let outcome = match self.write_document(&document, batch.rows_only).await {
            Err(StoreError::ConnectionLost(why)) => match (self, batch.events.first()) {
                (Store::Postgres(s), Some(first)) if !batch.rows_only => {
                    postgres::settle(&s.pool, &s.primary, &document.to_json()?, first, why).await?
                }
                (_, _) => return Err(StoreError::ConnectionLost(why)),
            },
            written => written?,
        };
        if outcome == AppendOutcome::Appended && !batch.events.is_empty() {
            metrics::counter!("events_appended_total").increment(batch.events.len() as u64);
            self.appended().send_modify(|n| *n = n.wrapping_add(1));
        }
        Ok(outcome)
    }

    /// Writes one append document in one transaction, through the store's
    /// own writer: a group-committing appender on either store. On
    /// PostgreSQL the projector's batches (rows only, a checkpoint to move)
    /// go alone, with their commit not waiting for the disk.
    async fn write_document(
        &self,
        document: &document::Document<'_>,
        rows_only: bool,
    ) -> StoreResult<AppendOutcome> {
        match self {
            Store::Postgres(s) if rows_only || document.checkpoint.is_some() => {
                postgres::append(&s.pool, &document.to_json()?, rows_only).await
            }
            Store::Postgres(s) => {
                s.appender
                    .append(document.to_json()?, document.events.len())
                    .await
            }
            Store::Sqlite(s) => s.appender.append(sqlite::SqliteJob::of(document)?).await,
        }
    }
}
