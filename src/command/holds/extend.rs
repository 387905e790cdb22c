//! Extending a hold: every unit of the hold moves to the same later
//! `expires_at`, decided at one `now` and appended together, or none does.

use chrono::Duration;
use domain::allowance::AllowanceCommand;
use domain::ids::HoldId;
use domain::show::Show;
use projections::holds::HoldStatus;

use super::{HoldError, HoldService, HoldView, MAX_DECIDE_ROUNDS};
use crate::command::allowance::{append_with_allowance, decide_and_push, BuyerAllowance};
use crate::command::context::RequestContext;
use crate::command::streams::{refresh_all, StreamCache};
use crate::command::units::{units_of, HoldUnits, Refusal, Unit};
use crate::store::{AppendBatch, AppendOutcome, HoldRecord};

impl HoldService {
    /// `POST /v1/holds/{id}/extend`: the hold now expires `hold_ttl_seconds`
    /// from now, but never later than `max_hold_seconds` after it was
    /// placed. Answers the hold as `GET` does. An extension that would not
    /// move the expiry later (asked twice at one instant) changes nothing
    /// and answers the hold; one at the cap is `ExtensionLimit`.
    pub async fn extend(
        &self,
        ctx: &RequestContext,
        hold_id: &HoldId,
    ) -> Result<HoldView, HoldError> {
        let record = self.owned_record(&ctx.actor, hold_id).await?;
        refuse_ended(&record, self.clock.now())?;
        let entry = self.show(&record.show_id).await?;
        let (ttl, max_hold) = (entry.show.hold_ttl(), entry.show.max_hold());
        let extension = Extension {
            ctx,
            record: &record,
            show: &entry.show,
            ttl,
            max_hold,
        };
        let decided = match units_of(&record, &entry.show)? {
            HoldUnits::Seats(units) => {
                self.extend_units(&extension, &self.inventory.seats, &units)
                    .await
            }
            HoldUnits::Pool(units) => {
                self.extend_units(&extension, &self.inventory.shards, &units)
                    .await
            }
        };
        match decided? {
            Ok(()) => {}
            // A unit no longer holds the hold: it was released or recorded
            // as expired meanwhile; the record says which.
            Err(Refusal::Lost) => {
                let record = self.owned_record(&ctx.actor, hold_id).await?;
                refuse_ended(&record, self.clock.now())?;
                return Err(HoldError::HoldExpired);
            }
            Err(Refusal::Expired) => return Err(HoldError::HoldExpired),
            Err(Refusal::Converted) => return Err(HoldError::HoldConverted),
            Err(Refusal::ExtensionLimit) => return Err(HoldError::ExtensionLimit),
        }
        let record = self.owned_record(&ctx.actor, hold_id).await?;
        self.view(record).await
    }

    /// Decides the extension on every unit at one `now` and appends it,
    /// with the buyer's allowance following the new `expires_at` on a show
    /// with a limit (`Extend`, in the same append); `Err` is the first
    /// unit's refusal (nothing is appended then).
    async fn extend_units<U: Unit>(
        &self,
        extension: &Extension<'_>,
        cache: &StreamCache<U>,
        units: &[(String, U::Key)],
    ) -> Result<Result<(), Refusal>, HoldError> {
        let Extension {
            ctx,
            record,
            show,
            ttl,
            max_hold,
        } = *extension;
        let hold_id = record.hold_id;
        let ids: Vec<String> = units.iter().map(|(id, _)| id.clone()).collect();
        for _ in 0..MAX_DECIDE_ROUNDS {
            // Lock order: the allowance before the units (command::allowance).
            let mut allowance =
                BuyerAllowance::lock(&self.store, &self.inventory.allowances, show, &record.buyer)
                    .await?;
            let mut locked = cache.lock(&ids).await;
            refresh_all(&self.store, &mut locked).await?;
            let now = self.clock.now();
            let decided = match locked
                .iter()
                .zip(units)
                .map(|(stream, (_, key))| {
                    stream.aggregate().extend(key, hold_id, ttl, max_hold, now)
                })
                .collect::<Result<Vec<_>, Refusal>>()
            {
                Ok(decided) => decided,
                Err(refusal) => return Ok(Err(refusal)),
            };
            if decided.iter().all(Vec::is_empty) {
                return Ok(Ok(()));
            }
            let metadata = ctx.metadata();
            let mut batch = AppendBatch::new(now);
            let followed = match decided.iter().find_map(|events| U::extended_to(events)) {
                Some(expires_at) => decide_and_push(
                    allowance.as_ref(),
                    &AllowanceCommand::Extend {
                        hold_id,
                        expires_at,
                    },
                    now,
                    &mut batch,
                    &metadata,
                )
                .map_err(HoldError::from)?,
                None => Vec::new(),
            };
            for ((stream, (_, key)), events) in locked.iter().zip(units).zip(&decided) {
                U::push(&mut batch, key, &stream.view(), events, &metadata)?;
            }
            let outcome = append_with_allowance(
                &self.store,
                &batch,
                &mut locked,
                decided,
                allowance.as_mut(),
                followed,
            )
            .await?;
            if outcome == AppendOutcome::Appended {
                return Ok(Ok(()));
            }
        }
        Err(HoldError::Busy)
    }
}

/// What one extension is decided with.
#[derive(Clone, Copy)]
struct Extension<'a> {
    ctx: &'a RequestContext,
    record: &'a HoldRecord,
    show: &'a Show,
    ttl: Duration,
    max_hold: Duration,
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
