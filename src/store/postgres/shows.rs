//! Shows, venues and the rows created with them, on PostgreSQL: the
//! seat rows of a new show in one statement of arrays, and the changed-rows
//! read by log position.

use async_trait::async_trait;
use domain::ids::ShowId;

use super::PgBackend;
use crate::store::shows::{
    insert_shards, insert_show_row, NewShowRows, SeatRow, ShowsDialect, INSERT_SHARD, INSERT_SHOW,
};
use crate::store::sql::{Param, SqlPool};
use crate::store::{StoreError, StoreResult};

const PG_INSERT_SEATS: &str = "INSERT INTO seat_availability (show_id, seat_id, ordinal, section) \
     SELECT $1, s, o, c FROM UNNEST($2::text[], $3::int[], $4::text[]) AS u(s, o, c)";

/// Seat rows of a show changed since a watermark, and the watermark to pass
/// next time, in one statement (one snapshot).
///
/// PostgreSQL (migrations 0013, 0025): the watermark is a position of the
/// show's, the one after its head as the previous read's snapshot saw it
/// (`PG_NEXT_POSITION`): a show's positions grow in its commit order, so
/// every transaction that read could not see writes its events at or above
/// it. The seats that changed are those the show's seat events since then
/// name (a command writes its rows with its events), unless the show's rows
/// were rewritten without events since then (`-2`, at a position taken for
/// it): then the show is read whole.
///
/// The seat rows are found one by one through the primary key (the LIMIT
/// keeps the lateral subquery from being flattened into a join the planner
/// could make a scan of the show's every row).
///
/// The show's events since the watermark are read through
/// `events_show_position` alone: the stream type is tested outside a
/// subquery the planner may not push it into (`OFFSET 0`). Asked inside, it
/// made the planner scan the primary key's every `Seat` entry, of every
/// show, when the log's statistics were young or generic (a log that grew
/// from nothing in the last minute, before autovacuum's first ANALYZE):
/// 8-12 ms a read with 20,000 seat events in the log and nothing new, up to
/// 40 ms under writers, against 0.1 ms (measured by `auto_explain` during
/// `bench --only availability`, and with `EXPLAIN ANALYZE` on 40,000 events).
/// The show's next position, as the watermark's text: after its head (the
/// head's row is the show's own, so on Citus it is read on the show's worker).
macro_rules! pg_next_position {
    () => {
        "(SELECT coalesce((SELECT position FROM log_heads WHERE show_id = $1), 0) + 1)::text"
    };
}

const PG_SEAT_CHANGES: &str = concat!(
    "SELECT a.ordinal, a.status, a.expires_at_us, a.channel, a.ticket_type, a.price_cents, NULL::text \
     FROM (SELECT DISTINCT aggregate_id \
           FROM (SELECT aggregate_type, aggregate_id FROM events \
                 WHERE show_id = $1 AND position >= $2::bigint OFFSET 0) recent \
           WHERE aggregate_type = 'Seat') e \
     CROSS JOIN LATERAL (SELECT ordinal, status, expires_at_us, channel, ticket_type, price_cents \
           FROM seat_availability \
           WHERE show_id = $1 AND seat_id = substr(e.aggregate_id, length($1) + 2) LIMIT 1) a \
     UNION ALL SELECT -2, NULL, NULL, NULL, NULL, NULL, NULL FROM shows \
       WHERE show_id = $1 AND rows_rewritten_at >= $2::bigint \
     UNION ALL SELECT -1, NULL, NULL, NULL, NULL, NULL, ",
    pg_next_position!()
);

/// The whole show, and the watermark to pass next time.
const PG_SEATS: &str = concat!(
    "SELECT ordinal, status, expires_at_us, channel, ticket_type, price_cents, NULL::text \
     FROM seat_availability WHERE show_id = $1 \
     UNION ALL SELECT -1, NULL, NULL, NULL, NULL, NULL, ",
    pg_next_position!()
);

const PG_OWED_SEATS: &str = "SELECT seat_id FROM seat_availability \
     WHERE show_id = $1 AND status = 'held' AND hold_id IS NULL AND booking_id IS NULL \
     UNION ALL \
     SELECT j FROM holds AS h, jsonb_array_elements_text(h.seat_ids::jsonb) AS j \
     WHERE h.state = 'held' AND h.expires_at_us <= $2 AND h.show_id = $1 AND h.pool_id IS NULL";

/// Inserts the show and, if its id was free, its seat rows (one statement
/// of arrays) and shard rows, in one transaction; whether it was free.
async fn insert_show(pool: &sqlx::PgPool, show: &NewShowRows<'_>) -> StoreResult<bool> {
    let mut tx = pool.begin().await.map_err(StoreError::classify)?;
    let done = insert_show_row!(tx, show);
    if done.rows_affected() == 1 {
        let ids: Vec<&str> = show.seats.iter().map(|s| s.0.as_str()).collect();
        let ordinals: Vec<i32> = show.seats.iter().map(|s| s.1).collect();
        let sections: Vec<&str> = show.seats.iter().map(|s| s.2).collect();
        sqlx::query(PG_INSERT_SEATS)
            .bind(show.show_id.as_str())
            .bind(&ids)
            .bind(&ordinals)
            .bind(&sections)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::classify)?;
        insert_shards!(tx, show.show_id.as_str(), show.shards);
    }
    tx.commit().await.map_err(StoreError::classify)?;
    Ok(done.rows_affected() == 1)
}

#[async_trait]
impl ShowsDialect for PgBackend {
    const OWED_SEATS: &str = PG_OWED_SEATS;

    async fn changed_seat_rows(
        &self,
        show_id: &ShowId,
        watermark: &str,
        whole: bool,
    ) -> StoreResult<Vec<SeatRow>> {
        if whole {
            self.query
                .fetch_all(PG_SEATS, &[Param::Text(show_id.as_str())])
                .await
        } else {
            self.query
                .fetch_all(
                    PG_SEAT_CHANGES,
                    &[Param::Text(show_id.as_str()), Param::Text(watermark)],
                )
                .await
        }
    }

    async fn insert_show_rows(&self, show: &NewShowRows<'_>) -> StoreResult<bool> {
        insert_show(&self.pool, show).await
    }
}
