//! Best available: the service chooses the seats and places an ordinary
//! all-or-nothing seat hold of exactly those seats, so limits, idempotency
//! and the append's version check apply unchanged. A choice is one scan of
//! the show's seats in the order worked out once per show
//! (`CatalogEntry::seat_order`), with a flag per seat.
//!
//! The first choice reads the seat statuses at `now` from the per-show
//! availability cache (`query::availability`), not from the seat streams
//! under lock. Locking every seat of a section to choose would make every
//! best-available buyer of a show wait on every other and on every seat
//! hold; the cache is one incremental read shared by the requests that
//! arrive meanwhile. What it says is advice: the append of the hold, at the
//! versions of the locked seat streams, decides. A chosen seat that the
//! locked streams show taken is learned: the decision marks it taken in
//! what it read and asks the round for other seats (`Decision::Replan`);
//! the round lets go of the locks and the decision reads the statuses
//! again (`Decides::replan`: what other instances took meanwhile), marks
//! every seat it learned taken, and chooses again, at most
//! [`MAX_CHOOSE_ROUNDS`] choices in all.
//! Concurrent choices of this instance keep out of each other's way through
//! the claims (`claims`).

use std::sync::Arc;

use domain::best_available::Spread;
use domain::ids::SeatId;
use domain::seat::{Seat, SeatStatus};

use super::claims::{Claim, Claims, Reading};
use super::place_seats::decide_seats;
use super::placement::{Held, Placement};
use super::request::Wanted;
use super::HoldError;
use crate::clock::Clock;
use crate::command::round::{Decides, Decision, Rounds, Settled, View};
use crate::command::units::SeatKey;
use crate::query::availability::AvailabilityCache;
use crate::store::Shows;

/// Choices per request. A new choice follows a chosen seat the locked
/// streams show taken: another buyer (on another instance, or past a
/// claim's end) took it after the statuses were read, and each such loss is
/// someone else's success. Claims keep one instance's buyers from
/// colliding, so eight losses in a row means a show being emptied by
/// several instances at once; then the answer is 503 `busy` (blocks may
/// well be left, so `no_adjacent_seats` would be a guess; a retry is
/// meaningful).
pub const MAX_CHOOSE_ROUNDS: usize = 8;

/// The most blocks a choice made again spreads over: the first choice
/// takes the best block, the next one of the 4 best, then 8, 16, ... up to
/// this many (`Spread`). Instances choose in the same order from the same
/// statuses, so without it the losers of a race between two instances
/// choose the same next block again, and some buyers lose eight times in
/// a row while most of the show is free (seen: 503 for one buyer of 200,
/// two instances, 1,000 seats). 64 blocks of a show are still among its
/// best, and a loser has a 1-in-64 chance of meeting the other instance's.
pub const MAX_SPREAD: usize = 64;

/// Which of the best blocks the choice after `rechosen` earlier ones takes.
fn spread_after(rechosen: u64) -> Spread {
    if rechosen == 0 {
        return Spread::BEST;
    }
    // 4 for the first choice made again, twice as many each time after.
    let among = (4usize << (rechosen - 1).min(16)).min(MAX_SPREAD);
    Spread {
        among,
        pick: rand::random::<usize>(),
    }
}

/// Placing `quantity` seats side by side, chosen by the service
/// (`HoldRequest::BestAvailable`). Holds what it read and learned, and the
/// claim on its current choice.
pub(super) struct BestSeats<'a> {
    placement: &'a Placement<'a>,
    claims: &'a Claims,
    /// Registered before the statuses were read (see `Claims`).
    reading: Reading<'a>,
    /// The statuses as read, with the seats the round showed taken marked
    /// held.
    statuses: Vec<SeatStatus>,
    quantity: usize,
    wanted: Wanted<'a>,
    chosen: Vec<SeatId>,
    claim: Option<Claim<'a>>,
    /// Every seat the locked streams showed taken: taken in every later
    /// read too (the availability read may not show it yet).
    learned: Vec<SeatId>,
    /// Where the statuses are read again between plans (none in unit
    /// tests: the decision then chooses from what it read and learned).
    source: Option<Statuses<'a>>,
    /// Choices after the first.
    pub(super) rechosen: u64,
}

impl<'a> BestSeats<'a> {
    /// Makes the first choice from `statuses` (read since `reading`).
    pub(super) fn new(
        placement: &'a Placement<'a>,
        claims: &'a Claims,
        reading: Reading<'a>,
        statuses: Vec<SeatStatus>,
        quantity: usize,
        wanted: Wanted<'a>,
    ) -> Result<Self, HoldError> {
        let mut best = Self {
            placement,
            claims,
            reading,
            statuses,
            quantity,
            wanted,
            chosen: Vec::new(),
            claim: None,
            learned: Vec::new(),
            source: None,
            rechosen: 0,
        };
        best.choose()?;
        Ok(best)
    }

    /// Reads the statuses again from `source` before each new plan.
    pub(super) fn rereading(mut self, source: Statuses<'a>) -> Self {
        self.source = Some(source);
        self
    }

    /// The seat streams of the current choice.
    pub(super) fn plan(&self) -> Vec<(String, SeatKey)> {
        let show_id = &self.placement.entry.show.show_id;
        self.chosen
            .iter()
            .map(|seat_id| SeatKey::unit(show_id, seat_id))
            .collect()
    }

    /// The hold is answered with the current choice: its seats stay taken
    /// for the choices that read before it.
    pub(super) fn placed(self) {
        if let Some(claim) = self.claim {
            claim.placed();
        }
    }

    fn choose(&mut self) -> Result<(), HoldError> {
        // Our own claim is given back first: its seats not taken are
        // candidates again.
        self.claim = None;
        let (claim, chosen) = self.claims.choose(
            self.placement.entry,
            &self.statuses,
            &self.reading,
            self.quantity,
            self.wanted,
            spread_after(self.rechosen),
        )?;
        self.claim = Some(claim);
        self.chosen = chosen;
        Ok(())
    }

    /// Marks `taken` as held in what was read, and remembers it.
    fn learn(&mut self, taken: &[SeatId]) {
        self.learned.extend_from_slice(taken);
        self.mark_learned();
    }

    /// Marks every seat learned taken as held in what was read.
    fn mark_learned(&mut self) {
        let show = &self.placement.entry.show;
        for seat_id in &self.learned {
            if let Some(status) = show
                .seat(seat_id)
                .and_then(|(ordinal, _)| self.statuses.get_mut(ordinal))
            {
                *status = SeatStatus::Held;
            }
        }
    }
}

/// Where best available reads seat statuses: the instance's availability
/// cache, brought up to date from the seat rows.
#[derive(Clone, Copy)]
pub(super) struct Statuses<'a> {
    pub(super) availability: &'a AvailabilityCache,
    pub(super) shows: &'a Shows,
    pub(super) clock: &'a dyn Clock,
}

impl Decides<Seat> for BestSeats<'_> {
    type Output = Held;
    type Error = HoldError;

    async fn prepare(&mut self) -> Result<(), HoldError> {
        self.placement.read_prices().await
    }
    const MAX_PLANS: usize = MAX_CHOOSE_ROUNDS;

    /// The next choice, made here rather than in `decide`: from the
    /// statuses read again (with `source`: under a crowd on several
    /// instances, what the first read showed free is taken faster than one
    /// choice a plan can learn), with every seat learned taken.
    async fn replan(
        &mut self,
        _next: Vec<(String, SeatKey)>,
    ) -> Result<Vec<(String, SeatKey)>, HoldError> {
        if let Some(source) = self.source {
            let entry = self.placement.entry;
            self.reading = self.claims.start_reading(&entry.show.show_id);
            self.statuses = source
                .availability
                .statuses(
                    source.shows,
                    entry,
                    &self.placement.viewer(),
                    source.clock.now(),
                )
                .await?;
            self.mark_learned();
        }
        self.rechosen += 1;
        self.choose()?;
        Ok(self.plan())
    }

    fn decide(&mut self, view: &View<'_, Seat>) -> Result<Decision<Seat, Held>, HoldError> {
        match decide_seats(self.placement, view, &self.chosen)? {
            Ok(decision) => Ok(decision),
            Err(taken) => {
                self.learn(&taken.seats);
                // No plan yet: the next choice is made in `replan`, once
                // the round has let go of these seats.
                Ok(Decision::Replan(Vec::new()))
            }
        }
    }
}

/// The handler placing best available: reads the statuses, makes the
/// first choice, and runs the round with `BestSeats`.
pub(super) struct BestHandler {
    /// Seat rows, for the statuses.
    shows: Shows,
    /// Where the statuses are read: advice, the append decides.
    availability: Arc<AvailabilityCache>,
    clock: Arc<dyn Clock>,
    rounds: Arc<Rounds>,
    claims: Claims,
}

impl BestHandler {
    pub(super) fn new(
        shows: Shows,
        availability: Arc<AvailabilityCache>,
        clock: Arc<dyn Clock>,
        rounds: Arc<Rounds>,
    ) -> Self {
        Self {
            shows,
            availability,
            clock,
            rounds,
            claims: Claims::default(),
        }
    }

    /// `POST /v1/shows/{id}/holds` with `best_available` (validated): the
    /// statuses read, the first choice made, and the round run with
    /// `BestSeats`, which chooses again from what it learns.
    pub(super) async fn place(
        &self,
        placement: &Placement<'_>,
        quantity: u32,
        wanted: Wanted<'_>,
    ) -> Result<Settled<Held>, HoldError> {
        let entry = placement.entry;
        let reading = self.claims.start_reading(&entry.show.show_id);
        let statuses = self
            .availability
            .statuses(&self.shows, entry, &placement.viewer(), self.clock.now())
            .await?;
        let source = Statuses {
            availability: &self.availability,
            shows: &self.shows,
            clock: self.clock.as_ref(),
        };
        let mut decision = BestSeats::new(
            placement,
            &self.claims,
            reading,
            statuses,
            quantity as usize,
            wanted,
        )?
        .rereading(source);
        let plan = decision.plan();
        let round = placement.round().assuming_new();
        let rounds: &Rounds = &self.rounds;
        let settled = rounds.run(round, plan, &mut decision).await;
        metrics::counter!("best_available_rechosen_total").increment(decision.rechosen);
        if settled.is_ok() {
            decision.placed();
        }
        settled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::holds::place_seats::tests::{held_by_another, keys};
    use crate::command::holds::placement::fixtures::{buyer, now, placement, show};

    #[test]
    fn it_should_hold_the_best_block_it_chose() {
        let (ctx, entry) = (buyer(), show());
        let placement = placement(&ctx, &entry);
        let claims = Claims::default();
        let reading = claims.start_reading(&entry.show.show_id);
        let statuses = vec![SeatStatus::Available; entry.show.seats.len()];
        let mut best = BestSeats::new(&placement, &claims, reading, statuses, 2, Wanted::default())
            .expect("a block of two");
        let chosen: Vec<SeatId> = best.chosen.clone();
        assert_eq!(chosen.len(), 2);
        let keys = keys(&entry.show.show_id, &chosen);
        let free = Seat::default();
        let view = View::given(now(), vec![(&free, &keys[0]), (&free, &keys[1])]);
        let Ok(Decision::Append(_, held)) = best.decide(&view) else {
            panic!("free seats are held");
        };
        assert_eq!(held.seats, chosen);
    }

    #[test]
    fn it_should_spread_its_choices_wider_after_each_loss() {
        assert_eq!(spread_after(0), Spread::BEST);
        let among: Vec<usize> = (1..=7).map(|r| spread_after(r).among).collect();
        assert_eq!(among, [4, 8, 16, 32, 64, 64, 64]);
        assert_eq!(spread_after(u64::MAX).among, MAX_SPREAD);
    }

    #[test]
    fn it_should_choose_again_without_the_seats_the_round_showed_taken() {
        let (ctx, entry) = (buyer(), show());
        let placement = placement(&ctx, &entry);
        let claims = Claims::default();
        let reading = claims.start_reading(&entry.show.show_id);
        let statuses = vec![SeatStatus::Available; entry.show.seats.len()];
        let mut best = BestSeats::new(&placement, &claims, reading, statuses, 2, Wanted::default())
            .expect("a block of two");
        let first = best.chosen.clone();
        let keys = keys(&entry.show.show_id, &first);
        let (taken, free) = (held_by_another(), Seat::default());
        let view = View::given(now(), vec![(&taken, &keys[0]), (&free, &keys[1])]);
        let Ok(Decision::Replan(_)) = best.decide(&view) else {
            panic!("a taken seat makes the decision choose again");
        };
        let plan =
            futures::executor::block_on(best.replan(Vec::new())).expect("another block of two");
        let again: Vec<SeatId> = plan.iter().map(|(_, key)| key.seat_id.clone()).collect();
        assert!(
            !again.contains(&first[0]),
            "the taken seat is not chosen again"
        );
        assert_eq!(best.rechosen, 1);
        // Only assumed free: read them first, do not choose again.
        let assumed =
            View::given(now(), vec![(&taken, &keys[0]), (&free, &keys[1])]).assuming_new();
        assert!(matches!(best.decide(&assumed), Ok(Decision::ReadAll)));
    }

    #[test]
    fn it_should_refuse_when_no_block_is_left() {
        let (ctx, entry) = (buyer(), show());
        let placement = placement(&ctx, &entry);
        let claims = Claims::default();
        let reading = claims.start_reading(&entry.show.show_id);
        // Every other seat held: no two side by side.
        let statuses = (0..entry.show.seats.len())
            .map(|n| {
                if n % 2 == 0 {
                    SeatStatus::Available
                } else {
                    SeatStatus::Held
                }
            })
            .collect();
        assert!(matches!(
            BestSeats::new(&placement, &claims, reading, statuses, 2, Wanted::default()),
            Err(HoldError::NoAdjacentSeats)
        ));
    }
}
