//! Per-instance rate limits (docs/api.md, "Rate limits"): how many requests
//! one buyer, or one client address without a token, may send per second
//! and at once. Who is asking, and what is exempt, is the HTTP edge's
//! business (`http/rate_limit.rs`); this module keeps the counts.
//!
//! Each limit is a keyed GCRA (`governor`): per key, one "theoretical
//! arrival time", so a key costs a few dozen bytes whatever its rate. The
//! limits run on the service's clock (`crate::clock`), so a test that moves
//! the clock forward also refills every bucket, without sleeping.
//!
//! Memory stays bounded however many buyers and addresses appear: every
//! `RETAIN_EVERY_CHECKS` checks, the keys whose bucket is back to full (no
//! request for the time the burst takes to refill, two seconds at the
//! defaults) are dropped. So at most the keys seen in the last refill time,
//! plus those of `RETAIN_EVERY_CHECKS` requests, are kept.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use domain::ids::BuyerId;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::DashMapStateStore;
use governor::Quota;

use crate::clock::Clock;

/// Default for `BOOKING_BUYER_RATE_PER_SECOND`: a person clicking through
/// a seat map and a checkout sends a few requests a second; a client
/// retrying on timeouts, a few more. Twenty a second is far above both and
/// far below what a script needs to crowd out the rest.
pub const DEFAULT_BUYER_RATE_PER_SECOND: u32 = 20;
/// Default for `BOOKING_BUYER_BURST`: a page that opens with a handful of
/// parallel reads (holds, bookings, queue) and a few retries at once.
pub const DEFAULT_BUYER_BURST: u32 = 40;
/// Default for `BOOKING_CLIENT_RATE_PER_SECOND`: one address can be many
/// people (an office, a carrier's NAT, a campus); ten times a buyer's rate.
pub const DEFAULT_CLIENT_RATE_PER_SECOND: u32 = 200;
/// Default for `BOOKING_CLIENT_BURST`: that crowd opening the seat map in
/// the same second, the moment an onsale starts.
pub const DEFAULT_CLIENT_BURST: u32 = 400;

/// How many checks pass between two sweeps of the keys whose bucket is
/// full again. A sweep walks every key kept (a few microseconds per
/// thousand), so it is not worth doing per request; between two sweeps at
/// most this many new keys (about 100 bytes each) can pile up, whatever
/// the rate or the number of addresses.
pub const RETAIN_EVERY_CHECKS: u64 = 4_096;

/// One limit: a sustained rate and the burst allowed at once. A zero in
/// either turns it off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub rate_per_second: u32,
    pub burst: u32,
}

impl Limit {
    pub const OFF: Limit = Limit {
        rate_per_second: 0,
        burst: 0,
    };

    /// The quota, or `None` when the limit is off.
    fn quota(self) -> Option<Quota> {
        let rate = NonZeroU32::new(self.rate_per_second)?;
        let burst = NonZeroU32::new(self.burst)?;
        Some(Quota::per_second(rate).allow_burst(burst))
    }
}

/// The two limits of an instance (`BOOKING_BUYER_*`, `BOOKING_CLIENT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    /// Per buyer (a verified token's `sub`).
    pub buyer: Limit,
    /// Per client address, for requests without a (valid) token.
    pub client: Limit,
}

impl RateLimits {
    /// Nothing limited: load tests from one address or as one buyer.
    pub const OFF: RateLimits = RateLimits {
        buyer: Limit::OFF,
        client: Limit::OFF,
    };
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            buyer: Limit {
                rate_per_second: DEFAULT_BUYER_RATE_PER_SECOND,
                burst: DEFAULT_BUYER_BURST,
            },
            client: Limit {
                rate_per_second: DEFAULT_CLIENT_RATE_PER_SECOND,
                burst: DEFAULT_CLIENT_BURST,
            },
        }
    }
}

/// Who a request is counted against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requester {
    Buyer(BuyerId),
    Client(IpAddr),
}

/// Which limit refused a request (the metric's label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    Buyer,
    Client,
}

impl LimitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Buyer => "buyer",
            LimitKind::Client => "client",
        }
    }
}

/// A request past its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub kind: LimitKind,
    /// When the next request would pass, in whole seconds (at least 1).
    pub retry_after_seconds: u64,
}

/// The service's clock as governor reads time: nanoseconds since the Unix
/// epoch. It is wall-clock time (the service has no other): should the
/// system clock step back, buckets refill that much later, nothing worse.
#[derive(Clone)]
struct ServiceTime(Arc<dyn Clock>);

impl governor::clock::Clock for ServiceTime {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        let micros = u64::try_from(self.0.now().timestamp_micros()).unwrap_or(0);
        Nanos::from(micros.saturating_mul(1_000))
    }
}

type Keyed<K> = governor::RateLimiter<K, DashMapStateStore<K>, ServiceTime, NoOpMiddleware<Nanos>>;

/// One bucket per key, or `None` when the limit is off.
fn keyed<K: std::hash::Hash + Eq + Clone>(limit: Limit, time: &ServiceTime) -> Option<Keyed<K>> {
    limit
        .quota()
        .map(|quota| Keyed::dashmap_with_clock(quota, time.clone()))
}

/// The counts of one instance: one bucket per buyer and per address.
pub struct RateLimiter {
    buyers: Option<Keyed<BuyerId>>,
    clients: Option<Keyed<IpAddr>>,
    time: ServiceTime,
    /// Checks since start, to sweep every `RETAIN_EVERY_CHECKS`.
    checks: AtomicU64,
}

impl RateLimiter {
    pub fn new(limits: RateLimits, clock: Arc<dyn Clock>) -> Self {
        let time = ServiceTime(clock);
        Self {
            buyers: keyed(limits.buyer, &time),
            clients: keyed(limits.client, &time),
            time,
            checks: AtomicU64::new(0),
        }
    }

    /// Counts one request of `requester`: `Ok` if it is within the limit
    /// (or the limit is off), else when to come back.
    pub fn check(&self, requester: &Requester) -> Result<(), Refused> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % RETAIN_EVERY_CHECKS
            == RETAIN_EVERY_CHECKS - 1
        {
            self.forget_full_buckets();
        }
        let (kind, outcome) = match requester {
            Requester::Buyer(buyer) => (
                LimitKind::Buyer,
                self.buyers.as_ref().map(|limiter| limiter.check_key(buyer)),
            ),
            Requester::Client(address) => (
                LimitKind::Client,
                self.clients
                    .as_ref()
                    .map(|limiter| limiter.check_key(address)),
            ),
        };
        match outcome {
            None | Some(Ok(())) => Ok(()),
            Some(Err(not_until)) => {
                let now = governor::clock::Clock::now(&self.time);
                let wait = not_until.wait_time_from(now);
                Err(Refused {
                    kind,
                    retry_after_seconds: whole_seconds_at_least_one(wait),
                })
            }
        }
    }

    /// Drops the keys whose bucket is full again (indistinguishable from a
    /// key never seen), and gives their memory back.
    pub fn forget_full_buckets(&self) {
        if let Some(buyers) = &self.buyers {
            buyers.retain_recent();
            buyers.shrink_to_fit();
        }
        if let Some(clients) = &self.clients {
            clients.retain_recent();
            clients.shrink_to_fit();
        }
    }

    /// Keys kept now, buyers and addresses together.
    pub fn keys_kept(&self) -> usize {
        self.buyers.as_ref().map_or(0, |l| l.len()) + self.clients.as_ref().map_or(0, |l| l.len())
    }
}

/// `Retry-After` is whole seconds; rounding down would send the client
/// back before its request can pass, and 0 would say "at once".
fn whole_seconds_at_least_one(wait: std::time::Duration) -> u64 {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    seconds.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};
    use std::sync::atomic::AtomicI64;
    use std::time::Duration;

    /// A clock that moves only when told: every count below is exact.
    #[derive(Default)]
    struct StoppedClock(AtomicI64);

    impl StoppedClock {
        fn advance(&self, by: Duration) {
            let micros = i64::try_from(by.as_micros()).expect("a short advance");
            self.0.fetch_add(micros, Ordering::SeqCst);
        }
    }

    impl Clock for StoppedClock {
        fn now(&self) -> DateTime<Utc> {
            // Some day in 2026, plus the advances.
            DateTime::from_timestamp_micros(1_780_000_000_000_000 + self.0.load(Ordering::SeqCst))
                .expect("in range")
        }
    }

    fn limiter(buyer: Limit, client: Limit) -> (RateLimiter, Arc<StoppedClock>) {
        let clock = Arc::new(StoppedClock::default());
        (
            RateLimiter::new(RateLimits { buyer, client }, clock.clone()),
            clock,
        )
    }

    fn buyer(n: usize) -> Requester {
        Requester::Buyer(BuyerId::parse(&format!("buyer-{n}")).expect("buyer id"))
    }

    const TEN_PER_SECOND_FIVE_AT_ONCE: Limit = Limit {
        rate_per_second: 10,
        burst: 5,
    };

    #[test]
    fn a_burst_passes_and_the_next_request_is_refused_until_the_clock_moves() {
        let (limiter, clock) = limiter(TEN_PER_SECOND_FIVE_AT_ONCE, Limit::OFF);
        for _ in 0..5 {
            assert_eq!(limiter.check(&buyer(1)), Ok(()));
        }
        assert_eq!(
            limiter.check(&buyer(1)),
            Err(Refused {
                kind: LimitKind::Buyer,
                retry_after_seconds: 1
            })
        );
        assert_eq!(limiter.check(&buyer(2)), Ok(()), "another buyer is apart");
        // One request every 100 ms comes back.
        clock.advance(Duration::from_millis(99));
        assert!(limiter.check(&buyer(1)).is_err());
        clock.advance(Duration::from_millis(1));
        assert_eq!(limiter.check(&buyer(1)), Ok(()));
        assert!(limiter.check(&buyer(1)).is_err());
        // The whole burst after half a second.
        clock.advance(Duration::from_millis(500));
        for _ in 0..5 {
            assert_eq!(limiter.check(&buyer(1)), Ok(()));
        }
        assert!(limiter.check(&buyer(1)).is_err());
    }

    #[test]
    fn buyers_and_addresses_are_counted_apart() {
        let one_at_once = Limit {
            rate_per_second: 1,
            burst: 1,
        };
        let (limiter, _) = limiter(one_at_once, one_at_once);
        let address = Requester::Client(IpAddr::from([127, 0, 0, 1]));
        assert_eq!(limiter.check(&buyer(1)), Ok(()));
        assert_eq!(limiter.check(&address), Ok(()));
        assert_eq!(
            limiter.check(&address).map_err(|r| r.kind),
            Err(LimitKind::Client)
        );
        assert_eq!(
            limiter.check(&buyer(1)).map_err(|r| r.kind),
            Err(LimitKind::Buyer)
        );
    }

    #[test]
    fn a_zero_turns_a_limit_off() {
        let (limiter, _) = limiter(
            Limit {
                rate_per_second: 0,
                burst: 5,
            },
            Limit {
                rate_per_second: 5,
                burst: 0,
            },
        );
        let address = Requester::Client(IpAddr::from([127, 0, 0, 1]));
        for _ in 0..1_000 {
            assert_eq!(limiter.check(&buyer(1)), Ok(()));
            assert_eq!(limiter.check(&address), Ok(()));
        }
        assert_eq!(limiter.keys_kept(), 0);
    }

    #[test]
    fn keys_whose_bucket_refilled_are_forgotten() {
        let (limiter, clock) = limiter(TEN_PER_SECOND_FIVE_AT_ONCE, TEN_PER_SECOND_FIVE_AT_ONCE);
        for n in 0..100 {
            assert_eq!(limiter.check(&buyer(n)), Ok(()));
            let address = Requester::Client(IpAddr::from([10, 0, 0, n as u8]));
            assert_eq!(limiter.check(&address), Ok(()));
        }
        limiter.forget_full_buckets();
        assert_eq!(limiter.keys_kept(), 200, "every bucket is still counting");
        // 300 ms on, every bucket that took one request is full again
        // (100 ms refill a request); buyer 0's, asked again, is not.
        clock.advance(Duration::from_millis(300));
        assert_eq!(limiter.check(&buyer(0)), Ok(()));
        limiter.forget_full_buckets();
        assert_eq!(limiter.keys_kept(), 1);
    }

    #[test]
    fn the_periodic_sweep_bounds_the_keys_kept() {
        let (limiter, clock) = limiter(TEN_PER_SECOND_FIVE_AT_ONCE, Limit::OFF);
        let period = RETAIN_EVERY_CHECKS as usize;
        // Ten rounds of as many new buyers as a sweep period, a second
        // apart: without the sweep, ten rounds of keys would be kept.
        for round in 0..10 {
            for n in 0..period {
                assert_eq!(limiter.check(&buyer(round * period + n)), Ok(()));
            }
            clock.advance(Duration::from_secs(1));
        }
        assert!(limiter.keys_kept() <= period, "{}", limiter.keys_kept());
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_and_at_least_one() {
        assert_eq!(whole_seconds_at_least_one(Duration::ZERO), 1);
        assert_eq!(whole_seconds_at_least_one(Duration::from_millis(50)), 1);
        assert_eq!(whole_seconds_at_least_one(Duration::from_secs(2)), 2);
        assert_eq!(whole_seconds_at_least_one(Duration::from_millis(2_001)), 3);
    }

    #[test]
    fn retry_after_says_when_the_next_request_passes() {
        // One a second, one at once: refused 100 ms after the first, the
        // next is told 1 (0.9 s rounded up) and passes a second after it.
        // (With whole rates per second the wait is never above a second.)
        let (limiter, clock) = limiter(
            Limit::OFF,
            Limit {
                rate_per_second: 1,
                burst: 1,
            },
        );
        let address = Requester::Client(IpAddr::from([10, 0, 0, 1]));
        assert_eq!(limiter.check(&address), Ok(()));
        clock.advance(Duration::from_millis(100));
        let refused = limiter.check(&address).expect_err("past the limit");
        assert_eq!(refused.retry_after_seconds, 1);
        clock.advance(Duration::from_millis(899));
        assert!(limiter.check(&address).is_err());
        clock.advance(Duration::from_millis(1));
        assert_eq!(limiter.check(&address), Ok(()));
    }
}
