//! The waiting list's offer: a hold placed for the entry's buyer on seats
//! owed to the line, decided by `PlaceSeats` like any hold of listed seats
//! (prices, the buyer's limit, all or nothing), with the entry's
//! `EntryOffered` on the show's line in the same append (the line is
//! locked by the judge, `command::waitlist`, and handed to the round).

use domain::ids::SeatId;
use domain::waitlist::Entry;

use super::place::PlaceHandler;
use super::place_seats::PlaceSeats;
use super::placement::{Held, Placement};
use super::request::{Sale, Tickets};
use super::HoldError;
use crate::catalog::CatalogEntry;
use crate::command::context::RequestContext;
use crate::command::round::{LineLock, Rounds, Settled};
use crate::command::units::SeatKey;

/// Who the offers are recorded as made by (the entry's buyer owns them).
pub const WAITLIST_ACTOR: &str = "system:waitlist";

impl PlaceHandler {
    /// Offers `seats` to `offered` as its hold (id: the entry's), lasting
    /// the list's `offer_seconds`; `line` is the show's, locked.
    pub(super) async fn offer(
        &self,
        line: &mut LineLock,
        entry: &CatalogEntry,
        offered: &Entry,
        seats: &[SeatId],
    ) -> Result<Held, HoldError> {
        let ctx = RequestContext::system(WAITLIST_ACTOR)?.selling_to(offered.buyer.clone());
        let (tickets, sale) = (Tickets::default(), Sale::default());
        let placement = Placement {
            ctx: &ctx,
            entry,
            hold_id: offered.entry_id.offer_hold(),
            request_hash: String::new(),
            admission: None,
            tickets: &tickets,
            sale: &sale,
            offer: Some(offered.entry_id),
        };
        let show_id = &entry.show.show_id;
        let units = (seats.iter())
            .map(|seat_id| SeatKey::unit(show_id, seat_id))
            .collect();
        let round = placement.round().with_line(line);
        let mut decision = PlaceSeats {
            placement: &placement,
            seats,
        };
        let rounds: &Rounds = &self.rounds;
        match rounds.run(round, units, &mut decision).await? {
            Settled::Appended(held) | Settled::Answered(held) => Ok(held),
            Settled::KeyTaken => Err(HoldError::Bug("an offer has no idempotency key".into())),
        }
    }
}
