//! Every answer told the truth. Each request carries its own
//! `X-Request-Id`, which the service stamps on every event its command
//! appends, so "changed nothing" is read straight from the log.

use std::collections::BTreeMap;

use crate::evidence::Evidence;
use crate::history::Record;
use crate::model::Model;
use crate::report::Violation;
use crate::rows::{strings, LogEvent};

/// Operations whose 409/422 must leave no event at all. (A box-office
/// sale is a hold and an order: one refused after its hold lets the hold
/// go, two events that change nothing in the end; its refusal is checked
/// by the folds and the sales.)
const REFUSED_CHANGES_NOTHING: [&str; 7] = [
    "hold",
    "release",
    "extend",
    "join",
    "allocate",
    "deallocate",
    "change_prices",
];

fn events_by_request(log: &[LogEvent]) -> BTreeMap<&str, Vec<&LogEvent>> {
    let mut by: BTreeMap<&str, Vec<&LogEvent>> = BTreeMap::new();
    for e in log {
        if let Some(id) = e.request_id() {
            by.entry(id).or_default().push(e);
        }
    }
    by
}

/// Recording an expiry changes no state the buyer sees; any other event does.
fn changes(e: &LogEvent) -> bool {
    !e.event_type.ends_with("Expired")
}

pub fn refusals_change_nothing(evidence: &Evidence, _: &Model) -> Vec<Violation> {
    let by_request = events_by_request(&evidence.log);
    let mut out = Vec::new();
    for r in &evidence.history {
        let refused = matches!(r.outcome.status(), Some(409 | 422));
        if !refused || !REFUSED_CHANGES_NOTHING.contains(&r.op.as_str()) {
            continue;
        }
        let written: Vec<&&LogEvent> = by_request
            .get(r.request_id.as_str())
            .map(|v| v.iter().filter(|e| changes(e)).collect())
            .unwrap_or_default();
        if let Some(e) = written.first() {
            out.push(Violation::new(
                "refusals_change_nothing",
                format!(
                    "{} {} answered {} {:?} yet appended {} on {}",
                    r.method,
                    r.path,
                    r.outcome.status().unwrap_or(0),
                    r.outcome.code(),
                    e.event_type,
                    e.aggregate_id
                ),
                vec![r.request_id.clone(), e.aggregate_id.clone()],
            ));
        }
    }
    out
}

/// The order id the service derives from a set of holds.
pub fn order_id(holds: &[String]) -> Option<String> {
    let ids: Option<Vec<domain::ids::HoldId>> = holds
        .iter()
        .map(|h| h.parse().ok().map(domain::ids::HoldId))
        .collect();
    Some(domain::ids::OrderId::for_holds(&ids?).to_string())
}

/// The checkout a purchase or order request is about.
fn checkout_of(r: &Record) -> Option<String> {
    match r.op.as_str() {
        "purchase" => r.path.split('/').nth(3).map(str::to_owned),
        "order" => order_id(&strings(r.body.as_ref().and_then(|b| b.get("holds")))),
        _ => None,
    }
}

/// A refused order changed none of its other holds; `"voided"` told the
/// truth about the authorization.
pub fn refused_orders_keep_holds(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    let by_request = events_by_request(&evidence.log);
    let mut out = Vec::new();
    for r in evidence
        .history
        .iter()
        .filter(|r| r.outcome.status() == Some(409) && (r.op == "order" || r.op == "purchase"))
    {
        let lost = strings(r.outcome.body().get("holds"));
        let units = (by_request.get(r.request_id.as_str()).into_iter().flatten())
            .filter(|e| {
                (e.aggregate_type == "Seat" || e.aggregate_type == "PoolShard") && changes(e)
            })
            .find(|e| {
                e.str("hold_id")
                    .is_none_or(|h| !lost.iter().any(|l| l == h))
            });
        if let Some(e) = units {
            out.push(Violation::new(
                "refused_order_keeps_holds",
                format!(
                    "{} answered 409 {:?} yet changed {} ({})",
                    r.op,
                    r.outcome.code(),
                    e.aggregate_id,
                    e.event_type
                ),
                [vec![r.request_id.clone()], lost.clone()].concat(),
            ));
        }
        out.extend(voided_truth(evidence, r));
    }
    out.extend(checked_holds(evidence, model));
    out
}

fn voided_truth(evidence: &Evidence, r: &Record) -> Option<Violation> {
    let voided = r.outcome.body().get("voided")?.as_bool()?;
    let checkout = checkout_of(r)?;
    let open = (evidence.ledger.payments.iter()).find(|p| {
        p.hold_id == checkout
            && (p.status == "authorized" || p.status == "captured" || p.status == "requires_action")
    });
    let cancelled =
        (evidence.ledger.payments.iter()).any(|p| p.hold_id == checkout && p.status == "canceled");
    let wrong = match (voided, open) {
        (_, Some(p)) => Some(format!("payment {} is {}", p.payment_id, p.status)),
        (true, None) if !cancelled => Some("no payment of it was cancelled".to_owned()),
        _ => None,
    };
    wrong.map(|why| {
        Violation::new(
            "answers_truthful",
            format!(
                "{} answered 409 voided={voided} for {checkout}, but {why}",
                r.op
            ),
            vec![checkout, r.request_id.clone()],
        )
    })
}

/// After a refused order, its other holds read `held` (or expired by then,
/// or converted by another checkout of the hold that completed: an order
/// or purchase of it still paying when the refused one was asked for).
fn checked_holds(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    let refused: Vec<String> = (evidence.history.iter())
        .filter(|r| r.op == "order" && r.outcome.status() == Some(409))
        .filter_map(checkout_of)
        .collect();
    let sold_elsewhere = |hold: &str| {
        (model.checkouts.values()).any(|c| {
            c.completed.is_some()
                && (c.id == hold || c.order_holds.iter().any(|h| h == hold))
                && !refused.contains(&c.id)
        })
    };
    (evidence.history.iter())
        .filter(|r| r.op == "check_hold" && r.outcome.status() == Some(200))
        .filter(|r| {
            let body = r.outcome.body();
            let expired_by_then = body["expires_at"]
                .as_str()
                .and_then(crate::rows::parse_time_us)
                .is_some_and(|t| t <= r.end_us);
            let hold = r.path.rsplit('/').next().unwrap_or_default();
            let converted_elsewhere = body["status"] == "converted" && sold_elsewhere(hold);
            body["status"] != "held" && !expired_by_then && !converted_elsewhere
        })
        .map(|r| {
            Violation::new(
                "refused_order_keeps_holds",
                format!(
                    "after a refused order, {} reads {}",
                    r.path,
                    r.outcome.body()["status"]
                ),
                vec![r.path.rsplit('/').next().unwrap_or_default().to_owned()],
            )
        })
        .collect()
}

/// A hold released with 204 was never part of a completed sale.
pub fn released_never_sold(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    for r in evidence.history.iter().filter(|r| {
        r.method == "DELETE" && r.path.starts_with("/v1/holds/") && r.outcome.status() == Some(204)
    }) {
        let hold = r.path.rsplit('/').next().unwrap_or_default();
        let sold_in = (model.checkouts.values())
            .filter(|c| c.completed.is_some())
            .find(|c| c.id == hold || c.order_holds.iter().any(|h| h == hold));
        if let Some(c) = sold_in {
            out.push(Violation::new(
                "released_never_sold",
                format!("hold {hold} released (204) yet sold by checkout {}", c.id),
                vec![hold.to_owned(), c.id.clone()],
            ));
        }
    }
    out
}

/// A price change accepted is recorded; one refused is not. A show in
/// yen never accepts a price yen cannot express.
pub fn price_changes_truthful(evidence: &Evidence, _: &Model) -> Vec<Violation> {
    let by_request = events_by_request(&evidence.log);
    let mut out = Vec::new();
    for r in evidence
        .history
        .iter()
        .filter(|r| r.op == "change_prices" && r.outcome.succeeded())
    {
        if !by_request
            .get(r.request_id.as_str())
            .is_some_and(|e| e.iter().any(|e| e.event_type == "PricesChanged"))
        {
            out.push(Violation::new(
                "answers_truthful",
                format!(
                    "{} answered {} but no PricesChanged was recorded",
                    r.path,
                    r.outcome.status().unwrap_or(0)
                ),
                vec![r.request_id.clone()],
            ));
        }
        let show_id = r.path.split('/').nth(3).unwrap_or_default();
        let yen = evidence
            .shows
            .iter()
            .any(|s| s.show_id == show_id && s.currency.as_deref() == Some("jpy"));
        let prices = r
            .body
            .as_ref()
            .and_then(|b| b["prices"].as_array().cloned())
            .unwrap_or_default();
        if let Some(bad) = prices
            .iter()
            .filter_map(|p| p["price_cents"].as_i64())
            .find(|c| yen && c % 100 != 0)
        {
            out.push(Violation::new(
                "prices_expressible",
                format!("{show_id} (jpy) accepted a price of {bad} cents, not whole yen"),
                vec![r.request_id.clone()],
            ));
        }
    }
    out
}
