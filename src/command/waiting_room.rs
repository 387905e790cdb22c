//! The waiting room's commands: a buyer joins a show's queue; the room's
//! seed is drawn; an operator changes the rate; the room keeper pauses,
//! resumes and closes it as the show's inventory comes and goes. Each is a
//! decision of `domain::waiting_room` run by the round; a buyer's standing
//! is read from the queue book (`query::queue`), never stored. The
//! decisions live beside: `join` (`Joining`) and `room` (`WaitingRoomChange`).

mod change;
mod join;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use domain::ids::{BuyerId, ShowId};
use domain::seat::SeatStatus;
use domain::waiting_room::{
    self, entry_stream_id, waiting_room_stream_id, CloseReason, JoinQueue, QueueEntry, RoomCommand,
    RoomEvent, Standing, WaitingRoom, WaitingRoomSettings,
};
use projections::rows::Rows;
use serde::Serialize;

use crate::catalog::{CatalogEntry, ShowCatalog};
use crate::clock::Clock;
use crate::command::context::RequestContext;
use crate::command::round::{Round, RoundError, Rounds, Settled};
use crate::command::streams::{Inventory, Stream, StreamCache};
use crate::query::availability::Current;
use crate::query::waiting_room::{ShowWaitingRoom, WaitingRoomBook};
use crate::store::{EventLog, StoreError};
use change::WaitingRoomChange;
use join::Joining;

/// The actor recorded on the room's own events (seed, pauses, the close).
pub const ROOM_ACTOR: &str = "system:room";

/// A show's room stream.
#[derive(Debug, Clone)]
pub struct WaitingRoomKey {
    pub show_id: ShowId,
}

/// A buyer's queue entry on a show.
#[derive(Debug, Clone)]
pub struct EntryKey {
    pub show_id: ShowId,
    pub buyer: BuyerId,
}

impl Stream for WaitingRoom {
    type Key = WaitingRoomKey;

    fn show_id(key: &WaitingRoomKey) -> &ShowId {
        &key.show_id
    }

    /// The room has no read model: the queue book reads it from the log.
    fn rows(_: &mut Rows, _: &WaitingRoomKey, _: &Self, _: usize, _: &[RoomEvent]) {}

    fn cache(inventory: &Inventory) -> &StreamCache<Self> {
        &inventory.rooms
    }

    fn sort(streams: &mut [(String, WaitingRoomKey)]) {
        streams.sort_by(|a, b| a.0.cmp(&b.0));
    }
}

impl Stream for QueueEntry {
    type Key = EntryKey;

    fn show_id(key: &EntryKey) -> &ShowId {
        &key.show_id
    }

    /// Entries have no read model: the queue book reads them from the log.
    fn rows(_: &mut Rows, _: &EntryKey, _: &Self, _: usize, _: &[waiting_room::QueueEvent]) {}

    fn cache(inventory: &Inventory) -> &StreamCache<Self> {
        &inventory.queue_entries
    }

    fn sort(streams: &mut [(String, EntryKey)]) {
        streams.sort_by(|a, b| a.0.cmp(&b.0));
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WaitingRoomError {
    #[error("show not found")]
    ShowNotFound,
    /// The show sells without a waiting room.
    #[error("the show has no waiting room")]
    NoWaitingRoom,
    /// The buyer has not joined the show's queue.
    #[error("not in the queue")]
    NotInQueue,
    #[error("the sale is over: everything is booked")]
    SoldOut,
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Bug(String),
    #[error("contention did not settle")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RoundError for WaitingRoomError {
    fn contended() -> Self {
        WaitingRoomError::Busy
    }

    fn bug(what: String) -> Self {
        WaitingRoomError::Bug(what)
    }
}

/// Where a buyer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueStatus {
    /// Not admitted yet.
    Waiting,
    /// May place holds until `admitted_until`.
    Admitted,
    /// Was admitted, and let the admission pass without a hold.
    Expired,
    /// The sale is over (`reason`).
    Closed,
}

/// A buyer's place in a queue, as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct QueueView {
    pub status: QueueStatus,
    /// The buyer's queue number (before the sale starts, a place among the
    /// early joiners that the start's random order replaces).
    #[schema(minimum = 1)]
    pub position: Option<u64>,
    /// Buyers let in before this one who are not in yet.
    #[schema(minimum = 0)]
    pub ahead: Option<u64>,
    #[schema(minimum = 0)]
    pub estimated_wait_seconds: Option<i64>,
    /// Until when an admitted buyer may place a hold.
    pub admitted_until: Option<DateTime<Utc>>,
    pub sale_starts_at: DateTime<Utc>,
    /// Why a closed queue closed (`sold_out`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, pattern = "^sold_out$")]
    pub reason: Option<CloseReason>,
    /// When the status changes next as things stand (an admission, its
    /// end): when a live stream looks again.
    #[serde(skip)]
    pub changes_at: Option<DateTime<Utc>>,
}

/// A show's queue as its operator sees it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct QueueOverview {
    pub waiting: u64,
    /// Buyers whose admission runs now.
    pub admitted: u64,
    pub admit_per_minute: u32,
    pub sale_starts_at: DateTime<Utc>,
    pub paused: bool,
    pub closed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, pattern = "^sold_out$")]
    pub reason: Option<CloseReason>,
}

/// Whether a buyer may place a hold: what the hold's decision needs to
/// compute it at its own `now`.
#[derive(Debug, Clone)]
pub struct Admission {
    pub settings: WaitingRoomSettings,
    pub room: WaitingRoom,
    /// The buyer's admission slot; `None`: not in the queue, or not
    /// numbered yet.
    pub slot: Option<u64>,
}

impl Admission {
    pub fn admits(&self, now: DateTime<Utc>) -> bool {
        self.slot.is_some_and(|slot| {
            matches!(
                self.room.standing(&self.settings, slot, now),
                Standing::Admitted { .. }
            )
        })
    }
}

fn view_of(
    queue: &ShowWaitingRoom,
    settings: &WaitingRoomSettings,
    buyer: &BuyerId,
    now: DateTime<Utc>,
) -> Option<QueueView> {
    let (number, slot) = queue.number(buyer)?;
    let mut view = QueueView {
        status: QueueStatus::Waiting,
        position: Some(number.value()),
        ahead: None,
        estimated_wait_seconds: None,
        admitted_until: None,
        sale_starts_at: settings.sale_starts_at,
        reason: None,
        changes_at: None,
    };
    let Some(slot) = slot else {
        // Not numbered yet (the start has not drawn the order, or the log
        // has not shown the join): waiting, told when the sale starts.
        if let Some((_, reason)) = queue.room.closed {
            view.status = QueueStatus::Closed;
            view.reason = Some(reason);
        } else {
            view.ahead = Some(number.value().saturating_sub(1));
            view.changes_at = Some(settings.sale_starts_at.max(now));
        }
        return Some(view);
    };
    match queue.room.standing(settings, slot, now) {
        Standing::Waiting { estimated_wait } => {
            view.ahead = Some(queue.ahead(settings, number.value(), now));
            view.estimated_wait_seconds = Some((estimated_wait.num_milliseconds() + 999) / 1000);
            view.changes_at = queue.room.admitted_at(settings, slot);
        }
        Standing::Admitted { until } => {
            view.status = QueueStatus::Admitted;
            view.ahead = Some(0);
            view.estimated_wait_seconds = Some(0);
            view.admitted_until = Some(until);
            view.changes_at = Some(until);
        }
        Standing::Expired => view.status = QueueStatus::Expired,
        Standing::Closed(reason) => {
            view.status = QueueStatus::Closed;
            view.reason = Some(reason);
        }
    }
    Some(view)
}

/// What a show's inventory says to its room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stock {
    /// Seats and pool places free now.
    pub available: u64,
    /// Every seat and place booked: none free, none held.
    pub all_booked: bool,
}

impl Stock {
    pub fn of(current: &Current, capacities: impl Iterator<Item = u32>) -> Self {
        let mut available = 0u64;
        let mut held = 0u64;
        for status in &current.statuses {
            match status {
                SeatStatus::Available => available += 1,
                SeatStatus::Held => held += 1,
                // Allocated to a channel: not the queue's to sell.
                SeatStatus::Booked | SeatStatus::NotForSale => {}
            }
        }
        for (capacity, pool) in capacities.zip(&current.pools) {
            available += u64::from(pool.available(capacity));
            held += u64::from(pool.held);
        }
        Self {
            available,
            all_booked: available == 0 && held == 0,
        }
    }
}

/// One open queue stream, counted until dropped.
pub struct StreamSlot(Arc<AtomicUsize>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
        metrics::gauge!("waiting_room_streams_open").decrement(1.0);
    }
}

pub struct WaitingRoomService {
    /// Queue streams open on this instance.
    streams: Arc<AtomicUsize>,
    log: EventLog,
    catalog: Arc<ShowCatalog>,
    clock: Arc<dyn Clock>,
    rounds: Arc<Rounds>,
    book: Arc<WaitingRoomBook>,
}

impl WaitingRoomService {
    pub fn new(
        log: EventLog,
        catalog: Arc<ShowCatalog>,
        clock: Arc<dyn Clock>,
        rounds: Arc<Rounds>,
        book: Arc<WaitingRoomBook>,
    ) -> Self {
        Self {
            streams: Arc::default(),
            log,
            catalog,
            clock,
            rounds,
            book,
        }
    }

    /// A slot for one more queue stream, unless `max` are open.
    pub fn stream_slot(&self, max: usize) -> Option<StreamSlot> {
        let open = self.streams.fetch_add(1, Ordering::Relaxed);
        let slot = StreamSlot(self.streams.clone());
        metrics::gauge!("waiting_room_streams_open").increment(1.0);
        (open < max).then_some(slot)
    }

    /// How long until `view` changes by the schedule (an admission, its
    /// end), as of now; `None` when the schedule names no instant (a paused
    /// room: only a room change moves it).
    pub fn next_change(&self, view: &QueueView) -> Option<std::time::Duration> {
        view.changes_at
            .map(|at| (at - self.clock.now()).to_std().unwrap_or_default())
    }

    async fn room_of(
        &self,
        show_id: &ShowId,
    ) -> Result<(Arc<CatalogEntry>, WaitingRoomSettings), WaitingRoomError> {
        let entry = self
            .catalog
            .get(show_id)
            .await?
            .ok_or(WaitingRoomError::ShowNotFound)?;
        let settings = entry
            .show
            .waiting_room
            .ok_or(WaitingRoomError::NoWaitingRoom)?;
        Ok((entry, settings))
    }

    /// `POST /v1/shows/{id}/queue`: joins once; `(true, view)` if this call
    /// joined.
    pub async fn join(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
    ) -> Result<(bool, QueueView), WaitingRoomError> {
        let (_, settings) = self.room_of(show_id).await?;
        let buyer = ctx.actor.id.clone();
        // After the start, the seed comes before any join in the log: only
        // those who joined before it are ordered by it.
        self.ensure_seed(show_id, &settings, self.clock.now())
            .await?;
        let room = self
            .book
            .read(show_id, &settings, None, |q| q.room.clone())
            .await?;
        let key = EntryKey {
            show_id: show_id.clone(),
            buyer: buyer.clone(),
        };
        let command = JoinQueue {
            show_id: show_id.clone(),
            buyer: buyer.clone(),
            settings,
        };
        let units = vec![(entry_stream_id(show_id, &buyer), key)];
        let round = Round::new("join", ctx);
        let mut joining = Joining {
            room: &room,
            command: &command,
        };
        let settled = self.rounds.run(round, units, &mut joining).await?;
        let new = matches!(settled, Settled::Appended(true));
        if new {
            self.book.joined(show_id, buyer.clone()).await;
        }
        // Answered with the number the log gives (once it shows the join).
        let now = self.clock.now();
        let view = self
            .book
            .read_until(
                show_id,
                &settings,
                |q| q.has_read(&buyer),
                |q| view_of(q, &settings, &buyer, now),
            )
            .await?;
        Ok((new, view.ok_or(WaitingRoomError::NotInQueue)?))
    }

    /// `GET /v1/shows/{id}/queue/me`: where the buyer stands now.
    pub async fn me(
        &self,
        buyer: &BuyerId,
        show_id: &ShowId,
    ) -> Result<QueueView, WaitingRoomError> {
        let asked = Instant::now();
        let (_, settings) = self.room_of(show_id).await?;
        let now = self.clock.now();
        self.ensure_seed(show_id, &settings, now).await?;
        let settled = |q: &mut ShowWaitingRoom| {
            q.has_read(buyer)
                .then(|| view_of(q, &settings, buyer, now))
                .flatten()
        };
        if let Some(view) = self.book.read(show_id, &settings, None, settled).await? {
            return Ok(view);
        }
        // A buyer the book has not read may have joined on another instance
        // just now, or on this one (then numbered once the log shows it).
        self.book
            .read(show_id, &settings, Some(asked), |q| {
                view_of(q, &settings, buyer, now)
            })
            .await?
            .ok_or(WaitingRoomError::NotInQueue)
    }

    /// What the hold of `buyer` on a show with a waiting room is decided
    /// with (`None`: the show has none).
    pub async fn admission(
        &self,
        entry: &CatalogEntry,
        buyer: &BuyerId,
    ) -> Result<Option<Admission>, WaitingRoomError> {
        let Some(settings) = entry.show.waiting_room else {
            return Ok(None);
        };
        let asked = Instant::now();
        let show_id = &entry.show.show_id;
        let now = self.clock.now();
        self.ensure_seed(show_id, &settings, now).await?;
        let read = |q: &mut ShowWaitingRoom| {
            let slot = q.number(buyer).and_then(|(_, slot)| slot);
            (q.room.clone(), slot, q.contains(buyer))
        };
        let (mut room, mut slot, joined) = self.book.read(show_id, &settings, None, read).await?;
        if slot.is_none() {
            // Joined on another instance, or just now: the log may say; a
            // join of this instance is waited for (briefly) rather than
            // refused.
            (room, slot, _) = if joined {
                self.book
                    .read_until(show_id, &settings, |q| q.has_read(buyer), read)
                    .await?
            } else {
                self.book
                    .read(show_id, &settings, Some(asked), read)
                    .await?
            };
        }
        Ok(Some(Admission {
            settings,
            room,
            slot,
        }))
    }

    /// `GET /v1/shows/{id}/queue` (admin): the room as its stream holds it
    /// now, whichever instance changed it last.
    pub async fn overview(&self, show_id: &ShowId) -> Result<QueueOverview, WaitingRoomError> {
        let (_, settings) = self.room_of(show_id).await?;
        self.ensure_seed(show_id, &settings, self.clock.now())
            .await?;
        let version = self
            .log
            .stream_events::<WaitingRoom>(&waiting_room_stream_id(show_id), 0)
            .await?
            .len() as u64;
        let now = self.clock.now();
        self.book
            .read_until(
                show_id,
                &settings,
                |q| q.room.version >= version,
                |q| {
                    let (waiting, admitted) = q.counts(&settings, now);
                    QueueOverview {
                        waiting,
                        admitted,
                        admit_per_minute: q.room.rate(&settings),
                        sale_starts_at: settings.sale_starts_at,
                        paused: q.room.is_paused(),
                        closed: q.room.closed.is_some(),
                        reason: q.room.closed.map(|(_, reason)| reason),
                    }
                },
            )
            .await
            .map_err(Into::into)
    }

    /// `PATCH /v1/shows/{id}/waiting-room` (admin): the rate from now on.
    pub async fn change_rate(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        admit_per_minute: u32,
    ) -> Result<QueueOverview, WaitingRoomError> {
        let (_, settings) = self.room_of(show_id).await?;
        let command = RoomCommand::ChangeRate {
            at: self.clock.now() + waiting_room::change_lead(),
            admit_per_minute,
        };
        self.decide_room(ctx, show_id, &settings, command).await?;
        self.overview(show_id).await
    }

    /// The room's seed, drawn once the sale has started (nobody, the
    /// service included, can know the order of early joiners before).
    async fn ensure_seed(
        &self,
        show_id: &ShowId,
        settings: &WaitingRoomSettings,
        now: DateTime<Utc>,
    ) -> Result<(), WaitingRoomError> {
        if now < settings.sale_starts_at {
            return Ok(());
        }
        let drawn = self
            .book
            .read(show_id, settings, None, |q| q.room.seed.is_some())
            .await?;
        if drawn {
            return Ok(());
        }
        let ctx = RequestContext::system(ROOM_ACTOR)?;
        let seed = rand::random::<u64>();
        self.decide_room(&ctx, show_id, settings, RoomCommand::DrawSeed { seed })
            .await
    }

    /// The shows whose queues this instance has read, each with whether
    /// its room is open: what the room keeper looks at.
    pub async fn rooms(&self) -> Vec<(ShowId, bool)> {
        self.book.rooms().await
    }

    /// Forgets a show's queue on this instance (the keeper, once the show
    /// has begun: nothing is sold through its room any more, and its
    /// entries would otherwise stay in memory until the next restart).
    pub fn forget(&self, show_id: &ShowId) {
        self.book.forget(show_id);
    }

    /// The room keeper's look at a show: the seed drawn once the sale has
    /// started; nothing available but some held pauses admissions,
    /// something available resumes them, everything booked closes the room.
    pub async fn keep(&self, show_id: &ShowId, stock: Stock) -> Result<(), WaitingRoomError> {
        let (_, settings) = self.room_of(show_id).await?;
        let now = self.clock.now();
        if now < settings.sale_starts_at {
            return Ok(());
        }
        self.ensure_seed(show_id, &settings, now).await?;
        let (paused, closed) = self
            .book
            .read(show_id, &settings, None, |q| {
                (q.room.is_paused(), q.room.closed.is_some())
            })
            .await?;
        let at = now + waiting_room::change_lead();
        let command = if closed {
            return Ok(());
        } else if stock.all_booked {
            RoomCommand::Close {
                at: now,
                reason: CloseReason::SoldOut,
            }
        } else if stock.available == 0 && !paused {
            RoomCommand::Pause { at }
        } else if stock.available > 0 && paused {
            RoomCommand::Resume { at }
        } else {
            return Ok(());
        };
        let ctx = RequestContext::system(ROOM_ACTOR)?;
        self.decide_room(&ctx, show_id, &settings, command).await
    }

    /// Decides and appends a command on the show's room stream, then waits
    /// (briefly) for the book to read the room as decided: what this
    /// instance answers next follows the change.
    async fn decide_room(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        settings: &WaitingRoomSettings,
        command: RoomCommand,
    ) -> Result<(), WaitingRoomError> {
        let key = WaitingRoomKey {
            show_id: show_id.clone(),
        };
        let units = vec![(waiting_room_stream_id(show_id), key)];
        let mut change = WaitingRoomChange { command: &command };
        let version = self
            .rounds
            .run(Round::new("room", ctx), units, &mut change)
            .await?;
        let version = match version {
            Settled::Appended(v) | Settled::Answered(v) => v,
            Settled::KeyTaken => return Ok(()),
        };
        self.book.room_changed(show_id).await;
        self.book
            .read_until(show_id, settings, |q| q.room.version >= version, |_| ())
            .await?;
        Ok(())
    }
}
