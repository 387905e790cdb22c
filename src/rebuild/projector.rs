//! The durable projector.
//!
//! Commands write their read-model rows in the same transaction as their
//! events, so in normal operation the rows are never behind. The projector
//! is what makes that a checked property rather than a hope: it reads the
//! log show by show from a stored checkpoint (a position per show) and applies every event
//! through the same row builders the commands use, idempotently (each seat,
//! shard and checkout row is guarded by the stream sequence it last
//! applied; hold rows only move forward), committing each batch together
//! with its checkpoint by compare-and-set. Events appended by any other
//! writer (without their rows) are made right here.
//!
//! An event whose append wrote its rows, in its own transaction, is passed
//! over (`rows_written`, set by every command's append): applying it again
//! would change nothing, and in an onsale it was a second write of every
//! hold's rows, a fifth of the hold throughput. Rows lost after the fact (an
//! operator's mistake) are found by `booking verify` and rebuilt by
//! `booking replay`, which fold the whole log whatever the flag says.

use std::sync::Arc;
use std::time::Duration;

use crate::catalog::ShowCatalog;
use crate::rebuild::fold::Folded;
use crate::store::{AppendBatch, AppendOutcome, CheckpointMove, EventLog, LogCursor, StoreError};

/// The checkpoint of the projector that keeps every read model current.
pub const PROJECTIONS_CHECKPOINT: &str = "projections";

/// Events per projector batch: one read and one write transaction each.
pub const PROJECTOR_BATCH: i64 = 1_000;

/// Time between two projector passes when it runs in the background.
pub const PROJECTOR_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ProjectorReport {
    pub events: usize,
    pub batches: usize,
    /// The checkpoint after the pass.
    pub cursor: LogCursor,
}

#[derive(Clone)]
pub struct Projector {
    log: EventLog,
    catalog: Arc<ShowCatalog>,
}

impl Projector {
    pub fn new(log: EventLog, catalog: Arc<ShowCatalog>) -> Self {
        Self { log, catalog }
    }

    /// Applies every event after the checkpoint, batch by batch, moving the
    /// checkpoint with each batch. Another instance moving it first is not an
    /// error: this one reads the checkpoint again and goes on from there.
    pub async fn run_once(&self) -> Result<ProjectorReport, StoreError> {
        let mut report = ProjectorReport::default();
        let mut folded = Folded::default();
        loop {
            let from = self.log.checkpoint(PROJECTIONS_CHECKPOINT).await?;
            report.cursor = from.cursor.clone();
            let (events, to) = self.log.read_after(&from.cursor, PROJECTOR_BATCH).await?;
            if to == from.cursor {
                let behind = self.log.count_behind(&from.cursor).await?;
                metrics::gauge!("projector_lag_events").set(behind as f64);
                return Ok(report);
            }
            let passed = events.len();
            // What the appends that wrote them wrote already, in their own
            // transaction (`LogEvent::rows_written`), is passed over.
            let events: Vec<_> = events.into_iter().filter(|e| !e.rows_written).collect();
            let mut batch = AppendBatch::projection(chrono::Utc::now());
            folded
                .project(&self.log, &self.catalog, &events, &mut batch)
                .await?;
            batch.checkpoint = Some(CheckpointMove::next(PROJECTIONS_CHECKPOINT, &from, &to));
            match self.log.append(&batch).await? {
                AppendOutcome::Appended => {
                    report.events += passed;
                    report.batches += 1;
                    report.cursor = to;
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
        let checkpoint = self.log.checkpoint(PROJECTIONS_CHECKPOINT).await?;
        self.log.count_behind(&checkpoint.cursor).await
    }
}
