//! General-admission pools: a capacity instead of seat ids, split into shards.
//!
//! One stream per pool would make every buyer of a hot pool conflict with
//! every other, so a pool is split into shards (streams `show/pool#n`), each
//! owning part of the capacity. A shard is the unit of the conditional
//! decrement: a hold of `q` places succeeds on a shard only if
//! `capacity - sold - active_holds(now) >= q`, with active holds filtered by
//! `expires_at` at decision time. Expired holds give their places back
//! without any event; `PoolHoldExpired` is recorded later as hygiene.
//!
//! A hold may span shards (the service splits it); each shard decides its
//! part, and the parts are appended together or not at all.
//!
//! On a show with a waiting list, public holds are returning holds: the places
//! their end frees (a release, a recorded expiry, a cancelled sale, a
//! channel's give-back) are `returned`, owed to the waiting list; so are the places
//! of a returning hold past its `expires_at` whose expiry is not recorded yet,
//! with no event, at the instant of expiry. Owed places are off public
//! sale; only the waiting list's offer takes them, or the waiting list passes them on
//! (`PoolPlacesPassed`), the same rule as a seat's
//! ([`crate::seat::Seat::is_owed_to_waitlist`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::aggregate::{event_names, impl_aggregate, Decider};
use crate::ids::{BookingId, BuyerId, ChannelId, HoldId, PoolId, ShowId};
use crate::limits::{MAX_POOL_SHARDS, PLACES_PER_SHARD};
use crate::pricing::ItemPrice;
use crate::seat::{extended_expiry, has_expired, Extendable, ExtensionRefusal, WaitlistRole};

/// Expired holds recorded as `PoolHoldExpired` by one command at most: the
/// bound keeps one buyer's append small. Places of expired holds beyond it
/// stay taken for this decision (see [`PoolShard::placeable_at`]) and are
/// freed by the commands that record them.
pub const MAX_EXPIRIES_PER_COMMAND: usize = 16;

/// How many shards a pool of `capacity` places gets by default: one per
/// `PLACES_PER_SHARD` places, at least one, at most `MAX_POOL_SHARDS`.
pub fn default_shards(capacity: u32) -> u32 {
    capacity
        .div_ceil(PLACES_PER_SHARD)
        .clamp(1, MAX_POOL_SHARDS)
}

/// The places shard `index` of `shards` owns: an even split, the first
/// `capacity % shards` shards one place more.
pub fn shard_capacity(capacity: u32, shards: u32, index: u32) -> u32 {
    capacity / shards + u32::from(index < capacity % shards)
}

/// `show/pool#n`. Pool ids never contain `#` or `/`, show ids never `/`.
pub fn shard_stream_id(show: &ShowId, pool: &PoolId, index: u32) -> String {
    format!("{}/{}#{}", show.as_str(), pool.as_str(), index)
}

/// Splits a shard stream id back into its show, pool and index.
pub fn parse_shard_stream_id(stream: &str) -> Option<(ShowId, PoolId, u32)> {
    let (show, rest) = stream.split_once('/')?;
    let (pool, index) = rest.rsplit_once('#')?;
    Some((
        ShowId::parse(show).ok()?,
        PoolId::parse(pool).ok()?,
        index.parse().ok()?,
    ))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolHold {
    pub buyer: BuyerId,
    pub quantity: u32,
    /// As placed, or as last extended.
    pub expires_at: DateTime<Utc>,
    /// The `expires_at` the hold was placed with: what the extension cap is
    /// measured from (`seat::extension_cap`).
    pub placed_expires_at: DateTime<Utc>,
    /// The channel whose places it holds (`None`: public sale).
    #[serde(default)]
    pub channel: Option<ChannelId>,
    /// What one place costs it.
    #[serde(default)]
    pub price: Option<ItemPrice>,
    /// A returning hold (see the module): its end owes its places to the waiting list.
    #[serde(default, rename = "line")]
    pub returns_to_waitlist: bool,
    /// The waiting list's offer: never extended past the offer's time.
    #[serde(default)]
    pub offer: bool,
}

impl PoolHold {
    pub fn extendable(&self) -> Extendable {
        Extendable {
            placed_expires_at: self.placed_expires_at,
            expires_at: self.expires_at,
            offer: self.offer,
        }
    }

    /// The hold a `PoolHoldPlaced` records.
    fn placed(event: &PoolEvent) -> Option<PoolHold> {
        let PoolEvent::PoolHoldPlaced {
            buyer,
            quantity,
            expires_at,
            price,
            channel,
            returns_to_waitlist,
            offer,
            ..
        } = event
        else {
            return None;
        };
        Some(PoolHold {
            buyer: buyer.clone(),
            quantity: *quantity,
            expires_at: *expires_at,
            placed_expires_at: *expires_at,
            channel: channel.clone(),
            price: price.clone(),
            returns_to_waitlist: *returns_to_waitlist,
            offer: *offer,
        })
    }
}

/// Places a booking took from a shard through one hold: its channel and
/// price, for reports and for giving a channel's places back to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sale {
    /// The hold whose places these are: an order books several holds
    /// under one booking id, and each line is given back from its own
    /// hold's sale.
    #[serde(default)]
    pub hold_id: Option<HoldId>,
    /// The hold's buyer.
    pub buyer: BuyerId,
    pub channel: Option<ChannelId>,
    pub price: Option<ItemPrice>,
    pub places: u32,
    /// Sold through a returning hold: given back, the places are owed to the waiting list.
    #[serde(default, rename = "line")]
    pub returns_to_waitlist: bool,
}

/// One shard of a pool: its capacity is not in the stream (it comes from
/// the immutable show definition and is set before deciding).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolShard {
    pub sold: u32,
    /// Holds not released, expired-by-event or converted (some may have
    /// passed `expires_at`: they count for nothing).
    pub holds: BTreeMap<HoldId, PoolHold>,
    /// Places each booking took from this shard, for cancellation.
    pub bookings: BTreeMap<BookingId, u32>,
    /// Places of this shard allocated to each sales channel and not sold
    /// (free, or held through the channel): off public sale.
    #[serde(default)]
    pub allocated: BTreeMap<ChannelId, u32>,
    /// What each booking's places here were sold as (the booking's places
    /// in `bookings`, split by the holds that took them).
    #[serde(default)]
    pub sales: BTreeMap<BookingId, Vec<Sale>>,
    /// Places freed by the end of returning holds and owed to the waiting list
    /// (off public sale until offered or passed on).
    #[serde(default)]
    pub returned: u32,
}

impl PoolShard {
    pub fn held_at(&self, now: DateTime<Utc>) -> u32 {
        self.holds
            .values()
            .filter(|h| !has_expired(h.expires_at, now))
            .map(|h| h.quantity)
            .sum()
    }

    /// Places free at `now` in a shard of `capacity` places, for public
    /// sale (`None`) or for `channel`'s buyers. Places owed to the waiting
    /// list are not free to either.
    pub fn available_at(
        &self,
        channel: Option<&ChannelId>,
        capacity: u32,
        now: DateTime<Utc>,
    ) -> u32 {
        // One pass over the holds (this is every pool hold's decision):
        // held by this inventory, and owed by a returning hold past its expiry.
        let (mut held, mut owed) = (0, self.returned);
        for h in self.holds.values() {
            match (has_expired(h.expires_at, now), h.returns_to_waitlist) {
                (true, true) => owed += h.quantity,
                (false, _) if h.channel.as_ref() == channel => held += h.quantity,
                _ => {}
            }
        }
        match channel {
            None => capacity.saturating_sub(self.sold + self.allocated_total() + held + owed),
            Some(channel) => self.allocated_to(channel).saturating_sub(held),
        }
    }

    /// Places owed to the waiting list at `now`: returned, or held by a
    /// returning hold past its `expires_at` (no event needed).
    pub fn owed_at(&self, now: DateTime<Utc>) -> u32 {
        self.returned
            + self
                .holds
                .values()
                .filter(|h| h.returns_to_waitlist && has_expired(h.expires_at, now))
                .map(|h| h.quantity)
                .sum::<u32>()
    }

    /// Places held for public sale at `now` (a channel's holds are inside
    /// its allocation).
    pub fn public_held_at(&self, now: DateTime<Utc>) -> u32 {
        self.holds
            .values()
            .filter(|h| h.channel.is_none() && !has_expired(h.expires_at, now))
            .map(|h| h.quantity)
            .sum()
    }

    /// Places allocated to any channel and not sold.
    pub fn allocated_total(&self) -> u32 {
        self.allocated.values().sum()
    }

    pub fn allocated_to(&self, channel: &ChannelId) -> u32 {
        self.allocated.get(channel).copied().unwrap_or(0)
    }

    /// Places a new hold may take at `now`, and the expired holds it must
    /// record to take them. A place freed by an expiry is given to another
    /// hold only by the append that records that expiry: an instance whose
    /// clock is behind still takes the expired hold for active and may
    /// convert it, and only the recorded `PoolHoldExpired` (which moves the
    /// stream's version) stops that conversion. So the places of expired
    /// holds this decision cannot record (beyond `MAX_EXPIRIES_PER_COMMAND`)
    /// count as taken.
    /// Only the holds of the same inventory (public, or `channel`'s) count.
    /// The waiting list's offer (`WaitlistRole::Offer`) takes the places owed to the waiting list
    /// instead (a returning hold's recorded expiry owes them), and nothing else.
    pub fn placeable_at(
        &self,
        channel: Option<&ChannelId>,
        role: WaitlistRole,
        capacity: u32,
        now: DateTime<Utc>,
    ) -> (u32, Vec<HoldId>) {
        let expired: Vec<(&HoldId, &PoolHold)> = self
            .holds
            .iter()
            .filter(|(_, h)| h.channel.as_ref() == channel && has_expired(h.expires_at, now))
            .collect();
        let offer = role == WaitlistRole::Offer;
        // The unrecorded expired holds of what this hold takes from: a returning
        // hold's places are owed (never free), any other's free.
        let unrecorded: u32 = expired
            .iter()
            .skip(MAX_EXPIRIES_PER_COMMAND)
            .filter(|(_, h)| h.returns_to_waitlist == offer)
            .map(|(_, h)| h.quantity)
            .sum();
        let recorded = expired
            .iter()
            .take(MAX_EXPIRIES_PER_COMMAND)
            .map(|(id, _)| **id)
            .collect();
        let placeable = match role {
            WaitlistRole::Offer => self.owed_at(now),
            WaitlistRole::None | WaitlistRole::Buyer => self.available_at(channel, capacity, now),
        };
        (placeable.saturating_sub(unrecorded), recorded)
    }

    fn active(&self, hold_id: &HoldId, now: DateTime<Utc>) -> Option<&PoolHold> {
        self.holds
            .get(hold_id)
            .filter(|h| !has_expired(h.expires_at, now))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolCommand {
    PlaceHold {
        hold_id: HoldId,
        buyer: BuyerId,
        quantity: u32,
        expires_at: DateTime<Utc>,
        /// What one place costs this hold.
        price: Option<ItemPrice>,
        /// Whose inventory it takes (`None`: public sale).
        channel: Option<ChannelId>,
        /// How it meets the show's waiting list.
        role: WaitlistRole,
    },
    /// Move `quantity` places free for public sale to `channel`.
    Allocate {
        channel: ChannelId,
        quantity: u32,
    },
    /// Give `quantity` of `channel`'s free places back to public sale
    /// (`returns_to_waitlist`: to the show's waiting list first).
    Deallocate {
        channel: ChannelId,
        quantity: u32,
        returns_to_waitlist: bool,
    },
    /// The waiting list wants up to `quantity` of the places it is owed no
    /// more (no entry they satisfy): back to sale.
    Pass {
        quantity: u32,
    },
    ReleaseHold {
        hold_id: HoldId,
    },
    ExpireHold {
        hold_id: HoldId,
    },
    ConvertHold {
        hold_id: HoldId,
        booking_id: BookingId,
    },
    CancelBooking {
        booking_id: BookingId,
    },
    /// Give back up to `quantity` of the places `hold_id` sold to a
    /// booking on this shard (an order's lines cancelled one by one).
    ReturnPlaces {
        booking_id: BookingId,
        hold_id: HoldId,
        quantity: u32,
    },
    /// Extend the hold to `now + ttl`, at most `max_hold` after its placement.
    ExtendHold {
        hold_id: HoldId,
        ttl: Duration,
        max_hold: Duration,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PoolEvent {
    PoolHoldPlaced {
        hold_id: HoldId,
        buyer: BuyerId,
        quantity: u32,
        expires_at: DateTime<Utc>,
        /// What one place costs this hold, fixed at its decision (absent in
        /// events recorded before prices were: the pool's price).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        price: Option<ItemPrice>,
        /// The channel whose places it takes (absent: public sale).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        channel: Option<ChannelId>,
        /// A returning hold: its end owes its places to the waiting list.
        #[serde(default, rename = "line", skip_serializing_if = "std::ops::Not::not")]
        returns_to_waitlist: bool,
        /// The waiting list's offer: its places are owed ones (they leave `returned`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        offer: bool,
    },
    PoolHoldReleased {
        hold_id: HoldId,
    },
    PoolHoldExpired {
        hold_id: HoldId,
    },
    PoolHoldConverted {
        hold_id: HoldId,
        booking_id: BookingId,
    },
    PoolBookingCancelled {
        booking_id: BookingId,
    },
    /// The hold's places on this shard now expire at `expires_at`.
    PoolHoldExtended {
        hold_id: HoldId,
        expires_at: DateTime<Utc>,
    },
    /// `quantity` of the booking's places here are free again: those
    /// `hold_id` sold (absent in events recorded before lines were given
    /// back by hold: the booking's latest sales).
    PoolPlacesReturned {
        booking_id: BookingId,
        quantity: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hold_id: Option<HoldId>,
    },
    /// `quantity` places of this shard moved from public sale to `channel`.
    PoolPlacesAllocated {
        channel: ChannelId,
        quantity: u32,
    },
    /// `quantity` of `channel`'s free places went back to public sale
    /// (`returns_to_waitlist`: owed to the show's waiting list first).
    PoolPlacesDeallocated {
        channel: ChannelId,
        quantity: u32,
        #[serde(default, rename = "line", skip_serializing_if = "std::ops::Not::not")]
        returns_to_waitlist: bool,
    },
    /// `quantity` places owed to the waiting list, which wanted them not:
    /// for sale again.
    PoolPlacesPassed {
        quantity: u32,
    },
}

event_names!(PoolEvent {
    PoolHoldPlaced => "PoolHoldPlaced",
    PoolHoldReleased => "PoolHoldReleased",
    PoolHoldExpired => "PoolHoldExpired",
    PoolHoldConverted => "PoolHoldConverted",
    PoolBookingCancelled => "PoolBookingCancelled",
    PoolHoldExtended => "PoolHoldExtended",
    PoolPlacesReturned => "PoolPlacesReturned",
    PoolPlacesAllocated => "PoolPlacesAllocated",
    PoolPlacesDeallocated => "PoolPlacesDeallocated",
    PoolPlacesPassed => "PoolPlacesPassed",
});

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    #[error("only {available} places are free in this shard")]
    NotEnough { available: u32 },
    #[error("a hold must take at least one place")]
    ZeroQuantity,
    #[error("a hold must expire after the moment it is placed")]
    ExpiryNotInFuture,
    #[error("the hold has expired")]
    HoldExpired,
    #[error("the hold no longer holds places here")]
    HoldLost,
    #[error("the hold has been converted into a booking")]
    HoldConverted,
    #[error("the hold already lasts as long as the show allows")]
    ExtensionLimit,
}

/// Decides a command on a shard of `capacity` places at `now`: each command
/// to its own decision below.
pub fn decide(
    shard: &PoolShard,
    capacity: u32,
    command: &PoolCommand,
    now: DateTime<Utc>,
) -> Result<Vec<PoolEvent>, PoolError> {
    match command {
        PoolCommand::PlaceHold {
            hold_id,
            buyer,
            quantity,
            expires_at,
            price,
            channel,
            role,
        } => place_hold(
            shard,
            capacity,
            Placing {
                hold_id: *hold_id,
                buyer,
                quantity: *quantity,
                expires_at: *expires_at,
                price: price.as_ref(),
                channel: channel.as_ref(),
                role: *role,
            },
            now,
        ),
        PoolCommand::Allocate { channel, quantity } => {
            allocate(shard, capacity, channel, *quantity, now)
        }
        PoolCommand::Deallocate {
            channel,
            quantity,
            returns_to_waitlist: back,
        } => deallocate(shard, capacity, channel, (*quantity, *back), now),
        PoolCommand::Pass { quantity } => Ok(pass(shard, capacity, *quantity, now)),
        PoolCommand::ReleaseHold { hold_id } => release_hold(shard, *hold_id, now),
        PoolCommand::ExpireHold { hold_id } => Ok(expire_hold(shard, *hold_id, now)),
        PoolCommand::ConvertHold {
            hold_id,
            booking_id,
        } => convert_hold(shard, *hold_id, *booking_id, now),
        PoolCommand::CancelBooking { booking_id } => Ok(cancel_booking(shard, *booking_id)),
        PoolCommand::ReturnPlaces {
            booking_id,
            hold_id,
            quantity,
        } => Ok(return_places(shard, *booking_id, *hold_id, *quantity)),
        PoolCommand::ExtendHold {
            hold_id,
            ttl,
            max_hold,
        } => extend_hold(shard, *hold_id, *ttl, *max_hold, now),
    }
}

/// The conditional decrement: the hold gets its places if the shard has
/// them free at `now`, recording the expiries that free them
/// ([`PoolShard::placeable_at`]).
/// A hold asking for places of a shard.
struct Placing<'a> {
    hold_id: HoldId,
    buyer: &'a BuyerId,
    quantity: u32,
    expires_at: DateTime<Utc>,
    price: Option<&'a ItemPrice>,
    channel: Option<&'a ChannelId>,
    role: WaitlistRole,
}

/// `quantity` places free for public sale at `now` move to `channel`, all
/// or none (the expiries that free them recorded first, as for a hold).
fn allocate(
    shard: &PoolShard,
    capacity: u32,
    channel: &ChannelId,
    quantity: u32,
    now: DateTime<Utc>,
) -> Result<Vec<PoolEvent>, PoolError> {
    if quantity == 0 {
        return Err(PoolError::ZeroQuantity);
    }
    let mut events = take_free(shard, (None, WaitlistRole::None), capacity, quantity, now)?;
    events.push(PoolEvent::PoolPlacesAllocated {
        channel: channel.clone(),
        quantity,
    });
    Ok(events)
}

/// `quantity` of `channel`'s places, free at `now`, go back to public sale
/// (`returns_to_waitlist`: owed to the waiting list first).
fn deallocate(
    shard: &PoolShard,
    capacity: u32,
    channel: &ChannelId,
    (quantity, returns_to_waitlist): (u32, bool),
    now: DateTime<Utc>,
) -> Result<Vec<PoolEvent>, PoolError> {
    if quantity == 0 {
        return Ok(vec![]);
    }
    let mut events = take_free(
        shard,
        (Some(channel), WaitlistRole::None),
        capacity,
        quantity,
        now,
    )?;
    events.push(PoolEvent::PoolPlacesDeallocated {
        channel: channel.clone(),
        quantity,
        returns_to_waitlist,
    });
    Ok(events)
}

/// The waiting list passes on up to `quantity` of the places it is owed (the
/// expiries of returning holds that owe them recorded first): for sale again.
fn pass(shard: &PoolShard, capacity: u32, quantity: u32, now: DateTime<Utc>) -> Vec<PoolEvent> {
    let (owed, expiring) = shard.placeable_at(None, WaitlistRole::Offer, capacity, now);
    let quantity = quantity.min(owed);
    if quantity == 0 {
        return vec![];
    }
    let mut events: Vec<PoolEvent> = expiring
        .into_iter()
        .map(|hold_id| PoolEvent::PoolHoldExpired { hold_id })
        .collect();
    events.push(PoolEvent::PoolPlacesPassed { quantity });
    events
}

/// The expiries to record for `quantity` places of one inventory (for a
/// hold in `role` toward the waiting list) to be free at `now`, or how many are.
fn take_free(
    shard: &PoolShard,
    (channel, role): (Option<&ChannelId>, WaitlistRole),
    capacity: u32,
    quantity: u32,
    now: DateTime<Utc>,
) -> Result<Vec<PoolEvent>, PoolError> {
    let (available, expiring) = shard.placeable_at(channel, role, capacity, now);
    if available < quantity {
        return Err(PoolError::NotEnough { available });
    }
    Ok(expiring
        .into_iter()
        .map(|hold_id| PoolEvent::PoolHoldExpired { hold_id })
        .collect())
}

fn place_hold(
    shard: &PoolShard,
    capacity: u32,
    placing: Placing<'_>,
    now: DateTime<Utc>,
) -> Result<Vec<PoolEvent>, PoolError> {
    let Placing {
        hold_id,
        buyer,
        quantity,
        expires_at,
        price,
        channel,
        role,
    } = placing;
    if quantity == 0 {
        return Err(PoolError::ZeroQuantity);
    }
    if has_expired(expires_at, now) {
        return Err(PoolError::ExpiryNotInFuture);
    }
    if shard.active(&hold_id, now).is_some() {
        // The same hold asking again (a retried request).
        return Ok(vec![]);
    }
    let mut events = take_free(shard, (channel, role), capacity, quantity, now)?;
    events.push(PoolEvent::PoolHoldPlaced {
        hold_id,
        buyer: buyer.clone(),
        quantity,
        expires_at,
        price: price.cloned(),
        channel: channel.cloned(),
        returns_to_waitlist: role.returns(),
        offer: role == WaitlistRole::Offer,
    });
    Ok(events)
}

/// The buyer gives the places back; a hold already past its expiry is
/// recorded as expired instead.
fn release_hold(
    shard: &PoolShard,
    hold_id: HoldId,
    now: DateTime<Utc>,
) -> Result<Vec<PoolEvent>, PoolError> {
    match shard.holds.get(&hold_id) {
        Some(h) if has_expired(h.expires_at, now) => {
            Ok(vec![PoolEvent::PoolHoldExpired { hold_id }])
        }
        Some(_) => Ok(vec![PoolEvent::PoolHoldReleased { hold_id }]),
        None if shard.sold_hold(&hold_id) => Err(PoolError::HoldConverted),
        None => Ok(vec![]),
    }
}

/// Records the expiry of the hold, if the shard still has it and it has expired.
fn expire_hold(shard: &PoolShard, hold_id: HoldId, now: DateTime<Utc>) -> Vec<PoolEvent> {
    match shard.holds.get(&hold_id) {
        Some(h) if has_expired(h.expires_at, now) => vec![PoolEvent::PoolHoldExpired { hold_id }],
        _ => vec![],
    }
}

/// Sells the hold's places, if the hold is still active at `now`.
fn convert_hold(
    shard: &PoolShard,
    hold_id: HoldId,
    booking_id: BookingId,
    now: DateTime<Utc>,
) -> Result<Vec<PoolEvent>, PoolError> {
    match shard.holds.get(&hold_id) {
        Some(h) if has_expired(h.expires_at, now) => Err(PoolError::HoldExpired),
        Some(_) => Ok(vec![PoolEvent::PoolHoldConverted {
            hold_id,
            booking_id,
        }]),
        // Converted already (a retried conversion): nothing to do. Only
        // this hold's own sale says so: an order books several holds under
        // one booking id, and another hold's sale says nothing of this one.
        None if shard.sold_by(&booking_id, &hold_id) > 0 => Ok(vec![]),
        None => Err(PoolError::HoldLost),
    }
}

/// Gives back the places of a cancelled booking; one this shard never sold is a no-op.
fn cancel_booking(shard: &PoolShard, booking_id: BookingId) -> Vec<PoolEvent> {
    if shard.bookings.contains_key(&booking_id) {
        vec![PoolEvent::PoolBookingCancelled { booking_id }]
    } else {
        vec![]
    }
}

/// Gives back at most `quantity` of the places `hold_id` sold to the
/// booking here (fewer if it has fewer left); none left is a no-op.
fn return_places(
    shard: &PoolShard,
    booking_id: BookingId,
    hold_id: HoldId,
    quantity: u32,
) -> Vec<PoolEvent> {
    match quantity.min(shard.sold_by(&booking_id, &hold_id)) {
        0 => vec![],
        quantity => vec![PoolEvent::PoolPlacesReturned {
            booking_id,
            quantity,
            hold_id: Some(hold_id),
        }],
    }
}

/// Moves the hold's expiry by [`extended_expiry`], the rule both unit types share.
fn extend_hold(
    shard: &PoolShard,
    hold_id: HoldId,
    ttl: Duration,
    max_hold: Duration,
    now: DateTime<Utc>,
) -> Result<Vec<PoolEvent>, PoolError> {
    match shard.holds.get(&hold_id) {
        Some(h) => match extended_expiry(h.extendable(), ttl, max_hold, now) {
            Ok(Some(expires_at)) => Ok(vec![PoolEvent::PoolHoldExtended {
                hold_id,
                expires_at,
            }]),
            Ok(None) => Ok(vec![]),
            Err(ExtensionRefusal::Expired) => Err(PoolError::HoldExpired),
            Err(ExtensionRefusal::Limit) => Err(PoolError::ExtensionLimit),
        },
        None if shard.sold_hold(&hold_id) => Err(PoolError::HoldConverted),
        None => Err(PoolError::HoldLost),
    }
}

impl PoolShard {
    pub fn apply_event(&mut self, event: &PoolEvent) {
        match event {
            PoolEvent::PoolHoldPlaced {
                hold_id,
                quantity,
                offer,
                ..
            } => {
                // An offer's places were owed to the waiting list: owed no more.
                if *offer {
                    self.returned = self.returned.saturating_sub(*quantity);
                }
                if let Some(hold) = PoolHold::placed(event) {
                    self.holds.insert(*hold_id, hold);
                }
            }
            PoolEvent::PoolHoldExtended {
                hold_id,
                expires_at,
            } => {
                if let Some(hold) = self.holds.get_mut(hold_id) {
                    hold.expires_at = *expires_at;
                }
            }
            PoolEvent::PoolHoldReleased { hold_id } | PoolEvent::PoolHoldExpired { hold_id } => {
                self.end_hold(hold_id)
            }
            PoolEvent::PoolHoldConverted {
                hold_id,
                booking_id,
            } => {
                if let Some(hold) = self.holds.remove(hold_id) {
                    self.sell(*booking_id, *hold_id, hold);
                }
            }
            PoolEvent::PoolBookingCancelled { booking_id } => {
                if let Some(quantity) = self.bookings.remove(booking_id) {
                    self.return_sold(booking_id, None, quantity);
                }
            }
            PoolEvent::PoolPlacesReturned {
                booking_id,
                quantity,
                hold_id,
            } => self.return_places(booking_id, *quantity, hold_id.as_ref()),
            PoolEvent::PoolPlacesAllocated { channel, quantity } => {
                *self.allocated.entry(channel.clone()).or_default() += quantity;
            }
            PoolEvent::PoolPlacesDeallocated {
                channel,
                quantity,
                returns_to_waitlist,
            } => self.deallocate(channel, *quantity, *returns_to_waitlist),
            PoolEvent::PoolPlacesPassed { quantity } => {
                self.returned = self.returned.saturating_sub(*quantity);
            }
        }
    }

    /// A hold's places sold to `booking_id` (an order books several holds
    /// under its one booking id); a channel's come out of its allocation.
    fn sell(&mut self, booking_id: BookingId, hold_id: HoldId, hold: PoolHold) {
        self.sold += hold.quantity;
        *self.bookings.entry(booking_id).or_default() += hold.quantity;
        if let Some(channel) = &hold.channel {
            let allocated = self.allocated.entry(channel.clone()).or_default();
            *allocated = allocated.saturating_sub(hold.quantity);
        }
        self.sales.entry(booking_id).or_default().push(Sale {
            hold_id: Some(hold_id),
            buyer: hold.buyer,
            channel: hold.channel,
            price: hold.price,
            places: hold.quantity,
            returns_to_waitlist: hold.returns_to_waitlist,
        });
    }

    /// At most `quantity` of the booking's places here are free again:
    /// `hold_id`'s (`None`: the booking's latest sales, as events recorded
    /// before lines were given back by hold were decided).
    fn return_places(&mut self, booking_id: &BookingId, quantity: u32, hold_id: Option<&HoldId>) {
        let returned = match hold_id {
            Some(hold_id) => quantity.min(self.sold_by(booking_id, hold_id)),
            None => quantity,
        };
        if let Some(booked) = self.bookings.get_mut(booking_id) {
            let returned = returned.min(*booked);
            *booked -= returned;
            if *booked == 0 {
                self.bookings.remove(booking_id);
            }
            self.return_sold(booking_id, hold_id, returned);
        }
    }

    /// A hold's places are free again: a returning hold's owed to the waiting list.
    fn end_hold(&mut self, hold_id: &HoldId) {
        if let Some(hold) = self.holds.remove(hold_id) {
            self.returned += if hold.returns_to_waitlist {
                hold.quantity
            } else {
                0
            };
        }
    }

    /// `quantity` of `channel`'s free places leave it: to public sale, or
    /// (`returns_to_waitlist`) owed to the waiting list first.
    fn deallocate(&mut self, channel: &ChannelId, quantity: u32, returns_to_waitlist: bool) {
        self.returned += if returns_to_waitlist { quantity } else { 0 };
        if let Some(allocated) = self.allocated.get_mut(channel) {
            *allocated = allocated.saturating_sub(quantity);
            if *allocated == 0 {
                self.allocated.remove(channel);
            }
        }
    }

    /// `quantity` of a booking's sold places are free again: `hold_id`'s
    /// sales (`None`: any, the latest first), a channel's places back to
    /// its allocation, a returning hold's owed to the waiting list.
    fn return_sold(&mut self, booking_id: &BookingId, hold_id: Option<&HoldId>, quantity: u32) {
        self.sold = self.sold.saturating_sub(quantity);
        let Some(sales) = self.sales.get_mut(booking_id) else {
            return;
        };
        let mut left = quantity;
        for sale in sales.iter_mut().rev() {
            if left == 0 {
                break;
            }
            if hold_id.is_some_and(|h| sale.hold_id.as_ref() != Some(h)) {
                continue;
            }
            let taken = left.min(sale.places);
            sale.places -= taken;
            left -= taken;
            if let Some(channel) = &sale.channel {
                *self.allocated.entry(channel.clone()).or_default() += taken;
            } else if sale.returns_to_waitlist {
                self.returned += taken;
            }
        }
        sales.retain(|sale| sale.places > 0);
        if sales.is_empty() {
            self.sales.remove(booking_id);
        }
    }

    /// Whether `hold_id` sold places here, to any booking: its own
    /// purchase's, or an order's (which books every hold under the
    /// order's id). A hold is judged by its own sale, never by a booking
    /// id derived from it.
    pub fn sold_hold(&self, hold_id: &HoldId) -> bool {
        self.sales
            .values()
            .flatten()
            .any(|sale| sale.hold_id.as_ref() == Some(hold_id))
    }

    /// Places `hold_id` sold to `booking_id` here and not given back.
    pub fn sold_by(&self, booking_id: &BookingId, hold_id: &HoldId) -> u32 {
        self.sales.get(booking_id).map_or(0, |sales| {
            sales
                .iter()
                .filter(|sale| sale.hold_id.as_ref() == Some(hold_id))
                .map(|sale| sale.places)
                .sum()
        })
    }
}

impl Decider for PoolShard {
    /// A command with the shard's capacity and the instant it is decided at.
    type Command = (PoolCommand, u32, DateTime<Utc>);
    type Event = PoolEvent;
    type Error = PoolError;

    fn decide(
        &self,
        (command, capacity, now): &Self::Command,
    ) -> Result<Vec<PoolEvent>, PoolError> {
        decide(self, *capacity, command, *now)
    }

    fn evolve(&mut self, event: &PoolEvent) {
        self.apply_event(event);
    }
}

impl_aggregate!(PoolShard, "PoolShard");

/// How a hold of `quantity` is split across shards, given each shard's free
/// places in the order to draw from: greedily, from the first shard with
/// room. `None` if the shards together cannot serve it.
pub fn split(free: &[(u32, u32)], quantity: u32) -> Option<Vec<(u32, u32)>> {
    let mut parts = Vec::new();
    let mut remaining = quantity;
    for &(shard, available) in free {
        if remaining == 0 {
            break;
        }
        let take = available.min(remaining);
        if take > 0 {
            parts.push((shard, take));
            remaining -= take;
        }
    }
    (remaining == 0).then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;
    use proptest::prelude::*;

    #[test]
    fn a_shard_stream_id_round_trips() {
        let show = ShowId::parse("rock").unwrap();
        let pool = PoolId::parse("floor.b").unwrap();
        let stream = shard_stream_id(&show, &pool, 12);
        assert_eq!(parse_shard_stream_id(&stream), Some((show, pool, 12)));
        assert_eq!(parse_shard_stream_id("rock/A-1"), None);
    }
    use uuid::Uuid;

    fn t(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + Duration::seconds(1_800_000_000 + seconds)
    }
    fn hold(n: u128) -> HoldId {
        HoldId(Uuid::from_u128(n))
    }
    fn place(n: u128, quantity: u32, until: i64) -> PoolCommand {
        PoolCommand::PlaceHold {
            hold_id: hold(n),
            buyer: BuyerId::parse("b").unwrap(),
            quantity,
            expires_at: t(until),
            price: None,
            channel: None,
            role: WaitlistRole::None,
        }
    }
    fn given(capacity: u32, commands: &[(PoolCommand, i64)]) -> PoolShard {
        let mut shard = PoolShard::default();
        for (command, at) in commands {
            for event in decide(&shard, capacity, command, t(*at)).unwrap() {
                shard.apply_event(&event);
            }
        }
        shard
    }

    /// A show with a waiting list: public holds are returning holds, and the
    /// places their end frees are owed to the waiting list.
    mod waitlist {
        use super::*;

        fn as_role(command: PoolCommand, role: WaitlistRole) -> PoolCommand {
            match command {
                PoolCommand::PlaceHold {
                    hold_id,
                    buyer,
                    quantity,
                    expires_at,
                    price,
                    channel,
                    ..
                } => PoolCommand::PlaceHold {
                    hold_id,
                    buyer,
                    quantity,
                    expires_at,
                    price,
                    channel,
                    role,
                },
                other => other,
            }
        }
        fn returning_hold(n: u128, quantity: u32, until: i64) -> PoolCommand {
            as_role(place(n, quantity, until), WaitlistRole::Buyer)
        }
        fn offer(n: u128, quantity: u32, until: i64) -> PoolCommand {
            as_role(place(n, quantity, until), WaitlistRole::Offer)
        }
        fn free_and_owed(shard: &PoolShard, at: i64) -> (u32, u32) {
            (shard.available_at(None, 5, t(at)), shard.owed_at(t(at)))
        }

        #[test]
        fn released_returning_places_are_owed_to_the_waitlist_and_refused_to_a_buyer() {
            let shard = given(
                5,
                &[
                    (returning_hold(1, 5, 480), 0),
                    (PoolCommand::ReleaseHold { hold_id: hold(1) }, 10),
                ],
            );
            assert_eq!(free_and_owed(&shard, 11), (0, 5));
            assert_eq!(
                decide(&shard, 5, &returning_hold(2, 1, 600), t(11)),
                Err(PoolError::NotEnough { available: 0 })
            );
            // The waiting list's offer takes them, and they are owed no more.
            let events = decide(&shard, 5, &offer(3, 2, 600), t(11)).unwrap();
            assert!(matches!(
                events.as_slice(),
                [PoolEvent::PoolHoldPlaced {
                    returns_to_waitlist: true,
                    offer: true,
                    ..
                }]
            ));
            let mut offered = shard.clone();
            events.iter().for_each(|e| offered.apply_event(e));
            assert_eq!(free_and_owed(&offered, 11), (0, 3));
        }

        #[test]
        fn at_the_instant_a_returning_hold_expires_its_places_are_owed_not_for_sale() {
            let shard = given(5, &[(returning_hold(1, 4, 480), 0)]);
            assert_eq!(free_and_owed(&shard, 479), (1, 0));
            assert_eq!(free_and_owed(&shard, 480), (1, 4));
            assert_eq!(
                decide(&shard, 5, &returning_hold(2, 2, 600), t(480)),
                Err(PoolError::NotEnough { available: 1 })
            );
            // The offer records the expiry that owes them, then takes them.
            let events = decide(&shard, 5, &offer(3, 4, 900), t(480)).unwrap();
            assert!(matches!(
                events.as_slice(),
                [
                    PoolEvent::PoolHoldExpired { .. },
                    PoolEvent::PoolHoldPlaced { offer: true, .. }
                ]
            ));
        }

        #[test]
        fn an_offer_takes_only_owed_places_and_passed_ones_are_for_sale_again() {
            let shard = given(5, &[(returning_hold(1, 2, 480), 0)]);
            // Three places free for sale, none owed: nothing to offer.
            assert_eq!(
                decide(&shard, 5, &offer(3, 1, 900), t(10)),
                Err(PoolError::NotEnough { available: 0 })
            );
            let passed = given(
                5,
                &[
                    (returning_hold(1, 2, 480), 0),
                    (PoolCommand::Pass { quantity: 9 }, 500),
                ],
            );
            assert_eq!(free_and_owed(&passed, 500), (5, 0));
            assert!(
                decide(&passed, 5, &PoolCommand::Pass { quantity: 1 }, t(500))
                    .unwrap()
                    .is_empty()
            );
        }

        #[test]
        fn a_cancelled_returning_sale_and_a_channel_give_back_owe_places_to_the_waitlist() {
            let partner = ChannelId::parse("partner-x").unwrap();
            let shard = given(
                5,
                &[
                    (returning_hold(1, 2, 480), 0),
                    (
                        PoolCommand::ConvertHold {
                            hold_id: hold(1),
                            booking_id: BookingId(Uuid::from_u128(101)),
                        },
                        10,
                    ),
                    (
                        PoolCommand::Allocate {
                            channel: partner.clone(),
                            quantity: 2,
                        },
                        10,
                    ),
                    (
                        PoolCommand::ReturnPlaces {
                            booking_id: BookingId(Uuid::from_u128(101)),
                            hold_id: hold(1),
                            quantity: 1,
                        },
                        20,
                    ),
                    (
                        PoolCommand::Deallocate {
                            channel: partner,
                            quantity: 2,
                            returns_to_waitlist: true,
                        },
                        20,
                    ),
                ],
            );
            assert_eq!(shard.sold, 1);
            assert_eq!(free_and_owed(&shard, 21), (1, 3));
        }

        #[test]
        fn a_hold_without_a_waitlist_frees_its_places_at_once() {
            let shard = given(
                5,
                &[
                    (place(1, 5, 480), 0),
                    (PoolCommand::ReleaseHold { hold_id: hold(1) }, 10),
                ],
            );
            assert_eq!(free_and_owed(&shard, 11), (5, 0));
        }
    }

    /// An order books several holds of one pool under its one booking id.
    mod orders {
        use super::*;

        fn order() -> BookingId {
            BookingId(Uuid::from_u128(900))
        }
        fn convert_for_order(n: u128) -> PoolCommand {
            PoolCommand::ConvertHold {
                hold_id: hold(n),
                booking_id: order(),
            }
        }
        fn priced(command: PoolCommand, ticket_type: &str, cents: i64) -> PoolCommand {
            match command {
                PoolCommand::PlaceHold {
                    hold_id,
                    buyer,
                    quantity,
                    expires_at,
                    channel,
                    role,
                    ..
                } => PoolCommand::PlaceHold {
                    hold_id,
                    buyer,
                    quantity,
                    expires_at,
                    price: Some(ItemPrice {
                        category: None,
                        ticket_type: crate::ids::TicketType::parse(ticket_type).unwrap(),
                        price_cents: cents,
                    }),
                    channel,
                    role,
                },
                other => other,
            }
        }

        #[test]
        fn it_should_not_take_a_released_hold_for_converted_when_the_order_sold_another() {
            // Given an order's first hold converted and its second released
            let shard = given(
                10,
                &[
                    (place(1, 2, 480), 0),
                    (place(2, 2, 480), 0),
                    (convert_for_order(1), 5),
                    (PoolCommand::ReleaseHold { hold_id: hold(2) }, 6),
                ],
            );
            // When the order converts its second hold: it is lost
            assert_eq!(
                decide(&shard, 10, &convert_for_order(2), t(7)),
                Err(PoolError::HoldLost)
            );
            // and the first, converted already, is a no-op
            assert_eq!(decide(&shard, 10, &convert_for_order(1), t(7)), Ok(vec![]));
        }

        #[test]
        fn it_should_give_back_the_cancelled_lines_own_hold_not_the_latest_sale() {
            // Given an order of 2 adult places (hold 1) and 1 child (hold 2)
            let shard = given(
                10,
                &[
                    (priced(place(1, 2, 480), "adult", 2500), 0),
                    (priced(place(2, 1, 480), "child", 1000), 0),
                    (convert_for_order(1), 5),
                    (convert_for_order(2), 5),
                ],
            );
            // When one adult line is cancelled
            let give_back = PoolCommand::ReturnPlaces {
                booking_id: order(),
                hold_id: hold(1),
                quantity: 1,
            };
            let mut after = shard.clone();
            for event in decide(&shard, 10, &give_back, t(10)).unwrap() {
                after.apply_event(&event);
            }
            // Then one adult and the child stay sold
            assert_eq!(after.sold, 2);
            assert_eq!(after.sold_by(&order(), &hold(1)), 1);
            assert_eq!(after.sold_by(&order(), &hold(2)), 1);
            // and the child's hold gives back no more than it sold
            let child_twice = PoolCommand::ReturnPlaces {
                booking_id: order(),
                hold_id: hold(2),
                quantity: 5,
            };
            assert_eq!(
                decide(&after, 10, &child_twice, t(11)),
                Ok(vec![PoolEvent::PoolPlacesReturned {
                    booking_id: order(),
                    quantity: 1,
                    hold_id: Some(hold(2)),
                }])
            );
        }

        #[test]
        fn it_should_refuse_to_release_or_extend_a_hold_its_order_converted() {
            // Given a hold converted by an order (booked under the order's id)
            let shard = given(10, &[(place(1, 2, 480), 0), (convert_for_order(1), 5)]);
            // When its buyer releases or extends it: converted, not gone
            assert_eq!(
                decide(
                    &shard,
                    10,
                    &PoolCommand::ReleaseHold { hold_id: hold(1) },
                    t(6)
                ),
                Err(PoolError::HoldConverted)
            );
            let extend = PoolCommand::ExtendHold {
                hold_id: hold(1),
                ttl: Duration::seconds(100),
                max_hold: Duration::seconds(300),
            };
            assert_eq!(
                decide(&shard, 10, &extend, t(6)),
                Err(PoolError::HoldConverted)
            );
            // Another hold never placed here: nothing to release
            assert_eq!(
                decide(
                    &shard,
                    10,
                    &PoolCommand::ReleaseHold { hold_id: hold(2) },
                    t(6)
                ),
                Ok(vec![])
            );
        }

        #[test]
        fn an_old_give_back_without_its_hold_returns_the_latest_sale_as_it_did() {
            let mut shard = given(
                10,
                &[
                    (place(1, 2, 480), 0),
                    (place(2, 1, 480), 0),
                    (convert_for_order(1), 5),
                    (convert_for_order(2), 5),
                ],
            );
            shard.apply_event(&PoolEvent::PoolPlacesReturned {
                booking_id: order(),
                quantity: 1,
                hold_id: None,
            });
            assert_eq!(shard.sold_by(&order(), &hold(2)), 0);
            assert_eq!(shard.sold_by(&order(), &hold(1)), 2);
        }
    }

    mod channels {
        use super::*;

        fn partner() -> ChannelId {
            ChannelId::parse("partner-x").unwrap()
        }
        fn allocate(quantity: u32) -> PoolCommand {
            PoolCommand::Allocate {
                channel: partner(),
                quantity,
            }
        }
        fn deallocate(quantity: u32) -> PoolCommand {
            PoolCommand::Deallocate {
                channel: partner(),
                quantity,
                returns_to_waitlist: false,
            }
        }
        fn through_channel(n: u128, quantity: u32, until: i64) -> PoolCommand {
            match place(n, quantity, until) {
                PoolCommand::PlaceHold {
                    hold_id,
                    buyer,
                    quantity,
                    expires_at,
                    price,
                    ..
                } => PoolCommand::PlaceHold {
                    hold_id,
                    buyer,
                    quantity,
                    expires_at,
                    price,
                    channel: Some(partner()),
                    role: WaitlistRole::None,
                },
                other => other,
            }
        }
        fn convert(n: u128) -> PoolCommand {
            PoolCommand::ConvertHold {
                hold_id: hold(n),
                booking_id: BookingId(Uuid::from_u128(100 + n)),
            }
        }

        #[test]
        fn it_should_allocate_only_places_free_for_public_sale_all_or_none() {
            // Given 10 places, 4 held by the public
            let shard = given(10, &[(place(1, 4, 100), 0)]);
            // When 7 are allocated: only 6 are free
            assert_eq!(
                decide(&shard, 10, &allocate(7), t(1)),
                Err(PoolError::NotEnough { available: 6 })
            );
            // When 6 are: the public has none left, the channel 6
            let shard = given(10, &[(place(1, 4, 100), 0), (allocate(6), 1)]);
            assert_eq!(shard.available_at(None, 10, t(2)), 0);
            assert_eq!(shard.available_at(Some(&partner()), 10, t(2)), 6);
            assert_eq!(
                decide(&shard, 10, &place(2, 1, 100), t(2)),
                Err(PoolError::NotEnough { available: 0 })
            );
        }

        #[test]
        fn it_should_record_the_expiry_that_frees_places_for_an_allocation() {
            let shard = given(5, &[(place(1, 5, 100), 0)]);
            assert_eq!(
                decide(&shard, 5, &allocate(5), t(100)),
                Ok(vec![
                    PoolEvent::PoolHoldExpired { hold_id: hold(1) },
                    PoolEvent::PoolPlacesAllocated {
                        channel: partner(),
                        quantity: 5
                    }
                ])
            );
        }

        #[test]
        fn it_should_sell_a_channels_places_only_through_it_and_keep_sold_ones() {
            // Given 10 places, 6 allocated, 2 of them held through the channel
            let shard = given(10, &[(allocate(6), 0), (through_channel(1, 2, 100), 1)]);
            assert_eq!(shard.available_at(Some(&partner()), 10, t(2)), 4);
            assert_eq!(
                shard.available_at(None, 10, t(2)),
                4,
                "the public's are apart"
            );
            // When the channel's hold is sold: the channel has 4 allocated
            // and unsold, 4 free
            let sold = given(
                10,
                &[
                    (allocate(6), 0),
                    (through_channel(1, 2, 100), 1),
                    (convert(1), 2),
                ],
            );
            assert_eq!(sold.sold, 2);
            assert_eq!(sold.allocated_to(&partner()), 4);
            assert_eq!(
                sold.sales[&BookingId(Uuid::from_u128(101))][0].channel,
                Some(partner())
            );
            // When more is given back than is free through the channel
            assert_eq!(
                decide(&sold, 10, &deallocate(5), t(3)),
                Err(PoolError::NotEnough { available: 4 })
            );
            // When its booking is cancelled, the places go back to the channel
            let mut cancelled = sold.clone();
            cancelled.apply_event(&PoolEvent::PoolBookingCancelled {
                booking_id: BookingId(Uuid::from_u128(101)),
            });
            assert_eq!(cancelled.allocated_to(&partner()), 6);
            assert_eq!(cancelled.sold, 0);
            assert!(cancelled.sales.is_empty());
        }

        #[test]
        fn it_should_give_back_a_channels_free_places_to_public_sale() {
            let shard = given(10, &[(allocate(6), 0), (deallocate(4), 1)]);
            assert_eq!(shard.allocated_to(&partner()), 2);
            assert_eq!(shard.available_at(None, 10, t(2)), 8);
            let all = given(10, &[(allocate(6), 0), (deallocate(6), 1)]);
            assert!(all.allocated.is_empty());
        }
    }

    fn extend(n: u128) -> PoolCommand {
        PoolCommand::ExtendHold {
            hold_id: hold(n),
            ttl: Duration::seconds(100),
            max_hold: Duration::seconds(250),
        }
    }

    #[test]
    fn it_should_keep_an_extended_holds_places_past_its_first_expiry() {
        let shard = given(5, &[(place(1, 5, 100), 0), (extend(1), 60)]);
        assert_eq!(shard.holds[&hold(1)].expires_at, t(160));
        assert_eq!(shard.available_at(None, 5, t(120)), 0);
        assert_eq!(
            decide(&shard, 5, &place(2, 1, 300), t(120)),
            Err(PoolError::NotEnough { available: 0 })
        );
        assert_eq!(shard.available_at(None, 5, t(160)), 5);
    }

    #[test]
    fn it_should_extend_a_pool_hold_no_later_than_its_cap() {
        let shard = given(
            5,
            &[(place(1, 2, 100), 0), (extend(1), 90), (extend(1), 180)],
        );
        assert_eq!(shard.holds[&hold(1)].expires_at, t(250));
        assert_eq!(
            decide(&shard, 5, &extend(1), t(200)),
            Err(PoolError::ExtensionLimit)
        );
        let once = given(5, &[(place(1, 2, 100), 0), (extend(1), 90)]);
        assert_eq!(
            decide(&once, 5, &extend(1), t(90)),
            Ok(vec![]),
            "moves nothing"
        );
    }

    #[test]
    fn it_should_refuse_to_extend_an_expired_released_or_converted_pool_hold() {
        let shard = given(5, &[(place(1, 2, 100), 0)]);
        assert_eq!(
            decide(&shard, 5, &extend(1), t(100)),
            Err(PoolError::HoldExpired)
        );
        let released = given(
            5,
            &[
                (place(1, 2, 100), 0),
                (PoolCommand::ReleaseHold { hold_id: hold(1) }, 5),
            ],
        );
        assert_eq!(
            decide(&released, 5, &extend(1), t(6)),
            Err(PoolError::HoldLost)
        );
        let booking_id = crate::checkout::Checkout::booking_id_for(hold(1));
        let converted = given(
            5,
            &[
                (place(1, 2, 100), 0),
                (
                    PoolCommand::ConvertHold {
                        hold_id: hold(1),
                        booking_id,
                    },
                    5,
                ),
            ],
        );
        assert_eq!(
            decide(&converted, 5, &extend(1), t(6)),
            Err(PoolError::HoldConverted)
        );
    }

    #[test]
    fn it_should_hold_places_while_enough_are_free() {
        let shard = given(5, &[(place(1, 3, 100), 0)]);
        assert_eq!(shard.available_at(None, 5, t(1)), 2);
        assert_eq!(
            decide(&shard, 5, &place(2, 3, 100), t(1)),
            Err(PoolError::NotEnough { available: 2 })
        );
        assert!(decide(&shard, 5, &place(2, 2, 100), t(1)).is_ok());
    }

    #[test]
    fn it_should_give_expired_places_back_without_an_event() {
        let shard = given(5, &[(place(1, 5, 100), 0)]);
        assert_eq!(shard.available_at(None, 5, t(99)), 0);
        assert_eq!(shard.available_at(None, 5, t(100)), 5);
        let events = decide(&shard, 5, &place(2, 5, 200), t(100)).unwrap();
        assert_eq!(
            events,
            vec![
                PoolEvent::PoolHoldExpired { hold_id: hold(1) },
                PoolEvent::PoolHoldPlaced {
                    hold_id: hold(2),
                    buyer: BuyerId::parse("b").unwrap(),
                    quantity: 5,
                    expires_at: t(200),
                    price: None,
                    channel: None,
                    returns_to_waitlist: false,
                    offer: false,
                }
            ]
        );
    }

    #[test]
    fn it_should_give_a_new_hold_only_the_expired_places_it_records() {
        // 18 holds of one place expire at 100; a command records at most 16
        // expiries, so the two it cannot record keep their places: an
        // instance whose clock is behind may still convert them.
        let commands: Vec<(PoolCommand, i64)> = (1..=18).map(|n| (place(n, 1, 100), 0)).collect();
        let shard = given(20, &commands);
        assert_eq!(shard.available_at(None, 20, t(100)), 20);
        assert_eq!(
            decide(&shard, 20, &place(99, 20, 200), t(100)),
            Err(PoolError::NotEnough { available: 18 })
        );
        let events = decide(&shard, 20, &place(99, 18, 200), t(100)).unwrap();
        let recorded = events
            .iter()
            .filter(|e| matches!(e, PoolEvent::PoolHoldExpired { .. }))
            .count();
        assert_eq!(recorded, MAX_EXPIRIES_PER_COMMAND);
    }

    #[test]
    fn it_should_treat_the_same_hold_again_as_a_no_op() {
        let shard = given(5, &[(place(1, 2, 100), 0)]);
        assert_eq!(decide(&shard, 5, &place(1, 2, 100), t(1)), Ok(vec![]));
    }

    #[test]
    fn it_should_count_converted_places_as_sold_and_cancel_them_back() {
        let booking = BookingId(Uuid::from_u128(99));
        let convert = PoolCommand::ConvertHold {
            hold_id: hold(1),
            booking_id: booking,
        };
        let shard = given(5, &[(place(1, 2, 100), 0), (convert.clone(), 50)]);
        assert_eq!((shard.sold, shard.held_at(t(51))), (2, 0));
        assert_eq!(
            shard.available_at(None, 5, t(10_000)),
            3,
            "sold places never expire"
        );
        assert_eq!(
            decide(&shard, 5, &convert, t(60)),
            Ok(vec![]),
            "converted again"
        );
        let cancel = PoolCommand::CancelBooking {
            booking_id: booking,
        };
        let freed = given(
            5,
            &[(place(1, 2, 100), 0), (convert, 50), (cancel.clone(), 60)],
        );
        assert_eq!(freed.available_at(None, 5, t(61)), 5);
        assert_eq!(
            decide(&freed, 5, &cancel, t(62)),
            Ok(vec![]),
            "cancelled again"
        );
    }

    #[test]
    fn it_should_not_convert_an_expired_or_released_hold() {
        let shard = given(5, &[(place(1, 2, 100), 0)]);
        let convert = PoolCommand::ConvertHold {
            hold_id: hold(1),
            booking_id: BookingId(Uuid::from_u128(9)),
        };
        assert_eq!(
            decide(&shard, 5, &convert, t(100)),
            Err(PoolError::HoldExpired)
        );
        let released = given(
            5,
            &[
                (place(1, 2, 100), 0),
                (PoolCommand::ReleaseHold { hold_id: hold(1) }, 5),
            ],
        );
        assert_eq!(
            decide(&released, 5, &convert, t(6)),
            Err(PoolError::HoldLost)
        );
        assert_eq!(released.available_at(None, 5, t(6)), 5);
    }

    #[test]
    fn it_should_split_capacity_evenly_and_draw_greedily() {
        assert_eq!(default_shards(1), 1);
        assert_eq!(default_shards(500), 8);
        assert_eq!(default_shards(1_000_000), MAX_POOL_SHARDS);
        let parts: Vec<u32> = (0..8).map(|i| shard_capacity(500, 8, i)).collect();
        assert_eq!(parts.iter().sum::<u32>(), 500);
        assert_eq!(parts[0], 63);
        assert_eq!(parts[7], 62);
        assert_eq!(
            split(&[(3, 1), (4, 0), (5, 4)], 4),
            Some(vec![(3, 1), (5, 3)])
        );
        assert_eq!(split(&[(3, 1), (4, 2)], 4), None);
    }

    /// A plain model of one shard: a list of holds with their expiry and a
    /// sold counter, with the rules written the obvious way.
    #[derive(Default, Debug)]
    struct Model {
        holds: Vec<(u128, u32, i64, bool)>, // id, quantity, expires_at, live
        sold: Vec<(u128, u32)>,             // booking (= hold id), quantity
    }

    impl Model {
        fn free(&self, capacity: u32, now: i64) -> u32 {
            let held: u32 = self
                .holds
                .iter()
                .filter(|h| h.3 && h.2 > now)
                .map(|h| h.1)
                .sum();
            let sold: u32 = self.sold.iter().map(|s| s.1).sum();
            capacity - held - sold
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Hold(u128, u32, i64),
        Release(u128),
        Advance(i64),
        Convert(u128),
        Cancel(u128),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u128..12, 1u32..6, 1i64..30).prop_map(|(id, q, ttl)| Op::Hold(id, q, ttl)),
            (1u128..12).prop_map(Op::Release),
            (1i64..20).prop_map(Op::Advance),
            (1u128..12).prop_map(Op::Convert),
            (1u128..12).prop_map(Op::Cancel),
        ]
    }

    proptest! {
        #[test]
        fn decisions_agree_with_the_model_and_never_oversell(
            capacity in 1u32..20,
            ops in proptest::collection::vec(op(), 1..60),
        ) {
            let mut shard = PoolShard::default();
            let mut model = Model::default();
            let mut now = 0i64;
            for op in ops {
                let at = t(now);
                match op {
                    Op::Advance(by) => now += by,
                    Op::Hold(id, q, ttl) => {
                        let live = model.holds.iter().any(|h| h.0 == id && h.3 && h.2 > now);
                        let used = model.holds.iter().any(|h| h.0 == id) || model.sold.iter().any(|s| s.0 == id);
                        if used && !live {
                            continue; // hold ids are never reused once finished
                        }
                        let result = decide(&shard, capacity, &place(id, q, now + ttl), at);
                        if live {
                            prop_assert_eq!(result.clone(), Ok(vec![]));
                        } else if model.free(capacity, now) >= q {
                            prop_assert!(result.is_ok(), "{:?}", result);
                            model.holds.push((id, q, now + ttl, true));
                        } else {
                            prop_assert_eq!(result.clone(), Err(PoolError::NotEnough { available: model.free(capacity, now) }));
                        }
                        for e in result.unwrap_or_default() { shard.apply_event(&e); }
                    }
                    Op::Release(id) => {
                        let result = decide(&shard, capacity, &PoolCommand::ReleaseHold { hold_id: hold(id) }, at);
                        if let Some(h) = model.holds.iter_mut().find(|h| h.0 == id && h.3) { h.3 = false; }
                        for e in result.unwrap_or_default() { shard.apply_event(&e); }
                    }
                    Op::Convert(id) => {
                        let booking_id = crate::checkout::Checkout::booking_id_for(hold(id));
                        let result = decide(&shard, capacity, &PoolCommand::ConvertHold { hold_id: hold(id), booking_id }, at);
                        let pos = model.holds.iter().position(|h| h.0 == id && h.3);
                        match pos {
                            Some(i) if model.holds[i].2 > now => {
                                prop_assert!(result.is_ok());
                                let (_, q, _, _) = model.holds[i];
                                model.holds[i].3 = false;
                                model.sold.push((id, q));
                            }
                            _ => prop_assert!(result.is_err() || model.sold.iter().any(|s| s.0 == id)),
                        }
                        for e in result.unwrap_or_default() { shard.apply_event(&e); }
                    }
                    Op::Cancel(id) => {
                        let booking_id = crate::checkout::Checkout::booking_id_for(hold(id));
                        let result = decide(&shard, capacity, &PoolCommand::CancelBooking { booking_id }, at);
                        model.sold.retain(|s| s.0 != id);
                        for e in result.unwrap_or_default() { shard.apply_event(&e); }
                    }
                }
                let at = t(now);
                prop_assert_eq!(shard.available_at(None, capacity, at), model.free(capacity, now));
                prop_assert!(shard.sold + shard.held_at(at) <= capacity);
            }
        }
    }
}
