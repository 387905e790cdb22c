//! The judge: what a show's waiting list does with the seats it is owed.
//!
//! Once a judgement has the waiting list locked (first in the lock order), it
//! reads the seats owed (returned, or held by a returning hold past its
//! `expires_at`: `Shows::owed_seats`, candidates only), walks the waiting
//! entries in the waiting list's order (`domain::waitlist::judge`), and offers each the
//! first seats that satisfy it, one hold's round at a time with the waiting list
//! beside it; what no entry wants is passed on to sale in one last round
//! (`PassSeats`). Every round appends at the waiting list's version, so another
//! instance judging at once conflicts instead of offering a seat twice or
//! passing over an entry that joined meanwhile; the seats' own streams
//! decide whether each is still owed.
//!
//! A pool's owed places (`Shows::owed_places`: its shards' returned
//! places and returning holds past their expiry) are judged the same way
//! (`domain::waitlist::judge_places`): each entry asking for that pool is
//! offered its quantity as a pool hold taking owed places only, one round
//! an entry; what no entry wants is passed on in one round over the pool's
//! shards (`PassPlaces`).

use domain::ids::{EntryId, PoolId, SeatId, ShowId};
use domain::places::SeatSpec;
use domain::pool::{self, PoolCommand, PoolEvent, PoolShard};
use domain::seat::{self, Seat, SeatCommand};
use domain::waitlist::{self, Entry, WaitlistCommand};
use projections::time::to_micros;

use super::{WaitlistError, WaitlistService};
use crate::catalog::CatalogEntry;
use crate::command::context::RequestContext;
use crate::command::holds::{HoldError, WAITLIST_ACTOR};
use crate::command::round::{
    Decided, Decides, Decision, Round, Rounds, Settled, View, WaitlistLock,
};
use crate::command::units::{SeatKey, ShardKey};

/// Offers one judgement makes at most before it lets the waiting list go (the
/// next pass goes on): bounds how long one show holds its waiting list locked.
pub const MAX_OFFERS_PER_JUDGEMENT: usize = 1_000;

/// Offers appended in one round on a show without a per-buyer limit: at
/// most `MAX_WAITLIST_QUANTITY` seats each, so one round's batch stays far
/// below `MAX_EVENTS_PER_BATCH`.
pub const MAX_OFFERS_PER_ROUND: usize = 100;

/// What one judgement did: entries offered, and seats or places passed on.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Judged {
    pub offered: usize,
    pub passed: usize,
}

impl std::ops::AddAssign for Judged {
    fn add_assign(&mut self, other: Judged) {
        self.offered += other.offered;
        self.passed += other.passed;
    }
}

/// What a pass came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Passing {
    /// This many seats or places passed on to sale.
    Passed(usize),
    /// The waiting list, read again under the pass's lock, has an entry that wants
    /// some of them (it joined since the judgement): judge again.
    Rejudge,
}

/// Passing seats on to sale, with the waiting list's record of it: only if the
/// waiting list, as the round locked it, still has no waiting entry they satisfy.
struct PassSeats<'a> {
    /// The seats to pass, in the show's order.
    owed: &'a [&'a SeatSpec],
    /// Entries the judgement passed over (a per-buyer limit).
    skip: &'a [EntryId],
}

impl Decides<Seat> for PassSeats<'_> {
    type Output = Passing;
    type Error = WaitlistError;

    fn decide(&mut self, view: &View<'_, Seat>) -> Result<Decision<Seat, Passing>, WaitlistError> {
        let list = view
            .waitlist
            .ok_or_else(|| WaitlistError::Bug("a pass without its waiting list".into()))?;
        if !waitlist::judge(list, self.owed, self.skip)
            .offers
            .is_empty()
        {
            return Ok(Decision::Answer(Passing::Rejudge));
        }
        let mut units = Vec::with_capacity(view.units.len());
        let mut seats = Vec::new();
        for (seat, key) in &view.units {
            let events = seat::decide(seat, &SeatCommand::Pass, view.now)
                .map_err(|e| WaitlistError::Bug(format!("passing {}: {e}", key.seat_id)))?;
            if !events.is_empty() {
                seats.push(key.seat_id.clone());
            }
            units.push(events);
        }
        let passed = seats.len();
        let command = WaitlistCommand::Pass {
            seats,
            places: None,
        };
        let waitlist_events = waitlist::decide(list, &command, view.now)
            .map_err(|e| WaitlistError::Bug(format!("passing seats on: {e}")))?;
        Ok(Decision::Append(
            Decided {
                waitlist: waitlist_events,
                ..Decided::units(units)
            },
            Passing::Passed(passed),
        ))
    }
}

/// Passing up to `quantity` places of one pool on to sale (every shard
/// locked, in index order), with the waiting list's record of it: only if the
/// waiting list, as the round locked it, still has no waiting entry they satisfy.
struct PassPlaces<'a> {
    pool_id: &'a PoolId,
    quantity: u32,
    skip: &'a [EntryId],
}

impl Decides<PoolShard> for PassPlaces<'_> {
    type Output = Passing;
    type Error = WaitlistError;

    fn decide(
        &mut self,
        view: &View<'_, PoolShard>,
    ) -> Result<Decision<PoolShard, Passing>, WaitlistError> {
        let list = view
            .waitlist
            .ok_or_else(|| WaitlistError::Bug("a pass without its waiting list".into()))?;
        let again = waitlist::judge_places(list, self.pool_id, self.quantity, self.skip);
        if !again.offers.is_empty() {
            return Ok(Decision::Answer(Passing::Rejudge));
        }
        let mut left = self.quantity;
        let mut units = Vec::with_capacity(view.units.len());
        for (shard, key) in &view.units {
            let command = PoolCommand::Pass { quantity: left };
            let events = pool::decide(shard, key.capacity, &command, view.now).map_err(|e| {
                WaitlistError::Bug(format!("passing places of shard {}: {e}", key.index))
            })?;
            for event in &events {
                if let PoolEvent::PoolPlacesPassed { quantity } = event {
                    left = left.saturating_sub(*quantity);
                }
            }
            units.push(events);
        }
        let passed = self.quantity - left;
        let command = WaitlistCommand::Pass {
            seats: Vec::new(),
            places: (passed > 0).then(|| (self.pool_id.clone(), passed)),
        };
        let waitlist_events = waitlist::decide(list, &command, view.now)
            .map_err(|e| WaitlistError::Bug(format!("passing places on: {e}")))?;
        Ok(Decision::Append(
            Decided {
                waitlist: waitlist_events,
                ..Decided::units(units)
            },
            Passing::Passed(passed as usize),
        ))
    }
}

/// The specs of `seats`, in the show's order: an entry is offered the
/// first seats that satisfy it, as the show lists them.
fn in_show_order<'s>(show: &'s domain::show::Show, seats: &[SeatId]) -> Vec<&'s SeatSpec> {
    let mut owed: Vec<(usize, &SeatSpec)> = seats.iter().filter_map(|id| show.seat(id)).collect();
    owed.sort_by_key(|(ordinal, _)| *ordinal);
    owed.into_iter().map(|(_, spec)| spec).collect()
}

impl WaitlistService {
    /// One judgement of `show_id`'s waiting list at this instant (the worker's
    /// pass, `workers::waitlist`).
    pub async fn judge(&self, show_id: &ShowId) -> Result<Judged, WaitlistError> {
        let entry = self.show(show_id).await?;
        let now_us = to_micros(self.clock.now());
        let owed_ids = match entry.show.seats.is_empty() {
            true => Vec::new(),
            false => self.shows.owed_seats(show_id, now_us).await?,
        };
        let owed_places = match entry.show.pools.is_empty() {
            true => Default::default(),
            false => self.shows.owed_places(show_id, now_us).await?,
        };
        if owed_ids.is_empty() && owed_places.is_empty() {
            return Ok(Judged::default());
        }
        let mut list = self.rounds.lock_waitlist(show_id).await?;
        let mut judged = Judged::default();
        if !owed_ids.is_empty() {
            judged += self.judge_seats(&mut list, &entry, &owed_ids).await?;
        }
        for (pool_id, owed) in owed_places {
            judged += self.judge_pool(&mut list, &entry, &pool_id, owed).await?;
        }
        Ok(judged)
    }

    /// The waiting list (locked) judges the seats it is owed.
    async fn judge_seats(
        &self,
        list: &mut WaitlistLock,
        entry: &CatalogEntry,
        owed_ids: &[SeatId],
    ) -> Result<Judged, WaitlistError> {
        let show_id = &entry.show.show_id;
        let mut owed = in_show_order(&entry.show, owed_ids);
        let mut judged = Judged::default();
        let mut skip: Vec<EntryId> = Vec::new();
        // With a per-buyer limit, one offer a round (each counts its buyer's
        // allowance); without, the judgement's offers together.
        let per_round = match entry.show.max_seats_per_buyer {
            Some(_) => 1,
            None => MAX_OFFERS_PER_ROUND,
        };
        while judged.offered < MAX_OFFERS_PER_JUDGEMENT {
            let judgement = waitlist::judge(list.aggregate(), &owed, &skip);
            if judgement.offers.is_empty() {
                let passing: Vec<&SeatSpec> = (owed.iter().copied())
                    .filter(|s| judgement.passed.contains(&s.seat_id))
                    .collect();
                match self.pass(list, show_id, &passing, &skip).await? {
                    Passing::Passed(passed) => {
                        judged.passed = passed;
                        break;
                    }
                    // An entry joined since: judged again, with it.
                    Passing::Rejudge => continue,
                }
            }
            let offers: Vec<(Entry, Vec<SeatId>)> = (judgement.offers.into_iter())
                .take(per_round)
                .filter_map(|(entry_id, seats)| {
                    Some((list.aggregate().entry(&entry_id)?.clone(), seats))
                })
                .collect();
            let offered = self.holds.offer(list, entry, &offers).await;
            seats_offered(offered, &offers, (&mut judged, &mut owed, &mut skip))?;
            tracing::debug!(
                show_id = show_id.as_str(),
                offered = judged.offered,
                "waiting list: judged"
            );
        }
        Ok(judged)
    }

    /// The waiting list (locked) judges `owed` places of `pool_id`: each entry
    /// asking for them offered its quantity in the waiting list's order, one a round;
    /// what none wants passed on.
    async fn judge_pool(
        &self,
        list: &mut WaitlistLock,
        entry: &CatalogEntry,
        pool_id: &PoolId,
        mut owed: u32,
    ) -> Result<Judged, WaitlistError> {
        let mut judged = Judged::default();
        let mut skip: Vec<EntryId> = Vec::new();
        while judged.offered < MAX_OFFERS_PER_JUDGEMENT {
            let judgement = waitlist::judge_places(list.aggregate(), pool_id, owed, &skip);
            let Some(&(entry_id, quantity)) = judgement.offers.first() else {
                let passing = (pool_id, judgement.passed);
                match self.pass_places(list, entry, passing, &skip).await? {
                    Passing::Passed(passed) => {
                        judged.passed = passed;
                        break;
                    }
                    // An entry joined since: judged again, with it.
                    Passing::Rejudge => continue,
                }
            };
            let Some(offered) = list.aggregate().entry(&entry_id).cloned() else {
                return Err(WaitlistError::Bug(format!(
                    "entry {entry_id} judged, not in the waiting list"
                )));
            };
            let offer = (pool_id, quantity);
            match self.holds.offer_places(list, entry, &offered, offer).await {
                Ok(()) => {
                    judged.offered += 1;
                    owed -= quantity;
                }
                Err(HoldError::BuyerLimitReached { .. }) => skip.push(entry_id),
                // Fewer owed than read (another instance offered or passed
                // some meanwhile): judged again with what is.
                Err(HoldError::SoldOut { available }) => owed = available.min(owed - 1),
                // Offered or left meanwhile (another instance): not waiting.
                Err(HoldError::OfferGone) => skip.push(entry_id),
                Err(other) => return Err(other.into()),
            }
        }
        Ok(judged)
    }

    /// Passes up to `quantity` places of `pool_id` on to sale with the
    /// waiting list's record of it.
    async fn pass_places(
        &self,
        list: &mut WaitlistLock,
        entry: &CatalogEntry,
        (pool_id, quantity): (&PoolId, u32),
        skip: &[EntryId],
    ) -> Result<Passing, WaitlistError> {
        let show = &entry.show;
        let Some(spec) = show.pool(pool_id).filter(|_| quantity > 0) else {
            return Ok(Passing::Passed(0));
        };
        let units: Vec<(String, ShardKey)> = (0..spec.shards)
            .map(|index| ShardKey::unit(&show.show_id, spec, index))
            .collect();
        let ctx = RequestContext::system(WAITLIST_ACTOR)?;
        let round = Round::new("waitlist_pass", &ctx).with_waitlist(list);
        let mut decision = PassPlaces {
            pool_id,
            quantity,
            skip,
        };
        let rounds: &Rounds = &self.rounds;
        Ok(settled_pass(rounds.run(round, units, &mut decision).await?))
    }

    /// Passes `seats` on to sale with the waiting list's record of it.
    async fn pass(
        &self,
        list: &mut WaitlistLock,
        show_id: &ShowId,
        seats: &[&SeatSpec],
        skip: &[EntryId],
    ) -> Result<Passing, WaitlistError> {
        if seats.is_empty() {
            return Ok(Passing::Passed(0));
        }
        let units = (seats.iter())
            .map(|seat| SeatKey::unit(show_id, &seat.seat_id))
            .collect();
        let ctx = RequestContext::system(WAITLIST_ACTOR)?;
        let round = Round::new("waitlist_pass", &ctx).with_waitlist(list);
        let rounds: &Rounds = &self.rounds;
        let mut decision = PassSeats { owed: seats, skip };
        Ok(settled_pass(rounds.run(round, units, &mut decision).await?))
    }
}

/// What a pass's round came to: passed, nothing to pass, or judge again.
fn settled_pass(settled: Settled<Passing>) -> Passing {
    match settled {
        Settled::Appended(passing) | Settled::Answered(passing) => passing,
        Settled::KeyTaken => Passing::Passed(0),
    }
}

/// What an offer of seats to entries came to, for the rest of the
/// judgement: counted and no longer owed; the entry skipped (its buyer may
/// hold no more now: the next is judged, it keeps its place); the seats no
/// longer owed dropped (passed or taken by another instance since the
/// candidates were read); or nothing (offered or left meanwhile: the waiting list,
/// read again by the round, says so at the next turn).
fn seats_offered(
    offered: Result<(), HoldError>,
    offers: &[(Entry, Vec<SeatId>)],
    (judged, owed, skip): (&mut Judged, &mut Vec<&SeatSpec>, &mut Vec<EntryId>),
) -> Result<(), WaitlistError> {
    match offered {
        Ok(()) => {
            judged.offered += offers.len();
            owed.retain(|s| !offers.iter().any(|(_, seats)| seats.contains(&s.seat_id)));
        }
        Err(HoldError::BuyerLimitReached { .. }) => {
            skip.extend(offers.iter().map(|(e, _)| e.entry_id))
        }
        Err(HoldError::SeatsTaken(gone) | HoldError::NotForSale(gone)) => {
            owed.retain(|s| !gone.contains(&s.seat_id))
        }
        Err(HoldError::OfferGone) => {}
        Err(other) => return Err(other.into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use domain::ids::BuyerId;
    use domain::seat::Seat;
    use domain::waitlist::{Ask, Waitlist, WaitlistEvent};

    use super::*;
    use crate::command::units::fixtures::now;

    fn spec(id: &str) -> SeatSpec {
        SeatSpec {
            seat_id: SeatId::parse(id).expect("a seat id"),
            section: "A".into(),
            row: "1".into(),
            number: 1,
            price_cents: 1_000,
            rank: None,
            category: None,
            position: None,
            accessible: false,
        }
    }

    /// A waiting list where `buyer` waits for one seat of any kind.
    fn waitlist_with_one_waiting(buyer: &str) -> Waitlist {
        let mut list = Waitlist::default();
        list.apply_event(&WaitlistEvent::EntryJoined {
            entry_id: EntryId::random(),
            buyer: BuyerId::parse(buyer).expect("a buyer"),
            ask: Ask {
                quantity: 1,
                category: None,
                section: None,
                pool_id: None,
                adjacent: false,
            },
            joined_at: now(),
        });
        list
    }

    #[test]
    fn a_pass_judges_again_when_an_entry_joined_since_the_judgement() {
        let seat_spec = spec("A-1");
        let owed = [&seat_spec];
        let (seat, key) = (Seat::default(), crate::command::units::fixtures::seat_key());
        let list = waitlist_with_one_waiting("late-joiner");
        let view = View::given(now(), vec![(&seat, &key)]).with_waitlist(&list);
        let mut pass = PassSeats {
            owed: &owed,
            skip: &[],
        };
        assert!(matches!(
            pass.decide(&view),
            Ok(Decision::Answer(Passing::Rejudge))
        ));
        let empty = Waitlist::default();
        let view = View::given(now(), vec![(&seat, &key)]).with_waitlist(&empty);
        assert!(matches!(pass.decide(&view), Ok(Decision::Append(..))));
    }

    #[test]
    fn a_pass_of_places_judges_again_when_an_entry_for_them_joined() {
        let pool_id = PoolId::parse("floor").expect("a pool");
        let mut list = Waitlist::default();
        list.apply_event(&WaitlistEvent::EntryJoined {
            entry_id: EntryId::random(),
            buyer: BuyerId::parse("late-joiner").expect("a buyer"),
            ask: Ask {
                quantity: 2,
                category: None,
                section: None,
                pool_id: Some(pool_id.clone()),
                adjacent: false,
            },
            joined_at: now(),
        });
        let view = View::<PoolShard>::given(now(), vec![]).with_waitlist(&list);
        let mut pass = PassPlaces {
            pool_id: &pool_id,
            quantity: 3,
            skip: &[],
        };
        assert!(matches!(
            pass.decide(&view),
            Ok(Decision::Answer(Passing::Rejudge))
        ));
    }
}
