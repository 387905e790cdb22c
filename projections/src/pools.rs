//! The row of one pool shard: how many of its places are sold, allocated
//! to sales channels, and what they were sold as. Held places are not
//! stored here; they are counted from `pool_holds` at query time, against
//! `expires_at_us`, so an expiry needs no write.

use std::collections::BTreeMap;

use domain::ids::{ChannelId, PoolId, ShowId, TicketType};
use domain::pool::PoolShard;
use serde::{Deserialize, Serialize};

use crate::json_text::JsonText;

/// Places sold on a shard alike: through one channel (`None`: public
/// sale), as one ticket type, at one price a place.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SoldPlaces {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<ChannelId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket_type: Option<TicketType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_cents: Option<i64>,
    pub places: u32,
}

/// A row of `pool_shards` (its `capacity` is written once, with the show).
/// Field names are the column names (see `availability::SeatAvailabilityRow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolShardRow {
    pub show_id: ShowId,
    pub pool_id: PoolId,
    pub shard: u32,
    pub sold: u32,
    /// Places allocated to each channel and not sold (JSON text).
    pub allocated: JsonText<BTreeMap<ChannelId, u32>>,
    /// The sold places by channel, ticket type and price (JSON text).
    pub sales: JsonText<Vec<SoldPlaces>>,
    /// Places owed to the show's waiting list (`PoolShard::returned`).
    pub returned: u32,
    /// The stream sequence this row is the fold of.
    pub last_seq: i64,
}

impl PoolShardRow {
    pub fn of(
        show_id: &ShowId,
        pool_id: &PoolId,
        shard: u32,
        last_seq: i64,
        state: &PoolShard,
    ) -> Self {
        Self {
            show_id: show_id.clone(),
            pool_id: pool_id.clone(),
            shard,
            sold: state.sold,
            allocated: JsonText(state.allocated.clone()),
            sales: JsonText(sold_places(state)),
            returned: state.returned,
            last_seq,
        }
    }
}

/// Places held alike on a pool: through one channel, as one ticket type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldPlaces {
    pub channel: Option<ChannelId>,
    pub ticket_type: Option<TicketType>,
    pub places: u32,
}

/// What a report counts of one pool at an instant: its capacity, what is
/// sold (by channel, ticket type and price), allocated to each channel and
/// not sold, and held (by channel and ticket type).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolLedger {
    pub capacity: u32,
    /// Places sold (the shards' `sold`; `sold` below says as what, for
    /// sales recorded since it did).
    pub sold_places: u32,
    pub sold: Vec<SoldPlaces>,
    pub allocated: BTreeMap<ChannelId, u32>,
    pub held: Vec<HeldPlaces>,
}

impl PoolLedger {
    /// Adds a shard of `capacity` places as its stream is at `now` (a
    /// report as of a past instant, folded from the log).
    pub fn add_shard(
        &mut self,
        capacity: u32,
        shard: &PoolShard,
        now: chrono::DateTime<chrono::Utc>,
    ) {
        self.capacity += capacity;
        self.sold_places += shard.sold;
        // Places owed to the waiting list read as held (by the waiting list): a
        // returning hold past its expiry still holds them.
        let owed = HeldPlaces {
            channel: None,
            ticket_type: None,
            places: shard.returned,
        };
        self.add_rows(
            sold_places(shard),
            &shard.allocated,
            (shard.holds.values())
                .filter(|h| h.returns_to_waitlist || !domain::seat::has_expired(h.expires_at, now))
                .map(|h| HeldPlaces {
                    channel: h.channel.clone(),
                    ticket_type: h.price.as_ref().map(|p| p.ticket_type.clone()),
                    places: h.quantity,
                })
                .chain((owed.places > 0).then_some(owed)),
        );
    }

    /// Adds a shard's sold places and allocations, and held places.
    pub fn add_rows(
        &mut self,
        sold: Vec<SoldPlaces>,
        allocated: &BTreeMap<ChannelId, u32>,
        held: impl IntoIterator<Item = HeldPlaces>,
    ) {
        self.sold.extend(sold);
        for (channel, places) in allocated {
            *self.allocated.entry(channel.clone()).or_default() += places;
        }
        self.held.extend(held);
    }
}

/// The shard's sales summed by channel, ticket type and price.
fn sold_places(state: &PoolShard) -> Vec<SoldPlaces> {
    let mut sums: BTreeMap<SoldPlaces, u32> = BTreeMap::new();
    for sale in state.sales.values().flatten() {
        let key = SoldPlaces {
            channel: sale.channel.clone(),
            ticket_type: sale.price.as_ref().map(|p| p.ticket_type.clone()),
            price_cents: sale.price.as_ref().map(|p| p.price_cents),
            places: 0,
        };
        *sums.entry(key).or_default() += sale.places;
    }
    sums.into_iter()
        .map(|(key, places)| SoldPlaces { places, ..key })
        .collect()
}
