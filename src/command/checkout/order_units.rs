//! An order's steps on its holds' units: converting them all in one
//! append (`convert_order.rs`), and one hold (one append) at a time, each
//! with the order's checkout event that records it, giving converted ones
//! back before a reversal (`GiveBack`) and freeing cancelled lines
//! (`FreeLines`). A crash between two holds leaves the stream saying which
//! are done; the drive goes on from there.

use std::collections::BTreeMap;

use domain::checkout::CheckoutCommand;
use domain::ids::HoldId;
use domain::order::{line_refund_key, Order, OrderLine};
use domain::seat::Seat;

use super::convert_order::{ConvertingOrder, OrderConversion, OrderHold};
use super::drive::minor_units;
use super::finish::{Finish, Finished};
use super::{CheckoutError, CheckoutService, OrderSubject, Subject};
use crate::command::context::RequestContext;
use crate::command::round::{BuyerLimit, CheckoutLock, Round, Settled};
use crate::command::streams::Stream;
use crate::command::units::{units_of, HoldUnits, Refusal, SeatKey};
use crate::store::{HoldRecord, StoreError};

impl CheckoutService {
    /// Authorized: converts every hold of the order not yet converted, and
    /// the checkout, in one append (`convert_order.rs`). A hold found lost
    /// (expired, released, bought elsewhere) converts none and requests
    /// the void, naming every hold lost; the others stay as they were.
    pub(super) async fn convert_order(
        &self,
        ctx: &RequestContext,
        order: &OrderSubject,
        checkout: &mut CheckoutLock,
    ) -> Result<(), CheckoutError> {
        let mut holds = Vec::new();
        let (mut seats, mut shards) = (Vec::new(), Vec::new());
        for hold_id in pending_holds(checkout, |o| o.unconverted().collect())? {
            let record = self.stored_hold(&hold_id).await?;
            match units_of(&record, &self.show_of(&record).await?.show)? {
                HoldUnits::Seats(units) => seats.extend(units),
                HoldUnits::Pool(units) => shards.extend(units),
            }
            holds.push(OrderHold::of(&record));
        }
        // Two holds of one pool may share a shard: locked once.
        shards.sort_by(|a: &(String, _), b| a.0.cmp(&b.0));
        shards.dedup_by(|a, b| a.0 == b.0);
        let entry = self.catalog.get(&order.show_id).await?.ok_or_else(|| {
            StoreError::Corrupt(format!("show of order {} is missing", order.order_id))
        })?;
        let buyer = checkout.aggregate().buyer.clone();
        let round = Round::new("convert_order", ctx)
            .with_checkout(checkout)
            .with_shards(shards)
            .counting(buyer.and_then(|b| BuyerLimit::of(&entry.show, &b)));
        let mut converting = ConvertingOrder {
            booking_id: order.order_id.booking_id(),
            holds,
        };
        let lost = match self.rounds.run(round, seats, &mut converting).await? {
            Settled::Answered(OrderConversion::Lost(lost)) => lost,
            Settled::Appended(_) | Settled::Answered(_) => return Ok(()),
            Settled::KeyTaken => {
                return Err(CheckoutError::Bug(
                    "an order's conversion took an idempotency key".into(),
                ))
            }
        };
        self.request_order_void(ctx, order, checkout, lost).await
    }

    /// Some holds of the order were lost before its conversion: the void
    /// is requested, naming them, with the first one's reason.
    async fn request_order_void(
        &self,
        ctx: &RequestContext,
        order: &OrderSubject,
        checkout: &mut CheckoutLock,
        lost: Vec<(HoldId, Refusal)>,
    ) -> Result<(), CheckoutError> {
        let Some(&(first, refusal)) = lost.first() else {
            return Ok(());
        };
        let reason = self.refund_reason(first, refusal).await?;
        let holds = lost.into_iter().map(|(hold_id, _)| hold_id).collect();
        tracing::warn!(order_id = %order.order_id, hold_id = %first, ?reason, "a hold of the order was lost before conversion; voiding, nothing converted");
        let command = CheckoutCommand::RequestVoid { reason, holds };
        self.record(ctx, checkout, &command).await?;
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

    /// Lines being cancelled: revokes their tickets, refunds them (one
    /// partial refund, keyed by the cancellation's number, so asked again
    /// after a crash it is the same refund) and frees their units hold by
    /// hold, the last hold with the cancellation's end.
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
        // The lines' tickets first: a unit is freed for sale only once no
        // valid ticket admits to it.
        if let Some(sale) = super::tickets::sale_of(subject, checkout.aggregate()) {
            self.revoke_tickets(ctx, &sale, pending.lines.iter().copied())
                .await?;
        }
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
                number: pending.number,
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
    /// the shards of the hold's pool parts (each line is given back from
    /// its own hold's sale, never another hold's of the order).
    async fn lines_units(
        &self,
        record: &HoldRecord,
        lines: &[&OrderLine],
    ) -> Result<HoldUnits, CheckoutError> {
        if record.pool.is_some() {
            return Ok(units_of(record, &self.show_of(record).await?.show)?);
        }
        let mut seats: Vec<(String, SeatKey)> = lines
            .iter()
            .filter_map(|l| l.seat_id.as_ref())
            .map(|seat_id| SeatKey::unit(&record.show_id, seat_id))
            .collect();
        Seat::sort(&mut seats);
        Ok(HoldUnits::Seats(seats))
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
