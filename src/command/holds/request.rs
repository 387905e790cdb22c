//! What a hold request asks for, its identity for idempotency, and the
//! checks against the show made before anything is locked.

use std::collections::HashMap;

use domain::ids::{CategoryId, ChannelId, PoolId, SeatId, ShowId, TicketType};
use domain::limits::{
    MAX_BEST_AVAILABLE_QUANTITY, MAX_POOL_HOLD_QUANTITY, MAX_SEATS_PER_HOLD,
    MIN_BEST_AVAILABLE_QUANTITY,
};
use domain::places::SeatSpec;
use sha2::{Digest, Sha256};

use super::HoldError;
use crate::catalog::CatalogEntry;

/// Whose inventory a hold takes and how it is priced: public sale (the
/// default), a sales channel's inventory, and for the box office, given
/// away (a comp, priced 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sale {
    pub channel: Option<ChannelId>,
    pub comp: bool,
}

impl Sale {
    pub fn through(channel: Option<ChannelId>) -> Self {
        Self {
            channel,
            comp: false,
        }
    }

    /// A channel the show lists and the actor may sell through (an admin,
    /// or a buyer whose token names it); a comp only by an admin.
    pub(super) fn check(
        &self,
        ctx: &crate::command::context::RequestContext,
        entry: &CatalogEntry,
    ) -> Result<(), HoldError> {
        if let Some(channel) = &self.channel {
            if !ctx.actor.may_sell_through(&entry.show.show_id, channel) {
                return Err(HoldError::Forbidden);
            }
            if entry.show.channel(channel).is_none() {
                return Err(HoldError::UnknownChannel(channel.clone()));
            }
        }
        if self.comp && !ctx.actor.is_admin() {
            return Err(HoldError::Forbidden);
        }
        Ok(())
    }

    /// Part of a request's identity for idempotency: nothing for a public
    /// sale at price, so those hash as before channels were.
    fn hash_into(&self, hasher: &mut Sha256) {
        if let Some(channel) = &self.channel {
            hasher.update(b"\tchannel:");
            hasher.update(channel.as_str().as_bytes());
        }
        if self.comp {
            hasher.update(b"\tcomp");
        }
    }
}

/// What a hold request asks for; a ticket type left out is the show's
/// default.
#[derive(Debug, Clone)]
pub enum HoldRequest {
    Seats(Vec<SeatAsk>),
    Pool {
        pool_id: PoolId,
        quantity: u32,
        ticket_type: Option<TicketType>,
    },
    /// `quantity` seats side by side, chosen by the service, in `section`
    /// or anywhere, in `category` or any, wheelchair spaces or not.
    BestAvailable {
        quantity: u32,
        section: Option<String>,
        ticket_type: Option<TicketType>,
        category: Option<CategoryId>,
        accessible: bool,
    },
}

/// Where best available may choose: a section (or any), a category (or
/// any), and wheelchair spaces only when asked for them (a venue keeps them
/// for the buyers who need them; they are never chosen for others).
#[derive(Debug, Clone, Copy, Default)]
pub struct Wanted<'a> {
    pub section: Option<&'a str>,
    pub category: Option<&'a CategoryId>,
    pub accessible: bool,
}

impl Wanted<'_> {
    /// Whether `seat` may be in the block (its section is the choice's own
    /// filter: `SeatOrder::choose`).
    pub fn admits(&self, seat: &SeatSpec) -> bool {
        seat.accessible == self.accessible
            && self
                .category
                .is_none_or(|category| seat.category.as_ref() == Some(category))
    }
}

/// One seat of a hold, and the ticket type it is sold as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatAsk {
    pub seat_id: SeatId,
    pub ticket_type: Option<TicketType>,
}

impl From<SeatId> for SeatAsk {
    fn from(seat_id: SeatId) -> Self {
        Self {
            seat_id,
            ticket_type: None,
        }
    }
}

/// The ticket types a hold's units are sold as: a seat's own, or one for
/// every unit; `None`: the show's default.
#[derive(Debug, Clone, Default)]
pub struct Tickets {
    seats: HashMap<SeatId, TicketType>,
    every: Option<TicketType>,
}

impl Tickets {
    pub fn for_seat(&self, seat_id: &SeatId) -> Option<&TicketType> {
        self.seats.get(seat_id).or(self.every.as_ref())
    }

    pub fn every(&self) -> Option<&TicketType> {
        self.every.as_ref()
    }
}

impl HoldRequest {
    /// The seats listed (none for a pool or best available).
    pub fn seat_ids(&self) -> Vec<SeatId> {
        match self {
            HoldRequest::Seats(seats) => seats.iter().map(|s| s.seat_id.clone()).collect(),
            HoldRequest::Pool { .. } | HoldRequest::BestAvailable { .. } => Vec::new(),
        }
    }

    /// Where best available may choose (`None` for seats or a pool).
    pub fn wanted(&self) -> Option<Wanted<'_>> {
        match self {
            HoldRequest::BestAvailable {
                section,
                category,
                accessible,
                ..
            } => Some(Wanted {
                section: section.as_deref(),
                category: category.as_ref(),
                accessible: *accessible,
            }),
            HoldRequest::Seats(_) | HoldRequest::Pool { .. } => None,
        }
    }

    /// The ticket types asked for.
    pub fn tickets(&self) -> Tickets {
        match self {
            HoldRequest::Seats(seats) => Tickets {
                seats: seats
                    .iter()
                    .filter_map(|s| Some((s.seat_id.clone(), s.ticket_type.clone()?)))
                    .collect(),
                every: None,
            },
            HoldRequest::Pool { ticket_type, .. }
            | HoldRequest::BestAvailable { ticket_type, .. } => Tickets {
                seats: HashMap::new(),
                every: ticket_type.clone(),
            },
        }
    }

    /// The identity of the request for idempotency: the show and what it
    /// asks for (the same seats in another order are the same request).
    /// A ticket type asked for is part of it; a request naming none hashes
    /// as before ticket types were.
    pub(super) fn hash(&self, show_id: &ShowId, sale: &Sale) -> String {
        let mut hasher = Sha256::new();
        sale.hash_into(&mut hasher);
        match self {
            HoldRequest::Seats(seats) => {
                let mut sorted: Vec<&SeatAsk> = seats.iter().collect();
                sorted.sort_unstable_by(|a, b| a.seat_id.cmp(&b.seat_id));
                hasher.update(b"seats\n");
                hasher.update(show_id.as_str().as_bytes());
                for seat in sorted {
                    hasher.update(b"\n");
                    hasher.update(seat.seat_id.as_str().as_bytes());
                    hash_ticket_type(&mut hasher, seat.ticket_type.as_ref());
                }
            }
            HoldRequest::Pool {
                pool_id,
                quantity,
                ticket_type,
            } => {
                hasher.update(b"pool\n");
                hasher.update(show_id.as_str().as_bytes());
                hasher.update(b"\n");
                hasher.update(pool_id.as_str().as_bytes());
                hasher.update(format!("\n{quantity}").as_bytes());
                hash_ticket_type(&mut hasher, ticket_type.as_ref());
            }
            // What was asked, not the seats chosen: a retry answers the
            // first choice.
            HoldRequest::BestAvailable {
                quantity,
                section,
                ticket_type,
                category,
                accessible,
            } => {
                hasher.update(b"best\n");
                hasher.update(show_id.as_str().as_bytes());
                hasher.update(format!("\n{quantity}\n").as_bytes());
                match section {
                    Some(section) => {
                        hasher.update(b"section:");
                        hasher.update(section.as_bytes());
                    }
                    None => hasher.update(b"any"),
                }
                hash_ticket_type(&mut hasher, ticket_type.as_ref());
                if let Some(category) = category {
                    hasher.update(b"\tcategory:");
                    hasher.update(category.as_str().as_bytes());
                }
                if *accessible {
                    hasher.update(b"\taccessible");
                }
            }
        }
        hex::encode(hasher.finalize())
    }

    /// Checks the request against the show before anything is locked.
    pub(super) fn validate(&self, entry: &CatalogEntry) -> Result<(), HoldError> {
        self.validate_ticket_types(entry)?;
        match self {
            HoldRequest::Seats(seats) => {
                let seats: Vec<&SeatId> = seats.iter().map(|s| &s.seat_id).collect();
                if seats.is_empty() || seats.len() > MAX_SEATS_PER_HOLD {
                    return Err(HoldError::Invalid(format!(
                        "a hold has 1..={MAX_SEATS_PER_HOLD} seats (MAX_SEATS_PER_HOLD), got {}",
                        seats.len()
                    )));
                }
                let mut seen = std::collections::HashSet::with_capacity(seats.len());
                if let Some(dup) = seats.iter().find(|s| !seen.insert(*s)) {
                    return Err(HoldError::Invalid(format!("seat {dup} is listed twice")));
                }
                let unknown: Vec<SeatId> = seats
                    .iter()
                    .filter(|s| entry.show.seat(s).is_none())
                    .map(|s| (*s).clone())
                    .collect();
                if !unknown.is_empty() {
                    return Err(HoldError::UnknownSeats(unknown));
                }
            }
            HoldRequest::Pool {
                pool_id, quantity, ..
            } => {
                if !(1..=MAX_POOL_HOLD_QUANTITY).contains(quantity) {
                    return Err(HoldError::Invalid(format!(
                        "quantity must be 1..={MAX_POOL_HOLD_QUANTITY} (MAX_POOL_HOLD_QUANTITY), got {quantity}"
                    )));
                }
                if entry.show.pool(pool_id).is_none() {
                    return Err(HoldError::UnknownPool(pool_id.clone()));
                }
            }
            HoldRequest::BestAvailable { quantity, .. } => {
                let wanted = self.wanted().unwrap_or_default();
                validate_best(entry, *quantity, wanted)?;
            }
        }
        Ok(())
    }
}

impl HoldRequest {
    /// Every ticket type asked for is one the show sells (a pair it does
    /// not price is found by the decision, at its own `now`).
    fn validate_ticket_types(&self, entry: &CatalogEntry) -> Result<(), HoldError> {
        let (seats, every) = match self {
            HoldRequest::Seats(seats) => (seats.as_slice(), None),
            HoldRequest::Pool { ticket_type, .. }
            | HoldRequest::BestAvailable { ticket_type, .. } => (&[][..], ticket_type.as_ref()),
        };
        let asked = seats
            .iter()
            .filter_map(|s| s.ticket_type.as_ref())
            .chain(every);
        for ticket_type in asked {
            if !entry.show.pricing.has_type(ticket_type) {
                return Err(HoldError::TicketTypeUnavailable(format!(
                    "the show sells no ticket type {ticket_type}"
                )));
            }
        }
        Ok(())
    }
}

/// A best available request checked against the show: a quantity within
/// its limits, and somewhere to choose. A section, a category or wheelchair
/// spaces the show does not have are 422: no seat could ever be chosen
/// there, like an unknown seat or pool, and unlike `no_adjacent_seats`,
/// which may change.
fn validate_best(entry: &CatalogEntry, quantity: u32, wanted: Wanted<'_>) -> Result<(), HoldError> {
    let count = quantity as usize;
    if !(MIN_BEST_AVAILABLE_QUANTITY..=MAX_BEST_AVAILABLE_QUANTITY).contains(&count) {
        return Err(HoldError::Invalid(format!(
            "best_available.quantity must be {MIN_BEST_AVAILABLE_QUANTITY}..={MAX_BEST_AVAILABLE_QUANTITY} (MAX_BEST_AVAILABLE_QUANTITY), got {quantity}"
        )));
    }
    let seats = &entry.show.seats;
    if let Some(section) = wanted.section {
        if !seats.iter().any(|s| s.section == section) {
            return Err(HoldError::Invalid(format!(
                "best_available.section: the show has no section {section:?}"
            )));
        }
    }
    if (wanted.category.is_some() || wanted.accessible) && !seats.iter().any(|s| wanted.admits(s)) {
        return Err(HoldError::Invalid(
            match (wanted.category, wanted.accessible) {
                (Some(c), true) => {
                    format!("best_available: the show has no wheelchair space in category {c}")
                }
                (Some(c), false) => {
                    format!("best_available.category: the show has no seat in category {c}")
                }
                (None, _) => {
                    "best_available.accessible: the show has no wheelchair space".to_owned()
                }
            },
        ));
    }
    Ok(())
}

fn hash_ticket_type(hasher: &mut Sha256, ticket_type: Option<&TicketType>) {
    if let Some(ticket_type) = ticket_type {
        hasher.update(b"\tticket:");
        hasher.update(ticket_type.as_str().as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seats(ids: &[&str]) -> HoldRequest {
        HoldRequest::Seats(
            ids.iter()
                .map(|s| SeatAsk::from(SeatId::parse(s).unwrap()))
                .collect(),
        )
    }

    #[test]
    fn the_same_seats_in_another_order_are_the_same_request() {
        let show = ShowId::parse("s").unwrap();
        assert_eq!(
            seats(&["A", "B"]).hash(&show, &Sale::default()),
            seats(&["B", "A"]).hash(&show, &Sale::default())
        );
    }

    #[test]
    fn other_seats_another_show_or_a_pool_are_another_request() {
        let show = ShowId::parse("s").unwrap();
        let other = ShowId::parse("t").unwrap();
        let ab = seats(&["A", "B"]).hash(&show, &Sale::default());
        assert_ne!(ab, seats(&["A", "C"]).hash(&show, &Sale::default()));
        assert_ne!(ab, seats(&["A", "B"]).hash(&other, &Sale::default()));
        let channel = Sale::through(Some(ChannelId::parse("partner-x").unwrap()));
        assert_ne!(
            ab,
            seats(&["A", "B"]).hash(&show, &channel),
            "another channel"
        );
        let comp = Sale {
            comp: true,
            ..Sale::default()
        };
        assert_ne!(ab, seats(&["A", "B"]).hash(&show, &comp), "given away");
        let pool = |q| HoldRequest::Pool {
            pool_id: PoolId::parse("floor").unwrap(),
            quantity: q,
            ticket_type: None,
        };
        assert_ne!(
            pool(2).hash(&show, &Sale::default()),
            pool(3).hash(&show, &Sale::default())
        );
    }

    fn best(quantity: u32, section: Option<&str>) -> HoldRequest {
        HoldRequest::BestAvailable {
            quantity,
            section: section.map(Into::into),
            ticket_type: None,
            category: None,
            accessible: false,
        }
    }

    #[test]
    fn a_best_available_hash_covers_quantity_section_and_show() {
        let show = ShowId::parse("s").unwrap();
        let other = ShowId::parse("t").unwrap();
        let a2 = best(2, Some("A")).hash(&show, &Sale::default());
        assert_eq!(a2, best(2, Some("A")).hash(&show, &Sale::default()));
        assert_ne!(a2, best(3, Some("A")).hash(&show, &Sale::default()));
        assert_ne!(a2, best(2, Some("B")).hash(&show, &Sale::default()));
        assert_ne!(a2, best(2, None).hash(&show, &Sale::default()));
        assert_ne!(a2, best(2, Some("A")).hash(&other, &Sale::default()));
    }
}
