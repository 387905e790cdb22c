//! Across instances on one PostgreSQL: each instance NOTIFYs after its
//! appends, and LISTENs for the others'. A notification names the shows
//! appended to since the last one: a listener pokes those it watches at
//! once (their rows are committed before the notification is sent), and
//! wakes the feed, which reads the changes from the log after its own
//! cursor. So a notification lost, or a listener's connection cut and
//! reconnected, loses no change (the feed reads again from where it was,
//! and polls besides: `feed::FEED_POLL`); it only waits for the feed.

use std::sync::Arc;
use std::time::Duration;

use domain::ids::ShowId;
use sqlx::postgres::PgListener;

use super::LiveHub;

/// The LISTEN/NOTIFY channel.
pub const NOTIFY_CHANNEL: &str = "booking_log";

/// The least time between two notifications of one instance: appends that
/// commit meanwhile share the next one (each NOTIFY is a transaction, and
/// PostgreSQL serialises their commits on one queue).
pub const NOTIFY_MIN_GAP: Duration = Duration::from_millis(5);

/// The most bytes of show ids one notification names (PostgreSQL takes
/// payloads under 8,000): past it, it names none, and the listeners learn
/// of the changes from the log alone, as they would of a lost one.
pub const NOTIFY_PAYLOAD_MAX: usize = 4_000;

/// After a failed LISTEN or NOTIFY (the database away), try again this much later.
pub const RECONNECT_PAUSE: Duration = Duration::from_millis(500);

/// Sends a notification after this process's appends, until the hub closes.
pub async fn notify_appends(hub: Arc<LiveHub>) {
    if hub.log.postgres_pool().is_none() {
        return;
    }
    let mut appends = hub.log.appends();
    let mut shows = hub.log.shows_appended();
    let mut closing = hub.closing();
    loop {
        tokio::select! {
            changed = appends.changed() => if changed.is_err() { return },
            () = LiveHub::closed(&mut closing) => return,
        }
        // A batch's show is told before its count: every show of the
        // appends that woke this is waiting in `shows`.
        let payload = payload(&mut shows);
        let pause = match hub.log.notify(NOTIFY_CHANNEL, &payload).await {
            Ok(()) => NOTIFY_MIN_GAP,
            Err(error) => {
                tracing::warn!(%error, "live: cannot notify other instances; retrying");
                RECONNECT_PAUSE
            }
        };
        tokio::time::sleep(pause).await;
    }
}

/// The shows appended to since the last call, each once, separated by
/// spaces (a show id has none); empty when they do not fit in a
/// notification or some were missed (the receiver fell behind).
fn payload(shows: &mut tokio::sync::broadcast::Receiver<ShowId>) -> String {
    use tokio::sync::broadcast::error::TryRecvError;
    let mut named: Vec<ShowId> = Vec::new();
    let mut complete = true;
    loop {
        match shows.try_recv() {
            Ok(show) if !named.contains(&show) => named.push(show),
            Ok(_) => {}
            Err(TryRecvError::Lagged(_)) => complete = false,
            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
        }
    }
    let payload = named
        .iter()
        .map(ShowId::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    if complete && payload.len() <= NOTIFY_PAYLOAD_MAX {
        payload
    } else {
        String::new()
    }
}

/// Listens for other instances' notifications and wakes the feed on each,
/// and after every (re)connection, until the hub closes.
pub async fn listen(hub: Arc<LiveHub>) {
    let Some(pool) = hub.log.postgres_pool().cloned() else {
        return;
    };
    let mut closing = hub.closing();
    loop {
        let connected = async {
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.listen(NOTIFY_CHANNEL).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        let mut listener = tokio::select! {
            connected = connected => match connected {
                Ok(listener) => listener,
                Err(error) => {
                    tracing::warn!(%error, "live: cannot listen for other instances; retrying");
                    tokio::time::sleep(RECONNECT_PAUSE).await;
                    continue;
                }
            },
            () = LiveHub::closed(&mut closing) => return,
        };
        // Whatever was notified while not listening is in the log.
        hub.wake.notify_one();
        // A LISTEN on a primary that was demoted stays connected and hears
        // nothing more: listen again on the new one when the host changes.
        let mut moved = hub.log.host_changes();
        loop {
            tokio::select! {
                () = host_changed(&mut moved) => {
                    metrics::counter!("live_listener_reconnects_total").increment(1);
                    tracing::info!("live: the database host changed; listening on the new one");
                    hub.wake.notify_one();
                    break;
                }
                received = listener.try_recv() => match received {
                    Ok(Some(notification)) => notified(&hub, notification.payload()),
                    Ok(None) => {
                        // The connection was lost (and is re-established by
                        // the next call): read the log again from the cursor.
                        metrics::counter!("live_listener_reconnects_total").increment(1);
                        tracing::warn!("live: the listening connection was lost; reconnecting");
                        hub.wake.notify_one();
                    }
                    Err(error) => {
                        metrics::counter!("live_listener_reconnects_total").increment(1);
                        tracing::warn!(%error, "live: listening failed; reconnecting");
                        hub.wake.notify_one();
                        tokio::time::sleep(RECONNECT_PAUSE).await;
                        break;
                    }
                },
                () = LiveHub::closed(&mut closing) => return,
            }
        }
    }
}

/// A notification: pokes the shows it names that are watched here, and
/// wakes the feed. An id that does not parse (another version's payload)
/// pokes nothing: the feed finds its change.
fn notified(hub: &LiveHub, payload: &str) {
    for show in payload.split(' ').filter_map(|id| ShowId::parse(id).ok()) {
        hub.poke(&show);
    }
    hub.wake.notify_one();
}

/// Returns when the database host in use changes to another one (never on
/// SQLite, nor once the store is gone).
async fn host_changed(changes: &mut Option<tokio::sync::watch::Receiver<Option<usize>>>) {
    let Some(changes) = changes else {
        return std::future::pending().await;
    };
    let Some(start) = *changes.borrow_and_update() else {
        // No host now: wait for one, which is a change if it is another.
        let _ = changes.wait_for(Option::is_some).await;
        return;
    };
    if changes
        .wait_for(|now| now.is_some_and(|now| now != start))
        .await
        .is_err()
    {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(id: &str) -> ShowId {
        ShowId::parse(id).expect("a show id")
    }

    /// A notification names each show appended to once; none when they
    /// would not fit, or when some were missed (the feed finds those).
    #[test]
    fn a_payload_names_each_show_once_or_none_when_not_all_fit() {
        let (tx, mut rx) = tokio::sync::broadcast::channel(4);
        for id in ["a", "b", "a"] {
            tx.send(show(id)).expect("a receiver");
        }
        assert_eq!(payload(&mut rx), "a b");
        assert_eq!(payload(&mut rx), "", "nothing since");

        for _ in 0..5 {
            tx.send(show("a")).expect("a receiver");
        }
        assert_eq!(payload(&mut rx), "", "one missed: the receiver fell behind");

        let (tx, mut rx) = tokio::sync::broadcast::channel(128);
        let long = "x".repeat(64);
        // 63-character ids, one more than fit.
        for n in 0..=NOTIFY_PAYLOAD_MAX / 64 {
            tx.send(show(&format!("{n:03}{}", &long[..60])))
                .expect("a receiver");
        }
        assert_eq!(payload(&mut rx), "", "past NOTIFY_PAYLOAD_MAX");
    }
}
