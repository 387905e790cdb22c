//! Recovery's side of checkout: the checkouts left half way, and driving
//! one of them to its end with the same steps a request takes; also what a
//! provider's notice that a payment moved comes to (the same drive).

use domain::checkout::Phase;
use domain::ids::HoldId;

use super::{CheckoutError, CheckoutService, Driven, Recovered, RECOVERY_ACTOR};
use crate::command::context::RequestContext;
use crate::store::WaitingCheckout;

impl CheckoutService {
    /// Checkouts the service must finish with the provider, oldest first.
    pub async fn pending(&self, limit: i64) -> Result<Vec<HoldId>, CheckoutError> {
        Ok(self.checkouts.pending_checkouts(limit).await?)
    }

    /// Checkouts waiting on their buyer, after `after` (a page cursor), in
    /// the order they last moved.
    pub async fn waiting(
        &self,
        after: Option<&WaitingCheckout>,
        limit: i64,
    ) -> Result<Vec<WaitingCheckout>, CheckoutError> {
        Ok(self.checkouts.waiting_checkouts(after, limit).await?)
    }

    /// Finishes a checkout left half way, unless this process is driving
    /// it; one waiting on its buyer is read again (a webhook may have been
    /// lost) and voided if its hold ended meanwhile.
    pub async fn recover(&self, hold_id: HoldId) -> Result<Recovered, CheckoutError> {
        let Some(mut checkout) = self.rounds.try_lock_checkout(hold_id).await? else {
            return Ok(Recovered::Busy);
        };
        let ctx = RequestContext::system(RECOVERY_ACTOR)?;
        let subject = self.subject_of(hold_id, checkout.aggregate()).await?;
        match self.drive(&ctx, &subject, &mut checkout, None).await {
            Ok(Driven::WaitingOnBuyer { .. }) => return Ok(Recovered::Waiting),
            Ok(Driven::Settled { .. }) => {}
            // Another instance's provider finishes it (a recovery pass of
            // that instance), or the provider is down: later.
            Err(CheckoutError::PaymentUnavailable(_) | CheckoutError::OtherProvider) => {
                return Ok(Recovered::Pending)
            }
            Err(
                CheckoutError::PaymentDeclined(_)
                | CheckoutError::HoldExpired { .. }
                | CheckoutError::HoldReleased { .. }
                | CheckoutError::OrderHoldsLost { .. },
            ) => return Ok(Recovered::Closed),
            Err(other) => return Err(other),
        }
        Ok(match checkout.aggregate().phase {
            Phase::Completed { .. } => Recovered::Completed,
            Phase::Refunded { .. } => Recovered::Refunded,
            Phase::Cancelled { .. } => Recovered::Cancelled,
            Phase::Voided { .. } => Recovered::Voided,
            Phase::Reversed { .. } => Recovered::Reversed,
            Phase::Idle => Recovered::Closed,
            _ => Recovered::Pending,
        })
    }

    /// The provider says a payment moved (a webhook): drives the checkout
    /// whose current payment it is, from the payment's state as the
    /// provider has it now. `Ok(None)`: no checkout of this service is
    /// paying with it (another attempt's, or another system's payment).
    pub async fn payment_changed(
        &self,
        hold_id: HoldId,
        payment_id: &str,
    ) -> Result<Option<Recovered>, CheckoutError> {
        let Some(row) = self.checkouts.checkout_by_hold(&hold_id).await? else {
            return Ok(None);
        };
        if row.charge_id.as_deref() != Some(payment_id) {
            return Ok(None);
        }
        self.recover(hold_id).await.map(Some)
    }
}
