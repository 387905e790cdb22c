//! Hold-duration advice, from the event log of a show.
//!
//! Too short a TTL and genuine buyers lose their seats mid-checkout; too long
//! and abandoned holds keep inventory away from other buyers when it is most
//! wanted. The log has both sides: when each hold was placed, when (if) it
//! was bought, how long each payment took, and which holds just expired.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use cqrs_es::Aggregate;
use domain::checkout::{Checkout, CheckoutEvent};
use domain::ids::{HoldId, ShowId};
use domain::limits::{MAX_HOLD_TTL_SECONDS, MIN_HOLD_TTL_SECONDS};
use domain::pool::{PoolEvent, PoolShard};
use domain::seat::{has_expired, Seat, SeatEvent};
use projections::time::from_micros;
use serde::Serialize;

use crate::catalog::CatalogEntry;
use crate::store::{EventLog, LogEvent, LogFilter, StoreError};

/// Completed checkouts needed before a recommendation differs from the
/// current TTL: fewer say too little about the slow tail.
pub const MIN_CHECKOUTS_FOR_ADVICE: usize = 20;

/// The recommendation covers the p99 hold-to-purchase time plus this share
/// of it: buyers a little slower than the slowest 1% so far still finish.
pub const RECOMMENDATION_MARGIN: f64 = 0.25;

/// Recommendations are rounded up to a multiple of this many seconds.
pub const RECOMMENDATION_STEP_SECONDS: u32 = 30;

/// TTLs the advice prices (plus the show's own).
pub const CANDIDATE_TTLS_SECONDS: &[u32] =
    &[60, 120, 180, 300, 480, 600, 900, 1200, 1800, 3600, 7200];

/// Events read per page while gathering.
const PAGE: i64 = 10_000;

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct Distribution {
    pub samples: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Distribution {
    /// Nearest-rank percentiles of `values` (seconds).
    fn of(mut values: Vec<f64>) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let rank =
            |p: f64| values[((p * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
        Some(Self {
            samples: values.len(),
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            max: values[values.len() - 1],
        })
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct Candidate {
    pub ttl_seconds: u32,
    /// Share of the completed checkouts that took longer than this TTL.
    pub cut_off_share: f64,
    pub cut_off_checkouts: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct TtlAdvice {
    pub show_id: String,
    pub current_ttl_seconds: u32,
    pub completed_checkouts: usize,
    pub hold_to_purchase_seconds: Option<Distribution>,
    pub payment_latency_seconds: Option<Distribution>,
    pub candidates: Vec<Candidate>,
    /// Holds that ran to their expiry (neither bought nor released).
    pub expired_holds: usize,
    /// Holds extended at least once (`POST /v1/holds/{id}/extend`), and
    /// their share of all holds placed: many extensions say the TTL is short
    /// for how buyers check out.
    pub extended_holds: usize,
    pub extended_share: f64,
    /// Seat (or place) minutes those holds kept from other buyers at the current TTL.
    pub unavailable_seat_minutes_at_current_ttl: f64,
    pub recommended_ttl_seconds: u32,
    pub margin: f64,
    pub reasoning: String,
}

#[derive(Default)]
struct HoldFacts {
    placed_at: Option<DateTime<Utc>>,
    expires_at: Option<DateTime<Utc>>,
    units: u32,
    extended: bool,
    released: bool,
    converted: bool,
    requested_at: Option<DateTime<Utc>>,
    payment_seconds: Option<f64>,
    completed_at: Option<DateTime<Utc>>,
}

impl HoldFacts {
    /// A placement of `units` (seats, or places of a pool) recorded at `at`;
    /// the hold was placed at its first.
    fn place(&mut self, at: DateTime<Utc>, expires_at: DateTime<Utc>, units: u32) {
        self.placed_at.get_or_insert(at);
        self.expires_at = Some(expires_at);
        self.units += units;
    }

    /// An extension: the hold now expires at `expires_at` (one event per
    /// unit, all at the same instant).
    fn extend_to(&mut self, expires_at: DateTime<Utc>) {
        self.extended = true;
        if self.expires_at.is_none_or(|at| at < expires_at) {
            self.expires_at = Some(expires_at);
        }
    }

    /// A checkout's event on this hold, recorded at `at`.
    fn add_checkout_event(&mut self, event: CheckoutEvent, at: DateTime<Utc>) {
        match event {
            CheckoutEvent::PurchaseRequested { .. } => self.requested_at = Some(at),
            CheckoutEvent::PaymentCaptured { .. } => {
                self.payment_seconds = self.requested_at.map(|requested| seconds(requested, at));
            }
            CheckoutEvent::CheckoutCompleted { .. } => self.completed_at = Some(at),
            _ => {}
        }
    }
}

fn seconds(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_microseconds().unwrap_or(0) as f64 / 1e6
}

/// What the log says about a show's holds, folded hold by hold.
async fn read_hold_facts(
    log: &EventLog,
    show_id: &ShowId,
) -> Result<HashMap<HoldId, HoldFacts>, StoreError> {
    let mut holds: HashMap<HoldId, HoldFacts> = HashMap::new();
    let mut after = 0;
    loop {
        let events = log
            .read_log(LogFilter::Show(show_id.as_str()), after, PAGE)
            .await?;
        let Some(last) = events.last() else { break };
        after = last.position;
        for event in &events {
            add_event(&mut holds, event)?;
        }
    }
    Ok(holds)
}

/// Adds one event of the log to the facts of its hold.
fn add_event(holds: &mut HashMap<HoldId, HoldFacts>, event: &LogEvent) -> Result<(), StoreError> {
    let Some(at) = from_micros(event.recorded_at_us) else {
        return Ok(());
    };
    let corrupt =
        |e: serde_json::Error| StoreError::Corrupt(format!("event {}: {e}", event.position));
    match event.aggregate_type.as_str() {
        kind if kind == Seat::TYPE => {
            add_seat_event(
                holds,
                serde_json::from_str(&event.payload).map_err(corrupt)?,
                at,
            );
        }
        kind if kind == PoolShard::TYPE => {
            add_pool_event(
                holds,
                serde_json::from_str(&event.payload).map_err(corrupt)?,
                at,
            );
        }
        kind if kind == Checkout::TYPE => {
            let Ok(hold_id) = event.aggregate_id.parse().map(HoldId) else {
                return Ok(());
            };
            let facts = holds.entry(hold_id).or_default();
            facts.add_checkout_event(serde_json::from_str(&event.payload).map_err(corrupt)?, at);
        }
        _ => {}
    }
    Ok(())
}

/// A seat's event, recorded at `at`, on the hold it names.
fn add_seat_event(holds: &mut HashMap<HoldId, HoldFacts>, event: SeatEvent, at: DateTime<Utc>) {
    match event {
        SeatEvent::HoldPlaced {
            hold_id,
            expires_at,
            ..
        } => holds.entry(hold_id).or_default().place(at, expires_at, 1),
        SeatEvent::HoldReleased { hold_id } => holds.entry(hold_id).or_default().released = true,
        SeatEvent::HoldConverted { hold_id, .. } => {
            holds.entry(hold_id).or_default().converted = true
        }
        SeatEvent::HoldExtended {
            hold_id,
            expires_at,
        } => holds.entry(hold_id).or_default().extend_to(expires_at),
        SeatEvent::HoldExpired { .. }
        | SeatEvent::BookingCancelled { .. }
        | SeatEvent::SeatAllocated { .. }
        | SeatEvent::SeatDeallocated { .. }
        | SeatEvent::SeatPassed => {}
    }
}

/// A pool shard's event, recorded at `at`, on the hold it names.
fn add_pool_event(holds: &mut HashMap<HoldId, HoldFacts>, event: PoolEvent, at: DateTime<Utc>) {
    match event {
        PoolEvent::PoolHoldPlaced {
            hold_id,
            quantity,
            expires_at,
            ..
        } => holds
            .entry(hold_id)
            .or_default()
            .place(at, expires_at, quantity),
        PoolEvent::PoolHoldReleased { hold_id } => {
            holds.entry(hold_id).or_default().released = true
        }
        PoolEvent::PoolHoldConverted { hold_id, .. } => {
            holds.entry(hold_id).or_default().converted = true
        }
        PoolEvent::PoolHoldExtended {
            hold_id,
            expires_at,
        } => holds.entry(hold_id).or_default().extend_to(expires_at),
        PoolEvent::PoolHoldExpired { .. }
        | PoolEvent::PoolBookingCancelled { .. }
        | PoolEvent::PoolPlacesReturned { .. }
        | PoolEvent::PoolPlacesAllocated { .. }
        | PoolEvent::PoolPlacesDeallocated { .. }
        | PoolEvent::PoolPlacesPassed { .. } => {}
    }
}

/// How long each completed checkout took from hold to purchase, and each
/// payment from request to capture (seconds).
fn durations(holds: &HashMap<HoldId, HoldFacts>) -> (Vec<f64>, Vec<f64>) {
    let to_purchase = holds
        .values()
        .filter_map(|h| Some(seconds(h.placed_at?, h.completed_at?)))
        .collect();
    let payments = holds.values().filter_map(|h| h.payment_seconds).collect();
    (to_purchase, payments)
}

/// Holds that ran to their expiry by `now` (neither bought nor released).
fn expired_holds(holds: &HashMap<HoldId, HoldFacts>, now: DateTime<Utc>) -> Vec<&HoldFacts> {
    holds
        .values()
        .filter(|h| {
            !h.released && !h.converted && h.expires_at.is_some_and(|at| has_expired(at, now))
        })
        .collect()
}

/// What each candidate TTL (and the current one) would have cut off.
fn candidates(to_purchase: &[f64], current: u32) -> Vec<Candidate> {
    let mut ttls: Vec<u32> = CANDIDATE_TTLS_SECONDS.to_vec();
    ttls.push(current);
    ttls.sort_unstable();
    ttls.dedup();
    ttls.into_iter()
        .map(|ttl| {
            let cut = to_purchase.iter().filter(|s| **s > f64::from(ttl)).count();
            Candidate {
                ttl_seconds: ttl,
                cut_off_share: if to_purchase.is_empty() {
                    0.0
                } else {
                    cut as f64 / to_purchase.len() as f64
                },
                cut_off_checkouts: cut,
            }
        })
        .collect()
}

/// The recommended TTL and why: the p99 plus the margin, once there are
/// enough completed checkouts; the current TTL before.
fn recommendation(
    hold_to_purchase: Option<&Distribution>,
    completed: usize,
    current: u32,
) -> (u32, String) {
    match hold_to_purchase {
        Some(d) if completed >= MIN_CHECKOUTS_FOR_ADVICE => {
            let wanted = d.p99 * (1.0 + RECOMMENDATION_MARGIN);
            let step = f64::from(RECOMMENDATION_STEP_SECONDS);
            let rounded = ((wanted / step).ceil() * step) as u32;
            let ttl = rounded.clamp(MIN_HOLD_TTL_SECONDS, MAX_HOLD_TTL_SECONDS);
            (
                ttl,
                format!(
                    "p99 hold-to-purchase is {:.1} s over {completed} completed checkouts; \
                     +{:.0}% margin is {wanted:.1} s, rounded up to {RECOMMENDATION_STEP_SECONDS} s: {ttl} s",
                    d.p99,
                    RECOMMENDATION_MARGIN * 100.0
                ),
            )
        }
        _ => (
            current,
            format!(
                "only {completed} completed checkouts (fewer than {MIN_CHECKOUTS_FOR_ADVICE}): keep the current TTL"
            ),
        ),
    }
}

pub async fn advise(
    log: &EventLog,
    entry: &CatalogEntry,
    now: DateTime<Utc>,
) -> Result<TtlAdvice, StoreError> {
    let show = &entry.show;
    let holds = read_hold_facts(log, &show.show_id).await?;
    let (to_purchase, payments) = durations(&holds);
    let expired = expired_holds(&holds, now);
    let current = show.hold_ttl_seconds;
    let unit_minutes: f64 =
        expired.iter().map(|h| f64::from(h.units)).sum::<f64>() * f64::from(current) / 60.0;
    let placed = holds.values().filter(|h| h.placed_at.is_some()).count();
    let extended_holds = holds
        .values()
        .filter(|h| h.extended && h.placed_at.is_some())
        .count();
    let extended_share = if placed == 0 {
        0.0
    } else {
        extended_holds as f64 / placed as f64
    };
    let candidates = candidates(&to_purchase, current);
    let completed = to_purchase.len();
    let hold_to_purchase = Distribution::of(to_purchase);
    let (recommended, reasoning) = recommendation(hold_to_purchase.as_ref(), completed, current);
    Ok(TtlAdvice {
        show_id: show.show_id.to_string(),
        current_ttl_seconds: current,
        completed_checkouts: completed,
        hold_to_purchase_seconds: hold_to_purchase,
        payment_latency_seconds: Distribution::of(payments),
        candidates,
        expired_holds: expired.len(),
        extended_holds,
        extended_share,
        unavailable_seat_minutes_at_current_ttl: unit_minutes,
        recommended_ttl_seconds: recommended,
        margin: RECOMMENDATION_MARGIN,
        reasoning,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let d = Distribution::of((1..=20).map(|n| f64::from(n) * 5.0).collect()).unwrap();
        assert_eq!(
            (d.samples, d.p50, d.p90, d.p99, d.max),
            (20, 50.0, 90.0, 100.0, 100.0)
        );
        assert!(Distribution::of(vec![]).is_none());
    }
}
