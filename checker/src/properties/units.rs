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
        let holds: Vec<String> = if c.is_order() { c.converted_holds.difference(&c.given_back).cloned().collect() } else { vec![c.id.clone()] };
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
        !hold.parts.is_empty() && hold.parts.iter().all(|p| p.converted.as_deref() == Some(booking))
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
        expected.entry((unit.show_id.clone(), unit.unit.clone())).or_default().push(unit);
    }
    for (stream, seat) in &model.seats {
        let show = stream.split('/').next().unwrap_or_default().to_owned();
        let key = (show, unit_of(stream));
        let wanted: Vec<&String> = expected.get(&key).map(|u| u.iter().map(|u| &u.booking_id).collect()).unwrap_or_default();
        let booked = match &seat.state {
            crate::model::seats::SeatState::Booked { booking, .. } => vec![booking],
            _ => vec![],
        };
        if wanted != booked {
            let ids = [vec![stream.clone()], wanted.iter().map(|s| (*s).clone()).collect(), booked.iter().map(|s| (*s).clone()).collect()].concat();
            out.push(Violation::new("log_sales_agree", format!("{stream}: standing sales {wanted:?}, the seat's stream booked {booked:?}"), ids));
        }
    }
    out.extend(pools_agree(model, &sold));
    out
}

fn pools_agree(model: &Model, sold: &[SoldUnit]) -> Vec<Violation> {
    let mut by_pool: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for shard in model.shards.values() {
        let pool = shard.stream.rsplit_once('#').map_or(shard.stream.clone(), |(p, _)| p.to_owned());
        by_pool.entry(pool).or_default().1 += shard.sold_total();
    }
    for unit in sold.iter().filter(|u| u.pool) {
        by_pool.entry(format!("{}/{}", unit.show_id, unit.unit)).or_default().0 += 1;
    }
    (by_pool.into_iter())
        .filter(|(_, (lines, places))| lines != places)
        .map(|(pool, (lines, places))| Violation::new("log_sales_agree", format!("pool {pool}: {lines} places confirmed by standing checkouts, {places} sold in its shards"), vec![pool]))
        .collect()
}
