//! Live availability: availability pushed to subscribers instead of polled
//! (docs/api.md, "Live availability"; DESIGN §9).
//!
//! - [`feed`] tails the log in position order (the late-commit rule holds:
//!   it never passes a transaction still open) and pokes the channel of each
//!   watched show an event touched. It is woken by this process's appends,
//!   by other instances' through PostgreSQL LISTEN/NOTIFY ([`wake`]), and by
//!   a short poll, so a lost notification only delays a change.
//! - [`channel`] is one watched show: its task recomputes availability once
//!   per poke or expiry instant and broadcasts what changed to every
//!   subscriber. Read-time expiry becomes a timer: the task sleeps until the
//!   earliest `expires_at` it knows of (extensions move it, since it is
//!   read again after every change).
//!
//! A show's channel lives while it has subscribers, and a little after (a
//! reconnecting client can resume); the hub counts subscribers against the
//! instance's cap.

pub mod channel;
pub mod feed;
pub mod wake;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use domain::ids::ShowId;
use tokio::sync::{watch, Notify};

use crate::catalog::CatalogEntry;
use crate::clock::Clock;
use crate::query::availability::AvailabilityCache;
use crate::store::{EventLog, Shows};
use channel::ShowChannel;

/// Default for `BOOKING_MAX_SUBSCRIBERS`: streams one instance serves at
/// once. A subscriber costs a connection and a few kilobytes (measured in
/// `bench --only live`); past the cap a new one gets 503 `busy`.
pub const DEFAULT_MAX_SUBSCRIBERS: usize = 10_000;

/// How long a show's channel outlives its last subscriber, so that a client
/// reconnecting after a network blip can resume with `Last-Event-ID`.
pub const CHANNEL_LINGER: Duration = Duration::from_secs(30);

/// After a failed recomputation (the database not answering), the show's
/// task tries again this much later; its subscribers keep their stream.
pub const RETRY_AFTER_ERROR: Duration = Duration::from_millis(500);

/// How late after an `expires_at` the change is computed: expiry is `now >=
/// expires_at`, and a timer may fire a little early on a coarse clock.
pub const EXPIRY_MARGIN: Duration = Duration::from_millis(5);

pub struct LiveHub {
    log: EventLog,
    shows: Shows,
    availability: Arc<AvailabilityCache>,
    clock: Arc<dyn Clock>,
    channels: Mutex<HashMap<ShowId, Arc<ShowChannel>>>,
    /// Channels created so far (changed under the `shows` lock): the feed,
    /// idle, moves its cursor only if none was created since it saw none.
    created: AtomicU64,
    subscribers: AtomicUsize,
    max_subscribers: usize,
    /// The feed's cursor: every event at or below it has been read.
    head: AtomicI64,
    /// Woken when a channel is created (the feed may be idle) and by
    /// notifications from other instances.
    wake: Notify,
    /// Set by the feed once its cursor is at the log's head: channels
    /// compute their first state only after that.
    started: watch::Sender<bool>,
    closing: watch::Sender<bool>,
    /// Subscribers that fell behind the broadcast (each sent a snapshot).
    lagged: AtomicU64,
}

/// One subscriber, counted until dropped (when its stream ends).
pub struct SubscriberGuard {
    pub hub: Arc<LiveHub>,
    pub channel: Arc<ShowChannel>,
}

impl Drop for SubscriberGuard {
    fn drop(&mut self) {
        self.channel.subscribers.fetch_sub(1, Ordering::SeqCst);
        self.hub.subscribers.fetch_sub(1, Ordering::SeqCst);
        metrics::gauge!("live_subscribers").decrement(1.0);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SubscribeError {
    #[error("the instance serves its maximum of {0} streams")]
    Full(usize),
}

impl LiveHub {
    pub fn new(
        log: EventLog,
        shows: Shows,
        availability: Arc<AvailabilityCache>,
        clock: Arc<dyn Clock>,
        max_subscribers: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            log,
            shows,
            availability,
            clock,
            channels: Mutex::new(HashMap::new()),
            created: AtomicU64::new(0),
            subscribers: AtomicUsize::new(0),
            max_subscribers,
            head: AtomicI64::new(0),
            wake: Notify::new(),
            started: watch::Sender::new(false),
            closing: watch::Sender::new(false),
            lagged: AtomicU64::new(0),
        })
    }

    /// Counts a new subscriber of the show (creating its channel and task
    /// if none runs), or refuses past the cap.
    pub fn subscribe(
        self: &Arc<Self>,
        entry: Arc<CatalogEntry>,
    ) -> Result<SubscriberGuard, SubscribeError> {
        let count = self.subscribers.fetch_add(1, Ordering::SeqCst) + 1;
        if count > self.max_subscribers {
            self.subscribers.fetch_sub(1, Ordering::SeqCst);
            return Err(SubscribeError::Full(self.max_subscribers));
        }
        metrics::gauge!("live_subscribers").increment(1.0);
        let channel = {
            let mut shows = self.channels.lock().unwrap_or_else(|p| p.into_inner());
            match shows.get(&entry.show.show_id).cloned() {
                Some(channel) => {
                    channel.subscribers.fetch_add(1, Ordering::SeqCst);
                    channel
                }
                None => {
                    let channel = Arc::new(ShowChannel::new(entry.clone()));
                    self.created.fetch_add(1, Ordering::SeqCst);
                    channel.subscribers.fetch_add(1, Ordering::SeqCst);
                    shows.insert(entry.show.show_id.clone(), channel.clone());
                    tokio::spawn(feed::run_show(self.clone(), channel.clone()));
                    channel
                }
            }
        };
        self.wake.notify_one();
        Ok(SubscriberGuard {
            hub: self.clone(),
            channel,
        })
    }

    /// Ends every stream (at shutdown, so that in-flight requests can finish
    /// while streams, which never do, are closed).
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// Resolves once the hub closes (its guard dropped at once, so the
    /// future stays `Send`).
    pub async fn closed(closing: &mut watch::Receiver<bool>) {
        let _ = closing.wait_for(|closed| *closed).await.map(|_| ());
    }

    /// Counts a subscriber that fell behind (`live_lagged_total`).
    pub fn note_lagged(&self) {
        self.lagged.fetch_add(1, Ordering::SeqCst);
        metrics::counter!("live_lagged_total").increment(1);
    }

    /// How many subscribers of this instance fell behind so far.
    pub fn lagged(&self) -> u64 {
        self.lagged.load(Ordering::SeqCst)
    }

    pub fn subscriber_count(&self) -> usize {
        self.subscribers.load(Ordering::SeqCst)
    }

    /// The channels, and how many were ever created (read together).
    fn watched(&self) -> (Vec<Arc<ShowChannel>>, u64) {
        let shows = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        (
            shows.values().cloned().collect(),
            self.created.load(Ordering::SeqCst),
        )
    }

    /// Moves the idle feed's cursor to `head` (a safe head read after the
    /// feed saw no channel, `created` channels created until then), unless a
    /// channel was created meanwhile: that channel may have read its first
    /// state before `head` was read, and the events committed in between
    /// must still poke it. Under the `shows` lock, so that a channel created
    /// after the move reads a cursor at `head` or later.
    fn advance_unwatched(&self, created: u64, head: i64) {
        let _shows = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if self.created.load(Ordering::SeqCst) == created {
            self.move_cursor(head);
        }
    }

    /// Moves the feed's cursor forward to `to` (never back), and shows it
    /// (`live_feed_position`: against the log's head, how far the feed is behind).
    fn move_cursor(&self, to: i64) {
        let before = self.head.fetch_max(to, Ordering::SeqCst);
        metrics::gauge!("live_feed_position").set(before.max(to) as f64);
    }

    /// The feed, the channels' tasks and (on PostgreSQL) the notifier and
    /// listener, until [`LiveHub::close`].
    pub async fn run(self: Arc<Self>) {
        tokio::join!(
            feed::run(self.clone()),
            wake::notify_appends(self.clone()),
            wake::listen(self.clone()),
        );
    }

    /// Forgets the channel unless a subscriber came back meanwhile.
    fn remove(&self, channel: &Arc<ShowChannel>) -> bool {
        let mut shows = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        let show_id = &channel.entry.show.show_id;
        if channel.subscribers() > 0 {
            return false;
        }
        if shows.get(show_id).is_some_and(|c| Arc::ptr_eq(c, channel)) {
            shows.remove(show_id);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;

    /// The idle feed's cursor follows the head, but not past a channel
    /// created after the feed saw none (that channel may have read its
    /// first state before the head was read), and never back.
    #[tokio::test]
    async fn an_idle_feed_moves_its_cursor_only_while_no_channel_came() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let url = format!("sqlite://{}", dir.path().join("live.db").display());
        let store = crate::store::Store::connect(&url, 1)
            .await
            .expect("the store");
        let hub = LiveHub::new(
            store.log(),
            store.shows(),
            Arc::default(),
            Arc::new(SystemClock),
            DEFAULT_MAX_SUBSCRIBERS,
        );
        let (watched, created) = hub.watched();
        assert!(watched.is_empty());
        hub.advance_unwatched(created, 10);
        assert_eq!(hub.head.load(Ordering::SeqCst), 10);
        hub.advance_unwatched(created, 5);
        assert_eq!(hub.head.load(Ordering::SeqCst), 10, "never back");

        // A channel created meanwhile: a show's first subscriber.
        let entry = Arc::new(crate::query::availability::tests::entry(3));
        let first = hub.subscribe(entry.clone()).expect("a subscriber");
        hub.advance_unwatched(created, 20);
        assert_eq!(
            hub.head.load(Ordering::SeqCst),
            10,
            "not past a new channel"
        );
        // The same show's second subscriber creates no channel.
        let (_, now) = hub.watched();
        let second = hub.subscribe(entry).expect("a subscriber");
        hub.advance_unwatched(now, 20);
        assert_eq!(hub.head.load(Ordering::SeqCst), 20);
        drop((first, second));
    }
}
