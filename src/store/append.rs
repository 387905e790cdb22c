//! The append: one transaction per command, all or nothing.

use chrono::{DateTime, Utc};
use projections::availability::SeatRow;
use projections::checkouts::CheckoutRow;
use projections::holds::{HoldChange, HoldState};
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

const INSERT_IDEMPOTENCY: &str =
    "INSERT INTO idempotency_keys (buyer, key, request_hash, hold_id, created_at_us) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING";

const INSERT_HOLD: &str =
    "INSERT INTO holds (hold_id, show_id, buyer, expires_at_us, state, pool_id) \
     VALUES ($1, $2, $3, $4, 'held', $5) ON CONFLICT DO NOTHING";

const INSERT_POOL_HOLD: &str = "INSERT INTO pool_holds \
       (hold_id, show_id, pool_id, shard, quantity, expires_at_us, state) \
     VALUES ($1, $2, $3, $4, $5, $6, 'held') ON CONFLICT DO NOTHING";

const END_POOL_HOLD: &str =
    "UPDATE pool_holds SET state = $2 WHERE hold_id = $1 AND state = 'held'";

const UPDATE_SHARD: &str = "UPDATE pool_shards SET sold = $4, last_seq = $5 \
     WHERE show_id = $1 AND pool_id = $2 AND shard = $3 AND last_seq < $5";

const INSERT_HOLD_SEAT: &str =
    "INSERT INTO hold_seats (hold_id, seat_id) VALUES ($1, $2) ON CONFLICT DO NOTHING";

/// A hold's state moves from `held` to a final state once; the first wins.
const END_HOLD: &str = "UPDATE holds SET state = $2 WHERE hold_id = $1 AND state = 'held'";

const CONVERT_HOLD: &str =
    "UPDATE holds SET state = 'converted', booking_id = $2 WHERE hold_id = $1 AND state = 'held'";

const UPSERT_CHECKOUT: &str = "INSERT INTO checkouts \
       (hold_id, show_id, buyer, phase, booking_id, charge_id, refund_id, refund_reason, amount_cents, last_seq, updated_at_us) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
     ON CONFLICT (hold_id) DO UPDATE SET \
       phase = excluded.phase, booking_id = excluded.booking_id, charge_id = excluded.charge_id, \
       refund_id = excluded.refund_id, refund_reason = excluded.refund_reason, \
       amount_cents = excluded.amount_cents, last_seq = excluded.last_seq, updated_at_us = excluded.updated_at_us \
     WHERE checkouts.last_seq < excluded.last_seq";

const MOVE_CHECKPOINT: &str = "UPDATE projector_checkpoints SET position = $3, updated_at_us = $4 \
     WHERE name = $1 AND position = $2";

const SQLITE_INSERT_EVENT: &str = "INSERT INTO events \
     (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, recorded_at_us, show_id) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING";

const SQLITE_UPDATE_SEAT: &str = "UPDATE seat_availability SET \
       status = $3, hold_id = $4, buyer = $5, expires_at_us = $6, booking_id = $7, last_seq = $8 \
     WHERE show_id = $1 AND seat_id = $2 AND last_seq < $8";

/// The columns of a seat row, as bound to the statements above.
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

/// Writes the idempotency key, then the hold, shard and checkout rows (SQLite:
/// one statement each, in-process, so batching buys little). Returns whether
/// the idempotency key was taken.
async fn write_rows_sqlite(
    tx: &mut sqlx::SqliteConnection,
    batch: &AppendBatch,
    recorded_at_us: i64,
) -> Result<bool, sqlx::Error> {
    {
        let mut key_taken = false;
        if let Some(idem) = &batch.idempotency {
            let inserted = sqlx::query(INSERT_IDEMPOTENCY)
                .bind(&idem.buyer)
                .bind(&idem.key)
                .bind(&idem.request_hash)
                .bind(&idem.hold_id)
                .bind(recorded_at_us)
                .execute(&mut *tx)
                .await?;
            key_taken = inserted.rows_affected() == 0;
        }
        if !key_taken {
            for change in &batch.hold_changes {
                match change {
                    HoldChange::SeatHeld {
                        hold_id,
                        show_id,
                        seat_id,
                        buyer,
                        expires_at,
                    } => {
                        let hold_id = hold_id.to_string();
                        sqlx::query(INSERT_HOLD)
                            .bind(&hold_id)
                            .bind(show_id.as_str())
                            .bind(buyer.as_str())
                            .bind(to_micros(*expires_at))
                            .bind(None::<&str>)
                            .execute(&mut *tx)
                            .await?;
                        sqlx::query(INSERT_HOLD_SEAT)
                            .bind(&hold_id)
                            .bind(seat_id.as_str())
                            .execute(&mut *tx)
                            .await?;
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
                        let hold_id = hold_id.to_string();
                        sqlx::query(INSERT_HOLD)
                            .bind(&hold_id)
                            .bind(show_id.as_str())
                            .bind(buyer.as_str())
                            .bind(to_micros(*expires_at))
                            .bind(pool_id.as_str())
                            .execute(&mut *tx)
                            .await?;
                        sqlx::query(INSERT_POOL_HOLD)
                            .bind(&hold_id)
                            .bind(show_id.as_str())
                            .bind(pool_id.as_str())
                            .bind(*shard as i32)
                            .bind(*quantity as i32)
                            .bind(to_micros(*expires_at))
                            .execute(&mut *tx)
                            .await?;
                    }
                    HoldChange::Ended { hold_id, state } => {
                        for sql in [END_HOLD, END_POOL_HOLD] {
                            sqlx::query(sql)
                                .bind(hold_id.to_string())
                                .bind(HoldState::as_str(*state))
                                .execute(&mut *tx)
                                .await?;
                        }
                    }
                    HoldChange::Converted {
                        hold_id,
                        booking_id,
                    } => {
                        sqlx::query(CONVERT_HOLD)
                            .bind(hold_id.to_string())
                            .bind(booking_id.to_string())
                            .execute(&mut *tx)
                            .await?;
                        sqlx::query(END_POOL_HOLD)
                            .bind(hold_id.to_string())
                            .bind(HoldState::Converted.as_str())
                            .execute(&mut *tx)
                            .await?;
                    }
                }
            }
            for write in &batch.shard_rows {
                sqlx::query(UPDATE_SHARD)
                    .bind(&write.show_id)
                    .bind(&write.pool_id)
                    .bind(write.shard)
                    .bind(write.sold)
                    .bind(write.last_seq)
                    .execute(&mut *tx)
                    .await?;
            }
            for write in &batch.checkout_rows {
                let row = &write.row;
                sqlx::query(UPSERT_CHECKOUT)
                    .bind(&row.hold_id)
                    .bind(&row.show_id)
                    .bind(&row.buyer)
                    .bind(row.phase)
                    .bind(&row.booking_id)
                    .bind(&row.charge_id)
                    .bind(&row.refund_id)
                    .bind(row.refund_reason)
                    .bind(row.amount_cents)
                    .bind(write.last_seq)
                    .bind(recorded_at_us)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        Ok(key_taken)
    }
}

impl Store {
    /// Appends the batch in one transaction. Returns `Conflict` (and writes
    /// nothing) if any stream already has an event at one of the sequences.
    pub async fn append(&self, batch: &AppendBatch) -> StoreResult<AppendOutcome> {
        match self {
            Store::Postgres(s) => append_pg(&s.pool, batch).await,
            Store::Sqlite(s) => append_sqlite(&s.write, batch)
                .await
                .map_err(StoreError::classify),
        }
    }
}

/// The batch as the `booking_append` function of the PostgreSQL migrations
/// reads it: one JSON document, one statement, one round trip.
mod pg {
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

fn pg_document(batch: &AppendBatch) -> Result<String, StoreError> {
    let at_us = to_micros(batch.recorded_at);
    fn raw(json: &str) -> Result<&serde_json::value::RawValue, StoreError> {
        serde_json::from_str(json).map_err(|e| StoreError::Corrupt(format!("event JSON: {e}")))
    }
    let mut doc = pg::Batch {
        events: Vec::with_capacity(batch.events.len()),
        seats: Vec::with_capacity(batch.seat_rows.len()),
        shards: Vec::with_capacity(batch.shard_rows.len()),
        holds: Vec::new(),
        hold_seats: Vec::new(),
        pool_holds: Vec::new(),
        ends: Vec::new(),
        converts: Vec::new(),
        checkouts: Vec::with_capacity(batch.checkout_rows.len()),
        idempotency: batch.idempotency.as_ref().map(|k| pg::Idempotency {
            buyer: &k.buyer,
            key: &k.key,
            request_hash: &k.request_hash,
            hold_id: &k.hold_id,
            created_at_us: at_us,
        }),
        checkpoint: batch.checkpoint.as_ref().map(|c| pg::Checkpoint {
            name: &c.name,
            from_position: c.from,
            to_position: c.to,
            at_us,
        }),
    };
    for e in &batch.events {
        doc.events.push(pg::Event {
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
        doc.seats.push(pg::Seat {
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
        doc.shards.push(pg::Shard {
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
                doc.holds.push(pg::Hold {
                    hold_id: hold_id.to_string(),
                    show_id: show_id.as_str(),
                    buyer: buyer.as_str(),
                    expires_at_us: to_micros(*expires_at),
                    pool_id: None,
                });
                doc.hold_seats.push(pg::HoldSeat {
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
                doc.holds.push(pg::Hold {
                    hold_id: hold_id.to_string(),
                    show_id: show_id.as_str(),
                    buyer: buyer.as_str(),
                    expires_at_us: to_micros(*expires_at),
                    pool_id: Some(pool_id.as_str()),
                });
                doc.pool_holds.push(pg::PoolHold {
                    hold_id: hold_id.to_string(),
                    show_id: show_id.as_str(),
                    pool_id: pool_id.as_str(),
                    shard: *shard,
                    quantity: *quantity,
                    expires_at_us: to_micros(*expires_at),
                });
            }
            HoldChange::Ended { hold_id, state } => doc.ends.push(pg::End {
                hold_id: hold_id.to_string(),
                state: state.as_str(),
            }),
            HoldChange::Converted {
                hold_id,
                booking_id,
            } => doc.converts.push(pg::Convert {
                hold_id: hold_id.to_string(),
                booking_id: booking_id.to_string(),
            }),
        }
    }
    for w in &batch.checkout_rows {
        let row = &w.row;
        doc.checkouts.push(pg::Checkout {
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
    serde_json::to_string(&doc).map_err(|e| StoreError::Corrupt(format!("batch JSON: {e}")))
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
    let document = pg_document(batch)?;
    match sqlx::query("SELECT booking_append($1::jsonb)")
        .bind(document)
        .execute(pool)
        .await
    {
        Ok(_) => Ok(AppendOutcome::Appended),
        Err(err) => match pg_refusal(&err) {
            Some(outcome) => Ok(outcome),
            None => Err(StoreError::classify(err)),
        },
    }
}

async fn append_sqlite(
    pool: &sqlx::SqlitePool,
    batch: &AppendBatch,
) -> Result<AppendOutcome, sqlx::Error> {
    let recorded_at_us = to_micros(batch.recorded_at);
    let mut tx = pool.begin().await?;
    for e in &batch.events {
        let inserted = sqlx::query(SQLITE_INSERT_EVENT)
            .bind(e.aggregate_type)
            .bind(&e.aggregate_id)
            .bind(e.sequence)
            .bind(&e.event_type)
            .bind(&e.event_version)
            .bind(&e.payload)
            .bind(&e.metadata)
            .bind(recorded_at_us)
            .bind(&e.show_id)
            .execute(&mut *tx)
            .await?;
        if inserted.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(AppendOutcome::Conflict);
        }
    }
    for w in &batch.seat_rows {
        let c = SeatColumns::of(&w.row);
        sqlx::query(SQLITE_UPDATE_SEAT)
            .bind(&w.show_id)
            .bind(&w.seat_id)
            .bind(c.status)
            .bind(c.hold_id)
            .bind(c.buyer)
            .bind(c.expires_at_us)
            .bind(c.booking_id)
            .bind(w.last_seq)
            .execute(&mut *tx)
            .await?;
    }
    let key_taken = write_rows_sqlite(&mut tx, batch, recorded_at_us).await?;
    if key_taken {
        tx.rollback().await?;
        return Ok(AppendOutcome::IdempotencyKeyTaken);
    }
    if let Some(checkpoint) = &batch.checkpoint {
        let moved = sqlx::query(MOVE_CHECKPOINT)
            .bind(&checkpoint.name)
            .bind(checkpoint.from)
            .bind(checkpoint.to)
            .bind(recorded_at_us)
            .execute(&mut *tx)
            .await?;
        if moved.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(AppendOutcome::CheckpointMoved);
        }
    }
    tx.commit().await?;
    Ok(AppendOutcome::Appended)
}
