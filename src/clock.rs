//! Time, injected. Every command captures `now` once and decides every stream
//! it touches against that one instant; tests move the clock instead of
//! sleeping.

use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Duration, Utc};

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

/// Times are kept to the microsecond, the precision both stores keep, so an
/// instant read back from a row equals the one that was decided on.
fn truncate_to_micros(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_micros(at.timestamp_micros()).unwrap_or(at)
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        truncate_to_micros(Utc::now())
    }
}

/// The system clock shifted by an offset that tests can advance: the service
/// keeps running in real time, and a test jumps past an expiry at once.
#[derive(Debug, Default)]
pub struct ShiftedClock {
    offset_us: AtomicI64,
}

impl ShiftedClock {
    pub fn advance(&self, by: Duration) {
        let micros = by.num_microseconds().unwrap_or(i64::MAX);
        self.offset_us.fetch_add(micros, Ordering::SeqCst);
    }
}

impl Clock for ShiftedClock {
    fn now(&self) -> DateTime<Utc> {
        let offset = Duration::microseconds(self.offset_us.load(Ordering::SeqCst));
        truncate_to_micros(Utc::now() + offset)
    }
}
