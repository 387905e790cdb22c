//! Extending a hold: every unit of the hold moves to the same later
//! `expires_at`, decided at one `now` and appended together, or none does.

use std::sync::Arc;

use chrono::Duration;
use domain::allowance::AllowanceCommand;
use domain::ids::HoldId;
use domain::show::Show;
use projections::holds::HoldStatus;

use super::read::HoldReader;
use super::{HoldError, HoldView};
use crate::clock::Clock;
use crate::command::context::RequestContext;
use crate::command::round::{BuyerLimit, Decide, Decided, Decision, Round, Rounds, Settled, View};
use crate::command::units::{units_of, Refusal, Unit};
use crate::store::HoldRecord;

/// The decision: every unit extends the hold to `now + ttl`, at most
/// `max_hold` after its placement, and on a show with a limit the buyer's
/// allowance follows the new `expires_at` (`Extend`); the first unit that
/// refuses is the answer, and nothing is appended.
struct Extending {
    hold_id: HoldId,
    ttl: Duration,
    max_hold: Duration,
}

impl Decide for Extending {
    type Output = Result<(), Refusal>;
    type Error = HoldError;

    fn decide<U: Unit>(
        &mut self,
        view: &View<'_, U>,
    ) -> Result<Decision<U, Self::Output>, HoldError> {
        let hold_id = self.hold_id;
        let units = match view
            .units
            .iter()
            .map(|(unit, key)| unit.extend(key, hold_id, self.ttl, self.max_hold, view.now))
            .collect::<Result<Vec<_>, Refusal>>()
        {
            Ok(units) => units,
            Err(refusal) => return Ok(Decision::Answer(Err(refusal))),
        };
        let allowance = match units.iter().find_map(|events| U::extended_to(events)) {
            Some(expires_at) => {
                view.allowance(&AllowanceCommand::Extend {
                    hold_id,
                    expires_at,
                })
                .map_err(|e| HoldError::Bug(format!("extending hold {hold_id}'s allowance: {e}")))?
            }
            // Asked twice at one instant: nothing moves.
            None => Vec::new(),
        };
        let decided = Decided {
            allowance,
            ..Decided::units(units)
        };
        Ok(Decision::Append(decided, Ok(())))
    }
}

/// The handler extending holds: reads the hold, then runs `Extending` on
/// its units.
pub(super) struct ExtendHandler {
    reader: HoldReader,
    rounds: Arc<Rounds>,
    clock: Arc<dyn Clock>,
}

impl ExtendHandler {
    pub(super) fn new(reader: HoldReader, rounds: Arc<Rounds>, clock: Arc<dyn Clock>) -> Self {
        Self {
            reader,
            rounds,
            clock,
        }
    }

    /// `POST /v1/holds/{id}/extend`: the hold now expires `hold_ttl_seconds`
    /// from now, but never later than `max_hold_seconds` after it was
    /// placed. Answers the hold as `GET` does. An extension that would not
    /// move the expiry later (asked twice at one instant) changes nothing
    /// and answers the hold; one at the cap is `ExtensionLimit`.
    pub(super) async fn extend(
        &self,
        ctx: &RequestContext,
        hold_id: &HoldId,
    ) -> Result<HoldView, HoldError> {
        let record = self.reader.owned_record(&ctx.actor, hold_id).await?;
        refuse_ended(&record, self.clock.now())?;
        let entry = self.reader.show(&record.show_id).await?;
        let round = Round::new("extend", ctx).counting(BuyerLimit::of(&entry.show, &record.buyer));
        let mut extending = Extending {
            hold_id: *hold_id,
            ttl: entry.show.hold_ttl(),
            max_hold: entry.show.max_hold(),
        };
        let rounds: &Rounds = &self.rounds;
        let settled = rounds
            .run_on(round, units_of(&record, &entry.show)?, &mut extending)
            .await?;
        let (Settled::Appended(decided) | Settled::Answered(decided)) = settled else {
            return Err(HoldError::Bug(
                "an extension took an idempotency key".into(),
            ));
        };
        match decided {
            Ok(()) => {}
            // A unit no longer holds the hold: it was released or recorded
            // as expired meanwhile; the record says which.
            Err(Refusal::Lost) => {
                let record = self.reader.owned_record(&ctx.actor, hold_id).await?;
                refuse_ended(&record, self.clock.now())?;
                return Err(HoldError::HoldExpired);
            }
            Err(Refusal::Expired) => return Err(HoldError::HoldExpired),
            Err(Refusal::Converted) => return Err(HoldError::HoldConverted),
            Err(Refusal::ExtensionLimit) => return Err(HoldError::ExtensionLimit),
        }
        let record = self.reader.owned_record(&ctx.actor, hold_id).await?;
        self.reader.view(record).await
    }
}

/// Extends a hold on every unit at one `now` (see `Extending`); `Err` in
/// the `Ok` is the first unit's refusal. The checkout uses it too: a hold
/// is extended while its buyer authenticates a payment.
pub(crate) async fn extend_hold(
    rounds: &Rounds,
    ctx: &RequestContext,
    record: &HoldRecord,
    show: &Show,
) -> Result<Result<(), Refusal>, HoldError> {
    let round = Round::new("extend", ctx).counting(BuyerLimit::of(show, &record.buyer));
    let mut extending = Extending {
        hold_id: record.hold_id,
        ttl: show.hold_ttl(),
        max_hold: show.max_hold(),
    };
    match rounds
        .run_on(round, units_of(record, show)?, &mut extending)
        .await?
    {
        Settled::Appended(decided) | Settled::Answered(decided) => Ok(decided),
        Settled::KeyTaken => Err(HoldError::Bug(
            "an extension took an idempotency key".into(),
        )),
    }
}

/// The refusal a hold record that no longer holds anything at `now` gets.
fn refuse_ended(record: &HoldRecord, now: chrono::DateTime<chrono::Utc>) -> Result<(), HoldError> {
    match HoldStatus::at(record.state, record.expires_at, now) {
        HoldStatus::Held => Ok(()),
        HoldStatus::Expired => Err(HoldError::HoldExpired),
        HoldStatus::Released => Err(HoldError::HoldReleased),
        HoldStatus::Converted => Err(HoldError::HoldConverted),
    }
}

#[cfg(test)]
mod tests {
    use domain::seat::SeatEvent;

    use super::*;
    use crate::command::units::fixtures::{now, seat_held_by, seat_key as key};

    #[test]
    fn it_should_move_the_expiry_on_by_the_ttl() {
        let hold_id = HoldId::random();
        let (seat, key) = (seat_held_by(hold_id), key());
        let mut extending = Extending {
            hold_id,
            ttl: Duration::minutes(10),
            max_hold: Duration::minutes(30),
        };
        let later = now() + Duration::minutes(5);
        let Ok(Decision::Append(decided, Ok(()))) =
            extending.decide(&View::given(later, vec![(&seat, &key)]))
        else {
            panic!("an active hold is extended");
        };
        let expected = later + Duration::minutes(10);
        assert!(matches!(
            decided.units.as_slice(),
            [events] if matches!(events.as_slice(), [SeatEvent::HoldExtended { expires_at, .. }] if *expires_at == expected)
        ));
    }

    #[test]
    fn it_should_answer_the_cap_without_appending() {
        let hold_id = HoldId::random();
        let (seat, key) = (seat_held_by(hold_id), key());
        // Placed for ten minutes, at most ten in all: already at the cap.
        let mut extending = Extending {
            hold_id,
            ttl: Duration::minutes(10),
            max_hold: Duration::minutes(10),
        };
        let later = now() + Duration::minutes(5);
        let decided = extending.decide(&View::given(later, vec![(&seat, &key)]));
        assert!(matches!(
            decided,
            Ok(Decision::Answer(Err(Refusal::ExtensionLimit)))
        ));
    }
}
