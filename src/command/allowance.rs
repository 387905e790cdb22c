//! The per-buyer limit (`max_seats_per_buyer`) in commands: the buyer's
//! Allowance stream (`domain::allowance`) locked, refreshed, decided at the
//! command's `now` and appended in the same all-or-nothing batch as the
//! units it counts. A show without a limit touches no allowance stream.
//!
//! Lock order, one for the whole process: Checkout, then Allowance, then the
//! units (seats, or shards). Each type has its own cache, so the order
//! between types is what keeps two commands from waiting on each other in a
//! cycle: placing and releasing a hold lock the allowance before the units;
//! a purchase or cancellation holds the checkout, then the allowance, then
//! the units.

use chrono::{DateTime, Utc};
use domain::allowance::AllowanceError;
use domain::allowance::{self, allowance_stream_id, Allowance, AllowanceCommand, AllowanceEvent};
use domain::ids::{BuyerId, ShowId};
use domain::show::Show;

use crate::command::rows::push_events;
use crate::command::streams::{append_tracked, refresh_all, LockedStream, StreamCache, Tracked};
use crate::store::{AppendBatch, AppendOutcome, Store, StoreError, StoreResult};

/// A buyer's allowance stream on a show with a limit, locked by this request.
pub struct BuyerAllowance {
    pub stream: LockedStream<Allowance>,
    pub limit: u32,
    show_id: ShowId,
}

impl BuyerAllowance {
    /// Locks and brings up to date the buyer's allowance on `show`, or
    /// `None` (nothing locked, nothing read) if the show has no limit.
    pub async fn lock(
        store: &Store,
        cache: &StreamCache<Allowance>,
        show: &Show,
        buyer: &BuyerId,
    ) -> StoreResult<Option<Self>> {
        let Some(limit) = show.max_seats_per_buyer else {
            return Ok(None);
        };
        let id = allowance_stream_id(&show.show_id, buyer);
        let mut locked = cache.lock(&[id]).await;
        refresh_all(store, &mut locked).await?;
        let stream = locked.pop().expect("one stream locked");
        Ok(Some(Self {
            stream,
            limit,
            show_id: show.show_id.clone(),
        }))
    }

    /// Decides a command on the allowance as locked, at `now`.
    pub fn decide(
        &self,
        command: &AllowanceCommand,
        now: DateTime<Utc>,
    ) -> Result<Vec<AllowanceEvent>, AllowanceError> {
        allowance::decide(self.stream.aggregate(), command, now)
    }

    /// Adds the decided events to the batch. The allowance has no read-model
    /// table: its count is decided from the stream, never from a row.
    pub fn push(
        &self,
        batch: &mut AppendBatch,
        events: &[AllowanceEvent],
        metadata: &str,
    ) -> Result<(), StoreError> {
        push_events(
            batch,
            &self.stream.view(),
            events,
            metadata,
            Some(&self.show_id),
        )
    }
}

/// Decides `command` on the allowance if there is one (no events otherwise)
/// and adds its events to the batch.
pub fn decide_and_push(
    allowance: Option<&BuyerAllowance>,
    command: &AllowanceCommand,
    now: DateTime<Utc>,
    batch: &mut AppendBatch,
    metadata: &str,
) -> Result<Vec<AllowanceEvent>, DecideError> {
    let Some(allowance) = allowance else {
        return Ok(Vec::new());
    };
    let events = allowance
        .decide(command, now)
        .map_err(DecideError::Refused)?;
    allowance
        .push(batch, &events, metadata)
        .map_err(DecideError::Store)?;
    Ok(events)
}

/// Why [`decide_and_push`] added nothing.
#[derive(Debug)]
pub enum DecideError {
    Refused(AllowanceError),
    Store(StoreError),
}

/// Appends a batch made of `decided` events for each locked unit stream (in
/// the same order) and the allowance's events, tracking every stream; if it
/// lands, folds the events into the caches.
pub async fn append_with_allowance<U: cqrs_es::Aggregate>(
    store: &Store,
    batch: &AppendBatch,
    units: &mut [LockedStream<U>],
    decided: Vec<Vec<U::Event>>,
    allowance: Option<&mut BuyerAllowance>,
    allowance_events: Vec<AllowanceEvent>,
) -> StoreResult<AppendOutcome> {
    let mut allowance = allowance;
    let mut tracked: Vec<&mut (dyn Tracked + Send)> = units
        .iter_mut()
        .map(|s| s as &mut (dyn Tracked + Send))
        .collect();
    if let Some(allowance) = allowance.as_deref_mut() {
        tracked.push(&mut allowance.stream);
    }
    let outcome = append_tracked(store, batch, tracked).await?;
    if outcome == AppendOutcome::Appended {
        for (stream, events) in units.iter_mut().zip(decided) {
            stream.appended(events);
        }
        if let Some(allowance) = allowance {
            allowance.stream.appended(allowance_events);
        }
    }
    Ok(outcome)
}
