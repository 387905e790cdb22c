//! An order's conversion, all or nothing: every hold still to convert has
//! its units booked for the order, and the order's checkout converted, in
//! one append at the versions they were decided on. A hold found lost
//! (expired, released, converted elsewhere) converts none: nothing is
//! written, every other hold stays exactly as it was, and the drive asks
//! for the void naming the lost ones.
//!
//! An order may mix seat holds and pool holds, so its round locks the
//! seats and, beside them, the pool shards (`Round::with_shards`). Two
//! holds of one pool may share a shard: each is decided on the shard as
//! the ones before it leave it.

use domain::allowance::AllowanceCommand;
use domain::checkout::{decide, Checkout, CheckoutCommand};
use domain::ids::{BookingId, HoldId, PoolId, SeatId};
use domain::pool::PoolShard;
use domain::seat::Seat;

use super::CheckoutError;
use crate::command::round::{Decided, Decides, Decision, View};
use crate::command::units::{Refusal, Unit};
use crate::store::HoldRecord;

/// What an order's conversion came to.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum OrderConversion {
    /// Every hold converted, with the checkout.
    Converted,
    /// These holds no longer hold (each with the first refusal found);
    /// nothing was converted.
    Lost(Vec<(HoldId, Refusal)>),
    /// The checkout is past conversion (another process drove it).
    Moved,
}

/// One hold still to convert and its units.
pub(super) struct OrderHold {
    hold_id: HoldId,
    units: OrderHoldUnits,
}

enum OrderHoldUnits {
    Seats(Vec<SeatId>),
    /// The pool and the shards of its parts.
    Places(PoolId, Vec<u32>),
}

impl OrderHold {
    pub(super) fn of(record: &HoldRecord) -> Self {
        let units = match &record.pool {
            Some((pool_id, parts)) => OrderHoldUnits::Places(
                pool_id.clone(),
                parts.iter().map(|&(shard, _)| shard).collect(),
            ),
            None => OrderHoldUnits::Seats(record.seats.clone()),
        };
        Self {
            hold_id: record.hold_id,
            units,
        }
    }
}

/// The decision: every unit of every hold converted to the order's
/// booking, the allowance following, and `OrderHoldConverted` for each
/// hold with `CheckoutConverted` after the last.
pub(super) struct ConvertingOrder {
    pub(super) booking_id: BookingId,
    pub(super) holds: Vec<OrderHold>,
}

/// The events of each seat and shard of the view, as decided so far.
struct Converted {
    seats: Vec<Vec<<Seat as cqrs_es::Aggregate>::Event>>,
    shards: Vec<Vec<<PoolShard as cqrs_es::Aggregate>::Event>>,
    /// Each shard as the conversions decided so far leave it.
    shard_states: Vec<PoolShard>,
}

impl Decides<Seat> for ConvertingOrder {
    type Output = OrderConversion;
    type Error = CheckoutError;

    fn decide(
        &mut self,
        view: &View<'_, Seat>,
    ) -> Result<Decision<Seat, OrderConversion>, CheckoutError> {
        let checkout = view.checkout.ok_or_else(|| {
            CheckoutError::Bug("an order's conversion without its checkout".into())
        })?;
        let mut converted = Converted {
            seats: vec![Vec::new(); view.units.len()],
            shards: vec![Vec::new(); view.shards.len()],
            shard_states: view.shards.iter().map(|(s, _)| (*s).clone()).collect(),
        };
        let mut lost = Vec::new();
        for hold in &self.holds {
            if let Err(refusal) = self.convert_hold(view, hold, &mut converted) {
                lost.push((hold.hold_id, refusal));
            }
        }
        if !lost.is_empty() {
            return Ok(Decision::Answer(OrderConversion::Lost(lost)));
        }
        let Some(checkout_events) = self.checkout_events(checkout) else {
            return Ok(Decision::Moved(OrderConversion::Moved));
        };
        let counted: Vec<AllowanceCommand> = self
            .holds
            .iter()
            .map(|h| AllowanceCommand::Convert { hold_id: h.hold_id })
            .collect();
        let allowance = view
            .allowance_each(&counted)
            .map_err(|e| CheckoutError::Bug(format!("an order's allowance: {e}")))?;
        let decided = Decided {
            shards: converted.shards,
            allowance,
            checkout: checkout_events,
            ..Decided::units(converted.seats)
        };
        Ok(Decision::Append(decided, OrderConversion::Converted))
    }
}

impl ConvertingOrder {
    /// Converts `hold`'s units on the view, or says why one refuses.
    fn convert_hold(
        &self,
        view: &View<'_, Seat>,
        hold: &OrderHold,
        converted: &mut Converted,
    ) -> Result<(), Refusal> {
        let (hold_id, booking_id, now) = (hold.hold_id, self.booking_id, view.now);
        match &hold.units {
            OrderHoldUnits::Seats(seats) => {
                for seat_id in seats {
                    let index = view
                        .units
                        .iter()
                        .position(|(_, key)| &key.seat_id == seat_id)
                        .ok_or(Refusal::Lost)?;
                    let (seat, key) = view.units[index];
                    converted.seats[index].extend(seat.convert(key, hold_id, booking_id, now)?);
                }
            }
            OrderHoldUnits::Places(pool_id, shards) => {
                for shard in shards {
                    let index = view
                        .shards
                        .iter()
                        .position(|(_, key)| &key.pool_id == pool_id && key.index == *shard)
                        .ok_or(Refusal::Lost)?;
                    let key = view.shards[index].1;
                    let state = &mut converted.shard_states[index];
                    let events = state.convert(key, hold_id, booking_id, now)?;
                    events.iter().for_each(|e| state.apply_event(e));
                    converted.shards[index].extend(events);
                }
            }
        }
        Ok(())
    }

    /// `OrderHoldConverted` for each hold, the last with `CheckoutConverted`;
    /// `None` if the checkout is past converting them.
    fn checkout_events(&self, checkout: &Checkout) -> Option<Vec<domain::checkout::CheckoutEvent>> {
        let mut state = checkout.clone();
        let mut events = Vec::new();
        for hold in &self.holds {
            let command = CheckoutCommand::ConvertOrderHold {
                hold_id: hold.hold_id,
            };
            for event in decide(&state, &command).ok()? {
                state.apply_event(&event);
                events.push(event);
            }
        }
        Some(events)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use domain::checkout::{CheckoutEvent, Phase};
    use domain::ids::{BuyerId, OrderId, ShowId, TicketType};
    use domain::order::{OrderLine, OrderTerms};
    use domain::places::PoolSpec;
    use domain::pool::{PoolCommand, PoolEvent};
    use domain::seat::{SeatEvent, WaitlistRole};

    use super::*;
    use crate::command::units::fixtures::{now, seat_held_by, seat_key};
    use crate::command::units::ShardKey;

    fn show() -> ShowId {
        ShowId::parse("show").expect("a show id")
    }
    fn floor() -> PoolSpec {
        PoolSpec {
            pool_id: PoolId::parse("floor").expect("a pool id"),
            capacity: 10,
            price_cents: 1000,
            shards: 1,
            category: None,
            label: None,
            area: None,
        }
    }
    fn line(line_id: u32, hold_id: HoldId) -> OrderLine {
        OrderLine {
            line_id,
            hold_id,
            seat_id: None,
            pool_id: None,
            category: None,
            ticket_type: TicketType::standard(),
            price_cents: 1000,
        }
    }

    /// An order of `holds` whose payment is authorized.
    fn authorized(holds: &[HoldId]) -> Checkout {
        let terms = OrderTerms {
            order_id: OrderId::for_holds(holds),
            holds: holds.to_vec(),
            lines: holds.iter().zip(1..).map(|(h, n)| line(n, *h)).collect(),
            sale: None,
        };
        let mut checkout = Checkout::default();
        let steps = [
            CheckoutCommand::RequestOrder {
                terms,
                show_id: show(),
                buyer: BuyerId::parse("buyer-1").expect("a buyer"),
                payment_method: "pm_sim_ok".into(),
                currency: domain::money::Currency::parse("eur").expect("a currency"),
            },
            CheckoutCommand::RecordPaymentCreated {
                attempt: 1,
                payment_id: "pi_1".into(),
            },
            CheckoutCommand::RecordAuthorization { attempt: 1 },
        ];
        for command in &steps {
            for event in decide(&checkout, command).expect("the next step applies") {
                checkout.apply_event(&event);
            }
        }
        assert!(matches!(checkout.phase, Phase::Authorized { .. }));
        checkout
    }

    /// A shard of `floor` on which `hold_id` holds 2 places.
    fn shard_held_by(hold_id: HoldId) -> PoolShard {
        let mut shard = PoolShard::default();
        let command = PoolCommand::PlaceHold {
            hold_id,
            buyer: BuyerId::parse("buyer-1").expect("a buyer"),
            quantity: 2,
            expires_at: now() + Duration::minutes(10),
            price: None,
            channel: None,
            role: WaitlistRole::None,
        };
        for event in domain::pool::decide(&shard, 10, &command, now()).expect("places are free") {
            shard.apply_event(&event);
        }
        shard
    }

    fn holds(seat: HoldId, pool: HoldId) -> Vec<OrderHold> {
        vec![
            OrderHold {
                hold_id: seat,
                units: OrderHoldUnits::Seats(vec![SeatId::parse("A-1").expect("a seat")]),
            },
            OrderHold {
                hold_id: pool,
                units: OrderHoldUnits::Places(floor().pool_id, vec![0]),
            },
        ]
    }

    #[test]
    fn it_should_convert_a_seat_hold_and_a_pool_hold_in_one_decision() {
        let (seat_hold, pool_hold) = (HoldId::random(), HoldId::random());
        let checkout = authorized(&[seat_hold, pool_hold]);
        let (seat, key) = (seat_held_by(seat_hold), seat_key());
        let shard = shard_held_by(pool_hold);
        let shard_key = ShardKey::unit(&show(), &floor(), 0).1;
        let view = View::given(now(), vec![(&seat, &key)])
            .with_shards(vec![(&shard, &shard_key)])
            .with_checkout(&checkout);
        let mut converting = ConvertingOrder {
            booking_id: OrderId::for_holds(&[seat_hold, pool_hold]).booking_id(),
            holds: holds(seat_hold, pool_hold),
        };
        let Ok(Decision::Append(decided, OrderConversion::Converted)) = converting.decide(&view)
        else {
            panic!("an authorized order of held units converts");
        };
        assert!(
            matches!(decided.units.as_slice(), [e] if matches!(e.as_slice(), [SeatEvent::HoldConverted { .. }]))
        );
        assert!(
            matches!(decided.shards.as_slice(), [e] if matches!(e.as_slice(), [PoolEvent::PoolHoldConverted { .. }]))
        );
        assert!(matches!(
            decided.checkout.as_slice(),
            [
                CheckoutEvent::OrderHoldConverted { .. },
                CheckoutEvent::OrderHoldConverted { .. },
                CheckoutEvent::CheckoutConverted { .. }
            ]
        ));
    }

    #[test]
    fn it_should_convert_nothing_when_one_hold_of_the_order_is_lost() {
        let (seat_hold, pool_hold) = (HoldId::random(), HoldId::random());
        let checkout = authorized(&[seat_hold, pool_hold]);
        let (seat, key) = (seat_held_by(seat_hold), seat_key());
        // The pool hold was released: its shard holds nothing of it.
        let shard = PoolShard::default();
        let shard_key = ShardKey::unit(&show(), &floor(), 0).1;
        let view = View::given(now(), vec![(&seat, &key)])
            .with_shards(vec![(&shard, &shard_key)])
            .with_checkout(&checkout);
        let mut converting = ConvertingOrder {
            booking_id: OrderId::for_holds(&[seat_hold, pool_hold]).booking_id(),
            holds: holds(seat_hold, pool_hold),
        };
        let Ok(Decision::Answer(OrderConversion::Lost(lost))) = converting.decide(&view) else {
            panic!("an order with a lost hold converts nothing");
        };
        assert_eq!(lost, vec![(pool_hold, Refusal::Lost)]);
    }
}
