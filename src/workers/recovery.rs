//! The recovery worker: finishes checkouts left between charge and
//! completion (a crash, a lost connection, a provider timeout), so that no
//! charged buyer needs to retry to end with a booking or a refund.
//!
//! It runs once at start, before the service accepts requests, and then
//! periodically. Tests call [`Recovery::run_once`] directly.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use crate::command::checkout::{CheckoutError, CheckoutService, Recovered};

/// Default time between two runs (`BOOKING_RECOVERY_INTERVAL_SECONDS`). A
/// checkout left half way is found within this (plus its own payment
/// latency); a run does nothing when none is.
pub const RECOVERY_INTERVAL: Duration = Duration::from_secs(10);

/// Checkouts looked at per run; a larger backlog drains over several runs.
pub const CHECKOUTS_PER_RECOVERY_RUN: i64 = 500;

/// Checkouts driven at once: each mostly waits on the payment provider, so
/// a crash that left hundreds half way is finished in a few provider round
/// trips, without flooding the provider or the connection pool.
pub const RECOVERY_CONCURRENCY: usize = 16;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryReport {
    pub completed: usize,
    pub refunded: usize,
    pub cancelled: usize,
    pub closed: usize,
    /// Still waiting on the provider, or driven by a live request.
    pub pending: usize,
    pub failed: usize,
}

impl RecoveryReport {
    pub fn finished(&self) -> usize {
        self.completed + self.refunded + self.cancelled + self.closed
    }
}

#[derive(Clone)]
pub struct Recovery {
    checkout: Arc<CheckoutService>,
}

impl Recovery {
    pub fn new(checkout: Arc<CheckoutService>) -> Self {
        Self { checkout }
    }

    /// One pass over the checkouts waiting on the provider.
    pub async fn run_once(&self) -> Result<RecoveryReport, CheckoutError> {
        let mut report = RecoveryReport::default();
        let pending = self.checkout.pending(CHECKOUTS_PER_RECOVERY_RUN).await?;
        let mut outcomes = futures::stream::iter(pending)
            .map(|hold_id| async move { (hold_id, self.checkout.recover(hold_id).await) })
            .buffer_unordered(RECOVERY_CONCURRENCY);
        while let Some((hold_id, outcome)) = outcomes.next().await {
            match outcome {
                Ok(Recovered::Completed) => report.completed += 1,
                Ok(Recovered::Refunded) => report.refunded += 1,
                Ok(Recovered::Cancelled) => report.cancelled += 1,
                Ok(Recovered::Closed) => report.closed += 1,
                Ok(Recovered::Busy | Recovered::Pending) => report.pending += 1,
                Err(error) => {
                    report.failed += 1;
                    tracing::error!(%hold_id, %error, "recovery of a checkout failed");
                }
            }
        }
        if report != RecoveryReport::default() {
            tracing::info!(?report, "recovery pass");
        }
        Ok(report)
    }
}
