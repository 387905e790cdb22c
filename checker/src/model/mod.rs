//! The checker's own model of the log: each stream type folded by rules
//! written from the API's meaning (`../shared/API.md`, ARCHITECTURE's
//! stream table), independently of the service's `domain` code, and what
//! the checkouts sold at the end.

pub mod checkouts;
pub mod holds;
pub mod prices;
pub mod seats;
pub mod shards;
pub mod tickets;
pub mod waitlist;

use std::collections::{BTreeMap, BTreeSet};

use crate::report::Violation;
use crate::rows::LogEvent;
use crate::shows::ShowSpec;

/// One seat or one pool place a standing checkout sold.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SoldUnit {
    pub show_id: String,
    /// The seat id, or the pool id for a place.
    pub unit: String,
    pub pool: bool,
    pub ticket_type: String,
    pub price_cents: i64,
    pub booking_id: String,
    pub checkout: String,
    pub hold_id: String,
    /// The order's line that sold it; `None` for a hold's purchase, whose
    /// lines the API does not number.
    pub line_id: Option<u64>,
}

pub struct Model {
    pub holds: BTreeMap<String, holds::HoldFacts>,
    pub seats: BTreeMap<String, seats::SeatFold>,
    pub shards: BTreeMap<String, shards::ShardFold>,
    pub checkouts: BTreeMap<String, checkouts::CheckoutFacts>,
    pub waitlists: BTreeMap<String, waitlist::WaitlistFold>,
    /// Every ticket stream, by stream id.
    pub tickets: BTreeMap<String, tickets::TicketFacts>,
    /// Hold ids the waiting lists offered.
    pub offers: BTreeSet<String>,
    /// What the folds refused as they went.
    pub fold_violations: Vec<Violation>,
}

impl Model {
    pub fn build(log: &[LogEvent], shows: &[ShowSpec]) -> Self {
        let mut out = Vec::new();
        let waitlists = waitlist::fold(log, shows, &mut out);
        let offers = waitlists
            .values()
            .flat_map(|l| l.offers.keys().cloned())
            .collect();
        let seats = seats::fold(log, &offers, &mut out);
        let shards = shards::fold(log, shows, &mut out);
        Self {
            holds: holds::holds(log),
            seats,
            shards,
            checkouts: checkouts::fold(log),
            waitlists,
            tickets: tickets::fold(log),
            offers,
            fold_violations: out,
        }
    }

    /// Every unit the standing checkouts sold: a purchase's hold's units,
    /// an order's confirmed lines.
    pub fn sold_units(&self) -> Vec<SoldUnit> {
        let mut sold = Vec::new();
        for checkout in self.checkouts.values().filter(|c| c.stands()) {
            let booking_id = checkout.booking_id.clone().unwrap_or_default();
            if checkout.is_order() {
                sold.extend(checkout.confirmed_lines().map(|l| SoldUnit {
                    show_id: checkout.show_id.clone(),
                    unit: l.seat_id.clone().or(l.pool_id.clone()).unwrap_or_default(),
                    pool: l.pool_id.is_some(),
                    ticket_type: l.ticket_type.clone(),
                    price_cents: l.price_cents,
                    booking_id: booking_id.clone(),
                    checkout: checkout.id.clone(),
                    hold_id: l.hold_id.clone(),
                    line_id: Some(l.line_id),
                }));
            } else if let Some(hold) = self.holds.get(&checkout.id) {
                sold.extend(purchase_units(checkout, hold, &booking_id));
            }
        }
        sold.sort();
        sold
    }
}

fn purchase_units(
    checkout: &checkouts::CheckoutFacts,
    hold: &holds::HoldFacts,
    booking_id: &str,
) -> Vec<SoldUnit> {
    let mut units = Vec::new();
    for part in &hold.parts {
        let unit = unit_of(&part.stream);
        let (ticket_type, price_cents) = part.price.as_ref().map_or((String::new(), 0), |p| {
            (p.ticket_type.clone(), p.price_cents)
        });
        for _ in 0..part.quantity {
            units.push(SoldUnit {
                show_id: hold.show_id.clone(),
                unit: unit.clone(),
                pool: hold.pool,
                ticket_type: ticket_type.clone(),
                price_cents,
                booking_id: booking_id.to_owned(),
                checkout: checkout.id.clone(),
                hold_id: hold.hold_id.clone(),
                line_id: None,
            });
        }
    }
    units
}

/// The seat id of `show/seat`, the pool id of `show/pool#n`.
pub fn unit_of(stream: &str) -> String {
    let rest = stream.split_once('/').map_or(stream, |(_, r)| r);
    rest.rsplit_once('#').map_or(rest, |(p, _)| p).to_owned()
}
