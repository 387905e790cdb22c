//! The drive: a checkout taken from phase to phase until it settles, one
//! recorded step per phase.

use domain::checkout::{Checkout, CheckoutCommand, Phase};
use domain::ids::{BuyerId, HoldId, ShowId};
use projections::holds::HoldStatus;

use super::{CheckoutError, CheckoutService, MAX_DRIVE_STEPS, PAYMENT_TIMEOUT};
use crate::command::context::RequestContext;
use crate::command::round::CheckoutLock;
use crate::payment::{Charge, ChargeRequest, PaymentError};
use crate::store::HoldRecord;

/// What starting a payment attempt needs, when the checkout is idle: the
/// terms of `CheckoutCommand::RequestPurchase`.
pub(super) struct PurchaseRequest {
    pub(super) show_id: ShowId,
    pub(super) buyer: BuyerId,
    pub(super) payment_method: String,
    pub(super) amount_cents: i64,
}

impl CheckoutService {
    /// Drives the checkout until it settles. Returns whether this drive
    /// appended the completion. With `request`, an idle checkout starts a
    /// payment attempt (after checking the hold is still valid); without, it
    /// stops.
    pub(super) async fn drive(
        &self,
        ctx: &RequestContext,
        record: &HoldRecord,
        checkout: &mut CheckoutLock,
        request: Option<&PurchaseRequest>,
    ) -> Result<bool, CheckoutError> {
        let mut completed_here = false;
        for _ in 0..MAX_DRIVE_STEPS {
            self.rounds.refresh_checkout(checkout).await?;
            let phase = checkout.aggregate().phase.clone();
            match phase {
                Phase::Idle => {
                    // Without a request to start an attempt (recovery, cancel) there
                    // is nothing to finish.
                    let Some(request) = request else {
                        return Ok(completed_here);
                    };
                    self.request_purchase(ctx, record, checkout, request)
                        .await?;
                }
                Phase::Requested {
                    attempt,
                    idempotency_key,
                    payment_method,
                    amount_cents,
                } => {
                    let charge = ChargeRequest {
                        idempotency_key: &idempotency_key,
                        amount_cents,
                        payment_method: &payment_method,
                    };
                    self.charge(ctx, record.hold_id, checkout, attempt, charge)
                        .await?;
                }
                Phase::Captured { .. } => {
                    if self.convert(ctx, record, checkout).await? {
                        completed_here = true;
                    }
                }
                Phase::RefundRequested { charge_id, .. } => {
                    self.refund_charge(ctx, checkout, &charge_id).await?;
                }
                Phase::CancelRequested { charge_id, .. } => {
                    let refund_id = self.refund(&charge_id).await?;
                    self.free_units(ctx, record, refund_id, checkout).await?;
                }
                Phase::Completed { .. } | Phase::Refunded { .. } | Phase::Cancelled { .. } => {
                    return Ok(completed_here);
                }
            }
        }
        Err(CheckoutError::Busy)
    }

    /// Idle: records the intent to charge, before the charge, once the hold
    /// is known to be still valid.
    async fn request_purchase(
        &self,
        ctx: &RequestContext,
        record: &HoldRecord,
        checkout: &mut CheckoutLock,
        request: &PurchaseRequest,
    ) -> Result<(), CheckoutError> {
        self.check_hold_before_charging(record)?;
        let command = CheckoutCommand::RequestPurchase {
            hold_id: record.hold_id,
            show_id: request.show_id.clone(),
            buyer: request.buyer.clone(),
            payment_method: request.payment_method.clone(),
            amount_cents: request.amount_cents,
        };
        self.record(ctx, checkout, &command).await?;
        Ok(())
    }

    /// A purchase of a hold that is no longer valid charges nothing.
    fn check_hold_before_charging(&self, record: &HoldRecord) -> Result<(), CheckoutError> {
        match HoldStatus::at(record.state, record.expires_at, self.clock.now()) {
            HoldStatus::Held => Ok(()),
            HoldStatus::Expired => Err(CheckoutError::HoldExpired { refunded: false }),
            HoldStatus::Released => Err(CheckoutError::HoldReleased { refunded: false }),
            // Converted means the checkout completed, which the drive sees first.
            HoldStatus::Converted => Err(CheckoutError::Busy),
        }
    }

    /// Requested: charges with the attempt's idempotency key and records
    /// what the provider answered. A decline or a failure, once recorded,
    /// ends the drive with its error; an unknown outcome leaves the attempt
    /// open.
    async fn charge(
        &self,
        ctx: &RequestContext,
        hold_id: HoldId,
        checkout: &mut CheckoutLock,
        attempt: u32,
        request: ChargeRequest<'_>,
    ) -> Result<(), CheckoutError> {
        match self.call_provider(request).await {
            Ok(charge) => {
                let command = CheckoutCommand::RecordCapture {
                    attempt,
                    charge_id: charge.charge_id,
                };
                self.record(ctx, checkout, &command).await?;
            }
            Err(PaymentError::Declined(reason)) => {
                let command = CheckoutCommand::RecordDecline {
                    attempt,
                    reason: reason.clone(),
                };
                if self.record(ctx, checkout, &command).await? {
                    return Err(CheckoutError::PaymentDeclined(reason));
                }
            }
            Err(PaymentError::Unavailable(reason) | PaymentError::Invalid(reason)) => {
                let command = CheckoutCommand::RecordFailure {
                    attempt,
                    reason: reason.clone(),
                };
                if self.record(ctx, checkout, &command).await? {
                    return Err(CheckoutError::PaymentUnavailable(reason));
                }
            }
            Err(PaymentError::Indeterminate(reason)) => {
                tracing::warn!(%hold_id, %reason, "payment outcome unknown; the attempt stays open");
                return Err(CheckoutError::PaymentUnavailable(reason));
            }
        }
        Ok(())
    }

    /// One charge call, bounded by `PAYMENT_TIMEOUT` (past it the outcome
    /// is unknown), its latency measured by outcome.
    async fn call_provider(&self, request: ChargeRequest<'_>) -> Result<Charge, PaymentError> {
        let started = std::time::Instant::now();
        let outcome = tokio::time::timeout(PAYMENT_TIMEOUT, self.payments.charge(request))
            .await
            .unwrap_or_else(|_| {
                Err(PaymentError::Indeterminate(format!(
                    "no answer within {PAYMENT_TIMEOUT:?}"
                )))
            });
        let label = match &outcome {
            Ok(_) => "captured",
            Err(PaymentError::Declined(_)) => "declined",
            Err(PaymentError::Unavailable(_)) => "unavailable",
            Err(PaymentError::Indeterminate(_)) => "unknown",
            Err(PaymentError::Invalid(_)) => "invalid",
        };
        metrics::histogram!("payment_latency_seconds", "outcome" => label)
            .record(started.elapsed().as_secs_f64());
        outcome
    }

    /// Refund requested: refunds the charge and records the refund.
    async fn refund_charge(
        &self,
        ctx: &RequestContext,
        checkout: &mut CheckoutLock,
        charge_id: &str,
    ) -> Result<(), CheckoutError> {
        let refund_id = self.refund(charge_id).await?;
        let command = CheckoutCommand::RecordRefund { refund_id };
        self.record(ctx, checkout, &command).await?;
        Ok(())
    }

    /// The refund of a charge, with the key derived from it (a repeat after a
    /// crash reaches the same refund).
    async fn refund(&self, charge_id: &str) -> Result<String, CheckoutError> {
        let key = Checkout::refund_key(charge_id);
        let refund = tokio::time::timeout(PAYMENT_TIMEOUT, self.payments.refund(charge_id, &key))
            .await
            .map_err(|_| CheckoutError::PaymentUnavailable("refund timed out".into()))?
            .map_err(|e| CheckoutError::PaymentUnavailable(e.to_string()))?;
        tracing::warn!(%charge_id, refund_id = %refund.refund_id, "charge refunded");
        metrics::counter!("refunds_total").increment(1);
        Ok(refund.refund_id)
    }
}
