//! The feed: follows the heads of the watched shows, and runs each show's
//! channel (recomputation on a poke or at the next expiry).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use projections::time::to_micros;
use tokio::time::Instant;

use super::channel::{ShowChannel, UNREAD_HEAD};
use super::{LiveHub, CHANNEL_LINGER, EXPIRY_MARGIN, RETRY_AFTER_ERROR};
use crate::query::availability::Viewer;
use crate::store::StoreResult;

/// While a show is watched, the feed also reads the heads this often on
/// its own: a wake-up that never came (a notification lost with its
/// connection) costs at most this much delay, never a change.
pub const FEED_POLL: Duration = Duration::from_millis(250);

/// How often an idle channel checks whether it has outlived its linger.
const LINGER_CHECK: Duration = Duration::from_secs(5);

/// Follows the heads of the watched shows until the hub closes: each time
/// the log may have moved (this process appended, another instance
/// notified, or `FEED_POLL` passed), it reads every show's head, and pokes
/// the channel of each watched show whose head moved, after telling it the
/// new head. A show's positions grow in its commit order, so a state read
/// after its head includes every event up to it; nothing of another show,
/// and no transaction of another show, holds a channel back.
pub async fn run(hub: Arc<LiveHub>) {
    let mut closing = hub.closing();
    let mut appends = hub.log.appends();
    loop {
        let watched = hub.watched();
        let pause = if watched.is_empty() {
            None
        } else {
            match read_once(&hub, &watched).await {
                Ok(()) => Some(FEED_POLL),
                Err(error) => {
                    tracing::warn!(%error, "live feed: cannot read the shows' heads; retrying");
                    Some(RETRY_AFTER_ERROR)
                }
            }
        };
        // Nothing watched: nothing to read until a channel is made (which
        // wakes the feed).
        let pause = async {
            match pause {
                Some(pause) => tokio::time::sleep(pause).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = appends.changed() => {
                if changed.is_err() {
                    tokio::time::sleep(FEED_POLL).await;
                }
            }
            () = hub.wake.notified() => {}
            () = pause => {}
            () = LiveHub::closed(&mut closing) => return,
        }
    }
}

/// One read of the heads: tells each watched show's channel its head and
/// pokes those whose head moved (a new channel's first read among them:
/// its first state waits for it).
async fn read_once(hub: &LiveHub, watched: &[Arc<ShowChannel>]) -> StoreResult<()> {
    // By show id, not by a search of the list: the database orders it by
    // its collation, which need not be Rust's order of strings.
    let heads: HashMap<String, i64> = hub.log.heads().await?.into_iter().collect();
    metrics::counter!("live_feed_reads_total").increment(1);
    for channel in watched {
        let show = channel.entry.show.show_id.as_str();
        let head = heads.get(show).copied().unwrap_or(0);
        // The head moves before the poke: a channel labels its change with
        // a position its state already includes. A first read always
        // pokes (from UNREAD_HEAD, below every head).
        if channel.head.fetch_max(head, Ordering::SeqCst) < head {
            channel.dirty.notify_one();
        }
    }
    Ok(())
}

/// When `expires_at_us` comes, as an instant of the runtime's timer.
fn instant_of(expires_at_us: i64, now: DateTime<Utc>) -> Instant {
    let ahead = u64::try_from(expires_at_us.saturating_sub(to_micros(now))).unwrap_or(0);
    Instant::now() + Duration::from_micros(ahead) + EXPIRY_MARGIN
}

/// A show's task: computes its availability when poked or when the next
/// expiry passes, hands it to the channel (which broadcasts what changed),
/// and ends once the show has had no subscriber for `CHANNEL_LINGER`.
pub async fn run_show(hub: Arc<LiveHub>, channel: Arc<ShowChannel>) {
    let mut closing = hub.closing();
    // The first state waits for the feed's first read of the show's head.
    while channel.head.load(Ordering::SeqCst) == UNREAD_HEAD {
        tokio::select! {
            () = channel.dirty.notified() => {}
            () = LiveHub::closed(&mut closing) => return,
        }
    }
    let mut idle_since: Option<Instant> = None;
    loop {
        // Read before the state: the state then includes every event at or
        // below the position its change is labelled with.
        let position = channel.head.load(Ordering::SeqCst);
        let now = hub.clock.now();
        let next = match hub
            .availability
            .current(&hub.shows, &channel.entry, &Viewer::Public, now)
            .await
        {
            Ok(current) => {
                let next = current.next_expiry_us.map(|at| instant_of(at, now));
                if let Err(error) = channel.update(position, now, current) {
                    tracing::error!(%error, "live: a change could not be written");
                }
                next
            }
            Err(error) => {
                tracing::warn!(%error, show = %channel.entry.show.show_id, "live: cannot read availability; retrying");
                Some(Instant::now() + RETRY_AFTER_ERROR)
            }
        };
        loop {
            if channel.subscribers() == 0 {
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= CHANNEL_LINGER && hub.remove(&channel) {
                    return;
                }
            } else {
                idle_since = None;
            }
            let check = Instant::now() + LINGER_CHECK;
            let wake = next.map_or(check, |next| next.min(check));
            tokio::select! {
                () = channel.dirty.notified() => break,
                () = tokio::time::sleep_until(wake) => {
                    if next.is_some_and(|next| Instant::now() >= next) {
                        break;
                    }
                }
                () = LiveHub::closed(&mut closing) => return,
            }
        }
    }
}
