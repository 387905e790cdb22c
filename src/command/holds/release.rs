//! Ending a hold before it is bought: released by its buyer, or recorded as
//! expired by the sweeper, on every unit of the hold at once.

use domain::allowance::AllowanceCommand;
use domain::ids::HoldId;
use domain::show::Show;
use projections::holds::HoldState;

use super::{HoldError, HoldService, MAX_DECIDE_ROUNDS};
use crate::command::allowance::{append_with_allowance, decide_and_push, BuyerAllowance};
use crate::command::context::RequestContext;
use crate::command::streams::{refresh_all, StreamCache};
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
        let show = &entry.show;
        match units_of(&record, show)? {
            HoldUnits::Seats(units) => {
                self.end_units(ctx, &record, show, &self.inventory.seats, &units, end)
                    .await
            }
            HoldUnits::Pool(units) => {
                self.end_units(ctx, &record, show, &self.inventory.shards, &units, end)
                    .await
            }
        }
    }

    /// Ends the hold on every unit and, on a show with a limit, gives the
    /// buyer's allowance back in the same append (`Return`).
    async fn end_units<U: Unit>(
        &self,
        ctx: &RequestContext,
        record: &HoldRecord,
        show: &Show,
        cache: &StreamCache<U>,
        units: &[(String, U::Key)],
        end: End,
    ) -> Result<(), HoldError> {
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
            let returned = decide_and_push(
                allowance.as_ref(),
                &AllowanceCommand::Return { hold_id },
                now,
                &mut batch,
                &metadata,
            )
            .map_err(HoldError::from)?;
            for ((stream, (_, key)), events) in locked.iter().zip(units).zip(&decided) {
                U::push(&mut batch, key, &stream.view(), events, &metadata)?;
            }
            let outcome = append_with_allowance(
                &self.store,
                &batch,
                &mut locked,
                decided,
                allowance.as_mut(),
                returned,
            )
            .await?;
            if outcome == AppendOutcome::Appended {
                return Ok(());
            }
        }
        Err(HoldError::Busy)
    }
}
