//! Recovery's side of checkout: the checkouts waiting on the provider, and
//! driving one of them to its end with the same steps a request takes.

use domain::checkout::Phase;
use domain::ids::{BuyerId, HoldId};

use super::{CheckoutError, CheckoutService, Recovered, RECOVERY_ACTOR};
use crate::auth::{Actor, Role};
use crate::command::context::RequestContext;
use crate::store::StoreError;

impl CheckoutService {
    /// Checkouts waiting on the payment provider, oldest first.
    pub async fn pending(&self, limit: i64) -> Result<Vec<HoldId>, CheckoutError> {
        Ok(self.store.pending_checkouts(limit).await?)
    }

    /// Finishes a checkout left half way, unless this process is driving it.
    pub async fn recover(&self, hold_id: HoldId) -> Result<Recovered, CheckoutError> {
        let Some(mut checkout) = self.rounds.try_lock_checkout(hold_id).await? else {
            return Ok(Recovered::Busy);
        };
        let ctx = RequestContext {
            actor: Actor {
                id: BuyerId::parse(RECOVERY_ACTOR)
                    .map_err(|e| StoreError::Corrupt(format!("{RECOVERY_ACTOR}: {e}")))?,
                role: Role::Admin,
            },
            request_id: uuid::Uuid::new_v4().to_string(),
            idempotency_key: None,
        };
        let hold = self.stored_hold(&hold_id).await?;
        match self.drive(&ctx, &hold, &mut checkout, None).await {
            Ok(_) => {}
            Err(CheckoutError::PaymentUnavailable(_)) => return Ok(Recovered::Pending),
            Err(CheckoutError::PaymentDeclined(_)) => return Ok(Recovered::Closed),
            Err(other) => return Err(other),
        }
        Ok(match checkout.aggregate().phase {
            Phase::Completed { .. } => Recovered::Completed,
            Phase::Refunded { .. } => Recovered::Refunded,
            Phase::Cancelled { .. } => Recovered::Cancelled,
            Phase::Idle => Recovered::Closed,
            _ => Recovered::Pending,
        })
    }
}
