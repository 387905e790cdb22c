//! One watched show: its availability as last sent, the changes since, and
//! the broadcast every subscriber of the show reads.
//!
//! A change is computed once per show (here), never per subscriber: the
//! show's task recomputes availability when the feed says the log moved
//! for this show, or when the earliest `expires_at` it knows of passes, and
//! broadcasts the difference. The state, the recent frames and the
//! broadcast are changed under one lock, so a subscriber that takes a
//! snapshot and subscribes under that lock misses nothing and sees nothing
//! twice.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use tokio::sync::{broadcast, watch, Notify};

use crate::catalog::CatalogEntry;
use crate::query::availability::{render_change, render_document, Current};

/// Frames a show keeps for `Last-Event-ID` resumption. A client that was
/// away for more changes than this gets a new snapshot instead.
pub const RESUME_FRAMES: usize = 1024;

/// Frames the broadcast holds for its slowest subscriber. Past it that
/// subscriber's receiver reports `Lagged` and it is sent a new snapshot
/// (a slow reader costs itself a snapshot, never the show a wait).
pub const BROADCAST_FRAMES: usize = 256;

/// One `change` event, rendered once for every subscriber.
#[derive(Debug)]
pub struct Frame {
    /// Increases by one per frame of this show (on this instance).
    pub seq: u64,
    /// The log position the feed had reached when this change was computed
    /// (the event's `id:`).
    pub position: i64,
    pub data: Arc<str>,
}

/// The `snapshot` event: the availability document with its position.
#[derive(Debug)]
pub struct Snapshot {
    /// The last frame this snapshot includes.
    pub seq: u64,
    pub position: i64,
    pub data: Arc<str>,
}

/// Where a new subscriber starts.
pub enum Start {
    Snapshot(Arc<Snapshot>),
    /// `Last-Event-ID` was recent enough: the frames at and after it.
    Resume(Vec<Arc<Frame>>),
}

pub struct Subscription {
    pub start: Start,
    /// The last frame `start` includes; later ones come from `frames`.
    pub seq: u64,
    pub frames: broadcast::Receiver<Arc<Frame>>,
}

struct State {
    current: Current,
    /// The instant `current` describes (a snapshot's `as_of`).
    at: DateTime<Utc>,
    position: i64,
    seq: u64,
    /// The position of the state the channel started from: a client that
    /// last saw a position below it cannot be resumed.
    first_position: i64,
    recent: VecDeque<Arc<Frame>>,
    snapshot: Option<Arc<Snapshot>>,
}

/// A channel's head before the feed first read it.
pub(super) const UNREAD_HEAD: i64 = -1;

pub struct ShowChannel {
    pub entry: Arc<CatalogEntry>,
    state: Mutex<Option<State>>,
    frames: broadcast::Sender<Arc<Frame>>,
    /// Set once the first state is in: subscribers wait for it.
    ready: watch::Sender<bool>,
    /// The feed pokes it when the log moved for this show.
    pub(super) dirty: Notify,
    /// The show's head as the feed last read it (its last position; -1
    /// until the feed first read it), set before each poke: a state read
    /// after it includes every event up to it.
    pub(super) head: AtomicI64,
    pub(super) subscribers: AtomicUsize,
}

impl ShowChannel {
    pub fn new(entry: Arc<CatalogEntry>) -> Self {
        Self {
            entry,
            state: Mutex::new(None),
            frames: broadcast::Sender::new(BROADCAST_FRAMES),
            ready: watch::Sender::new(false),
            dirty: Notify::new(),
            head: AtomicI64::new(UNREAD_HEAD),
            subscribers: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<State>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolves once the channel has its first state.
    pub async fn ready(&self) {
        let mut ready = self.ready.subscribe();
        let _ = ready.wait_for(|ready| *ready).await;
    }

    pub fn subscribers(&self) -> usize {
        self.subscribers.load(Ordering::SeqCst)
    }

    /// Takes in availability as computed at `at` with the show's head at
    /// `position`: the first state, or a change broadcast to every
    /// subscriber when it differs from the last one.
    pub fn update(
        &self,
        position: i64,
        at: DateTime<Utc>,
        current: Current,
    ) -> serde_json::Result<()> {
        let mut guard = self.lock();
        let Some(state) = guard.as_mut() else {
            *guard = Some(State {
                current,
                at,
                position,
                seq: 0,
                first_position: position,
                recent: VecDeque::new(),
                snapshot: None,
            });
            drop(guard);
            self.ready.send_replace(true);
            return Ok(());
        };
        // Positions only move forward: the head is read after its poke,
        // and the state before may have started from a fresher one.
        let position = position.max(state.position);
        state.position = position;
        state.at = at;
        let Some(data) = render_change(&self.entry, position, &state.current, &current)? else {
            state.current = current;
            return Ok(());
        };
        state.seq += 1;
        let frame = Arc::new(Frame {
            seq: state.seq,
            position,
            data: data.into(),
        });
        state.current = current;
        state.snapshot = None;
        if state.recent.len() == RESUME_FRAMES {
            state.recent.pop_front();
        }
        state.recent.push_back(frame.clone());
        // No receiver is not an error: the last subscriber may just have left.
        let _ = self.frames.send(frame);
        metrics::counter!("live_changes_total").increment(1);
        Ok(())
    }

    /// A new subscriber: a snapshot (or, with a recent enough
    /// `last_event_id`, the frames since) and the broadcast from there on.
    pub fn subscribe(&self, last_event_id: Option<i64>) -> serde_json::Result<Subscription> {
        let mut guard = self.lock();
        let frames = self.frames.subscribe();
        let Some(state) = guard.as_mut() else {
            return Err(serde::ser::Error::custom(
                "subscribed before the first state",
            ));
        };
        if let Some(last) = last_event_id {
            if let Some(resumed) = resume(state, last) {
                return Ok(Subscription {
                    start: Start::Resume(resumed),
                    seq: state.seq,
                    frames,
                });
            }
        }
        let snapshot = snapshot_of(&self.entry, state)?;
        Ok(Subscription {
            seq: snapshot.seq,
            start: Start::Snapshot(snapshot),
            frames,
        })
    }

    /// The current state as a snapshot, for a subscriber that lagged.
    pub fn snapshot(&self) -> serde_json::Result<Option<Arc<Snapshot>>> {
        let mut guard = self.lock();
        match guard.as_mut() {
            None => Ok(None),
            Some(state) => snapshot_of(&self.entry, state).map(Some),
        }
    }
}

/// The frames a client that last saw `last` has missed: every frame at or
/// after `last` (a change states absolute statuses, so one seen twice is
/// harmless; frames share a position when an expiry, which has no event,
/// follows one). `None` when frames it missed are gone, or `last` is not a
/// position of this channel's life (older than its start): a snapshot then.
fn resume(state: &State, last: i64) -> Option<Vec<Arc<Frame>>> {
    if last < state.first_position || last > state.position {
        return None;
    }
    let oldest_kept = state.recent.front().map_or(state.position, |f| f.position);
    let evicted = state.recent.front().is_some_and(|f| f.seq > 1);
    if evicted && last < oldest_kept {
        return None;
    }
    Some(
        state
            .recent
            .iter()
            .filter(|frame| frame.position >= last)
            .cloned()
            .collect(),
    )
}

/// Rendered once per state, shared by every subscriber that asks for it.
fn snapshot_of(entry: &CatalogEntry, state: &mut State) -> serde_json::Result<Arc<Snapshot>> {
    if let Some(snapshot) = &state.snapshot {
        return Ok(snapshot.clone());
    }
    let data = render_document(
        entry,
        None,
        state.at,
        &state.current.statuses,
        &state.current.pools,
        Some(state.position),
    )?;
    let snapshot = Arc::new(Snapshot {
        seq: state.seq,
        position: state.position,
        data: data.into(),
    });
    state.snapshot = Some(snapshot.clone());
    Ok(snapshot)
}
