//! What every way of placing a hold shares (seats, a pool, best
//! available): the hold's id and idempotency record, the admission check,
//! the buyer's allowance taken with the units, and the placed hold as the
//! API shows it. A module of its own so that each placing decision uses it
//! without importing another's file.

use chrono::{DateTime, Utc};
use domain::allowance::{AllowanceCommand, AllowanceError};
use domain::ids::{EntryId, HoldId, PoolId, SeatId};
use domain::pool::PoolCommand;
use domain::seat::WaitlistRole;
use domain::waitlist::{self, WaitlistCommand, WaitlistEvent};
use std::sync::Arc;

use domain::pricing::{ItemPrice, Pricing};
use projections::holds::{HoldItems, HoldState};
use projections::time::to_micros;

use super::request::{Sale, Tickets};
use super::{HoldError, HoldRequest, HoldView};
use crate::catalog::{CatalogEntry, PriceView};
use crate::command::context::RequestContext;
use crate::command::round::{BuyerLimit, Decided, Decision, Round, View};
use crate::command::units::Unit;
use crate::command::waiting_room::Admission;
use crate::query::availability::Viewer;
use crate::store::{HoldRecord, IdempotencyKeyRow};

/// A hold being placed: its id, who for, on which show, and the
/// idempotency record to write.
pub(super) struct Placement<'a> {
    pub(super) ctx: &'a RequestContext,
    pub(super) entry: &'a CatalogEntry,
    pub(super) hold_id: HoldId,
    pub(super) request_hash: String,
    /// On a show with a waiting room, what admits the buyer.
    pub(super) admission: Option<&'a Admission>,
    /// The ticket types asked for.
    pub(super) tickets: &'a Tickets,
    /// Whose inventory it takes, and whether it is given away.
    pub(super) sale: &'a Sale,
    /// The waiting-list entry this hold is the offer to (the round holds
    /// the show's waiting list): it takes seats owed to the waiting list, lasts the list's
    /// `offer_seconds`, and is recorded on the waiting list in the same append.
    pub(super) offer: Option<EntryId>,
}

/// Who places a hold on which show, and what admits them (a waiting room).
pub(super) struct Placing<'a> {
    pub(super) ctx: &'a RequestContext,
    pub(super) entry: &'a CatalogEntry,
    pub(super) admission: Option<&'a Admission>,
    pub(super) tickets: &'a Tickets,
    pub(super) sale: &'a Sale,
}

/// What a placement holds once appended: until when, which seats, on a
/// pool which shards hold how many places, and what each costs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Held {
    pub(super) expires_at: DateTime<Utc>,
    pub(super) seats: Vec<SeatId>,
    pub(super) parts: Vec<(u32, u32)>,
    pub(super) items: HoldItems,
}

impl<'a> Placing<'a> {
    /// The placement of hold `hold_id`, remembered under `request_hash`.
    pub(super) fn placement(&self, hold_id: HoldId, request_hash: String) -> Placement<'a> {
        Placement {
            ctx: self.ctx,
            entry: self.entry,
            hold_id,
            request_hash,
            admission: self.admission,
            tickets: self.tickets,
            sale: self.sale,
            offer: None,
        }
    }
}

impl Placement<'_> {
    pub(super) fn round(&self) -> Round<'static> {
        Round::new("hold", self.ctx).counting(BuyerLimit::of(&self.entry.show, &self.ctx.actor.id))
    }

    /// The show's prices read again if they are older than
    /// `PRICES_FRESHNESS`: run under the round's locks, before its `now`
    /// (`Decides::prepare`), so that the decision knows every price change
    /// in force at its `now` (`domain::pricing::PRICE_CHANGE_LEAD_MS`).
    pub(super) async fn read_prices(&self) -> Result<(), HoldError> {
        self.entry.prices.fresh().await?;
        Ok(())
    }

    /// On a show with a waiting room, a hold is placed only by a buyer
    /// admitted at the decision's `now`.
    pub(super) fn admitted(&self, now: DateTime<Utc>) -> Result<(), HoldError> {
        match self.admission {
            Some(admission) if !admission.admits(now) => Err(HoldError::AdmissionRequired(
                self.entry.show.show_id.clone(),
            )),
            _ => Ok(()),
        }
    }

    /// Until when a hold placed at `now` lasts (an offer: the waiting
    /// list's `offer_seconds`).
    pub(super) fn expires_at(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        match (&self.offer, &self.entry.show.waitlist) {
            (Some(_), Some(waitlist)) => now + waitlist.offer_ttl(),
            _ => now + self.entry.show.hold_ttl(),
        }
    }

    /// How the hold meets the show's waiting list.
    pub(super) fn role(&self) -> WaitlistRole {
        match self.offer {
            Some(_) => WaitlistRole::Offer,
            None => self.entry.show.waitlist_role(self.sale.channel.as_ref()),
        }
    }

    /// An offer's record on the waiting list (nothing for any other hold): refused
    /// if the entry is no longer waiting (another instance offered it, or
    /// the buyer left).
    fn waitlist_events<U: Unit>(
        &self,
        view: &View<'_, U>,
        held: &Held,
    ) -> Result<Vec<WaitlistEvent>, HoldError> {
        let Some(entry_id) = self.offer else {
            return Ok(Vec::new());
        };
        let list = view
            .waitlist
            .ok_or_else(|| HoldError::Bug("an offer without its waiting list".into()))?;
        let places = held.parts.iter().map(|&(_, q)| q).sum::<u32>();
        let command = WaitlistCommand::Offer {
            entry_id,
            expires_at: held.expires_at,
            seats: held.seats.clone(),
            places: (places > 0).then_some(places),
        };
        waitlist::decide(list, &command, view.now).map_err(|_| HoldError::OfferGone)
    }

    pub(super) fn pool_command(
        &self,
        quantity: u32,
        expires_at: DateTime<Utc>,
        price: ItemPrice,
    ) -> PoolCommand {
        PoolCommand::PlaceHold {
            hold_id: self.hold_id,
            buyer: self.ctx.actor.id.clone(),
            quantity,
            expires_at,
            price: Some(price),
            channel: self.sale.channel.clone(),
            role: self.role(),
        }
    }

    /// The availability this hold chooses from (best available): the
    /// public's, or its channel's.
    pub(super) fn viewer(&self) -> Viewer {
        self.sale
            .channel
            .clone()
            .map_or(Viewer::Public, Viewer::Channel)
    }

    /// A price as this hold sells it: a comp is given away.
    fn as_sold(&self, price: ItemPrice) -> ItemPrice {
        if self.sale.comp {
            ItemPrice {
                price_cents: 0,
                ..price
            }
        } else {
            price
        }
    }

    /// The show's prices as last read: one decision prices every unit of its
    /// hold from the one view it takes.
    pub(super) fn prices(&self) -> Arc<PriceView> {
        self.entry.prices.current()
    }

    /// What seat `seat_id` costs this hold at `now` by `pricing`, as the
    /// ticket type asked for.
    pub(super) fn seat_price(
        &self,
        pricing: &Pricing,
        seat_id: &SeatId,
        now: DateTime<Utc>,
    ) -> Result<ItemPrice, HoldError> {
        let (_, spec) = self
            .entry
            .show
            .seat(seat_id)
            .ok_or_else(|| HoldError::UnknownSeats(vec![seat_id.clone()]))?;
        Ok(self.as_sold(pricing.price(
            || format!("seat {seat_id}"),
            spec.category.as_ref(),
            spec.price_cents,
            self.tickets.for_seat(seat_id),
            now,
        )?))
    }

    /// What one place of `pool_id` costs this hold at `now` by the show's
    /// prices as last read.
    pub(super) fn pool_price(
        &self,
        pool_id: &PoolId,
        now: DateTime<Utc>,
    ) -> Result<ItemPrice, HoldError> {
        let spec = self
            .entry
            .show
            .pool(pool_id)
            .ok_or_else(|| HoldError::UnknownPool(pool_id.clone()))?;
        Ok(self.as_sold(self.prices().pricing.price(
            || format!("pool {pool_id}"),
            spec.category.as_ref(),
            spec.price_cents,
            self.tickets.every(),
            now,
        )?))
    }

    /// The events of a placement of `count` seats or places decided on the
    /// units, with the buyer's allowance taken at the same `now` (refused
    /// whole: `BuyerLimitReached`) and the idempotency record.
    pub(super) fn decided<U: Unit>(
        &self,
        view: &View<'_, U>,
        units: Vec<Vec<U::Event>>,
        count: u32,
        held: Held,
    ) -> Result<Decision<U, Held>, HoldError> {
        if units.iter().all(Vec::is_empty) {
            // Every unit holds this hold already: a concurrent request with
            // the same idempotency key placed it.
            return Ok(Decision::Answer(held));
        }
        let allowance = match view.limit() {
            Some(limit) => view
                .allowance(&AllowanceCommand::Take {
                    hold_id: self.hold_id,
                    units: count,
                    expires_at: held.expires_at,
                    limit,
                })
                .map_err(|e| match e {
                    AllowanceError::LimitReached { limit, current } => {
                        HoldError::BuyerLimitReached { limit, current }
                    }
                    other => HoldError::Bug(format!("taking the allowance: {other}")),
                })?,
            None => Vec::new(),
        };
        let idempotency = self
            .ctx
            .idempotency_key
            .as_ref()
            .map(|key| IdempotencyKeyRow {
                buyer: self.ctx.actor.id.clone(),
                key: key.clone(),
                request_hash: self.request_hash.clone(),
                hold_id: self.hold_id,
                created_at_us: to_micros(view.now),
            });
        let list = self.waitlist_events(view, &held)?;
        let decided = Decided {
            allowance,
            waitlist: list,
            idempotency,
            ..Decided::units(units)
        };
        Ok(Decision::Append(decided, held))
    }

    /// The placed hold as the API shows it.
    pub(super) fn view(&self, request: &HoldRequest, held: Held, now: DateTime<Utc>) -> HoldView {
        let pool = match request {
            HoldRequest::Pool { pool_id, .. } => Some((pool_id.clone(), held.parts)),
            HoldRequest::Seats(_) | HoldRequest::BestAvailable { .. } => None,
        };
        let record = HoldRecord {
            hold_id: self.hold_id,
            show_id: self.entry.show.show_id.clone(),
            buyer: self.ctx.actor.id.clone(),
            expires_at: held.expires_at,
            state: HoldState::Held,
            booking_id: None,
            seats: held.seats,
            pool,
            items: held.items,
        };
        HoldView::of(record, self.entry, now)
    }
}

/// What the placing decisions' tests share: a show, a buyer, a placement.
#[cfg(test)]
pub(super) mod fixtures {
    use chrono::{DateTime, Utc};
    use domain::ids::HoldId;

    use super::Placement;
    use crate::catalog::CatalogEntry;
    use crate::command::context::RequestContext;
    use crate::command::holds::request::{Sale, Tickets};

    /// No ticket type asked for: the show's default for every unit.
    static NO_TICKETS: std::sync::LazyLock<Tickets> = std::sync::LazyLock::new(Tickets::default);
    /// Public sale at the show's prices.
    static PUBLIC: std::sync::LazyLock<Sale> = std::sync::LazyLock::new(Sale::default);

    pub(crate) fn now() -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_900_000_000, 0).expect("a valid instant")
    }

    pub(crate) fn buyer() -> RequestContext {
        RequestContext::system("buyer-1").expect("a valid buyer")
    }

    /// A show of 12 seats (S0..S11, section A) and a pool `floor` of 50.
    pub(crate) fn show() -> CatalogEntry {
        crate::query::availability::tests::entry(12)
    }

    pub(crate) fn placement<'a>(ctx: &'a RequestContext, entry: &'a CatalogEntry) -> Placement<'a> {
        Placement {
            ctx,
            entry,
            hold_id: HoldId::random(),
            request_hash: "hash".into(),
            admission: None,
            tickets: &NO_TICKETS,
            sale: &PUBLIC,
            offer: None,
        }
    }
}
