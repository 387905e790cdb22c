//! An order: several holds of one buyer and show, paid once and cancelled
//! line by line. Its purchase is a Checkout stream of its own (the stream
//! id is the order id) with the same phases as a hold's, so the same drive,
//! recovery and provider steps serve both; what is an order's alone is
//! here:
//!
//! - the **terms**: the holds, and one line per seat and per pool place,
//!   each with its price, fixed when the order is first requested;
//! - **conversion hold by hold**: in the `Authorized` phase each hold is
//!   converted in its own append with `OrderHoldConverted`; the last one
//!   appends `CheckoutConverted` as well (then capture, as for a hold);
//! - **give-back**: a hold lost before its conversion voids the order
//!   (`VoidRequested` naming the lost holds); the holds converted before it
//!   are given back (`OrderHoldGivenBack`, with their units freed in the
//!   same append) before the authorization is cancelled, so no unit stays
//!   booked for an order that was not paid;
//! - **partial cancellation**: `LinesCancelRequested` (the lines and their
//!   amount, recorded before the refund is asked of the provider), then
//!   the refund (one per cancellation, its key from the order's charge and
//!   the cancellation's number), then the lines' units freed hold by hold
//!   (`OrderLinesFreed`, one append each), the last with `LinesCancelled`. A line is cancelled once: a request's lines are those still
//!   confirmed, and one cancellation runs at a time (the stream's version).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::ids::{BuyerId, CategoryId, HoldId, OrderId, PoolId, SeatId, TicketType};

/// A line's number within its order, from 1.
pub type LineId = u32;

/// One seat, or one place of a pool, of an order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderLine {
    pub line_id: LineId,
    pub hold_id: HoldId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat_id: Option<SeatId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<PoolId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<CategoryId>,
    pub ticket_type: TicketType,
    pub price_cents: i64,
}

/// What an order is for, as first requested (events carry it whole).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderTerms {
    pub order_id: OrderId,
    /// In the order the buyer named them.
    pub holds: Vec<HoldId>,
    pub lines: Vec<OrderLine>,
    /// A sale at the box office: who sold it and how it was paid, outside
    /// any payment provider (absent: paid online).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sale: Option<BoxOfficeSale>,
}

/// How the box office was paid: nothing goes through a provider, and a
/// refund is made at the counter (`offline`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OfflinePayment {
    Cash,
    CardPresent,
    Invoice,
    /// Given away: priced 0.
    Comp,
}

impl OfflinePayment {
    pub fn as_str(self) -> &'static str {
        match self {
            OfflinePayment::Cash => "cash",
            OfflinePayment::CardPresent => "card_present",
            OfflinePayment::Invoice => "invoice",
            OfflinePayment::Comp => "comp",
        }
    }
}

/// Who sold a box-office order and how it was paid, with the clerk's note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoxOfficeSale {
    pub sold_by: BuyerId,
    pub payment: OfflinePayment,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl OrderTerms {
    /// What the order costs: the sum of its lines.
    pub fn amount_cents(&self) -> i64 {
        self.lines.iter().map(|l| l.price_cents).sum()
    }
}

/// A refund of some lines (one per cancellation request).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRefund {
    pub refund_id: String,
    pub amount_cents: i64,
    pub lines: Vec<LineId>,
}

/// A cancellation recorded, its refund not yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingCancellation {
    /// The cancellation's number in the order (from 1): with the order's
    /// charge, the refund's idempotency key.
    pub number: u32,
    pub lines: Vec<LineId>,
    pub amount_cents: i64,
    /// Holds whose lines of this cancellation are freed already.
    #[serde(default)]
    pub freed: BTreeSet<HoldId>,
}

impl PendingCancellation {
    /// The holds that have lines in this cancellation, in the order's order.
    pub fn holds(&self, order: &Order) -> Vec<HoldId> {
        let mut holds: Vec<HoldId> = order
            .terms
            .lines
            .iter()
            .filter(|l| self.lines.contains(&l.line_id))
            .map(|l| l.hold_id)
            .collect();
        holds.dedup();
        holds
    }

    /// This cancellation's lines of `hold_id`.
    pub fn lines_of<'o>(&self, order: &'o Order, hold_id: HoldId) -> Vec<&'o OrderLine> {
        order
            .terms
            .lines
            .iter()
            .filter(|l| l.hold_id == hold_id && self.lines.contains(&l.line_id))
            .collect()
    }
}

/// An order's state beside its checkout's phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    pub terms: OrderTerms,
    /// Holds whose units are booked for the order (and not given back).
    pub converted: BTreeSet<HoldId>,
    /// The holds that were lost before conversion (the order was voided).
    pub lost: Vec<HoldId>,
    pub cancelled: BTreeSet<LineId>,
    pub refunds: Vec<LineRefund>,
    pub cancelling: Option<PendingCancellation>,
}

impl Order {
    pub fn new(terms: OrderTerms) -> Self {
        Self {
            terms,
            converted: BTreeSet::new(),
            lost: Vec::new(),
            cancelled: BTreeSet::new(),
            refunds: Vec::new(),
            cancelling: None,
        }
    }

    pub fn order_id(&self) -> OrderId {
        self.terms.order_id
    }

    /// The holds still to convert, in the order's order.
    pub fn unconverted(&self) -> impl Iterator<Item = HoldId> + '_ {
        self.terms
            .holds
            .iter()
            .copied()
            .filter(|h| !self.converted.contains(h))
    }

    /// Whether every hold is converted once `hold_id` is.
    pub fn all_converted_with(&self, hold_id: HoldId) -> bool {
        self.unconverted().all(|h| h == hold_id)
    }

    /// Lines neither cancelled nor being cancelled.
    pub fn confirmed_lines(&self) -> impl Iterator<Item = &OrderLine> + '_ {
        let pending: &[LineId] = self.cancelling.as_ref().map_or(&[], |c| &c.lines);
        self.terms
            .lines
            .iter()
            .filter(move |l| !self.cancelled.contains(&l.line_id) && !pending.contains(&l.line_id))
    }

    pub fn refunded_cents(&self) -> i64 {
        self.refunds.iter().map(|r| r.amount_cents).sum()
    }

    /// The lines a cancellation asking for `asked` (every confirmed line
    /// when empty) would cancel now, and their amount: those still
    /// confirmed; a line cancelled before, or being cancelled, is not
    /// refunded again. `Err` names a line the order does not have.
    pub fn lines_to_cancel(&self, asked: &[LineId]) -> Result<(Vec<LineId>, i64), LineId> {
        if let Some(unknown) = asked
            .iter()
            .find(|id| !self.terms.lines.iter().any(|l| l.line_id == **id))
        {
            return Err(*unknown);
        }
        let lines: Vec<&OrderLine> = self
            .confirmed_lines()
            .filter(|l| asked.is_empty() || asked.contains(&l.line_id))
            .collect();
        let amount = lines.iter().map(|l| l.price_cents).sum();
        Ok((lines.iter().map(|l| l.line_id).collect(), amount))
    }

    /// Whether every line is cancelled.
    pub fn fully_cancelled(&self) -> bool {
        self.terms
            .lines
            .iter()
            .all(|l| self.cancelled.contains(&l.line_id))
    }
}

/// The refund key of an order's `number`-th cancellation: one refund per
/// cancellation, and the same one if it is asked again after a crash.
pub fn line_refund_key(charge_id: &str, number: u32) -> String {
    format!("refund:{charge_id}:cancellation:{number}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn line(line_id: LineId, hold: u128, price_cents: i64) -> OrderLine {
        OrderLine {
            line_id,
            hold_id: HoldId(Uuid::from_u128(hold)),
            seat_id: Some(SeatId::parse(&format!("A-{line_id}")).expect("a seat id")),
            pool_id: None,
            category: None,
            ticket_type: TicketType::standard(),
            price_cents,
        }
    }

    fn order() -> Order {
        let holds = vec![HoldId(Uuid::from_u128(1)), HoldId(Uuid::from_u128(2))];
        Order::new(OrderTerms {
            order_id: OrderId::for_holds(&holds),
            holds,
            lines: vec![line(1, 1, 1000), line(2, 1, 1000), line(3, 2, 500)],
            sale: None,
        })
    }

    #[test]
    fn it_should_name_one_order_for_the_same_holds_in_any_order() {
        let (a, b) = (HoldId(Uuid::from_u128(1)), HoldId(Uuid::from_u128(2)));
        assert_eq!(OrderId::for_holds(&[a, b]), OrderId::for_holds(&[b, a]));
        assert_ne!(OrderId::for_holds(&[a, b]), OrderId::for_holds(&[a]));
    }

    #[test]
    fn it_should_cancel_every_confirmed_line_when_none_is_named() {
        let order = order();
        assert_eq!(order.lines_to_cancel(&[]), Ok((vec![1, 2, 3], 2500)));
    }

    #[test]
    fn it_should_not_cancel_a_line_twice() {
        let mut order = order();
        order.cancelled.insert(1);
        order.cancelling = Some(PendingCancellation {
            number: 2,
            lines: vec![3],
            amount_cents: 500,
            freed: BTreeSet::new(),
        });
        assert_eq!(order.lines_to_cancel(&[1, 2, 3]), Ok((vec![2], 1000)));
    }

    #[test]
    fn it_should_name_a_line_the_order_does_not_have() {
        assert_eq!(order().lines_to_cancel(&[2, 9]), Err(9));
    }

    #[test]
    fn it_should_know_when_the_last_hold_converts() {
        let mut order = order();
        let (a, b) = (HoldId(Uuid::from_u128(1)), HoldId(Uuid::from_u128(2)));
        assert!(!order.all_converted_with(a));
        order.converted.insert(a);
        assert!(order.all_converted_with(b));
    }
}
