//! Extending a hold: every unit of the hold moves to the same later
//! `expires_at`, decided at one `now` and appended together, or none does.

use chrono::Duration;
use domain::ids::HoldId;
use projections::holds::HoldStatus;

use super::{HoldError, HoldService, HoldView, MAX_DECIDE_ROUNDS};
use crate::command::context::RequestContext;
use crate::command::streams::{append_decided, refresh_all, StreamCache};
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
        let decided = match units_of(&record, &entry.show)? {
            HoldUnits::Seats(units) => {
                self.extend_units(ctx, *hold_id, &self.inventory.seats, &units, ttl, max_hold)
                    .await
            }
            HoldUnits::Pool(units) => {
                self.extend_units(ctx, *hold_id, &self.inventory.shards, &units, ttl, max_hold)
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

    /// Decides the extension on every unit at one `now` and appends it;
    /// `Err` is the first unit's refusal (nothing is appended then).
    async fn extend_units<U: Unit>(
        &self,
        ctx: &RequestContext,
        hold_id: HoldId,
        cache: &StreamCache<U>,
        units: &[(String, U::Key)],
        ttl: Duration,
        max_hold: Duration,
    ) -> Result<Result<(), Refusal>, HoldError> {
        let ids: Vec<String> = units.iter().map(|(id, _)| id.clone()).collect();
        for _ in 0..MAX_DECIDE_ROUNDS {
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
            for ((stream, (_, key)), events) in locked.iter().zip(units).zip(&decided) {
                U::push(&mut batch, key, &stream.view(), events, &metadata)?;
            }
            if append_decided(&self.store, &batch, &mut locked, decided).await?
                == AppendOutcome::Appended
            {
                return Ok(Ok(()));
            }
        }
        Err(HoldError::Busy)
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
