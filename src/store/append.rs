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
}

impl AppendBatch {
    pub fn new(recorded_at: DateTime<Utc>) -> Self {
        Self {
            recorded_at,
            events: Vec::new(),
            seat_rows: Vec::new(),
            shard_rows: Vec::new(),
            hold_changes: Vec::new(),
            checkout_rows: Vec::new(),
            idempotency: None,
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

const PG_INSERT_EVENTS: &str = "INSERT INTO events \
     (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, recorded_at_us, show_id) \
     SELECT t, i, s, et, ev, p::jsonb, m::jsonb, r, sh FROM UNNEST( \
       $1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[]) \
       AS u(t, i, s, et, ev, p, m, r, sh) \
     ON CONFLICT DO NOTHING";

const PG_UPDATE_SEATS: &str = "UPDATE seat_availability AS a SET \
       status = u.status, hold_id = u.hold_id, buyer = u.buyer, expires_at_us = u.expires_at_us, \
       booking_id = u.booking_id, last_seq = u.seq \
     FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::bigint[]) \
       AS u(show_id, seat_id, status, hold_id, buyer, expires_at_us, booking_id, seq) \
     WHERE a.show_id = u.show_id AND a.seat_id = u.seat_id AND a.last_seq < u.seq";

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

/// Writes the idempotency key, then the hold and checkout rows; shared by both
/// stores (the SQL is the same), expanded per transaction type.
macro_rules! write_idempotency_and_holds {
    ($tx:expr, $batch:expr, $recorded_at_us:expr) => {{
        let mut key_taken = false;
        if let Some(idem) = &$batch.idempotency {
            let inserted = sqlx::query(INSERT_IDEMPOTENCY)
                .bind(&idem.buyer)
                .bind(&idem.key)
                .bind(&idem.request_hash)
                .bind(&idem.hold_id)
                .bind($recorded_at_us)
                .execute(&mut *$tx)
                .await?;
            key_taken = inserted.rows_affected() == 0;
        }
        if !key_taken {
            for change in &$batch.hold_changes {
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
                            .execute(&mut *$tx)
                            .await?;
                        sqlx::query(INSERT_HOLD_SEAT)
                            .bind(&hold_id)
                            .bind(seat_id.as_str())
                            .execute(&mut *$tx)
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
                            .execute(&mut *$tx)
                            .await?;
                        sqlx::query(INSERT_POOL_HOLD)
                            .bind(&hold_id)
                            .bind(show_id.as_str())
                            .bind(pool_id.as_str())
                            .bind(*shard as i32)
                            .bind(*quantity as i32)
                            .bind(to_micros(*expires_at))
                            .execute(&mut *$tx)
                            .await?;
                    }
                    HoldChange::Ended { hold_id, state } => {
                        for sql in [END_HOLD, END_POOL_HOLD] {
                            sqlx::query(sql)
                                .bind(hold_id.to_string())
                                .bind(HoldState::as_str(*state))
                                .execute(&mut *$tx)
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
                            .execute(&mut *$tx)
                            .await?;
                        sqlx::query(END_POOL_HOLD)
                            .bind(hold_id.to_string())
                            .bind(HoldState::Converted.as_str())
                            .execute(&mut *$tx)
                            .await?;
                    }
                }
            }
            for write in &$batch.shard_rows {
                sqlx::query(UPDATE_SHARD)
                    .bind(&write.show_id)
                    .bind(&write.pool_id)
                    .bind(write.shard)
                    .bind(write.sold)
                    .bind(write.last_seq)
                    .execute(&mut *$tx)
                    .await?;
            }
            for write in &$batch.checkout_rows {
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
                    .bind($recorded_at_us)
                    .execute(&mut *$tx)
                    .await?;
            }
        }
        key_taken
    }};
}

impl Store {
    /// Appends the batch in one transaction. Returns `Conflict` (and writes
    /// nothing) if any stream already has an event at one of the sequences.
    pub async fn append(&self, batch: &AppendBatch) -> StoreResult<AppendOutcome> {
        let result = match self {
            Store::Postgres(s) => append_pg(&s.pool, batch).await,
            Store::Sqlite(s) => append_sqlite(&s.write, batch).await,
        };
        result.map_err(StoreError::classify)
    }
}

async fn append_pg(pool: &sqlx::PgPool, batch: &AppendBatch) -> Result<AppendOutcome, sqlx::Error> {
    let recorded_at_us = to_micros(batch.recorded_at);
    let mut tx = pool.begin().await?;
    let n = batch.events.len();
    let mut types = Vec::with_capacity(n);
    let mut ids = Vec::with_capacity(n);
    let mut seqs = Vec::with_capacity(n);
    let mut event_types = Vec::with_capacity(n);
    let mut versions = Vec::with_capacity(n);
    let mut payloads = Vec::with_capacity(n);
    let mut metadata = Vec::with_capacity(n);
    let mut shows = Vec::with_capacity(n);
    for e in &batch.events {
        types.push(e.aggregate_type);
        ids.push(e.aggregate_id.as_str());
        seqs.push(e.sequence);
        event_types.push(e.event_type.as_str());
        versions.push(e.event_version.as_str());
        payloads.push(e.payload.as_str());
        metadata.push(e.metadata.as_str());
        shows.push(e.show_id.as_deref());
    }
    let inserted = sqlx::query(PG_INSERT_EVENTS)
        .bind(&types)
        .bind(&ids)
        .bind(&seqs)
        .bind(&event_types)
        .bind(&versions)
        .bind(&payloads)
        .bind(&metadata)
        .bind(vec![recorded_at_us; n])
        .bind(&shows)
        .execute(&mut *tx)
        .await?;
    if inserted.rows_affected() != n as u64 {
        tx.rollback().await?;
        return Ok(AppendOutcome::Conflict);
    }
    if !batch.seat_rows.is_empty() {
        let m = batch.seat_rows.len();
        let mut show_ids = Vec::with_capacity(m);
        let mut seat_ids = Vec::with_capacity(m);
        let mut statuses = Vec::with_capacity(m);
        let mut hold_ids = Vec::with_capacity(m);
        let mut buyers = Vec::with_capacity(m);
        let mut expiries = Vec::with_capacity(m);
        let mut bookings = Vec::with_capacity(m);
        let mut last_seqs = Vec::with_capacity(m);
        for w in &batch.seat_rows {
            let c = SeatColumns::of(&w.row);
            show_ids.push(w.show_id.as_str());
            seat_ids.push(w.seat_id.as_str());
            statuses.push(c.status);
            hold_ids.push(c.hold_id);
            buyers.push(c.buyer);
            expiries.push(c.expires_at_us);
            bookings.push(c.booking_id);
            last_seqs.push(w.last_seq);
        }
        sqlx::query(PG_UPDATE_SEATS)
            .bind(&show_ids)
            .bind(&seat_ids)
            .bind(&statuses)
            .bind(&hold_ids)
            .bind(&buyers)
            .bind(&expiries)
            .bind(&bookings)
            .bind(&last_seqs)
            .execute(&mut *tx)
            .await?;
    }
    let key_taken = write_idempotency_and_holds!(tx, batch, recorded_at_us);
    if key_taken {
        tx.rollback().await?;
        return Ok(AppendOutcome::IdempotencyKeyTaken);
    }
    tx.commit().await?;
    Ok(AppendOutcome::Appended)
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
    let key_taken = write_idempotency_and_holds!(tx, batch, recorded_at_us);
    if key_taken {
        tx.rollback().await?;
        return Ok(AppendOutcome::IdempotencyKeyTaken);
    }
    tx.commit().await?;
    Ok(AppendOutcome::Appended)
}
