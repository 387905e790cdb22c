//! The availability row of one seat: the fold of its stream, as columns.

use chrono::{DateTime, Utc};
use domain::ids::{BookingId, BuyerId, HoldId};
use domain::seat::{Seat, SeatState, SeatStatus};

/// What the availability table stores for a seat, besides its identity and
/// the sequence it last applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatRow {
    /// As recorded by the stream; readers apply expiry with `SeatStatus::at`.
    pub recorded: SeatStatus,
    pub hold_id: Option<HoldId>,
    pub buyer: Option<BuyerId>,
    pub expires_at: Option<DateTime<Utc>>,
    pub booking_id: Option<BookingId>,
}

impl SeatRow {
    pub fn of(seat: &Seat) -> Self {
        match &seat.state {
            SeatState::Available => Self {
                recorded: SeatStatus::Available,
                hold_id: None,
                buyer: None,
                expires_at: None,
                booking_id: None,
            },
            SeatState::Held(hold) => Self {
                recorded: SeatStatus::Held,
                hold_id: Some(hold.hold_id),
                buyer: Some(hold.buyer.clone()),
                expires_at: Some(hold.expires_at),
                booking_id: None,
            },
            SeatState::Booked {
                hold_id,
                booking_id,
                buyer,
            } => Self {
                recorded: SeatStatus::Booked,
                hold_id: Some(*hold_id),
                buyer: Some(buyer.clone()),
                expires_at: None,
                booking_id: Some(*booking_id),
            },
        }
    }

    pub fn status_at(&self, now: DateTime<Utc>) -> SeatStatus {
        SeatStatus::at(self.recorded, self.expires_at, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::seat::{SeatEvent, SeatHold};
    use uuid::Uuid;

    #[test]
    fn a_held_row_reads_available_after_expiry() {
        let at = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        let mut seat = Seat::default();
        seat.apply_event(&SeatEvent::HoldPlaced {
            hold_id: HoldId(Uuid::from_u128(1)),
            buyer: BuyerId::parse("a").unwrap(),
            expires_at: at,
        });
        let row = SeatRow::of(&seat);
        assert_eq!(
            seat.state,
            SeatState::Held(SeatHold {
                hold_id: HoldId(Uuid::from_u128(1)),
                buyer: BuyerId::parse("a").unwrap(),
                expires_at: at
            })
        );
        assert_eq!(
            row.status_at(at - chrono::Duration::seconds(1)),
            SeatStatus::Held
        );
        assert_eq!(row.status_at(at), SeatStatus::Available);
    }
}
