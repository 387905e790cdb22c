//! `booking replay`: rebuilds projections from the whole log, correct while
//! the service runs.

use crate::catalog::ShowCatalog;
use crate::rebuild::fold::Rebuild;
use crate::store::{EventLog, Projection, ProjectionTables, StoreError};

/// Rows per append document, for the tables replay writes without having
/// reset them (their rows merge through the append's guards).
pub const REPLAY_BATCH: usize = 10_000;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReplayReport {
    pub events: usize,
    /// Statements that wrote rows.
    pub batches: usize,
    /// Time spent folding while commands went on.
    pub online_ms: u128,
    /// Time of the write phase: what commands waited for.
    pub quiesced_ms: u128,
}

/// Rebuilds projections from the whole log without losing what commands
/// append meanwhile. It folds the log into tables in memory while commands
/// go on, reading each show in its commit order so that the fold can
/// continue from where it stopped; folds again what committed meanwhile;
/// then, in one write phase in which no append commits (`ProjectionTables::quiesce`),
/// folds the rest of the log, resets the named projections and writes each
/// row once, in its final state. Commands wait during that last phase only
/// (the rows of the log's last moments, and the writing of every row), and
/// are never lost: an append either committed before the phase and is in
/// the fold, or commits after it, with its own rows.
pub async fn replay(
    log: &EventLog,
    tables: &ProjectionTables,
    catalog: &ShowCatalog,
    which: &[Projection],
) -> Result<ReplayReport, StoreError> {
    // Fresh planner statistics: a log that grew fast since the last
    // autovacuum would otherwise be read by sorting it whole for each batch.
    let started = std::time::Instant::now();
    log.analyze_log().await?;
    let mut rebuild = Rebuild::default();
    rebuild.advance(log, catalog).await?;
    rebuild.advance(log, catalog).await?;
    let online_ms = started.elapsed().as_millis();
    let started = std::time::Instant::now();
    let mut quiesced = tables.quiesce().await?;
    rebuild.advance(log, catalog).await?;
    quiesced.reset_projections(which).await?;
    let batches = quiesced
        .write_tables(&rebuild.tables, which, REPLAY_BATCH)
        .await?;
    quiesced.commit().await?;
    let quiesced_ms = started.elapsed().as_millis();
    tracing::info!(
        events = rebuild.events,
        online_ms,
        quiesced_ms,
        "replayed the log"
    );
    Ok(ReplayReport {
        events: rebuild.events,
        batches,
        online_ms,
        quiesced_ms,
    })
}
