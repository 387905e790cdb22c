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
mod checkouts;
mod document;
mod holds;
mod log;
mod payments;
mod postgres;
mod quiesce;
mod shows;
mod sqlite;
mod tables;

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use cqrs_es::persist::{PersistedEventRepository, PersistenceError, SerializedEvent};
use cqrs_es::Aggregate;
use postgres_es::PostgresEventRepository;
use sqlite_es::SqliteEventRepository;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};

pub use batch::{
    AppendBatch, AppendOutcome, CheckpointMove, IdempotencyKeyRow, NewEvent, MAX_EVENTS_PER_BATCH,
};
pub use holds::{HoldRecord, IdempotencyEntry};
pub use log::{LogEvent, LogFilter};
pub use payments::{LedgerCharge, SimCharge};
pub use quiesce::Quiesced;
pub use shows::{PoolFigures, ShowInsert};
pub use tables::{Projection, Tables};

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

/// Times a read whose connection was lost (the server restarted, crashed
/// or was stopped) is run again on another connection. Only reads: an
/// append whose connection broke may have committed, so it answers 503 and
/// the client retries (with its idempotency key; commands reload).
pub const READ_RETRIES_ON_CONNECTION_LOSS: usize = 1;

/// A pooled PostgreSQL connection idle at least this long is pinged before
/// use (`before_acquire`): the server may have restarted meanwhile. Under
/// load connections are idle for far less, so commands keep their one
/// round trip; see also [`note_connection_loss`].
pub const PING_IDLE_CONNECTIONS_AFTER: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database did not answer in time, cannot be reached or refuses
    /// work for now (starting, shutting down, read-only, out of resources).
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The connection broke under the statement (the server stopped,
    /// restarted or crashed; the network failed). Also 503; a read is run
    /// again on another connection ([`READ_RETRIES_ON_CONNECTION_LOSS`]).
    #[error("database connection lost: {0}")]
    ConnectionLost(String),
    #[error("bad database url: {0}")]
    BadUrl(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A write larger than the store can take in one transaction.
    #[error("too large: {0}")]
    TooLarge(String),
}

/// Why the database cannot do the work now, if that is what an error says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unavailability {
    /// The connection is gone: [`StoreError::ConnectionLost`].
    ConnectionLost,
    /// The database is there but refuses or cannot take the work for now:
    /// [`StoreError::Unavailable`].
    Refusing,
}

impl Unavailability {
    fn of(err: &sqlx::Error) -> Option<Self> {
        match err {
            sqlx::Error::Io(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => Some(Self::ConnectionLost),
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => Some(Self::Refusing),
            sqlx::Error::Database(db) => Self::of_code(db.code()?.as_ref()),
            _ => None,
        }
    }

    /// A PostgreSQL SQLSTATE is five characters; sqlx gives a SQLite error's
    /// (extended) result code as a decimal number of at most four digits.
    fn of_code(code: &str) -> Option<Self> {
        if code.len() == 5 {
            Self::of_sqlstate(code)
        } else {
            Self::of_sqlite_code(code.parse().ok()?)
        }
    }

    fn of_sqlstate(code: &str) -> Option<Self> {
        match code {
            // cannot_connect_now: starting up, shutting down, in recovery.
            "57P03" => Some(Self::Refusing),
            // admin_shutdown, crash_shutdown, database_dropped, idle session
            // timeout: the server ended this session.
            _ if code.starts_with("57P") => Some(Self::ConnectionLost),
            // connection_exception and its subclasses.
            _ if code.starts_with("08") => Some(Self::ConnectionLost),
            // read_only_sql_transaction: a standby, or a primary being demoted.
            "25006" => Some(Self::Refusing),
            // insufficient_resources: disk full, out of memory, too many connections.
            _ if code.starts_with("53") => Some(Self::Refusing),
            _ => None,
        }
    }

    fn of_sqlite_code(code: i64) -> Option<Self> {
        const SQLITE_BUSY: i64 = 5;
        const SQLITE_LOCKED: i64 = 6;
        const SQLITE_READONLY: i64 = 8;
        const SQLITE_IOERR: i64 = 10;
        const SQLITE_FULL: i64 = 13;
        const SQLITE_CANTOPEN: i64 = 14;
        match code & 0xff {
            SQLITE_BUSY | SQLITE_LOCKED | SQLITE_READONLY | SQLITE_IOERR | SQLITE_FULL
            | SQLITE_CANTOPEN => Some(Self::Refusing),
            _ => None,
        }
    }
}

/// When a connection was last seen lost, in microseconds since [`EPOCH`]
/// (0: never). Process-wide: a loss seen by one store only costs another
/// store's idle connections one ping each.
static LAST_CONNECTION_LOSS_US: AtomicU64 = AtomicU64::new(0);
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn since_epoch_us() -> u64 {
    EPOCH.elapsed().as_micros().max(1) as u64
}

/// Records that a connection was lost: the server may have gone away, so
/// every pooled connection idle since before now is pinged before its next
/// use, and a dead one is dropped instead of failing a request.
fn note_connection_loss() {
    LAST_CONNECTION_LOSS_US.fetch_max(since_epoch_us(), Ordering::Relaxed);
}

/// Whether a pooled connection idle for `idle_for` must be pinged before use.
fn needs_ping(idle_for: Duration) -> bool {
    if idle_for >= PING_IDLE_CONNECTIONS_AFTER {
        return true;
    }
    let lost = LAST_CONNECTION_LOSS_US.load(Ordering::Relaxed);
    // Idle since before the last loss seen.
    lost > 0 && since_epoch_us().saturating_sub(idle_for.as_micros() as u64) <= lost
}

impl StoreError {
    pub fn classify(err: sqlx::Error) -> Self {
        match Unavailability::of(&err) {
            Some(Unavailability::ConnectionLost) => {
                note_connection_loss();
                StoreError::ConnectionLost(err.to_string())
            }
            Some(Unavailability::Refusing) => StoreError::Unavailable(err.to_string()),
            None => StoreError::Database(err),
        }
    }

    /// The repositories of postgres-es and sqlite-es wrap sqlx errors: only
    /// `Io` and `Tls` as `ConnectionError`, everything else (a full pool, a
    /// terminated session) as `UnknownError`. A wrapped sqlx error is
    /// classified like any other; only what is not one is corrupt data.
    fn from_persistence(err: PersistenceError) -> Self {
        match err {
            PersistenceError::ConnectionError(e) => match e.downcast::<sqlx::Error>() {
                Ok(sqlx) => match StoreError::classify(*sqlx) {
                    StoreError::Database(other) => StoreError::Unavailable(other.to_string()),
                    classified => classified,
                },
                Err(e) => StoreError::Unavailable(e.to_string()),
            },
            PersistenceError::UnknownError(e) => match e.downcast::<sqlx::Error>() {
                Ok(sqlx) => StoreError::classify(*sqlx),
                Err(e) => StoreError::Corrupt(e.to_string()),
            },
            other => StoreError::Corrupt(other.to_string()),
        }
    }
}

/// Runs a read, and runs it again (at most [`READ_RETRIES_ON_CONNECTION_LOSS`]
/// times) if its connection was lost: after a server restart the first use
/// of a pooled connection fails, and a read can safely be repeated.
async fn retry_read<T, F, Fut>(read: F) -> StoreResult<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = StoreResult<T>>,
{
    let mut retries = 0;
    loop {
        match read().await {
            Err(StoreError::ConnectionLost(cause)) if retries < READ_RETRIES_ON_CONNECTION_LOSS => {
                tracing::info!(%cause, "a read lost its connection; reading again");
                retries += 1;
            }
            other => return other,
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

pub struct PgStore {
    pool: PgPool,
    /// Public queries only: see `QUERY_POOL_CONNECTIONS`.
    query: PgPool,
    repo: PostgresEventRepository,
}

pub struct SqliteStore {
    /// The one connection that writes: SQLite has a single writer, and
    /// queueing writers here (FIFO) beats SQLite's sleep-and-retry busy handler.
    write: SqlitePool,
    /// Appends go through one task that commits them in groups.
    appender: sqlite::SqliteAppender,
    read: SqlitePool,
    repo: SqliteEventRepository,
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
            let options =
                PgConnectOptions::from_str(url).map_err(|e| StoreError::BadUrl(e.to_string()))?;
            let open = |size: u32| {
                PgPoolOptions::new()
                    .max_connections(size)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    // A ping on every acquire doubles the round trips of a short
                    // command; a dead connection surfaces as an error instead.
                    .test_before_acquire(false)
                    // ... except for one that may have outlived its server.
                    .before_acquire(|conn, meta| {
                        Box::pin(async move {
                            if !needs_ping(meta.idle_for) {
                                return Ok(true);
                            }
                            Ok(sqlx::Connection::ping(conn).await.is_ok())
                        })
                    })
                    .connect_with(options.clone())
            };
            let pool = open(connections).await.map_err(StoreError::classify)?;
            let query = open(QUERY_POOL_CONNECTIONS)
                .await
                .map_err(StoreError::classify)?;
            let repo = PostgresEventRepository::new(pool.clone());
            Ok(Store::Postgres(PgStore { pool, query, repo }))
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
            }))
        } else {
            Err(StoreError::BadUrl(format!(
                "DATABASE_URL must start with sqlite:// or postgres://, got {:?}",
                url.split(':').next().unwrap_or_default()
            )))
        }
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
        let outcome = self
            .write_document(&document::Document::of(batch), batch.rows_only)
            .await?;
        if outcome == AppendOutcome::Appended && !batch.events.is_empty() {
            metrics::counter!("events_appended_total").increment(batch.events.len() as u64);
        }
        Ok(outcome)
    }

    /// Writes one append document in one transaction, through the store's
    /// own writer: `booking_append` on PostgreSQL, the group-committing
    /// appender on SQLite.
    async fn write_document(
        &self,
        document: &document::Document<'_>,
        rows_only: bool,
    ) -> StoreResult<AppendOutcome> {
        match self {
            Store::Postgres(s) => postgres::append(&s.pool, &document.to_json()?, rows_only).await,
            Store::Sqlite(s) => s.appender.append(sqlite::SqliteJob::of(document)?).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    /// A database error with a given code, as a driver reports it.
    #[derive(Debug)]
    struct Coded(&'static str);

    impl std::fmt::Display for Coded {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "error {}", self.0)
        }
    }

    impl std::error::Error for Coded {}

    impl sqlx::error::DatabaseError for Coded {
        fn message(&self) -> &str {
            "terminating connection due to administrator command"
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed(self.0))
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    fn coded(code: &'static str) -> sqlx::Error {
        sqlx::Error::Database(Box::new(Coded(code)))
    }

    fn is_503(err: &StoreError) -> bool {
        matches!(
            err,
            StoreError::Unavailable(_) | StoreError::ConnectionLost(_)
        )
    }

    #[test]
    fn a_full_pool_inside_a_repository_load_is_unavailable_not_corrupt() {
        let err = StoreError::from_persistence(PersistenceError::UnknownError(Box::new(
            sqlx::Error::PoolTimedOut,
        )));
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    }

    #[test]
    fn an_administrator_shutdown_is_a_lost_connection() {
        let err = StoreError::classify(coded("57P01"));
        assert!(matches!(err, StoreError::ConnectionLost(_)), "{err:?}");
        let wrapped =
            StoreError::from_persistence(PersistenceError::UnknownError(Box::new(coded("57P01"))));
        assert!(
            matches!(wrapped, StoreError::ConnectionLost(_)),
            "{wrapped:?}"
        );
    }

    #[test]
    fn a_database_that_cannot_take_work_now_is_503() {
        for code in ["57P02", "57P03", "25006", "53300", "53100", "08006"] {
            assert!(is_503(&StoreError::classify(coded(code))), "{code}");
        }
        // SQLite: BUSY, LOCKED, READONLY, IOERR, FULL, CANTOPEN and their
        // extended codes (BUSY_SNAPSHOT, IOERR_FSYNC).
        for code in ["5", "6", "8", "10", "13", "14", "517", "1034"] {
            assert!(is_503(&StoreError::classify(coded(code))), "sqlite {code}");
        }
        for err in [
            sqlx::Error::PoolClosed,
            sqlx::Error::WorkerCrashed,
            sqlx::Error::Protocol("unexpected message".into()),
            sqlx::Error::Io(std::io::ErrorKind::BrokenPipe.into()),
            sqlx::Error::Io(std::io::ErrorKind::ConnectionReset.into()),
        ] {
            assert!(is_503(&StoreError::classify(err)));
        }
    }

    #[test]
    fn other_database_errors_stay_errors() {
        for code in ["23505", "42601", "40001", "BK409", "19", "1"] {
            let err = StoreError::classify(coded(code));
            assert!(matches!(err, StoreError::Database(_)), "{code}: {err:?}");
        }
        let err = StoreError::from_persistence(PersistenceError::UnknownError(Box::new(
            serde_json::from_str::<u8>("x").unwrap_err(),
        )));
        assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    }

    /// How sqlx reports a real SQLite error's code: a write on a read-only
    /// connection is SQLITE_READONLY, "8".
    #[tokio::test]
    async fn sqlite_reports_its_result_code_as_a_number() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("db").display());
        let options = SqliteConnectOptions::from_str(&url)
            .unwrap()
            .create_if_missing(true);
        let write = SqlitePool::connect_with(options.clone()).await.unwrap();
        sqlx::query("CREATE TABLE t (x)")
            .execute(&write)
            .await
            .unwrap();
        let read = SqlitePool::connect_with(options.read_only(true))
            .await
            .unwrap();
        let err = sqlx::query("INSERT INTO t VALUES (1)")
            .execute(&read)
            .await
            .unwrap_err();
        assert_eq!(
            err.as_database_error().and_then(|e| e.code()).as_deref(),
            Some("8")
        );
        assert!(matches!(
            StoreError::classify(err),
            StoreError::Unavailable(_)
        ));
    }

    #[test]
    fn a_connection_idle_since_a_loss_is_pinged() {
        assert!(needs_ping(PING_IDLE_CONNECTIONS_AFTER));
        note_connection_loss();
        std::thread::sleep(Duration::from_millis(5));
        // Idle since before the loss, and since after it.
        assert!(needs_ping(Duration::from_millis(50)));
        assert!(!needs_ping(Duration::from_micros(10)));
    }
}
