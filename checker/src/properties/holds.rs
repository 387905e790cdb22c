//! Holds: none lasts past `max_hold_seconds` after its placement (offers
//! have their own bound, `waitlist.rs`), and each unit is priced by the
//! table in force at its decision's instant. The instant is known within a
//! window: from the request's start (or `DECISION_WINDOW_US` before the
//! event for holds no client asked for: the waiting list's offers) to the event's
//! record, which is the decision's own `now`.

use std::collections::BTreeMap;

use crate::evidence::Evidence;
use crate::model::prices::PriceHistory;
use crate::model::Model;
use crate::report::Violation;

/// How long before its record a decision with no request of ours may have
/// been made (the judge's offers): a round's retries and the store's
/// acquire timeout fit in it.
const DECISION_WINDOW_US: i64 = 10_000_000;

pub fn within_max_hold(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    for hold in model
        .holds
        .values()
        .filter(|h| !h.offer && !model.offers.contains(&h.hold_id))
    {
        let Some(show) = evidence.shows.iter().find(|s| s.show_id == hold.show_id) else {
            continue;
        };
        let bound = hold.placed_us + i64::from(show.max_hold_seconds) * 1_000_000;
        if hold.expires_us > bound {
            out.push(Violation::new(
                "hold_within_max_hold",
                format!(
                    "hold {} on {} expires {} µs past max_hold_seconds",
                    hold.hold_id,
                    hold.show_id,
                    hold.expires_us - bound
                ),
                vec![hold.hold_id.clone()],
            ));
        }
    }
    out
}

pub fn priced_by_table_in_force(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    let starts: BTreeMap<&str, i64> = evidence
        .history
        .iter()
        .map(|r| (r.request_id.as_str(), r.start_us))
        .collect();
    let request_of: BTreeMap<String, &str> = (evidence.log.iter())
        .filter(|e| e.event_type.ends_with("HoldPlaced"))
        .filter_map(|e| Some((e.str("hold_id")?.to_owned(), e.request_id()?)))
        .collect();
    let comps = comp_holds(model);
    let histories: BTreeMap<&str, PriceHistory> = evidence
        .shows
        .iter()
        .map(|s| (s.show_id.as_str(), PriceHistory::of(s, &evidence.log)))
        .collect();
    let mut out = Vec::new();
    for hold in model.holds.values().filter(|h| !comps.contains(&h.hold_id)) {
        let Some(history) = histories.get(hold.show_id.as_str()) else {
            continue;
        };
        let start = request_of
            .get(&hold.hold_id)
            .and_then(|r| starts.get(r))
            .copied();
        for part in &hold.parts {
            let Some(price) = &part.price else { continue };
            let from = start.unwrap_or(part.placed_us - DECISION_WINDOW_US);
            let allowed = history.allowed(
                price.category.as_deref(),
                &price.ticket_type,
                from,
                part.placed_us,
            );
            if !allowed.contains(&price.price_cents) {
                out.push(Violation::new(
                    "priced_by_table_in_force",
                    format!(
                        "hold {} on {}: {} {} priced {}, the tables in force then say {allowed:?}",
                        hold.hold_id,
                        part.stream,
                        price.ticket_type,
                        price.category.as_deref().unwrap_or("-"),
                        price.price_cents
                    ),
                    vec![hold.hold_id.clone()],
                ));
            }
        }
    }
    out
}

/// Holds of box-office comps: given away, priced 0 whatever the table.
fn comp_holds(model: &Model) -> Vec<String> {
    (model.checkouts.values())
        .filter(|c| c.sale.as_ref().is_some_and(|s| s["payment"] == "comp"))
        .flat_map(|c| c.order_holds.clone())
        .collect()
}
