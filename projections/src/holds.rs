//! The hold record: which seats a hold has, whose it is, and how it ended.
//!
//! A hold has no stream of its own: it is the set of seat events that carry
//! its id. Each seat event maps to one [`HoldChange`], and applying a change
//! twice leaves the record as it was (seats are a set; a hold's state only
//! moves from `held` to a final state, once).

use chrono::{DateTime, Utc};
use domain::ids::{BookingId, BuyerId, HoldId, PoolId, SeatId, ShowId};
use domain::pool::PoolEvent;
use domain::seat::{has_expired, SeatEvent};
use serde::Serialize;

/// The state a hold record stores. `Held` becomes `expired` for readers once
/// `expires_at` has passed (see [`HoldStatus::at`]), without any write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldChange {
    /// The hold now covers this seat (insert the record if new, add the seat).
    SeatHeld {
        hold_id: HoldId,
        show_id: ShowId,
        seat_id: SeatId,
        buyer: BuyerId,
        expires_at: DateTime<Utc>,
    },
    /// The hold now has `quantity` places of this pool shard.
    PoolPartHeld {
        hold_id: HoldId,
        show_id: ShowId,
        pool_id: PoolId,
        shard: u32,
        buyer: BuyerId,
        quantity: u32,
        expires_at: DateTime<Utc>,
    },
    /// The hold ended; the first final state recorded wins.
    Ended { hold_id: HoldId, state: HoldState },
    /// The hold was paid for and became this booking.
    Converted {
        hold_id: HoldId,
        booking_id: BookingId,
    },
}

/// The change a seat event makes to its hold's record, if any (a cancelled
/// booking changes the booking, not the hold it came from).
pub fn hold_change(show_id: &ShowId, seat_id: &SeatId, event: &SeatEvent) -> Option<HoldChange> {
    Some(match event {
        SeatEvent::HoldPlaced {
            hold_id,
            buyer,
            expires_at,
        } => HoldChange::SeatHeld {
            hold_id: *hold_id,
            show_id: show_id.clone(),
            seat_id: seat_id.clone(),
            buyer: buyer.clone(),
            expires_at: *expires_at,
        },
        SeatEvent::HoldReleased { hold_id } => HoldChange::Ended {
            hold_id: *hold_id,
            state: HoldState::Released,
        },
        SeatEvent::HoldExpired { hold_id } => HoldChange::Ended {
            hold_id: *hold_id,
            state: HoldState::Expired,
        },
        SeatEvent::HoldConverted {
            hold_id,
            booking_id,
        } => HoldChange::Converted {
            hold_id: *hold_id,
            booking_id: *booking_id,
        },
        SeatEvent::BookingCancelled { .. } => return None,
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
        PoolEvent::PoolHoldPlaced {
            hold_id,
            buyer,
            quantity,
            expires_at,
        } => HoldChange::PoolPartHeld {
            hold_id: *hold_id,
            show_id: show_id.clone(),
            pool_id: pool_id.clone(),
            shard,
            buyer: buyer.clone(),
            quantity: *quantity,
            expires_at: *expires_at,
        },
        PoolEvent::PoolHoldReleased { hold_id } => HoldChange::Ended {
            hold_id: *hold_id,
            state: HoldState::Released,
        },
        PoolEvent::PoolHoldExpired { hold_id } => HoldChange::Ended {
            hold_id: *hold_id,
            state: HoldState::Expired,
        },
        PoolEvent::PoolHoldConverted {
            hold_id,
            booking_id,
        } => HoldChange::Converted {
            hold_id: *hold_id,
            booking_id: *booking_id,
        },
        PoolEvent::PoolBookingCancelled { .. } => return None,
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
