//! Background workers: a pass every interval until the service stops.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

/// Runs `pass` every `interval` (the first at once) until `stop` resolves.
/// A failed pass is logged and retried at the next tick.
pub async fn every<F, Fut, T, E>(
    name: &'static str,
    interval: Duration,
    stop: impl Future<Output = ()>,
    mut pass: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Display,
{
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = ticker.tick() => {
                if let Err(error) = pass().await {
                    tracing::warn!(worker = name, %error, "background pass failed; retrying next interval");
                }
            }
        }
    }
}
