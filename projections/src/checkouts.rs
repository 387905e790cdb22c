//! The checkout row: where each purchase stands, and the booking it made.
//! One row per hold, written with the checkout's events and guarded by the
//! stream sequence; bookings are read from it, and recovery finds the
//! purchases left half way by its `phase`.

use domain::checkout::{Checkout, Phase, RefundReason};
use domain::ids::{BookingId, BuyerId, HoldId, ShowId};
use serde::{Deserialize, Serialize};

/// A row of `checkouts`. Field names are the column names (see
/// `availability::SeatAvailabilityRow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckoutRow {
    pub hold_id: HoldId,
    pub show_id: ShowId,
    pub buyer: BuyerId,
    /// [`domain::checkout::Phase::name`].
    pub phase: String,
    pub booking_id: Option<BookingId>,
    /// The provider's payment (PaymentIntent) or charge id.
    pub charge_id: Option<String>,
    pub refund_id: Option<String>,
    /// Why a payment was voided or refunded (`hold_expired`, `hold_released`).
    pub refund_reason: Option<String>,
    pub amount_cents: Option<i64>,
    /// The stream sequence this row is the fold of.
    pub last_seq: i64,
    /// When the checkout's last event was recorded (recovery drains the
    /// oldest first).
    pub updated_at_us: i64,
}

fn reason_name(reason: RefundReason) -> &'static str {
    match reason {
        RefundReason::HoldExpired => "hold_expired",
        RefundReason::HoldReleased => "hold_released",
        RefundReason::HoldConverted => "hold_converted",
    }
}

impl CheckoutRow {
    /// The row of a checkout whose stream is at `last_seq`; `None` for a
    /// checkout that has no event yet.
    pub fn of(checkout: &Checkout, last_seq: i64, updated_at_us: i64) -> Option<Self> {
        // The column holds the checkout's stream id: its hold's id, or for
        // an order the order's (recovery and the provider's notices find
        // both by it). An order has no booking of its own: its units are
        // booked under the order, which `GET /v1/orders/{id}` answers.
        let order_id = checkout.order.as_ref().map(|o| HoldId(o.order_id().0));
        let mut row = Self {
            hold_id: checkout.hold_id.or(order_id)?,
            show_id: checkout.show_id.clone()?,
            buyer: checkout.buyer.clone()?,
            phase: checkout.phase.name().to_owned(),
            booking_id: None,
            charge_id: None,
            refund_id: None,
            refund_reason: None,
            amount_cents: None,
            last_seq,
            updated_at_us,
        };
        row.charge_id = checkout.phase.payment_id().map(str::to_owned);
        row.amount_cents = checkout.phase.amount_cents();
        match &checkout.phase {
            Phase::Completed { booking_id, .. }
            | Phase::CancelRequested { booking_id, .. }
            | Phase::LinesCancelRequested { booking_id, .. }
            | Phase::ReversalRequested { booking_id, .. }
            | Phase::Reversed { booking_id, .. } => row.booking_id = Some(*booking_id),
            Phase::Cancelled {
                booking_id,
                refund_id,
                ..
            } => {
                row.booking_id = Some(*booking_id);
                row.refund_id = Some(refund_id.clone());
            }
            Phase::RefundRequested { reason, .. }
            | Phase::VoidRequested { reason, .. }
            | Phase::Voided { reason, .. } => {
                row.refund_reason = Some(reason_name(*reason).to_owned());
            }
            Phase::Refunded {
                refund_id, reason, ..
            } => {
                row.refund_id = Some(refund_id.clone());
                row.refund_reason = Some(reason_name(*reason).to_owned());
            }
            // The booking of a converted checkout is public once its money
            // is captured (`Completed`).
            Phase::Idle
            | Phase::Requested { .. }
            | Phase::ActionRequired { .. }
            | Phase::Authorized { .. }
            | Phase::Converted { .. }
            | Phase::Captured { .. } => {}
        }
        if order_id.is_some() {
            row.booking_id = None;
        }
        Some(row)
    }
}
