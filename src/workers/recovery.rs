//! The recovery worker: finishes checkouts left half way (a crash, a lost
//! connection, a provider timeout), so that no buyer needs to retry for an
//! authorization to end in a capture with a booking, or cancelled; and looks
//! again at checkouts waiting on their buyer (3-D Secure), in pages, so a
//! lost webhook delays a completion by a pass at most and a hold that ended
//! meanwhile has its authorization cancelled.
//!
//! It runs once at start, before the service accepts requests, and then
//! periodically. Tests call [`Recovery::run_once`] directly.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use domain::ids::HoldId;
use futures::StreamExt;

use crate::command::checkout::{CheckoutError, CheckoutService, Recovered};
use crate::store::WaitingCheckout;

/// Default time between two runs (`BOOKING_RECOVERY_INTERVAL_SECONDS`). A
/// checkout left half way is found within this (plus its own payment
/// latency); a run does nothing when none is.
pub const RECOVERY_INTERVAL: Duration = Duration::from_secs(10);

/// Checkouts looked at per run; a larger backlog drains over several runs.
pub const CHECKOUTS_PER_RECOVERY_RUN: i64 = 500;

/// Checkouts waiting on their buyer looked at per run: each costs a read
/// at the provider, so a large waiting crowd is gone through in pages, one
/// page a pass, oldest first and round again.
pub const WAITING_PER_RECOVERY_RUN: i64 = 100;

/// Checkouts driven at once: each mostly waits on the payment provider, so
/// a crash that left hundreds half way is finished in a few provider round
/// trips, without flooding the provider or the connection pool.
pub const RECOVERY_CONCURRENCY: usize = 16;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryReport {
    pub completed: usize,
    pub refunded: usize,
    pub cancelled: usize,
    /// Authorizations cancelled because their hold was lost.
    pub voided: usize,
    /// Bookings undone because their authorization could not be captured.
    pub reversed: usize,
    pub closed: usize,
    /// Still waiting on their buyer.
    pub waiting: usize,
    /// Still waiting on the provider, or driven by a live request.
    pub pending: usize,
    pub failed: usize,
}

impl RecoveryReport {
    pub fn finished(&self) -> usize {
        self.completed + self.refunded + self.cancelled + self.voided + self.reversed + self.closed
    }
}

#[derive(Clone)]
pub struct Recovery {
    checkout: Arc<CheckoutService>,
    /// Where the next page of checkouts waiting on their buyer starts.
    waiting_after: Arc<Mutex<Option<WaitingCheckout>>>,
}

impl Recovery {
    pub fn new(checkout: Arc<CheckoutService>) -> Self {
        Self {
            checkout,
            waiting_after: Arc::default(),
        }
    }

    /// One pass: the checkouts the service must finish, then a page of
    /// those waiting on their buyer.
    pub async fn run_once(&self) -> Result<RecoveryReport, CheckoutError> {
        let mut report = RecoveryReport::default();
        let mut pending = self.checkout.pending(CHECKOUTS_PER_RECOVERY_RUN).await?;
        pending.extend(self.waiting_page().await?);
        let mut outcomes = futures::stream::iter(pending)
            .map(|hold_id| async move { (hold_id, self.checkout.recover(hold_id).await) })
            .buffer_unordered(RECOVERY_CONCURRENCY);
        while let Some((hold_id, outcome)) = outcomes.next().await {
            match outcome {
                Ok(Recovered::Completed) => report.completed += 1,
                Ok(Recovered::Refunded) => report.refunded += 1,
                Ok(Recovered::Cancelled) => report.cancelled += 1,
                Ok(Recovered::Voided) => report.voided += 1,
                Ok(Recovered::Reversed) => report.reversed += 1,
                Ok(Recovered::Waiting) => report.waiting += 1,
                Ok(Recovered::Closed) => report.closed += 1,
                Ok(Recovered::Busy | Recovered::Pending) => report.pending += 1,
                Err(error) => {
                    report.failed += 1;
                    tracing::error!(%hold_id, %error, "recovery of a checkout failed");
                }
            }
        }
        if report.finished() + report.failed > 0 {
            tracing::info!(?report, "recovery pass");
        }
        Ok(report)
    }

    /// The next page of checkouts waiting on their buyer; after the last
    /// page, the first again.
    async fn waiting_page(&self) -> Result<Vec<HoldId>, CheckoutError> {
        let after = self
            .waiting_after
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let page = self
            .checkout
            .waiting(after.as_ref(), WAITING_PER_RECOVERY_RUN)
            .await?;
        let next = if (page.len() as i64) < WAITING_PER_RECOVERY_RUN {
            None
        } else {
            page.last().cloned()
        };
        *self.waiting_after.lock().unwrap_or_else(|p| p.into_inner()) = next;
        Ok(page.into_iter().map(|w| w.hold_id).collect())
    }
}
