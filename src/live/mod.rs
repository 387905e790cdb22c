//! Live availability: availability pushed to subscribers instead of polled
//! (docs/api.md, "Live availability"; DESIGN §9).
//!
//! - [`feed`] follows the heads of the watched shows (a show's positions
//!   grow in its commit order) and pokes the channel of each watched show
//!   whose head moved. It is woken by this process's appends,
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
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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
    subscribers: AtomicUsize,
    max_subscribers: usize,
    /// Woken when a channel is created (the feed may be idle) and by
    /// notifications from other instances.
    wake: Notify,
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
            subscribers: AtomicUsize::new(0),
            max_subscribers,
            wake: Notify::new(),
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

    /// The channels.
    fn watched(&self) -> Vec<Arc<ShowChannel>> {
        let shows = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        shows.values().cloned().collect()
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
