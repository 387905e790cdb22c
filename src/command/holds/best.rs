//! Best available: the service chooses the seats, then places an ordinary
//! all-or-nothing seat hold of exactly those seats (`place_validated`), so
//! limits, idempotency and the append's version check apply unchanged.
//! A choice is one scan of the show's seats in the order worked out once
//! per show (`CatalogEntry::seat_order`), with a flag per seat.
//!
//! The choice reads the seat statuses at `now` from the per-show
//! availability cache (`query::availability`), not from the seat streams
//! under lock. Locking every seat of a section to choose would make
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
//! claimed seats as taken; and once the hold is placed, its seats stay
//! taken for every choice whose statuses were read before it (in a storm
//! a read takes longer than many holds: measured, 2,000 buyers at once
//! otherwise placed a few dozen holds in 30 s, every other choice losing
//! to a hold its statuses did not show yet). A claim is an optimisation, never a lock (another
//! instance does not see it): if only claimed seats would make a block, the
//! choice takes it anyway, and the append decides.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use domain::best_available::BestAvailableError;
use domain::ids::{SeatId, ShowId};
use domain::seat::SeatStatus;

use super::place::Placing;
use super::{HoldError, HoldRequest, HoldService, Placed};
use crate::catalog::CatalogEntry;

/// Choices per request. A new round follows a hold refused `seat_taken`:
/// another buyer (on another instance, or past a claim's end) took a chosen
/// seat after the statuses were read, and each such loss is someone else's
/// success. Claims keep one instance's buyers from colliding, so eight
/// losses in a row means a show being emptied by several instances at once;
/// then the answer is 503 `busy` (blocks may well be left, so
/// `no_adjacent_seats` would be a guess; a retry is meaningful).
pub const MAX_CHOOSE_ROUNDS: usize = 8;

/// What the choices of this instance know that the statuses they read may
/// not show yet, per show.
#[derive(Default)]
pub(super) struct Claims {
    shows: Mutex<HashMap<ShowId, ShowClaims>>,
    /// Increases at every hold a choice placed.
    epoch: AtomicU64,
}

#[derive(Default)]
struct ShowClaims {
    /// Seats (by ordinal) chosen by requests whose holds are not answered
    /// yet, with how many requests chose each (only the fallback lets two).
    in_flight: HashMap<usize, usize>,
    /// Seats of holds placed, by the epoch of their placement: a choice
    /// whose statuses were read before that epoch may not see them taken
    /// (under load a read can take longer than many holds do), so it treats
    /// them as taken. Dropped once no choice reading from before is left.
    placed: Vec<(u64, Vec<usize>)>,
    /// Epochs at which choices still choosing started to read statuses
    /// (with how many started at each).
    reading: BTreeMap<u64, usize>,
}

impl ShowClaims {
    fn forget_what_every_reader_sees(&mut self) {
        match self.reading.keys().next().copied() {
            None => self.placed.clear(),
            Some(oldest) => self.placed.retain(|(epoch, _)| *epoch > oldest),
        }
    }

    fn is_empty(&self) -> bool {
        self.in_flight.is_empty() && self.placed.is_empty() && self.reading.is_empty()
    }
}

/// A choice reading statuses: registered so that holds placed meanwhile
/// are remembered for it.
struct Reading<'a> {
    claims: &'a Claims,
    show_id: ShowId,
    started: u64,
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        self.claims.with_show(&self.show_id, |show| {
            if let Some(count) = show.reading.get_mut(&self.started) {
                *count -= 1;
                if *count == 0 {
                    show.reading.remove(&self.started);
                }
            }
            show.forget_what_every_reader_sees();
        });
    }
}

/// A claim on chosen seats while their hold is placed, given back when
/// dropped (and remembered as placed, if it was).
struct Claim<'a> {
    claims: &'a Claims,
    show_id: ShowId,
    ordinals: Vec<usize>,
}

impl Claim<'_> {
    /// The hold is placed: until every choice reading from before sees it,
    /// its seats count as taken for them.
    fn placed(self) {
        let epoch = self.claims.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        let ordinals = self.ordinals.clone();
        self.claims.with_show(&self.show_id, |show| {
            if !show.reading.is_empty() {
                show.placed.push((epoch, ordinals));
            }
        });
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.claims.with_show(&self.show_id, |show| {
            for ordinal in &self.ordinals {
                if let Some(count) = show.in_flight.get_mut(ordinal) {
                    *count -= 1;
                    if *count == 0 {
                        show.in_flight.remove(ordinal);
                    }
                }
            }
        });
    }
}

impl Claims {
    fn with_show<T>(&self, show_id: &ShowId, f: impl FnOnce(&mut ShowClaims) -> T) -> T {
        let mut shows = self.shows.lock().unwrap_or_else(|p| p.into_inner());
        let show = shows.entry(show_id.clone()).or_default();
        let out = f(show);
        if show.is_empty() {
            shows.remove(show_id);
        }
        out
    }

    /// Call before reading statuses; keep until the choice is claimed.
    fn start_reading(&self, show_id: &ShowId) -> Reading<'_> {
        let started = self.with_show(show_id, |show| {
            let started = self.epoch.load(Ordering::SeqCst);
            *show.reading.entry(started).or_default() += 1;
            started
        });
        Reading {
            claims: self,
            show_id: show_id.clone(),
            started,
        }
    }

    /// Chooses a block from `statuses` (read since `reading` started),
    /// treating seats claimed by other requests, or placed since, as taken
    /// unless only they would make a block, and claims it.
    fn choose(
        &self,
        entry: &CatalogEntry,
        statuses: &[SeatStatus],
        reading: &Reading<'_>,
        quantity: usize,
        section: Option<&str>,
    ) -> Result<(Claim<'_>, Vec<SeatId>), HoldError> {
        let show = &entry.show;
        // Free by the statuses read (a seat the statuses do not cover, a
        // show grown meanwhile, is not free).
        let mut free: Vec<bool> = (0..show.seats.len())
            .map(|ordinal| statuses.get(ordinal) == Some(&SeatStatus::Available))
            .collect();
        let mut shows = self.shows.lock().unwrap_or_else(|p| p.into_inner());
        let claims = shows.entry(show.show_id.clone()).or_default();
        // Seats free in the statuses but placed since, or claimed.
        let taken_since = claims
            .placed
            .iter()
            .filter(|(epoch, _)| *epoch > reading.started)
            .flat_map(|(_, ordinals)| ordinals.iter().copied())
            .chain(claims.in_flight.keys().copied());
        let mut unclaimed = Vec::new();
        for ordinal in taken_since {
            if let Some(seat) = free.get_mut(ordinal).filter(|f| **f) {
                *seat = false;
                unclaimed.push(ordinal);
            }
        }
        let order = &entry.seat_order;
        let ordinals = match order.choose(&free, quantity, section) {
            Ok(chosen) => chosen,
            Err(BestAvailableError::NoBlock) if !unclaimed.is_empty() => {
                for ordinal in &unclaimed {
                    if let Some(seat) = free.get_mut(*ordinal) {
                        *seat = true;
                    }
                }
                order
                    .choose(&free, quantity, section)
                    .map_err(|_| HoldError::NoAdjacentSeats)?
            }
            Err(BestAvailableError::NoBlock) => return Err(HoldError::NoAdjacentSeats),
            // The request was validated against the same limits.
            Err(e @ BestAvailableError::QuantityOutOfRange { .. }) => {
                return Err(HoldError::Bug(e.to_string()))
            }
        };
        let chosen: Vec<SeatId> = ordinals
            .iter()
            .filter_map(|&o| show.seats.get(o).map(|seat| seat.seat_id.clone()))
            .collect();
        for ordinal in &ordinals {
            *claims.in_flight.entry(*ordinal).or_default() += 1;
        }
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
    /// `POST /v1/shows/{id}/holds` with `best_available` (validated):
    /// chooses `quantity` seats, then places them, choosing again when a
    /// chosen seat was taken meanwhile.
    pub(super) async fn place_best(
        &self,
        placing: &Placing<'_>,
        quantity: u32,
        section: Option<&str>,
        request_hash: String,
    ) -> Result<Placed, HoldError> {
        let (ctx, entry) = (placing.ctx, placing.entry);
        let show_id = &entry.show.show_id;
        // Before choosing: a retry answers the seats chosen the first time,
        // even when no block is left now.
        if let Some(existing) = self.replay_idempotent(ctx, &request_hash).await? {
            return Ok(Placed::Existing(existing));
        }
        for _ in 0..MAX_CHOOSE_ROUNDS {
            let reading = self.claims.start_reading(show_id);
            let statuses = self
                .availability
                .statuses(&self.shows, entry, self.clock.now())
                .await?;
            let (claim, seats) =
                self.claims
                    .choose(entry, &statuses, &reading, quantity as usize, section)?;
            drop(reading);
            let placed = self
                .place_validated(placing, HoldRequest::Seats(seats), request_hash.clone())
                .await;
            if placed.is_ok() {
                claim.placed();
            } else {
                drop(claim);
            }
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
