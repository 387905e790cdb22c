//! A show's waiting list as readers see it: its stream folded from the
//! log, kept per show and brought up to date by the events since (the waiting list
//! has no read model; 10,000 entries fold once, then a few events a read).
//! An entry's offer is told by its hold: offered while the hold holds,
//! `booked` once bought, `lapsed` once it expired or was released.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use domain::ids::{EntryId, HoldId, ShowId};
use domain::waitlist::{waitlist_stream_id, Entry, EntryStatus, Waitlist, WaitlistEvent};
use projections::holds::HoldState;
use serde::Serialize;
use tokio::sync::Mutex;

use crate::clock::Clock;
use crate::store::log::EventLog;
use crate::store::{Holds, StoreError};

/// An entry as the API names it: its show and its id (`show.uuid`), so
/// that `GET /v1/waitlist/{entry_id}` finds its waiting list without an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryRef {
    pub show_id: ShowId,
    pub entry_id: EntryId,
}

impl EntryRef {
    pub fn parse(text: &str) -> Option<Self> {
        let (show, id) = text.rsplit_once('.')?;
        Some(Self {
            show_id: ShowId::parse(show).ok()?,
            entry_id: EntryId(uuid::Uuid::parse_str(id).ok()?),
        })
    }
}

impl std::fmt::Display for EntryRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.show_id, self.entry_id)
    }
}

/// An entry as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct EntryView {
    /// `{show_id}.{uuid}`.
    pub entry_id: String,
    pub show_id: String,
    #[schema(value_type = String)]
    pub buyer: String,
    /// `waiting`, `offered`, `booked` (the offer was bought), `lapsed`
    /// (it expired or was released) or `left`.
    pub status: &'static str,
    /// While waiting: its place among those waiting (1: offered next).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    /// Its number in the waiting list: the order it joined in.
    pub number: usize,
    pub quantity: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    /// The pool asked for (places, not seats).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<String>,
    pub adjacent: bool,
    pub joined_at: DateTime<Utc>,
    /// Once offered: the hold, until when, which seats.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<uuid::Uuid>)]
    pub hold_id: Option<HoldId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub seats: Vec<String>,
    /// Once offered places of its pool: how many.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub places: Option<u32>,
}

/// The operator's view of a waiting list: counts by status and the entries in
/// the waiting list's order.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct WaitlistView {
    pub show_id: String,
    pub counts: HashMap<&'static str, usize>,
    pub entries: Vec<EntryView>,
}

/// Waiting lists folded from the log, one per show read.
pub struct WaitlistBook {
    log: EventLog,
    holds: Holds,
    clock: Arc<dyn Clock>,
    shows: Mutex<HashMap<ShowId, Arc<ShowWaitlist>>>,
}

/// One show's waiting list as read: the reads asked for (tickets), and the fold.
#[derive(Default)]
struct ShowWaitlist {
    tickets: std::sync::atomic::AtomicU64,
    folded: Mutex<Folded>,
}

/// A waiting list folded from the log, the stream sequence it is folded to, and
/// the last ticket whose read it covers.
#[derive(Default)]
struct Folded {
    list: Waitlist,
    version: usize,
    fresh_through: u64,
}

impl WaitlistBook {
    pub fn new(log: EventLog, holds: Holds, clock: Arc<dyn Clock>) -> Self {
        Self {
            log,
            holds,
            clock,
            shows: Mutex::default(),
        }
    }

    /// Runs `read` on `show_id`'s waiting list as the log has it now. Reads are
    /// shared: a read takes a ticket, and one that finds the fold read on
    /// from the log after its ticket was taken (by a read that waited with
    /// it) reads nothing more. Without that, a crowd joining one show read
    /// the log one after another, a query each (the joins' answers).
    async fn with_waitlist<R>(
        &self,
        show_id: &ShowId,
        read: impl FnOnce(&Waitlist) -> R,
    ) -> Result<R, StoreError> {
        use std::sync::atomic::Ordering;
        let slot = self
            .shows
            .lock()
            .await
            .entry(show_id.clone())
            .or_default()
            .clone();
        let ticket = slot.tickets.fetch_add(1, Ordering::SeqCst) + 1;
        let mut folded = slot.folded.lock().await;
        if folded.fresh_through < ticket {
            let starting = slot.tickets.load(Ordering::SeqCst);
            let id = waitlist_stream_id(show_id);
            for event in self
                .log
                .stream_events::<Waitlist>(&id, folded.version)
                .await?
            {
                let payload: WaitlistEvent =
                    serde_json::from_value(event.payload).map_err(|e| {
                        StoreError::Corrupt(format!("waiting list {id}#{}: {e}", event.sequence))
                    })?;
                folded.list.apply_event(&payload);
                folded.version = event.sequence;
            }
            folded.fresh_through = starting;
        }
        Ok(read(&folded.list))
    }

    /// One entry, if the waiting list has it.
    pub async fn entry(&self, entry: &EntryRef) -> Result<Option<EntryView>, StoreError> {
        self.found(&entry.show_id, |list| list.entry(&entry.entry_id))
            .await
    }

    /// The buyer's entry on the show (not one they left), if any.
    pub async fn entry_of(
        &self,
        show_id: &ShowId,
        buyer: &domain::ids::BuyerId,
    ) -> Result<Option<EntryView>, StoreError> {
        self.found(show_id, |list| list.entry_of(buyer)).await
    }

    /// The entry `find` finds in `show_id`'s waiting list, as the API shows it.
    async fn found(
        &self,
        show_id: &ShowId,
        find: impl FnOnce(&Waitlist) -> Option<&Entry>,
    ) -> Result<Option<EntryView>, StoreError> {
        let found = self
            .with_waitlist(show_id, |list| {
                find(list).map(|e| (e.clone(), list.place(&e.entry_id)))
            })
            .await?;
        match found {
            Some((e, place)) => Ok(Some(self.view(show_id, &e, place).await?)),
            None => Ok(None),
        }
    }

    /// The whole waiting list, in order (admin).
    pub async fn list(&self, show_id: &ShowId) -> Result<WaitlistView, StoreError> {
        let entries = self
            .with_waitlist(show_id, |list| {
                let mut waiting = 0;
                (list.entries.iter())
                    .map(|e| {
                        let place = (e.status == EntryStatus::Waiting).then(|| {
                            waiting += 1;
                            waiting
                        });
                        (e.clone(), place)
                    })
                    .collect::<Vec<_>>()
            })
            .await?;
        let mut views = Vec::with_capacity(entries.len());
        let mut counts: HashMap<&'static str, usize> = HashMap::new();
        for (e, place) in &entries {
            let view = self.view(show_id, e, *place).await?;
            *counts.entry(view.status).or_default() += 1;
            views.push(view);
        }
        Ok(WaitlistView {
            show_id: show_id.to_string(),
            counts,
            entries: views,
        })
    }

    async fn view(
        &self,
        show_id: &ShowId,
        entry: &Entry,
        position: Option<usize>,
    ) -> Result<EntryView, StoreError> {
        let mut view = EntryView {
            entry_id: EntryRef {
                show_id: show_id.clone(),
                entry_id: entry.entry_id,
            }
            .to_string(),
            show_id: show_id.to_string(),
            buyer: entry.buyer.to_string(),
            status: "waiting",
            position,
            number: entry.number,
            quantity: entry.ask.quantity,
            category: entry.ask.category.as_ref().map(ToString::to_string),
            section: entry.ask.section.clone(),
            pool_id: entry.ask.pool_id.as_ref().map(ToString::to_string),
            adjacent: entry.ask.adjacent,
            joined_at: entry.joined_at,
            hold_id: None,
            expires_at: None,
            seats: Vec::new(),
            places: None,
        };
        match &entry.status {
            EntryStatus::Waiting => {}
            EntryStatus::Left => view.status = "left",
            EntryStatus::Offered {
                hold_id,
                expires_at,
                seats,
                places,
            } => {
                view.hold_id = Some(*hold_id);
                view.expires_at = Some(*expires_at);
                view.seats = seats.iter().map(ToString::to_string).collect();
                view.places = *places;
                let hold = self.holds.hold(hold_id).await?;
                let now = self.clock.now();
                view.status = match hold.map(|h| (h.state, h.expires_at)) {
                    Some((HoldState::Converted, _)) => "booked",
                    Some((HoldState::Held, until)) if until > now => {
                        // As extended, if it was.
                        view.expires_at = Some(until);
                        "offered"
                    }
                    // Not yet in the hold records counts as offered; an
                    // ended hold (expired, released) as lapsed.
                    None => "offered",
                    Some(_) => "lapsed",
                };
            }
        }
        Ok(view)
    }
}
