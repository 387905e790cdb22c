//! Shows, venues and the rows created with them, on SQLite: a seat row a
//! statement (no arrays), and the changed-rows read by each row's
//! `changed` position.

use async_trait::async_trait;
use domain::ids::ShowId;

use super::SqliteBackend;
use crate::store::shows::{
    insert_shards, insert_show_row, NewShowRows, SeatRow, ShowsDialect, INSERT_SHARD, INSERT_SHOW,
};
use crate::store::sql::{Param, SqlPool};
use crate::store::{StoreError, StoreResult};

/// A new show's rows are `changed` at -1, below every watermark (a log
/// position, 0 while the log is empty): only a whole read returns them.
/// At the column's default, 0, an empty log's watermark (0) named every row
/// changed, and every read of a show created before any event was a whole
/// read (67 ms for 20,000 seats, measured in `bench --only availability`).
const SQLITE_INSERT_SEAT: &str = "INSERT INTO seat_availability \
     (show_id, seat_id, ordinal, section, changed) VALUES ($1, $2, $3, $4, -1)";

/// The SQLite watermark of a whole read: below every `changed`.
const SQLITE_WHOLE_SHOW: &str = "-1";

const SQLITE_SEAT_CHANGES: &str =
    "SELECT ordinal, status, expires_at_us, channel, ticket_type, price_cents, NULL \
     FROM seat_availability WHERE show_id = $1 AND changed >= CAST($2 AS INTEGER) \
     UNION ALL SELECT -1, NULL, NULL, NULL, NULL, NULL, \
       CAST((SELECT COALESCE(MAX(position), 0) FROM events) AS TEXT)";

/// Seats owed to a show's waiting list: returned (held, by no hold), or
/// held by a returning hold whose `expires_at` has passed (its seat row names
/// no expiry: the hold's record does).
const SQLITE_OWED_SEATS: &str = "SELECT seat_id FROM seat_availability \
     WHERE show_id = $1 AND status = 'held' AND hold_id IS NULL AND booking_id IS NULL \
     UNION ALL \
     SELECT j.value FROM holds AS h, json_each(h.seat_ids) AS j \
     WHERE h.state = 'held' AND h.expires_at_us <= $2 AND h.show_id = $1 AND h.pool_id IS NULL";

/// Inserts the show and, if its id was free, its seat rows (a statement
/// each: SQLite has no arrays) and shard rows, in one transaction; whether
/// it was free.
async fn insert_show(pool: &sqlx::SqlitePool, show: &NewShowRows<'_>) -> StoreResult<bool> {
    let mut tx = pool.begin().await.map_err(StoreError::classify)?;
    let done = insert_show_row!(tx, show);
    if done.rows_affected() == 1 {
        for (seat_id, ordinal, section) in show.seats {
            sqlx::query(SQLITE_INSERT_SEAT)
                .bind(show.show_id.as_str())
                .bind(seat_id.as_str())
                .bind(ordinal)
                .bind(section)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::classify)?;
        }
        insert_shards!(tx, show.show_id.as_str(), show.shards);
    }
    tx.commit().await.map_err(StoreError::classify)?;
    Ok(done.rows_affected() == 1)
}

#[async_trait]
impl ShowsDialect for SqliteBackend {
    const OWED_SEATS: &str = SQLITE_OWED_SEATS;

    async fn changed_seat_rows(
        &self,
        show_id: &ShowId,
        watermark: &str,
        whole: bool,
    ) -> StoreResult<Vec<SeatRow>> {
        let watermark = if whole { SQLITE_WHOLE_SHOW } else { watermark };
        self.read
            .fetch_all(
                SQLITE_SEAT_CHANGES,
                &[Param::Text(show_id.as_str()), Param::Text(watermark)],
            )
            .await
    }

    async fn insert_show_rows(&self, show: &NewShowRows<'_>) -> StoreResult<bool> {
        insert_show(&self.write, show).await
    }
}
