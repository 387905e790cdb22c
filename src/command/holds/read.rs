//! A stored hold as the API shows it, and the owner check every command on
//! an existing hold starts with.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use domain::ids::{HoldId, SeatId, ShowId};
use projections::holds::HoldStatus;

use super::{HoldError, HoldView};
use crate::auth::Actor;
use crate::catalog::{CatalogEntry, ShowCatalog};
use crate::clock::Clock;
use crate::store::{HoldRecord, Holds};

impl HoldView {
    /// A hold as the API shows it at `now`: the one way every answer about
    /// a hold is made (placed, read, extended, sent in a webhook).
    pub(super) fn of(mut record: HoldRecord, entry: &CatalogEntry, now: DateTime<Utc>) -> Self {
        entry.sort_seats(&mut record.seats);
        let quantity = record.quantity();
        HoldView {
            hold_id: record.hold_id,
            show_id: record.show_id.to_string(),
            seats: record.seats.iter().map(SeatId::to_string).collect(),
            pool_id: record.pool.map(|(pool_id, _)| pool_id.to_string()),
            quantity,
            expires_at: record.expires_at,
            status: HoldStatus::at(record.state, record.expires_at, now),
            booking_id: record.booking_id,
        }
    }
}

/// Reads holds: a record as the API shows it, the show it is on, and the
/// owner check. Every other hold handler reads through it.
#[derive(Clone)]
pub(super) struct HoldReader {
    /// Hold records: what a hold is now.
    records: Holds,
    catalog: Arc<ShowCatalog>,
    clock: Arc<dyn Clock>,
}

impl HoldReader {
    pub(super) fn new(records: Holds, catalog: Arc<ShowCatalog>, clock: Arc<dyn Clock>) -> Self {
        Self {
            records,
            catalog,
            clock,
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
        Ok(HoldView::of(record, &entry, self.clock.now()))
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
