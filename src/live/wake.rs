//! Across instances on one PostgreSQL: each instance NOTIFYs after its
//! appends, and LISTENs for the others'. A notification carries no state
//! (its payload is empty): it only wakes the feed, which reads the changes
//! from the log after its own cursor, so a notification lost, or a
//! listener's connection cut and reconnected, loses no change (the feed
//! reads again from where it was, and polls besides: `feed::FEED_POLL`).

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;

use super::LiveHub;

/// The LISTEN/NOTIFY channel.
pub const NOTIFY_CHANNEL: &str = "booking_log";

/// The least time between two notifications of one instance: appends that
/// commit meanwhile share the next one (each NOTIFY is a transaction, and
/// PostgreSQL serialises their commits on one queue).
pub const NOTIFY_MIN_GAP: Duration = Duration::from_millis(5);

/// After a failed LISTEN or NOTIFY (the database away), try again this much later.
pub const RECONNECT_PAUSE: Duration = Duration::from_millis(500);

/// Sends a notification after this process's appends, until the hub closes.
pub async fn notify_appends(hub: Arc<LiveHub>) {
    if hub.log.postgres_pool().is_none() {
        return;
    }
    let mut appends = hub.log.appends();
    let mut closing = hub.closing();
    loop {
        tokio::select! {
            changed = appends.changed() => if changed.is_err() { return },
            () = LiveHub::closed(&mut closing) => return,
        }
        let pause = match hub.log.notify(NOTIFY_CHANNEL).await {
            Ok(()) => NOTIFY_MIN_GAP,
            Err(error) => {
                tracing::warn!(%error, "live: cannot notify other instances; retrying");
                RECONNECT_PAUSE
            }
        };
        tokio::time::sleep(pause).await;
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
                    Ok(Some(_)) => hub.wake.notify_one(),
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
