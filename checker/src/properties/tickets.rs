//! Tickets follow sales (issue #47), from the API's meaning ("Tickets" in
//! docs/api.md): every confirmed seat or pool place has one ticket, issued
//! in the same append as its sale's capture; a cancelled line's ticket is
//! revoked before its unit is freed. Held against the checker's own folds:
//! the sales (`model::checkouts`, what is sold at the end by
//! `Model::sold_units`) and the ticket streams (`model::tickets`).
//!
//! - Issued with a capture: a ticket's sale is a checkout that recorded a
//!   `PaymentCaptured`, in whose append (same record instant) the ticket
//!   was issued; a ticket stream is issued exactly once, for one line, and
//!   no two tickets name one (checkout, line).
//! - Cancelled lines revoked: a ticket whose line is cancelled (its booking
//!   cancelled, or the order's line) is revoked, no later than the append
//!   that frees the line's unit (a unit back on sale never has a valid
//!   ticket).
//! - Live sales ticketed (once quiet: a cancellation in flight revokes
//!   before it is recorded): each unit a standing sale sells has exactly
//!   one valid ticket of its sale admitting that unit (an order's by its
//!   line; a purchase's lines are not numbered by the API, so its valid
//!   tickets must admit its units one for one), and no other ticket of a
//!   sale is valid.

use std::collections::BTreeMap;

use crate::evidence::Evidence;
use crate::model::checkouts::CheckoutFacts;
use crate::model::tickets::TicketFacts;
use crate::model::{Model, SoldUnit};
use crate::report::Violation;

const NAME: &str = "tickets_follow_sales";

fn violation(detail: String, ids: Vec<String>) -> Violation {
    Violation::new(NAME, detail, ids)
}

pub fn follow_sales(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    let mut out = issued_with_captures(model);
    out.extend(one_ticket_per_line(model));
    out.extend(cancelled_lines_revoked(model));
    if evidence.quiet {
        out.extend(live_sales_ticketed(model));
    }
    out
}

/// Each ticket stream is issued once, for a line of a checkout that
/// captured, in the capture's own append, on the sale's show.
fn issued_with_captures(model: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    for t in model.tickets.values() {
        let ids = vec![t.stream.clone(), t.checkout.clone()];
        if t.issues != 1 {
            out.push(violation(
                format!("ticket stream {} holds {} TicketIssued", t.stream, t.issues),
                ids.clone(),
            ));
            if t.issues == 0 {
                continue;
            }
        }
        if t.line_id.is_none() {
            out.push(violation(
                format!("ticket {} names no line of its sale", t.stream),
                ids.clone(),
            ));
        }
        let checkout = model.checkouts.get(&t.checkout);
        let Some(c) = checkout.filter(|c| !c.captured_us.is_empty()) else {
            out.push(violation(
                format!(
                    "ticket {} issued for checkout {}, which never captured",
                    t.stream, t.checkout
                ),
                ids,
            ));
            continue;
        };
        if !t.issued_us.is_some_and(|at| c.captured_us.contains(&at)) {
            out.push(violation(
                format!(
                    "ticket {} of checkout {} issued at {:?}, outside the append of its capture (at {:?})",
                    t.stream, t.checkout, t.issued_us, c.captured_us
                ),
                ids.clone(),
            ));
        }
        if t.show_id != c.show_id {
            out.push(violation(
                format!(
                    "ticket {} is of show {:?}, its sale {} of show {:?}",
                    t.stream, t.show_id, c.id, c.show_id
                ),
                ids,
            ));
        }
    }
    out
}

/// The issued tickets of each (checkout, line).
fn by_line(model: &Model) -> BTreeMap<(&str, u64), Vec<&TicketFacts>> {
    let mut lines: BTreeMap<(&str, u64), Vec<&TicketFacts>> = BTreeMap::new();
    for t in model.tickets.values().filter(|t| t.issues > 0) {
        if let Some(line) = t.line_id {
            lines.entry((&t.checkout, line)).or_default().push(t);
        }
    }
    lines
}

/// No two tickets for one line of one sale.
fn one_ticket_per_line(model: &Model) -> Vec<Violation> {
    (by_line(model).into_iter())
        .filter(|(_, tickets)| tickets.len() > 1)
        .map(|((checkout, line), tickets)| {
            let streams: Vec<String> = tickets.iter().map(|t| t.stream.clone()).collect();
            violation(
                format!(
                    "line {line} of checkout {checkout} has {} tickets: {streams:?}",
                    streams.len()
                ),
                [vec![checkout.to_owned()], streams].concat(),
            )
        })
        .collect()
}

/// Whether the ticket's line is cancelled (the whole booking, or the
/// order's line), and when its unit was freed, if the log says.
fn cancellation(c: &CheckoutFacts, t: &TicketFacts) -> Option<Option<i64>> {
    if c.cancelled.is_some() {
        return Some(c.cancelled_us);
    }
    let line = t.line_id?;
    if !c.is_order() || !c.cancelled_lines.contains(&line) {
        return None;
    }
    let hold = c.lines.iter().find(|l| l.line_id == line)?.hold_id.as_str();
    let freed = (c.lines_freed.iter())
        .find(|(_, h, lines)| h == hold && lines.contains(&line))
        .map(|(at, _, _)| *at);
    Some(freed)
}

/// A cancelled line's ticket is revoked, no later than its unit is freed.
fn cancelled_lines_revoked(model: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    for t in model.tickets.values().filter(|t| t.issues > 0) {
        let Some(c) = model.checkouts.get(&t.checkout) else {
            continue;
        };
        let Some(freed_us) = cancellation(c, t) else {
            continue;
        };
        let ids = vec![t.stream.clone(), c.id.clone()];
        let line = t.line_id.unwrap_or_default();
        match (t.revoked_us, freed_us) {
            (None, _) => out.push(violation(
                format!(
                    "line {line} of checkout {} was cancelled; its ticket {} is still valid",
                    c.id, t.stream
                ),
                ids,
            )),
            (Some(revoked), Some(freed)) if revoked > freed => out.push(violation(
                format!(
                    "line {line} of checkout {}: its unit was freed at {freed}, its ticket {} revoked only at {revoked}",
                    c.id, t.stream
                ),
                ids,
            )),
            _ => {}
        }
    }
    out
}

/// Whether a valid ticket admits the sold unit (and its ticket type, when
/// the model knows it).
fn admits(t: &TicketFacts, unit: &SoldUnit) -> bool {
    let named = if unit.pool {
        t.pool_id.as_deref() == Some(unit.unit.as_str()) && t.seat_id.is_none()
    } else {
        t.seat_id.as_deref() == Some(unit.unit.as_str())
    };
    named && (unit.ticket_type.is_empty() || t.ticket_type == unit.ticket_type)
}

/// Each unit a standing sale sells has one valid ticket of its sale that
/// admits it; every other valid ticket is a violation (a cancelled line's
/// is reported by `cancelled_lines_revoked`).
fn live_sales_ticketed(model: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut valid: BTreeMap<&str, Vec<&TicketFacts>> = BTreeMap::new();
    for t in model.tickets.values().filter(|t| t.valid()) {
        valid.entry(&t.checkout).or_default().push(t);
    }
    let sold = model.sold_units();
    for unit in &sold {
        let tickets = valid.entry(&unit.checkout).or_default();
        let found = tickets.iter().position(|t| match unit.line_id {
            Some(line) => t.line_id == Some(line),
            None => admits(t, unit),
        });
        let Some(at) = found else {
            let line = unit
                .line_id
                .map_or("a line".to_owned(), |l| format!("line {l}"));
            out.push(violation(
                format!(
                    "{} ({}) sold by {line} of checkout {} (booking {}) has no valid ticket",
                    unit.unit, unit.show_id, unit.checkout, unit.booking_id
                ),
                vec![
                    unit.checkout.clone(),
                    unit.booking_id.clone(),
                    unit.unit.clone(),
                ],
            ));
            continue;
        };
        let ticket = tickets.remove(at);
        if !admits(ticket, unit) {
            out.push(violation(
                format!(
                    "ticket {} of line {:?} of checkout {} admits {:?} ({}), the line sold {} ({})",
                    ticket.stream,
                    unit.line_id,
                    unit.checkout,
                    ticket.unit(),
                    ticket.ticket_type,
                    unit.unit,
                    unit.ticket_type
                ),
                vec![
                    ticket.stream.clone(),
                    unit.checkout.clone(),
                    unit.unit.clone(),
                ],
            ));
        }
    }
    for t in valid.into_values().flatten() {
        let cancelled = (model.checkouts.get(&t.checkout)).and_then(|c| cancellation(c, t));
        if cancelled.is_none() {
            out.push(violation(
                format!(
                    "ticket {} (line {:?} of checkout {}, admitting {:?}) is valid, but its sale sells no such unit at the end",
                    t.stream,
                    t.line_id,
                    t.checkout,
                    t.unit()
                ),
                vec![t.stream.clone(), t.checkout.clone()],
            ));
        }
    }
    out
}
