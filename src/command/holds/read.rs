//! A stored hold as the API shows it, and the owner check every command on
//! an existing hold starts with.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use domain::checkout::Checkout;
use domain::ids::{HoldId, OrderId, SeatId, ShowId};
use projections::holds::HoldStatus;

use super::{HoldError, HoldView, ItemView};
use crate::auth::Actor;
use crate::catalog::{CatalogEntry, ShowCatalog};
use crate::clock::Clock;
use crate::command::round::Rounds;
use crate::store::{HoldRecord, Holds};

impl HoldView {
    /// A hold as the API shows it at `now`: the one way every answer about
    /// a hold is made (placed, read, extended, sent in a webhook).
    pub(super) fn of(mut record: HoldRecord, entry: &CatalogEntry, now: DateTime<Utc>) -> Self {
        entry.sort_seats(&mut record.seats);
        let quantity = record.quantity();
        let items = items_of(&record, entry);
        let amount_cents = amount_of(&items);
        // A hold's own purchase books it under the booking id its id
        // derives; an order books its holds under the order's id.
        let own = Checkout::booking_id_for(record.hold_id);
        let (booking_id, order_id) = match record.booking_id {
            Some(booking_id) if booking_id != own => (None, Some(OrderId(booking_id.0))),
            booking_id => (booking_id, None),
        };
        HoldView {
            order_id,
            items,
            amount_cents,
            hold_id: record.hold_id,
            show_id: record.show_id.to_string(),
            seats: record.seats.iter().map(SeatId::to_string).collect(),
            pool_id: record.pool.map(|(pool_id, _)| pool_id.to_string()),
            quantity,
            expires_at: record.expires_at,
            status: HoldStatus::at(record.state, record.expires_at, now),
            booking_id,
            offer: false,
        }
    }
}

/// The lines of a hold: its priced items, a pool's shards of one price
/// joined, in the show's seat order. A hold placed before prices were in
/// its events is priced as it was then: each seat's or the pool's own
/// price, for the default ticket type.
fn items_of(record: &HoldRecord, entry: &CatalogEntry) -> Vec<ItemView> {
    let show = &entry.show;
    if record.items.is_empty() {
        let default = show.pricing.default_type().to_string();
        let line = |seat_id: Option<&SeatId>, quantity, price_cents| ItemView {
            seat_id: seat_id.map(SeatId::to_string),
            pool_id: record.pool.as_ref().map(|(p, _)| p.to_string()),
            quantity,
            category: None,
            ticket_type: default.clone(),
            price_cents,
        };
        return match &record.pool {
            Some((pool_id, _)) => {
                let price = show.pool(pool_id).map_or(0, |p| p.price_cents);
                vec![line(None, record.quantity().unwrap_or(0), price)]
            }
            None => record
                .seats
                .iter()
                .map(|s| {
                    line(
                        Some(s),
                        1,
                        show.seat(s).map_or(0, |(_, spec)| spec.price_cents),
                    )
                })
                .collect(),
        };
    }
    let mut lines: Vec<ItemView> = Vec::new();
    for item in record.items.iter() {
        let line = ItemView {
            seat_id: item.seat_id.as_ref().map(SeatId::to_string),
            pool_id: item.pool_id.as_ref().map(|p| p.to_string()),
            quantity: item.units(),
            category: item.category.as_ref().map(|c| c.to_string()),
            ticket_type: item.ticket_type.to_string(),
            price_cents: item.price_cents,
        };
        let same = |l: &&mut ItemView| {
            l.seat_id.is_none()
                && l.pool_id == line.pool_id
                && (&l.category, &l.ticket_type, l.price_cents)
                    == (&line.category, &line.ticket_type, line.price_cents)
        };
        match lines.iter_mut().find(same) {
            Some(pooled) if line.seat_id.is_none() => pooled.quantity += line.quantity,
            _ => lines.push(line),
        }
    }
    lines.sort_by_cached_key(|l| {
        l.seat_id
            .as_deref()
            .and_then(|s| SeatId::parse(s).ok())
            .and_then(|s| show.seat(&s).map(|(ordinal, _)| ordinal))
            .unwrap_or(usize::MAX)
    });
    lines
}

fn amount_of(lines: &[ItemView]) -> i64 {
    lines
        .iter()
        .map(|l| l.price_cents * i64::from(l.quantity))
        .sum()
}

/// The priced lines of a hold, as its answer shows them (an order's lines
/// are made from them).
pub fn hold_items(record: &HoldRecord, entry: &CatalogEntry) -> Vec<ItemView> {
    items_of(record, entry)
}

/// What a purchase of the hold charges: its lines' sum (see `items_of`).
pub fn hold_amount(record: &HoldRecord, entry: &CatalogEntry) -> i64 {
    amount_of(&items_of(record, entry))
}

/// Reads holds: a record as the API shows it, the show it is on, and the
/// owner check. Every other hold handler reads through it.
#[derive(Clone)]
pub(super) struct HoldReader {
    /// Hold records: what a hold is now.
    records: Holds,
    catalog: Arc<ShowCatalog>,
    clock: Arc<dyn Clock>,
    /// Where an order's checkout is read (a hold given back by its order).
    rounds: Arc<Rounds>,
}

impl HoldReader {
    pub(super) fn new(
        records: Holds,
        catalog: Arc<ShowCatalog>,
        clock: Arc<dyn Clock>,
        rounds: Arc<Rounds>,
    ) -> Self {
        Self {
            records,
            catalog,
            clock,
            rounds,
        }
    }

    pub(super) async fn show(&self, show_id: &ShowId) -> Result<Arc<CatalogEntry>, HoldError> {
        self.catalog
            .get(show_id)
            .await?
            .ok_or(HoldError::ShowNotFound)
    }

    /// The hold record, whoever owns it; `None` if there is no such hold.
    pub(super) async fn record(&self, hold_id: &HoldId) -> Result<Option<HoldRecord>, HoldError> {
        Ok(self.records.hold(hold_id).await?)
    }

    pub(super) async fn view(&self, record: HoldRecord) -> Result<HoldView, HoldError> {
        let entry = self.show(&record.show_id).await?;
        let mut view = HoldView::of(record, &entry, self.clock.now());
        if let Some(order_id) = view.order_id {
            if self.given_back(order_id, view.hold_id).await? {
                view.status = HoldStatus::Released;
            }
        }
        Ok(view)
    }

    /// Whether `order_id` converted the hold and then gave it back (another
    /// of its holds was lost, or its capture failed): its units are free
    /// again, so the hold reads `released`, still naming the order. The
    /// hold's row keeps `converted` (a row's final state is its first).
    async fn given_back(&self, order_id: OrderId, hold_id: HoldId) -> Result<bool, HoldError> {
        let (checkout, _) = self.rounds.read_checkout(HoldId(order_id.0)).await?;
        Ok(checkout
            .order
            .is_some_and(|order| !order.converted.contains(&hold_id)))
    }

    pub(super) async fn owned_record(
        &self,
        actor: &Actor,
        hold_id: &HoldId,
    ) -> Result<HoldRecord, HoldError> {
        let record = self.record(hold_id).await?.ok_or(HoldError::HoldNotFound)?;
        if !actor.may_act_for(record.buyer.as_str()) {
            return Err(HoldError::Forbidden);
        }
        Ok(record)
    }

    /// A hold as the API shows it, whoever owns it (a system reader such
    /// as the webhook dispatcher); `None` if there is no such hold.
    pub(super) async fn view_any(&self, hold_id: &HoldId) -> Result<Option<HoldView>, HoldError> {
        match self.record(hold_id).await? {
            Some(record) => self.view(record).await.map(Some),
            None => Ok(None),
        }
    }

    /// `GET /v1/holds/{id}`.
    pub(super) async fn get(&self, actor: &Actor, hold_id: &HoldId) -> Result<HoldView, HoldError> {
        let record = self.owned_record(actor, hold_id).await?;
        self.view(record).await
    }
}
