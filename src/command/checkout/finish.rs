//! The last step of a checkout, on the units of its hold: converting them
//! and completing the purchase in one append (or, if the hold was lost,
//! asking for a refund instead), or freeing them when a booking is
//! cancelled. An order takes the same steps hold by hold
//! (`order_units.rs`), through the same decision.

use std::collections::BTreeMap;

use domain::allowance::AllowanceCommand;
use domain::checkout::{decide, Checkout, CheckoutCommand, RefundReason};
use domain::ids::{BookingId, HoldId};
use projections::holds::HoldState;

use super::{CheckoutError, CheckoutService, Subject};
use crate::command::context::RequestContext;
use crate::command::round::{
    BuyerLimit, CheckoutLock, Decide, Decided, Decision, Round, Settled, View,
};
use crate::command::units::{units_of, HoldUnits, Refusal, Unit};
use crate::store::{HoldRecord, StoreError};

/// The last step of a checkout, on its units.
pub(super) enum Finish {
    /// Authorized: book the units, before anything is captured.
    Convert,
    /// Captured at once (a checkout from before authorize-then-capture):
    /// book the units and complete.
    ConvertCaptured,
    /// A cancelled booking, refunded: free the units.
    Cancel { refund_id: String },
    /// A booking whose authorization could not be captured: free the units.
    Reverse,
    /// (Orders, voiding or reversing) free one converted hold's units:
    /// `places` on each shard for a pool hold (its parts), every seat.
    GiveBack { places: BTreeMap<u32, u32> },
    /// (Orders, cancelling lines) free one hold's lines of cancellation
    /// `number`: the seats given, or `places` places of its pool; refunded
    /// by `refund_id`.
    FreeLines {
        refund_id: String,
        places: u32,
        number: u32,
    },
}

/// What the last step came to.
pub(super) enum Finished {
    /// The units and the checkout moved on together.
    Done,
    /// A unit no longer holds the hold: nothing was converted.
    Lost(Refusal),
    /// The checkout is past this step (another process drove it).
    Moved,
}

/// The decision: every unit converted (or freed), the checkout completed
/// (or its refund recorded), and on a show with a limit the buyer's
/// allowance following: `Convert` (booked units keep counting) or `Return`
/// (a cancellation gives them back).
struct Finishing {
    hold_id: HoldId,
    booking_id: BookingId,
    finish: Finish,
}

/// What a step decides on its hold's units: their events, the checkout's
/// command and the allowance's.
type Step<U> = (
    Vec<Vec<<U as cqrs_es::Aggregate>::Event>>,
    CheckoutCommand,
    AllowanceCommand,
);

impl Decide for Finishing {
    type Output = Finished;
    type Error = CheckoutError;

    fn decide<U: Unit>(
        &mut self,
        view: &View<'_, U>,
    ) -> Result<Decision<U, Finished>, CheckoutError> {
        let step = match &self.finish {
            Finish::GiveBack { places } => Ok(self.give_back_step(view, places)),
            Finish::FreeLines {
                refund_id,
                places,
                number,
            } => Ok(self.free_lines_step(view, refund_id, (*places, *number))),
            _ => self.hold_step(view),
        };
        let (units, command, counted) = match step {
            Ok(step) => step,
            Err(refusal) => return Ok(Decision::Answer(Finished::Lost(refusal))),
        };
        let checkout = view
            .checkout
            .ok_or_else(|| CheckoutError::Bug("a checkout round without its checkout".into()))?;
        let Ok(checkout) = decide(checkout, &command) else {
            return Ok(Decision::Answer(Finished::Moved));
        };
        let hold_id = self.hold_id;
        let allowance = view
            .allowance(&counted)
            .map_err(|e| CheckoutError::Bug(format!("hold {hold_id}'s allowance: {e}")))?;
        let decided = Decided {
            allowance,
            checkout,
            ..Decided::units(units)
        };
        Ok(Decision::Append(decided, Finished::Done))
    }
}

impl Finishing {
    /// A hold's own checkout's last step: convert, or free the units.
    fn hold_step<U: Unit>(&self, view: &View<'_, U>) -> Result<Step<U>, Refusal> {
        let (hold_id, booking_id, now) = (self.hold_id, self.booking_id, view.now);
        let freed = || -> Vec<Vec<U::Event>> {
            view.units
                .iter()
                .map(|(unit, key)| unit.cancel(key, booking_id, now))
                .collect()
        };
        Ok(match &self.finish {
            Finish::Cancel { refund_id } => (
                freed(),
                CheckoutCommand::RecordRefund {
                    refund_id: refund_id.clone(),
                },
                AllowanceCommand::Return { hold_id },
            ),
            Finish::Reverse => (
                freed(),
                CheckoutCommand::Reverse,
                AllowanceCommand::Return { hold_id },
            ),
            finish => {
                let command = match finish {
                    Finish::ConvertCaptured => CheckoutCommand::Complete,
                    _ => CheckoutCommand::Convert,
                };
                (
                    self.converted(view)?,
                    command,
                    AllowanceCommand::Convert { hold_id },
                )
            }
        })
    }

    /// Every unit converted to the booking, or why one refuses.
    fn converted<U: Unit>(&self, view: &View<'_, U>) -> Result<Vec<Vec<U::Event>>, Refusal> {
        view.units
            .iter()
            .map(|(unit, key)| unit.convert(key, self.hold_id, self.booking_id, view.now))
            .collect()
    }

    /// (Orders, voiding or reversing) one converted hold given back.
    fn give_back_step<U: Unit>(&self, view: &View<'_, U>, places: &BTreeMap<u32, u32>) -> Step<U> {
        let hold_id = self.hold_id;
        (
            self.given_back(view, |shard| {
                shard.map_or(1, |s| places.get(&s).copied().unwrap_or(0))
            }),
            CheckoutCommand::GiveBack { hold_id },
            AllowanceCommand::Return { hold_id },
        )
    }

    /// (Orders, cancelling lines) `places` of one hold's lines freed: its
    /// seats given, or that many of its places on its shards.
    fn free_lines_step<U: Unit>(
        &self,
        view: &View<'_, U>,
        refund_id: &str,
        (places, number): (u32, u32),
    ) -> Step<U> {
        let hold_id = self.hold_id;
        let mut left = places;
        let mut freed = 0;
        let units = view
            .units
            .iter()
            .map(|(unit, key)| {
                let sold = (self.booking_id, self.hold_id);
                let (events, given) = unit.give_back(key, sold, left, view.now);
                if U::shard(key).is_some() {
                    left = left.saturating_sub(given);
                }
                freed += given;
                events
            })
            .collect();
        let command = CheckoutCommand::FreeLines {
            hold_id,
            refund_id: refund_id.to_owned(),
            number,
        };
        let counted = AllowanceCommand::ReturnUnits {
            hold_id,
            units: freed,
        };
        (units, command, counted)
    }

    /// Each unit gives back what `wanted` says of its shard (a seat: `None`).
    fn given_back<U: Unit>(
        &self,
        view: &View<'_, U>,
        wanted: impl Fn(Option<u32>) -> u32,
    ) -> Vec<Vec<U::Event>> {
        view.units
            .iter()
            .map(|(unit, key)| {
                let sold = (self.booking_id, self.hold_id);
                unit.give_back(key, sold, wanted(U::shard(key)), view.now).0
            })
            .collect()
    }
}

impl CheckoutService {
    /// Authorized: converts every unit of the hold in one append that
    /// re-checks it; or, if any unit refuses (the hold was lost), asks for
    /// the authorization to be cancelled. Nothing is captured here.
    pub(super) async fn convert(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
    ) -> Result<(), CheckoutError> {
        let record = match subject {
            Subject::Hold(record) => record,
            Subject::Order(order) => return self.convert_order(ctx, order, checkout).await,
        };
        if let Finished::Lost(refusal) = self.finish(ctx, record, checkout, Finish::Convert).await?
        {
            let reason = self.refund_reason(record.hold_id, refusal).await?;
            tracing::warn!(hold_id = %record.hold_id, ?reason, "authorized after the hold was lost; voiding");
            let command = CheckoutCommand::RequestVoid {
                reason,
                holds: Vec::new(),
            };
            self.record(ctx, checkout, &command).await?;
        }
        Ok(())
    }

    /// Captured at once (a checkout from before authorize-then-capture):
    /// converts every unit and completes in one append; or, if any unit
    /// refuses, asks for a refund. Returns whether this call completed it.
    pub(super) async fn convert_captured(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
    ) -> Result<bool, CheckoutError> {
        let record = hold_of(subject, "a charge captured at once")?;
        match self
            .finish(ctx, record, checkout, Finish::ConvertCaptured)
            .await?
        {
            Finished::Done => Ok(true),
            Finished::Moved => Ok(false),
            Finished::Lost(refusal) => {
                let reason = self.refund_reason(record.hold_id, refusal).await?;
                tracing::warn!(hold_id = %record.hold_id, ?reason, "payment finished after the hold was lost; refunding");
                let command = CheckoutCommand::RequestRefund { reason };
                self.record(ctx, checkout, &command).await?;
                Ok(false)
            }
        }
    }

    /// Reversal requested: frees the units of a booking whose authorization
    /// could not be captured, in one append with `BookingReversed`.
    pub(super) async fn reverse(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
    ) -> Result<(), CheckoutError> {
        match subject {
            Subject::Hold(record) => {
                self.finish(ctx, record, checkout, Finish::Reverse).await?;
            }
            Subject::Order(_) => {
                self.give_back_order(ctx, subject, checkout).await?;
                self.record(ctx, checkout, &CheckoutCommand::Reverse)
                    .await?;
            }
        }
        Ok(())
    }

    /// Cancel requested: frees the units of the cancelled booking and
    /// records its refund, in one append.
    pub(super) async fn free_units(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        refund_id: String,
        checkout: &mut CheckoutLock,
    ) -> Result<(), CheckoutError> {
        let record = hold_of(subject, "a whole booking's cancellation")?;
        self.finish(ctx, record, checkout, Finish::Cancel { refund_id })
            .await?;
        Ok(())
    }

    /// The last step on every unit of the hold and the checkout, appended
    /// together.
    async fn finish(
        &self,
        ctx: &RequestContext,
        record: &HoldRecord,
        checkout: &mut CheckoutLock,
        finish: Finish,
    ) -> Result<Finished, CheckoutError> {
        let units = units_of(record, &self.show_of(record).await?.show)?;
        let booking_id = Checkout::booking_id_for(record.hold_id);
        self.finish_on(ctx, record, checkout, finish, booking_id, units)
            .await
    }

    /// The show a hold is on.
    pub(super) async fn show_of(
        &self,
        record: &HoldRecord,
    ) -> Result<std::sync::Arc<crate::catalog::CatalogEntry>, CheckoutError> {
        Ok(self.catalog.get(&record.show_id).await?.ok_or_else(|| {
            StoreError::Corrupt(format!("show of hold {} is missing", record.hold_id))
        })?)
    }

    /// `finish` on these units of the hold, booked (or to be) as `booking_id`.
    pub(super) async fn finish_on(
        &self,
        ctx: &RequestContext,
        record: &HoldRecord,
        checkout: &mut CheckoutLock,
        finish: Finish,
        booking_id: BookingId,
        units: HoldUnits,
    ) -> Result<Finished, CheckoutError> {
        let entry = self.show_of(record).await?;
        let round = Round::new("finish", ctx)
            .with_checkout(checkout)
            .counting(BuyerLimit::of(&entry.show, &record.buyer));
        let mut finishing = Finishing {
            hold_id: record.hold_id,
            booking_id,
            finish,
        };
        match self.rounds.run_on(round, units, &mut finishing).await? {
            Settled::Appended(finished) | Settled::Answered(finished) => Ok(finished),
            Settled::KeyTaken => Err(CheckoutError::Bug(
                "a checkout's last step took an idempotency key".into(),
            )),
        }
    }

    /// Why the charge goes back: the buyer released the hold, it was bought
    /// by another checkout (an order), or it expired (or lost its seats,
    /// which only happens after expiry).
    pub(super) async fn refund_reason(
        &self,
        hold_id: HoldId,
        refusal: Refusal,
    ) -> Result<RefundReason, CheckoutError> {
        let state = self.records.hold(&hold_id).await?.map(|r| r.state);
        Ok(match (state, refusal) {
            (Some(HoldState::Released), Refusal::Lost) => RefundReason::HoldReleased,
            // Its units were booked by another checkout (an order).
            (Some(HoldState::Converted), _) => RefundReason::HoldConverted,
            _ => RefundReason::HoldExpired,
        })
    }
}

/// The hold of a step only a hold's own checkout takes.
fn hold_of<'s>(subject: &'s Subject, step: &str) -> Result<&'s HoldRecord, CheckoutError> {
    match subject {
        Subject::Hold(record) => Ok(record),
        Subject::Order(order) => Err(CheckoutError::Bug(format!(
            "order {}: {step} is a hold's step",
            order.order_id
        ))),
    }
}

#[cfg(test)]
mod tests {
    use domain::checkout::{CheckoutEvent, Phase};
    use domain::ids::{SeatId, ShowId};
    use domain::seat::{Seat, SeatEvent};

    use super::*;
    use crate::command::units::fixtures::{now, seat_held_by};
    use crate::command::units::SeatKey;

    fn key() -> SeatKey {
        let show_id = ShowId::parse("show").expect("a show id");
        SeatKey::unit(&show_id, &SeatId::parse("A-1").expect("a seat id")).1
    }

    /// A checkout of `hold_id` whose payment is authorized.
    fn authorized(hold_id: HoldId) -> Checkout {
        let mut checkout = Checkout::default();
        let steps = [
            crate::command::checkout::record::tests::request(hold_id),
            CheckoutCommand::RecordPaymentCreated {
                attempt: 1,
                payment_id: "pi_1".into(),
            },
            CheckoutCommand::RecordAuthorization { attempt: 1 },
        ];
        for command in &steps {
            for event in decide(&checkout, command).expect("the next step applies") {
                cqrs_es::Aggregate::apply(&mut checkout, event);
            }
        }
        assert!(matches!(checkout.phase, Phase::Authorized { .. }));
        checkout
    }

    fn converting(hold_id: HoldId) -> Finishing {
        Finishing {
            hold_id,
            booking_id: Checkout::booking_id_for(hold_id),
            finish: Finish::Convert,
        }
    }

    #[test]
    fn it_should_convert_the_units_and_the_checkout_in_one_decision() {
        let hold_id = HoldId::random();
        let (seat, key, checkout) = (seat_held_by(hold_id), key(), authorized(hold_id));
        let view = View::given(now(), vec![(&seat, &key)]).with_checkout(&checkout);
        let Ok(Decision::Append(decided, Finished::Done)) = converting(hold_id).decide(&view)
        else {
            panic!("an authorized checkout of a held seat converts");
        };
        assert!(matches!(
            decided.units.as_slice(),
            [events] if matches!(events.as_slice(), [SeatEvent::HoldConverted { .. }])
        ));
        assert!(matches!(
            decided.checkout.as_slice(),
            [CheckoutEvent::CheckoutConverted { .. }]
        ));
    }

    #[test]
    fn it_should_answer_lost_when_a_unit_no_longer_holds_the_hold() {
        let hold_id = HoldId::random();
        let (free, key, checkout) = (Seat::default(), key(), authorized(hold_id));
        let view = View::given(now(), vec![(&free, &key)]).with_checkout(&checkout);
        assert!(matches!(
            converting(hold_id).decide(&view),
            Ok(Decision::Answer(Finished::Lost(_)))
        ));
    }
}
