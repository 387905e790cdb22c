//! Persistence, split by concern, on PostgreSQL (production) or SQLite
//! (the embedded default).
//!
//! [`Store`] opens one database and hands out its **ports**, one per
//! concern; each wing of the service receives the ports it uses, never the
//! whole database:
//!
//! | port | owns | used by |
//! |---|---|---|
//! | [`EventLog`] (`log/`) | the events: append (with the rows they produce), streams, the log in global order, checkpoints, notifications | the round, the projector, replay, the live feed, webhooks, audit |
//! | [`Shows`] (`shows.rs`) | show definitions, seat and shard rows | the catalog, availability |
//! | [`Holds`] (`holds.rs`) | hold records | holds, checkout, the sweeper |
//! | [`IdempotencyKeys`] (`idempotency.rs`) | buyers' keys | holds, the sweeper |
//! | [`Checkouts`] (`checkouts.rs`) | checkout records | checkout recovery |
//! | [`WebhookOutbox`] (`webhooks.rs`) | endpoints, deliveries, claims | webhooks |
//! | [`ProjectionTables`] (`tables.rs`, `quiesce.rs`, `bulk.rs`) | every read model at once: dump, reset, write back | replay, verify |
//! | [`Database`] (`database.rs`) | the connection itself: migrations, health, hosts | the binary, `/health` |
//!
//! The payment simulator's ledger is a port of the same kind beside the
//! simulator (`payment::ledger`).
//!
//! Streams are loaded through the cqrs-es repositories of postgres-es and
//! sqlite-es. Appends are our own: one transaction writes the events of every
//! stream a command touched, at the sequences it decided on, together with
//! the read-model rows those events produce (see [`batch`]). A
//! duplicate `(aggregate_type, aggregate_id, sequence)` anywhere in the batch
//! refuses the whole batch, which is what makes a multi-seat hold all or
//! nothing; and a projection written in the same transaction can never be
//! left behind by a crash. Each backend writes a batch's rows in one place:
//! `sql/postgres/booking_apply.sql`, `log/sqlite.rs` (and, for replay's
//! in-memory fold, `tables.rs`).
//!
//! Only the files of this folder (and the ledger) know which database is
//! behind a port: both share their SQL where the dialects agree (`$n`
//! parameters work in both); the [`on_store!`] macro expands one body for
//! each pool type.

pub(crate) mod batch;
mod bulk;
mod checkouts;
mod database;
mod document;
mod error;
mod flat;
mod holds;
mod idempotency;
pub(crate) mod log;
mod primary;
mod quiesce;
mod shows;
mod tables;
mod ticket_keys;
mod webhooks;

use std::sync::Arc;
use std::time::Duration;

pub use batch::{
    AppendBatch, AppendOutcome, CheckpointMove, IdempotencyKeyRow, NewEvent, MAX_EVENTS_PER_BATCH,
};
pub use checkouts::WaitingCheckout;
pub(crate) use database::Backend;
pub use database::{Database, StoreKind};
use error::retry_read;
pub use error::{
    StoreError, StoreResult, PING_IDLE_CONNECTIONS_AFTER, READ_RETRIES_ON_CONNECTION_LOSS,
};
pub use holds::HoldRecord;
pub use idempotency::IdempotencyEntry;
pub use log::{EventLog, LogEvent, LogFilter, LogScan};
pub use quiesce::Quiesced;
pub use shows::{PoolFigures, SeatChange, ShowInsert, WHOLE_SHOW};
pub use tables::{Projection, Tables};
pub use ticket_keys::TicketKeyRow;
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

/// Declares a port: a handle on the one database, cheap to clone, whose
/// methods (in the port's own file) are the only queries of its concern.
macro_rules! port {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            db: std::sync::Arc<$crate::store::Backend>,
        }

        impl $name {
            pub(crate) fn on(db: std::sync::Arc<$crate::store::Backend>) -> Self {
                Self { db }
            }

            /// The database behind the port (for `on_store!`).
            pub(crate) fn backend(&self) -> &$crate::store::Backend {
                &self.db
            }
        }
    };
}
pub(crate) use port;

/// Expands `$body` once per backend with `$pool` bound to the pool for reads
/// (`read`) or writes (`write`); on PostgreSQL both are the one pool. `query`
/// is for public queries: PostgreSQL's query pool, SQLite's read pool.
/// `$store` is a port (or the [`Backend`]).
macro_rules! on_store {
    ($store:expr, query $pool:ident => $body:expr) => {
        match $store.backend() {
            $crate::store::Backend::Postgres(s) => {
                let $pool = &s.query;
                $body
            }
            $crate::store::Backend::Sqlite(s) => {
                let $pool = &s.read;
                $body
            }
        }
    };
    ($store:expr, read $pool:ident => $body:expr) => {
        match $store.backend() {
            $crate::store::Backend::Postgres(s) => {
                let $pool = &s.pool;
                $body
            }
            $crate::store::Backend::Sqlite(s) => {
                let $pool = &s.read;
                $body
            }
        }
    };
    ($store:expr, write $pool:ident => $body:expr) => {
        match $store.backend() {
            $crate::store::Backend::Postgres(s) => {
                let $pool = &s.pool;
                $body
            }
            $crate::store::Backend::Sqlite(s) => {
                let $pool = &s.write;
                $body
            }
        }
    };
}
pub(crate) use on_store;

port!(
    /// Show definitions and the seat and shard rows. See `shows.rs`.
    Shows
);
port!(
    /// Hold records (the `holds` and `pool_holds` tables). See `holds.rs`.
    Holds
);
port!(
    /// Buyers' idempotency keys. See `idempotency.rs`.
    IdempotencyKeys
);
port!(
    /// Checkout records. See `checkouts.rs`.
    Checkouts
);
port!(
    /// Webhook endpoints, deliveries and their claims. See `webhooks.rs`.
    WebhookOutbox
);
port!(
    /// Every read model at once, for replay and verify. See `tables.rs`.
    ProjectionTables
);
port!(
    /// The keys tickets' codes are signed with. See `ticket_keys.rs`.
    TicketKeys
);

/// One database, opened once per process: what hands out the ports. The
/// binary's wiring (`app.rs`) and tools hold it; a wing holds only the
/// ports it is given.
#[derive(Clone)]
pub struct Store {
    db: Arc<Backend>,
}

impl Store {
    /// Opens the store a `DATABASE_URL` names: `postgres://` or `postgresql://`
    /// for PostgreSQL, `sqlite://PATH` for a SQLite file (created if missing).
    pub async fn connect(url: &str, connections: u32) -> StoreResult<Self> {
        Ok(Self {
            db: Arc::new(Backend::connect(url, connections).await?),
        })
    }

    pub fn log(&self) -> EventLog {
        EventLog::on(self.db.clone())
    }

    pub fn shows(&self) -> Shows {
        Shows::on(self.db.clone())
    }

    pub fn holds(&self) -> Holds {
        Holds::on(self.db.clone())
    }

    pub fn idempotency_keys(&self) -> IdempotencyKeys {
        IdempotencyKeys::on(self.db.clone())
    }

    pub fn ticket_keys(&self) -> TicketKeys {
        TicketKeys::on(self.db.clone())
    }

    pub fn checkouts(&self) -> Checkouts {
        Checkouts::on(self.db.clone())
    }

    pub fn webhooks(&self) -> WebhookOutbox {
        WebhookOutbox::on(self.db.clone())
    }

    pub fn projections(&self) -> ProjectionTables {
        ProjectionTables::on(self.db.clone())
    }

    pub fn database(&self) -> Database {
        Database::on(self.db.clone())
    }

    /// The database, for a port declared outside this folder (the
    /// simulator's ledger, `payment::ledger`).
    pub(crate) fn shared(&self) -> Arc<Backend> {
        self.db.clone()
    }

    pub fn kind(&self) -> StoreKind {
        self.db.kind()
    }
}
