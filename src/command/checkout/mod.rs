//! Checkout: payment coupled to the hold (ARCHITECTURE.md, "Checkout").
//!
//! A purchase is driven through the Checkout stream's phases, one recorded
//! step at a time: request (recorded before the charge), charge, capture
//! (recorded after), then either convert every seat and complete in one
//! transaction, or, if the hold was lost meanwhile, request and record a
//! refund. Each step is appended at the stream's version, so two processes
//! driving one checkout (a retry on another instance, the recovery worker)
//! cannot both act on the same step; and every provider call carries an
//! idempotency key derived from the stream, so repeating a step after a
//! crash reaches the same charge or refund.
//!
//! [`CheckoutService::recover`] drives a checkout left half way (found by
//! the recovery worker) with the same code, minus starting a new attempt.
//!
//! By step: `purchase` (pricing the hold and starting the drive), `drive`
//! (one step per phase: request, charge, refund), `finish` (the last
//! append on the units: convert, or free them for a cancellation),
//! `booking` (the answer, reading and cancelling a booking) and `recover`.

mod booking;
mod drive;
mod finish;
mod purchase;
mod recover;

use std::sync::Arc;
use std::time::Duration;

use domain::checkout::{decide, CheckoutCommand};
use domain::ids::{BookingId, HoldId};
use domain::seat::Seat;
use serde::Serialize;

use crate::catalog::ShowCatalog;
use crate::clock::Clock;
use crate::command::context::RequestContext;
use crate::command::round::{CheckoutLock, Decided, Decision, Round, RoundError, Rounds, Settled};
use crate::payment::PaymentProvider;
use crate::store::{Store, StoreError};

/// How long one call to the payment provider may take before its outcome is
/// treated as unknown. The attempt then stays open: a retry, or the recovery
/// worker, repeats it with the same idempotency key.
pub const PAYMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// Steps one request may drive a checkout through. A purchase needs at most
/// five (request, capture, convert, refund request, refund); the rest absorb
/// conflicts with another instance driving the same checkout.
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
    #[error("the hold has expired")]
    HoldExpired { refunded: bool },
    #[error("the hold was released")]
    HoldReleased { refunded: bool },
    #[error("payment declined: {0}")]
    PaymentDeclined(String),
    #[error("payment provider unavailable: {0}")]
    PaymentUnavailable(String),
    /// The request breaks a rule (422 `validation_failed`).
    #[error("{0}")]
    Invalid(String),
    /// A decision refused in a way the command rules out: a bug (500, logged).
    #[error("{0}")]
    Bug(String),
    #[error("contention did not settle")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
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

#[derive(Debug)]
pub enum Purchased {
    /// This request completed the purchase (201).
    New(BookingView),
    /// An earlier or concurrent request did (200): the same booking.
    Existing(BookingView),
}

/// What recovery did with one checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovered {
    Completed,
    Refunded,
    Cancelled,
    /// The payment attempt ended without a charge.
    Closed,
    /// Another request in this process is driving it right now.
    Busy,
    /// The provider could not be reached; the next run tries again.
    Pending,
}

pub struct CheckoutService {
    store: Arc<Store>,
    catalog: Arc<ShowCatalog>,
    clock: Arc<dyn Clock>,
    payments: Arc<dyn PaymentProvider>,
    rounds: Arc<Rounds>,
}

impl CheckoutService {
    pub fn new(
        store: Arc<Store>,
        catalog: Arc<ShowCatalog>,
        clock: Arc<dyn Clock>,
        payments: Arc<dyn PaymentProvider>,
        rounds: Arc<Rounds>,
    ) -> Self {
        Self {
            store,
            catalog,
            clock,
            payments,
            rounds,
        }
    }

    /// Decides and appends one checkout command on its own. Returns whether
    /// it applies (appended, or nothing to append); false: the checkout is
    /// past it (another process moved it), and the drive reads it again.
    async fn record(
        &self,
        ctx: &RequestContext,
        checkout: &mut CheckoutLock,
        command: &CheckoutCommand,
    ) -> Result<bool, CheckoutError> {
        let round = Round::new("checkout", ctx).with_checkout(checkout);
        let settled = self
            .rounds
            .run::<Seat, _, CheckoutError>(round, Vec::new(), |view| {
                let Some(checkout) = view.checkout else {
                    return Err(CheckoutError::Bug(
                        "a checkout round without its checkout".into(),
                    ));
                };
                Ok(match decide(checkout, command) {
                    Ok(events) => Decision::Append(
                        Decided {
                            checkout: events,
                            ..Decided::units(Vec::new())
                        },
                        true,
                    ),
                    Err(e) => {
                        tracing::debug!(error = %e, "checkout command no longer applies");
                        Decision::Answer(false)
                    }
                })
            })
            .await?;
        let applies = match settled {
            Settled::Appended(applies) | Settled::Answered(applies) => applies,
            Settled::KeyTaken => false,
        };
        if !applies {
            // Read the phase again from the store, not from this cache.
            checkout.invalidate();
        }
        Ok(applies)
    }
}
