//! Bookings: the answer for a settled checkout, `GET /v1/bookings/{id}` and
//! `POST /v1/bookings/{id}/cancel`.

use domain::checkout::{Checkout, CheckoutCommand, Phase};
use domain::ids::{BookingId, HoldId, SeatId};
use projections::checkouts::CheckoutRow;

use super::{BookingStatus, BookingView, CheckoutError, CheckoutService, Subject};
use crate::auth::Actor;
use crate::command::context::RequestContext;
use crate::store::{HoldRecord, StoreError};

impl CheckoutService {
    /// The answer for a settled checkout: the booking, or why there is none.
    pub(super) async fn answer(
        &self,
        record: &HoldRecord,
        checkout: &Checkout,
    ) -> Result<BookingView, CheckoutError> {
        match &checkout.phase {
            Phase::Completed {
                booking_id,
                charge_id,
                amount_cents,
            }
            | Phase::CancelRequested {
                booking_id,
                charge_id,
                amount_cents,
            } => {
                self.booking_view(
                    record,
                    *booking_id,
                    charge_id,
                    *amount_cents,
                    BookingStatus::Confirmed,
                )
                .await
            }
            Phase::Cancelled {
                booking_id,
                charge_id,
                amount_cents,
                ..
            } => {
                self.booking_view(
                    record,
                    *booking_id,
                    charge_id,
                    *amount_cents,
                    BookingStatus::Cancelled,
                )
                .await
            }
            Phase::Refunded { reason, .. } => Err(CheckoutError::lost(*reason, true, false)),
            Phase::Voided { reason, .. } => Err(CheckoutError::lost(*reason, false, true)),
            Phase::Reversed { booking_id, .. } => Err(CheckoutError::Reversed(*booking_id)),
            Phase::Idle
            | Phase::Requested { .. }
            | Phase::ActionRequired { .. }
            | Phase::Authorized { .. }
            | Phase::Converted { .. }
            | Phase::VoidRequested { .. }
            | Phase::ReversalRequested { .. }
            | Phase::Captured { .. }
            | Phase::RefundRequested { .. }
            | Phase::LinesCancelRequested { .. } => Err(CheckoutError::Busy),
        }
    }

    async fn booking_view(
        &self,
        record: &HoldRecord,
        booking_id: BookingId,
        charge_id: &str,
        amount_cents: i64,
        status: BookingStatus,
    ) -> Result<BookingView, CheckoutError> {
        let mut seats = record.seats.clone();
        if let Some(entry) = self.catalog.get(&record.show_id).await? {
            entry.sort_seats(&mut seats);
        }
        Ok(BookingView {
            booking_id,
            hold_id: record.hold_id,
            quantity: record.quantity(),
            pool_id: record.pool.as_ref().map(|(pool_id, _)| pool_id.to_string()),
            show_id: record.show_id.to_string(),
            seats: seats.iter().map(SeatId::to_string).collect(),
            amount_cents,
            charge_id: charge_id.to_owned(),
            status: match status {
                BookingStatus::Confirmed => "confirmed",
                BookingStatus::Cancelled | BookingStatus::Undone => "cancelled",
            },
            refunded: status == BookingStatus::Cancelled,
        })
    }

    /// A booking as the API shows it, from the checkout event that
    /// confirmed, cancelled or undid it: what a webhook carries, the
    /// booking as of that event rather than as of now.
    pub async fn booking_at_event(
        &self,
        hold_id: &HoldId,
        booking_id: BookingId,
        charge_id: &str,
        amount_cents: i64,
        status: BookingStatus,
    ) -> Result<BookingView, CheckoutError> {
        let record = self.stored_hold(hold_id).await?;
        self.booking_view(&record, booking_id, charge_id, amount_cents, status)
            .await
    }

    pub(super) async fn booking_record(
        &self,
        actor: &Actor,
        booking_id: BookingId,
    ) -> Result<CheckoutRow, CheckoutError> {
        let record = self
            .checkouts
            .checkout_by_booking(&booking_id)
            .await?
            .ok_or(CheckoutError::BookingNotFound)?;
        if !actor.may_act_for(record.buyer.as_str()) {
            return Err(CheckoutError::Forbidden);
        }
        Ok(record)
    }

    pub(super) async fn stored_hold(&self, hold_id: &HoldId) -> Result<HoldRecord, CheckoutError> {
        Ok(self.records.hold(hold_id).await?.ok_or_else(|| {
            StoreError::Corrupt(format!("hold {hold_id} of a checkout is missing"))
        })?)
    }

    /// `GET /v1/bookings/{id}`.
    pub async fn booking(
        &self,
        actor: &Actor,
        booking_id: BookingId,
    ) -> Result<BookingView, CheckoutError> {
        let checkout = self.booking_record(actor, booking_id).await?;
        let hold = self.stored_hold(&checkout.hold_id).await?;
        let charge_id = checkout.charge_id.unwrap_or_default();
        let amount_cents = checkout.amount_cents.unwrap_or_default();
        let status = match checkout.phase.as_str() {
            "cancelled" => BookingStatus::Cancelled,
            "reversal_requested" | "reversed" => BookingStatus::Undone,
            _ => BookingStatus::Confirmed,
        };
        self.booking_view(&hold, booking_id, &charge_id, amount_cents, status)
            .await
    }

    /// `POST /v1/bookings/{id}/cancel`: refunds and frees the seats. Cancelling
    /// again answers the same cancelled booking.
    pub async fn cancel(
        &self,
        ctx: &RequestContext,
        booking_id: BookingId,
    ) -> Result<BookingView, CheckoutError> {
        let checkout = self.booking_record(&ctx.actor, booking_id).await?;
        let hold = Subject::Hold(self.stored_hold(&checkout.hold_id).await?);
        let mut locked = self.rounds.lock_checkout(checkout.hold_id).await?;
        self.record(ctx, &mut locked, &CheckoutCommand::RequestCancel)
            .await?;
        self.drive(ctx, &hold, &mut locked, None).await?;
        let Subject::Hold(hold) = hold else {
            return Err(CheckoutError::Bug(
                "a booking's cancel lost its hold".into(),
            ));
        };
        match &locked.aggregate().phase {
            Phase::Cancelled { .. } => self.answer(&hold, locked.aggregate()).await,
            _ => Err(CheckoutError::Busy),
        }
    }
}
