//! `POST /v1/holds/{id}/purchase`: the owner's hold, charged what its
//! events priced it at, driven to a booking (or to why there is none).

use domain::ids::HoldId;

use domain::checkout::CheckoutCommand;

use super::{ActionView, CheckoutError, CheckoutService, Driven, Purchased, Subject};
use crate::auth::Actor;
use crate::command::context::RequestContext;
use crate::command::holds::hold_amount;
use crate::store::{HoldRecord, StoreError};

impl CheckoutService {
    async fn hold_record(
        &self,
        actor: &Actor,
        hold_id: HoldId,
    ) -> Result<HoldRecord, CheckoutError> {
        let record = self
            .records
            .hold(&hold_id)
            .await?
            .ok_or(CheckoutError::HoldNotFound)?;
        if !actor.may_act_for(record.buyer.as_str()) {
            return Err(CheckoutError::Forbidden);
        }
        Ok(record)
    }

    /// `POST /v1/holds/{id}/purchase`.
    pub async fn purchase(
        &self,
        ctx: &RequestContext,
        hold_id: HoldId,
        payment_method: String,
    ) -> Result<Purchased, CheckoutError> {
        self.payments
            .check_method(&payment_method)
            .map_err(|e| CheckoutError::Invalid(e.to_string()))?;
        let record = self.hold_record(&ctx.actor, hold_id).await?;
        let entry = self
            .catalog
            .get(&record.show_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("show of hold {hold_id} is missing")))?;
        let request = CheckoutCommand::RequestPurchase {
            hold_id,
            show_id: record.show_id.clone(),
            buyer: record.buyer.clone(),
            payment_method,
            amount_cents: hold_amount(&record, &entry),
            currency: entry.show.currency,
        };
        let mut checkout = self.rounds.lock_checkout(hold_id).await?;
        let subject = Subject::Hold(record);
        let driven = self
            .drive(ctx, &subject, &mut checkout, Some(&request))
            .await?;
        let Subject::Hold(record) = subject else {
            return Err(CheckoutError::Bug("a hold's purchase lost its hold".into()));
        };
        let completed_here = match driven {
            Driven::Settled { completed_here } => completed_here,
            Driven::WaitingOnBuyer {
                payment_id,
                action,
                expires_at,
            } => {
                return Ok(Purchased::WaitingOnBuyer(ActionView {
                    hold_id,
                    status: "requires_action",
                    payment_intent: payment_id,
                    client_secret: action.client_secret,
                    next_action: action.next_action,
                    expires_at,
                }))
            }
        };
        let view = self.answer(&record, checkout.aggregate()).await?;
        Ok(if completed_here {
            Purchased::New(view)
        } else {
            Purchased::Existing(view)
        })
    }
}
