//! A show's sales report (issue #35): counts and revenue by section,
//! category, ticket type, channel and status, and the export of its
//! bookings.
//!
//! The report now is served from the read models the availability answer
//! reads (the seat rows as this instance keeps them, brought up to date by
//! the rows changed since its last look, and each pool's shards and held
//! places): a 20,000-seat show's report costs what its availability costs,
//! never a scan of the log. As of a past instant, and for the export, the
//! show's events are folded from the log up to that instant ([`ShowFold`]),
//! through the same aggregates the commands decide with.
//!
//! Statuses are the public's: a seat allocated to a channel and free is
//! `not_for_sale` (with its channel); held and booked seats say which
//! channel they were held or sold through (`None`: public sale). Revenue is
//! what booked units were sold for; other rows carry 0. A pool's rows name
//! the pool as their section.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use domain::ids::{BookingId, BuyerId, ChannelId, HoldId, PoolId, TicketType};
use domain::pool::{shard_capacity, shard_stream_id, PoolEvent, PoolShard};
use domain::seat::{Seat, SeatEvent, SeatState, SeatStatus};
use projections::pools::PoolLedger;
use projections::time::to_micros;
use serde::Serialize;

use crate::catalog::CatalogEntry;
use crate::query::availability::AvailabilityCache;
use crate::store::{EventLog, Shows, StoreError};

/// One line of the report: units alike in all five, their count, and what
/// the booked ones were sold for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ReportRow {
    pub section: String,
    pub category: Option<String>,
    pub ticket_type: Option<String>,
    /// The sales channel (`null`: public sale).
    pub channel: Option<String>,
    /// `available`, `held`, `booked` or `not_for_sale`.
    pub status: String,
    pub count: u64,
    pub revenue_cents: i64,
}

/// The sums of a report's rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Totals {
    pub available: u64,
    pub held: u64,
    pub booked: u64,
    pub not_for_sale: u64,
    pub revenue_cents: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Report {
    pub show_id: String,
    pub as_of: DateTime<Utc>,
    pub rows: Vec<ReportRow>,
    pub totals: Totals,
}

/// The columns of a row, in order: the CSV header.
pub const REPORT_COLUMNS: [&str; 7] = [
    "section",
    "category",
    "ticket_type",
    "channel",
    "status",
    "count",
    "revenue_cents",
];

/// What a row is keyed by.
type Key = (
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    SeatStatus,
);

/// Units counted into rows.
#[derive(Default)]
struct Tally(BTreeMap<Key, (u64, i64)>);

impl Tally {
    fn add(&mut self, key: Key, count: u64, revenue_cents: i64) {
        if count == 0 {
            return;
        }
        let row = self.0.entry(key).or_default();
        row.0 += count;
        row.1 += revenue_cents;
    }

    /// A pool's units: sold, held, allocated and free.
    fn pool(&mut self, entry: &CatalogEntry, pool_id: &PoolId, ledger: &PoolLedger) {
        let Some(spec) = entry.show.pool(pool_id) else {
            return;
        };
        let category = spec.category.as_ref().map(ToString::to_string);
        let key = |ticket_type: Option<&TicketType>, channel: Option<&ChannelId>, status| {
            (
                pool_id.to_string(),
                category.clone(),
                ticket_type.map(ToString::to_string),
                channel.map(ToString::to_string),
                status,
            )
        };
        let mut sold = 0u32;
        for places in &ledger.sold {
            sold += places.places;
            let revenue = places.price_cents.unwrap_or(0) * i64::from(places.places);
            let k = key(
                places.ticket_type.as_ref(),
                places.channel.as_ref(),
                SeatStatus::Booked,
            );
            self.add(k, u64::from(places.places), revenue);
        }
        let mut held_by: HashMap<Option<&ChannelId>, u32> = HashMap::new();
        for held in &ledger.held {
            *held_by.entry(held.channel.as_ref()).or_default() += held.places;
            let k = key(
                held.ticket_type.as_ref(),
                held.channel.as_ref(),
                SeatStatus::Held,
            );
            self.add(k, u64::from(held.places), 0);
        }
        for (channel, allocated) in &ledger.allocated {
            let held = held_by.get(&Some(channel)).copied().unwrap_or(0);
            let free = allocated.saturating_sub(held);
            self.add(
                key(None, Some(channel), SeatStatus::NotForSale),
                u64::from(free),
                0,
            );
        }
        // Places sold before shards recorded as what (rows not yet
        // rebuilt since): counted, as no ticket type, no revenue.
        let unknown = ledger.sold_places.saturating_sub(sold);
        self.add(key(None, None, SeatStatus::Booked), u64::from(unknown), 0);
        let taken = ledger.sold_places.max(sold)
            + ledger.allocated.values().sum::<u32>()
            + held_by.get(&None).copied().unwrap_or(0);
        let free = ledger.capacity.saturating_sub(taken);
        self.add(key(None, None, SeatStatus::Available), u64::from(free), 0);
    }

    fn report(self, entry: &CatalogEntry, as_of: DateTime<Utc>) -> Report {
        let mut totals = Totals::default();
        let rows = (self.0.into_iter())
            .map(
                |((section, category, ticket_type, channel, status), (count, revenue))| {
                    match status {
                        SeatStatus::Available => totals.available += count,
                        SeatStatus::Held => totals.held += count,
                        SeatStatus::Booked => totals.booked += count,
                        SeatStatus::NotForSale => totals.not_for_sale += count,
                    }
                    totals.revenue_cents += revenue;
                    ReportRow {
                        section,
                        category,
                        ticket_type,
                        channel,
                        status: status.as_str().to_owned(),
                        count,
                        revenue_cents: revenue,
                    }
                },
            )
            .collect();
        Report {
            show_id: entry.show.show_id.to_string(),
            as_of,
            rows,
            totals,
        }
    }
}

/// What a report needs of one seat at its instant: its status (expiry
/// applied), its channel (its place in the show's list), and what its hold
/// or booking sold it as.
struct SeatFacts<'a> {
    status: SeatStatus,
    channel: Option<usize>,
    sale: Option<(&'a TicketType, i64)>,
}

/// A hasher for keys that are already well-spread integers (a packed
/// [`tally_seats`] key): SipHash was a third of a report's time.
#[derive(Default)]
struct PackedKeyHasher(u64);

impl std::hash::Hasher for PackedKeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The seats, in show order, counted by section and category (the show's
/// `seat_groups`), ticket type, channel and the status the public sees:
/// each seat one hash of one packed number, its row's strings made once
/// per distinct key (20,000 seats under 64 writers cost 30 ms at the median
/// building strings and hashing them with SipHash; measured with perf).
fn tally_seats<'a>(entry: &CatalogEntry, seats: impl Iterator<Item = SeatFacts<'a>>) -> Tally {
    type Counts = HashMap<u64, (u64, i64), std::hash::BuildHasherDefault<PackedKeyHasher>>;
    let mut ticket_types: Vec<&TicketType> = Vec::new();
    let mut counts = Counts::default();
    for (group, seat) in entry.seat_groups.of_seat.iter().zip(seats) {
        // Free and a channel's: not for sale (as `Viewer::Public` sees it).
        let status = match (seat.status, seat.channel) {
            (SeatStatus::Available, Some(_)) => SeatStatus::NotForSale,
            (status, _) => status,
        };
        let (ticket_type, revenue) = match (status, seat.sale) {
            (SeatStatus::Booked, Some((ticket_type, price))) => (Some(ticket_type), price),
            (SeatStatus::Held, Some((ticket_type, _))) => (Some(ticket_type), 0),
            _ => (None, 0),
        };
        let ticket = ticket_type.map_or(0, |t| {
            let at = ticket_types.iter().position(|known| *known == t);
            1 + at.unwrap_or_else(|| {
                ticket_types.push(t);
                ticket_types.len() - 1
            })
        });
        // group: 32 bits; ticket type and channel: 12 bits each (a show has
        // at most 20 ticket types and 32 channels; 0: none); status: 8.
        let key = (u64::from(*group) << 32)
            | ((ticket as u64 & 0xfff) << 20)
            | ((seat.channel.map_or(0, |c| c + 1) as u64 & 0xfff) << 8)
            | status as u64;
        let row = counts.entry(key).or_default();
        row.0 += 1;
        row.1 += revenue;
    }
    let mut tally = Tally::default();
    for (key, (count, revenue)) in counts {
        if let Some(key) = unpacked(entry, key, &ticket_types) {
            tally.add(key, count, revenue);
        }
    }
    tally
}

/// A packed key of [`tally_seats`] as a row's key.
fn unpacked(entry: &CatalogEntry, key: u64, ticket_types: &[&TicketType]) -> Option<Key> {
    let (section, category) = entry.seat_groups.names.get((key >> 32) as usize)?;
    let ticket = ((key >> 20) & 0xfff) as usize;
    let channel = ((key >> 8) & 0xfff) as usize;
    let status = match key & 0xff {
        s if s == SeatStatus::Held as u64 => SeatStatus::Held,
        s if s == SeatStatus::Booked as u64 => SeatStatus::Booked,
        s if s == SeatStatus::NotForSale as u64 => SeatStatus::NotForSale,
        _ => SeatStatus::Available,
    };
    let channels = &entry.show.channels;
    Some((
        section.clone(),
        category.as_ref().map(ToString::to_string),
        (ticket.checked_sub(1))
            .and_then(|t| ticket_types.get(t))
            .map(|t| t.to_string()),
        channel.checked_sub(1).map(|c| {
            (channels.get(c)).map_or_else(|| "unlisted".to_owned(), |c| c.channel_id.to_string())
        }),
        status,
    ))
}

/// The report at `now`, from the read models.
pub async fn current(
    availability: &AvailabilityCache,
    shows: &Shows,
    entry: &CatalogEntry,
    now: DateTime<Utc>,
) -> Result<Report, StoreError> {
    let mut tally = availability
        .with_rows(shows, entry, |rows| {
            let seats = rows.iter().map(|row| SeatFacts {
                status: row.status_at(now),
                channel: row.channel_slot(),
                sale: row.sale.as_deref().map(|(t, price)| (t, *price)),
            });
            tally_seats(entry, seats)
        })
        .await?;
    if !entry.show.pools.is_empty() {
        let ledgers = shows.pool_ledgers(&entry.show, to_micros(now)).await?;
        for (pool_id, ledger) in &ledgers {
            tally.pool(entry, pool_id, ledger);
        }
    }
    Ok(tally.report(entry, now))
}

/// A show's seats and pool shards as its events up to an instant leave
/// them.
pub struct ShowFold {
    /// In show order.
    pub seats: Vec<Seat>,
    /// Each pool's shards, in index order, in show order.
    pub pools: Vec<Vec<PoolShard>>,
}

impl ShowFold {
    /// Folds the events of the show recorded at or before `at`.
    pub async fn at(
        log: &EventLog,
        entry: &CatalogEntry,
        at: DateTime<Utc>,
    ) -> Result<Self, StoreError> {
        let show = &entry.show;
        let mut seats: HashMap<String, Seat> = HashMap::new();
        let mut shards: HashMap<String, PoolShard> = HashMap::new();
        let events = log
            .show_log_until(show.show_id.as_str(), to_micros(at))
            .await?;
        for event in events {
            let corrupt = |e: serde_json::Error| {
                StoreError::Corrupt(format!("event {}: {e}", event.position))
            };
            if event.aggregate_type == <Seat as cqrs_es::Aggregate>::TYPE {
                let decoded: SeatEvent = serde_json::from_str(&event.payload).map_err(corrupt)?;
                (seats.entry(event.aggregate_id.clone()).or_default()).apply_event(&decoded);
            } else if event.aggregate_type == <PoolShard as cqrs_es::Aggregate>::TYPE {
                let decoded: PoolEvent = serde_json::from_str(&event.payload).map_err(corrupt)?;
                (shards.entry(event.aggregate_id.clone()).or_default()).apply_event(&decoded);
            }
        }
        let seats = (show.seats.iter())
            .map(|spec| {
                let stream = domain::ids::seat_stream_id(&show.show_id, &spec.seat_id);
                seats.remove(&stream).unwrap_or_default()
            })
            .collect();
        let pools = (show.pools.iter())
            .map(|pool| {
                (0..pool.shards)
                    .map(|index| {
                        let stream = shard_stream_id(&show.show_id, &pool.pool_id, index);
                        shards.remove(&stream).unwrap_or_default()
                    })
                    .collect()
            })
            .collect();
        Ok(Self { seats, pools })
    }

    /// The report as of `at` (the instant folded to).
    pub fn report(&self, entry: &CatalogEntry, at: DateTime<Utc>) -> Report {
        let channels = &entry.show.channels;
        let seats = self.seats.iter().map(|seat| SeatFacts {
            status: seat.status_at(at),
            channel: (seat.channel.as_ref()).map(|c| {
                channels
                    .iter()
                    .position(|listed| &listed.channel_id == c)
                    .unwrap_or(usize::from(u8::MAX))
            }),
            sale: (seat.price.as_ref()).map(|p| (&p.ticket_type, p.price_cents)),
        });
        let mut tally = tally_seats(entry, seats);
        for (spec, shards) in entry.show.pools.iter().zip(&self.pools) {
            let mut ledger = PoolLedger::default();
            for (index, shard) in (0u32..).zip(shards) {
                let capacity = shard_capacity(spec.capacity, spec.shards, index);
                ledger.add_shard(capacity, shard, at);
            }
            tally.pool(entry, &spec.pool_id, &ledger);
        }
        tally.report(entry, at)
    }

    /// One line per booked seat and per booked pool place, in show order.
    pub fn bookings(&self, entry: &CatalogEntry) -> Vec<BookingLine> {
        let mut lines = Vec::new();
        for (spec, seat) in entry.show.seats.iter().zip(&self.seats) {
            if let SeatState::Booked {
                hold_id,
                booking_id,
                buyer,
                ..
            } = &seat.state
            {
                lines.push(BookingLine {
                    booking_id: *booking_id,
                    hold_id: Some(*hold_id),
                    buyer: buyer.clone(),
                    seat_id: Some(spec.seat_id.to_string()),
                    pool_id: None,
                    section: spec.section.clone(),
                    category: spec.category.as_ref().map(ToString::to_string),
                    ticket_type: seat.price.as_ref().map(|p| p.ticket_type.clone()),
                    channel: seat.channel.clone(),
                    price_cents: seat.price.as_ref().map_or(0, |p| p.price_cents),
                });
            }
        }
        for (spec, shards) in entry.show.pools.iter().zip(&self.pools) {
            for shard in shards {
                for (booking_id, sales) in &shard.sales {
                    for sale in sales {
                        for _ in 0..sale.places {
                            lines.push(BookingLine {
                                booking_id: *booking_id,
                                hold_id: None,
                                buyer: sale.buyer.clone(),
                                seat_id: None,
                                pool_id: Some(spec.pool_id.to_string()),
                                section: spec.pool_id.to_string(),
                                category: spec.category.as_ref().map(ToString::to_string),
                                ticket_type: sale.price.as_ref().map(|p| p.ticket_type.clone()),
                                channel: sale.channel.clone(),
                                price_cents: sale.price.as_ref().map_or(0, |p| p.price_cents),
                            });
                        }
                    }
                }
            }
        }
        lines
    }
}

/// One booked seat, or one booked place of a pool: who has it, through
/// which channel, as what and for how much, in which booking (an order's
/// booking id is its order id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct BookingLine {
    #[schema(value_type = uuid::Uuid)]
    pub booking_id: BookingId,
    /// The seat's hold (a pool place: absent).
    #[schema(value_type = Option<uuid::Uuid>)]
    pub hold_id: Option<HoldId>,
    #[schema(value_type = String)]
    pub buyer: BuyerId,
    pub seat_id: Option<String>,
    pub pool_id: Option<String>,
    pub section: String,
    pub category: Option<String>,
    #[schema(value_type = Option<String>)]
    pub ticket_type: Option<TicketType>,
    #[schema(value_type = Option<String>)]
    pub channel: Option<ChannelId>,
    pub price_cents: i64,
}

/// Rows as CSV with a header line (the `csv` crate quotes). A field that a
/// spreadsheet would run as a formula (it starts with `=`, `+`, `-`, `@`,
/// a tab or a carriage return: a buyer id `=HYPERLINK(...)`) is written
/// after a `'`, which spreadsheets show and never run (OWASP's advice for
/// CSV injection); no number the service writes is negative.
pub fn to_csv<T: Serialize>(rows: &[T], header: &[&str]) -> Result<Vec<u8>, csv::Error> {
    let mut plain = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    for row in rows {
        plain.serialize(row)?;
    }
    let plain = plain
        .into_inner()
        .map_err(|e| csv::Error::from(std::io::Error::other(e.to_string())))?;
    let mut writer = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    writer.write_record(header)?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(plain.as_slice());
    for record in reader.records() {
        let record = record?;
        writer.write_record(record.iter().map(|field| neutralised(field).into_owned()))?;
    }
    writer
        .into_inner()
        .map_err(|e| csv::Error::from(std::io::Error::other(e.to_string())))
}

/// A CSV field a spreadsheet shows as text, never runs as a formula.
fn neutralised(field: &str) -> std::borrow::Cow<'_, str> {
    match field.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{field}").into(),
        _ => field.into(),
    }
}

/// The columns of a booking line, in order.
pub const BOOKING_COLUMNS: [&str; 10] = [
    "booking_id",
    "hold_id",
    "buyer",
    "seat_id",
    "pool_id",
    "section",
    "category",
    "ticket_type",
    "channel",
    "price_cents",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        buyer: String,
        price_cents: i64,
    }

    #[test]
    fn it_should_write_a_formula_as_text_in_the_csv() {
        let rows = [
            Row {
                buyer: "=HYPERLINK(\"http://evil\",\"x\")".into(),
                price_cents: 5000,
            },
            Row {
                buyer: "alice".into(),
                price_cents: 0,
            },
        ];
        let csv = String::from_utf8(to_csv(&rows, &["buyer", "price_cents"]).unwrap()).unwrap();
        assert_eq!(
            csv,
            "buyer,price_cents\n\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\",5000\nalice,0\n"
        );
    }
}
