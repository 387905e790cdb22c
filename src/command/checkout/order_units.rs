//! An order's steps on its holds' units, one hold (one append) at a time,
//! each with the order's checkout event that records it: converting them
//! (`ConvertOrderHold`), giving converted ones back before a void or a
//! reversal (`GiveBack`), freeing cancelled lines (`FreeLines`). A crash
//! between two holds leaves the stream saying which are done; the drive
//! goes on from there.

use std::collections::BTreeMap;

use domain::checkout::CheckoutCommand;
use domain::ids::HoldId;
use domain::order::{line_refund_key, Order, OrderLine};
use domain::pool::PoolShard;
use domain::seat::Seat;

use super::drive::minor_units;
use super::finish::{Finish, Finished};
use super::{CheckoutError, CheckoutService, OrderSubject, Subject};
use crate::command::context::RequestContext;
use crate::command::round::CheckoutLock;
use crate::command::streams::Stream;
use crate::command::units::{units_of, HoldUnits, SeatKey, ShardKey};
use crate::store::{HoldRecord, StoreError};

impl CheckoutService {
    /// Authorized: converts the order's holds one by one, the last with
    /// the checkout. A hold found lost (expired, released, bought
    /// elsewhere) requests the void, naming every hold lost by then; the
    /// holds converted before it are given back by the void's step.
    pub(super) async fn convert_order(
        &self,
        ctx: &RequestContext,
        order: &OrderSubject,
        checkout: &mut CheckoutLock,
    ) -> Result<(), CheckoutError> {
        let booking_id = order.order_id.booking_id();
        for hold_id in pending_holds(checkout, |o| o.unconverted().collect())? {
            let record = self.stored_hold(&hold_id).await?;
            let units = units_of(&record, &self.show_of(&record).await?.show)?;
            let finish = Finish::ConvertOrderHold;
            match self
                .finish_on(ctx, &record, checkout, finish, booking_id, units)
                .await?
            {
                Finished::Done => {}
                // Another process moved the order on: the drive reads it again.
                Finished::Moved => return Ok(()),
                Finished::Lost(refusal) => {
                    let reason = self.refund_reason(hold_id, refusal).await?;
                    let subject = Subject::Order(order.clone());
                    let mut holds = match self.lost_now(&subject).await? {
                        Some((_, holds)) => holds,
                        None => Vec::new(),
                    };
                    if !holds.contains(&hold_id) {
                        holds.insert(0, hold_id);
                    }
                    tracing::warn!(order_id = %order.order_id, %hold_id, ?reason, "a hold of the order was lost before conversion; voiding");
                    let command = CheckoutCommand::RequestVoid { reason, holds };
                    self.record(ctx, checkout, &command).await?;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Voiding or reversing an order: gives back every hold it converted
    /// (their units freed), so no unit stays booked for an order that is
    /// not paid. Nothing for a hold's own checkout.
    pub(super) async fn give_back_order(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
    ) -> Result<(), CheckoutError> {
        let Subject::Order(order) = subject else {
            return Ok(());
        };
        let booking_id = order.order_id.booking_id();
        for hold_id in pending_holds(checkout, |o| o.converted.iter().copied().collect())? {
            let record = self.stored_hold(&hold_id).await?;
            let units = units_of(&record, &self.show_of(&record).await?.show)?;
            let places: BTreeMap<u32, u32> = record
                .pool
                .as_ref()
                .map(|(_, parts)| parts.iter().copied().collect())
                .unwrap_or_default();
            let finish = Finish::GiveBack { places };
            if let Finished::Moved = self
                .finish_on(ctx, &record, checkout, finish, booking_id, units)
                .await?
            {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Lines being cancelled: refunds them (one partial refund, keyed by
    /// the cancellation's number, so asked again after a crash it is the
    /// same refund) and frees their units hold by hold, the last hold with
    /// the cancellation's end.
    pub(super) async fn cancel_lines(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
        checkout: &mut CheckoutLock,
        charge_id: &str,
    ) -> Result<(), CheckoutError> {
        let Subject::Order(order) = subject else {
            return Err(CheckoutError::Bug(
                "a hold's checkout cancelling lines".into(),
            ));
        };
        let Some((state, pending)) = checkout
            .aggregate()
            .order
            .as_ref()
            .and_then(|o| Some((o.clone(), o.cancelling.clone()?)))
        else {
            return Ok(());
        };
        let currency = self.catalog.get(&order.show_id).await?.map_or_else(
            || self.catalog.default_currency(),
            |entry| entry.show.currency,
        );
        let amount = minor_units(currency, pending.amount_cents)?;
        let key = line_refund_key(charge_id, pending.number);
        let refund_id = self.refund_part(charge_id, Some(amount), &key).await?;
        let booking_id = order.order_id.booking_id();
        for hold_id in pending.holds(&state) {
            if pending.freed.contains(&hold_id) {
                continue;
            }
            let record = self.stored_hold(&hold_id).await?;
            let lines = pending.lines_of(&state, hold_id);
            let units = self.lines_units(&record, &lines).await?;
            let finish = Finish::FreeLines {
                refund_id: refund_id.clone(),
                places: lines.len() as u32,
            };
            if let Finished::Moved = self
                .finish_on(ctx, &record, checkout, finish, booking_id, units)
                .await?
            {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The units a cancellation frees of one hold: the lines' seats, or
    /// every shard of the hold's pool. The order books all its holds'
    /// places in a pool under one booking id, so a place of this hold may
    /// have been returned from a shard of another of its holds (places of
    /// one pool are alike).
    async fn lines_units(
        &self,
        record: &HoldRecord,
        lines: &[&OrderLine],
    ) -> Result<HoldUnits, CheckoutError> {
        let Some((pool_id, _)) = &record.pool else {
            let mut seats: Vec<(String, SeatKey)> = lines
                .iter()
                .filter_map(|l| l.seat_id.as_ref())
                .map(|seat_id| SeatKey::unit(&record.show_id, seat_id))
                .collect();
            Seat::sort(&mut seats);
            return Ok(HoldUnits::Seats(seats));
        };
        let entry = self.show_of(record).await?;
        let spec = entry
            .show
            .pool(pool_id)
            .ok_or_else(|| StoreError::Corrupt(format!("pool {pool_id} of an order is missing")))?;
        let mut shards: Vec<(String, ShardKey)> = (0..spec.shards)
            .map(|index| ShardKey::unit(&record.show_id, spec, index))
            .collect();
        PoolShard::sort(&mut shards);
        Ok(HoldUnits::Pool(shards))
    }
}

/// Holds of the order as locked that a step still has to take, as `pick`
/// lists them.
fn pending_holds(
    checkout: &CheckoutLock,
    pick: impl FnOnce(&Order) -> Vec<HoldId>,
) -> Result<Vec<HoldId>, CheckoutError> {
    checkout
        .aggregate()
        .order
        .as_ref()
        .map(pick)
        .ok_or_else(|| {
            StoreError::Corrupt(format!("checkout {} is not an order", checkout.id())).into()
        })
}
