//! Shows and the availability read model.

use std::collections::BTreeMap;

use domain::ids::{ChannelId, PoolId, SeatId, ShowId, TicketType, VenueId};
use domain::seat::SeatStatus;
use domain::show::Show;
use projections::pools::{HeldPlaces, PoolLedger, SoldPlaces};

use super::holds::parse_column;
use super::log::pg_log_bound;
use super::{on_store, retry_read, Backend, Shows, StoreError, StoreResult};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShowInsert {
    Created,
    /// A show with this id exists; this is its stored definition.
    Exists(String),
}

/// A seat to create with the show: `(seat_id, ordinal, section)`.
pub type NewSeat<'a> = (&'a SeatId, i32, &'a str);

/// A pool shard to create with the show: `(pool_id, shard, capacity)`.
pub type NewShard<'a> = (&'a PoolId, i32, i32);

/// A pool's figures as stored (held places counted at the query's `now`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolFigures {
    pub capacity: u32,
    pub sold: u32,
    /// Places held, by the channel they are held through (`None`: public).
    pub held: BTreeMap<Option<ChannelId>, u32>,
    /// Places allocated to each channel and not sold.
    pub allocated: BTreeMap<ChannelId, u32>,
}

impl PoolFigures {
    fn of(ledger: &PoolLedger) -> Self {
        let mut held: BTreeMap<Option<ChannelId>, u32> = BTreeMap::new();
        for places in &ledger.held {
            *held.entry(places.channel.clone()).or_default() += places.places;
        }
        Self {
            capacity: ledger.capacity,
            sold: ledger.sold_places,
            held,
            allocated: ledger.allocated.clone(),
        }
    }
}

const INSERT_SHOW: &str =
    "INSERT INTO shows (show_id, definition, created_at_us) VALUES ($1, $2, $3) \
     ON CONFLICT DO NOTHING";
const SELECT_SHOW: &str = "SELECT definition FROM shows WHERE show_id = $1";
const INSERT_VENUE: &str =
    "INSERT INTO venues (venue_id, definition, created_at_us) VALUES ($1, $2, $3) \
     ON CONFLICT (venue_id) DO NOTHING";
const SELECT_VENUE: &str = "SELECT definition FROM venues WHERE venue_id = $1";
const PG_INSERT_SEATS: &str = "INSERT INTO seat_availability (show_id, seat_id, ordinal, section) \
     SELECT $1, s, o, c FROM UNNEST($2::text[], $3::int[], $4::text[]) AS u(s, o, c)";
/// A new show's rows are `changed` at -1, below every watermark (a log
/// position, 0 while the log is empty): only a whole read returns them.
/// At the column's default, 0, an empty log's watermark (0) named every row
/// changed, and every read of a show created before any event was a whole
/// read (67 ms for 20,000 seats, measured in `bench --only availability`).
const SQLITE_INSERT_SEAT: &str = "INSERT INTO seat_availability \
     (show_id, seat_id, ordinal, section, changed) VALUES ($1, $2, $3, $4, -1)";
/// The SQLite watermark of a whole read: below every `changed`.
const SQLITE_WHOLE_SHOW: &str = "-1";
const INSERT_SHARD: &str =
    "INSERT INTO pool_shards (show_id, pool_id, shard, capacity) VALUES ($1, $2, $3, $4)";
/// A show's shards with what they sold (JSON text) and owe the waiting
/// list, then (`shard` -1) its held places by pool, channel and ticket
/// type, counted at `$2`; public holds counted against `$3` instead (on a
/// show with a waiting list, the minimum: a line hold past its expiry
/// still holds its places, owed to the line).
const SELECT_POOL_LEDGERS: &str =
    "SELECT pool_id, CAST(shard AS BIGINT), CAST(capacity AS BIGINT), CAST(sold AS BIGINT), \
       allocated, sales, NULL AS channel, NULL AS ticket_type, CAST(returned AS BIGINT) \
     FROM pool_shards WHERE show_id = $1 \
     UNION ALL SELECT pool_id, -1, CAST(SUM(quantity) AS BIGINT), 0, NULL, NULL, channel, ticket_type, 0 \
     FROM pool_holds WHERE show_id = $1 AND state = 'held' \
       AND expires_at_us > (CASE WHEN channel IS NULL THEN $3 ELSE $2 END) \
     GROUP BY pool_id, channel, ticket_type";
/// A row of [`SELECT_POOL_LEDGERS`].
type LedgerRow = (
    String,
    i64,
    i64,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    i64,
);

/// A column of JSON text (a `JsonText` field of its row), read back as
/// its value.
fn json_column<T: serde::de::DeserializeOwned>(column: &str, text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{column} {text:?}: {e}")))
}

fn parse_status(value: &str) -> StoreResult<SeatStatus> {
    match value {
        "available" => Ok(SeatStatus::Available),
        "held" => Ok(SeatStatus::Held),
        "booked" => Ok(SeatStatus::Booked),
        other => Err(StoreError::Corrupt(format!("seat status {other:?}"))),
    }
}

/// Pool shards are few (at most MAX_POOL_SHARDS per pool): one insert each.
macro_rules! insert_shards {
    ($tx:expr, $show_id:expr, $shards:expr) => {
        for (pool_id, shard, capacity) in $shards {
            sqlx::query(INSERT_SHARD)
                .bind($show_id)
                .bind(pool_id.as_str())
                .bind(shard)
                .bind(capacity)
                .execute(&mut *$tx)
                .await
                .map_err(StoreError::classify)?;
        }
    };
}

/// The show's own row, in `tx` (the same statement on both stores: the
/// transaction types differ); its outcome.
macro_rules! insert_show_row {
    ($tx:expr, $show:expr) => {
        sqlx::query(INSERT_SHOW)
            .bind($show.show_id.as_str())
            .bind($show.definition)
            .bind($show.created_at_us)
            .execute(&mut *$tx)
            .await
            .map_err(StoreError::classify)?
    };
}

/// A show's definition and the rows created with it.
struct NewShowRows<'a> {
    show_id: &'a ShowId,
    definition: &'a str,
    seats: &'a [NewSeat<'a>],
    shards: &'a [NewShard<'a>],
    created_at_us: i64,
}

/// Inserts the show and, if its id was free, its seat rows (one statement
/// of arrays) and shard rows, in one transaction; whether it was free.
async fn insert_show_pg(pool: &sqlx::PgPool, show: &NewShowRows<'_>) -> StoreResult<bool> {
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

/// As [`insert_show_pg`], a seat row a statement (SQLite has no arrays).
async fn insert_show_sqlite(pool: &sqlx::SqlitePool, show: &NewShowRows<'_>) -> StoreResult<bool> {
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

/// Seat rows of a show changed since a watermark, and the watermark to pass
/// next time, in one statement (one snapshot).
///
/// PostgreSQL (migration 0013): the watermark is a log position, the
/// late-commit bound of the previous read's snapshot (`pg_log_bound!`),
/// (oldest + xid_offset) times 65,536: every transaction that read could not see writes its events
/// at or above it. The seats that changed are those the show's seat events
/// since then name (a command writes its rows with its events), unless the
/// show's rows were rewritten without events since then (`-2`): then the
/// show is read whole.
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
    pg_log_bound!(),
    "::text"
);
/// The whole show, and the watermark to pass next time.
const PG_SEATS: &str = concat!(
    "SELECT ordinal, status, expires_at_us, channel, ticket_type, price_cents, NULL::text \
     FROM seat_availability WHERE show_id = $1 \
     UNION ALL SELECT -1, NULL, NULL, NULL, NULL, NULL, ",
    pg_log_bound!(),
    "::text"
);
const SQLITE_SEAT_CHANGES: &str =
    "SELECT ordinal, status, expires_at_us, channel, ticket_type, price_cents, NULL \
     FROM seat_availability WHERE show_id = $1 AND changed >= CAST($2 AS INTEGER) \
     UNION ALL SELECT -1, NULL, NULL, NULL, NULL, NULL, \
       CAST((SELECT COALESCE(MAX(position), 0) FROM events) AS TEXT)";

/// The watermark that asks for every seat row of a show (no log position
/// reads as it).
pub const WHOLE_SHOW: &str = "whole";

/// A row of a changed-rows read: `(ordinal, status, expires_at_us,
/// channel, ticket_type, price_cents, mark)`; ordinal -1 carries the next
/// watermark, -2 says "read the show whole".
type SeatRow = (
    i32,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
);

/// A seat row as the availability cache keeps it: recorded status and
/// expiry, its channel, and what its hold or booking sold it as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatChange {
    pub ordinal: usize,
    pub status: SeatStatus,
    pub expires_at_us: Option<i64>,
    pub channel: Option<ChannelId>,
    pub sale: Option<(TicketType, i64)>,
}

impl Shows {
    /// The seat rows of a show changed since `watermark` ([`WHOLE_SHOW`]: all of them),
    /// with the watermark for the next call.
    pub async fn seat_changes(
        &self,
        show_id: &ShowId,
        watermark: &str,
    ) -> StoreResult<(Vec<SeatChange>, String)> {
        let rows = self.seat_rows(show_id, watermark, false).await?;
        let rows = match rows {
            Some(rows) => rows,
            // Rewritten without events since the watermark: read it whole.
            None => self
                .seat_rows(show_id, WHOLE_SHOW, true)
                .await?
                .ok_or_else(|| StoreError::Corrupt("a whole-show read asked for itself".into()))?,
        };
        let mut next = None;
        let mut changes = Vec::with_capacity(rows.len());
        for (ordinal, status, expires_at_us, channel, ticket_type, price_cents, mark) in rows {
            match (ordinal, status) {
                (-1, _) => next = mark,
                (ordinal, Some(status)) => {
                    let channel = channel
                        .map(|c| {
                            parse_column("seat_availability.channel", c.as_str(), ChannelId::parse)
                        })
                        .transpose()?;
                    let ticket_type = ticket_type
                        .map(|t| {
                            parse_column(
                                "seat_availability.ticket_type",
                                t.as_str(),
                                TicketType::parse,
                            )
                        })
                        .transpose()?;
                    changes.push(SeatChange {
                        ordinal: ordinal.max(0) as usize,
                        status: parse_status(&status)?,
                        expires_at_us,
                        channel,
                        sale: ticket_type.zip(price_cents),
                    });
                }
                (_, None) => return Err(StoreError::Corrupt("a seat row without status".into())),
            }
        }
        let next = next.ok_or_else(|| StoreError::Corrupt("no watermark".into()))?;
        Ok((changes, next))
    }

    /// One changed-rows read (see [`PG_SEAT_CHANGES`]); `None` if the show
    /// must be read whole instead.
    async fn seat_rows(
        &self,
        show_id: &ShowId,
        watermark: &str,
        whole: bool,
    ) -> StoreResult<Option<Vec<SeatRow>>> {
        let whole = whole || watermark == WHOLE_SHOW;
        let rows: Vec<SeatRow> = retry_read(move || async move {
            match self.backend() {
                Backend::Postgres(s) => {
                    let sql = if whole { PG_SEATS } else { PG_SEAT_CHANGES };
                    let query = sqlx::query_as(sql).bind(show_id.as_str());
                    let query = if whole { query } else { query.bind(watermark) };
                    query
                        .fetch_all(&s.query)
                        .await
                        .map_err(StoreError::classify)
                }
                Backend::Sqlite(s) => sqlx::query_as(SQLITE_SEAT_CHANGES)
                    .bind(show_id.as_str())
                    .bind(if whole { SQLITE_WHOLE_SHOW } else { watermark })
                    .fetch_all(&s.read)
                    .await
                    .map_err(StoreError::classify),
            }
        })
        .await?;
        Ok((!rows.iter().any(|(ordinal, ..)| *ordinal == -2)).then_some(rows))
    }

    /// Creates the show and an available row for each of its seats, in one
    /// transaction; or, if the id is taken, returns the stored definition.
    pub async fn insert_show(
        &self,
        show_id: &ShowId,
        definition: &str,
        seats: &[NewSeat<'_>],
        shards: &[NewShard<'_>],
        created_at_us: i64,
    ) -> StoreResult<ShowInsert> {
        let show = NewShowRows {
            show_id,
            definition,
            seats,
            shards,
            created_at_us,
        };
        let inserted = match self.backend() {
            Backend::Postgres(s) => insert_show_pg(&s.pool, &show).await?,
            Backend::Sqlite(s) => insert_show_sqlite(&s.write, &show).await?,
        };
        if inserted {
            return Ok(ShowInsert::Created);
        }
        let existing = self.show_definition(show_id).await?.ok_or_else(|| {
            StoreError::Corrupt(format!("show {show_id} conflicted but cannot be read"))
        })?;
        Ok(ShowInsert::Exists(existing))
    }

    /// Creates the venue; or, if the id is taken, returns the stored
    /// definition.
    pub async fn insert_venue(
        &self,
        venue_id: &VenueId,
        definition: &str,
        created_at_us: i64,
    ) -> StoreResult<ShowInsert> {
        let inserted = on_store!(self, write pool => {
            sqlx::query(INSERT_VENUE)
                .bind(venue_id.as_str())
                .bind(definition)
                .bind(created_at_us)
                .execute(pool)
                .await
                .map_err(StoreError::classify)?
                .rows_affected()
        });
        if inserted == 1 {
            return Ok(ShowInsert::Created);
        }
        let existing = self.venue_definition(venue_id).await?.ok_or_else(|| {
            StoreError::Corrupt(format!("venue {venue_id} conflicted but cannot be read"))
        })?;
        Ok(ShowInsert::Exists(existing))
    }

    /// The stored definition of a venue (canonical JSON), if it exists.
    pub async fn venue_definition(&self, venue_id: &VenueId) -> StoreResult<Option<String>> {
        retry_read(move || async move {
            on_store!(self, read pool => {
                sqlx::query_scalar(SELECT_VENUE)
                    .bind(venue_id.as_str())
                    .fetch_optional(pool)
                    .await
                    .map_err(StoreError::classify)
            })
        })
        .await
    }

    /// The stored definition of a show (canonical JSON), if it exists.
    pub async fn show_definition(&self, show_id: &ShowId) -> StoreResult<Option<String>> {
        retry_read(move || async move {
            on_store!(self, read pool => {
                sqlx::query_scalar(SELECT_SHOW)
                    .bind(show_id.as_str())
                    .fetch_optional(pool)
                    .await
                    .map_err(StoreError::classify)
            })
        })
        .await
    }

    /// Capacity, sold, held (by channel) and allocated places of each pool
    /// of a show, held counted at `now_us` (places owed to its waiting list
    /// read as held).
    pub async fn pool_figures(
        &self,
        show: &Show,
        now_us: i64,
    ) -> StoreResult<BTreeMap<PoolId, PoolFigures>> {
        let ledgers = self.pool_ledgers(show, now_us).await?;
        Ok(ledgers
            .into_iter()
            .map(|(pool_id, ledger)| (pool_id, PoolFigures::of(&ledger)))
            .collect())
    }

    /// What a report counts of each pool of a show at `now_us` (held places
    /// counted then; places owed to its waiting list as held by the line).
    pub async fn pool_ledgers(
        &self,
        show: &Show,
        now_us: i64,
    ) -> StoreResult<BTreeMap<PoolId, PoolLedger>> {
        let show_id = &show.show_id;
        let public_us = match show.waitlist {
            Some(_) => i64::MIN,
            None => now_us,
        };
        let rows: Vec<LedgerRow> = on_store!(self, query pool => {
            retry_read(move || async move {
                sqlx::query_as(SELECT_POOL_LEDGERS)
                    .bind(show_id.as_str())
                    .bind(now_us)
                    .bind(public_us)
                    .fetch_all(pool)
                    .await
                    .map_err(StoreError::classify)
            })
            .await?
        });
        let count = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
        let mut pools: BTreeMap<PoolId, PoolLedger> = BTreeMap::new();
        for (pool_id, shard, places, sold, allocated, sales, channel, ticket_type, returned) in rows
        {
            let pool_id = parse_column("pool_shards.pool_id", pool_id.as_str(), PoolId::parse)?;
            let ledger = pools.entry(pool_id).or_default();
            if shard < 0 {
                let held = HeldPlaces {
                    channel: channel
                        .map(|c| parse_column("pool_holds.channel", c.as_str(), ChannelId::parse))
                        .transpose()?,
                    ticket_type: ticket_type
                        .map(|t| {
                            parse_column("pool_holds.ticket_type", t.as_str(), TicketType::parse)
                        })
                        .transpose()?,
                    places: count(places),
                };
                ledger.held.push(held);
                continue;
            }
            ledger.capacity += count(places);
            ledger.sold_places += count(sold);
            let allocated: BTreeMap<ChannelId, u32> = json_column(
                "pool_shards.allocated",
                allocated.as_deref().unwrap_or("{}"),
            )?;
            let sold: Vec<SoldPlaces> =
                json_column("pool_shards.sales", sales.as_deref().unwrap_or("[]"))?;
            let owed = HeldPlaces {
                channel: None,
                ticket_type: None,
                places: count(returned),
            };
            ledger.add_rows(sold, &allocated, (owed.places > 0).then_some(owed));
        }
        Ok(pools)
    }

    /// The earliest `expires_at` after `now_us` of a held pool place of the
    /// show: when its pools' figures next change without any event.
    pub async fn next_pool_expiry(
        &self,
        show_id: &ShowId,
        now_us: i64,
    ) -> StoreResult<Option<i64>> {
        on_store!(self, query pool => {
            retry_read(move || async move {
                sqlx::query_scalar(
                    "SELECT MIN(expires_at_us) FROM pool_holds \
                     WHERE show_id = $1 AND state = 'held' AND expires_at_us > $2",
                )
                .bind(show_id.as_str())
                .bind(now_us)
                .fetch_one(pool)
                .await
                .map_err(StoreError::classify)
            })
            .await
        })
    }
}

/// Seats owed to a show's waiting list: returned (held, by no hold), or
/// held by a line hold whose `expires_at` has passed (its seat row names
/// no expiry: the hold's record does).
const OWED_SEATS: &str = "SELECT seat_id FROM seat_availability \
     WHERE show_id = $1 AND status = 'held' AND hold_id IS NULL AND booking_id IS NULL \
     UNION ALL \
     SELECT j.value FROM holds AS h, json_each(h.seat_ids) AS j \
     WHERE h.state = 'held' AND h.expires_at_us <= $2 AND h.show_id = $1 AND h.pool_id IS NULL";
const PG_OWED_SEATS: &str = "SELECT seat_id FROM seat_availability \
     WHERE show_id = $1 AND status = 'held' AND hold_id IS NULL AND booking_id IS NULL \
     UNION ALL \
     SELECT j FROM holds AS h, jsonb_array_elements_text(h.seat_ids::jsonb) AS j \
     WHERE h.state = 'held' AND h.expires_at_us <= $2 AND h.show_id = $1 AND h.pool_id IS NULL";

/// Places owed to a show's waiting list by pool: its shards' returned
/// places, and the public (line) holds past their `expires_at`.
const OWED_PLACES: &str = "SELECT pool_id, CAST(returned AS BIGINT) FROM pool_shards \
     WHERE show_id = $1 AND returned > 0 \
     UNION ALL \
     SELECT pool_id, CAST(quantity AS BIGINT) FROM pool_holds \
     WHERE show_id = $1 AND state = 'held' AND channel IS NULL AND expires_at_us <= $2";

/// Every show's id, and nothing of its definition: a show's definition
/// (megabytes for 100,000 seats, stored out of line) is read once per
/// instance, through the catalog. A text match over every definition, run
/// by the waiting lists' worker every 2 s on every instance, was the
/// busiest query after the appends in `bench --only holds,availability`
/// (sampled from `pg_stat_activity`).
const SHOW_IDS: &str = "SELECT show_id FROM shows ORDER BY show_id";

impl Shows {
    /// The seats a show's waiting list is owed at `now_us` (see
    /// [`OWED_SEATS`]): candidates for the line's judgement, whose seat
    /// streams decide. An expired hold that was not a line hold is among
    /// them too: its seat is free and the line passes it over.
    pub async fn owed_seats(&self, show_id: &ShowId, now_us: i64) -> StoreResult<Vec<SeatId>> {
        let ids: Vec<String> = retry_read(move || async move {
            match self.backend() {
                Backend::Postgres(s) => sqlx::query_scalar(PG_OWED_SEATS)
                    .bind(show_id.as_str())
                    .bind(now_us)
                    .fetch_all(&s.query)
                    .await
                    .map_err(StoreError::classify),
                Backend::Sqlite(s) => sqlx::query_scalar(OWED_SEATS)
                    .bind(show_id.as_str())
                    .bind(now_us)
                    .fetch_all(&s.read)
                    .await
                    .map_err(StoreError::classify),
            }
        })
        .await?;
        let mut seats = ids
            .iter()
            .map(|id| parse_column("seat_availability.seat_id", id.as_str(), SeatId::parse))
            .collect::<StoreResult<Vec<_>>>()?;
        seats.sort();
        seats.dedup();
        Ok(seats)
    }

    /// The places of each pool a show's waiting list is owed at `now_us`
    /// (see [`OWED_PLACES`]): candidates, whose shards decide.
    pub async fn owed_places(
        &self,
        show_id: &ShowId,
        now_us: i64,
    ) -> StoreResult<BTreeMap<PoolId, u32>> {
        let rows: Vec<(String, i64)> = on_store!(self, query pool => {
            retry_read(move || async move {
                sqlx::query_as(OWED_PLACES)
                    .bind(show_id.as_str())
                    .bind(now_us)
                    .fetch_all(pool)
                    .await
                    .map_err(StoreError::classify)
            })
            .await?
        });
        let mut owed: BTreeMap<PoolId, u32> = BTreeMap::new();
        for (pool_id, places) in rows {
            let pool_id = parse_column("pool_shards.pool_id", pool_id.as_str(), PoolId::parse)?;
            *owed.entry(pool_id).or_default() += u32::try_from(places.max(0)).unwrap_or(u32::MAX);
        }
        Ok(owed)
    }

    /// Every show's id (see [`SHOW_IDS`]).
    pub async fn show_ids(&self) -> StoreResult<Vec<ShowId>> {
        let ids: Vec<String> = retry_read(move || async move {
            on_store!(self, read pool => {
                sqlx::query_scalar(SHOW_IDS)
                    .fetch_all(pool)
                    .await
                    .map_err(StoreError::classify)
            })
        })
        .await?;
        ids.iter()
            .map(|id| parse_column("shows.show_id", id.as_str(), ShowId::parse))
            .collect()
    }
}
