//! Reading the event log in global order: for the projector, replay,
//! verify and the audit API.

use super::{on_store, Store, StoreError, StoreResult};

/// One event as the log holds it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LogEvent {
    pub position: i64,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub sequence: i64,
    pub event_type: String,
    pub payload: String,
    pub metadata: String,
    pub recorded_at_us: i64,
    pub show_id: Option<String>,
}

/// Lag is counted up to this many events (readiness allows far fewer).
pub const MAX_COUNTED_LAG: i64 = 1_000_000;

const PG_COLUMNS: &str = "position, aggregate_type, aggregate_id, sequence, event_type, \
     payload::text AS payload, metadata::text AS metadata, recorded_at_us, show_id";
const SQLITE_COLUMNS: &str = "position, aggregate_type, aggregate_id, sequence, event_type, \
     payload, metadata, recorded_at_us, show_id";

/// On PostgreSQL a reader of the log in position order must not pass a
/// transaction that has drawn positions but not committed: its events would
/// appear later *below* the reader's position. Appends draw their xid and
/// their positions in one order (see `booking_append`), so every event whose
/// xid is below the oldest running transaction's is final, and so is every
/// position below it. SQLite has one writer: commit order is position order.
const PG_SAFE: &str = "txid < pg_snapshot_xmin(pg_current_snapshot())";

pub enum LogFilter<'a> {
    All,
    Show(&'a str),
    Stream(&'a str, &'a str),
}

impl Store {
    /// Up to `limit` events after `after` in global order, never past a
    /// transaction still open (see `PG_SAFE`): what a tailing reader needs.
    pub async fn read_log(
        &self,
        filter: LogFilter<'_>,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<LogEvent>> {
        self.read_log_from(filter, after, limit, true).await
    }

    /// Every committed event after `after`, even above an open transaction:
    /// for a whole-log fold (replay, verify, a report) that keeps no cursor.
    /// An event that commits later below the cursor is not in the fold; its
    /// rows come with its own transaction, and the projector applies it.
    pub async fn read_log_committed(
        &self,
        filter: LogFilter<'_>,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<LogEvent>> {
        self.read_log_from(filter, after, limit, false).await
    }

    /// The highest position a tailing reader can reach now (see `PG_SAFE`).
    pub async fn safe_head(&self) -> StoreResult<i64> {
        let sql = match self {
            Store::Postgres(_) => format!("SELECT MAX(position) FROM events WHERE {PG_SAFE}"),
            Store::Sqlite(_) => "SELECT MAX(position) FROM events".to_owned(),
        };
        on_store!(self, read pool => {
            let head: Option<i64> = sqlx::query_scalar(&sql)
                .fetch_one(pool)
                .await
                .map_err(StoreError::classify)?;
            Ok(head.unwrap_or(0))
        })
    }

    async fn read_log_from(
        &self,
        filter: LogFilter<'_>,
        after: i64,
        limit: i64,
        tailing: bool,
    ) -> StoreResult<Vec<LogEvent>> {
        let (columns, safe) = match self {
            Store::Postgres(_) if tailing => (PG_COLUMNS, format!(" AND {PG_SAFE}")),
            Store::Postgres(_) => (PG_COLUMNS, String::new()),
            Store::Sqlite(_) => (SQLITE_COLUMNS, String::new()),
        };
        let (condition, binds): (&str, Vec<&str>) = match filter {
            LogFilter::All => ("TRUE", vec![]),
            LogFilter::Show(show) => ("show_id = $3", vec![show]),
            LogFilter::Stream(kind, id) => {
                ("aggregate_type = $3 AND aggregate_id = $4", vec![kind, id])
            }
        };
        let sql = format!(
            "SELECT {columns} FROM events WHERE position > $1 AND {condition}{safe} ORDER BY position LIMIT $2"
        );
        on_store!(self, read pool => {
            let mut query = sqlx::query_as::<_, LogEvent>(&sql).bind(after).bind(limit);
            for bind in binds {
                query = query.bind(bind);
            }
            query.fetch_all(pool).await.map_err(StoreError::classify)
        })
    }

    /// Events of a show recorded at or before `at_us`, in global order.
    pub async fn show_log_until(&self, show_id: &str, at_us: i64) -> StoreResult<Vec<LogEvent>> {
        let columns = match self {
            Store::Postgres(_) => PG_COLUMNS,
            Store::Sqlite(_) => SQLITE_COLUMNS,
        };
        let sql = format!(
            "SELECT {columns} FROM events WHERE show_id = $1 AND recorded_at_us <= $2 ORDER BY position"
        );
        on_store!(self, read pool => {
            sqlx::query_as::<_, LogEvent>(&sql)
                .bind(show_id)
                .bind(at_us)
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    /// Refreshes the planner's statistics of the log (PostgreSQL; SQLite's
    /// planner needs none for these queries).
    pub async fn analyze_log(&self) -> StoreResult<()> {
        if let Store::Postgres(s) = self {
            sqlx::query("ANALYZE events")
                .execute(&s.pool)
                .await
                .map_err(StoreError::classify)?;
        }
        Ok(())
    }

    pub async fn checkpoint(&self, name: &str) -> StoreResult<i64> {
        on_store!(self, read pool => {
            let position: Option<i64> = sqlx::query_scalar("SELECT position FROM projector_checkpoints WHERE name = $1")
                .bind(name)
                .fetch_optional(pool)
                .await
                .map_err(StoreError::classify)?;
            position.ok_or_else(|| StoreError::Corrupt(format!("no checkpoint {name}")))
        })
    }

    /// Events in the log after `position` (how far a reader there is
    /// behind), counted up to `MAX_COUNTED_LAG`: the count walks the
    /// position index, so a reader far behind costs a bounded read.
    pub async fn count_after(&self, position: i64) -> StoreResult<i64> {
        on_store!(self, read pool => {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM (SELECT 1 FROM events WHERE position > $1 ORDER BY position LIMIT $2) behind",
            )
            .bind(position)
            .bind(MAX_COUNTED_LAG)
            .fetch_one(pool)
            .await
            .map_err(StoreError::classify)
        })
    }

    /// The highest position in the log (0 when empty).
    pub async fn head_position(&self) -> StoreResult<i64> {
        on_store!(self, read pool => {
            let head: Option<i64> = sqlx::query_scalar("SELECT MAX(position) FROM events")
                .fetch_one(pool)
                .await
                .map_err(StoreError::classify)?;
            Ok(head.unwrap_or(0))
        })
    }

    /// Resets the named projections to their state before any event, in
    /// one transaction: seat and shard rows back to free, hold and checkout
    /// rows gone. Replaying the log rebuilds them.
    pub async fn reset_projections(&self, which: &[Projection]) -> StoreResult<()> {
        let statements: Vec<&str> = which
            .iter()
            .flat_map(|p| p.reset_sql().iter().copied())
            .collect();
        on_store!(self, write pool => {
            let mut tx = pool.begin().await.map_err(StoreError::classify)?;
            for sql in statements {
                sqlx::query(sql).execute(&mut *tx).await.map_err(StoreError::classify)?;
            }
            tx.commit().await.map_err(StoreError::classify)?;
        });
        Ok(())
    }
}

/// The read models, by the name `booking replay --projection` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Projection {
    /// `seat_availability` and `pool_shards`.
    Availability,
    /// `holds`, `hold_seats` and `pool_holds`.
    Holds,
    /// `checkouts` (bookings).
    Checkouts,
}

impl Projection {
    pub const ALL: [Projection; 3] = [
        Projection::Availability,
        Projection::Holds,
        Projection::Checkouts,
    ];

    fn reset_sql(self) -> &'static [&'static str] {
        match self {
            Projection::Availability => &[
                "UPDATE seat_availability SET status = 'available', hold_id = NULL, buyer = NULL, \
                 expires_at_us = NULL, booking_id = NULL, last_seq = 0",
                "UPDATE pool_shards SET sold = 0, last_seq = 0",
            ],
            Projection::Holds => &[
                "DELETE FROM hold_seats",
                "DELETE FROM pool_holds",
                "DELETE FROM holds",
            ],
            Projection::Checkouts => &["DELETE FROM checkouts"],
        }
    }
}

/// show_id, seat_id, then the columns of `verify::SeatRow`.
type SeatDump = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
    i64,
);
/// hold_id, then the columns of `verify::HoldRow`.
type HoldDump = (
    String,
    String,
    String,
    i64,
    String,
    Option<String>,
    Option<String>,
);

impl Store {
    /// Every row of every projection (seat and shard rows only once an
    /// event touched them), for `booking verify`.
    pub async fn dump_projections(&self) -> StoreResult<crate::verify::Tables> {
        use crate::verify::{CheckoutRow, HoldRow, PoolHoldRow, SeatRow};
        on_store!(self, read pool => {
            let mut tables = crate::verify::Tables::default();
            let seats: Vec<SeatDump> =
                sqlx::query_as("SELECT show_id, seat_id, status, hold_id, buyer, expires_at_us, booking_id, last_seq \
                                FROM seat_availability WHERE last_seq > 0")
                    .fetch_all(pool).await.map_err(StoreError::classify)?;
            for (show, seat, status, hold, buyer, expires, booking, seq) in seats {
                let row: SeatRow = (status, hold, buyer, expires, booking, seq);
                tables.seats.insert((show, seat), row);
            }
            let shards: Vec<(String, String, i32, i32, i64)> =
                sqlx::query_as("SELECT show_id, pool_id, shard, sold, last_seq FROM pool_shards WHERE last_seq > 0")
                    .fetch_all(pool).await.map_err(StoreError::classify)?;
            for (show, pool_id, shard, sold, seq) in shards {
                tables.shards.insert((show, pool_id, shard), (sold, seq));
            }
            let holds: Vec<HoldDump> =
                sqlx::query_as("SELECT hold_id, show_id, buyer, expires_at_us, state, booking_id, pool_id FROM holds")
                    .fetch_all(pool).await.map_err(StoreError::classify)?;
            for (hold, show, buyer, expires, state, booking, pool_id) in holds {
                let row: HoldRow = (show, buyer, expires, state, booking, pool_id);
                tables.holds.insert(hold, row);
            }
            let hold_seats: Vec<(String, String)> = sqlx::query_as("SELECT hold_id, seat_id FROM hold_seats")
                .fetch_all(pool).await.map_err(StoreError::classify)?;
            tables.hold_seats.extend(hold_seats);
            let parts: Vec<(String, i32, String, String, i32, i64, String)> =
                sqlx::query_as("SELECT hold_id, shard, show_id, pool_id, quantity, expires_at_us, state FROM pool_holds")
                    .fetch_all(pool).await.map_err(StoreError::classify)?;
            for (hold, shard, show, pool_id, quantity, expires, state) in parts {
                let row: PoolHoldRow = (show, pool_id, quantity, expires, state);
                tables.pool_holds.insert((hold, shard), row);
            }
            type Checkout = (String, String, String, String, Option<String>, Option<String>, Option<String>, Option<String>, Option<i64>, i64);
            let checkouts: Vec<Checkout> = sqlx::query_as(
                "SELECT hold_id, show_id, buyer, phase, booking_id, charge_id, refund_id, refund_reason, amount_cents, last_seq \
                 FROM checkouts")
                .fetch_all(pool).await.map_err(StoreError::classify)?;
            for (hold, show, buyer, phase, booking, charge, refund, reason, amount, seq) in checkouts {
                let row: CheckoutRow = (show, buyer, phase, booking, charge, refund, reason, amount, seq);
                tables.checkouts.insert(hold, row);
            }
            Ok(tables)
        })
    }
}
