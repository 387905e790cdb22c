//! No seat or place sold to two live sales: what the unit folds refused as
//! they went, and the checkouts held to their units. A checkout that says
//! it converted a hold must have the hold's units converted into its
//! booking; every booked seat and every sold place must be a standing
//! checkout's; a pool's sold places must be its standing sales.

use std::collections::BTreeMap;

use crate::evidence::Evidence;
use crate::model::{unit_of, Model, SoldUnit};
use crate::report::Violation;

/// What the seat, shard and line folds refused.
pub fn folded(_: &Evidence, model: &Model) -> Vec<Violation> {
    model.fold_violations.clone()
}

/// Each hold a checkout converted (and did not give back) has each of its
/// unit parts converted into the checkout's booking.
pub fn conversions_are_unit_sales(_: &Evidence, model: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    for c in model.checkouts.values().filter(|c| c.completed.is_some()) {
        let booking = c.booking_id.clone().unwrap_or_default();
        let holds: Vec<String> = if c.is_order() {
            c.converted_holds
                .difference(&c.given_back)
                .cloned()
                .collect()
        } else {
            vec![c.id.clone()]
        };
        for hold_id in holds {
            let converted = converted_everywhere(model, &hold_id, &booking);
            if !converted {
                out.push(Violation::new(
                    "checkout_sales_are_unit_sales",
                    format!("checkout {} completed with hold {hold_id}, whose units were not all converted into {booking}", c.id),
                    vec![c.id.clone(), hold_id.clone(), booking.clone()],
                ));
            }
        }
    }
    out
}

/// Every part of `hold_id` (each seat, each shard) was converted into
/// `booking` in its own stream.
fn converted_everywhere(model: &Model, hold_id: &str, booking: &str) -> bool {
    model.holds.get(hold_id).is_some_and(|hold| {
        !hold.parts.is_empty()
            && hold
                .parts
                .iter()
                .all(|p| p.converted.as_deref() == Some(booking))
    })
}

/// At the end, the seats booked in their streams are exactly the standing
/// checkouts' seats, each under its booking; each pool's sold places are
/// the standing checkouts' places of it.
pub fn bookings_agree(_: &Evidence, model: &Model) -> Vec<Violation> {
    let sold = model.sold_units();
    let mut out = Vec::new();
    let mut expected: BTreeMap<(String, String), Vec<&SoldUnit>> = BTreeMap::new();
    for unit in &sold {
        expected
            .entry((unit.show_id.clone(), unit.unit.clone()))
            .or_default()
            .push(unit);
    }
    for (stream, seat) in &model.seats {
        let show = stream.split('/').next().unwrap_or_default().to_owned();
        let key = (show, unit_of(stream));
        let wanted: Vec<&String> = expected
            .get(&key)
            .map(|u| u.iter().map(|u| &u.booking_id).collect())
            .unwrap_or_default();
        let booked = match &seat.state {
            crate::model::seats::SeatState::Booked { booking, .. } => vec![booking],
            _ => vec![],
        };
        if wanted != booked {
            let ids = [
                vec![stream.clone()],
                wanted.iter().map(|s| (*s).clone()).collect(),
                booked.iter().map(|s| (*s).clone()).collect(),
            ]
            .concat();
            out.push(Violation::new(
                "log_sales_agree",
                format!("{stream}: standing sales {wanted:?}, the seat's stream booked {booked:?}"),
                ids,
            ));
        }
    }
    out.extend(pools_agree(model, &sold));
    out
}

fn pools_agree(model: &Model, sold: &[SoldUnit]) -> Vec<Violation> {
    let mut by_pool: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for shard in model.shards.values() {
        let pool = shard
            .stream
            .rsplit_once('#')
            .map_or(shard.stream.clone(), |(p, _)| p.to_owned());
        by_pool.entry(pool).or_default().1 += shard.sold_total();
    }
    for unit in sold.iter().filter(|u| u.pool) {
        by_pool
            .entry(format!("{}/{}", unit.show_id, unit.unit))
            .or_default()
            .0 += 1;
    }
    (by_pool.into_iter())
        .filter(|(_, (lines, places))| lines != places)
        .map(|(pool, (lines, places))| Violation::new("log_sales_agree", format!("pool {pool}: {lines} places confirmed by standing checkouts, {places} sold in its shards"), vec![pool]))
        .collect()
}

/// A cancellation frees its own lines: the units an `OrderLinesFreed` of
/// hold H frees in its append (same record instant, the order's booking)
/// are H's units, as many as H's lines in the cancellation. A pool line
/// cancelled must not give back another hold's place.
pub fn cancellations_free_their_lines(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut asked: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for e in evidence
        .log
        .iter()
        .filter(|e| e.aggregate_type == "Checkout")
    {
        match e.event_type.as_str() {
            "LinesCancelRequested" => {
                let lines = e.data()["lines"]
                    .as_array()
                    .map(|l| l.iter().filter_map(|v| v.as_u64()).collect())
                    .unwrap_or_default();
                asked.insert(&e.aggregate_id, lines);
            }
            "OrderLinesFreed" => {
                let (Some(order), Some(hold_id)) =
                    (model.checkouts.get(&e.aggregate_id), e.str("hold_id"))
                else {
                    continue;
                };
                let lines = asked
                    .get(e.aggregate_id.as_str())
                    .cloned()
                    .unwrap_or_default();
                let wanted = order
                    .lines
                    .iter()
                    .filter(|l| l.hold_id == hold_id && lines.contains(&l.line_id))
                    .count() as u64;
                out.extend(freed_in_append(evidence, model, e, hold_id, wanted));
            }
            _ => {}
        }
    }
    out
}

fn freed_in_append(
    evidence: &Evidence,
    model: &Model,
    freed: &crate::rows::LogEvent,
    hold_id: &str,
    wanted: u64,
) -> Vec<Violation> {
    let parts: Vec<&str> = model
        .holds
        .get(hold_id)
        .map(|h| h.parts.iter().map(|p| p.stream.as_str()).collect())
        .unwrap_or_default();
    let order = freed.aggregate_id.as_str();
    let mut given = 0;
    let mut out = Vec::new();
    let same_append = (evidence.log.iter())
        .filter(|u| u.recorded_at_us == freed.recorded_at_us && u.str("booking_id") == Some(order));
    for unit in same_append {
        let quantity = match unit.event_type.as_str() {
            "PoolPlacesReturned" => unit.u64("quantity").unwrap_or(0),
            "BookingCancelled" => 1,
            _ => continue,
        };
        given += quantity;
        // A place goes back from the line's own hold's sale (its ticket
        // type, its channel), never from another hold's of the order.
        let from = unit.str("hold_id");
        if unit.event_type == "PoolPlacesReturned" && from != Some(hold_id) {
            out.push(Violation::new(
                "cancellation_frees_its_lines",
                format!(
                    "order {order}: cancelling lines of hold {hold_id} returned {quantity} places \
                     of {} from the sale of {from:?}",
                    unit.aggregate_id
                ),
                vec![order.to_owned(), hold_id.to_owned()],
            ));
        }
        if !parts.contains(&unit.aggregate_id.as_str()) {
            out.push(Violation::new("cancellation_frees_its_lines", format!("order {order}: cancelling lines of hold {hold_id} freed {quantity} on {}, where that hold has nothing", unit.aggregate_id), vec![order.to_owned(), hold_id.to_owned()]));
        }
    }
    if given != wanted {
        out.push(Violation::new(
            "cancellation_frees_its_lines",
            format!(
                "order {order}: cancelling {wanted} lines of hold {hold_id} freed {given} units"
            ),
            vec![order.to_owned(), hold_id.to_owned()],
        ));
    }
    out
}
