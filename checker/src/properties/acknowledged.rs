//! Every acknowledged sale is in the log and still confirmed at the end,
//! unless a cancellation (acknowledged, or of unknown outcome) ended it;
//! a request whose outcome was unknown happened at most once.

use std::collections::{BTreeMap, BTreeSet};

use crate::evidence::Evidence;
use crate::history::Record;
use crate::model::Model;
use crate::report::Violation;

/// The sales the history acknowledged (201/200): (checkout id, booking id, record).
fn acknowledged(history: &[Record]) -> Vec<(String, String, &Record)> {
    let mut sales = Vec::new();
    for r in history
        .iter()
        .filter(|r| matches!(r.outcome.status(), Some(200 | 201)))
    {
        let body = r.outcome.body();
        match r.op.as_str() {
            "purchase" => {
                if let (Some(hold), Some(booking)) =
                    (body["hold_id"].as_str(), body["booking_id"].as_str())
                {
                    sales.push((hold.to_owned(), booking.to_owned(), r));
                }
            }
            "order" | "box_office" => {
                if let Some(order) = body["order_id"].as_str() {
                    sales.push((order.to_owned(), order.to_owned(), r));
                }
            }
            _ => {}
        }
    }
    sales
}

/// Bookings and orders some cancellation request named (any outcome).
fn cancelled_by_request(history: &[Record]) -> BTreeSet<String> {
    (history.iter())
        .filter(|r| r.op == "cancel_booking" || r.op == "cancel_lines")
        .filter(|r| !matches!(r.outcome, crate::history::Outcome::NotSent { .. }))
        .filter_map(|r| r.path.split('/').nth(3).map(str::to_owned))
        .collect()
}

pub fn sales_stand(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    let cancelled = cancelled_by_request(&evidence.history);
    let mut out = Vec::new();
    for (checkout_id, booking, record) in acknowledged(&evidence.history) {
        let ids = vec![checkout_id.clone(), booking.clone()];
        let Some(c) = model.checkouts.get(&checkout_id) else {
            out.push(Violation::new(
                "acknowledged_sales_stand",
                format!(
                    "{} answered {} for {checkout_id}, which the log does not have",
                    record.op,
                    record.outcome.status().unwrap_or(0)
                ),
                ids,
            ));
            continue;
        };
        if c.completed.is_none() || c.booking_id.as_deref() != Some(booking.as_str()) {
            out.push(Violation::new(
                "acknowledged_sales_stand",
                format!(
                    "{checkout_id}: {} acknowledged booking {booking}, the log never completed it",
                    record.op
                ),
                ids,
            ));
        } else if !c.stands() && !cancelled.contains(&booking) {
            out.push(Violation::new("acknowledged_sales_stand", format!("{checkout_id}: booking {booking} acknowledged, not standing at the end, and nobody cancelled it"), ids));
        } else if c.is_order() && !c.cancelled_lines.is_empty() && !cancelled.contains(&booking) {
            out.push(Violation::new(
                "acknowledged_sales_stand",
                format!(
                    "order {checkout_id}: lines {:?} cancelled with no cancellation asked for",
                    c.cancelled_lines
                ),
                ids,
            ));
        }
    }
    out
}

/// One hold per (buyer, idempotency key); one completion and at most one
/// captured payment per checkout; a line in at most one cancellation.
pub fn at_most_once(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut by_key: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for e in evidence
        .log
        .iter()
        .filter(|e| e.event_type == "HoldPlaced" || e.event_type == "PoolHoldPlaced")
    {
        if let (Some(actor), Some(key), Some(hold)) =
            (e.meta("actor"), e.meta("idempotency_key"), e.str("hold_id"))
        {
            by_key
                .entry((actor.to_owned(), key.to_owned()))
                .or_default()
                .insert(hold.to_owned());
        }
    }
    for ((actor, key), holds) in by_key.into_iter().filter(|(_, h)| h.len() > 1) {
        out.push(Violation::new(
            "unknown_at_most_once",
            format!("{actor} key {key}: {} holds {holds:?}", holds.len()),
            [vec![key], holds.into_iter().collect()].concat(),
        ));
    }
    for c in model.checkouts.values() {
        let completions = evidence
            .log
            .iter()
            .filter(|e| e.aggregate_id == c.id && e.event_type == "CheckoutCompleted")
            .count();
        let captured = evidence
            .ledger
            .payments
            .iter()
            .filter(|p| p.hold_id == c.id && p.status == "captured")
            .count();
        if completions > 1 || captured > 1 {
            out.push(Violation::new(
                "unknown_at_most_once",
                format!(
                    "checkout {}: {completions} completions, {captured} captured payments",
                    c.id
                ),
                vec![c.id.clone()],
            ));
        }
        let mut seen = BTreeSet::new();
        for (_, lines, _) in &c.line_refunds {
            if let Some(twice) = lines.iter().find(|l| !seen.insert(**l)) {
                out.push(Violation::new(
                    "no_refund_twice",
                    format!("order {}: line {twice} refunded in two cancellations", c.id),
                    vec![c.id.clone()],
                ));
            }
        }
    }
    out
}
