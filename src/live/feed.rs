//! The feed: tails the log for the watched shows, and runs each show's
//! channel (recomputation on a poke or at the next expiry).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use projections::time::to_micros;
use tokio::time::Instant;

use super::channel::ShowChannel;
use super::{LiveHub, CHANNEL_LINGER, EXPIRY_MARGIN, RETRY_AFTER_ERROR};
use crate::query::availability::Viewer;
use crate::store::StoreResult;

/// While a show is watched, the feed also reads the log this often on its
/// own: a wake-up that never came (a notification lost with its
/// connection, a transaction that drew positions and rolled back, so the
/// commit that passes it notified before it was readable) costs at most
/// this much delay, never a change. While none is, it moves its cursor to
/// the log's head this often (one read of the head), so that a first
/// watcher finds at most this much of the log left to read.
pub const FEED_POLL: Duration = Duration::from_millis(250);

/// Events the feed reads per query (positions and show ids only).
pub const FEED_PAGE: i64 = 10_000;

/// How often an idle channel checks whether it has outlived its linger.
const LINGER_CHECK: Duration = Duration::from_secs(5);

/// Tails the log until the hub closes. Starts at the log's head: a channel
/// reads its first state after that, so nothing before it is needed; and
/// while a channel runs the cursor never skips, so nothing after it is
/// missed. While none runs, the cursor follows the head (see
/// `LiveHub::advance_unwatched` for why that skips nothing a channel needs).
pub async fn run(hub: Arc<LiveHub>) {
    let mut closing = hub.closing();
    let mut appends = hub.log.appends();
    if !start_at_head(&hub, &mut closing).await {
        return;
    }
    hub.started.send_replace(true);
    let mut idle_catch_up = Instant::now() + FEED_POLL;
    loop {
        let (watched, created) = hub.watched();
        if watched.is_empty() {
            // Nothing watched: nothing to read, but the cursor follows the
            // head, so that the first show watched after hours of sales is
            // not held back while the feed reads every event since the
            // start (at the busiest time, the onsale's first subscribers).
            tokio::select! {
                () = hub.wake.notified() => {}
                () = tokio::time::sleep_until(idle_catch_up) => {
                    idle_catch_up = Instant::now() + FEED_POLL;
                    match hub.log.safe_head().await {
                        Ok(head) => hub.advance_unwatched(created, head),
                        Err(error) => {
                            tracing::warn!(%error, "live feed: cannot read the log's head; retrying");
                        }
                    }
                }
                () = LiveHub::closed(&mut closing) => return,
            }
            continue;
        }
        let pause = match read_once(&hub, &watched).await {
            Ok(true) => continue,
            Ok(false) => FEED_POLL,
            Err(error) => {
                tracing::warn!(%error, "live feed: cannot read the log; retrying");
                RETRY_AFTER_ERROR
            }
        };
        tokio::select! {
            changed = appends.changed() => {
                if changed.is_err() {
                    tokio::time::sleep(pause).await;
                }
            }
            () = hub.wake.notified() => {}
            () = tokio::time::sleep(pause) => {}
            () = LiveHub::closed(&mut closing) => return,
        }
    }
}

/// Moves the cursor to the log's head, trying again until it can read it;
/// false if the hub closed first.
async fn start_at_head(hub: &LiveHub, closing: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    loop {
        match hub.log.safe_head().await {
            Ok(head) => {
                hub.move_cursor(head);
                return true;
            }
            Err(error) => {
                tracing::warn!(%error, "live feed: cannot read the log's head; retrying");
                tokio::select! {
                    () = tokio::time::sleep(RETRY_AFTER_ERROR) => {}
                    () = LiveHub::closed(closing) => return false,
                }
            }
        }
    }
}

/// One page of the log after the cursor: pokes the channels of the shows
/// it touched, then moves the cursor. True when a full page came (more
/// may be waiting).
async fn read_once(hub: &LiveHub, watched: &[Arc<ShowChannel>]) -> StoreResult<bool> {
    let after = hub.head.load(Ordering::SeqCst);
    let touches = hub.log.log_touches(after, FEED_PAGE).await?;
    let Some(&(last, _)) = touches.last() else {
        return Ok(false);
    };
    let by_show: HashMap<&str, &Arc<ShowChannel>> = watched
        .iter()
        .map(|channel| (channel.entry.show.show_id.as_str(), channel))
        .collect();
    let mut poked: Vec<&Arc<ShowChannel>> = Vec::new();
    for (_, show_id) in &touches {
        if let Some(channel) = show_id.as_deref().and_then(|id| by_show.get(id)) {
            if !poked.iter().any(|p| Arc::ptr_eq(p, channel)) {
                poked.push(channel);
            }
        }
    }
    // The cursor moves before the pokes: a channel labels its change with
    // a position its state already includes.
    hub.move_cursor(last);
    for channel in poked {
        channel.dirty.notify_one();
    }
    Ok(i64::try_from(touches.len()).is_ok_and(|n| n == FEED_PAGE))
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
    let mut started = hub.started.subscribe();
    tokio::select! {
        () = async { let _ = started.wait_for(|s| *s).await.map(|_| ()); } => {}
        () = LiveHub::closed(&mut closing) => return,
    }
    let mut idle_since: Option<Instant> = None;
    loop {
        // Read before the state: the state then includes every event at or
        // below the position its change is labelled with.
        let position = hub.head.load(Ordering::SeqCst);
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
