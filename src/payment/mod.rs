//! The payment port: what the checkout needs from a payment provider.
//!
//! Every call carries an idempotency key, and a provider must honour it: the
//! same key returns the original outcome, however often and however
//! concurrently it is sent. That is what makes a retried purchase, or a
//! recovery after a crash, reach the same charge instead of a second one.

pub mod simulator;

use futures::future::BoxFuture;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub charge_id: String,
    pub amount_cents: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refund {
    pub refund_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PaymentError {
    /// The provider refused the payment method; nothing was charged.
    #[error("payment declined: {0}")]
    Declined(String),
    /// The provider failed and says it charged nothing; a retry may succeed.
    #[error("payment provider unavailable: {0}")]
    Unavailable(String),
    /// The outcome is unknown (a timeout, a lost connection): the charge may
    /// exist. Only a retry with the same key can tell.
    #[error("payment outcome unknown: {0}")]
    Indeterminate(String),
    /// The request itself is wrong (an unknown payment method).
    #[error("invalid payment request: {0}")]
    Invalid(String),
}

pub struct ChargeRequest<'a> {
    pub idempotency_key: &'a str,
    pub amount_cents: i64,
    pub payment_method: &'a str,
}

pub trait PaymentProvider: Send + Sync + 'static {
    /// Refuses a payment method this provider cannot take, before anything happens.
    fn check_method(&self, payment_method: &str) -> Result<(), PaymentError>;

    fn charge<'a>(
        &'a self,
        request: ChargeRequest<'a>,
    ) -> BoxFuture<'a, Result<Charge, PaymentError>>;

    /// Returns the whole charge. The same key returns the same refund.
    fn refund<'a>(
        &'a self,
        charge_id: &'a str,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Refund, PaymentError>>;
}
