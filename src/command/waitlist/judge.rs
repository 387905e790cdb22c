//! The judge: what a show's line does with the seats it is owed.
//!
//! Once a judgement has the line locked (first in the lock order), it
//! reads the seats owed (returned, or held by a line hold past its
//! `expires_at`: `Shows::owed_seats`, candidates only), walks the waiting
//! entries in line order (`domain::waitlist::judge`), and offers each the
//! first seats that satisfy it, one hold's round at a time with the line
//! beside it; what no entry wants is passed on to sale in one last round
//! (`PassSeats`). Every round appends at the line's version, so another
//! instance judging at once conflicts instead of offering a seat twice or
//! passing over an entry that joined meanwhile; the seats' own streams
//! decide whether each is still owed.

use domain::ids::{EntryId, SeatId, ShowId};
use domain::seat::{self, Seat, SeatCommand};
use domain::show::SeatSpec;
use domain::waitlist::{self, Entry, WaitlistCommand};
use projections::time::to_micros;

use super::{LineError, WaitlistService};
use crate::command::context::RequestContext;
use crate::command::holds::{HoldError, WAITLIST_ACTOR};
use crate::command::round::{Decided, Decides, Decision, LineLock, Round, Rounds, View};
use crate::command::units::SeatKey;

/// Offers one judgement makes at most before it lets the line go (the
/// next pass goes on): bounds how long one show holds its line locked.
pub const MAX_OFFERS_PER_JUDGEMENT: usize = 1_000;

/// Offers appended in one round on a show without a per-buyer limit: at
/// most `MAX_WAITLIST_QUANTITY` seats each, so one round's batch stays far
/// below `MAX_EVENTS_PER_BATCH`.
pub const MAX_OFFERS_PER_ROUND: usize = 100;

/// What one judgement did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Judged {
    pub offered: usize,
    pub passed: usize,
}

/// Passing seats on to sale, with the line's record of it.
struct PassSeats;

impl Decides<Seat> for PassSeats {
    type Output = usize;
    type Error = LineError;

    fn decide(&mut self, view: &View<'_, Seat>) -> Result<Decision<Seat, usize>, LineError> {
        let line = view
            .line
            .ok_or_else(|| LineError::Bug("a pass without its line".into()))?;
        let mut units = Vec::with_capacity(view.units.len());
        let mut seats = Vec::new();
        for (seat, key) in &view.units {
            let events = seat::decide(seat, &SeatCommand::Pass, view.now)
                .map_err(|e| LineError::Bug(format!("passing {}: {e}", key.seat_id)))?;
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
        let line_events = waitlist::decide(line, &command, view.now)
            .map_err(|e| LineError::Bug(format!("passing seats on: {e}")))?;
        Ok(Decision::Append(
            Decided {
                line: line_events,
                ..Decided::units(units)
            },
            passed,
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
    /// One judgement of `show_id`'s line at this instant (the worker's
    /// pass, `workers::waitlist`).
    pub async fn judge(&self, show_id: &ShowId) -> Result<Judged, LineError> {
        let entry = self.show(show_id).await?;
        let owed_ids = (self.shows)
            .owed_seats(show_id, to_micros(self.clock.now()))
            .await?;
        if owed_ids.is_empty() {
            return Ok(Judged::default());
        }
        let mut owed = in_show_order(&entry.show, &owed_ids);
        let mut line = self.rounds.lock_line(show_id).await?;
        let mut judged = Judged::default();
        let mut skip: Vec<EntryId> = Vec::new();
        // With a per-buyer limit, one offer a round (each counts its buyer's
        // allowance); without, the judgement's offers together.
        let per_round = match entry.show.max_seats_per_buyer {
            Some(_) => 1,
            None => MAX_OFFERS_PER_ROUND,
        };
        while judged.offered < MAX_OFFERS_PER_JUDGEMENT {
            let judgement = waitlist::judge(line.aggregate(), &owed, &skip);
            if judgement.offers.is_empty() {
                judged.passed = self.pass(&mut line, show_id, &judgement.passed).await?;
                break;
            }
            let offers: Vec<(Entry, Vec<SeatId>)> = (judgement.offers.into_iter())
                .take(per_round)
                .filter_map(|(entry_id, seats)| {
                    Some((line.aggregate().entry(&entry_id)?.clone(), seats))
                })
                .collect();
            match self.holds.offer(&mut line, &entry, &offers).await {
                Ok(()) => {
                    tracing::debug!(
                        show_id = show_id.as_str(),
                        offers = offers.len(),
                        "waiting list: offered"
                    );
                    judged.offered += offers.len();
                    owed.retain(|s| !offers.iter().any(|(_, seats)| seats.contains(&s.seat_id)));
                }
                // The buyer may not hold more now (one offer a round): the
                // next entry is judged; this one keeps its place.
                Err(HoldError::BuyerLimitReached { .. }) => {
                    skip.extend(offers.iter().map(|(e, _)| e.entry_id))
                }
                // No longer owed (passed, or taken, by another instance
                // since the candidates were read): judged without them.
                Err(HoldError::SeatsTaken(gone) | HoldError::NotForSale(gone)) => {
                    owed.retain(|s| !gone.contains(&s.seat_id))
                }
                // Offered or left meanwhile: the line, read again by the
                // round, says so at the next turn.
                Err(HoldError::OfferGone) => {}
                Err(other) => return Err(other.into()),
            }
        }
        Ok(judged)
    }

    /// Passes `seats` on to sale with the line's record of it.
    async fn pass(
        &self,
        line: &mut LineLock,
        show_id: &ShowId,
        seats: &[SeatId],
    ) -> Result<usize, LineError> {
        if seats.is_empty() {
            return Ok(0);
        }
        let units = (seats.iter())
            .map(|seat_id| SeatKey::unit(show_id, seat_id))
            .collect();
        let ctx = RequestContext::system(WAITLIST_ACTOR)?;
        let round = Round::new("waitlist_pass", &ctx).with_line(line);
        let rounds: &Rounds = &self.rounds;
        let settled = rounds.run(round, units, &mut PassSeats).await?;
        Ok(match settled {
            crate::command::round::Settled::Appended(n) => n,
            _ => 0,
        })
    }
}
