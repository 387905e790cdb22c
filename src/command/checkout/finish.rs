//! The last step of a checkout, on the units of its hold: converting them
//! and completing the purchase in one append (or, if the hold was lost,
//! asking for a refund instead), or freeing them when a booking is
//! cancelled.

use domain::allowance::AllowanceCommand;
use domain::checkout::{decide, Checkout, CheckoutCommand, RefundReason};
use domain::ids::HoldId;
use domain::show::Show;
use projections::holds::HoldState;

use super::{CheckoutError, CheckoutService};
use crate::command::allowance::{decide_and_push, BuyerAllowance, DecideError};
use crate::command::context::RequestContext;
use crate::command::rows::push_checkout;
use crate::command::streams::{append_tracked, refresh_all, LockedStream, StreamCache, Tracked};
use crate::command::units::{units_of, HoldUnits, Refusal, Unit};
use crate::store::{AppendBatch, AppendOutcome, HoldRecord, StoreError};

/// The last step of a checkout, on its units.
enum Finish {
    Convert,
    Cancel { refund_id: String },
}

impl CheckoutService {
    /// The units of the hold, from its record and its show, and the
    /// buyer's allowance on the show, locked (after the checkout, before
    /// the units: command::allowance) if the show has a limit.
    async fn hold_units(
        &self,
        record: &HoldRecord,
    ) -> Result<(HoldUnits, Option<BuyerAllowance>), CheckoutError> {
        let entry = self
            .catalog
            .get(&self.store, &record.show_id)
            .await?
            .ok_or_else(|| {
                StoreError::Corrupt(format!("show of hold {} is missing", record.hold_id))
            })?;
        let show: &Show = &entry.show;
        let units = units_of(record, show)?;
        let allowance =
            BuyerAllowance::lock(&self.store, &self.inventory.allowances, show, &record.buyer)
                .await?;
        Ok((units, allowance))
    }

    /// Captured: converts every unit of the hold and completes the checkout
    /// in one append; or, if any unit refuses, asks for a refund. Returns
    /// whether the completion was appended by this call.
    pub(super) async fn convert(
        &self,
        ctx: &RequestContext,
        record: &HoldRecord,
        checkout: &mut LockedStream<Checkout>,
    ) -> Result<bool, CheckoutError> {
        self.finish(ctx, record, checkout, Finish::Convert).await
    }

    /// Cancel requested: frees the units of the cancelled booking and
    /// records its refund, in one append.
    pub(super) async fn free_units(
        &self,
        ctx: &RequestContext,
        record: &HoldRecord,
        refund_id: String,
        checkout: &mut LockedStream<Checkout>,
    ) -> Result<bool, CheckoutError> {
        self.finish(ctx, record, checkout, Finish::Cancel { refund_id })
            .await
    }

    async fn finish(
        &self,
        ctx: &RequestContext,
        record: &HoldRecord,
        checkout: &mut LockedStream<Checkout>,
        finish: Finish,
    ) -> Result<bool, CheckoutError> {
        let hold_id = record.hold_id;
        let inventory = &self.inventory;
        let (units, mut allowance) = self.hold_units(record).await?;
        let allowance = allowance.as_mut();
        match units {
            HoldUnits::Seats(units) => {
                let cache = &inventory.seats;
                self.finish_units(ctx, hold_id, checkout, allowance, cache, &units, finish)
                    .await
            }
            HoldUnits::Pool(units) => {
                let cache = &inventory.shards;
                self.finish_units(ctx, hold_id, checkout, allowance, cache, &units, finish)
                    .await
            }
        }
    }

    /// The last step of a purchase or a cancellation: every unit of the hold
    /// and the checkout, appended together. For a purchase, a unit that no
    /// longer holds the hold turns the step into a refund request. Returns
    /// whether this call appended the step. On a show with a limit, the
    /// buyer's allowance follows in the same append: `Convert` (booked units
    /// keep counting) or `Return` (a cancellation gives them back).
    #[allow(clippy::too_many_arguments)]
    async fn finish_units<U: Unit>(
        &self,
        ctx: &RequestContext,
        hold_id: HoldId,
        checkout: &mut LockedStream<Checkout>,
        mut allowance: Option<&mut BuyerAllowance>,
        cache: &StreamCache<U>,
        units: &[(String, U::Key)],
        finish: Finish,
    ) -> Result<bool, CheckoutError> {
        let ids: Vec<String> = units.iter().map(|(id, _)| id.clone()).collect();
        let mut locked = cache.lock(&ids).await;
        refresh_all(&self.store, &mut locked).await?;
        let now = self.clock.now();
        let booking_id = Checkout::booking_id_for(hold_id);
        let (decided, command, counted) = match finish {
            Finish::Convert => {
                let mut decided = Vec::with_capacity(locked.len());
                for (stream, (_, key)) in locked.iter().zip(units) {
                    match stream.aggregate().convert(key, hold_id, booking_id, now) {
                        Ok(events) => decided.push(events),
                        Err(refusal) => {
                            drop(locked);
                            let reason = self.refund_reason(hold_id, refusal).await?;
                            tracing::warn!(%hold_id, ?reason, "payment finished after the hold was lost; refunding");
                            let command = CheckoutCommand::RequestRefund { reason };
                            self.record(ctx, checkout, &command).await?;
                            return Ok(false);
                        }
                    }
                }
                (
                    decided,
                    CheckoutCommand::Complete,
                    AllowanceCommand::Convert { hold_id },
                )
            }
            Finish::Cancel { refund_id } => {
                let decided = locked
                    .iter()
                    .zip(units)
                    .map(|(stream, (_, key))| stream.aggregate().cancel(key, booking_id, now))
                    .collect();
                (
                    decided,
                    CheckoutCommand::RecordRefund { refund_id },
                    AllowanceCommand::Return { hold_id },
                )
            }
        };
        let Ok(recorded) = decide(checkout.aggregate(), &command) else {
            // The checkout moved on meanwhile; the drive reads it again.
            checkout.invalidate();
            return Ok(false);
        };
        let metadata = ctx.metadata();
        let mut batch = AppendBatch::new(now);
        let counted = decide_and_push(allowance.as_deref(), &counted, now, &mut batch, &metadata)
            .map_err(|e| match e {
            DecideError::Refused(e) => CheckoutError::Invalid(e.to_string()),
            DecideError::Store(e) => CheckoutError::Store(e),
        })?;
        for ((stream, (_, key)), events) in locked.iter().zip(units).zip(&decided) {
            U::push(&mut batch, key, &stream.view(), events, &metadata)?;
        }
        push_checkout(&mut batch, &checkout.view(), &recorded, &metadata)?;
        let mut tracked: Vec<&mut (dyn Tracked + Send)> = locked
            .iter_mut()
            .map(|s| s as &mut (dyn Tracked + Send))
            .collect();
        tracked.push(checkout);
        if let Some(allowance) = allowance.as_deref_mut() {
            tracked.push(&mut allowance.stream);
        }
        if append_tracked(&self.store, &batch, tracked).await? != AppendOutcome::Appended {
            return Ok(false);
        }
        for (stream, events) in locked.iter_mut().zip(decided) {
            stream.appended(events);
        }
        checkout.appended(recorded);
        if let Some(allowance) = allowance {
            allowance.stream.appended(counted);
        }
        Ok(true)
    }

    /// Why the charge goes back: the buyer released the hold, or it expired
    /// (or lost its seats, which only happens after expiry).
    async fn refund_reason(
        &self,
        hold_id: HoldId,
        refusal: Refusal,
    ) -> Result<RefundReason, CheckoutError> {
        let released = matches!(
            self.store.hold(&hold_id).await?.map(|r| r.state),
            Some(HoldState::Released)
        );
        Ok(if released && refusal == Refusal::Lost {
            RefundReason::HoldReleased
        } else {
            RefundReason::HoldExpired
        })
    }
}
