//! What the best-available choices of this instance know that the seat
//! statuses they read may not show yet: seats claimed by choices whose
//! holds are not answered, and seats of holds placed since a choice read.
//!
//! Requests of one instance that choose at the same time would all pick the
//! same best block from the same statuses, and all but one would lose it:
//! each round would place one hold. So the seats of a choice are *claimed*
//! in-process until its hold is answered, and a concurrent choice treats
//! claimed seats as taken; and once the hold is placed, its seats stay
//! taken for every choice whose statuses were read before it (in a storm
//! a read takes longer than many holds: measured, 2,000 buyers at once
//! otherwise placed a few dozen holds in 30 s, every other choice losing
//! to a hold its statuses did not show yet). A claim is an optimisation,
//! never a lock (another instance does not see it): if only claimed seats
//! would make a block, the choice takes it anyway, and the append decides.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use domain::best_available::{BestAvailableError, Spread};
use domain::ids::{SeatId, ShowId};
use domain::seat::SeatStatus;

use super::request::Wanted;
use super::HoldError;
use crate::catalog::CatalogEntry;

/// What the choices of this instance know that the statuses they read may
/// not show yet, per show.
#[derive(Default)]
pub(crate) struct Claims {
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

    /// Marks the seats `free` says are free but that were placed since
    /// `started`, or are claimed, as taken; returns them.
    fn take_claimed(&self, started: u64, free: &mut [bool]) -> Vec<usize> {
        let taken_since = self
            .placed
            .iter()
            .filter(|(epoch, _)| *epoch > started)
            .flat_map(|(_, ordinals)| ordinals.iter().copied())
            .chain(self.in_flight.keys().copied());
        let mut unclaimed = Vec::new();
        for ordinal in taken_since {
            if let Some(seat) = free.get_mut(ordinal).filter(|f| **f) {
                *seat = false;
                unclaimed.push(ordinal);
            }
        }
        unclaimed
    }
}

/// A choice reading statuses: registered so that holds placed meanwhile
/// are remembered for it.
pub(super) struct Reading<'a> {
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
pub(super) struct Claim<'a> {
    claims: &'a Claims,
    show_id: ShowId,
    ordinals: Vec<usize>,
}

impl Claim<'_> {
    /// The hold is placed: until every choice reading from before sees it,
    /// its seats count as taken for them.
    pub(super) fn placed(self) {
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
    pub(super) fn start_reading(&self, show_id: &ShowId) -> Reading<'_> {
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
    /// unless only they would make a block, and claims it; `spread` says
    /// which of the best blocks.
    pub(super) fn choose(
        &self,
        entry: &CatalogEntry,
        statuses: &[SeatStatus],
        reading: &Reading<'_>,
        quantity: usize,
        wanted: Wanted<'_>,
        spread: Spread,
    ) -> Result<(Claim<'_>, Vec<SeatId>), HoldError> {
        let show = &entry.show;
        let section = wanted.section;
        // Free by the statuses read (a seat the statuses do not cover, a
        // show grown meanwhile, is not free), and one the buyer wants (its
        // category, a wheelchair space or not).
        let mut free: Vec<bool> = show
            .seats
            .iter()
            .enumerate()
            .map(|(ordinal, seat)| {
                statuses.get(ordinal) == Some(&SeatStatus::Available) && wanted.admits(seat)
            })
            .collect();
        let mut shows = self.shows.lock().unwrap_or_else(|p| p.into_inner());
        let claims = shows.entry(show.show_id.clone()).or_default();
        let unclaimed = claims.take_claimed(reading.started, &mut free);
        let order = &entry.seat_order;
        let ordinals = match order.choose_spread(&free, quantity, section, spread) {
            Ok(chosen) => chosen,
            Err(BestAvailableError::NoBlock) if !unclaimed.is_empty() => {
                for ordinal in &unclaimed {
                    if let Some(seat) = free.get_mut(*ordinal) {
                        *seat = show.seats.get(*ordinal).is_some_and(|s| wanted.admits(s));
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
