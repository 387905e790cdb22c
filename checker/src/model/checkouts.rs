//! The checker's fold of the Checkout streams: a hold's purchase, or an
//! order of holds (its lines, their cancellations and refunds). What a
//! checkout sold at the end is what the other properties compare with.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::rows::{strings, LogEvent};

/// One line of an order, as its terms fixed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub line_id: u64,
    pub hold_id: String,
    pub seat_id: Option<String>,
    pub pool_id: Option<String>,
    pub ticket_type: String,
    pub price_cents: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckoutFacts {
    /// The stream id: the hold's id, or the order's.
    pub id: String,
    pub show_id: String,
    pub buyer: String,
    /// An order's holds and lines (empty for a hold's purchase).
    pub order_holds: Vec<String>,
    pub lines: Vec<Line>,
    /// A box-office sale (`terms.sale`), e.g. `{"payment": "comp", ...}`.
    pub sale: Option<Value>,
    pub amount_cents: i64,
    pub payments: BTreeSet<String>,
    pub converted_holds: BTreeSet<String>,
    pub given_back: BTreeSet<String>,
    pub booking_id: Option<String>,
    pub completed: Option<(String, i64)>,
    pub captured_charges: Vec<String>,
    /// When each `PaymentCaptured` was recorded: its append's instant.
    pub captured_us: Vec<i64>,
    pub voided: bool,
    pub void_holds: Vec<String>,
    pub reversed: bool,
    pub cancelled: Option<String>,
    pub cancelled_lines: BTreeSet<u64>,
    /// (refund id, lines, amount) of each line cancellation.
    pub line_refunds: Vec<(String, Vec<u64>, i64)>,
    pub refunds: Vec<String>,
    /// When the whole cancellation was recorded (`CheckoutCancelled`, in
    /// the append that frees the units).
    pub cancelled_us: Option<i64>,
    /// The lines of the line cancellation in progress (`LinesCancelRequested`).
    pub cancelling: Vec<u64>,
    /// Each `OrderLinesFreed` (in the append that frees a hold's cancelled
    /// lines' units): when, the hold, and the lines then being cancelled.
    pub lines_freed: Vec<(i64, String, Vec<u64>)>,
    pub first_us: i64,
}

impl CheckoutFacts {
    pub fn is_order(&self) -> bool {
        !self.order_holds.is_empty()
    }

    /// Completed and neither cancelled nor reversed: it sold something.
    pub fn stands(&self) -> bool {
        self.completed.is_some() && self.cancelled.is_none() && !self.reversed
    }

    /// The order's lines still confirmed.
    pub fn confirmed_lines(&self) -> impl Iterator<Item = &Line> {
        let stands = self.stands();
        self.lines
            .iter()
            .filter(move |l| stands && !self.cancelled_lines.contains(&l.line_id))
    }
}

pub fn fold(log: &[LogEvent]) -> BTreeMap<String, CheckoutFacts> {
    let mut checkouts: BTreeMap<String, CheckoutFacts> = BTreeMap::new();
    for event in log.iter().filter(|e| e.aggregate_type == "Checkout") {
        let facts = checkouts
            .entry(event.aggregate_id.clone())
            .or_insert_with(|| CheckoutFacts {
                id: event.aggregate_id.clone(),
                first_us: event.recorded_at_us,
                ..CheckoutFacts::default()
            });
        apply(facts, event);
    }
    checkouts
}

fn apply(c: &mut CheckoutFacts, e: &LogEvent) {
    let text = |field: &str| e.str(field).unwrap_or_default().to_owned();
    match e.event_type.as_str() {
        "PurchaseRequested" => {
            c.show_id = text("show_id");
            c.buyer = text("buyer");
            c.amount_cents = e.i64("amount_cents").unwrap_or(0);
        }
        "OrderRequested" => order_requested(c, e),
        "PaymentCreated" | "PaymentAuthorized" | "PaymentActionRequired" => {
            c.payments.insert(text("payment_id"));
        }
        "PaymentCaptured" => {
            c.captured_charges.push(text("charge_id"));
            c.captured_us.push(e.recorded_at_us);
        }
        "OrderHoldConverted" => {
            c.converted_holds.insert(text("hold_id"));
        }
        "OrderHoldGivenBack" => {
            c.given_back.insert(text("hold_id"));
        }
        "CheckoutConverted" => c.booking_id = Some(text("booking_id")),
        "CheckoutCompleted" => {
            c.booking_id = Some(text("booking_id"));
            c.completed = Some((text("charge_id"), e.i64("amount_cents").unwrap_or(0)));
        }
        "VoidRequested" => c.void_holds = e.strings("holds"),
        "PaymentVoided" => c.voided = true,
        "BookingReversed" => c.reversed = true,
        "CheckoutCancelled" => {
            c.cancelled = Some(text("booking_id"));
            c.cancelled_us.get_or_insert(e.recorded_at_us);
            c.refunds.push(text("refund_id"));
        }
        "PaymentRefunded" => c.refunds.push(text("refund_id")),
        "LinesCancelRequested" => c.cancelling = line_ids(e),
        "OrderLinesFreed" => {
            let freed = (e.recorded_at_us, text("hold_id"), c.cancelling.clone());
            c.lines_freed.push(freed);
        }
        "LinesCancelled" => {
            let lines = line_ids(e);
            c.cancelled_lines.extend(lines.iter().copied());
            c.line_refunds
                .push((text("refund_id"), lines, e.i64("amount_cents").unwrap_or(0)));
        }
        _ => {}
    }
}

/// The event's `lines` (line ids).
fn line_ids(e: &LogEvent) -> Vec<u64> {
    (e.data().get("lines").and_then(Value::as_array))
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

fn order_requested(c: &mut CheckoutFacts, e: &LogEvent) {
    c.show_id = e.str("show_id").unwrap_or_default().to_owned();
    c.buyer = e.str("buyer").unwrap_or_default().to_owned();
    c.amount_cents = e.i64("amount_cents").unwrap_or(0);
    let terms = e.data().get("terms").cloned().unwrap_or_default();
    c.order_holds = strings(terms.get("holds"));
    c.sale = terms.get("sale").cloned();
    let lines = terms.get("lines").and_then(Value::as_array);
    c.lines = lines
        .map(|lines| lines.iter().filter_map(line).collect())
        .unwrap_or_default();
}

fn line(value: &Value) -> Option<Line> {
    let text = |field: &str| value.get(field).and_then(Value::as_str).map(str::to_owned);
    Some(Line {
        line_id: value.get("line_id")?.as_u64()?,
        hold_id: text("hold_id")?,
        seat_id: text("seat_id"),
        pool_id: text("pool_id"),
        ticket_type: text("ticket_type")?,
        price_cents: value.get("price_cents")?.as_i64()?,
    })
}
