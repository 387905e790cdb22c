//! Shows and the availability read model.

use std::collections::BTreeMap;

use async_trait::async_trait;

use domain::ids::{ChannelId, PoolId, SeatId, ShowId, TicketType, VenueId};
use domain::seat::SeatStatus;
use domain::show::Show;
use projections::pools::{HeldPlaces, PoolLedger, SoldPlaces};

use super::holds::parse_column;
use super::sql::{Param, Pools, SqlPool};
use super::{handle, retry_read, StoreError, StoreResult};

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

pub(super) const INSERT_SHOW: &str =
    "INSERT INTO shows (show_id, definition, created_at_us) VALUES ($1, $2, $3) \
     ON CONFLICT DO NOTHING";
const SELECT_SHOW: &str = "SELECT definition FROM shows WHERE show_id = $1";
const INSERT_VENUE: &str =
    "INSERT INTO venues (venue_id, definition, created_at_us) VALUES ($1, $2, $3) \
     ON CONFLICT (venue_id) DO NOTHING";
const SELECT_VENUE: &str = "SELECT definition FROM venues WHERE venue_id = $1";
pub(super) const INSERT_SHARD: &str =
    "INSERT INTO pool_shards (show_id, pool_id, shard, capacity) VALUES ($1, $2, $3, $4)";
/// A show's shards with what they sold (JSON text) and owe the waiting
/// list, then (`shard` -1) its held places by pool, channel and ticket
/// type, counted at `$2`; public holds counted against `$3` instead (on a
/// show with a waiting list, the minimum: a returning hold past its expiry
/// still holds its places, owed to the waiting list).
const SELECT_POOL_LEDGERS: &str =
    "SELECT pool_id, CAST(shard AS BIGINT), CAST(capacity AS BIGINT), CAST(sold AS BIGINT), \
       allocated, sales, NULL AS channel, NULL AS ticket_type, CAST(returned AS BIGINT) \
     FROM pool_shards WHERE show_id = $1 \
     UNION ALL SELECT pool_id, -1, CAST(SUM(quantity) AS BIGINT), 0, NULL, NULL, channel, ticket_type, 0 \
     FROM pool_holds WHERE show_id = $1 AND state = 'held' \
       AND expires_at_us > (CASE WHEN channel IS NULL THEN $3 ELSE $2 END) \
     GROUP BY pool_id, channel, ticket_type";
/// A row of [`SELECT_POOL_LEDGERS`].
pub type LedgerRow = (
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

pub(super) use insert_shards;

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

pub(super) use insert_show_row;

/// A show's definition and the rows created with it.
pub struct NewShowRows<'a> {
    pub show_id: &'a ShowId,
    pub definition: &'a str,
    pub seats: &'a [NewSeat<'a>],
    pub shards: &'a [NewShard<'a>],
    pub created_at_us: i64,
}

/// The watermark that asks for every seat row of a show (no log position
/// reads as it).
pub const WHOLE_SHOW: &str = "whole";

/// A row of a changed-rows read: `(ordinal, status, expires_at_us,
/// channel, ticket_type, price_cents, mark)`; ordinal -1 carries the next
/// watermark, -2 says "read the show whole".
pub type SeatRow = (
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

/// Shows, venues and the rows created with them. One call is one
/// statement or one transaction; the handle reads again after a lost
/// connection and parses what is read. Implemented once, for every
/// backend's [`Pools`], with the pieces the dialects write apart
/// ([`ShowsDialect`]).
#[async_trait]
pub trait ShowsPort: Send + Sync {
    /// One changed-rows read of a show's seats since `watermark` (`whole`:
    /// all of them), on the pool of public queries; the rows of
    /// [`SeatRow`].
    async fn seat_rows(
        &self,
        show_id: &ShowId,
        watermark: &str,
        whole: bool,
    ) -> StoreResult<Vec<SeatRow>>;

    /// Inserts the show and, if its id was free, its seat and shard rows,
    /// in one transaction; whether it was free.
    async fn insert_show(&self, show: &NewShowRows<'_>) -> StoreResult<bool>;

    /// Inserts the venue if its id is free; whether it was.
    async fn insert_venue(
        &self,
        venue_id: &VenueId,
        definition: &str,
        created_at_us: i64,
    ) -> StoreResult<bool>;

    async fn venue_definition(&self, venue_id: &VenueId) -> StoreResult<Option<String>>;

    async fn show_definition(&self, show_id: &ShowId) -> StoreResult<Option<String>>;

    /// The rows of [`SELECT_POOL_LEDGERS`], on the pool of public queries.
    async fn pool_ledger_rows(
        &self,
        show_id: &ShowId,
        now_us: i64,
        public_us: i64,
    ) -> StoreResult<Vec<LedgerRow>>;

    /// The earliest `expires_at` after `now_us` of a held pool place of the
    /// show, on the pool of public queries.
    async fn next_pool_expiry(&self, show_id: &ShowId, now_us: i64) -> StoreResult<Option<i64>>;

    /// The ids of the seats a show's waiting list is owed at `now_us`
    /// (returned, or held by a returning hold past its `expires_at`), each once
    /// or more.
    async fn owed_seat_ids(&self, show_id: &ShowId, now_us: i64) -> StoreResult<Vec<String>>;

    /// The rows of [`OWED_PLACES`], on the pool of public queries.
    async fn owed_place_rows(
        &self,
        show_id: &ShowId,
        now_us: i64,
    ) -> StoreResult<Vec<(String, i64)>>;

    /// Every show's id (see [`SHOW_IDS`]).
    async fn show_ids(&self) -> StoreResult<Vec<String>>;
}

/// What the dialects write apart of shows (`postgres/shows.rs`,
/// `sqlite/shows.rs`): the changed-seat read, a new show's seat rows, and
/// the seats owed to a waiting list (JSON is each dialect's own).
#[async_trait]
pub trait ShowsDialect {
    /// The ids of the seats a show's waiting list is owed at `$2`: see
    /// [`ShowsPort::owed_seat_ids`].
    const OWED_SEATS: &'static str;

    /// See [`ShowsPort::seat_rows`].
    async fn changed_seat_rows(
        &self,
        show_id: &ShowId,
        watermark: &str,
        whole: bool,
    ) -> StoreResult<Vec<SeatRow>>;

    /// See [`ShowsPort::insert_show`].
    async fn insert_show_rows(&self, show: &NewShowRows<'_>) -> StoreResult<bool>;
}

#[async_trait]
impl<B: Pools + ShowsDialect> ShowsPort for B {
    async fn seat_rows(
        &self,
        show_id: &ShowId,
        watermark: &str,
        whole: bool,
    ) -> StoreResult<Vec<SeatRow>> {
        self.changed_seat_rows(show_id, watermark, whole).await
    }

    async fn insert_show(&self, show: &NewShowRows<'_>) -> StoreResult<bool> {
        self.insert_show_rows(show).await
    }

    async fn insert_venue(
        &self,
        venue_id: &VenueId,
        definition: &str,
        created_at_us: i64,
    ) -> StoreResult<bool> {
        insert_venue(self.writes(), venue_id, definition, created_at_us).await
    }

    async fn venue_definition(&self, venue_id: &VenueId) -> StoreResult<Option<String>> {
        venue_definition(self.reads(), venue_id).await
    }

    async fn show_definition(&self, show_id: &ShowId) -> StoreResult<Option<String>> {
        show_definition(self.reads(), show_id).await
    }

    async fn pool_ledger_rows(
        &self,
        show_id: &ShowId,
        now_us: i64,
        public_us: i64,
    ) -> StoreResult<Vec<LedgerRow>> {
        pool_ledger_rows(self.queries(), show_id, now_us, public_us).await
    }

    async fn next_pool_expiry(&self, show_id: &ShowId, now_us: i64) -> StoreResult<Option<i64>> {
        next_pool_expiry(self.queries(), show_id, now_us).await
    }

    async fn owed_seat_ids(&self, show_id: &ShowId, now_us: i64) -> StoreResult<Vec<String>> {
        let ids: Vec<(String,)> = self
            .queries()
            .fetch_all(
                Self::OWED_SEATS,
                &[Param::Text(show_id.as_str()), Param::Int(now_us)],
            )
            .await?;
        Ok(ids.into_iter().map(|(id,)| id).collect())
    }

    async fn owed_place_rows(
        &self,
        show_id: &ShowId,
        now_us: i64,
    ) -> StoreResult<Vec<(String, i64)>> {
        owed_place_rows(self.queries(), show_id, now_us).await
    }

    async fn show_ids(&self) -> StoreResult<Vec<String>> {
        show_ids(self.reads()).await
    }
}

handle!(
    /// Show definitions and the seat and shard rows: [`ShowsPort`].
    Shows: ShowsPort
);

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

    /// One changed-rows read (see [`ShowsPort::seat_rows`]); `None` if the show
    /// must be read whole instead.
    async fn seat_rows(
        &self,
        show_id: &ShowId,
        watermark: &str,
        whole: bool,
    ) -> StoreResult<Option<Vec<SeatRow>>> {
        let whole = whole || watermark == WHOLE_SHOW;
        let rows = retry_read(move || self.port.seat_rows(show_id, watermark, whole)).await?;
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
        if self.port.insert_show(&show).await? {
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
        let inserted = self
            .port
            .insert_venue(venue_id, definition, created_at_us)
            .await?;
        if inserted {
            return Ok(ShowInsert::Created);
        }
        let existing = self.venue_definition(venue_id).await?.ok_or_else(|| {
            StoreError::Corrupt(format!("venue {venue_id} conflicted but cannot be read"))
        })?;
        Ok(ShowInsert::Exists(existing))
    }

    /// The stored definition of a venue (canonical JSON), if it exists.
    pub async fn venue_definition(&self, venue_id: &VenueId) -> StoreResult<Option<String>> {
        retry_read(move || self.port.venue_definition(venue_id)).await
    }

    /// The stored definition of a show (canonical JSON), if it exists.
    pub async fn show_definition(&self, show_id: &ShowId) -> StoreResult<Option<String>> {
        retry_read(move || self.port.show_definition(show_id)).await
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
    /// counted then; places owed to its waiting list as held by the waiting list).
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
        let rows =
            retry_read(move || self.port.pool_ledger_rows(show_id, now_us, public_us)).await?;
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
        retry_read(move || self.port.next_pool_expiry(show_id, now_us)).await
    }
}

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
    /// [`ShowsPort::owed_seat_ids`]): candidates for the waiting list's judgement, whose seat
    /// streams decide. An expired hold that was not a returning hold is among
    /// them too: its seat is free and the waiting list passes it over.
    pub async fn owed_seats(&self, show_id: &ShowId, now_us: i64) -> StoreResult<Vec<SeatId>> {
        let ids = retry_read(move || self.port.owed_seat_ids(show_id, now_us)).await?;
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
        let rows = retry_read(move || self.port.owed_place_rows(show_id, now_us)).await?;
        let mut owed: BTreeMap<PoolId, u32> = BTreeMap::new();
        for (pool_id, places) in rows {
            let pool_id = parse_column("pool_shards.pool_id", pool_id.as_str(), PoolId::parse)?;
            *owed.entry(pool_id).or_default() += u32::try_from(places.max(0)).unwrap_or(u32::MAX);
        }
        Ok(owed)
    }

    /// Every show's id (see [`SHOW_IDS`]).
    pub async fn show_ids(&self) -> StoreResult<Vec<ShowId>> {
        let ids = retry_read(move || self.port.show_ids()).await?;
        ids.iter()
            .map(|id| parse_column("shows.show_id", id.as_str(), ShowId::parse))
            .collect()
    }
}

/// Inserts the venue on `pool` if its id is free; whether it was.
async fn insert_venue(
    pool: &impl SqlPool,
    venue_id: &VenueId,
    definition: &str,
    created_at_us: i64,
) -> StoreResult<bool> {
    let inserted = pool
        .execute(
            INSERT_VENUE,
            &[
                Param::Text(venue_id.as_str()),
                Param::Text(definition),
                Param::Int(created_at_us),
            ],
        )
        .await?;
    Ok(inserted == 1)
}

/// The stored definition of a venue, read on `pool`.
async fn venue_definition(pool: &impl SqlPool, venue_id: &VenueId) -> StoreResult<Option<String>> {
    let row: Option<(String,)> = pool
        .fetch_optional(SELECT_VENUE, &[Param::Text(venue_id.as_str())])
        .await?;
    Ok(row.map(|(definition,)| definition))
}

/// The stored definition of a show, read on `pool`.
async fn show_definition(pool: &impl SqlPool, show_id: &ShowId) -> StoreResult<Option<String>> {
    let row: Option<(String,)> = pool
        .fetch_optional(SELECT_SHOW, &[Param::Text(show_id.as_str())])
        .await?;
    Ok(row.map(|(definition,)| definition))
}

/// The rows of [`SELECT_POOL_LEDGERS`], read on `pool`.
async fn pool_ledger_rows(
    pool: &impl SqlPool,
    show_id: &ShowId,
    now_us: i64,
    public_us: i64,
) -> StoreResult<Vec<LedgerRow>> {
    pool.fetch_all(
        SELECT_POOL_LEDGERS,
        &[
            Param::Text(show_id.as_str()),
            Param::Int(now_us),
            Param::Int(public_us),
        ],
    )
    .await
}

/// The earliest `expires_at` after `now_us` of a held pool place of the
/// show, read on `pool`.
async fn next_pool_expiry(
    pool: &impl SqlPool,
    show_id: &ShowId,
    now_us: i64,
) -> StoreResult<Option<i64>> {
    let row: Option<(Option<i64>,)> = pool
        .fetch_optional(
            "SELECT MIN(expires_at_us) FROM pool_holds \
             WHERE show_id = $1 AND state = 'held' AND expires_at_us > $2",
            &[Param::Text(show_id.as_str()), Param::Int(now_us)],
        )
        .await?;
    Ok(row.and_then(|(at,)| at))
}

/// The rows of [`OWED_PLACES`], read on `pool`.
async fn owed_place_rows(
    pool: &impl SqlPool,
    show_id: &ShowId,
    now_us: i64,
) -> StoreResult<Vec<(String, i64)>> {
    pool.fetch_all(
        OWED_PLACES,
        &[Param::Text(show_id.as_str()), Param::Int(now_us)],
    )
    .await
}

/// Every show's id, read on `pool`.
async fn show_ids(pool: &impl SqlPool) -> StoreResult<Vec<String>> {
    let ids: Vec<(String,)> = pool.fetch_all(SHOW_IDS, &[]).await?;
    Ok(ids.into_iter().map(|(id,)| id).collect())
}
