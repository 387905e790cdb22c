//! A show's waiting list: joining, leaving, and the judge that offers the
//! inventory owed to the waiting list (`judge`).
//!
//! The waiting list is one stream per show (`domain::waitlist`). Joining and
//! leaving are rounds on it alone; an offer is a hold's round with the waiting list
//! locked beside it (`Round::with_waitlist`), and so is passing seats on to
//! sale. Whether what an entry asks for is available now is advice read
//! from availability before the join (409 `available_now`): the waiting list's
//! promise is about inventory that frees after.

mod freed;
mod joins;
mod judge;

use std::sync::Arc;

use domain::ids::{EntryId, ShowId};
use domain::places::SeatSpec;
use domain::seat::SeatStatus;
use domain::waitlist::{self, waitlist_stream_id, Ask, Waitlist, WaitlistCommand, WaitlistEvent};

use crate::auth::Actor;
use crate::catalog::{CatalogEntry, ShowCatalog};
use crate::clock::Clock;
use crate::command::context::RequestContext;
use crate::command::holds::{HoldError, HoldService};
use crate::command::round::{Decided, Decides, Decision, Round, RoundError, Rounds, View};
use crate::command::streams::{show_stream, ShowKey};
use crate::query::availability::{AvailabilityCache, Viewer};
use crate::store::{Shows, StoreError};

pub use judge::Judged;

/// A show's waiting list, as a round locks it.
pub type WaitlistKey = ShowKey;

// The waiting list has no read model: readers fold its stream (`query::waitlist`).
show_stream!(Waitlist, WaitlistEvent, waitlists);

#[derive(Debug, thiserror::Error)]
pub enum WaitlistError {
    #[error("show not found")]
    ShowNotFound,
    /// The show keeps no waiting list (409 `no_waitlist`).
    #[error("the show keeps no waiting list")]
    NoWaitlist,
    /// 422 `validation_failed`, naming the field.
    #[error("{0}")]
    Invalid(String),
    /// What the entry asks for can be held now (409 `available_now`).
    #[error("what the entry asks for is available now: hold it")]
    AvailableNow,
    /// The buyer waits already on this show, for something else (409
    /// `waitlist_entry_exists`).
    #[error("the buyer has an entry in this waiting list already")]
    EntryExists(ShowId, EntryId),
    #[error("the waiting list is full")]
    Full,
    #[error("entry not found")]
    EntryNotFound,
    #[error("{0}")]
    Bug(String),
    #[error("contention did not settle")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RoundError for WaitlistError {
    fn contended() -> Self {
        WaitlistError::Busy
    }

    fn bug(what: String) -> Self {
        WaitlistError::Bug(what)
    }
}

impl From<HoldError> for WaitlistError {
    fn from(e: HoldError) -> Self {
        match e {
            HoldError::Store(e) => WaitlistError::Store(e),
            HoldError::Busy => WaitlistError::Busy,
            other => WaitlistError::Bug(format!("an offer: {other}")),
        }
    }
}

/// An entry leaving the waiting list, decided on the waiting list as locked: only its
/// buyer (or an admin) may take it out; to anyone else it does not exist.
struct Leaving<'a> {
    entry_id: EntryId,
    actor: &'a Actor,
}

impl Decides<Waitlist> for Leaving<'_> {
    type Output = ();
    type Error = WaitlistError;

    fn decide(
        &mut self,
        view: &View<'_, Waitlist>,
    ) -> Result<Decision<Waitlist, ()>, WaitlistError> {
        let Some(&(list, _)) = view.units.first() else {
            return Err(WaitlistError::Bug(
                "a leave without its waiting list".into(),
            ));
        };
        match list.entry(&self.entry_id) {
            Some(entry) if entry.buyer == self.actor.id || self.actor.is_admin() => {}
            _ => return Err(WaitlistError::EntryNotFound),
        }
        let command = WaitlistCommand::Leave {
            entry_id: self.entry_id,
        };
        match waitlist::decide(list, &command, view.now) {
            Ok(events) => Ok(Decision::Append(Decided::units(vec![events]), ())),
            Err(e) => Err(WaitlistError::Bug(format!("leaving: {e}"))),
        }
    }
}

/// The waiting lists' commands.
pub struct WaitlistService {
    catalog: Arc<ShowCatalog>,
    rounds: Arc<Rounds>,
    holds: Arc<HoldService>,
    shows: Shows,
    availability: Arc<AvailabilityCache>,
    clock: Arc<dyn Clock>,
    /// Joins waiting for the next append of their show's waiting list.
    joins: Arc<joins::JoinQueue>,
    /// Judgements asked for by requests that freed seats, shared.
    judgements: freed::Judgements,
}

impl WaitlistService {
    /// The waiting list's commands over the catalog, the command rounds and the
    /// holds that make its offers.
    pub fn new(
        (catalog, rounds, holds): (Arc<ShowCatalog>, Arc<Rounds>, Arc<HoldService>),
        shows: Shows,
        availability: &Arc<AvailabilityCache>,
        clock: &Arc<dyn Clock>,
    ) -> Self {
        Self {
            catalog,
            rounds,
            holds,
            shows,
            availability: availability.clone(),
            clock: clock.clone(),
            joins: Arc::default(),
            judgements: freed::Judgements::default(),
        }
    }

    /// The show, if it keeps a waiting list.
    pub async fn show(&self, show_id: &ShowId) -> Result<Arc<CatalogEntry>, WaitlistError> {
        let entry = self
            .catalog
            .get(show_id)
            .await?
            .ok_or(WaitlistError::ShowNotFound)?;
        if entry.show.waitlist.is_none() {
            return Err(WaitlistError::NoWaitlist);
        }
        Ok(entry)
    }

    /// Whether the show keeps a waiting list (`None`: no such show),
    /// without loading a show that does not into the catalog.
    pub async fn keeps_waitlist(&self, show_id: &ShowId) -> Result<Option<bool>, WaitlistError> {
        Ok(self.catalog.keeps_waitlist(show_id).await?)
    }

    /// `POST /v1/shows/{id}/waitlist`: the buyer's entry, and whether this
    /// request made it (`false`: the same ask again, the same entry).
    pub async fn join(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        ask: Ask,
    ) -> Result<(EntryId, bool), WaitlistError> {
        let entry = self.show(show_id).await?;
        check_ask(&entry, &ask)?;
        if self.available_now(&entry, &ask).await? {
            return Err(WaitlistError::AvailableNow);
        }
        let max_entries = entry
            .show
            .waitlist
            .map_or(domain::limits::MAX_WAITLIST_ENTRIES, |w| w.max_entries());
        self.join_queued((show_id, max_entries), &ctx.actor.id, ask)
            .await
    }

    /// `DELETE /v1/waitlist/{id}`: the entry leaves the waiting list (an offer
    /// made to it stays the buyer's hold, to buy or release).
    pub async fn leave(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        entry_id: EntryId,
    ) -> Result<(), WaitlistError> {
        self.show(show_id).await?;
        let key = WaitlistKey {
            show_id: show_id.clone(),
        };
        let units = vec![(waitlist_stream_id(show_id), key)];
        let mut leaving = Leaving {
            entry_id,
            actor: &ctx.actor,
        };
        let rounds: &Rounds = &self.rounds;
        rounds
            .run(Round::new("waitlist_leave", ctx), units, &mut leaving)
            .await?;
        Ok(())
    }

    /// Whether the public could hold what `ask` asks for now (advice).
    async fn available_now(&self, entry: &CatalogEntry, ask: &Ask) -> Result<bool, WaitlistError> {
        let now = self.clock.now();
        let current = self
            .availability
            .current(&self.shows, entry, &Viewer::Public, now)
            .await?;
        if let Some(pool_id) = &ask.pool_id {
            let free = (entry.show.pools.iter().zip(&current.pools))
                .find(|(spec, _)| &spec.pool_id == pool_id)
                .map_or(0, |(spec, now)| now.available(spec.capacity));
            return Ok(free >= ask.quantity);
        }
        let free: Vec<&SeatSpec> = (entry.show.seats.iter())
            .zip(&current.statuses)
            .filter(|(_, status)| **status == SeatStatus::Available)
            .map(|(seat, _)| seat)
            .collect();
        Ok(ask.choose(&free).is_some())
    }
}

/// The ask against the show: its own rules, and a category, section or
/// pool the show has.
fn check_ask(entry: &CatalogEntry, ask: &Ask) -> Result<(), WaitlistError> {
    ask.check()
        .map_err(|e| WaitlistError::Invalid(e.to_string()))?;
    let show = &entry.show;
    if let Some(category) = &ask.category {
        if !show.categories_in_use().contains(category) {
            return Err(WaitlistError::Invalid(format!(
                "category: the show has no seats of category {category}"
            )));
        }
    }
    if let Some(section) = &ask.section {
        if !show.seats.iter().any(|s| &s.section == section) {
            return Err(WaitlistError::Invalid(format!(
                "section: the show has no section {section}"
            )));
        }
    }
    match &ask.pool_id {
        Some(pool_id) if show.pool(pool_id).is_none() => Err(WaitlistError::Invalid(format!(
            "pool_id: the show has no pool {pool_id}"
        ))),
        Some(_) => Ok(()),
        None if show.seats.is_empty() => Err(WaitlistError::Invalid(
            "pool_id: the show has no seats, only pools".into(),
        )),
        None => Ok(()),
    }
}
