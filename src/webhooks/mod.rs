//! Webhooks driven from the event log.
//!
//! The log is the outbox: a delivery can never disagree with the sale.
//!
//! - [`endpoints`]: registering, listing and deleting endpoints (admin), a
//!   `whsec_` secret each, and the deliveries list and manual retry.
//! - [`dispatch`]: the dispatcher. It reads the log show by show from its
//!   own checkpoint (`webhooks`, a position per show: each show in its
//!   commit order), turns events into deliveries for each endpoint that asked
//!   for them ([`payload`]) and records them **in the transaction that moves
//!   its checkpoint**, before any is sent: a crash anywhere sends again
//!   rather than never.
//! - [`sender`]: claims due deliveries per endpoint (a lease; `FOR UPDATE
//!   SKIP LOCKED` on PostgreSQL), signs them the Standard Webhooks way,
//!   sends them with a bounded number in flight per endpoint, and records
//!   each attempt's outcome: delivered, retried later with exponential
//!   backoff and jitter, or failed once the retry window is over.
//!
//! Delivery is at least once: a receiver dedupes on `webhook-id`, which is
//! derived from the event's position and the endpoint.

pub mod dispatch;
pub mod endpoints;
pub mod payload;
pub mod sender;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Default `BOOKING_WEBHOOK_INTERVAL_MS` (`app::Workers::webhooks`): how often the dispatcher reads
/// the log and the sender looks for due deliveries. It bounds the lag
/// between a booking and its first delivery attempt.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(200);

/// Default `BOOKING_WEBHOOK_TIMEOUT_MS`: docs/api.md, "Any 2xx within 10 s
/// is delivered".
pub const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Default `BOOKING_WEBHOOK_BACKOFF_MS`: the wait after a first failed
/// attempt; each later one doubles, up to the maximum.
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_secs(30);

/// Default `BOOKING_WEBHOOK_MAX_BACKOFF_MS`: never more than an hour
/// between two attempts, so an endpoint back after an outage hears within
/// the hour.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(3_600);

/// Default `BOOKING_WEBHOOK_RETRY_SECONDS`: the retry window. Attempts stop
/// once the next would fall past it, so with a one-hour maximum gap the
/// last attempt comes between 24 and 25 hours after the first: "at least
/// 24 h" (docs/api.md).
pub const DEFAULT_RETRY_WINDOW: Duration = Duration::from_secs(25 * 3_600);

/// Deliveries in flight per endpoint at most: a slow endpoint holds only
/// its own slots, never another endpoint's.
pub const MAX_IN_FLIGHT_PER_ENDPOINT: usize = 8;

/// How often old delivered and failed deliveries are pruned
/// (`sender::DELIVERY_RETENTION`).
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(600);

/// How deliveries are retried and timed; tests shorten every figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookSettings {
    pub attempt_timeout: Duration,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub retry_window: Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            attempt_timeout: DEFAULT_ATTEMPT_TIMEOUT,
            initial_backoff: DEFAULT_INITIAL_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            retry_window: DEFAULT_RETRY_WINDOW,
        }
    }
}

impl WebhookSettings {
    /// How long a claim lasts: longer than any attempt (which the client
    /// cuts at the attempt timeout), so a claim never ends while its holder
    /// still sends; after a crash its deliveries are claimable again then.
    pub fn lease(&self) -> Duration {
        self.attempt_timeout * 2 + Duration::from_secs(5)
    }
}

/// The dispatcher and the sender, run together in the background.
#[derive(Clone)]
pub struct Webhooks {
    pub dispatcher: dispatch::Dispatcher,
    pub sender: Arc<sender::Sender>,
}

impl Webhooks {
    /// Every `interval` until `stop`: dispatcher passes and sender passes,
    /// each on a ticker of its own. A dispatcher pass drains the log until
    /// it has caught up, which under a crowd can take as long as the crowd
    /// lasts; the sender does not wait for it (measured: with the two in
    /// one loop, every delivery of a 10 s onsale left after it ended). The
    /// sender's attempts run on beside its loop; at `stop` those in flight
    /// are dropped, and their leases let another pass (here after a
    /// restart, or another instance) send them again.
    pub async fn run_until(self, interval: Duration, stop: impl Future<Output = ()>) {
        let (stopped, _) = tokio::sync::watch::channel(false);
        let dispatching = {
            let mut stopped = stopped.subscribe();
            let dispatcher = self.dispatcher.clone();
            async move {
                let mut ticker = tokio::time::interval(interval);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = stopped.changed() => break,
                        _ = ticker.tick() => {
                            if let Err(error) = dispatcher.run_once().await {
                                tracing::warn!(worker = "webhook dispatcher", %error, "pass failed; retrying next interval");
                            }
                        }
                    }
                }
            }
        };
        let sending = {
            let mut stopped = stopped.subscribe();
            let sender = self.sender.clone();
            async move {
                let mut ticker = tokio::time::interval(interval);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let mut attempts = tokio::task::JoinSet::new();
                let mut pruned_at: Option<std::time::Instant> = None;
                loop {
                    tokio::select! {
                        _ = stopped.changed() => break,
                        _ = ticker.tick() => {
                            if let Err(error) = sender.run_once(&mut attempts).await {
                                tracing::warn!(worker = "webhook sender", %error, "pass failed; retrying next interval");
                            }
                            if pruned_at.is_none_or(|at| at.elapsed() >= PRUNE_INTERVAL) {
                                pruned_at = Some(std::time::Instant::now());
                                if let Err(error) = sender.prune().await {
                                    tracing::warn!(worker = "webhook sender", %error, "pruning deliveries failed");
                                }
                            }
                            // Reap finished attempts so the set stays small.
                            while attempts.try_join_next().is_some() {}
                        }
                    }
                }
                attempts.shutdown().await;
            }
        };
        let stopping = async move {
            stop.await;
            let _ = stopped.send(true);
        };
        tokio::join!(dispatching, sending, stopping);
    }
}
