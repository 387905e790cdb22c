//! Recording a step of the drive on the checkout alone: the intent before
//! a provider call (a purchase requested, a void or cancellation asked
//! for), and its answer after (the payment prepared, authorized, declined,
//! needing the buyer, captured, voided, refunded, failed).

use chrono::{DateTime, Utc};
use domain::checkout::{decide, Checkout, CheckoutCommand};

use super::{CheckoutError, CheckoutService};
use crate::command::context::RequestContext;
use crate::command::round::{CheckoutDecision, CheckoutLock, DecidesCheckout, Round, Settled};

/// The decision: `command` on the checkout as locked. Answers whether it
/// applies; a checkout already past it (another process moved it on) is
/// answered `false` and read again from the store by the next step.
pub(super) struct Recording<'a> {
    pub(super) command: &'a CheckoutCommand,
}

impl DecidesCheckout for Recording<'_> {
    type Output = bool;
    type Error = CheckoutError;

    fn decide(
        &mut self,
        checkout: &Checkout,
        _now: DateTime<Utc>,
    ) -> Result<CheckoutDecision<bool>, CheckoutError> {
        Ok(match decide(checkout, self.command) {
            Ok(events) => CheckoutDecision::Append(events, true),
            Err(e) => {
                tracing::debug!(error = %e, "checkout command no longer applies");
                CheckoutDecision::Moved(false)
            }
        })
    }
}

impl CheckoutService {
    /// Decides and appends one checkout command on its own. Returns whether
    /// it applies (appended, or nothing to append); false: the checkout is
    /// past it (another process moved it), and the drive reads it again.
    pub(super) async fn record(
        &self,
        ctx: &RequestContext,
        checkout: &mut CheckoutLock,
        command: &CheckoutCommand,
    ) -> Result<bool, CheckoutError> {
        let round = Round::new("checkout", ctx).with_checkout(checkout);
        let settled = self
            .rounds
            .run_checkout(round, &mut Recording { command })
            .await?;
        Ok(match settled {
            Settled::Appended(applies) | Settled::Answered(applies) => applies,
            Settled::KeyTaken => false,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use domain::checkout::{CheckoutEvent, Phase};
    use domain::ids::{BuyerId, HoldId, ShowId};
    use domain::money::Currency;

    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_900_000_000, 0).expect("a valid instant")
    }

    /// The purchase of `hold_id` requested, as the checkout tests start it.
    pub(crate) fn request(hold_id: HoldId) -> CheckoutCommand {
        CheckoutCommand::RequestPurchase {
            hold_id,
            show_id: ShowId::parse("show").expect("a show id"),
            buyer: BuyerId::parse("buyer-1").expect("a buyer"),
            payment_method: "pm_card_visa".into(),
            amount_cents: 1000,
            currency: Currency::EUR,
        }
    }

    #[test]
    fn it_should_record_a_purchase_requested_on_an_idle_checkout() {
        let command = request(HoldId::random());
        let idle = Checkout::default();
        assert!(matches!(idle.phase, Phase::Idle));
        let decided = Recording { command: &command }.decide(&idle, now());
        let Ok(CheckoutDecision::Append(events, true)) = decided else {
            panic!("an idle checkout records the request");
        };
        assert!(matches!(
            events.as_slice(),
            [CheckoutEvent::PurchaseRequested { .. }]
        ));
    }

    #[test]
    fn it_should_answer_moved_when_the_checkout_is_past_the_step() {
        // A void on an idle checkout: nothing was authorized to cancel.
        let idle = Checkout::default();
        let decided = Recording {
            command: &CheckoutCommand::RecordVoid,
        }
        .decide(&idle, now());
        assert!(matches!(decided, Ok(CheckoutDecision::Moved(false))));
    }
}
