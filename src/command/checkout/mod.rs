//! Checkout: payment coupled to the hold (ARCHITECTURE.md, "Checkout").
//!
//! A purchase is driven through the Checkout stream's phases, one recorded
//! step at a time: request (recorded before any provider call), prepare
//! the payment (its id recorded), authorize it (perhaps after the buyer's
//! 3-D Secure step), convert every unit in one append that re-checks the
//! hold, and only then capture; if the hold was lost before conversion,
//! the authorization is cancelled instead (voided), and if the capture
//! fails after it, the booking is undone. Each step is appended at the
//! stream's version, so two processes driving one checkout (a retry on
//! another instance, the recovery worker, a provider's webhook) cannot both
//! act on the same step; and every provider call carries an idempotency key
//! derived from the stream, so repeating a step after a crash reaches the
//! same payment, capture or refund.
//!
//! [`CheckoutService::recover`] drives a checkout left half way (found by
//! the recovery worker) with the same code, minus starting a new attempt;
//! [`CheckoutService::payment_changed`] does the same when the provider
//! says a payment moved.
//!
//! By step: `purchase` (pricing the hold and starting the drive), `drive`
//! (one step per phase), `record` (the decision recording a step on the
//! checkout alone, before or after a provider call), `finish` (the
//! decision on the units: convert, or free them for a cancellation or a
//! reversal), `booking` (the answer,
//! reading and cancelling a booking), `waiting` (the hold while the buyer
//! authenticates) and `recover`. An order (several holds paid once) is a
//! checkout of its own driven by the same steps: `order` (placing, reading
//! and cancelling lines of one), `order_units` (its holds converted, given
//! back and freed one round each).

mod booking;
mod convert_order;
mod drive;
mod finish;
mod order;
mod order_units;
mod purchase;
mod record;
mod recover;
mod tickets;
mod waiting;

pub use order::{OrderActionView, OrderView, Ordered, RefundView, SaleView, WaitlistView};

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use domain::checkout::RefundReason;
use domain::ids::{BookingId, HoldId, OrderId, ShowId};
use domain::order::LineId;
use serde::Serialize;

use crate::catalog::ShowCatalog;
use crate::clock::Clock;
use crate::command::round::{RoundError, Rounds};
use crate::payment::{BuyerAction, Decline, PaymentProvider};
use crate::store::{Checkouts, HoldRecord, Holds, StoreError};

/// Default for how long one call to the payment provider may take before
/// its outcome is treated as unknown (`BOOKING_PAYMENT_TIMEOUT_SECONDS`).
/// The attempt then stays open: a retry, or the recovery worker, reads the
/// payment and goes on from what the provider did. Above the simulator's
/// longest delay (`MAX_SIM_DELAY_MS`, 20 s), below the request timeout
/// (30 s), so a buyer is answered 503 `payment_unavailable` rather than
/// `busy`.
pub const DEFAULT_PAYMENT_TIMEOUT: Duration = Duration::from_secs(25);

/// Steps one request may drive a checkout through: the drive walks the
/// checkout's phases (each step one round, and a provider call), it does
/// not retry them. A purchase needs at most seven (request, prepare,
/// authorize, convert, capture; or void request and void); a step that
/// finds the checkout moved on by another process (a retry on another
/// instance, recovery, a webhook) is answered by reading the new phase and
/// taking its step, which the rest leave room for, so that a drive racing
/// another still ends, with 503 `busy` at worst.
pub const MAX_DRIVE_STEPS: usize = 16;

/// The actor recorded on events the recovery worker appends.
pub const RECOVERY_ACTOR: &str = "system:recovery";

#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    #[error("hold not found")]
    HoldNotFound,
    #[error("booking not found")]
    BookingNotFound,
    #[error("not yours")]
    Forbidden,
    /// The hold expired before the payment could be captured: nothing was
    /// charged, or what was charged at once was refunded (`refunded`), or
    /// the authorization was cancelled (`voided`).
    #[error("the hold has expired")]
    HoldExpired { refunded: bool, voided: bool },
    #[error("the hold was released")]
    HoldReleased { refunded: bool, voided: bool },
    /// The hold was bought by an order (or another purchase) before this
    /// purchase asked for anything.
    #[error("the hold was converted")]
    HoldConverted,
    #[error("payment declined: {}", .0.message)]
    PaymentDeclined(Decline),
    /// The authorization could not be captured after the units were
    /// booked: the booking was undone and nothing was charged.
    #[error("booking {0} undone: its payment could not be captured")]
    Reversed(BookingId),
    #[error("payment provider unavailable: {0}")]
    PaymentUnavailable(String),
    #[error("order not found")]
    OrderNotFound,
    /// Holds of an order lost before conversion: nothing was charged, or
    /// the authorization was cancelled (`voided`). `reason` is the first
    /// lost hold's.
    #[error("a hold of the order was lost")]
    OrderHoldsLost {
        reason: RefundReason,
        holds: Vec<HoldId>,
        voided: bool,
    },
    #[error("the order has no line {0}")]
    UnknownLine(LineId),
    /// Lines of an order that is not paid cannot be cancelled.
    #[error("the order is not confirmed")]
    OrderNotConfirmed,
    /// The buyer's cancellation window (`buyer_cancellation_until`) is over.
    #[error("the show's cancellation window for buyers has closed")]
    CancellationClosed,
    /// The request breaks a rule (422 `validation_failed`).
    #[error("{0}")]
    Invalid(String),
    /// A decision refused in a way the command rules out: a bug (500, logged).
    #[error("{0}")]
    Bug(String),
    #[error("contention did not settle")]
    Busy,
    /// The checkout is paid through a provider this instance does not use
    /// (another instance on the database does): it is left to that one
    /// (503 `busy`: asked again, the balancer may pick it).
    #[error("the checkout is paid through another payment provider")]
    OtherProvider,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CheckoutError {
    /// A hold lost before anything was asked of the provider.
    pub fn hold_lost(reason: RefundReason) -> Self {
        Self::lost(reason, false, false)
    }

    fn lost(reason: RefundReason, refunded: bool, voided: bool) -> Self {
        match reason {
            RefundReason::HoldExpired => CheckoutError::HoldExpired { refunded, voided },
            RefundReason::HoldReleased => CheckoutError::HoldReleased { refunded, voided },
            // Bought meanwhile by an order: 409 `hold_converted`, with what
            // became of this purchase's money.
            RefundReason::HoldConverted => CheckoutError::OrderHoldsLost {
                reason,
                holds: Vec::new(),
                voided,
            },
        }
    }
}

impl RoundError for CheckoutError {
    fn contended() -> Self {
        CheckoutError::Busy
    }

    fn bug(what: String) -> Self {
        CheckoutError::Bug(what)
    }
}

/// A booking as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct BookingView {
    #[schema(value_type = uuid::Uuid)]
    pub booking_id: BookingId,
    #[schema(value_type = uuid::Uuid)]
    pub hold_id: HoldId,
    pub show_id: String,
    pub seats: Vec<String>,
    pub pool_id: Option<String>,
    pub quantity: Option<u32>,
    pub amount_cents: i64,
    pub charge_id: String,
    /// `confirmed` or `cancelled`.
    pub status: &'static str,
    pub refunded: bool,
}

/// Where a booking stands, as the API shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BookingStatus {
    Confirmed,
    /// Cancelled by its buyer or an admin, and refunded.
    Cancelled,
    /// Undone because its payment could not be captured: cancelled, and
    /// nothing was charged (`refunded: false`).
    Undone,
}

#[derive(Debug)]
pub enum Purchased {
    /// This request completed the purchase (201).
    New(BookingView),
    /// An earlier or concurrent request did (200): the same booking.
    Existing(BookingView),
    /// The provider needs the buyer (3-D Secure) first (202).
    WaitingOnBuyer(ActionView),
}

/// A purchase waiting on the buyer, as the API shows it (202).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ActionView {
    #[schema(value_type = uuid::Uuid)]
    pub hold_id: HoldId,
    /// `requires_action`.
    pub status: &'static str,
    /// The provider's payment (Stripe: the PaymentIntent's id).
    pub payment_intent: String,
    /// What the buyer's client continues the payment with (Stripe.js:
    /// `handleNextAction({clientSecret})`).
    pub client_secret: String,
    /// The provider's `next_action`, as it gave it.
    #[schema(value_type = Object)]
    pub next_action: serde_json::Value,
    /// The hold's expiry, extended while the buyer authenticates.
    pub expires_at: DateTime<Utc>,
}

/// What a checkout pays for: one hold, or an order's holds.
pub(crate) enum Subject {
    Hold(HoldRecord),
    Order(OrderSubject),
}

/// An order as its drive needs it (its holds' records are read at each
/// step that asks whether they still hold).
#[derive(Clone)]
pub(crate) struct OrderSubject {
    pub(crate) order_id: OrderId,
    pub(crate) show_id: ShowId,
    pub(crate) holds: Vec<HoldId>,
}

impl Subject {
    /// The checkout's stream id, which the provider's metadata (`hold_id`)
    /// and the checkouts row carry: a hold's id, or an order's.
    pub(crate) fn key(&self) -> HoldId {
        match self {
            Subject::Hold(record) => record.hold_id,
            Subject::Order(order) => HoldId(order.order_id.0),
        }
    }
}

/// What a drive of a checkout came to.
#[derive(Debug)]
pub(crate) enum Driven {
    /// The checkout reached a phase only the buyer or an operator moves on
    /// (completed, voided, cancelled, idle); `completed_here`: this drive
    /// completed it.
    Settled { completed_here: bool },
    /// The provider needs the buyer; the hold lasts until `expires_at`.
    WaitingOnBuyer {
        payment_id: String,
        action: BuyerAction,
        expires_at: DateTime<Utc>,
    },
}

/// What recovery did with one checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovered {
    Completed,
    Refunded,
    Cancelled,
    /// The hold was lost: the authorization was cancelled.
    Voided,
    /// The authorization could not be captured: the booking was undone.
    Reversed,
    /// The buyer is still authenticating, and the hold still holds.
    Waiting,
    /// The payment attempt ended without a charge.
    Closed,
    /// Another request in this process is driving it right now.
    Busy,
    /// The provider could not be reached; the next run tries again.
    Pending,
}

pub struct CheckoutService {
    /// Hold records: what is being bought.
    records: Holds,
    /// Checkout records: bookings, recovery's work list.
    checkouts: Checkouts,
    catalog: Arc<ShowCatalog>,
    clock: Arc<dyn Clock>,
    payments: Arc<dyn PaymentProvider>,
    rounds: Arc<Rounds>,
    /// How long one provider call may take (`DEFAULT_PAYMENT_TIMEOUT`).
    payment_timeout: Duration,
}

impl CheckoutService {
    pub fn new(
        records: Holds,
        checkouts: Checkouts,
        catalog: Arc<ShowCatalog>,
        clock: Arc<dyn Clock>,
        payments: Arc<dyn PaymentProvider>,
        rounds: Arc<Rounds>,
        payment_timeout: Duration,
    ) -> Self {
        Self {
            records,
            checkouts,
            catalog,
            clock,
            payments,
            rounds,
            payment_timeout,
        }
    }

    /// The provider this service pays through (`simulator`, `stripe`).
    pub fn provider(&self) -> &'static str {
        self.payments.name()
    }
}
