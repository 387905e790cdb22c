//! The checker's own fold of a pool's shard streams: places counted, not
//! named. What it refuses: a sale of a hold that no longer holds places on
//! the shard (released, expired or converted before), more live sold
//! places than the shard owns, and places given back that were not sold.

use std::collections::BTreeMap;

use crate::report::Violation;
use crate::rows::LogEvent;
use crate::shows::ShowSpec;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlaceHold {
    Live,
    Ended,
    Converted(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardHold {
    pub quantity: u32,
    pub expires_us: i64,
    pub returns_to_waitlist: bool,
    pub channel: Option<String>,
    pub state: PlaceHold,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardFold {
    pub stream: String,
    pub capacity: u32,
    pub holds: BTreeMap<String, ShardHold>,
    /// Live sold places by booking.
    pub sold: BTreeMap<String, u32>,
    /// Whether a booking's places came from returning holds.
    pub returning_sales: BTreeMap<String, bool>,
    /// Places owed to the waiting list (freed from returning holds and sales).
    pub returned: u32,
    pub allocated: BTreeMap<String, u32>,
}

impl ShardFold {
    pub fn sold_total(&self) -> u32 {
        self.sold.values().sum()
    }

    /// Places owed to the waiting list at `now_us`.
    pub fn owed_at(&self, now_us: i64) -> u32 {
        let lapsed: u32 = (self.holds.values())
            .filter(|h| {
                h.returns_to_waitlist && h.state == PlaceHold::Live && h.expires_us <= now_us
            })
            .map(|h| h.quantity)
            .sum();
        self.returned + lapsed
    }
}

/// The places shard `index` of `shards` owns: an even split, the first
/// `capacity % shards` shards one place more (the API's "split into
/// shards"; the checker's own arithmetic).
pub fn shard_capacity(capacity: u32, shards: u32, index: u32) -> u32 {
    capacity / shards.max(1) + u32::from(index < capacity % shards.max(1))
}

fn capacity_of(stream: &str, shows: &[ShowSpec]) -> u32 {
    let Some((show_id, rest)) = stream.split_once('/') else {
        return 0;
    };
    let Some((pool_id, index)) = rest.rsplit_once('#') else {
        return 0;
    };
    let index: u32 = index.parse().unwrap_or(0);
    (shows.iter().find(|s| s.show_id == show_id))
        .and_then(|s| s.pool(pool_id))
        .map_or(0, |p| shard_capacity(p.capacity, p.shards, index))
}

pub fn fold(
    log: &[LogEvent],
    shows: &[ShowSpec],
    out: &mut Vec<Violation>,
) -> BTreeMap<String, ShardFold> {
    let mut shards: BTreeMap<String, ShardFold> = BTreeMap::new();
    for event in log.iter().filter(|e| e.aggregate_type == "PoolShard") {
        let shard = shards
            .entry(event.aggregate_id.clone())
            .or_insert_with(|| ShardFold {
                stream: event.aggregate_id.clone(),
                capacity: capacity_of(&event.aggregate_id, shows),
                ..ShardFold::default()
            });
        apply(shard, event, out);
    }
    shards
}

fn apply(shard: &mut ShardFold, e: &LogEvent, out: &mut Vec<Violation>) {
    let hold = e.str("hold_id").unwrap_or_default().to_owned();
    let quantity = e.u64("quantity").unwrap_or(0) as u32;
    let channel = e.str("channel").map(str::to_owned);
    match e.event_type.as_str() {
        "PoolHoldPlaced" => {
            if e.flag("offer") {
                shard.returned = shard.returned.saturating_sub(quantity);
            }
            let placed = ShardHold {
                quantity,
                expires_us: e.time_us("expires_at").unwrap_or(e.recorded_at_us),
                returns_to_waitlist: e.flag("line"),
                channel,
                state: PlaceHold::Live,
            };
            shard.holds.insert(hold, placed);
        }
        "PoolHoldReleased" | "PoolHoldExpired" => end_hold(shard, &hold),
        "PoolHoldExtended" => {
            if let Some(h) = shard.holds.get_mut(&hold) {
                h.expires_us = e.time_us("expires_at").unwrap_or(h.expires_us);
            }
        }
        "PoolHoldConverted" => convert(shard, e, hold, out),
        "PoolBookingCancelled" => {
            let booking = e.str("booking_id").unwrap_or_default();
            let places = shard.sold.remove(booking).unwrap_or(0);
            give_back(shard, booking, places);
        }
        "PoolPlacesReturned" => places_returned(shard, e, quantity, out),
        "PoolPlacesAllocated" => {
            *shard
                .allocated
                .entry(channel.unwrap_or_default())
                .or_default() += quantity;
        }
        "PoolPlacesDeallocated" => {
            let allocated = shard
                .allocated
                .entry(channel.unwrap_or_default())
                .or_default();
            *allocated = allocated.saturating_sub(quantity);
            if e.flag("line") {
                shard.returned += quantity;
            }
        }
        "PoolPlacesPassed" => shard.returned = shard.returned.saturating_sub(quantity),
        _ => {}
    }
}

fn end_hold(shard: &mut ShardFold, hold: &str) {
    if let Some(h) = shard.holds.get_mut(hold) {
        if h.state == PlaceHold::Live {
            h.state = PlaceHold::Ended;
            if h.returns_to_waitlist {
                shard.returned += h.quantity;
            }
        }
    }
}

/// Places of `booking` freed: owed to the waiting list if its holds were returning
/// holds.
fn give_back(shard: &mut ShardFold, booking: &str, places: u32) {
    if shard.returning_sales.get(booking).copied().unwrap_or(false) {
        shard.returned += places;
    }
}

fn convert(shard: &mut ShardFold, e: &LogEvent, hold: String, out: &mut Vec<Violation>) {
    let booking = e.str("booking_id").unwrap_or_default().to_owned();
    let ids = vec![hold.clone(), booking.clone(), shard.stream.clone()];
    let Some(h) = shard.holds.get_mut(&hold) else {
        out.push(Violation::new(
            "no_double_sale",
            format!(
                "{}: hold {hold} converted into {booking} but never placed on this shard",
                shard.stream
            ),
            ids,
        ));
        return;
    };
    match &h.state {
        PlaceHold::Live => {}
        PlaceHold::Converted(b) if *b == booking => return,
        other => {
            out.push(Violation::new(
                "no_double_sale",
                format!(
                    "{}: hold {hold} converted into {booking} while it was {other:?}",
                    shard.stream
                ),
                ids.clone(),
            ));
            return;
        }
    }
    h.state = PlaceHold::Converted(booking.clone());
    let (quantity, returns_to_waitlist) = (h.quantity, h.returns_to_waitlist);
    if let Some(channel) = &h.channel {
        let allocated = shard.allocated.entry(channel.clone()).or_default();
        *allocated = allocated.saturating_sub(quantity);
    }
    *shard.sold.entry(booking.clone()).or_default() += quantity;
    shard.returning_sales.insert(booking, returns_to_waitlist);
    if shard.sold_total() > shard.capacity {
        out.push(Violation::new(
            "no_pool_oversale",
            format!(
                "{}: {} places sold live of {}",
                shard.stream,
                shard.sold_total(),
                shard.capacity
            ),
            ids,
        ));
    }
}

fn places_returned(shard: &mut ShardFold, e: &LogEvent, quantity: u32, out: &mut Vec<Violation>) {
    let booking = e.str("booking_id").unwrap_or_default().to_owned();
    let sold = shard.sold.entry(booking.clone()).or_default();
    if *sold < quantity {
        out.push(Violation::new(
            "no_double_sale",
            format!(
                "{}: {quantity} places of {booking} returned, {sold} sold",
                shard.stream
            ),
            vec![booking.clone(), shard.stream.clone()],
        ));
    }
    *sold = sold.saturating_sub(quantity);
    give_back(shard, &booking, quantity);
}
