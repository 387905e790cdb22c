//! Payments made at the box office (issue #35): cash, a card on the
//! counter's terminal, an invoice, or a comp. No provider is involved; the
//! checkout stream is the record. An order paid this way goes through the
//! same drive as an online one (authorize, convert, capture; cancel and
//! refund), every step recorded, each provider call answered here at once
//! and the same way every time it is asked, so recovery after a crash
//! finishes it as it finishes any other.
//!
//! Only the box office reaches it: its payment methods (`offline:cash`,
//! ...) are refused by [`WithOffline::check_method`], which every buyer's
//! purchase and order asks first.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;

use super::{Payment, PaymentError, PaymentProvider, PaymentRequest, PaymentState, Refund};

/// The prefix of a box-office payment method (`offline:cash`).
pub const OFFLINE_METHOD_PREFIX: &str = "offline:";
/// The prefix of an offline payment's id: what routes a later call here.
const OFFLINE_PAYMENT_PREFIX: &str = "offline_";

/// The box office's payment method for `payment`.
pub fn offline_method(payment: domain::order::OfflinePayment) -> String {
    format!("{OFFLINE_METHOD_PREFIX}{}", payment.as_str())
}

/// Whether `payment_id` is a box-office payment's.
pub fn is_offline(payment_id: &str) -> bool {
    payment_id.starts_with(OFFLINE_PAYMENT_PREFIX)
}

fn answer(payment_id: &str, state: PaymentState) -> Result<Payment, PaymentError> {
    Ok(Payment {
        payment_id: payment_id.to_owned(),
        state,
    })
}

/// The service's provider for online payments, and the box office beside it.
pub struct WithOffline {
    card: Arc<dyn PaymentProvider>,
}

impl WithOffline {
    pub fn new(card: Arc<dyn PaymentProvider>) -> Self {
        Self { card }
    }
}

impl PaymentProvider for WithOffline {
    fn name(&self) -> &'static str {
        self.card.name()
    }

    /// The box office's methods, and the online provider's.
    fn takes(&self, payment_method: &str) -> bool {
        payment_method.starts_with(OFFLINE_METHOD_PREFIX) || self.card.takes(payment_method)
    }

    /// A buyer's method: the online provider's; never an offline one.
    fn check_method(&self, payment_method: &str) -> Result<(), PaymentError> {
        if payment_method.starts_with(OFFLINE_METHOD_PREFIX) {
            return Err(PaymentError::Invalid(
                "offline payments are made at the box office only".into(),
            ));
        }
        self.card.check_method(payment_method)
    }

    fn prepare<'a>(
        &'a self,
        request: PaymentRequest<'a>,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        if request.payment_method.starts_with(OFFLINE_METHOD_PREFIX) {
            let payment_id = format!("{OFFLINE_PAYMENT_PREFIX}{}", request.idempotency_key);
            return async move { answer(&payment_id, PaymentState::Unconfirmed) }.boxed();
        }
        self.card.prepare(request)
    }

    fn authorize<'a>(
        &'a self,
        payment_id: &'a str,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        if is_offline(payment_id) {
            return async move { answer(payment_id, PaymentState::Authorized) }.boxed();
        }
        self.card.authorize(payment_id, idempotency_key)
    }

    /// An offline payment reads authorized: the money is at the counter,
    /// and whichever step the checkout records next (capture, or cancel)
    /// is the one it takes.
    fn retrieve<'a>(&'a self, payment_id: &'a str) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        if is_offline(payment_id) {
            return async move { answer(payment_id, PaymentState::Authorized) }.boxed();
        }
        self.card.retrieve(payment_id)
    }

    fn capture<'a>(
        &'a self,
        payment_id: &'a str,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        if is_offline(payment_id) {
            return async move { answer(payment_id, PaymentState::Captured) }.boxed();
        }
        self.card.capture(payment_id, idempotency_key)
    }

    fn cancel<'a>(
        &'a self,
        payment_id: &'a str,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        if is_offline(payment_id) {
            return async move { answer(payment_id, PaymentState::Canceled) }.boxed();
        }
        self.card.cancel(payment_id, idempotency_key)
    }

    /// Given back at the counter: the refund's id is its key's, so asking
    /// again names the same refund.
    fn refund<'a>(
        &'a self,
        payment_id: &'a str,
        amount_minor: Option<i64>,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Refund, PaymentError>> {
        if is_offline(payment_id) {
            let refund_id = format!("{OFFLINE_PAYMENT_PREFIX}refund_{idempotency_key}");
            return async move { Ok(Refund { refund_id }) }.boxed();
        }
        self.card.refund(payment_id, amount_minor, idempotency_key)
    }
}
