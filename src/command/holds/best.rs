//! Best available: the service chooses the seats, then places an ordinary
//! all-or-nothing seat hold of exactly those seats (`place_validated`), so
//! limits, idempotency and the append's version check apply unchanged.
//!
//! The choice reads the seat statuses at `now` from a [`SeatStates`] source
//! (in the service: the per-show availability cache), not from the seat
//! streams under lock. Locking every seat of a section to choose would make
//! every best-available buyer of a show wait on every other and on every
//! seat hold; the cache is one incremental read shared by the requests that
//! arrive meanwhile. What it says is advice: the append of the hold, at the
//! versions of the locked seat streams, decides. A seat taken meanwhile
//! makes the hold `seat_taken`, and the service chooses again with fresh
//! statuses, at most [`MAX_CHOOSE_ROUNDS`] times.
//!
//! Requests of one instance that choose at the same time would all pick the
//! same best block from the same statuses, and all but one would lose it:
//! each round would place one hold. So the seats of a choice are *claimed*
//! in-process until its hold is answered, and a concurrent choice treats
//! claimed seats as taken. A claim is an optimisation, never a lock (another
//! instance does not see it): if only claimed seats would make a block, the
//! choice takes it anyway, and the append decides.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use domain::best_available::{choose, BestAvailableError, SeatPlace};
use domain::ids::{SeatId, ShowId};
use domain::limits::{MAX_BEST_AVAILABLE_QUANTITY, MIN_BEST_AVAILABLE_QUANTITY};
use domain::seat::SeatStatus;
use sha2::{Digest, Sha256};

use super::{HoldError, HoldRequest, HoldService, Placed};
use crate::catalog::CatalogEntry;
use crate::command::context::RequestContext;
use crate::store::{Store, StoreError};

/// Choices per request. A new round follows a hold refused `seat_taken`:
/// another buyer (on another instance, or past a claim's end) took a chosen
/// seat after the statuses were read, and each such loss is someone else's
/// success. Claims keep one instance's buyers from colliding, so eight
/// losses in a row means a show being emptied by several instances at once;
/// then the answer is 503 `busy` (blocks may well be left, so
/// `no_adjacent_seats` would be a guess; a retry is meaningful).
pub const MAX_CHOOSE_ROUNDS: usize = 8;

/// `{"best_available": {"quantity": q, "section": "A"}}`.
#[derive(Debug, Clone)]
pub struct BestAvailable {
    pub quantity: u32,
    pub section: Option<String>,
}

impl BestAvailable {
    /// The identity of the request for idempotency: what was asked, not
    /// the seats chosen, so a retry answers the first choice.
    fn hash(&self, show_id: &ShowId) -> String {
        let mut hasher = Sha256::new();
        hasher.update(b"best\n");
        hasher.update(show_id.as_str().as_bytes());
        hasher.update(format!("\n{}\n", self.quantity).as_bytes());
        match &self.section {
            Some(section) => {
                hasher.update(b"section:");
                hasher.update(section.as_bytes());
            }
            None => hasher.update(b"any"),
        }
        hex::encode(hasher.finalize())
    }

    /// Checks the request against the show. A section the show does not
    /// have is 422: no seat could ever be chosen there, like an unknown
    /// seat or pool, and unlike `no_adjacent_seats`, which may change.
    fn validate(&self, entry: &CatalogEntry) -> Result<usize, HoldError> {
        let quantity = self.quantity as usize;
        if !(MIN_BEST_AVAILABLE_QUANTITY..=MAX_BEST_AVAILABLE_QUANTITY).contains(&quantity) {
            return Err(HoldError::Invalid(format!(
                "best_available.quantity must be {MIN_BEST_AVAILABLE_QUANTITY}..={MAX_BEST_AVAILABLE_QUANTITY} (MAX_BEST_AVAILABLE_QUANTITY), got {}",
                self.quantity
            )));
        }
        if let Some(section) = &self.section {
            if !entry.show.seats.iter().any(|s| &s.section == section) {
                return Err(HoldError::Invalid(format!(
                    "best_available.section: the show has no section {section:?}"
                )));
            }
        }
        Ok(quantity)
    }
}

/// Where a choice reads each seat's status at `now`, in show order.
pub trait SeatStates: Sync {
    fn statuses(
        &self,
        store: &Store,
        entry: &CatalogEntry,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<SeatStatus>, StoreError>> + Send;
}

/// Seats (by ordinal) chosen by requests of this instance whose holds are
/// not answered yet.
#[derive(Default)]
pub(super) struct Claims {
    shows: Mutex<HashMap<ShowId, HashSet<usize>>>,
}

/// A claim on chosen seats, given back when dropped.
struct Claim<'a> {
    claims: &'a Claims,
    show_id: ShowId,
    ordinals: Vec<usize>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut shows = self.claims.shows.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(claimed) = shows.get_mut(&self.show_id) {
            for ordinal in &self.ordinals {
                claimed.remove(ordinal);
            }
            if claimed.is_empty() {
                shows.remove(&self.show_id);
            }
        }
    }
}

impl Claims {
    /// Chooses a block from `statuses`, treating seats claimed by other
    /// requests as taken unless only they would make a block, and claims it.
    fn choose(
        &self,
        entry: &CatalogEntry,
        statuses: &[SeatStatus],
        quantity: usize,
        section: Option<&str>,
    ) -> Result<(Claim<'_>, Vec<SeatId>), HoldError> {
        let show = &entry.show;
        let mut places: Vec<SeatPlace> = show
            .seats
            .iter()
            .enumerate()
            .filter(|(_, seat)| section.is_none_or(|wanted| seat.section == wanted))
            .map(|(ordinal, seat)| SeatPlace {
                seat_id: seat.seat_id.clone(),
                section: seat.section.clone(),
                row: seat.row.clone(),
                number: seat.number,
                rank: show.seat_rank(ordinal),
                free: statuses.get(ordinal) == Some(&SeatStatus::Available),
            })
            .collect();
        let mut shows = self.shows.lock().unwrap_or_else(|p| p.into_inner());
        let claimed = shows.entry(show.show_id.clone()).or_default();
        let mut unclaimed = Vec::new();
        for place in places.iter_mut() {
            let ordinal = show.seat(&place.seat_id).map(|(o, _)| o);
            if place.free && ordinal.is_some_and(|o| claimed.contains(&o)) {
                place.free = false;
                unclaimed.push(place.seat_id.clone());
            }
        }
        let chosen = match choose(&places, quantity, None) {
            Ok(chosen) => chosen,
            Err(BestAvailableError::NoBlock) if !unclaimed.is_empty() => {
                for place in places.iter_mut() {
                    if unclaimed.contains(&place.seat_id) {
                        place.free = true;
                    }
                }
                choose(&places, quantity, None).map_err(|_| HoldError::NoAdjacentSeats)?
            }
            Err(BestAvailableError::NoBlock) => return Err(HoldError::NoAdjacentSeats),
            Err(e @ BestAvailableError::QuantityOutOfRange { .. }) => {
                return Err(HoldError::Invalid(e.to_string()))
            }
        };
        let ordinals: Vec<usize> = chosen
            .iter()
            .filter_map(|seat| show.seat(seat).map(|(o, _)| o))
            .collect();
        claimed.extend(ordinals.iter().copied());
        drop(shows);
        let claim = Claim {
            claims: self,
            show_id: show.show_id.clone(),
            ordinals,
        };
        Ok((claim, chosen))
    }
}

impl HoldService {
    /// `POST /v1/shows/{id}/holds` with `best_available`.
    pub async fn place_best(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        ask: BestAvailable,
        states: &impl SeatStates,
    ) -> Result<Placed, HoldError> {
        let entry = self.show(show_id).await?;
        let quantity = ask.validate(&entry)?;
        let request_hash = ask.hash(show_id);
        // Before choosing: a retry answers the seats chosen the first time,
        // even when no block is left now.
        if let Some(key) = &ctx.idempotency_key {
            if let Some(existing) = self.replay_idempotent(ctx, key, &request_hash).await? {
                return Ok(Placed::Existing(existing));
            }
        }
        for _ in 0..MAX_CHOOSE_ROUNDS {
            let statuses = states
                .statuses(&self.store, &entry, self.clock.now())
                .await?;
            let (claim, seats) =
                self.claims
                    .choose(&entry, &statuses, quantity, ask.section.as_deref())?;
            let placed = self
                .place_validated(ctx, &entry, HoldRequest::Seats(seats), request_hash.clone())
                .await;
            drop(claim);
            match placed {
                Err(HoldError::SeatsTaken(_)) => {
                    metrics::counter!("best_available_rechosen_total").increment(1);
                    continue;
                }
                other => return other,
            }
        }
        Err(HoldError::Busy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(quantity: u32, section: Option<&str>) -> BestAvailable {
        BestAvailable {
            quantity,
            section: section.map(Into::into),
        }
    }

    #[test]
    fn the_hash_covers_quantity_section_and_show() {
        let show = ShowId::parse("s").unwrap();
        let other = ShowId::parse("t").unwrap();
        let a2 = ask(2, Some("A")).hash(&show);
        assert_eq!(a2, ask(2, Some("A")).hash(&show));
        assert_ne!(a2, ask(3, Some("A")).hash(&show));
        assert_ne!(a2, ask(2, Some("B")).hash(&show));
        assert_ne!(a2, ask(2, None).hash(&show));
        assert_ne!(a2, ask(2, Some("A")).hash(&other));
    }
}
