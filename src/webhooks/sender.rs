//! The sender: claims due deliveries, signs and sends them, and records
//! each attempt's outcome.
//!
//! - **Claims.** A pass claims, per endpoint, as many due deliveries as the
//!   endpoint has free slots ([`MAX_IN_FLIGHT_PER_ENDPOINT`]), under this
//!   instance's token and a lease longer than any attempt. Another instance
//!   skips them until the lease ends; only the holder of the claim writes
//!   the outcome. A crash leaves the claim to run out, then the delivery is
//!   claimed and sent again (at least once).
//! - **Isolation.** Each endpoint has its own slots, and every attempt runs
//!   in its own task: a slow or dead endpoint fills its own slots and never
//!   delays another's deliveries.
//! - **Attempts.** `POST` of the recorded body with the Standard Webhooks
//!   headers, signed at the attempt's time. Any 2xx within the attempt
//!   timeout is delivered; redirects are not followed (a 3xx is a failed
//!   attempt). Otherwise the next attempt comes after an exponential backoff
//!   with jitter, and once it would fall past the retry window the delivery
//!   is failed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use projections::time::to_micros;
use rand::Rng;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::{WebhookSettings, MAX_IN_FLIGHT_PER_ENDPOINT};
use crate::clock::Clock;
use crate::store::{
    AttemptRecord, AttemptVerdict, ClaimedDelivery, EndpointId, EndpointRow, StoreError,
    WebhookOutbox,
};

/// How long a delivered or failed delivery stays listed (and can be
/// retried by hand) before it is pruned: a month of history, while the
/// table stays bounded by a month of traffic.
pub const DELIVERY_RETENTION: Duration = Duration::from_secs(30 * 24 * 3_600);

/// Deliveries deleted per statement, and statements per prune at most: a
/// bounded delete holds the writer only briefly.
pub const DELIVERIES_PER_PRUNE: i64 = 1_000;
pub const PRUNES_PER_PASS: usize = 10;

/// Characters of an attempt's error kept for the deliveries list.
pub const MAX_ERROR_CHARS: usize = 300;

/// The jitter: each wait is between this fraction and all of its
/// exponential value. Below one half the doubling could not be seen any
/// more; at 0.8 each wait is still longer than the one before.
pub const JITTER_LOW: f64 = 0.8;

/// The wait after the `attempts`-th failed attempt of a window (1 for the
/// first): `initial * 2^(attempts - 1)`, at most `max`, times a random
/// factor in `JITTER_LOW..=1`.
pub fn backoff(settings: &WebhookSettings, attempts: u32, jitter: f64) -> Duration {
    let doublings = attempts.saturating_sub(1).min(30);
    let exponential = settings
        .initial_backoff
        .saturating_mul(1u32 << doublings)
        .min(settings.max_backoff);
    exponential.mul_f64(jitter.clamp(JITTER_LOW, 1.0))
}

/// What follows a failed attempt made at `now_us`, the `attempts`-th of a
/// window that began at `retry_from_us`: another attempt, or failed if it
/// would fall past the window.
pub fn after_failure(
    settings: &WebhookSettings,
    attempts: u32,
    retry_from_us: i64,
    now_us: i64,
    jitter: f64,
) -> AttemptVerdict {
    let wait_us =
        i64::try_from(backoff(settings, attempts, jitter).as_micros()).unwrap_or(i64::MAX);
    let window_us = i64::try_from(settings.retry_window.as_micros()).unwrap_or(i64::MAX);
    let next_us = now_us.saturating_add(wait_us);
    if next_us > retry_from_us.saturating_add(window_us) {
        AttemptVerdict::Failed
    } else {
        AttemptVerdict::RetryAt(next_us)
    }
}

/// How one attempt went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempted {
    /// The receiver answered this status.
    Answered(u16),
    /// No answer: timed out, refused, reset; or it could not be signed.
    NoAnswer(String),
}

pub struct Sender {
    outbox: WebhookOutbox,
    clock: Arc<dyn Clock>,
    client: reqwest::Client,
    settings: WebhookSettings,
    /// This instance's claims carry it; a new one per process.
    token: String,
    /// Free slots per endpoint.
    slots: Mutex<HashMap<EndpointId, Arc<Semaphore>>>,
}

impl Sender {
    pub fn new(
        outbox: WebhookOutbox,
        clock: Arc<dyn Clock>,
        settings: WebhookSettings,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(settings.attempt_timeout)
            .connect_timeout(settings.attempt_timeout)
            .user_agent(concat!("booking-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            outbox,
            clock,
            client,
            settings,
            token: uuid::Uuid::new_v4().to_string(),
            slots: Mutex::new(HashMap::new()),
        })
    }

    fn slots_of(&self, endpoint: EndpointId) -> Arc<Semaphore> {
        // A poisoned map is still a map of semaphores.
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .entry(endpoint)
            .or_insert_with(|| Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_ENDPOINT)))
            .clone()
    }

    /// One pass: claims what is due for each endpoint with free slots and
    /// starts its attempts in `attempts` (they run on after the pass).
    /// Returns how many were started.
    pub async fn run_once(
        self: &Arc<Self>,
        attempts: &mut JoinSet<()>,
    ) -> Result<usize, StoreError> {
        let now = self.clock.now();
        let now_us = to_micros(now);
        self.report_oldest_pending(now_us).await?;
        let due = self.outbox.endpoints_with_due_deliveries(now_us).await?;
        if due.is_empty() {
            return Ok(0);
        }
        let endpoints: HashMap<EndpointId, Arc<EndpointRow>> = self
            .outbox
            .webhook_endpoints()
            .await?
            .into_iter()
            .map(|e| (e.endpoint_id, Arc::new(e)))
            .collect();
        let mut started = 0;
        for endpoint_id in due {
            // A delivery of an endpoint deleted meanwhile is never sent.
            if let Some(endpoint) = endpoints.get(&endpoint_id) {
                started += self.start_attempts(endpoint, now_us, attempts).await?;
            }
        }
        Ok(started)
    }

    /// Claims as many of `endpoint`'s due deliveries as it has free slots
    /// and starts their attempts; returns how many.
    async fn start_attempts(
        self: &Arc<Self>,
        endpoint: &Arc<EndpointRow>,
        now_us: i64,
        attempts: &mut JoinSet<()>,
    ) -> Result<usize, StoreError> {
        let slots = self.slots_of(endpoint.endpoint_id);
        let free = slots.available_permits();
        if free == 0 {
            return Ok(0);
        }
        let lease_us = i64::try_from(self.settings.lease().as_micros()).unwrap_or(i64::MAX);
        let claimed = self
            .outbox
            .claim_webhook_deliveries(
                endpoint.endpoint_id,
                now_us,
                now_us.saturating_add(lease_us),
                &self.token,
                free as i64,
            )
            .await?;
        let mut started = 0;
        for delivery in claimed {
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                // Not reachable: no more were claimed than were free, and
                // only this loop takes slots. Its lease runs out, and it
                // is claimed again then.
                break;
            };
            let sender = self.clone();
            let endpoint = endpoint.clone();
            // The slot goes on with the endpoint's next due delivery, so
            // a backlog drains at the endpoint's pace, not the pass's.
            attempts.spawn(async move {
                let mut next = Some(delivery);
                while let Some(delivery) = next.take() {
                    sender.attempt(&endpoint, delivery).await;
                    next = sender.claim_next(endpoint.endpoint_id).await;
                }
                drop(permit);
            });
            started += 1;
        }
        Ok(started)
    }

    /// Deletes delivered and failed deliveries older than
    /// [`DELIVERY_RETENTION`], in bounded statements; returns how many.
    pub async fn prune(&self) -> Result<u64, StoreError> {
        let retention =
            chrono::Duration::from_std(DELIVERY_RETENTION).unwrap_or(chrono::Duration::MAX);
        let Some(cutoff) = self.clock.now().checked_sub_signed(retention) else {
            return Ok(0);
        };
        let cutoff_us = to_micros(cutoff);
        let mut pruned = 0;
        for _ in 0..PRUNES_PER_PASS {
            let deleted = self
                .outbox
                .prune_webhook_deliveries(cutoff_us, DELIVERIES_PER_PRUNE)
                .await?;
            pruned += deleted;
            if deleted < DELIVERIES_PER_PRUNE as u64 {
                break;
            }
        }
        if pruned > 0 {
            tracing::info!(pruned, "webhook deliveries past their retention pruned");
        }
        Ok(pruned)
    }

    /// One more due delivery of `endpoint`, claimed for this instance.
    async fn claim_next(&self, endpoint: EndpointId) -> Option<ClaimedDelivery> {
        let now_us = to_micros(self.clock.now());
        let lease_us = i64::try_from(self.settings.lease().as_micros()).unwrap_or(i64::MAX);
        match self
            .outbox
            .claim_webhook_deliveries(
                endpoint,
                now_us,
                now_us.saturating_add(lease_us),
                &self.token,
                1,
            )
            .await
        {
            Ok(mut claimed) => claimed.pop(),
            Err(error) => {
                tracing::warn!(endpoint_id = %endpoint, %error, "cannot claim the next webhook delivery");
                None
            }
        }
    }

    async fn report_oldest_pending(&self, now_us: i64) -> Result<(), StoreError> {
        let age_seconds = match self.outbox.oldest_pending_webhook_us().await? {
            Some(since_us) => (now_us.saturating_sub(since_us)).max(0) as f64 / 1e6,
            None => 0.0,
        };
        metrics::gauge!("webhook_oldest_pending_age_seconds").set(age_seconds);
        Ok(())
    }

    /// What an attempt's answer means: delivered, or when to try again (or
    /// not at all), with what to show of it.
    fn judge(
        &self,
        attempted: &Attempted,
        delivery: &ClaimedDelivery,
        now_us: i64,
    ) -> (AttemptVerdict, Option<i32>, Option<String>) {
        let attempts = u32::try_from(delivery.round_attempts.max(0))
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        match attempted {
            Attempted::Answered(status) if (200..300).contains(status) => {
                (AttemptVerdict::Delivered, Some(i32::from(*status)), None)
            }
            Attempted::Answered(status) => (
                after_failure(
                    &self.settings,
                    attempts,
                    delivery.retry_from_us,
                    now_us,
                    self.jitter(),
                ),
                Some(i32::from(*status)),
                Some(format!("the receiver answered {status}")),
            ),
            Attempted::NoAnswer(why) => (
                after_failure(
                    &self.settings,
                    attempts,
                    delivery.retry_from_us,
                    now_us,
                    self.jitter(),
                ),
                None,
                Some(why.chars().take(MAX_ERROR_CHARS).collect()),
            ),
        }
    }

    /// One attempt of a claimed delivery, and its outcome recorded.
    async fn attempt(&self, endpoint: &EndpointRow, delivery: ClaimedDelivery) {
        let started = Instant::now();
        let attempted = self.send(endpoint, &delivery).await;
        metrics::histogram!("webhook_attempt_duration_seconds")
            .record(started.elapsed().as_secs_f64());
        let now_us = to_micros(self.clock.now());
        let (verdict, last_status, last_error) = self.judge(&attempted, &delivery, now_us);
        let outcome = match verdict {
            AttemptVerdict::Delivered => "delivered",
            AttemptVerdict::RetryAt(_) => "retry",
            AttemptVerdict::Failed => "failed",
        };
        metrics::counter!("webhook_deliveries_total", "outcome" => outcome).increment(1);
        let record = AttemptRecord {
            verdict,
            last_status,
            last_error,
            at_us: now_us,
        };
        match self
            .outbox
            .finish_webhook_attempt(delivery.delivery_id, &self.token, &record)
            .await
        {
            Ok(true) => {
                tracing::debug!(webhook_id = %delivery.webhook_id, outcome, "webhook attempt")
            }
            // Retried by hand or deleted meanwhile: that decision stands.
            Ok(false) => {}
            // Not written: the lease runs out and the delivery is sent again.
            Err(error) => {
                tracing::warn!(webhook_id = %delivery.webhook_id, %error, "webhook attempt not recorded")
            }
        }
        if outcome == "failed" {
            tracing::warn!(webhook_id = %delivery.webhook_id, endpoint_id = %endpoint.endpoint_id, "webhook delivery failed: retry window over");
        }
    }

    fn jitter(&self) -> f64 {
        rand::thread_rng().gen_range(JITTER_LOW..=1.0)
    }

    async fn send(&self, endpoint: &EndpointRow, delivery: &ClaimedDelivery) -> Attempted {
        let timestamp = self.clock.now().timestamp();
        let signature = match standardwebhooks::Webhook::new(&endpoint.secret)
            .and_then(|hook| hook.sign(&delivery.webhook_id, timestamp, delivery.body.as_bytes()))
        {
            Ok(signature) => signature,
            Err(error) => return Attempted::NoAnswer(format!("cannot sign: {error}")),
        };
        let request = self
            .client
            .post(&endpoint.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(standardwebhooks::HEADER_WEBHOOK_ID, &delivery.webhook_id)
            .header(
                standardwebhooks::HEADER_WEBHOOK_TIMESTAMP,
                timestamp.to_string(),
            )
            .header(standardwebhooks::HEADER_WEBHOOK_SIGNATURE, signature)
            .body(delivery.body.clone());
        match request.send().await {
            Ok(response) => Attempted::Answered(response.status().as_u16()),
            Err(error) if error.is_timeout() => Attempted::NoAnswer(format!(
                "no answer within {} ms",
                self.settings.attempt_timeout.as_millis()
            )),
            Err(error) if error.is_connect() => Attempted::NoAnswer(format!(
                "cannot connect: {}",
                std::error::Error::source(&error)
                    .map_or_else(|| error.to_string(), |s| s.to_string())
            )),
            Err(error) => Attempted::NoAnswer(error.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> WebhookSettings {
        WebhookSettings {
            initial_backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(3_600),
            retry_window: Duration::from_secs(25 * 3_600),
            ..WebhookSettings::default()
        }
    }

    #[test]
    fn the_backoff_doubles_up_to_the_maximum() {
        let s = settings();
        let waits: Vec<u64> = (1..=9).map(|n| backoff(&s, n, 1.0).as_secs()).collect();
        assert_eq!(waits, vec![30, 60, 120, 240, 480, 960, 1_920, 3_600, 3_600]);
        assert_eq!(backoff(&s, 1_000, 1.0), s.max_backoff);
    }

    #[test]
    fn with_jitter_each_wait_is_still_longer_than_the_one_before() {
        let s = settings();
        for n in 1..7 {
            let shortest_next = backoff(&s, n + 1, JITTER_LOW);
            let longest_this = backoff(&s, n, 1.0);
            assert!(shortest_next > longest_this, "attempt {n}");
        }
        assert_eq!(backoff(&s, 1, 0.0), backoff(&s, 1, JITTER_LOW));
    }

    #[test]
    fn retries_go_on_for_at_least_24_hours_by_default_then_fail() {
        let s = WebhookSettings::default();
        let mut now_us = 0i64;
        let mut attempts = 0;
        loop {
            attempts += 1;
            match after_failure(&s, attempts, 0, now_us, 1.0) {
                AttemptVerdict::RetryAt(at) => now_us = at,
                AttemptVerdict::Failed => break,
                AttemptVerdict::Delivered => unreachable!(),
            }
        }
        let last_attempt_hours = now_us as f64 / 3.6e9;
        assert!(last_attempt_hours >= 24.0, "{last_attempt_hours} h");
        assert!(last_attempt_hours <= 25.0, "{last_attempt_hours} h");
        assert!(attempts > 20, "{attempts} attempts");
    }
}
