//! The append: one transaction per command, all or nothing.

use chrono::{DateTime, Utc};
use projections::availability::SeatRow;
use projections::checkouts::CheckoutRow;
use projections::holds::HoldChange;
use projections::time::to_micros;

use super::{Store, StoreError, StoreResult};

/// One event to insert at the sequence its stream was decided on.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub aggregate_type: &'static str,
    pub aggregate_id: String,
    pub sequence: i64,
    pub event_type: String,
    pub event_version: String,
    /// The event as JSON, serialized once.
    pub payload: String,
    pub metadata: String,
    pub show_id: Option<String>,
}

/// A seat's availability row as of stream sequence `last_seq`.
#[derive(Debug, Clone)]
pub struct SeatRowWrite {
    pub show_id: String,
    pub seat_id: String,
    pub last_seq: i64,
    pub row: SeatRow,
}

/// A pool shard's sold places as of stream sequence `last_seq`.
#[derive(Debug, Clone)]
pub struct ShardRowWrite {
    pub show_id: String,
    pub pool_id: String,
    pub shard: i32,
    pub last_seq: i64,
    pub sold: i64,
}

/// A checkout's row as of stream sequence `last_seq`.
#[derive(Debug, Clone)]
pub struct CheckoutRowWrite {
    pub last_seq: i64,
    pub row: CheckoutRow,
}

/// Remembers a buyer's idempotency key with the hold it produced.
#[derive(Debug, Clone)]
pub struct IdempotencyRecord {
    pub buyer: String,
    pub key: String,
    pub request_hash: String,
    pub hold_id: String,
}

/// Everything one command writes.
#[derive(Debug, Clone)]
pub struct AppendBatch {
    pub recorded_at: DateTime<Utc>,
    pub events: Vec<NewEvent>,
    pub seat_rows: Vec<SeatRowWrite>,
    pub shard_rows: Vec<ShardRowWrite>,
    pub hold_changes: Vec<HoldChange>,
    pub checkout_rows: Vec<CheckoutRowWrite>,
    pub idempotency: Option<IdempotencyRecord>,
    /// Moves a projector's checkpoint in the same transaction (compare-and-set).
    pub checkpoint: Option<CheckpointMove>,
    /// A projection batch: the builders add rows but no events (the events
    /// are already in the log).
    pub rows_only: bool,
}

/// Moves checkpoint `name` from `from` to `to`, only if it is still at `from`.
#[derive(Debug, Clone)]
pub struct CheckpointMove {
    pub name: String,
    pub from: i64,
    pub to: i64,
}

impl AppendBatch {
    /// A batch of read-model rows for events already in the log.
    pub fn projection(recorded_at: DateTime<Utc>) -> Self {
        Self {
            rows_only: true,
            ..Self::new(recorded_at)
        }
    }

    pub fn new(recorded_at: DateTime<Utc>) -> Self {
        Self {
            recorded_at,
            events: Vec::new(),
            seat_rows: Vec::new(),
            shard_rows: Vec::new(),
            hold_changes: Vec::new(),
            checkout_rows: Vec::new(),
            idempotency: None,
            checkpoint: None,
            rows_only: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    Appended,
    /// Some stream had moved past the version the decision was made on.
    /// Nothing was written.
    Conflict,
    /// The buyer's idempotency key was taken by another request meanwhile.
    /// Nothing was written.
    IdempotencyKeyTaken,
    /// The checkpoint was moved by another projector meanwhile. Nothing was written.
    CheckpointMoved,
}

/// The columns of a seat row.
struct SeatColumns {
    status: &'static str,
    hold_id: Option<String>,
    buyer: Option<String>,
    expires_at_us: Option<i64>,
    booking_id: Option<String>,
}

impl SeatColumns {
    fn of(row: &SeatRow) -> Self {
        Self {
            status: row.recorded.as_str(),
            hold_id: row.hold_id.map(|h| h.to_string()),
            buyer: row.buyer.as_ref().map(|b| b.as_str().to_owned()),
            expires_at_us: row.expires_at.map(to_micros),
            booking_id: row.booking_id.map(|b| b.to_string()),
        }
    }
}

impl Store {
    /// Appends the batch in one transaction. Returns `Conflict` (and writes
    /// nothing) if any stream already has an event at one of the sequences.
    pub async fn append(&self, batch: &AppendBatch) -> StoreResult<AppendOutcome> {
        let outcome = match self {
            Store::Postgres(s) => append_pg(&s.pool, batch).await,
            Store::Sqlite(s) => append_sqlite(&s.appender, batch).await,
        }?;
        if outcome == AppendOutcome::Appended && !batch.events.is_empty() {
            metrics::counter!("events_appended_total").increment(batch.events.len() as u64);
        }
        Ok(outcome)
    }
}

/// The batch as one JSON document. PostgreSQL's `booking_append` function
/// reads it whole (one statement, one round trip); SQLite gets each part in
/// one set-based statement (`json_each`), in one transaction.
mod doc {
    use serde::Serialize;
    use serde_json::value::RawValue;

    #[derive(Serialize)]
    pub struct Batch<'a> {
        pub events: Vec<Event<'a>>,
        pub seats: Vec<Seat<'a>>,
        pub shards: Vec<Shard<'a>>,
        pub holds: Vec<Hold<'a>>,
        pub hold_seats: Vec<HoldSeat<'a>>,
        pub pool_holds: Vec<PoolHold<'a>>,
        pub ends: Vec<End<'a>>,
        pub converts: Vec<Convert>,
        pub checkouts: Vec<Checkout<'a>>,
        pub idempotency: Option<Idempotency<'a>>,
        pub checkpoint: Option<Checkpoint<'a>>,
    }

    impl Batch<'_> {
        pub fn empty() -> Self {
            Self {
                events: Vec::new(),
                seats: Vec::new(),
                shards: Vec::new(),
                holds: Vec::new(),
                hold_seats: Vec::new(),
                pool_holds: Vec::new(),
                ends: Vec::new(),
                converts: Vec::new(),
                checkouts: Vec::new(),
                idempotency: None,
                checkpoint: None,
            }
        }
    }

    #[derive(Serialize)]
    pub struct Event<'a> {
        pub t: &'a str,
        pub i: &'a str,
        pub s: i64,
        pub et: &'a str,
        pub ev: &'a str,
        pub p: &'a RawValue,
        pub m: &'a RawValue,
        pub r: i64,
        pub sh: Option<&'a str>,
        /// The event's place in the batch (1-based): the low bits of its
        /// position on PostgreSQL.
        pub n: usize,
    }

    #[derive(Serialize)]
    pub struct Seat<'a> {
        pub show_id: &'a str,
        pub seat_id: &'a str,
        pub status: &'static str,
        pub hold_id: Option<String>,
        pub buyer: Option<String>,
        pub expires_at_us: Option<i64>,
        pub booking_id: Option<String>,
        pub seq: i64,
    }

    #[derive(Serialize)]
    pub struct Shard<'a> {
        pub show_id: &'a str,
        pub pool_id: &'a str,
        pub shard: i32,
        pub sold: i64,
        pub seq: i64,
    }

    #[derive(Serialize)]
    pub struct Hold<'a> {
        pub hold_id: String,
        pub show_id: &'a str,
        pub buyer: &'a str,
        pub expires_at_us: i64,
        pub pool_id: Option<&'a str>,
    }

    #[derive(Serialize)]
    pub struct HoldSeat<'a> {
        pub hold_id: String,
        pub seat_id: &'a str,
    }

    #[derive(Serialize)]
    pub struct PoolHold<'a> {
        pub hold_id: String,
        pub show_id: &'a str,
        pub pool_id: &'a str,
        pub shard: u32,
        pub quantity: u32,
        pub expires_at_us: i64,
    }

    #[derive(Serialize)]
    pub struct End<'a> {
        pub hold_id: String,
        pub state: &'a str,
    }

    #[derive(Serialize)]
    pub struct Convert {
        pub hold_id: String,
        pub booking_id: String,
    }

    #[derive(Serialize)]
    pub struct Checkout<'a> {
        pub hold_id: &'a str,
        pub show_id: &'a str,
        pub buyer: &'a str,
        pub phase: &'a str,
        pub booking_id: Option<&'a str>,
        pub charge_id: Option<&'a str>,
        pub refund_id: Option<&'a str>,
        pub refund_reason: Option<&'a str>,
        pub amount_cents: Option<i64>,
        pub seq: i64,
        pub updated_at_us: i64,
    }

    #[derive(Serialize)]
    pub struct Idempotency<'a> {
        pub buyer: &'a str,
        pub key: &'a str,
        pub request_hash: &'a str,
        pub hold_id: &'a str,
        pub created_at_us: i64,
    }

    #[derive(Serialize)]
    pub struct Checkpoint<'a> {
        pub name: &'a str,
        pub from_position: i64,
        pub to_position: i64,
        pub at_us: i64,
    }
}

fn document(batch: &AppendBatch) -> Result<doc::Batch<'_>, StoreError> {
    let at_us = to_micros(batch.recorded_at);
    fn raw(json: &str) -> Result<&serde_json::value::RawValue, StoreError> {
        serde_json::from_str(json).map_err(|e| StoreError::Corrupt(format!("event JSON: {e}")))
    }
    let mut doc = doc::Batch {
        events: Vec::with_capacity(batch.events.len()),
        seats: Vec::with_capacity(batch.seat_rows.len()),
        shards: Vec::with_capacity(batch.shard_rows.len()),
        holds: Vec::new(),
        hold_seats: Vec::new(),
        pool_holds: Vec::new(),
        ends: Vec::new(),
        converts: Vec::new(),
        checkouts: Vec::with_capacity(batch.checkout_rows.len()),
        idempotency: batch.idempotency.as_ref().map(|k| doc::Idempotency {
            buyer: &k.buyer,
            key: &k.key,
            request_hash: &k.request_hash,
            hold_id: &k.hold_id,
            created_at_us: at_us,
        }),
        checkpoint: batch.checkpoint.as_ref().map(|c| doc::Checkpoint {
            name: &c.name,
            from_position: c.from,
            to_position: c.to,
            at_us,
        }),
    };
    for (n, e) in batch.events.iter().enumerate() {
        doc.events.push(doc::Event {
            n: n + 1,
            t: e.aggregate_type,
            i: &e.aggregate_id,
            s: e.sequence,
            et: &e.event_type,
            ev: &e.event_version,
            p: raw(&e.payload)?,
            m: raw(&e.metadata)?,
            r: at_us,
            sh: e.show_id.as_deref(),
        });
    }
    for w in &batch.seat_rows {
        let c = SeatColumns::of(&w.row);
        doc.seats.push(doc::Seat {
            show_id: &w.show_id,
            seat_id: &w.seat_id,
            status: c.status,
            hold_id: c.hold_id,
            buyer: c.buyer,
            expires_at_us: c.expires_at_us,
            booking_id: c.booking_id,
            seq: w.last_seq,
        });
    }
    for w in &batch.shard_rows {
        doc.shards.push(doc::Shard {
            show_id: &w.show_id,
            pool_id: &w.pool_id,
            shard: w.shard,
            sold: w.sold,
            seq: w.last_seq,
        });
    }
    for change in &batch.hold_changes {
        match change {
            HoldChange::SeatHeld {
                hold_id,
                show_id,
                seat_id,
                buyer,
                expires_at,
            } => {
                doc.holds.push(doc::Hold {
                    hold_id: hold_id.to_string(),
                    show_id: show_id.as_str(),
                    buyer: buyer.as_str(),
                    expires_at_us: to_micros(*expires_at),
                    pool_id: None,
                });
                doc.hold_seats.push(doc::HoldSeat {
                    hold_id: hold_id.to_string(),
                    seat_id: seat_id.as_str(),
                });
            }
            HoldChange::PoolPartHeld {
                hold_id,
                show_id,
                pool_id,
                shard,
                buyer,
                quantity,
                expires_at,
            } => {
                doc.holds.push(doc::Hold {
                    hold_id: hold_id.to_string(),
                    show_id: show_id.as_str(),
                    buyer: buyer.as_str(),
                    expires_at_us: to_micros(*expires_at),
                    pool_id: Some(pool_id.as_str()),
                });
                doc.pool_holds.push(doc::PoolHold {
                    hold_id: hold_id.to_string(),
                    show_id: show_id.as_str(),
                    pool_id: pool_id.as_str(),
                    shard: *shard,
                    quantity: *quantity,
                    expires_at_us: to_micros(*expires_at),
                });
            }
            HoldChange::Ended { hold_id, state } => doc.ends.push(doc::End {
                hold_id: hold_id.to_string(),
                state: state.as_str(),
            }),
            HoldChange::Converted {
                hold_id,
                booking_id,
            } => doc.converts.push(doc::Convert {
                hold_id: hold_id.to_string(),
                booking_id: booking_id.to_string(),
            }),
        }
    }
    for w in &batch.checkout_rows {
        let row = &w.row;
        doc.checkouts.push(doc::Checkout {
            hold_id: &row.hold_id,
            show_id: &row.show_id,
            buyer: &row.buyer,
            phase: row.phase,
            booking_id: row.booking_id.as_deref(),
            charge_id: row.charge_id.as_deref(),
            refund_id: row.refund_id.as_deref(),
            refund_reason: row.refund_reason,
            amount_cents: row.amount_cents,
            seq: w.last_seq,
            updated_at_us: at_us,
        });
    }
    Ok(doc)
}

/// Writes scratch tables (a replay's result) in chunks of `chunk` rows per
/// kind, each row once in its final state: hold records are inserted and
/// then moved to their final state in the same statement, exactly as a
/// command's rows are.
fn tables_documents(tables: &crate::verify::Tables, chunk: usize) -> Vec<doc::Batch<'_>> {
    fn flush<'a>(
        current: &mut doc::Batch<'a>,
        rows: &mut usize,
        at: usize,
        docs: &mut Vec<doc::Batch<'a>>,
    ) {
        if *rows > 0 && *rows >= at {
            docs.push(std::mem::replace(current, doc::Batch::empty()));
            *rows = 0;
        }
    }
    let mut docs = Vec::new();
    let mut current = doc::Batch::empty();
    let mut rows = 0;
    for ((show_id, seat_id), (status, hold_id, buyer, expires_at_us, booking_id, seq)) in
        &tables.seats
    {
        current.seats.push(doc::Seat {
            show_id,
            seat_id,
            status: match status.as_str() {
                "held" => "held",
                "booked" => "booked",
                _ => "available",
            },
            hold_id: hold_id.clone(),
            buyer: buyer.clone(),
            expires_at_us: *expires_at_us,
            booking_id: booking_id.clone(),
            seq: *seq,
        });
        rows += 1;
        flush(&mut current, &mut rows, chunk, &mut docs);
    }
    for ((show_id, pool_id, shard), (sold, seq)) in &tables.shards {
        current.shards.push(doc::Shard {
            show_id,
            pool_id,
            shard: *shard,
            sold: i64::from(*sold),
            seq: *seq,
        });
        rows += 1;
        flush(&mut current, &mut rows, chunk, &mut docs);
    }
    for (hold_id, (show_id, buyer, expires_at_us, state, booking_id, pool_id)) in &tables.holds {
        current.holds.push(doc::Hold {
            hold_id: hold_id.clone(),
            show_id,
            buyer,
            expires_at_us: *expires_at_us,
            pool_id: pool_id.as_deref(),
        });
        let seats = tables.hold_seats.range((hold_id.clone(), String::new())..);
        for (_, seat_id) in seats.take_while(|(h, _)| h == hold_id) {
            current.hold_seats.push(doc::HoldSeat {
                hold_id: hold_id.clone(),
                seat_id,
            });
        }
        let parts = tables
            .pool_holds
            .range((hold_id.clone(), i32::MIN)..=(hold_id.clone(), i32::MAX));
        for ((_, shard), (part_show, part_pool, quantity, part_expiry, _)) in parts {
            current.pool_holds.push(doc::PoolHold {
                hold_id: hold_id.clone(),
                show_id: part_show,
                pool_id: part_pool,
                shard: (*shard).max(0) as u32,
                quantity: (*quantity).max(0) as u32,
                expires_at_us: *part_expiry,
            });
        }
        match (state.as_str(), booking_id) {
            ("held", _) => {}
            ("converted", Some(booking_id)) => current.converts.push(doc::Convert {
                hold_id: hold_id.clone(),
                booking_id: booking_id.clone(),
            }),
            (state, _) => current.ends.push(doc::End {
                hold_id: hold_id.clone(),
                state,
            }),
        }
        rows += 1;
        flush(&mut current, &mut rows, chunk, &mut docs);
    }
    for (hold_id, (show_id, buyer, phase, booking_id, charge_id, refund_id, reason, amount, seq)) in
        &tables.checkouts
    {
        current.checkouts.push(doc::Checkout {
            hold_id,
            show_id,
            buyer,
            phase,
            booking_id: booking_id.as_deref(),
            charge_id: charge_id.as_deref(),
            refund_id: refund_id.as_deref(),
            refund_reason: reason.as_deref(),
            amount_cents: *amount,
            seq: *seq,
            updated_at_us: 0,
        });
        rows += 1;
        flush(&mut current, &mut rows, chunk, &mut docs);
    }
    flush(&mut current, &mut rows, 1, &mut docs);
    docs
}

impl Store {
    /// Writes scratch tables into the live projections; returns the number
    /// of write transactions.
    pub async fn write_tables(
        &self,
        tables: &crate::verify::Tables,
        chunk: usize,
    ) -> StoreResult<usize> {
        let docs = tables_documents(tables, chunk);
        for document in &docs {
            let outcome = match self {
                Store::Postgres(s) => append_pg_document(&s.pool, to_json(document)?, true).await?,
                Store::Sqlite(s) => s.appender.append(SqliteJob::of(document)?).await?,
            };
            if outcome != AppendOutcome::Appended {
                return Err(StoreError::Corrupt(format!(
                    "replay batch refused: {outcome:?}"
                )));
            }
        }
        Ok(docs.len())
    }
}

fn to_json(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("batch JSON: {e}")))
}

/// The SQLSTATEs `booking_append` raises for refusals (not errors).
fn pg_refusal(err: &sqlx::Error) -> Option<AppendOutcome> {
    let code = err.as_database_error()?.code()?;
    match code.as_ref() {
        "BK409" => Some(AppendOutcome::Conflict),
        "BK422" => Some(AppendOutcome::IdempotencyKeyTaken),
        "BK412" => Some(AppendOutcome::CheckpointMoved),
        _ => None,
    }
}

async fn append_pg(pool: &sqlx::PgPool, batch: &AppendBatch) -> Result<AppendOutcome, StoreError> {
    append_pg_document(pool, to_json(&document(batch)?)?, batch.rows_only).await
}

/// Projection-only batches (the projector, replay) need not wait for their
/// commit to reach the disk: they are derived from the log, and a batch lost
/// in a crash is lost with its checkpoint move, so it is simply redone.
const PG_APPEND: &str = "SELECT booking_append($1::jsonb)";
const PG_APPEND_ROWS_ONLY: &str =
    "SELECT set_config('synchronous_commit', 'off', true), booking_append($1::jsonb)";

async fn append_pg_document(
    pool: &sqlx::PgPool,
    document: String,
    rows_only: bool,
) -> Result<AppendOutcome, StoreError> {
    let sql = if rows_only {
        PG_APPEND_ROWS_ONLY
    } else {
        PG_APPEND
    };
    match sqlx::query(sql).bind(document).execute(pool).await {
        Ok(_) => Ok(AppendOutcome::Appended),
        Err(err) => match pg_refusal(&err) {
            Some(outcome) => Ok(outcome),
            None => Err(StoreError::classify(err)),
        },
    }
}

/// The parts of a batch, one statement each. The same semantics as
/// `booking_append` on PostgreSQL: every row guarded, hold records moving
/// from `held` once; `json_each` keeps each statement set-based.
const SQLITE_EVENTS: &str = "INSERT INTO events \
       (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, recorded_at_us, show_id) \
     SELECT e.value ->> 't', e.value ->> 'i', e.value ->> 's', e.value ->> 'et', e.value ->> 'ev', \
            e.value -> 'p', e.value -> 'm', e.value ->> 'r', e.value ->> 'sh' \
     FROM json_each($1) e WHERE true ORDER BY e.key \
     ON CONFLICT DO NOTHING";
const SQLITE_IDEMPOTENCY: &str = "INSERT INTO idempotency_keys (buyer, key, request_hash, hold_id, created_at_us) \
     SELECT $1 ->> 'buyer', $1 ->> 'key', $1 ->> 'request_hash', $1 ->> 'hold_id', $1 ->> 'created_at_us' \
     WHERE true ON CONFLICT DO NOTHING";
const SQLITE_CHECKPOINT: &str = "UPDATE projector_checkpoints \
     SET position = $1 ->> 'to_position', updated_at_us = $1 ->> 'at_us' \
     WHERE name = $1 ->> 'name' AND position = $1 ->> 'from_position'";
const SQLITE_SEATS: &str = "UPDATE seat_availability AS a SET \
       status = u.value ->> 'status', hold_id = u.value ->> 'hold_id', buyer = u.value ->> 'buyer', \
       expires_at_us = u.value ->> 'expires_at_us', booking_id = u.value ->> 'booking_id', last_seq = u.value ->> 'seq' \
     FROM json_each($1) u \
     WHERE a.show_id = u.value ->> 'show_id' AND a.seat_id = u.value ->> 'seat_id' AND a.last_seq < u.value ->> 'seq'";
const SQLITE_SHARDS: &str =
    "UPDATE pool_shards AS s SET sold = u.value ->> 'sold', last_seq = u.value ->> 'seq' \
     FROM json_each($1) u \
     WHERE s.show_id = u.value ->> 'show_id' AND s.pool_id = u.value ->> 'pool_id' \
       AND s.shard = u.value ->> 'shard' AND s.last_seq < u.value ->> 'seq'";
const SQLITE_HOLDS: &str = "INSERT INTO holds (hold_id, show_id, buyer, expires_at_us, state, pool_id) \
     SELECT h.value ->> 'hold_id', h.value ->> 'show_id', h.value ->> 'buyer', h.value ->> 'expires_at_us', 'held', \
            h.value ->> 'pool_id' \
     FROM json_each($1) h WHERE true ON CONFLICT DO NOTHING";
const SQLITE_HOLD_SEATS: &str = "INSERT INTO hold_seats (hold_id, seat_id) \
     SELECT h.value ->> 'hold_id', h.value ->> 'seat_id' FROM json_each($1) h WHERE true ON CONFLICT DO NOTHING";
const SQLITE_POOL_HOLDS: &str = "INSERT INTO pool_holds (hold_id, show_id, pool_id, shard, quantity, expires_at_us, state) \
     SELECT h.value ->> 'hold_id', h.value ->> 'show_id', h.value ->> 'pool_id', h.value ->> 'shard', \
            h.value ->> 'quantity', h.value ->> 'expires_at_us', 'held' \
     FROM json_each($1) h WHERE true ON CONFLICT DO NOTHING";
const SQLITE_END_HOLDS: &str =
    "UPDATE holds AS h SET state = u.value ->> 'state' FROM json_each($1) u \
     WHERE h.hold_id = u.value ->> 'hold_id' AND h.state = 'held'";
const SQLITE_END_POOL_HOLDS: &str =
    "UPDATE pool_holds AS p SET state = u.value ->> 'state' FROM json_each($1) u \
     WHERE p.hold_id = u.value ->> 'hold_id' AND p.state = 'held'";
const SQLITE_CONVERT_HOLDS: &str =
    "UPDATE holds AS h SET state = 'converted', booking_id = u.value ->> 'booking_id' \
     FROM json_each($1) u WHERE h.hold_id = u.value ->> 'hold_id' AND h.state = 'held'";
const SQLITE_CONVERT_POOL_HOLDS: &str =
    "UPDATE pool_holds AS p SET state = 'converted' FROM json_each($1) u \
     WHERE p.hold_id = u.value ->> 'hold_id' AND p.state = 'held'";
const SQLITE_CHECKOUTS: &str = "INSERT INTO checkouts \
       (hold_id, show_id, buyer, phase, booking_id, charge_id, refund_id, refund_reason, amount_cents, last_seq, updated_at_us) \
     SELECT c.value ->> 'hold_id', c.value ->> 'show_id', c.value ->> 'buyer', c.value ->> 'phase', \
            c.value ->> 'booking_id', c.value ->> 'charge_id', c.value ->> 'refund_id', c.value ->> 'refund_reason', \
            c.value ->> 'amount_cents', c.value ->> 'seq', c.value ->> 'updated_at_us' \
     FROM json_each($1) c WHERE true \
     ON CONFLICT (hold_id) DO UPDATE SET \
       phase = excluded.phase, booking_id = excluded.booking_id, charge_id = excluded.charge_id, \
       refund_id = excluded.refund_id, refund_reason = excluded.refund_reason, \
       amount_cents = excluded.amount_cents, last_seq = excluded.last_seq, updated_at_us = excluded.updated_at_us \
     WHERE checkouts.last_seq < excluded.last_seq";

async fn append_sqlite(
    appender: &SqliteAppender,
    batch: &AppendBatch,
) -> Result<AppendOutcome, StoreError> {
    appender.append(SqliteJob::of(&document(batch)?)?).await
}

/// A batch for SQLite: each part serialized once, owned, ready to cross to
/// the appender task.
pub(super) struct SqliteJob {
    /// (statement, JSON, rows it must affect and the refusal if it does not)
    checks: Vec<(&'static str, String, u64, AppendOutcome)>,
    parts: Vec<(&'static str, String)>,
}

impl SqliteJob {
    fn of(doc: &doc::Batch<'_>) -> Result<Self, StoreError> {
        let mut checks = Vec::new();
        if !doc.events.is_empty() {
            checks.push((
                SQLITE_EVENTS,
                to_json(&doc.events)?,
                doc.events.len() as u64,
                AppendOutcome::Conflict,
            ));
        }
        if let Some(key) = &doc.idempotency {
            checks.push((
                SQLITE_IDEMPOTENCY,
                to_json(key)?,
                1,
                AppendOutcome::IdempotencyKeyTaken,
            ));
        }
        if let Some(checkpoint) = &doc.checkpoint {
            checks.push((
                SQLITE_CHECKPOINT,
                to_json(checkpoint)?,
                1,
                AppendOutcome::CheckpointMoved,
            ));
        }
        let mut parts = Vec::new();
        let mut part = |sql: &'static str,
                        rows: usize,
                        json: Result<String, StoreError>|
         -> Result<(), StoreError> {
            if rows > 0 {
                parts.push((sql, json?));
            }
            Ok(())
        };
        part(SQLITE_SEATS, doc.seats.len(), to_json(&doc.seats))?;
        part(SQLITE_SHARDS, doc.shards.len(), to_json(&doc.shards))?;
        part(SQLITE_HOLDS, doc.holds.len(), to_json(&doc.holds))?;
        part(
            SQLITE_HOLD_SEATS,
            doc.hold_seats.len(),
            to_json(&doc.hold_seats),
        )?;
        part(
            SQLITE_POOL_HOLDS,
            doc.pool_holds.len(),
            to_json(&doc.pool_holds),
        )?;
        part(SQLITE_END_HOLDS, doc.ends.len(), to_json(&doc.ends))?;
        part(SQLITE_END_POOL_HOLDS, doc.ends.len(), to_json(&doc.ends))?;
        part(
            SQLITE_CONVERT_HOLDS,
            doc.converts.len(),
            to_json(&doc.converts),
        )?;
        part(
            SQLITE_CONVERT_POOL_HOLDS,
            doc.converts.len(),
            to_json(&doc.converts),
        )?;
        part(
            SQLITE_CHECKOUTS,
            doc.checkouts.len(),
            to_json(&doc.checkouts),
        )?;
        Ok(Self { checks, parts })
    }

    /// Writes the job inside the group's transaction, under a savepoint, so
    /// that a refusal or an error undoes this job and no other.
    async fn write(&self, tx: &mut sqlx::SqliteConnection) -> Result<AppendOutcome, sqlx::Error> {
        sqlx::query("SAVEPOINT job").execute(&mut *tx).await?;
        let outcome = self.statements(tx).await;
        let end = match &outcome {
            Ok(AppendOutcome::Appended) => "RELEASE job",
            _ => "ROLLBACK TO job",
        };
        sqlx::query(end).execute(&mut *tx).await?;
        if end != "RELEASE job" {
            sqlx::query("RELEASE job").execute(&mut *tx).await?;
        }
        outcome
    }

    async fn statements(
        &self,
        tx: &mut sqlx::SqliteConnection,
    ) -> Result<AppendOutcome, sqlx::Error> {
        for (sql, json, expected, refusal) in &self.checks {
            let done = sqlx::query(sql).bind(json).execute(&mut *tx).await?;
            if done.rows_affected() != *expected {
                return Ok(*refusal);
            }
        }
        for (sql, json) in &self.parts {
            sqlx::query(sql).bind(json).execute(&mut *tx).await?;
        }
        Ok(AppendOutcome::Appended)
    }
}

/// Appends to SQLite through one task that commits whatever has queued up
/// together: one transaction and one fsync for a group of appends, each in
/// its own savepoint. SQLite has a single writer and, with `synchronous =
/// FULL`, an fsync per commit; without grouping, an onsale would queue on
/// the disk one hold at a time.
pub(super) struct SqliteAppender {
    jobs: tokio::sync::mpsc::Sender<(
        SqliteJob,
        tokio::sync::oneshot::Sender<Result<AppendOutcome, StoreError>>,
    )>,
}

/// Appends committed together at most.
pub const SQLITE_GROUP_COMMIT: usize = 64;

/// Appends waiting for the writer at most; more wait to be queued.
const SQLITE_QUEUE: usize = 4_096;

impl SqliteAppender {
    pub(super) fn start(pool: sqlx::SqlitePool) -> Self {
        let (jobs, mut queue) = tokio::sync::mpsc::channel::<(
            SqliteJob,
            tokio::sync::oneshot::Sender<_>,
        )>(SQLITE_QUEUE);
        tokio::spawn(async move {
            while let Some(first) = queue.recv().await {
                let mut group = vec![first];
                while group.len() < SQLITE_GROUP_COMMIT {
                    match queue.try_recv() {
                        Ok(job) => group.push(job),
                        Err(_) => break,
                    }
                }
                match write_group(&pool, &group).await {
                    Ok(outcomes) => {
                        for ((_, reply), outcome) in group.into_iter().zip(outcomes) {
                            let _ = reply.send(outcome.map_err(StoreError::classify));
                        }
                    }
                    Err(error) => {
                        // The commit itself failed: none of the group is written.
                        let message = error.to_string();
                        for (_, reply) in group {
                            let _ = reply.send(Err(StoreError::Unavailable(message.clone())));
                        }
                    }
                }
            }
        });
        Self { jobs }
    }

    async fn append(&self, job: SqliteJob) -> Result<AppendOutcome, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.jobs
            .send((job, reply))
            .await
            .map_err(|_| StoreError::Unavailable("the SQLite writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the SQLite writer has stopped".into()))?
    }
}

type Outcomes = Vec<Result<AppendOutcome, sqlx::Error>>;

async fn write_group(
    pool: &sqlx::SqlitePool,
    group: &[(
        SqliteJob,
        tokio::sync::oneshot::Sender<Result<AppendOutcome, StoreError>>,
    )],
) -> Result<Outcomes, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let mut outcomes = Vec::with_capacity(group.len());
    for (job, _) in group {
        outcomes.push(job.write(&mut tx).await);
    }
    tx.commit().await?;
    Ok(outcomes)
}
