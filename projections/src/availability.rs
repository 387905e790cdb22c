//! The availability row of one seat: the fold of its stream, as columns.

use chrono::{DateTime, Utc};
use domain::ids::{BookingId, BuyerId, ChannelId, HoldId, SeatId, ShowId, TicketType};
use domain::seat::{Seat, SeatState, SeatStatus};
use serde::{Deserialize, Serialize};

use crate::time::{from_micros, to_micros};

/// A row of `seat_availability`: the fold of one seat stream, as the
/// columns an event moves (the seat's place in the show, `ordinal` and
/// `section`, is written once when the show is created). This one type is
/// what commands and the projector write, what replay writes and verify
/// compares, and what the store reads back: its field names are the
/// column names, in the append document and in every read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatAvailabilityRow {
    pub show_id: ShowId,
    pub seat_id: SeatId,
    /// As recorded by the stream; readers apply expiry with [`Self::status_at`].
    pub status: SeatStatus,
    pub hold_id: Option<HoldId>,
    pub buyer: Option<BuyerId>,
    pub expires_at_us: Option<i64>,
    pub booking_id: Option<BookingId>,
    /// The sales channel the seat is allocated to (`None`: public sale).
    pub channel: Option<ChannelId>,
    /// What the seat's current hold or booking sold it as, and for how much
    /// (its `HoldPlaced`'s price; `None` while free).
    pub ticket_type: Option<TicketType>,
    pub price_cents: Option<i64>,
    /// The stream sequence this row is the fold of: a write with a lower or
    /// equal one changes nothing.
    pub last_seq: i64,
}

impl SeatAvailabilityRow {
    /// The row of a seat whose stream is at `last_seq` with state `seat`.
    pub fn of(show_id: &ShowId, seat_id: &SeatId, last_seq: i64, seat: &Seat) -> Self {
        let mut row = Self {
            show_id: show_id.clone(),
            seat_id: seat_id.clone(),
            status: SeatStatus::Available,
            hold_id: None,
            buyer: None,
            expires_at_us: None,
            booking_id: None,
            channel: seat.channel.clone(),
            ticket_type: None,
            price_cents: None,
            last_seq,
        };
        if !matches!(seat.state, SeatState::Available) {
            if let Some(price) = &seat.price {
                row.ticket_type = Some(price.ticket_type.clone());
                row.price_cents = Some(price.price_cents);
            }
        }
        match &seat.state {
            SeatState::Available => {}
            // Owed to the waiting list: held (by the waiting list), no hold's.
            SeatState::Returned => row.status = SeatStatus::Held,
            SeatState::Held(hold) => {
                row.status = SeatStatus::Held;
                row.hold_id = Some(hold.hold_id);
                row.buyer = Some(hold.buyer.clone());
                // A returning hold's seat does not free by itself at read time:
                // the waiting list judges it once the hold has expired.
                row.expires_at_us = seat.frees_at().map(to_micros);
            }
            SeatState::Booked {
                hold_id,
                booking_id,
                buyer,
                ..
            } => {
                row.status = SeatStatus::Booked;
                row.hold_id = Some(*hold_id);
                row.buyer = Some(buyer.clone());
                row.booking_id = Some(*booking_id);
            }
        }
        row
    }

    /// The status a reader sees at `now` (expiry applied).
    pub fn status_at(&self, now: DateTime<Utc>) -> SeatStatus {
        SeatStatus::at(self.status, self.expires_at_us.and_then(from_micros), now)
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
            price: None,
            returns_to_waitlist: false,
            offer: false,
        });
        let show = ShowId::parse("s").unwrap();
        let seat_id = SeatId::parse("A-1").unwrap();
        let row = SeatAvailabilityRow::of(&show, &seat_id, 1, &seat);
        assert_eq!(
            seat.state,
            SeatState::Held(SeatHold {
                hold_id: HoldId(Uuid::from_u128(1)),
                buyer: BuyerId::parse("a").unwrap(),
                expires_at: at,
                placed_expires_at: at,
                returns_to_waitlist: false,
                offer: false,
            })
        );
        assert_eq!(
            row.status_at(at - chrono::Duration::seconds(1)),
            SeatStatus::Held
        );
        assert_eq!(row.status_at(at), SeatStatus::Available);
    }

    #[test]
    fn a_row_says_the_seats_channel_and_what_its_hold_sold_it_as_until_it_is_free() {
        use domain::ids::{ChannelId, TicketType};
        use domain::pricing::ItemPrice;
        let at = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        let channel = ChannelId::parse("partner-x").unwrap();
        let hold_id = HoldId(Uuid::from_u128(1));
        let mut seat = Seat::default();
        for event in [
            SeatEvent::SeatAllocated {
                channel: channel.clone(),
            },
            SeatEvent::HoldPlaced {
                hold_id,
                buyer: BuyerId::parse("a").unwrap(),
                expires_at: at,
                price: Some(ItemPrice {
                    category: None,
                    ticket_type: TicketType::parse("child").unwrap(),
                    price_cents: 2_500,
                }),
                returns_to_waitlist: false,
                offer: false,
            },
        ] {
            seat.apply_event(&event);
        }
        let (show, seat_id) = (ShowId::parse("s").unwrap(), SeatId::parse("A-1").unwrap());
        let held = SeatAvailabilityRow::of(&show, &seat_id, 2, &seat);
        assert_eq!(held.channel, Some(channel.clone()));
        assert_eq!(held.ticket_type, Some(TicketType::parse("child").unwrap()));
        assert_eq!(held.price_cents, Some(2_500));
        seat.apply_event(&SeatEvent::HoldReleased { hold_id });
        let free = SeatAvailabilityRow::of(&show, &seat_id, 3, &seat);
        assert_eq!(free.channel, Some(channel), "still the channel's");
        assert_eq!((free.ticket_type, free.price_cents), (None, None));
    }
}
