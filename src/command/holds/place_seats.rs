//! The decision that places a hold on listed seats: every seat held by the
//! hold at one `now`, all or nothing, with the buyer's allowance; a refusal
//! names every seat the buyer cannot have.

use chrono::{DateTime, Utc};
use domain::ids::SeatId;
use domain::seat::{self, Seat, SeatCommand, SeatError, SeatEvent};

use projections::holds::{HoldItem, HoldItems};

use super::placement::{Held, Placement};
use super::HoldError;
use crate::command::round::{Decides, Decision, View};

/// The events of each seat of a hold, and what each costs.
type SeatsHeld = (Vec<Vec<SeatEvent>>, HoldItems);

/// The seats a hold cannot have (in view order), and of those the ones not
/// for sale to it (allocated to a sales channel it does not hold from, or
/// public while it holds from a channel).
#[derive(Debug, Default)]
pub(super) struct Unheld {
    pub(super) seats: Vec<SeatId>,
    pub(super) not_for_sale: Vec<SeatId>,
}

/// The seats of a view decided for a hold until `expires_at`, each priced
/// at the view's `now`: the events of each and what each costs, or every
/// seat another hold or a booking has (in view order).
pub(super) fn hold_seats(
    placement: &Placement<'_>,
    view: &View<'_, Seat>,
    expires_at: DateTime<Utc>,
) -> Result<Result<SeatsHeld, Unheld>, HoldError> {
    let mut taken = Unheld::default();
    let mut decided = Vec::with_capacity(view.units.len());
    let mut items = HoldItems::default();
    let prices = placement.prices();
    for (seat, key) in &view.units {
        let price = placement.seat_price(&prices.pricing, &key.seat_id, view.now)?;
        items.insert(HoldItem::seat(&key.seat_id, &price));
        let command = SeatCommand::PlaceHold {
            hold_id: placement.hold_id,
            buyer: placement.ctx.actor.id.clone(),
            expires_at,
            price: Some(price),
            channel: placement.sale.channel.clone(),
            role: placement.role(),
        };
        match seat::decide(seat, &command, view.now) {
            Ok(events) => decided.push(events),
            Err(SeatError::HeldByAnother | SeatError::Booked) => {
                taken.seats.push(key.seat_id.clone())
            }
            Err(SeatError::NotForSale) => {
                taken.seats.push(key.seat_id.clone());
                taken.not_for_sale.push(key.seat_id.clone());
            }
            Err(other) => {
                return Err(HoldError::Bug(format!(
                    "placing a hold on {}: {other}",
                    key.seat_id
                )))
            }
        }
    }
    Ok(if taken.seats.is_empty() {
        Ok((decided, items))
    } else {
        Err(taken)
    })
}

/// The hold on `seats` as `view` shows them, or the seats of those that
/// another hold or a booking has; a view whose seats were only assumed new
/// is read first (a refusal names every seat the buyer cannot have).
pub(super) fn decide_seats(
    placement: &Placement<'_>,
    view: &View<'_, Seat>,
    seats: &[SeatId],
) -> Result<Result<Decision<Seat, Held>, Unheld>, HoldError> {
    placement.admitted(view.now)?;
    let expires_at = placement.expires_at(view.now);
    match hold_seats(placement, view, expires_at)? {
        Ok((units, items)) => {
            let held = Held {
                expires_at,
                seats: seats.to_vec(),
                parts: Vec::new(),
                items,
            };
            placement
                .decided(view, units, seats.len() as u32, held)
                .map(Ok)
        }
        Err(_) if view.assumed_new => Ok(Ok(Decision::ReadAll)),
        Err(taken) => Ok(Err(taken)),
    }
}

/// Placing a hold on the seats listed (`HoldRequest::Seats`).
pub(super) struct PlaceSeats<'a> {
    pub(super) placement: &'a Placement<'a>,
    pub(super) seats: &'a [SeatId],
}

impl Decides<Seat> for PlaceSeats<'_> {
    type Output = Held;
    type Error = HoldError;

    async fn prepare(&mut self) -> Result<(), HoldError> {
        self.placement.read_prices().await
    }

    fn decide(&mut self, view: &View<'_, Seat>) -> Result<Decision<Seat, Held>, HoldError> {
        let placement = self.placement;
        match decide_seats(placement, view, self.seats)? {
            Ok(decision) => Ok(decision),
            Err(Unheld {
                mut seats,
                mut not_for_sale,
            }) => {
                // A seat not for sale here stays so however long the buyer
                // waits: that is the answer, not "taken".
                if not_for_sale.is_empty() {
                    placement.entry.sort_seats(&mut seats);
                    Err(HoldError::SeatsTaken(seats))
                } else {
                    placement.entry.sort_seats(&mut not_for_sale);
                    Err(HoldError::NotForSale(not_for_sale))
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use domain::allowance::Allowance;
    use domain::ids::{HoldId, ShowId};
    use domain::seat::Seat;

    use super::*;
    use crate::command::holds::placement::fixtures::{buyer, now, placement, show};
    use crate::command::units::SeatKey;

    pub(crate) fn seat_ids(ids: &[&str]) -> Vec<SeatId> {
        ids.iter()
            .map(|s| SeatId::parse(s).expect("a seat id"))
            .collect()
    }

    pub(crate) fn keys(show_id: &ShowId, seats: &[SeatId]) -> Vec<SeatKey> {
        seats.iter().map(|s| SeatKey::unit(show_id, s).1).collect()
    }

    /// A seat another hold has until an hour after `now()`.
    pub(crate) fn held_by_another() -> Seat {
        let mut seat = Seat::default();
        let events = seat::decide(
            &seat,
            &SeatCommand::PlaceHold {
                hold_id: HoldId::random(),
                buyer: domain::ids::BuyerId::parse("someone-else").expect("a buyer"),
                expires_at: now() + chrono::Duration::hours(1),
                price: None,
                channel: None,
                role: domain::seat::WaitlistRole::None,
            },
            now(),
        )
        .expect("a free seat is held");
        for event in events {
            cqrs_es::Aggregate::apply(&mut seat, event);
        }
        seat
    }

    #[test]
    fn it_should_hold_every_free_seat_listed_until_the_ttl() {
        let (ctx, entry) = (buyer(), show());
        let placement = placement(&ctx, &entry);
        let seats = seat_ids(&["S1", "S2"]);
        let keys = keys(&entry.show.show_id, &seats);
        let free = Seat::default();
        let view = View::given(now(), vec![(&free, &keys[0]), (&free, &keys[1])]);
        let mut decision = PlaceSeats {
            placement: &placement,
            seats: &seats,
        };
        let Ok(Decision::Append(decided, held)) = decision.decide(&view) else {
            panic!("two free seats are held");
        };
        assert_eq!(decided.units.len(), 2);
        assert!(decided.units.iter().all(|events| events.len() == 1));
        assert_eq!(held.expires_at, now() + entry.show.hold_ttl());
        assert_eq!(held.seats, seats);
    }

    #[test]
    fn it_should_refuse_naming_every_taken_seat() {
        let (ctx, entry) = (buyer(), show());
        let placement = placement(&ctx, &entry);
        let seats = seat_ids(&["S1", "S2", "S3"]);
        let keys = keys(&entry.show.show_id, &seats);
        let (free, taken) = (Seat::default(), held_by_another());
        let units = vec![(&taken, &keys[0]), (&free, &keys[1]), (&taken, &keys[2])];
        let mut decision = PlaceSeats {
            placement: &placement,
            seats: &seats,
        };
        match decision.decide(&View::given(now(), units.clone())) {
            Err(HoldError::SeatsTaken(taken)) => assert_eq!(taken, seat_ids(&["S1", "S3"])),
            _ => panic!("taken seats refuse the hold"),
        }
        // Taken seats only assumed new are read before refusing.
        let assumed = View::given(now(), units).assuming_new();
        assert!(matches!(decision.decide(&assumed), Ok(Decision::ReadAll)));
    }

    #[test]
    fn it_should_refuse_past_the_buyers_limit() {
        let (ctx, entry) = (buyer(), show());
        let placement = placement(&ctx, &entry);
        let seats = seat_ids(&["S1", "S2"]);
        let keys = keys(&entry.show.show_id, &seats);
        let (free, allowance) = (Seat::default(), Allowance::default());
        let view = View::given(now(), vec![(&free, &keys[0]), (&free, &keys[1])])
            .with_allowance(&allowance, 1);
        let mut decision = PlaceSeats {
            placement: &placement,
            seats: &seats,
        };
        assert!(matches!(
            decision.decide(&view),
            Err(HoldError::BuyerLimitReached { limit: 1, .. })
        ));
    }
}
