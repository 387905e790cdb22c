//! Loaded streams, kept in memory, one in-process writer at a time.
//!
//! The store decides every append by stream version, so nothing here is
//! needed for correctness: a stale cache entry only costs a conflict and a
//! reload. What it buys is speed under contention. When thousands of buyers
//! want one seat, the requests of this instance queue on the seat's mutex
//! instead of all deciding on the same version and all but one failing an
//! insert. The first appends; the others decide on the state it left, which
//! is known to be current as of an instant after they arrived, and are
//! answered "taken" without touching the database.
//!
//! That last step is the freshness rule. Each request takes a ticket from the
//! stream's counter before it waits for the lock. The cached state records
//! the highest ticket issued before the instant it was known to equal the
//! database (the start of a reload, or the moment before an append that then
//! committed). A request whose ticket is covered may decide on the cache: the
//! state it sees was true at some instant after it arrived, so its answer is
//! linearizable. Any other request reloads the events after the cached
//! version first (`get_last_events`), so a stream is never replayed whole
//! twice.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cqrs_es::Aggregate;
use domain::allowance::Allowance;
use domain::checkout::Checkout;
use domain::ids::ShowId;
use domain::pool::PoolShard;
use domain::pricing::ShowPrices;
use domain::seat::Seat;
use domain::waiting_room::{QueueEntry, WaitingRoom};
use projections::rows::Rows;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::store::{EventLog, StoreError, StoreResult};

/// Streams kept loaded per aggregate type. A seat stream costs a few hundred
/// bytes, so this is tens of megabytes at most; when it is full, idle streams
/// are dropped (and simply reloaded when next used).
pub const STREAM_CACHE_CAPACITY: usize = 200_000;

struct Slot<A> {
    tickets: AtomicU64,
    loaded: Arc<AsyncMutex<Loaded<A>>>,
}

struct Loaded<A> {
    aggregate: A,
    version: usize,
    /// Tickets up to this one were issued before the state was last known
    /// to be current. 0: never loaded (tickets start at 1).
    fresh_through: u64,
    /// Whether the stream was ever read or appended to by this process.
    loaded: bool,
}

pub struct StreamCache<A> {
    slots: Mutex<HashMap<String, Arc<Slot<A>>>>,
    capacity: usize,
}

/// The loaded streams of every type a command writes, one set per process
/// (every in-process writer of a stream must go through the same slot).
/// Private to the command wing, where only `command::round` locks them, in
/// its one order (see there).
#[derive(Default)]
pub struct Inventory {
    pub(super) checkouts: StreamCache<Checkout>,
    pub(super) allowances: StreamCache<Allowance>,
    pub(super) seats: StreamCache<Seat>,
    pub(super) shards: StreamCache<PoolShard>,
    pub(super) rooms: StreamCache<WaitingRoom>,
    pub(super) queue_entries: StreamCache<QueueEntry>,
    pub(super) prices: StreamCache<ShowPrices>,
    pub(super) waitlists: StreamCache<domain::waitlist::Waitlist>,
    pub(super) tickets: StreamCache<domain::ticket::Ticket>,
    pub(super) refused_scans: StreamCache<domain::ticket::RefusedScan>,
}

/// A stream type a command round (`command::round`) locks and appends to:
/// what its events are filed under, the rows they produce, where this
/// process keeps it loaded, and its one lock order.
pub trait Stream: Aggregate + Clone {
    /// What identifies the stream beyond its id (its show, and what a
    /// decision needs of it).
    type Key: Clone + Send + Sync;
    /// The show the stream's events are filed under.
    fn show_id(key: &Self::Key) -> &ShowId;
    /// The rows the stream's `events`, appended at `version` to its state
    /// `before`, produce (`projections::rows`).
    fn rows(
        rows: &mut Rows,
        key: &Self::Key,
        before: &Self,
        version: usize,
        events: &[Self::Event],
    );
    /// This process's loaded streams of the type.
    fn cache(inventory: &Inventory) -> &StreamCache<Self>;
    /// Puts streams of the type in their one lock order, so that two
    /// commands never wait on each other in a cycle.
    fn sort(streams: &mut [(String, Self::Key)]);
}

/// A stream this request holds the in-process lock of.
pub struct LockedStream<A> {
    id: String,
    slot: Arc<Slot<A>>,
    guard: OwnedMutexGuard<Loaded<A>>,
    ticket: u64,
    /// Ticket watermark read just before the append in flight.
    watermark: u64,
}

impl<A: Aggregate> Default for StreamCache<A> {
    fn default() -> Self {
        Self::with_capacity(STREAM_CACHE_CAPACITY)
    }
}

impl<A: Aggregate> StreamCache<A> {
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            slots: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    fn slot(&self, id: &str) -> Arc<Slot<A>> {
        // A poisoned map only means another thread panicked mid-insert; the
        // map itself is still a valid cache.
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = slots.get(id) {
            return slot.clone();
        }
        if slots.len() >= self.capacity {
            slots.retain(|_, slot| Arc::strong_count(slot) > 1);
        }
        let slot = Arc::new(Slot {
            tickets: AtomicU64::new(0),
            loaded: Arc::new(AsyncMutex::new(Loaded {
                aggregate: A::default(),
                version: 0,
                fresh_through: 0,
                loaded: false,
            })),
        });
        slots.insert(id.to_owned(), slot.clone());
        slot
    }

    /// Looks at a loaded stream's cached state without waiting: `None` if the
    /// stream is not loaded or a request holds it. The state may be stale;
    /// use it only to choose where to look, never to answer.
    pub fn peek<R>(&self, id: &str, look: impl FnOnce(&A) -> R) -> Option<R> {
        let slot = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.get(id)?.clone()
        };
        let loaded = slot.loaded.try_lock().ok()?;
        (loaded.fresh_through > 0).then(|| look(&loaded.aggregate))
    }

    /// Locks one stream if no request of this process holds it.
    pub fn try_lock(&self, id: &str) -> Option<LockedStream<A>> {
        let slot = self.slot(id);
        let ticket = slot.tickets.fetch_add(1, Ordering::SeqCst) + 1;
        let guard = slot.loaded.clone().try_lock_owned().ok()?;
        Some(LockedStream {
            id: id.to_owned(),
            slot,
            guard,
            ticket,
            watermark: 0,
        })
    }

    /// Locks the streams in the order given, which must be one global order
    /// (callers sort stream ids) so that two commands never wait on each other.
    pub async fn lock(&self, ids: &[String]) -> Vec<LockedStream<A>> {
        // Every ticket is taken on arrival, before waiting for any lock, so a
        // reload that another request starts meanwhile covers this request on
        // every stream, not only on the first it waits for.
        let ticketed: Vec<(Arc<Slot<A>>, u64)> = ids
            .iter()
            .map(|id| {
                let slot = self.slot(id);
                let ticket = slot.tickets.fetch_add(1, Ordering::SeqCst) + 1;
                (slot, ticket)
            })
            .collect();
        let mut locked = Vec::with_capacity(ids.len());
        for (id, (slot, ticket)) in ids.iter().zip(ticketed) {
            let guard = slot.loaded.clone().lock_owned().await;
            locked.push(LockedStream {
                id: id.clone(),
                slot,
                guard,
                ticket,
                watermark: 0,
            });
        }
        locked
    }
}

impl<A: Aggregate> LockedStream<A> {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn aggregate(&self) -> &A {
        &self.guard.aggregate
    }

    pub fn version(&self) -> usize {
        self.guard.version
    }

    /// Whether this process ever read or appended to the stream.
    pub fn is_loaded(&self) -> bool {
        self.guard.loaded
    }

    fn is_fresh(&self) -> bool {
        self.guard.fresh_through >= self.ticket
    }

    /// Brings the stream up to date unless the cache is known to be current
    /// as of an instant after this request arrived.
    async fn refresh(&mut self, log: &EventLog) -> StoreResult<()> {
        if self.is_fresh() {
            return Ok(());
        }
        let watermark = self.slot.tickets.load(Ordering::SeqCst);
        let events = log.stream_events::<A>(&self.id, self.guard.version).await?;
        for event in events {
            if event.sequence != self.guard.version + 1 {
                return Err(StoreError::Corrupt(format!(
                    "stream {} jumps from {} to {}",
                    self.id, self.guard.version, event.sequence
                )));
            }
            let payload: A::Event = serde_json::from_value(event.payload).map_err(|e| {
                StoreError::Corrupt(format!("event {}#{}: {e}", self.id, event.sequence))
            })?;
            self.guard.aggregate.apply(payload);
            self.guard.version = event.sequence;
        }
        self.guard.fresh_through = watermark;
        self.guard.loaded = true;
        Ok(())
    }

    /// Call just before sending an append that includes this stream.
    pub fn before_append(&mut self) {
        self.watermark = self.slot.tickets.load(Ordering::SeqCst);
    }

    /// The append committed: fold in its events. Only a stream that got
    /// events was checked by it (the insert at its next sequence would have
    /// failed had it moved); one that got none was covered by the batch but
    /// verified by nothing, so its freshness stays what it was.
    pub fn appended(&mut self, events: impl IntoIterator<Item = A::Event>) {
        let mut wrote = false;
        for event in events {
            self.guard.aggregate.apply(event);
            self.guard.version += 1;
            wrote = true;
        }
        if wrote {
            self.guard.fresh_through = self.watermark;
            self.guard.loaded = true;
        }
    }

    /// The append was refused or its outcome is unknown: reload next time
    /// (never assume the stream new again: it may well not be).
    pub fn invalidate(&mut self) {
        self.guard.fresh_through = 0;
        self.guard.loaded = true;
    }
}

/// Like [`refresh_all`], but a stream this process never loaded is taken to
/// be empty instead of read: for commands whose every decision on an empty
/// stream is an append (placing a hold), the append at version 0 is the
/// check. Most streams a hold touches are new (a fresh seat), so this saves
/// a read per hold; a stream that was not empty refuses the append, and the
/// next attempt reads it. Never for a command that could answer without
/// appending (a release would see nothing to release).
pub async fn refresh_or_assume_new<A: Aggregate>(
    log: &EventLog,
    streams: &mut [LockedStream<A>],
) -> StoreResult<()> {
    let pending = streams
        .iter_mut()
        .filter(|s| s.guard.loaded && !s.is_fresh())
        .map(|s| s.refresh(log));
    futures::future::try_join_all(pending).await?;
    Ok(())
}

/// Refreshes every stream that needs it, concurrently.
pub async fn refresh_all<A: Aggregate>(
    log: &EventLog,
    streams: &mut [LockedStream<A>],
) -> StoreResult<()> {
    let pending = streams
        .iter_mut()
        .filter(|s| !s.is_fresh())
        .map(|s| s.refresh(log));
    futures::future::try_join_all(pending).await?;
    Ok(())
}

/// The key of a stream a show has one of and that has no read model (its
/// prices, its waiting list): the show.
#[derive(Debug, Clone)]
pub struct ShowKey {
    pub show_id: ShowId,
}

/// Implements [`Stream`] for a stream of one per show keyed by
/// [`ShowKey`], without rows (readers fold it from the log), cached in
/// `Inventory::$cache`.
macro_rules! show_stream {
    ($stream:ty, $event:ty, $cache:ident) => {
        impl $crate::command::streams::Stream for $stream {
            type Key = $crate::command::streams::ShowKey;

            fn show_id(key: &Self::Key) -> &domain::ids::ShowId {
                &key.show_id
            }

            fn rows(
                _: &mut projections::rows::Rows,
                _: &Self::Key,
                _: &Self,
                _: usize,
                _: &[$event],
            ) {
            }

            fn cache(
                inventory: &$crate::command::streams::Inventory,
            ) -> &$crate::command::streams::StreamCache<Self> {
                &inventory.$cache
            }

            fn sort(streams: &mut [(String, Self::Key)]) {
                streams.sort_by(|a, b| a.0.cmp(&b.0));
            }
        }
    };
}
pub(crate) use show_stream;
