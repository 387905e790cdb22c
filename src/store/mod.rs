//! Persistence, split by concern, on PostgreSQL (production) or SQLite
//! (the embedded default).
//!
//! [`Store`] opens one database and hands out its **ports**, one per
//! concern; each wing of the service receives the ports it uses, never the
//! whole database. A port is a trait (`...Port`), implemented for each
//! backend (`postgres/`, `sqlite/`), which is chosen once, when
//! [`Store::connect`] reads `DATABASE_URL`; a wing holds the port's handle
//! (the name in the first column), which adds what does not depend on the
//! database (reading again after a lost connection, parsing rows) and can
//! be made over a fake in a test (`holds.rs` has one):
//!
//! | port | owns | used by |
//! |---|---|---|
//! | [`EventLog`] (`log/`) | the events: append (with the rows they produce), streams, the log show by show, checkpoints, notifications | the round, the projector, replay, the live feed, webhooks, audit |
//! | [`Shows`] (`shows.rs`) | show definitions, seat and shard rows | the catalog, availability |
//! | [`Holds`] (`holds.rs`) | hold records | holds, checkout, the sweeper |
//! | [`IdempotencyKeys`] (`idempotency.rs`) | buyers' keys | holds, the sweeper |
//! | [`Checkouts`] (`checkouts.rs`) | checkout records | checkout recovery |
//! | [`WebhookOutbox`] (`webhooks.rs`) | endpoints, deliveries, claims | webhooks |
//! | [`ProjectionTables`] (`projection_tables.rs`, `tables.rs`, `quiesce.rs`, `bulk.rs`) | every read model at once: dump, reset, write back | replay, verify |
//! | [`TicketKeys`] (`ticket_keys.rs`) | the keys tickets' codes are signed with | tickets |
//! | [`Ledger`] (`ledger.rs`) | the payment simulator's payments and refunds | the simulator |
//! | [`Database`] (`database.rs`) | the connection itself: migrations, health, hosts | the binary, `/health` |
//!
//! Appends are our own: one transaction writes the events of every stream a
//! command touched, at the sequences it decided on, together with the
//! read-model rows those events produce (see [`batch`]). A duplicate
//! `(aggregate_type, aggregate_id, sequence)` anywhere in the batch refuses
//! the whole batch, which is what makes a multi-seat hold all or nothing;
//! and a projection written in the same transaction can never be left
//! behind by a crash. Each backend writes a batch's rows in one place:
//! `sql/postgres/booking_apply.sql`, `sqlite/append.rs` (and, for replay's
//! in-memory fold, `tables.rs`). The log is the `events` table of
//! postgres-es and sqlite-es (`tests/behaviour/cqrs.rs` loads it through
//! their repositories).
//!
//! Only the files of this folder know which database is behind a port,
//! and nothing dispatches on the backend per method. A concern's file
//! holds its port's trait and handle, and the statements both dialects
//! share (`$n` parameters work in both) written once over any pool
//! ([`sql::SqlPool`]). Where every statement is shared, the port is
//! implemented once for every backend's [`sql::Pools`] (which pool reads,
//! writes and serves public queries); where a dialect differs, the backend
//! answers the piece that differs from its own folder (`WebhookDialect`'s
//! claim, `LogDialect`'s columns, `ShowsDialect`'s changed-seat
//! read, `QuiesceDialect`'s lock) or implements the whole port there (the
//! log's appends, `EventLogPort`; the connection, `DatabasePort`). A change
//! for one dialect (Citus, say) lands in that dialect's folder: in a piece
//! it answers, or by implementing a port there in place of the shared one.

pub(crate) mod batch;
mod bulk;
mod checkouts;
mod database;
mod document;
mod error;
mod flat;
mod holds;
mod idempotency;
pub(crate) mod ledger;
pub(crate) mod log;
pub(crate) mod postgres;
mod projection_tables;
mod quiesce;
mod shows;
mod sql;
pub(crate) mod sqlite;
mod tables;
mod ticket_keys;
mod webhooks;

use std::sync::Arc;
use std::time::Duration;

pub use batch::{
    AppendBatch, AppendOutcome, CheckpointMove, IdempotencyKeyRow, NewEvent, MAX_EVENTS_PER_BATCH,
};
pub use checkouts::{Checkouts, CheckoutsPort, WaitingCheckout};
pub use database::{Database, DatabasePort, StoreKind};
use error::retry_read;
pub use error::{
    StoreError, StoreResult, PING_IDLE_CONNECTIONS_AFTER, READ_RETRIES_ON_CONNECTION_LOSS,
};
pub use holds::{HoldRecord, Holds, HoldsPort};
pub use idempotency::{IdempotencyEntry, IdempotencyKeys, IdempotencyPort};
pub use ledger::{Ledger, LedgerPort};
pub use log::{Checkpoint, EventLog, EventLogPort, LogCursor, LogEvent, LogFilter};
pub use postgres::citus::{table_by_buyer, tables_by_show};
use postgres::PgBackend;
pub use projection_tables::{ProjectionTables, ProjectionTablesPort, QuiesceDialect};
pub use quiesce::{Quiesced, QuiescedPort};
pub use shows::{PoolFigures, SeatChange, ShowInsert, Shows, ShowsPort, WHOLE_SHOW};
use sqlite::SqliteBackend;
pub use tables::{Projection, Tables};
pub use ticket_keys::{TicketKeyRow, TicketKeys, TicketKeysPort};
pub use webhooks::{
    AttemptRecord, AttemptVerdict, ClaimedDelivery, DeliveryId, DeliveryRow, DeliveryStatus,
    EndpointId, EndpointRow, NewDelivery, RetryOutcome, WebhookEventType, WebhookOutbox,
    WebhookOutboxPort,
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

/// Declares the handle of a port that is a trait: what a wing holds, cheap
/// to clone, over the implementation of the backend chosen at start
/// (`postgres/`, `sqlite/`) or, in a test, a fake. The handle's methods (in
/// the port's own file) add what does not depend on the database, such as
/// reading again after a lost connection.
macro_rules! handle {
    ($(#[$doc:meta])* $name:ident: $port:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            port: std::sync::Arc<dyn $port>,
        }

        impl $name {
            pub fn new(port: std::sync::Arc<dyn $port>) -> Self {
                Self { port }
            }
        }
    };
}
pub(crate) use handle;

/// One database, opened once per process: what hands out the ports. The
/// binary's wiring (`app.rs`) and tools hold it; a wing holds only the
/// ports it is given.
#[derive(Clone)]
pub struct Store {
    handles: Handles,
}

/// The handles of the ports that are traits, made once at start over the
/// backend `DATABASE_URL` chose.
#[derive(Clone)]
struct Handles {
    log: EventLog,
    shows: Shows,
    holds: Holds,
    idempotency_keys: IdempotencyKeys,
    ticket_keys: TicketKeys,
    checkouts: Checkouts,
    webhooks: WebhookOutbox,
    ledger: Ledger,
    projections: ProjectionTables,
    database: Database,
}

impl Handles {
    fn over<B>(backend: Arc<B>) -> Self
    where
        B: EventLogPort
            + ShowsPort
            + HoldsPort
            + IdempotencyPort
            + TicketKeysPort
            + CheckoutsPort
            + WebhookOutboxPort
            + LedgerPort
            + ProjectionTablesPort
            + DatabasePort
            + 'static,
    {
        let log = EventLog::new(backend.clone());
        Self {
            log: log.clone(),
            shows: Shows::new(backend.clone()),
            holds: Holds::new(backend.clone()),
            idempotency_keys: IdempotencyKeys::new(backend.clone()),
            ticket_keys: TicketKeys::new(backend.clone()),
            checkouts: Checkouts::new(backend.clone()),
            webhooks: WebhookOutbox::new(backend.clone()),
            ledger: Ledger::new(backend.clone()),
            projections: ProjectionTables::new(backend.clone(), log.clone()),
            database: Database::new(backend),
        }
    }
}

impl Store {
    /// Opens the store a `DATABASE_URL` names: `postgres://` or `postgresql://`
    /// for PostgreSQL, `sqlite://PATH` for a SQLite file (created if missing).
    pub async fn connect(url: &str, connections: u32) -> StoreResult<Self> {
        let connections = connections.max(1);
        let handles = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Handles::over(Arc::new(PgBackend::connect(url, connections).await?))
        } else if url.starts_with("sqlite:") {
            Handles::over(Arc::new(SqliteBackend::connect(url, connections).await?))
        } else {
            return Err(StoreError::BadUrl(format!(
                "DATABASE_URL must start with sqlite:// or postgres://, got {:?}",
                url.split(':').next().unwrap_or_default()
            )));
        };
        Ok(Self { handles })
    }

    pub fn log(&self) -> EventLog {
        self.handles.log.clone()
    }

    pub fn shows(&self) -> Shows {
        self.handles.shows.clone()
    }

    pub fn holds(&self) -> Holds {
        self.handles.holds.clone()
    }

    pub fn idempotency_keys(&self) -> IdempotencyKeys {
        self.handles.idempotency_keys.clone()
    }

    pub fn ticket_keys(&self) -> TicketKeys {
        self.handles.ticket_keys.clone()
    }

    pub fn checkouts(&self) -> Checkouts {
        self.handles.checkouts.clone()
    }

    pub fn webhooks(&self) -> WebhookOutbox {
        self.handles.webhooks.clone()
    }

    pub fn projections(&self) -> ProjectionTables {
        self.handles.projections.clone()
    }

    pub fn database(&self) -> Database {
        self.handles.database.clone()
    }

    /// The payment simulator's ledger.
    pub fn ledger(&self) -> Ledger {
        self.handles.ledger.clone()
    }

    pub fn kind(&self) -> StoreKind {
        self.handles.database.kind()
    }
}
