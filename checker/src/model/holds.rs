//! Every hold the log knows of, gathered from its units' streams: which
//! seats or places it took, when, at what price, and how it ended. Written
//! from the events' meaning as the API documents it, not from the
//! service's code.

use std::collections::{BTreeMap, BTreeSet};

use crate::rows::LogEvent;

/// One unit's price as its placement recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemPrice {
    pub category: Option<String>,
    pub ticket_type: String,
    pub price_cents: i64,
}

impl ItemPrice {
    pub fn of(event: &LogEvent) -> Option<Self> {
        let price = event.data().get("price")?;
        Some(Self {
            category: price
                .get("category")
                .and_then(|c| c.as_str())
                .map(str::to_owned),
            ticket_type: price.get("ticket_type")?.as_str()?.to_owned(),
            price_cents: price.get("price_cents")?.as_i64()?,
        })
    }
}

/// A hold's part on one unit stream (a seat, or a pool's shard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub stream: String,
    /// 1 for a seat; the places for a shard.
    pub quantity: u32,
    pub price: Option<ItemPrice>,
    pub placed_us: i64,
    /// The booking this part was converted into, in its own stream.
    pub converted: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HoldFacts {
    pub hold_id: String,
    pub show_id: String,
    pub buyer: String,
    pub parts: Vec<Part>,
    pub pool: bool,
    pub returns_to_waitlist: bool,
    pub offer: bool,
    pub channel: Option<String>,
    pub placed_us: i64,
    pub first_expires_us: i64,
    /// The latest `expires_at` (placed or extended).
    pub expires_us: i64,
    pub released_us: Option<i64>,
    pub expired_recorded: bool,
    /// Bookings its units were converted into.
    pub bookings: BTreeSet<String>,
}

impl HoldFacts {
    pub fn quantity(&self) -> u32 {
        self.parts.iter().map(|p| p.quantity).sum()
    }

    /// Whether the hold still holds its units at `now_us`: not released,
    /// expired or converted.
    pub fn live_at(&self, now_us: i64) -> bool {
        self.released_us.is_none()
            && !self.expired_recorded
            && self.bookings.is_empty()
            && self.expires_us > now_us
    }
}

/// The show of a unit stream id (`show/seat`, `show/pool#n`).
pub fn show_of(stream: &str) -> String {
    stream.split('/').next().unwrap_or_default().to_owned()
}

/// Every hold placed on a seat or a shard, by hold id.
pub fn holds(log: &[LogEvent]) -> BTreeMap<String, HoldFacts> {
    let mut holds: BTreeMap<String, HoldFacts> = BTreeMap::new();
    for event in log {
        let pool = match event.aggregate_type.as_str() {
            "Seat" => false,
            "PoolShard" => true,
            _ => continue,
        };
        let Some(hold_id) = event.str("hold_id") else {
            continue;
        };
        let hold = holds.entry(hold_id.to_owned()).or_default();
        apply(hold, event, pool);
    }
    holds
}

fn apply(hold: &mut HoldFacts, event: &LogEvent, pool: bool) {
    let at = event.recorded_at_us;
    match event.event_type.as_str() {
        "HoldPlaced" | "PoolHoldPlaced" => {
            let expires = event.time_us("expires_at").unwrap_or(at);
            if hold.parts.is_empty() {
                hold.hold_id = event.str("hold_id").unwrap_or_default().to_owned();
                hold.show_id = show_of(&event.aggregate_id);
                hold.buyer = event.str("buyer").unwrap_or_default().to_owned();
                hold.pool = pool;
                hold.placed_us = at;
                hold.first_expires_us = expires;
                hold.expires_us = expires;
            }
            hold.placed_us = hold.placed_us.min(at);
            hold.returns_to_waitlist |= event.flag("line");
            hold.offer |= event.flag("offer");
            hold.channel = hold
                .channel
                .take()
                .or(event.str("channel").map(str::to_owned));
            hold.parts.push(Part {
                stream: event.aggregate_id.clone(),
                quantity: event.u64("quantity").unwrap_or(1) as u32,
                price: ItemPrice::of(event),
                placed_us: at,
                converted: None,
            });
        }
        "HoldReleased" | "PoolHoldReleased" => {
            hold.released_us.get_or_insert(at);
        }
        "HoldExpired" | "PoolHoldExpired" => hold.expired_recorded = true,
        "HoldExtended" | "PoolHoldExtended" => {
            if let Some(expires) = event.time_us("expires_at") {
                hold.expires_us = hold.expires_us.max(expires);
            }
        }
        "HoldConverted" | "PoolHoldConverted" => {
            if let Some(booking) = event.str("booking_id") {
                hold.bookings.insert(booking.to_owned());
                let part = hold
                    .parts
                    .iter_mut()
                    .find(|p| p.stream == event.aggregate_id);
                if let Some(part) = part {
                    part.converted.get_or_insert_with(|| booking.to_owned());
                }
            }
        }
        _ => {}
    }
}
