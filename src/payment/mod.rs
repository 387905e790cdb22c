//! The payment port: what the checkout needs from a payment provider, in
//! the shape real card providers have. A payment is **prepared** (created
//! at the provider under an idempotency key: nothing moves), its id recorded
//! on the Checkout stream, then **authorized** (the amount reserved on the
//! card; the provider may need the buyer first, 3-D Secure), **captured**
//! once the seats are booked, or **cancelled** (voided) when they cannot
//! be; a captured payment can be **refunded**.
//!
//! Preparing before authorizing is what makes an unknown outcome safe:
//! the service only ever authorizes a payment whose id it has recorded, so
//! a retry after a lost answer finds that payment and reads its state
//! ([`PaymentProvider::retrieve`]) instead of authorizing a second one.
//!
//! Every call carries an idempotency key, and a provider honours it: the
//! same key returns the original outcome, however often it is sent.
//!
//! Providers: [`simulator`] (built in, durable: demos and load tests) and
//! [`stripe`] (PaymentIntents with manual capture).

pub mod ledger;
pub mod offline;
pub mod simulator;
pub mod stripe;

use domain::ids::HoldId;
use domain::money::Currency;
use futures::future::BoxFuture;
use serde_json::Value;

/// Longest payment method id: Stripe's object ids stay well below it, and
/// the simulator's methods are short.
pub const MAX_PAYMENT_METHOD_CHARS: usize = 255;

/// Which provider the service pays through (`BOOKING_PAYMENT_PROVIDER`).
#[derive(Debug, Clone, Default)]
pub enum ProviderSettings {
    /// The built-in simulator (its latency is `Settings::payment_latency`).
    #[default]
    Simulator,
    Stripe(stripe::StripeSettings),
}

/// What the buyer's client needs to continue a payment that waits on the
/// buyer (Stripe's `client_secret` and `next_action`, as Stripe gave them).
#[derive(Debug, Clone, PartialEq)]
pub struct BuyerAction {
    pub client_secret: String,
    pub next_action: Value,
}

/// A refusal by the card's issuer (or a failed authentication).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decline {
    /// The provider's decline code (`insufficient_funds`,
    /// `payment_intent_authentication_failure`, ...), if it gave one.
    pub code: Option<String>,
    pub message: String,
}

/// Where a payment stands at the provider.
#[derive(Debug, Clone, PartialEq)]
pub enum PaymentState {
    /// Created, not authorized: nothing is reserved on the card.
    Unconfirmed,
    /// The buyer must act first (3-D Secure).
    NeedsBuyer(BuyerAction),
    /// The amount is reserved on the card and can be captured.
    Authorized,
    /// Refused; nothing is reserved. A new attempt needs a new payment.
    Declined(Decline),
    /// The provider is still working on it (`processing`): read it again.
    Processing,
    /// The money moved.
    Captured,
    /// Cancelled (voided, or expired at the provider): nothing moves.
    Canceled,
}

/// A payment at the provider, as read or as a call left it.
#[derive(Debug, Clone, PartialEq)]
pub struct Payment {
    pub payment_id: String,
    pub state: PaymentState,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refund {
    pub refund_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PaymentError {
    /// The provider could not be reached or failed, and did nothing.
    #[error("payment provider unavailable: {0}")]
    Unavailable(String),
    /// The outcome is unknown (a timeout, a lost connection, a 5xx): the
    /// call may have taken effect. Settled by reading, never by acting
    /// again on a guess.
    #[error("payment outcome unknown: {0}")]
    Unknown(String),
    /// The request itself is wrong (an unknown payment method, an amount
    /// the provider refuses). Nothing happened.
    #[error("invalid payment request: {0}")]
    Invalid(String),
}

/// A payment to prepare: the hold's price, for the buyer's method.
pub struct PaymentRequest<'a> {
    pub idempotency_key: &'a str,
    /// In the currency's minor unit (`Currency::minor_units`).
    pub amount_minor: i64,
    pub currency: Currency,
    pub payment_method: &'a str,
    /// Recorded at the provider with the payment (Stripe's metadata), so a
    /// payment names the hold it is for.
    pub hold_id: HoldId,
}

pub trait PaymentProvider: Send + Sync + 'static {
    /// `simulator` or `stripe`, for logs and metrics.
    fn name(&self) -> &'static str;

    /// Refuses a payment method this provider cannot take, before anything
    /// happens.
    fn check_method(&self, payment_method: &str) -> Result<(), PaymentError>;

    /// Whether a checkout paid with `payment_method` is this provider's to
    /// drive: instances with different providers on one database each
    /// leave the others' checkouts alone (a simulator never asks after a
    /// Stripe payment, nor Stripe after a simulated one).
    fn takes(&self, payment_method: &str) -> bool;

    /// Creates the payment (not authorized). The same key returns the same
    /// payment; a payment already past `Unconfirmed` comes back as it is.
    fn prepare<'a>(
        &'a self,
        request: PaymentRequest<'a>,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>>;

    /// Asks the issuer to authorize a prepared payment.
    fn authorize<'a>(
        &'a self,
        payment_id: &'a str,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>>;

    /// Reads a payment's state; changes nothing.
    fn retrieve<'a>(&'a self, payment_id: &'a str) -> BoxFuture<'a, Result<Payment, PaymentError>>;

    /// Captures an authorized payment. A payment that cannot be captured
    /// (cancelled, expired) comes back in the state it is in.
    fn capture<'a>(
        &'a self,
        payment_id: &'a str,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>>;

    /// Cancels a payment that is not captured (a void): nothing moves.
    fn cancel<'a>(
        &'a self,
        payment_id: &'a str,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>>;

    /// Returns `amount_minor` of a captured payment, or the whole of it
    /// (`None`). The same key returns the same refund.
    fn refund<'a>(
        &'a self,
        payment_id: &'a str,
        amount_minor: Option<i64>,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Refund, PaymentError>>;
}
