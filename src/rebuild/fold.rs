//! The fold every rebuild shares: log events, stream by stream, into the
//! aggregates they add up to and the read-model rows those produce, through
//! the row builders the commands use too (`projections::rows`).

use std::collections::HashMap;

use cqrs_es::Aggregate;
use domain::allowance::Allowance;
use domain::checkout::{Checkout, CheckoutEvent};
use domain::ids::parse_seat_stream_id;
use domain::pool::{parse_shard_stream_id, PoolEvent, PoolShard};
use domain::seat::{Seat, SeatEvent};
use domain::waiting_room::{QueueEntry, WaitingRoom};
use futures::TryStreamExt;
use projections::rows::Rows;
use projections::time::from_micros;
use serde::de::DeserializeOwned;

use crate::catalog::ShowCatalog;
use crate::store::{AppendBatch, EventLog, LogCursor, LogEvent, StoreError, Tables};

/// Events folded per step by a whole-log fold (replay, verify), out of its
/// one scan of the log: bounds the events held in memory at once, and the
/// rows a step's batch carries, while the log streams in behind.
pub const REBUILD_BATCH: usize = 10_000;

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
/// batch), in place in the fold: from the fold if it is there, else read
/// from the log. (In place: a whole-log fold meets each of millions of
/// streams once a batch, and neither moves it out nor allocates its key
/// again.)
async fn state_before<'f, A: Aggregate>(
    log: &EventLog,
    folded: &'f mut HashMap<String, (A, usize)>,
    id: &str,
    first: usize,
) -> Result<&'f mut (A, usize), StoreError> {
    if folded
        .get(id)
        .is_none_or(|(_, version)| version + 1 != first)
    {
        let mut state = A::default();
        let mut version = 0;
        if first > 1 {
            for event in log.stream_events::<A>(id, 0).await? {
                if event.sequence >= first {
                    break;
                }
                let payload: A::Event = serde_json::from_value(event.payload).map_err(|e| {
                    StoreError::Corrupt(format!("event {id}#{}: {e}", event.sequence))
                })?;
                state.apply(payload);
                version = event.sequence;
            }
        }
        folded.insert(id.to_owned(), (state, version));
    }
    folded
        .get_mut(id)
        .ok_or_else(|| StoreError::Corrupt(format!("stream {id} left the fold")))
}

/// Events of one stream that follow each other in a batch.
struct Run<'a> {
    kind: &'a str,
    id: &'a str,
    events: Vec<&'a LogEvent>,
}

impl Run<'_> {
    fn decoded<E: DeserializeOwned>(&self) -> Result<Vec<E>, StoreError> {
        self.events.iter().map(|e| decode::<E>(e)).collect()
    }

    /// The sequence of the run's first event (a stream starts at 1).
    fn first_sequence(&self) -> usize {
        self.events[0].sequence.max(1) as usize
    }

    /// The stream's id does not parse as the `what` it should name.
    fn corrupt(&self, what: &str) -> StoreError {
        StoreError::Corrupt(format!("{what} stream id {}", self.id))
    }
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

impl Folded {
    /// Folds a batch of log events and adds the rows they produce to `batch`:
    /// one row per stream (its state after its last event here), and every
    /// hold change in order.
    pub async fn project(
        &mut self,
        log: &EventLog,
        catalog: &ShowCatalog,
        events: &[LogEvent],
        batch: &mut AppendBatch,
    ) -> Result<(), StoreError> {
        let rows = &mut batch.rows;
        for run in runs(events) {
            match run.kind {
                kind if kind == Seat::TYPE => self.project_seat(log, &run, rows).await?,
                kind if kind == PoolShard::TYPE => {
                    self.project_shard(log, catalog, &run, rows).await?
                }
                kind if kind == Checkout::TYPE => self.project_checkout(log, &run, rows).await?,
                // The per-buyer allowance has no read model: its count is
                // decided from the stream itself.
                kind if kind == Allowance::TYPE => {}
                // Waiting rooms have none either: the queue book reads their
                // streams from the log (`query::queue`).
                kind if kind == WaitingRoom::TYPE || kind == QueueEntry::TYPE => {}
                // Nor waiting lists: readers fold the waiting list from the log
                // (`query::waitlist`).
                kind if kind == domain::waitlist::Waitlist::TYPE => {}
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

    /// Folds a seat's run and adds its seat row and hold changes.
    async fn project_seat(
        &mut self,
        log: &EventLog,
        run: &Run<'_>,
        rows: &mut Rows,
    ) -> Result<(), StoreError> {
        let (show_id, seat_id) = parse_seat_stream_id(run.id).ok_or_else(|| run.corrupt("seat"))?;
        let decoded = run.decoded::<SeatEvent>()?;
        let (state, version) =
            state_before(log, &mut self.seats, run.id, run.first_sequence()).await?;
        rows.seat(&show_id, &seat_id, state, *version, &decoded);
        decoded.iter().for_each(|e| state.apply_event(e));
        *version += decoded.len();
        Ok(())
    }

    /// Folds a pool shard's run and adds its shard row and hold changes.
    async fn project_shard(
        &mut self,
        log: &EventLog,
        catalog: &ShowCatalog,
        run: &Run<'_>,
        rows: &mut Rows,
    ) -> Result<(), StoreError> {
        let (show_id, pool_id, index) =
            parse_shard_stream_id(run.id).ok_or_else(|| run.corrupt("shard"))?;
        // A shard of a pool its show does not have is a broken log.
        let entry = catalog
            .get(&show_id)
            .await?
            .ok_or_else(|| run.corrupt("show of shard"))?;
        entry
            .show
            .pool(&pool_id)
            .ok_or_else(|| run.corrupt("pool of shard"))?;
        let decoded = run.decoded::<PoolEvent>()?;
        let (state, version) =
            state_before(log, &mut self.shards, run.id, run.first_sequence()).await?;
        rows.shard(&show_id, &pool_id, index, state, *version, &decoded);
        decoded.iter().for_each(|e| state.apply_event(e));
        *version += decoded.len();
        Ok(())
    }

    /// Folds a checkout's run and adds its checkout row, as of its last event.
    async fn project_checkout(
        &mut self,
        log: &EventLog,
        run: &Run<'_>,
        rows: &mut Rows,
    ) -> Result<(), StoreError> {
        let decoded = run.decoded::<CheckoutEvent>()?;
        let (state, version) =
            state_before(log, &mut self.checkouts, run.id, run.first_sequence()).await?;
        let recorded_at_us = run.events[run.events.len() - 1].recorded_at_us;
        rows.checkout(state, *version, &decoded, recorded_at_us);
        decoded.iter().for_each(|e| state.apply_event(e));
        *version += decoded.len();
        Ok(())
    }
}

/// A fold of the log in progress: the tables it has built, the aggregates it
/// has folded, and where it has read each show to.
#[derive(Default)]
pub struct Rebuild {
    pub tables: Tables,
    folded: Folded,
    /// Where each show was read to.
    pub cursor: LogCursor,
    /// Events folded in all.
    pub events: usize,
}

impl Rebuild {
    /// Folds the events after `self.cursor` in one scan of the log, show by
    /// show, `REBUILD_BATCH` events a step; returns how many it folded.
    /// Each show's events are read in its commit order, so a fold goes on
    /// from where it stopped without passing one that committed late.
    pub async fn advance(
        &mut self,
        log: &EventLog,
        catalog: &ShowCatalog,
    ) -> Result<usize, StoreError> {
        let mut pages = log.scan_after(self.cursor.clone());
        let mut folded = 0;
        let mut step = Vec::with_capacity(REBUILD_BATCH);
        loop {
            let next = pages.try_next().await?;
            let end = next.is_none();
            step.extend(next);
            if step.len() < REBUILD_BATCH && !end {
                continue;
            }
            if !step.is_empty() {
                step.iter().for_each(|event| self.cursor.pass(event));
                self.events += step.len();
                folded += step.len();
                let mut batch = AppendBatch::projection(chrono::Utc::now());
                self.folded.project(log, catalog, &step, &mut batch).await?;
                self.tables.apply(batch);
                step.clear();
            }
            if end {
                break;
            }
        }
        Ok(folded)
    }
}

/// Folds the whole log into scratch tables; returns them with the number of
/// events read.
pub async fn rebuild(log: &EventLog, catalog: &ShowCatalog) -> Result<(Tables, usize), StoreError> {
    let mut rebuild = Rebuild::default();
    rebuild.advance(log, catalog).await?;
    Ok((rebuild.tables, rebuild.events))
}
