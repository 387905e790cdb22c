//! Ending a hold before it is bought: released by its buyer, or recorded as
//! expired by the sweeper, on every unit of the hold at once.

use domain::ids::HoldId;
use projections::holds::HoldState;

use super::{HoldError, HoldService, MAX_DECIDE_ROUNDS};
use crate::command::context::RequestContext;
use crate::command::streams::{append_decided, refresh_all, StreamCache};
use crate::command::units::{units_of, HoldUnits, Refusal, Unit};
use crate::store::{AppendBatch, AppendOutcome, HoldRecord};

/// How a hold ends before it is bought.
#[derive(Debug, Clone, Copy)]
enum End {
    Release,
    Expire,
}

impl HoldService {
    /// `DELETE /v1/holds/{id}`: gives every unit of the hold back. Releasing
    /// a released or expired hold succeeds and changes nothing more.
    pub async fn release(&self, ctx: &RequestContext, hold_id: &HoldId) -> Result<(), HoldError> {
        let record = self.owned_record(&ctx.actor, hold_id).await?;
        match record.state {
            HoldState::Held => {}
            HoldState::Converted => return Err(HoldError::HoldConverted),
            HoldState::Released | HoldState::Expired => return Ok(()),
        }
        self.end(ctx, record, End::Release).await
    }

    /// Records `HoldExpired` on every unit of a hold past its expiry (the
    /// sweeper). Storage hygiene and an audit record: nothing depends on it.
    pub async fn expire(&self, ctx: &RequestContext, hold_id: &HoldId) -> Result<(), HoldError> {
        let Some(record) = self.store.hold(hold_id).await? else {
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
        let entry = self.show(&record.show_id).await?;
        let hold_id = record.hold_id;
        match units_of(&record, &entry.show)? {
            HoldUnits::Seats(units) => {
                self.end_units(ctx, hold_id, &self.inventory.seats, &units, end)
                    .await
            }
            HoldUnits::Pool(units) => {
                self.end_units(ctx, hold_id, &self.inventory.shards, &units, end)
                    .await
            }
        }
    }

    async fn end_units<U: Unit>(
        &self,
        ctx: &RequestContext,
        hold_id: HoldId,
        cache: &StreamCache<U>,
        units: &[(String, U::Key)],
        end: End,
    ) -> Result<(), HoldError> {
        let ids: Vec<String> = units.iter().map(|(id, _)| id.clone()).collect();
        for _ in 0..MAX_DECIDE_ROUNDS {
            let mut locked = cache.lock(&ids).await;
            refresh_all(&self.store, &mut locked).await?;
            let now = self.clock.now();
            let decided = locked
                .iter()
                .zip(units)
                .map(|(stream, (_, key))| match end {
                    End::Release => stream.aggregate().release(key, hold_id, now),
                    End::Expire => Ok(stream.aggregate().expire(key, hold_id, now)),
                })
                .collect::<Result<Vec<_>, Refusal>>()
                .map_err(|refusal| match refusal {
                    Refusal::Converted => HoldError::HoldConverted,
                    other => HoldError::Invalid(format!("cannot release: {other:?}")),
                })?;
            if decided.iter().all(Vec::is_empty) {
                return Ok(());
            }
            let metadata = ctx.metadata();
            let mut batch = AppendBatch::new(now);
            for ((stream, (_, key)), events) in locked.iter().zip(units).zip(&decided) {
                U::push(&mut batch, key, &stream.view(), events, &metadata)?;
            }
            if append_decided(&self.store, &batch, &mut locked, decided).await?
                == AppendOutcome::Appended
            {
                return Ok(());
            }
        }
        Err(HoldError::Busy)
    }
}
