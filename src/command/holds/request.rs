//! What a hold request asks for, its identity for idempotency, and the
//! checks against the show made before anything is locked.

use domain::ids::{PoolId, SeatId, ShowId};
use domain::limits::{
    MAX_BEST_AVAILABLE_QUANTITY, MAX_POOL_HOLD_QUANTITY, MAX_SEATS_PER_HOLD,
    MIN_BEST_AVAILABLE_QUANTITY,
};
use sha2::{Digest, Sha256};

use super::HoldError;
use crate::catalog::CatalogEntry;

/// What a hold request asks for.
#[derive(Debug, Clone)]
pub enum HoldRequest {
    Seats(Vec<SeatId>),
    Pool {
        pool_id: PoolId,
        quantity: u32,
    },
    /// `quantity` seats side by side, chosen by the service, in `section`
    /// or anywhere.
    BestAvailable {
        quantity: u32,
        section: Option<String>,
    },
}

impl HoldRequest {
    /// The identity of the request for idempotency: the show and what it
    /// asks for (the same seats in another order are the same request).
    pub(super) fn hash(&self, show_id: &ShowId) -> String {
        let mut hasher = Sha256::new();
        match self {
            HoldRequest::Seats(seats) => {
                let mut sorted: Vec<&str> = seats.iter().map(SeatId::as_str).collect();
                sorted.sort_unstable();
                hasher.update(b"seats\n");
                hasher.update(show_id.as_str().as_bytes());
                for seat in sorted {
                    hasher.update(b"\n");
                    hasher.update(seat.as_bytes());
                }
            }
            HoldRequest::Pool { pool_id, quantity } => {
                hasher.update(b"pool\n");
                hasher.update(show_id.as_str().as_bytes());
                hasher.update(b"\n");
                hasher.update(pool_id.as_str().as_bytes());
                hasher.update(format!("\n{quantity}").as_bytes());
            }
            // What was asked, not the seats chosen: a retry answers the
            // first choice.
            HoldRequest::BestAvailable { quantity, section } => {
                hasher.update(b"best\n");
                hasher.update(show_id.as_str().as_bytes());
                hasher.update(format!("\n{quantity}\n").as_bytes());
                match section {
                    Some(section) => {
                        hasher.update(b"section:");
                        hasher.update(section.as_bytes());
                    }
                    None => hasher.update(b"any"),
                }
            }
        }
        hex::encode(hasher.finalize())
    }

    /// Checks the request against the show before anything is locked.
    pub(super) fn validate(&self, entry: &CatalogEntry) -> Result<(), HoldError> {
        match self {
            HoldRequest::Seats(seats) => {
                if seats.is_empty() || seats.len() > MAX_SEATS_PER_HOLD {
                    return Err(HoldError::Invalid(format!(
                        "a hold has 1..={MAX_SEATS_PER_HOLD} seats (MAX_SEATS_PER_HOLD), got {}",
                        seats.len()
                    )));
                }
                let mut seen = std::collections::HashSet::with_capacity(seats.len());
                if let Some(dup) = seats.iter().find(|s| !seen.insert(*s)) {
                    return Err(HoldError::Invalid(format!("seat {dup} is listed twice")));
                }
                let unknown: Vec<SeatId> = seats
                    .iter()
                    .filter(|s| entry.show.seat(s).is_none())
                    .cloned()
                    .collect();
                if !unknown.is_empty() {
                    return Err(HoldError::UnknownSeats(unknown));
                }
            }
            HoldRequest::Pool { pool_id, quantity } => {
                if !(1..=MAX_POOL_HOLD_QUANTITY).contains(quantity) {
                    return Err(HoldError::Invalid(format!(
                        "quantity must be 1..={MAX_POOL_HOLD_QUANTITY} (MAX_POOL_HOLD_QUANTITY), got {quantity}"
                    )));
                }
                if entry.show.pool(pool_id).is_none() {
                    return Err(HoldError::UnknownPool(pool_id.clone()));
                }
            }
            HoldRequest::BestAvailable { quantity, section } => {
                let wanted = *quantity as usize;
                if !(MIN_BEST_AVAILABLE_QUANTITY..=MAX_BEST_AVAILABLE_QUANTITY).contains(&wanted) {
                    return Err(HoldError::Invalid(format!(
                        "best_available.quantity must be {MIN_BEST_AVAILABLE_QUANTITY}..={MAX_BEST_AVAILABLE_QUANTITY} (MAX_BEST_AVAILABLE_QUANTITY), got {quantity}"
                    )));
                }
                // A section the show does not have is 422: no seat could
                // ever be chosen there, like an unknown seat or pool, and
                // unlike `no_adjacent_seats`, which may change.
                if let Some(section) = section {
                    if !entry.show.seats.iter().any(|s| &s.section == section) {
                        return Err(HoldError::Invalid(format!(
                            "best_available.section: the show has no section {section:?}"
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seats(ids: &[&str]) -> HoldRequest {
        HoldRequest::Seats(ids.iter().map(|s| SeatId::parse(s).unwrap()).collect())
    }

    #[test]
    fn the_same_seats_in_another_order_are_the_same_request() {
        let show = ShowId::parse("s").unwrap();
        assert_eq!(
            seats(&["A", "B"]).hash(&show),
            seats(&["B", "A"]).hash(&show)
        );
    }

    #[test]
    fn other_seats_another_show_or_a_pool_are_another_request() {
        let show = ShowId::parse("s").unwrap();
        let other = ShowId::parse("t").unwrap();
        let ab = seats(&["A", "B"]).hash(&show);
        assert_ne!(ab, seats(&["A", "C"]).hash(&show));
        assert_ne!(ab, seats(&["A", "B"]).hash(&other));
        let pool = |q| HoldRequest::Pool {
            pool_id: PoolId::parse("floor").unwrap(),
            quantity: q,
        };
        assert_ne!(pool(2).hash(&show), pool(3).hash(&show));
    }

    fn best(quantity: u32, section: Option<&str>) -> HoldRequest {
        HoldRequest::BestAvailable {
            quantity,
            section: section.map(Into::into),
        }
    }

    #[test]
    fn a_best_available_hash_covers_quantity_section_and_show() {
        let show = ShowId::parse("s").unwrap();
        let other = ShowId::parse("t").unwrap();
        let a2 = best(2, Some("A")).hash(&show);
        assert_eq!(a2, best(2, Some("A")).hash(&show));
        assert_ne!(a2, best(3, Some("A")).hash(&show));
        assert_ne!(a2, best(2, Some("B")).hash(&show));
        assert_ne!(a2, best(2, None).hash(&show));
        assert_ne!(a2, best(2, Some("A")).hash(&other));
    }
}
