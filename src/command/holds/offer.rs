//! The waiting list's offers: holds placed for entries' buyers on seats
//! owed to the waiting list, with each entry's `EntryOffered` on the show's waiting list in
//! the same append (the waiting list is locked by the judge, `command::waitlist`,
//! and handed to the round).
//!
//! On a show with a per-buyer limit an offer is `PlaceSeats` for its
//! buyer, one round each: the round counts one buyer's allowance. On a
//! show without one, every offer of a judgement is one round
//! (`OfferAll`): a burst of freed seats is offered in one append, not one
//! commit an entry. An offer of a pool's places is a pool hold placed like
//! any (`PlaceInPool`) with the waiting list, taking only places owed to it
//! (`WaitlistRole::Offer`), one entry a round.

use std::collections::HashMap;

use domain::ids::{PoolId, SeatId};
use domain::seat::{self, Seat, SeatCommand, SeatError, WaitlistRole};
use domain::waitlist::{self, Entry, WaitlistCommand};

use super::place::PlaceHandler;
use super::place_seats::PlaceSeats;
use super::placement::Placement;
use super::request::{Sale, Tickets};
use super::HoldError;
use crate::catalog::CatalogEntry;
use crate::command::context::RequestContext;
use crate::command::round::{
    Decided, Decides, Decision, Round, Rounds, Settled, View, WaitlistLock,
};
use crate::command::units::SeatKey;

/// Who the offers are recorded as made by (the entry's buyer owns them).
pub const WAITLIST_ACTOR: &str = "system:waitlist";

/// Every offer of a judgement, on a show without a per-buyer limit.
struct OfferAll<'a> {
    offers: &'a [(Placement<'a>, &'a [SeatId])],
}

impl Decides<Seat> for OfferAll<'_> {
    type Output = ();
    type Error = HoldError;

    async fn prepare(&mut self) -> Result<(), HoldError> {
        match self.offers.first() {
            Some((placement, _)) => placement.read_prices().await,
            None => Ok(()),
        }
    }

    fn decide(&mut self, view: &View<'_, Seat>) -> Result<Decision<Seat, ()>, HoldError> {
        let list = (view.waitlist)
            .ok_or_else(|| HoldError::Bug("offers without their waiting list".into()))?;
        let whose: HashMap<&SeatId, &Placement<'_>> = (self.offers.iter())
            .flat_map(|(placement, seats)| seats.iter().map(move |s| (s, placement)))
            .collect();
        let (mut units, mut taken) = (Vec::with_capacity(view.units.len()), Vec::new());
        for (seat, key) in &view.units {
            let placement = whose
                .get(&key.seat_id)
                .ok_or_else(|| HoldError::Bug(format!("{} offered to nobody", key.seat_id)))?;
            let prices = placement.prices();
            let price = placement.seat_price(&prices.pricing, &key.seat_id, view.now)?;
            let command = SeatCommand::PlaceHold {
                hold_id: placement.hold_id,
                buyer: placement.ctx.actor.id.clone(),
                expires_at: placement.expires_at(view.now),
                price: Some(price),
                channel: None,
                role: WaitlistRole::Offer,
            };
            match seat::decide(seat, &command, view.now) {
                Ok(events) => units.push(events),
                Err(SeatError::HeldByAnother | SeatError::Booked | SeatError::NotForSale) => {
                    taken.push(key.seat_id.clone())
                }
                Err(other) => {
                    return Err(HoldError::Bug(format!("offering {}: {other}", key.seat_id)))
                }
            }
        }
        if !taken.is_empty() {
            return Err(HoldError::SeatsTaken(taken));
        }
        let mut offered = Vec::new();
        for (placement, seats) in self.offers {
            let entry_id = placement
                .offer
                .ok_or_else(|| HoldError::Bug("an offer without its entry".into()))?;
            let command = WaitlistCommand::Offer {
                entry_id,
                expires_at: placement.expires_at(view.now),
                seats: seats.to_vec(),
                places: None,
            };
            offered.extend(
                waitlist::decide(list, &command, view.now).map_err(|_| HoldError::OfferGone)?,
            );
        }
        let decided = Decided {
            waitlist: offered,
            ..Decided::units(units)
        };
        Ok(Decision::Append(decided, ()))
    }
}

/// The placement of `offered`'s offer: its buyer's hold, the entry's id.
fn offer_placement<'a>(
    ctx: &'a RequestContext,
    entry: &'a CatalogEntry,
    offered: &Entry,
    (tickets, sale): (&'a Tickets, &'a Sale),
) -> Placement<'a> {
    Placement {
        ctx,
        entry,
        hold_id: offered.entry_id.offer_hold(),
        request_hash: String::new(),
        admission: None,
        tickets,
        sale,
        offer: Some(offered.entry_id),
    }
}

impl PlaceHandler {
    /// Offers `offered` `quantity` places of `pool_id` (owed to the waiting list)
    /// as its buyer's hold, with its `EntryOffered`; `list` is the show's,
    /// locked.
    pub(super) async fn offer_places(
        &self,
        list: &mut WaitlistLock,
        entry: &CatalogEntry,
        offered: &Entry,
        (pool_id, quantity): (&PoolId, u32),
    ) -> Result<(), HoldError> {
        let ctx = RequestContext::system(WAITLIST_ACTOR)?.selling_to(offered.buyer.clone());
        let (tickets, sale) = (Tickets::default(), Sale::default());
        let placement = offer_placement(&ctx, entry, offered, (&tickets, &sale));
        let round = placement.round().with_waitlist(list);
        match self
            .place_in_pool(round, &placement, pool_id, quantity)
            .await?
        {
            Settled::Appended(_) | Settled::Answered(_) => Ok(()),
            Settled::KeyTaken => Err(HoldError::Bug("an offer has no idempotency key".into())),
        }
    }

    /// Offers each entry its seats as its hold (id: the entry's), lasting
    /// the list's `offer_seconds`; `list` is the show's, locked. On a show
    /// with a per-buyer limit, give one offer at a time.
    pub(super) async fn offer(
        &self,
        list: &mut WaitlistLock,
        entry: &CatalogEntry,
        offers: &[(Entry, Vec<SeatId>)],
    ) -> Result<(), HoldError> {
        let contexts = (offers.iter())
            .map(|(offered, _)| {
                Ok(RequestContext::system(WAITLIST_ACTOR)?.selling_to(offered.buyer.clone()))
            })
            .collect::<Result<Vec<_>, HoldError>>()?;
        let (tickets, sale) = (Tickets::default(), Sale::default());
        let placements: Vec<(Placement<'_>, &[SeatId])> = (offers.iter().zip(&contexts))
            .map(|((offered, seats), ctx)| {
                let placement = offer_placement(ctx, entry, offered, (&tickets, &sale));
                (placement, seats.as_slice())
            })
            .collect();
        let show_id = &entry.show.show_id;
        let units = (placements.iter())
            .flat_map(|(_, seats)| seats.iter().map(|seat_id| SeatKey::unit(show_id, seat_id)))
            .collect();
        let rounds: &Rounds = &self.rounds;
        match placements.as_slice() {
            [(placement, seats)] if entry.show.max_seats_per_buyer.is_some() => {
                let round = placement.round().with_waitlist(list);
                let mut decision = PlaceSeats { placement, seats };
                match rounds.run(round, units, &mut decision).await? {
                    Settled::Appended(_) | Settled::Answered(_) => Ok(()),
                    Settled::KeyTaken => {
                        Err(HoldError::Bug("an offer has no idempotency key".into()))
                    }
                }
            }
            _ if entry.show.max_seats_per_buyer.is_some() => Err(HoldError::Bug(
                "offers on a show with a limit go one at a time".into(),
            )),
            _ => {
                let ctx = RequestContext::system(WAITLIST_ACTOR)?;
                let round = Round::new("waitlist_offer", &ctx).with_waitlist(list);
                rounds
                    .run(
                        round,
                        units,
                        &mut OfferAll {
                            offers: &placements,
                        },
                    )
                    .await?;
                Ok(())
            }
        }
    }
}
