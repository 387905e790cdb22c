//! The hold record: which seats a hold has, whose it is, and how it ended.
//!
//! A hold has no stream of its own: it is the set of seat events that carry
//! its id. Each seat event maps to one [`HoldChange`], and applying a change
//! twice leaves the record as it was (seats are a set; a hold's state only
//! moves from `held` to a final state, once).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use domain::ids::{
    BookingId, BuyerId, CategoryId, ChannelId, HoldId, PoolId, SeatId, ShowId, TicketType,
};
use domain::pool::PoolEvent;
use domain::pricing::ItemPrice;
use domain::seat::{has_expired, SeatEvent};
use serde::{Deserialize, Serialize};

use crate::time::to_micros;

/// The state a hold record stores. `Held` becomes `expired` for readers once
/// `expires_at` has passed (see [`HoldStatus::at`]), without any write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldState {
    Held,
    Released,
    Expired,
    Converted,
}

impl HoldState {
    pub fn as_str(self) -> &'static str {
        match self {
            HoldState::Held => "held",
            HoldState::Released => "released",
            HoldState::Expired => "expired",
            HoldState::Converted => "converted",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "held" => Some(HoldState::Held),
            "released" => Some(HoldState::Released),
            "expired" => Some(HoldState::Expired),
            "converted" => Some(HoldState::Converted),
            _ => None,
        }
    }
}

/// What a reader sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldStatus {
    Held,
    Expired,
    Released,
    Converted,
}

impl HoldStatus {
    pub fn at(state: HoldState, expires_at: DateTime<Utc>, now: DateTime<Utc>) -> Self {
        match state {
            HoldState::Held if has_expired(expires_at, now) => HoldStatus::Expired,
            HoldState::Held => HoldStatus::Held,
            HoldState::Released => HoldStatus::Released,
            HoldState::Expired => HoldStatus::Expired,
            HoldState::Converted => HoldStatus::Converted,
        }
    }
}

/// A row of `holds`: one per hold, inserted with its first unit and moved
/// from `held` to a final state once. Field names are the column names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldRow {
    pub hold_id: HoldId,
    pub show_id: ShowId,
    pub buyer: BuyerId,
    pub expires_at_us: i64,
    pub state: HoldState,
    pub booking_id: Option<BookingId>,
    /// The pool of a general-admission hold; `None` for seats.
    pub pool_id: Option<PoolId>,
    /// The seats of a seat hold; none for a pool hold.
    pub seat_ids: SeatIds,
    /// What each unit costs, as its event priced it (none for a hold placed
    /// before prices were in the events).
    pub items: HoldItems,
}

/// What one seat, or one shard's places, of a hold costs: its price as the
/// unit's `HoldPlaced` event fixed it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HoldItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat_id: Option<SeatId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<PoolId>,
    /// The shard the places are on (a pool hold's places of one shard are
    /// one item, priced alike).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
    /// Places (a pool item); a seat is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantity: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<CategoryId>,
    pub ticket_type: TicketType,
    /// A seat's, or one place's, price.
    pub price_cents: i64,
}

impl HoldItem {
    pub fn seat(seat_id: &SeatId, price: &ItemPrice) -> Self {
        Self {
            seat_id: Some(seat_id.clone()),
            pool_id: None,
            shard: None,
            quantity: None,
            category: price.category.clone(),
            ticket_type: price.ticket_type.clone(),
            price_cents: price.price_cents,
        }
    }

    pub fn places(pool_id: &PoolId, shard: u32, quantity: u32, price: &ItemPrice) -> Self {
        Self {
            seat_id: None,
            pool_id: Some(pool_id.clone()),
            shard: Some(shard),
            quantity: Some(quantity),
            category: price.category.clone(),
            ticket_type: price.ticket_type.clone(),
            price_cents: price.price_cents,
        }
    }

    /// Units: a seat, or the item's places.
    pub fn units(&self) -> u32 {
        self.quantity.unwrap_or(1)
    }

    /// What the item costs in all.
    pub fn amount_cents(&self) -> i64 {
        self.price_cents * i64::from(self.units())
    }
}

/// A hold's items, kept in the hold's row as one column of JSON text, a
/// set as [`SeatIds`] is (a placement reaching the tables in two batches
/// takes the union).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HoldItems(BTreeSet<HoldItem>);

impl HoldItems {
    pub fn one(item: Option<HoldItem>) -> Self {
        Self(item.into_iter().collect())
    }

    pub fn insert(&mut self, item: HoldItem) {
        self.0.insert(item);
    }

    pub fn extend(&mut self, other: &HoldItems) {
        self.0.extend(other.0.iter().cloned());
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &HoldItem> {
        self.0.iter()
    }

    /// What the hold costs: every item's amount.
    pub fn amount_cents(&self) -> i64 {
        self.0.iter().map(HoldItem::amount_cents).sum()
    }

    /// From the column's text; every item parsed.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text).map(Self)
    }
}

impl Serialize for HoldItems {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = serde_json::to_string(&self.0).map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for HoldItems {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::from_json(&text).map_err(serde::de::Error::custom)
    }
}

/// A seat hold's seats, kept in the hold's own row: one column whose text
/// is a JSON array of seat ids. A hold's seats are placed together, in one
/// append, and read together; a row of its own for each seat cost every
/// hold a second insert and two more index entries (212 bytes of WAL a hold,
/// BENCHMARKS.md). A set: a hold whose placement reaches the tables in two
/// batches (the projector's) takes the union (`booking_apply.sql`, the
/// SQLite statements, [`SeatIds::extend`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeatIds(BTreeSet<SeatId>);

impl SeatIds {
    pub fn one(seat: SeatId) -> Self {
        Self(BTreeSet::from([seat]))
    }

    pub fn extend(&mut self, other: &SeatIds) {
        self.0.extend(other.0.iter().cloned());
    }

    /// The seats, in id order.
    pub fn into_vec(self) -> Vec<SeatId> {
        self.0.into_iter().collect()
    }

    /// From the column's text (`["A-1","A-2"]`); every id parsed.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text).map(Self)
    }
}

impl Serialize for SeatIds {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = serde_json::to_string(&self.0).map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for SeatIds {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::from_json(&text).map_err(serde::de::Error::custom)
    }
}

/// A row of `pool_holds`: the places one shard holds for a pool hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolHoldRow {
    pub hold_id: HoldId,
    pub shard: u32,
    pub show_id: ShowId,
    pub pool_id: PoolId,
    pub quantity: u32,
    pub expires_at_us: i64,
    pub state: HoldState,
    /// The channel whose places it holds (`None`: public sale).
    pub channel: Option<ChannelId>,
    /// What a place costs it.
    pub ticket_type: Option<TicketType>,
    pub price_cents: Option<i64>,
}

/// What one event does to the hold tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldChange {
    /// The hold now covers this unit: insert the hold's row if it is new
    /// (a seat: the row names it, and a row already there takes it too),
    /// and a pool part's row.
    Placed {
        hold: Box<HoldRow>,
        part: Option<PoolHoldRow>,
    },
    /// The hold ended; the first final state recorded wins.
    Ended {
        hold_id: HoldId,
        show_id: ShowId,
        state: HoldState,
    },
    /// The hold was paid for and became this booking.
    Converted {
        hold_id: HoldId,
        show_id: ShowId,
        booking_id: BookingId,
    },
    /// The hold was extended: its record and pool parts, while `held`, take
    /// the later `expires_at_us` (an earlier one changes nothing).
    Extended {
        hold_id: HoldId,
        show_id: ShowId,
        expires_at_us: i64,
    },
}

fn held(
    hold_id: HoldId,
    show_id: &ShowId,
    buyer: &BuyerId,
    expires_at: DateTime<Utc>,
    pool_id: Option<&PoolId>,
    seat_ids: SeatIds,
    items: HoldItems,
) -> HoldRow {
    HoldRow {
        hold_id,
        show_id: show_id.clone(),
        buyer: buyer.clone(),
        expires_at_us: to_micros(expires_at),
        state: HoldState::Held,
        booking_id: None,
        pool_id: pool_id.cloned(),
        seat_ids,
        items,
    }
}

/// The change a seat event makes to its hold's record, if any (a cancelled
/// booking changes the booking, not the hold it came from).
pub fn hold_change(show_id: &ShowId, seat_id: &SeatId, event: &SeatEvent) -> Option<HoldChange> {
    Some(match event {
        SeatEvent::HoldPlaced {
            hold_id,
            buyer,
            expires_at,
            price,
            ..
        } => HoldChange::Placed {
            hold: Box::new(held(
                *hold_id,
                show_id,
                buyer,
                *expires_at,
                None,
                SeatIds::one(seat_id.clone()),
                HoldItems::one(price.as_ref().map(|p| HoldItem::seat(seat_id, p))),
            )),
            part: None,
        },
        SeatEvent::HoldReleased { hold_id } => HoldChange::Ended {
            hold_id: *hold_id,
            show_id: show_id.clone(),
            state: HoldState::Released,
        },
        SeatEvent::HoldExpired { hold_id } => HoldChange::Ended {
            hold_id: *hold_id,
            show_id: show_id.clone(),
            state: HoldState::Expired,
        },
        SeatEvent::HoldConverted {
            hold_id,
            booking_id,
        } => HoldChange::Converted {
            hold_id: *hold_id,
            show_id: show_id.clone(),
            booking_id: *booking_id,
        },
        SeatEvent::BookingCancelled { .. }
        | SeatEvent::SeatAllocated { .. }
        | SeatEvent::SeatDeallocated { .. }
        | SeatEvent::SeatPassed => return None,
        SeatEvent::HoldExtended {
            hold_id,
            expires_at,
        } => HoldChange::Extended {
            hold_id: *hold_id,
            show_id: show_id.clone(),
            expires_at_us: to_micros(*expires_at),
        },
    })
}

/// A pool hold's places on one shard: the hold's row and the part's.
fn pool_placed(
    show_id: &ShowId,
    pool_id: &PoolId,
    shard: u32,
    event: &PoolEvent,
) -> Option<HoldChange> {
    let PoolEvent::PoolHoldPlaced {
        hold_id,
        buyer,
        quantity,
        expires_at,
        price,
        channel,
        ..
    } = event
    else {
        return None;
    };
    Some(HoldChange::Placed {
        hold: Box::new(held(
            *hold_id,
            show_id,
            buyer,
            *expires_at,
            Some(pool_id),
            SeatIds::default(),
            HoldItems::one(
                price
                    .as_ref()
                    .map(|p| HoldItem::places(pool_id, shard, *quantity, p)),
            ),
        )),
        part: Some(PoolHoldRow {
            hold_id: *hold_id,
            shard,
            show_id: show_id.clone(),
            pool_id: pool_id.clone(),
            quantity: *quantity,
            expires_at_us: to_micros(*expires_at),
            state: HoldState::Held,
            channel: channel.clone(),
            ticket_type: price.as_ref().map(|p| p.ticket_type.clone()),
            price_cents: price.as_ref().map(|p| p.price_cents),
        }),
    })
}

/// The change a pool shard event makes to its hold's record, if any.
pub fn pool_hold_change(
    show_id: &ShowId,
    pool_id: &PoolId,
    shard: u32,
    event: &PoolEvent,
) -> Option<HoldChange> {
    Some(match event {
        PoolEvent::PoolHoldPlaced { .. } => return pool_placed(show_id, pool_id, shard, event),
        PoolEvent::PoolHoldReleased { hold_id } => HoldChange::Ended {
            hold_id: *hold_id,
            show_id: show_id.clone(),
            state: HoldState::Released,
        },
        PoolEvent::PoolHoldExpired { hold_id } => HoldChange::Ended {
            hold_id: *hold_id,
            show_id: show_id.clone(),
            state: HoldState::Expired,
        },
        PoolEvent::PoolHoldConverted {
            hold_id,
            booking_id,
        } => HoldChange::Converted {
            hold_id: *hold_id,
            show_id: show_id.clone(),
            booking_id: *booking_id,
        },
        PoolEvent::PoolBookingCancelled { .. }
        | PoolEvent::PoolPlacesReturned { .. }
        | PoolEvent::PoolPlacesAllocated { .. }
        | PoolEvent::PoolPlacesDeallocated { .. }
        | PoolEvent::PoolPlacesPassed { .. } => return None,
        PoolEvent::PoolHoldExtended {
            hold_id,
            expires_at,
        } => HoldChange::Extended {
            hold_id: *hold_id,
            show_id: show_id.clone(),
            expires_at_us: to_micros(*expires_at),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_hold_reads_expired_at_its_expiry_and_final_states_stay() {
        let at = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        let before = at - chrono::Duration::seconds(1);
        assert_eq!(
            HoldStatus::at(HoldState::Held, at, before),
            HoldStatus::Held
        );
        assert_eq!(HoldStatus::at(HoldState::Held, at, at), HoldStatus::Expired);
        assert_eq!(
            HoldStatus::at(HoldState::Released, at, before),
            HoldStatus::Released
        );
    }

    #[test]
    fn a_holds_seats_are_a_set_whose_column_is_a_json_array_of_ids() {
        let seat = |id: &str| SeatId::parse(id).unwrap();
        let mut seats = SeatIds::one(seat("B-2"));
        seats.extend(&SeatIds::one(seat("A-1")));
        seats.extend(&SeatIds::one(seat("B-2")));
        // The column is text: the row's JSON carries the array as a string.
        let value = serde_json::to_value(&seats).unwrap();
        assert_eq!(value, serde_json::json!(r#"["A-1","B-2"]"#));
        assert_eq!(SeatIds::from_json(r#"["A-1","B-2"]"#).unwrap(), seats);
        assert!(SeatIds::from_json(r#"["not a seat"]"#).is_err());
        assert_eq!(SeatIds::from_json("[]").unwrap(), SeatIds::default());
    }

    #[test]
    fn states_round_trip_through_their_column_text() {
        for state in [
            HoldState::Held,
            HoldState::Released,
            HoldState::Expired,
            HoldState::Converted,
        ] {
            assert_eq!(HoldState::parse(state.as_str()), Some(state));
        }
    }
}
