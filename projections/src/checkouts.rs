//! The checkout row: where each purchase stands, and the booking it made.
//! One row per hold, written with the checkout's events and guarded by the
//! stream sequence; bookings are read from it, and recovery finds the
//! purchases left half way by its `phase`.

use domain::checkout::{Checkout, Phase, RefundReason};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutRow {
    pub hold_id: String,
    pub show_id: String,
    pub buyer: String,
    pub phase: &'static str,
    pub booking_id: Option<String>,
    pub charge_id: Option<String>,
    pub refund_id: Option<String>,
    pub refund_reason: Option<&'static str>,
    pub amount_cents: Option<i64>,
}

fn reason_name(reason: RefundReason) -> &'static str {
    match reason {
        RefundReason::HoldExpired => "hold_expired",
        RefundReason::HoldReleased => "hold_released",
    }
}

impl CheckoutRow {
    /// `None` for a checkout that has no event yet.
    pub fn of(checkout: &Checkout) -> Option<Self> {
        let mut row = Self {
            hold_id: checkout.hold_id?.to_string(),
            show_id: checkout.show_id.as_ref()?.to_string(),
            buyer: checkout.buyer.as_ref()?.to_string(),
            phase: checkout.phase.name(),
            booking_id: None,
            charge_id: None,
            refund_id: None,
            refund_reason: None,
            amount_cents: None,
        };
        match &checkout.phase {
            Phase::Idle => {}
            Phase::Requested { amount_cents, .. } => row.amount_cents = Some(*amount_cents),
            Phase::Captured {
                charge_id,
                amount_cents,
                ..
            } => {
                row.charge_id = Some(charge_id.clone());
                row.amount_cents = Some(*amount_cents);
            }
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
                row.booking_id = Some(booking_id.to_string());
                row.charge_id = Some(charge_id.clone());
                row.amount_cents = Some(*amount_cents);
            }
            Phase::RefundRequested {
                charge_id,
                amount_cents,
                reason,
            } => {
                row.charge_id = Some(charge_id.clone());
                row.amount_cents = Some(*amount_cents);
                row.refund_reason = Some(reason_name(*reason));
            }
            Phase::Refunded {
                charge_id,
                refund_id,
                amount_cents,
                reason,
            } => {
                row.charge_id = Some(charge_id.clone());
                row.refund_id = Some(refund_id.clone());
                row.amount_cents = Some(*amount_cents);
                row.refund_reason = Some(reason_name(*reason));
            }
            Phase::Cancelled {
                booking_id,
                charge_id,
                refund_id,
                amount_cents,
            } => {
                row.booking_id = Some(booking_id.to_string());
                row.charge_id = Some(charge_id.clone());
                row.refund_id = Some(refund_id.clone());
                row.amount_cents = Some(*amount_cents);
            }
        }
        Some(row)
    }
}
