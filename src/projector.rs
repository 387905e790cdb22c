//! The durable projector, and replay.
//!
//! Commands write their read-model rows in the same transaction as their
//! events, so in normal operation the rows are never behind. The projector
//! is what makes that a checked property rather than a hope: it reads the
//! log in global order from a stored checkpoint and applies every event
//! through the same row builders the commands use, idempotently (each seat,
//! shard and checkout row is guarded by the stream sequence it last
//! applied; hold rows only move forward), committing each batch together
//! with its checkpoint by compare-and-set. Events appended by any other
//! writer, or rows lost to an operator's mistake, are made right here.
//!
//! Replay is the same fold from position 0 over reset tables.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cqrs_es::Aggregate;
use domain::checkout::{Checkout, CheckoutEvent};
use domain::ids::{parse_seat_stream_id, PoolId, ShowId};
use domain::pool::{shard_capacity, PoolEvent, PoolShard};
use domain::seat::{Seat, SeatEvent};
use projections::time::from_micros;
use serde::de::DeserializeOwned;

use crate::batch::{push_checkout, StreamView};
use crate::inventory::{SeatKey, ShardKey, Unit};
use crate::shows::ShowCatalog;
use crate::store::{
    AppendBatch, AppendOutcome, CheckpointMove, LogEvent, LogFilter, Store, StoreError,
};

/// The checkpoint of the projector that keeps every read model current.
pub const PROJECTIONS_CHECKPOINT: &str = "projections";

/// Events per projector batch: one read and one write transaction each.
pub const PROJECTOR_BATCH: i64 = 1_000;

/// Events per replay batch: larger, since replay owns the machine.
pub const REPLAY_BATCH: i64 = 10_000;

/// Time between two projector passes when it runs in the background.
pub const PROJECTOR_INTERVAL: Duration = Duration::from_secs(1);

/// Aggregates folded so far, by stream, with the version they are at.
#[derive(Default)]
pub struct Folded {
    seats: HashMap<String, (Seat, usize)>,
    shards: HashMap<String, (PoolShard, usize)>,
    checkouts: HashMap<String, (Checkout, usize)>,
}

fn decode<E: DeserializeOwned>(event: &LogEvent) -> Result<E, StoreError> {
    serde_json::from_str(&event.payload).map_err(|e| {
        StoreError::Corrupt(format!(
            "event {} of {}#{}: {e}",
            event.position, event.aggregate_id, event.sequence
        ))
    })
}

/// The state of a stream just before `first` (its first event in this
/// batch): from the fold if it is there, else read from the log.
async fn state_before<A: Aggregate>(
    store: &Store,
    folded: &mut HashMap<String, (A, usize)>,
    id: &str,
    first: usize,
) -> Result<(A, usize), StoreError> {
    if let Some((state, version)) = folded.remove(id) {
        if version + 1 == first {
            return Ok((state, version));
        }
    }
    let mut state = A::default();
    let mut version = 0;
    if first > 1 {
        for event in store.stream_events::<A>(id, 0).await? {
            if event.sequence >= first {
                break;
            }
            let payload: A::Event = serde_json::from_value(event.payload)
                .map_err(|e| StoreError::Corrupt(format!("event {id}#{}: {e}", event.sequence)))?;
            state.apply(payload);
            version = event.sequence;
        }
    }
    Ok((state, version))
}

/// Events of one stream that follow each other in a batch.
struct Run<'a> {
    kind: &'a str,
    id: &'a str,
    events: Vec<&'a LogEvent>,
}

/// Groups a batch by stream, keeping each stream's events in order.
fn runs(events: &[LogEvent]) -> Vec<Run<'_>> {
    let mut index: HashMap<(&str, &str), usize> = HashMap::new();
    let mut runs: Vec<Run<'_>> = Vec::new();
    for event in events {
        let key = (event.aggregate_type.as_str(), event.aggregate_id.as_str());
        match index.get(&key) {
            Some(&i) => runs[i].events.push(event),
            None => {
                index.insert(key, runs.len());
                runs.push(Run {
                    kind: key.0,
                    id: key.1,
                    events: vec![event],
                });
            }
        }
    }
    runs
}

/// `show/pool#n` back into its parts.
fn parse_shard_stream_id(id: &str) -> Option<(ShowId, PoolId, u32)> {
    let (show, rest) = id.split_once('/')?;
    let (pool, index) = rest.rsplit_once('#')?;
    Some((
        ShowId::parse(show).ok()?,
        PoolId::parse(pool).ok()?,
        index.parse().ok()?,
    ))
}

impl Folded {
    /// Folds a batch of log events and adds the rows they produce to `batch`:
    /// one row per stream (its state after its last event here), and every
    /// hold change in order.
    pub async fn project(
        &mut self,
        store: &Store,
        catalog: &ShowCatalog,
        events: &[LogEvent],
        batch: &mut AppendBatch,
    ) -> Result<(), StoreError> {
        for run in runs(events) {
            let first = run.events[0].sequence.max(1) as usize;
            let corrupt = |what: &str| StoreError::Corrupt(format!("{what} stream id {}", run.id));
            match run.kind {
                "Seat" => {
                    let (show_id, seat_id) =
                        parse_seat_stream_id(run.id).ok_or_else(|| corrupt("seat"))?;
                    let decoded = run
                        .events
                        .iter()
                        .map(|e| decode::<SeatEvent>(e))
                        .collect::<Result<Vec<_>, _>>()?;
                    let (mut state, version) =
                        state_before(store, &mut self.seats, run.id, first).await?;
                    let key = SeatKey { show_id, seat_id };
                    let view = StreamView {
                        id: run.id,
                        version,
                        aggregate: &state,
                    };
                    Seat::push(batch, &key, &view, &decoded, "{}")?;
                    decoded.iter().for_each(|e| state.apply_event(e));
                    self.seats
                        .insert(run.id.to_owned(), (state, version + decoded.len()));
                }
                "PoolShard" => {
                    let (show_id, pool_id, index) =
                        parse_shard_stream_id(run.id).ok_or_else(|| corrupt("shard"))?;
                    let entry = catalog
                        .get(store, &show_id)
                        .await?
                        .ok_or_else(|| corrupt("show of shard"))?;
                    let spec = entry
                        .show
                        .pool(&pool_id)
                        .ok_or_else(|| corrupt("pool of shard"))?;
                    let key = ShardKey {
                        capacity: shard_capacity(spec.capacity, spec.shards, index),
                        show_id,
                        pool_id,
                        index,
                    };
                    let decoded = run
                        .events
                        .iter()
                        .map(|e| decode::<PoolEvent>(e))
                        .collect::<Result<Vec<_>, _>>()?;
                    let (mut state, version) =
                        state_before(store, &mut self.shards, run.id, first).await?;
                    let view = StreamView {
                        id: run.id,
                        version,
                        aggregate: &state,
                    };
                    PoolShard::push(batch, &key, &view, &decoded, "{}")?;
                    decoded.iter().for_each(|e| state.apply_event(e));
                    self.shards
                        .insert(run.id.to_owned(), (state, version + decoded.len()));
                }
                "Checkout" => {
                    let decoded = run
                        .events
                        .iter()
                        .map(|e| decode::<CheckoutEvent>(e))
                        .collect::<Result<Vec<_>, _>>()?;
                    let (mut state, version) =
                        state_before(store, &mut self.checkouts, run.id, first).await?;
                    let view = StreamView {
                        id: run.id,
                        version,
                        aggregate: &state,
                    };
                    push_checkout(batch, &view, &decoded, "{}")?;
                    decoded.iter().for_each(|e| state.apply_event(e));
                    self.checkouts
                        .insert(run.id.to_owned(), (state, version + decoded.len()));
                }
                other => tracing::warn!(
                    aggregate_type = other,
                    "the projector skips an unknown stream type"
                ),
            }
        }
        if let Some(last) = events.last() {
            if let Some(at) = from_micros(last.recorded_at_us) {
                batch.recorded_at = at;
            }
        }
        Ok(())
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ProjectorReport {
    pub events: usize,
    pub batches: usize,
    /// The checkpoint after the pass.
    pub position: i64,
}

#[derive(Clone)]
pub struct Projector {
    store: Arc<Store>,
    catalog: Arc<ShowCatalog>,
}

impl Projector {
    pub fn new(store: Arc<Store>, catalog: Arc<ShowCatalog>) -> Self {
        Self { store, catalog }
    }

    /// Applies every event after the checkpoint, batch by batch, moving the
    /// checkpoint with each batch. Another instance moving it first is not an
    /// error: this one reads the checkpoint again and goes on from there.
    pub async fn run_once(&self) -> Result<ProjectorReport, StoreError> {
        let mut report = ProjectorReport::default();
        let mut folded = Folded::default();
        loop {
            let from = self.store.checkpoint(PROJECTIONS_CHECKPOINT).await?;
            report.position = from;
            let events = self
                .store
                .read_log(LogFilter::All, from, PROJECTOR_BATCH)
                .await?;
            let Some(last) = events.last() else {
                let behind = self.store.count_after(from).await?;
                metrics::gauge!("projector_lag_events").set(behind as f64);
                return Ok(report);
            };
            let to = last.position;
            let mut batch = AppendBatch::projection(chrono::Utc::now());
            folded
                .project(&self.store, &self.catalog, &events, &mut batch)
                .await?;
            batch.checkpoint = Some(CheckpointMove {
                name: PROJECTIONS_CHECKPOINT.to_owned(),
                from,
                to,
            });
            match self.store.append(&batch).await? {
                AppendOutcome::Appended => {
                    report.events += events.len();
                    report.batches += 1;
                    report.position = to;
                }
                // Another instance applied this batch: start from its checkpoint.
                AppendOutcome::CheckpointMoved => folded = Folded::default(),
                other => {
                    return Err(StoreError::Corrupt(format!(
                        "projection batch refused: {other:?}"
                    )));
                }
            }
        }
    }

    /// How many events of the log the checkpoint is behind.
    pub async fn lag(&self) -> Result<i64, StoreError> {
        let checkpoint = self.store.checkpoint(PROJECTIONS_CHECKPOINT).await?;
        self.store.count_after(checkpoint).await
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReplayReport {
    pub events: usize,
    pub batches: usize,
}

/// Rebuilds projections from the whole log: folds every event in global
/// order into scratch tables in memory (as `booking verify` does), resets
/// the named projections, and writes each row once, in its final state,
/// `REPLAY_BATCH` rows at a time. Rows are written with the same guards as
/// always, so commands may go on meanwhile.
pub async fn replay(
    store: &Store,
    catalog: &ShowCatalog,
    which: &[crate::store::Projection],
) -> Result<ReplayReport, StoreError> {
    // Fresh planner statistics: a log that grew fast since the last
    // autovacuum would otherwise be read by sorting it whole for each batch.
    store.analyze_log().await?;
    let (tables, events) = crate::verify::rebuild(store, catalog).await?;
    store.reset_projections(which).await?;
    let batches = store.write_tables(&tables, REPLAY_BATCH as usize).await?;
    Ok(ReplayReport { events, batches })
}
