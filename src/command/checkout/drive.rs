//! The drive: a checkout taken from phase to phase until it settles or waits
//! on the buyer, one recorded step per phase. Each provider call is
//! preceded by the step that names it on the stream (the attempt and its
//! key, the payment's id) and followed by the step that records its answer,
//! so a crash anywhere leaves a stream from which the same drive finishes.

use domain::checkout::{Checkout, CheckoutCommand, Phase, RefundReason};
use domain::ids::HoldId;
use domain::money::Currency;
use projections::holds::{HoldState, HoldStatus};

use super::{CheckoutError, CheckoutService, Driven, Subject, MAX_DRIVE_STEPS};
use crate::command::context::RequestContext;
use crate::command::round::CheckoutLock;
use crate::payment::{BuyerAction, Payment, PaymentError, PaymentRequest, PaymentState};
use crate::store::HoldRecord;

/// What starting a payment attempt records, when the checkout is idle:
/// `CheckoutCommand::RequestPurchase` for a hold, `RequestOrder` for an
/// order.
pub(super) type PurchaseRequest = CheckoutCommand;

/// What one step of the drive came to.
enum Step {
    /// Read the phase again and take the next step.
    Next,
    /// The drive ends here.
    Done(Driven),
}

/// What a drive has done so far.
#[derive(Default)]
struct Progress {
    /// This drive completed the checkout.
    completed_here: bool,
    /// The payment this drive prepared: it was never sent for
    /// authorization, so it is authorized without reading it first.
    prepared_here: Option<String>,
}

impl CheckoutService {
    /// Drives the checkout until it settles, or waits on the buyer. With
    /// `request`, an idle checkout starts a payment attempt (after checking
    /// the hold is still valid); without, it stops.
    pub(super) async fn drive(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
        request: Option<&PurchaseRequest>,
    ) -> Result<Driven, CheckoutError> {
        let mut progress = Progress::default();
        for _ in 0..MAX_DRIVE_STEPS {
            self.rounds.refresh_checkout(checkout).await?;
            self.check_provider(checkout.aggregate())?;
            let phase = checkout.aggregate().phase.clone();
            let step = match phase {
                Phase::Idle | Phase::Requested { .. } | Phase::ActionRequired { .. } => {
                    self.payment_step(ctx, subject, checkout, request, phase, &mut progress)
                        .await?
                }
                phase => {
                    self.settlement_step(ctx, subject, checkout, phase, &mut progress)
                        .await?
                }
            };
            if let Step::Done(driven) = step {
                return Ok(driven);
            }
        }
        Err(CheckoutError::Busy)
    }

    /// A checkout whose attempt is paid through another provider than this
    /// instance's is not driven here (an idle one starts its next attempt
    /// with this instance's method).
    fn check_provider(&self, checkout: &Checkout) -> Result<(), CheckoutError> {
        match &checkout.payment_method {
            Some(method) if checkout.phase != Phase::Idle && !self.payments.takes(method) => {
                Err(CheckoutError::OtherProvider)
            }
            _ => Ok(()),
        }
    }

    /// Until the payment is authorized: start an attempt, prepare its
    /// payment, authorize it, or read what the buyer's step came to.
    async fn payment_step(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
        request: Option<&PurchaseRequest>,
        phase: Phase,
        progress: &mut Progress,
    ) -> Result<Step, CheckoutError> {
        let (attempt, payment) = match phase {
            Phase::Requested {
                attempt,
                idempotency_key,
                payment_method,
                amount_cents,
                currency,
                payment_id: None,
            } => {
                // A checkout recorded before currencies is in the service's
                // default one (the catalog's, for shows that name none).
                let currency = currency.unwrap_or(self.catalog.default_currency());
                let request = PaymentRequest {
                    idempotency_key: &idempotency_key,
                    amount_minor: minor_units(currency, amount_cents)?,
                    currency,
                    payment_method: &payment_method,
                    hold_id: subject.key(),
                };
                progress.prepared_here = self.prepare(ctx, checkout, attempt, request).await?;
                return Ok(Step::Next);
            }
            Phase::Requested {
                attempt,
                payment_id: Some(payment_id),
                ..
            } => (attempt, self.authorize(&payment_id, progress).await),
            Phase::ActionRequired {
                attempt,
                payment_id,
                ..
            } => (
                attempt,
                self.call(self.payments.retrieve(&payment_id)).await,
            ),
            _ => {
                return match request {
                    Some(request) => self.request_purchase(ctx, subject, checkout, request).await,
                    // Without a request to start an attempt (recovery,
                    // cancel, a webhook) there is nothing to finish.
                    None => Ok(Step::Done(Driven::Settled {
                        completed_here: progress.completed_here,
                    })),
                };
            }
        };
        self.record_outcome(ctx, subject, checkout, attempt, payment)
            .await
    }

    /// From authorization on: convert, capture, void, reverse, refund.
    async fn settlement_step(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
        phase: Phase,
        progress: &mut Progress,
    ) -> Result<Step, CheckoutError> {
        match phase {
            Phase::Authorized { .. } => self.convert(ctx, subject, checkout).await?,
            Phase::Converted {
                attempt,
                payment_id,
                ..
            } => {
                let payment = (attempt, payment_id.as_str());
                progress.completed_here |= self.capture(ctx, subject, checkout, payment).await?;
            }
            Phase::ReversalRequested { .. } => self.reverse(ctx, subject, checkout).await?,
            Phase::VoidRequested { payment_id, .. } => {
                self.give_back_order(ctx, subject, checkout).await?;
                self.void(ctx, checkout, &payment_id).await?
            }
            Phase::LinesCancelRequested { charge_id, .. } => {
                (self.cancel_lines(ctx, subject, checkout, &charge_id)).await?
            }
            Phase::Captured { .. } => {
                progress.completed_here |= self.convert_captured(ctx, subject, checkout).await?;
            }
            Phase::RefundRequested {
                charge_id,
                amount_cents,
                ..
            } => {
                self.refund_charge(ctx, checkout, &charge_id, amount_cents)
                    .await?
            }
            Phase::CancelRequested {
                charge_id,
                amount_cents,
                ..
            } => {
                self.cancel_booking(ctx, subject, checkout, (&charge_id, amount_cents))
                    .await?
            }
            Phase::Idle
            | Phase::Requested { .. }
            | Phase::ActionRequired { .. }
            | Phase::Completed { .. }
            | Phase::Refunded { .. }
            | Phase::Cancelled { .. }
            | Phase::Voided { .. }
            | Phase::Reversed { .. } => {
                return Ok(Step::Done(Driven::Settled {
                    completed_here: progress.completed_here,
                }))
            }
        }
        Ok(Step::Next)
    }

    /// A booking's cancellation: its tickets revoked, its charge refunded,
    /// then its units freed (in that order, so a freed unit never has a
    /// valid ticket, and nothing is free before its money is back).
    async fn cancel_booking(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
        (charge_id, amount_cents): (&str, i64),
    ) -> Result<(), CheckoutError> {
        self.revoke_booking_tickets(ctx, subject, checkout.aggregate())
            .await?;
        let refund_id = self.refund(charge_id, amount_cents).await?;
        self.free_units(ctx, subject, refund_id, checkout).await
    }

    /// Idle: records the intent to pay, before any provider call, once the
    /// hold is known to be still valid.
    async fn request_purchase(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
        request: &PurchaseRequest,
    ) -> Result<Step, CheckoutError> {
        self.check_before_paying(subject).await?;
        self.record(ctx, checkout, request).await?;
        Ok(Step::Next)
    }

    /// A purchase of a hold (or an order of holds) that is no longer valid
    /// asks the provider for nothing.
    async fn check_before_paying(&self, subject: &Subject) -> Result<(), CheckoutError> {
        let record = match subject {
            Subject::Hold(record) => record,
            Subject::Order(_) => {
                return match self.lost_now(subject).await? {
                    None => Ok(()),
                    Some((reason, holds)) => Err(CheckoutError::OrderHoldsLost {
                        reason,
                        holds,
                        voided: false,
                    }),
                };
            }
        };
        match HoldStatus::at(record.state, record.expires_at, self.clock.now()) {
            HoldStatus::Held => Ok(()),
            HoldStatus::Expired => Err(CheckoutError::hold_lost(RefundReason::HoldExpired)),
            HoldStatus::Released => Err(CheckoutError::hold_lost(RefundReason::HoldReleased)),
            // Converted by this checkout the drive sees first (the checkout
            // is past idle): here, an order (or its own earlier checkout on
            // another instance) bought it.
            HoldStatus::Converted => Err(CheckoutError::HoldConverted),
        }
    }

    /// Whether the subject still holds now: `None`, or why not (the first
    /// lost hold's reason) and, for an order, which holds are lost. An
    /// order's hold converted by the order itself still holds.
    pub(super) async fn lost_now(
        &self,
        subject: &Subject,
    ) -> Result<Option<(RefundReason, Vec<HoldId>)>, CheckoutError> {
        let now = self.clock.now();
        match subject {
            Subject::Hold(record) => {
                let hold = self.stored_hold(&record.hold_id).await?;
                Ok(lost(&hold, now).map(|reason| (reason, Vec::new())))
            }
            Subject::Order(order) => {
                let booking_id = order.order_id.booking_id();
                let mut found: Option<(RefundReason, Vec<HoldId>)> = None;
                for hold_id in &order.holds {
                    let hold = self.stored_hold(hold_id).await?;
                    let reason = match hold.state {
                        HoldState::Converted if hold.booking_id == Some(booking_id) => None,
                        HoldState::Converted => Some(RefundReason::HoldConverted),
                        _ => lost(&hold, now),
                    };
                    if let Some(reason) = reason {
                        let (_, holds) = found.get_or_insert((reason, Vec::new()));
                        holds.push(*hold_id);
                    }
                }
                Ok(found)
            }
        }
    }

    /// Requested: prepares the attempt's payment (idempotent by the
    /// attempt's key) and records its id; returns the id if this call
    /// prepared it. Nothing is reserved on the card yet, so a lost answer
    /// is asked again; a refusal ends the attempt.
    async fn prepare(
        &self,
        ctx: &RequestContext,
        checkout: &mut CheckoutLock,
        attempt: u32,
        request: PaymentRequest<'_>,
    ) -> Result<Option<String>, CheckoutError> {
        match self.call(self.payments.prepare(request)).await {
            Ok(Payment {
                payment_id,
                state: PaymentState::Captured,
            }) => {
                // A charge the simulator captured under this key before
                // authorize-then-capture.
                let command = CheckoutCommand::RecordCapture {
                    attempt,
                    charge_id: payment_id,
                };
                self.record(ctx, checkout, &command).await?;
                Ok(None)
            }
            Ok(Payment { payment_id, .. }) => {
                let command = CheckoutCommand::RecordPaymentCreated {
                    attempt,
                    payment_id: payment_id.clone(),
                };
                let recorded = self.record(ctx, checkout, &command).await?;
                Ok(recorded.then_some(payment_id))
            }
            Err(error) => Err(self.attempt_failed(ctx, checkout, attempt, error).await?),
        }
    }

    /// Authorizes the attempt's payment: at once if this drive prepared it
    /// (it was never sent), else only after reading it.
    async fn authorize(
        &self,
        payment_id: &str,
        progress: &Progress,
    ) -> Result<Payment, PaymentError> {
        if progress.prepared_here.as_deref() == Some(payment_id) {
            let key = Checkout::operation_key(payment_id, "confirm");
            self.call(self.payments.authorize(payment_id, &key)).await
        } else {
            self.authorize_unless_sent(payment_id).await
        }
    }

    /// A payment this process may have sent for authorization before (a
    /// crash, a lost answer, another instance): read first, and authorize
    /// only one the provider shows unconfirmed.
    async fn authorize_unless_sent(&self, payment_id: &str) -> Result<Payment, PaymentError> {
        let payment = self.call(self.payments.retrieve(payment_id)).await?;
        if payment.state != PaymentState::Unconfirmed {
            return Ok(payment);
        }
        let key = Checkout::operation_key(payment_id, "confirm");
        self.call(self.payments.authorize(payment_id, &key)).await
    }

    /// Records what the provider says of the attempt's payment.
    async fn record_outcome(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
        attempt: u32,
        payment: Result<Payment, PaymentError>,
    ) -> Result<Step, CheckoutError> {
        let payment = match payment {
            Ok(payment) => payment,
            Err(PaymentError::Unknown(reason)) => {
                tracing::warn!(checkout = %subject.key(), %reason, "payment outcome unknown; the attempt stays open");
                return Err(CheckoutError::PaymentUnavailable(reason));
            }
            Err(error) => return Err(self.attempt_failed(ctx, checkout, attempt, error).await?),
        };
        match payment.state {
            PaymentState::Authorized | PaymentState::Captured => {
                let command = CheckoutCommand::RecordAuthorization { attempt };
                self.record(ctx, checkout, &command).await?;
                Ok(Step::Next)
            }
            PaymentState::NeedsBuyer(action) => {
                self.wait_on_buyer(ctx, subject, checkout, attempt, action)
                    .await
            }
            PaymentState::Declined(decline) => {
                let command = CheckoutCommand::RecordDecline {
                    attempt,
                    reason: decline.message.clone(),
                    code: decline.code.clone(),
                };
                if self.record(ctx, checkout, &command).await? {
                    return Err(CheckoutError::PaymentDeclined(decline));
                }
                Ok(Step::Next)
            }
            PaymentState::Canceled => {
                self.cancelled_elsewhere(ctx, subject, checkout, attempt)
                    .await
            }
            // Sent, not answered yet: neither authorize again nor guess.
            PaymentState::Unconfirmed | PaymentState::Processing => Err(
                CheckoutError::PaymentUnavailable("the provider is still processing".into()),
            ),
        }
    }

    /// The provider needs the buyer (3-D Secure). While the hold lasts, it
    /// is extended (up to the show's cap) and the drive ends with what the
    /// buyer's client needs; a hold lost meanwhile voids the payment.
    async fn wait_on_buyer(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
        attempt: u32,
        action: BuyerAction,
    ) -> Result<Step, CheckoutError> {
        if !matches!(checkout.aggregate().phase, Phase::ActionRequired { .. }) {
            let command = CheckoutCommand::RecordActionRequired { attempt };
            if !self.record(ctx, checkout, &command).await? {
                return Ok(Step::Next);
            }
        }
        if let Some((reason, holds)) = self.lost_now(subject).await? {
            let command = CheckoutCommand::RequestVoid { reason, holds };
            self.record(ctx, checkout, &command).await?;
            return Ok(Step::Next);
        }
        let expires_at = self.extend_while_waiting(ctx, subject).await?;
        let payment_id = checkout
            .aggregate()
            .phase
            .payment_id()
            .unwrap_or_default()
            .to_owned();
        Ok(Step::Done(Driven::WaitingOnBuyer {
            payment_id,
            action,
            expires_at,
        }))
    }

    /// The provider shows the attempt's payment cancelled while the
    /// checkout still waits on it: cancelled by a void this process has not
    /// seen recorded yet (recovery or another instance, the hold having
    /// ended), or at the provider. If the hold is lost, that is the void:
    /// it is requested and recorded (cancelling again is the same
    /// operation), so the checkout's record says `voided`, whichever path
    /// reads first; only while the hold still holds is it a failed attempt
    /// after which another may start.
    async fn cancelled_elsewhere(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
        attempt: u32,
    ) -> Result<Step, CheckoutError> {
        if let Some((reason, holds)) = self.lost_now(subject).await? {
            let command = CheckoutCommand::RequestVoid { reason, holds };
            self.record(ctx, checkout, &command).await?;
            return Ok(Step::Next);
        }
        let error = PaymentError::Unavailable("the payment was cancelled at the provider".into());
        Err(self.attempt_failed(ctx, checkout, attempt, error).await?)
    }

    /// Converted: captures the authorization and completes the checkout.
    /// Returns whether this call completed it. An authorization that cannot
    /// be captured any more (expired or cancelled at the provider) undoes
    /// the booking; an unknown outcome leaves the step for a retry.
    async fn capture(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
        (attempt, payment_id): (u32, &str),
    ) -> Result<bool, CheckoutError> {
        let key = Checkout::operation_key(payment_id, "capture");
        let payment = self
            .call(self.payments.capture(payment_id, &key))
            .await
            .map_err(|e| CheckoutError::PaymentUnavailable(e.to_string()))?;
        let command = match payment.state {
            PaymentState::Captured => CheckoutCommand::RecordCapture {
                attempt,
                charge_id: payment.payment_id,
            },
            PaymentState::Canceled | PaymentState::Declined(_) => {
                tracing::error!(%payment_id, "an authorization could not be captured; undoing its booking");
                CheckoutCommand::RecordCaptureFailure {
                    reason: format!(
                        "the authorization could not be captured ({:?})",
                        payment.state
                    ),
                }
            }
            other => {
                return Err(CheckoutError::PaymentUnavailable(format!(
                    "capture left the payment {other:?}"
                )))
            }
        };
        if !matches!(command, CheckoutCommand::RecordCapture { .. }) {
            self.record(ctx, checkout, &command).await?;
            return Ok(false);
        }
        self.record_with_tickets(ctx, subject, checkout, &command)
            .await
    }

    /// Void requested: cancels the authorization and records it.
    async fn void(
        &self,
        ctx: &RequestContext,
        checkout: &mut CheckoutLock,
        payment_id: &str,
    ) -> Result<(), CheckoutError> {
        let key = Checkout::operation_key(payment_id, "cancel");
        let payment = self
            .call(self.payments.cancel(payment_id, &key))
            .await
            .map_err(|e| CheckoutError::PaymentUnavailable(e.to_string()))?;
        match payment.state {
            PaymentState::Canceled | PaymentState::Declined(_) => {
                tracing::warn!(%payment_id, "the hold was lost before capture; the authorization is cancelled");
                metrics::counter!("payments_voided_total").increment(1);
                self.record(ctx, checkout, &CheckoutCommand::RecordVoid)
                    .await?;
                Ok(())
            }
            other => Err(CheckoutError::Bug(format!(
                "payment {payment_id} could not be cancelled: {other:?}"
            ))),
        }
    }

    /// An attempt that ended at the provider with nothing reserved: record
    /// it (the checkout is idle again) and say why.
    async fn attempt_failed(
        &self,
        ctx: &RequestContext,
        checkout: &mut CheckoutLock,
        attempt: u32,
        error: PaymentError,
    ) -> Result<CheckoutError, CheckoutError> {
        if let PaymentError::Unknown(reason) = error {
            return Ok(CheckoutError::PaymentUnavailable(reason));
        }
        let reason = error.to_string();
        let command = CheckoutCommand::RecordFailure {
            attempt,
            reason: reason.clone(),
        };
        self.record(ctx, checkout, &command).await?;
        Ok(match error {
            PaymentError::Invalid(why) => CheckoutError::Invalid(why),
            _ => CheckoutError::PaymentUnavailable(reason),
        })
    }

    /// One provider call, bounded by the payment timeout (past it the
    /// outcome is unknown), its latency measured by outcome.
    pub(super) async fn call<T>(
        &self,
        call: futures::future::BoxFuture<'_, Result<T, PaymentError>>,
    ) -> Result<T, PaymentError> {
        let started = std::time::Instant::now();
        let timeout = self.payment_timeout;
        let outcome = tokio::time::timeout(timeout, call)
            .await
            .unwrap_or_else(|_| {
                Err(PaymentError::Unknown(format!(
                    "no answer within {timeout:?}"
                )))
            });
        let label = match &outcome {
            Ok(_) => "answered",
            Err(PaymentError::Unavailable(_)) => "unavailable",
            Err(PaymentError::Unknown(_)) => "unknown",
            Err(PaymentError::Invalid(_)) => "invalid",
        };
        metrics::histogram!("payment_latency_seconds", "provider" => self.payments.name(), "outcome" => label)
            .record(started.elapsed().as_secs_f64());
        outcome
    }

    /// Refund requested (a charge captured at once, before
    /// authorize-then-capture): refunds it and records the refund.
    async fn refund_charge(
        &self,
        ctx: &RequestContext,
        checkout: &mut CheckoutLock,
        charge_id: &str,
        amount_cents: i64,
    ) -> Result<(), CheckoutError> {
        let refund_id = self.refund(charge_id, amount_cents).await?;
        let command = CheckoutCommand::RecordRefund { refund_id };
        self.record(ctx, checkout, &command).await?;
        Ok(())
    }

    /// The refund of a captured payment of `amount_cents`, with the key
    /// derived from it (a repeat after a crash reaches the same refund).
    async fn refund(&self, charge_id: &str, amount_cents: i64) -> Result<String, CheckoutError> {
        if amount_cents == 0 {
            return Ok(NO_REFUND_ID.to_owned());
        }
        let key = Checkout::refund_key(charge_id);
        self.refund_part(charge_id, None, &key).await
    }

    /// A refund of `amount_minor` (the whole: `None`) under `key`; of 0,
    /// nothing is asked of the provider (it would refuse), and the refund
    /// recorded is [`NO_REFUND_ID`].
    pub(super) async fn refund_part(
        &self,
        charge_id: &str,
        amount_minor: Option<i64>,
        key: &str,
    ) -> Result<String, CheckoutError> {
        if amount_minor == Some(0) {
            return Ok(NO_REFUND_ID.to_owned());
        }
        let refund = self
            .call(self.payments.refund(charge_id, amount_minor, key))
            .await
            .map_err(|e| CheckoutError::PaymentUnavailable(e.to_string()))?;
        tracing::warn!(%charge_id, refund_id = %refund.refund_id, "payment refunded");
        metrics::counter!("refunds_total").increment(1);
        Ok(refund.refund_id)
    }
}

/// The refund id recorded for a refund of nothing (free lines, a free
/// booking): no provider was asked, so there is no provider's id.
pub const NO_REFUND_ID: &str = "none";

/// A price in the currency's minor units, as the provider takes it.
pub(super) fn minor_units(currency: Currency, amount_cents: i64) -> Result<i64, CheckoutError> {
    currency
        .minor_units(amount_cents)
        .map_err(|e| CheckoutError::Bug(format!("pricing a payment: {e}")))
}

/// Why a hold no longer holds at `now`, if it does not.
fn lost(hold: &HoldRecord, now: chrono::DateTime<chrono::Utc>) -> Option<RefundReason> {
    match HoldStatus::at(hold.state, hold.expires_at, now) {
        HoldStatus::Held | HoldStatus::Converted => None,
        HoldStatus::Released => Some(RefundReason::HoldReleased),
        HoldStatus::Expired => Some(if hold.state == HoldState::Released {
            RefundReason::HoldReleased
        } else {
            RefundReason::HoldExpired
        }),
    }
}
