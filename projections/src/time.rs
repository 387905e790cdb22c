//! Times are stored as integer microseconds since the Unix epoch in both
//! stores: SQLite has no timestamp type, and one representation means one
//! comparison rule (`expires_at_us > now_us`) in every query.

use chrono::{DateTime, Utc};

pub fn to_micros(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros()
}

/// `None` only for an instant outside chrono's range (about ±262,000 years),
/// which no row we write contains.
pub fn from_micros(micros: i64) -> Option<DateTime<Utc>> {
    DateTime::<Utc>::from_timestamp_micros(micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micros_round_trip() {
        let at = DateTime::<Utc>::from_timestamp_micros(1_800_000_000_123_456).unwrap();
        assert_eq!(from_micros(to_micros(at)), Some(at));
    }
}
