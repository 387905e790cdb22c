//! Ending a hold before it is bought: released by its buyer, or recorded as
//! expired by the sweeper, on every unit of the hold at once, the buyer's
//! allowance given back in the same append.

use std::sync::Arc;

use domain::allowance::AllowanceCommand;
use domain::ids::{HoldId, ShowId};
use projections::holds::HoldState;

use super::read::HoldReader;
use super::HoldError;
use crate::command::context::RequestContext;
use crate::command::round::{BuyerLimit, Decide, Decided, Decision, Round, Rounds, View};
use crate::command::units::{units_of, Refusal, Unit};
use crate::store::HoldRecord;

/// How a hold ends before it is bought.
#[derive(Debug, Clone, Copy)]
enum End {
    Release,
    Expire,
}

/// The decision: every unit ends the hold (a unit that no longer holds it
/// does nothing), and the allowance takes the units back (`Return`).
struct Ending {
    hold_id: HoldId,
    end: End,
}

impl Decide for Ending {
    type Output = ();
    type Error = HoldError;

    fn decide<U: Unit>(&mut self, view: &View<'_, U>) -> Result<Decision<U, ()>, HoldError> {
        let (hold_id, now) = (self.hold_id, view.now);
        let units = view
            .units
            .iter()
            .map(|(unit, key)| match self.end {
                End::Release => unit.release(key, hold_id, now),
                End::Expire => Ok(unit.expire(key, hold_id, now)),
            })
            .collect::<Result<Vec<_>, Refusal>>()
            .map_err(|refusal| match refusal {
                Refusal::Converted => HoldError::HoldConverted,
                other => HoldError::Bug(format!("releasing hold {hold_id}: {other:?}")),
            })?;
        if units.iter().all(Vec::is_empty) {
            return Ok(Decision::Answer(()));
        }
        let allowance = view
            .allowance(&AllowanceCommand::Return { hold_id })
            .map_err(|e| HoldError::Bug(format!("returning hold {hold_id}'s allowance: {e}")))?;
        let decided = Decided {
            allowance,
            ..Decided::units(units)
        };
        Ok(Decision::Append(decided, ()))
    }
}

/// The handler ending holds: reads the hold, then runs `Ending` on its
/// units.
pub(super) struct ReleaseHandler {
    reader: HoldReader,
    rounds: Arc<Rounds>,
}

impl ReleaseHandler {
    pub(super) fn new(reader: HoldReader, rounds: Arc<Rounds>) -> Self {
        Self { reader, rounds }
    }

    /// `DELETE /v1/holds/{id}`: gives every unit of the hold back. Releasing
    /// a released or expired hold succeeds and changes nothing more.
    pub(super) async fn release(
        &self,
        ctx: &RequestContext,
        hold_id: &HoldId,
    ) -> Result<ShowId, HoldError> {
        let record = self.reader.owned_record(&ctx.actor, hold_id).await?;
        let show_id = record.show_id.clone();
        match record.state {
            HoldState::Held => {}
            HoldState::Converted => return Err(HoldError::HoldConverted),
            HoldState::Released | HoldState::Expired => return Ok(show_id),
        }
        self.end(ctx, record, End::Release).await?;
        Ok(show_id)
    }

    /// Records `HoldExpired` on every unit of a hold past its expiry (the
    /// sweeper). Storage hygiene and an audit record: nothing depends on it.
    pub(super) async fn expire(
        &self,
        ctx: &RequestContext,
        hold_id: &HoldId,
    ) -> Result<(), HoldError> {
        let Some(record) = self.reader.record(hold_id).await? else {
            return Ok(());
        };
        if record.state != HoldState::Held {
            return Ok(());
        }
        self.end(ctx, record, End::Expire).await
    }

    async fn end(
        &self,
        ctx: &RequestContext,
        record: HoldRecord,
        end: End,
    ) -> Result<(), HoldError> {
        let entry = self.reader.show(&record.show_id).await?;
        let round = Round::new("release", ctx).counting(BuyerLimit::of(&entry.show, &record.buyer));
        let mut ending = Ending {
            hold_id: record.hold_id,
            end,
        };
        let rounds: &Rounds = &self.rounds;
        rounds
            .run_on(round, units_of(&record, &entry.show)?, &mut ending)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use domain::seat::{Seat, SeatEvent};

    use super::*;
    use crate::command::units::fixtures::{now, seat_held_by, seat_key as key};

    #[test]
    fn it_should_release_every_unit_the_hold_holds() {
        let hold_id = HoldId::random();
        let (seat, key) = (seat_held_by(hold_id), key());
        let mut ending = Ending {
            hold_id,
            end: End::Release,
        };
        let Ok(Decision::Append(decided, ())) =
            ending.decide(&View::given(now(), vec![(&seat, &key)]))
        else {
            panic!("a held seat is released");
        };
        assert!(matches!(
            decided.units.as_slice(),
            [events] if matches!(events.as_slice(), [SeatEvent::HoldReleased { .. }])
        ));
    }

    #[test]
    fn it_should_change_nothing_on_units_the_hold_no_longer_holds() {
        let (free, key) = (Seat::default(), key());
        let mut ending = Ending {
            hold_id: HoldId::random(),
            end: End::Expire,
        };
        let decided = ending.decide(&View::given(now(), vec![(&free, &key)]));
        assert!(matches!(decided, Ok(Decision::Answer(()))));
    }
}
