//! What can go wrong with the database, classified as the HTTP edge needs it:
//! a database that is away or refusing work now (503 `busy`, retry), a lost
//! connection (a read is retried once on another), or a real error.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

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
            READ_ONLY_SQLSTATE => Some(Self::Refusing),
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

pub(super) fn since_epoch_us() -> u64 {
    EPOCH.elapsed().as_micros().max(1) as u64
}

/// Records that a connection was lost: the server may have gone away, so
/// every pooled connection idle since before now is pinged before its next
/// use, and a dead one is dropped instead of failing a request.
pub(super) fn note_connection_loss() {
    LAST_CONNECTION_LOSS_US.fetch_max(since_epoch_us(), Ordering::Relaxed);
    CONNECTION_TROUBLE.notify_waiters();
}

/// Wakes the stores' primary watchers (`primary::Primary::watch`) when a
/// connection was lost or a write refused as read-only anywhere in the
/// process: the primary may have changed, and the watcher asks at once
/// instead of at its next check. Process-wide like the loss above: a
/// watcher woken for another store's trouble costs one query.
static CONNECTION_TROUBLE: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// After a write was refused as read-only, pooled connections are checked
/// for this long before use (`SHOW transaction_read_only`), and dropped if
/// their server no longer takes writes: the refused connection itself went
/// back to the pool, and so may others to the demoted host, opened too late
/// to be older than the switch the watcher makes. Long enough for the
/// watcher to have switched (`PRIMARY_CHECK_INTERVAL` plus a search).
pub const RECHECK_AFTER_READ_ONLY: Duration = Duration::from_secs(5);

/// When a write was last refused as read-only, in microseconds since
/// [`EPOCH`] (0: never). Process-wide, like the loss above.
static LAST_READ_ONLY_US: AtomicU64 = AtomicU64::new(0);

/// Whether pooled connections are to be checked for writability before use
/// now (see [`RECHECK_AFTER_READ_ONLY`]).
pub(super) fn recheck_writable() -> bool {
    let last = LAST_READ_ONLY_US.load(Ordering::Relaxed);
    last > 0 && since_epoch_us().saturating_sub(last) < RECHECK_AFTER_READ_ONLY.as_micros() as u64
}

/// Returns at the next connection loss or read-only refusal in the process.
pub(super) async fn wait_for_connection_trouble() {
    CONNECTION_TROUBLE.notified().await;
}

/// Whether a pooled connection idle for `idle_for` must be pinged before use.
pub(super) fn needs_ping(idle_for: Duration) -> bool {
    needs_ping_at(
        idle_for,
        LAST_CONNECTION_LOSS_US.load(Ordering::Relaxed),
        since_epoch_us(),
    )
}

/// The rule of [`needs_ping`] at `now_us`, with the last loss at `lost_us`
/// (0: none seen), both in microseconds since the process's epoch.
fn needs_ping_at(idle_for: Duration, lost_us: u64, now_us: u64) -> bool {
    if idle_for >= PING_IDLE_CONNECTIONS_AFTER {
        return true;
    }
    // Idle since before the last loss seen.
    lost_us > 0 && now_us.saturating_sub(idle_for.as_micros() as u64) <= lost_us
}

impl StoreError {
    pub fn classify(err: sqlx::Error) -> Self {
        match Unavailability::of(&err) {
            Some(Unavailability::ConnectionLost) => {
                note_connection_loss();
                StoreError::ConnectionLost(err.to_string())
            }
            Some(Unavailability::Refusing) => {
                if is_read_only(&err) {
                    LAST_READ_ONLY_US.fetch_max(since_epoch_us(), Ordering::Relaxed);
                    CONNECTION_TROUBLE.notify_waiters();
                }
                StoreError::Unavailable(err.to_string())
            }
            None => StoreError::Database(err),
        }
    }
}

/// read_only_sql_transaction: the server is a standby, or a primary being
/// demoted.
fn is_read_only(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.code().as_deref() == Some(READ_ONLY_SQLSTATE))
}

const READ_ONLY_SQLSTATE: &str = "25006";

/// Runs a read, and runs it again (at most [`READ_RETRIES_ON_CONNECTION_LOSS`]
/// times) if its connection was lost: after a server restart the first use
/// of a pooled connection fails, and a read can safely be repeated.
pub(super) async fn retry_read<T, F, Fut>(read: F) -> StoreResult<T>
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

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::str::FromStr;

    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::SqlitePool;

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
    fn an_administrator_shutdown_is_a_lost_connection() {
        let err = StoreError::classify(coded("57P01"));
        assert!(matches!(err, StoreError::ConnectionLost(_)), "{err:?}");
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
    fn a_read_only_refusal_has_pooled_connections_checked_before_use() {
        let err = StoreError::classify(coded("25006"));
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        assert!(recheck_writable());
    }

    #[test]
    fn other_database_errors_stay_errors() {
        for code in ["23505", "42601", "40001", "BK409", "19", "1"] {
            let err = StoreError::classify(coded(code));
            assert!(matches!(err, StoreError::Database(_)), "{code}: {err:?}");
        }
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
        assert!(needs_ping_at(PING_IDLE_CONNECTIONS_AFTER, 0, 1_000));
        assert!(!needs_ping_at(Duration::from_millis(50), 0, 1_000_000));
        // A loss at 1 s; now 1.005 s: idle since before the loss, and since after it.
        assert!(needs_ping_at(
            Duration::from_millis(50),
            1_000_000,
            1_005_000
        ));
        assert!(!needs_ping_at(
            Duration::from_micros(10),
            1_000_000,
            1_005_000
        ));
    }
}
