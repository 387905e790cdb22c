//! `booking replay`: rebuilds projections from the whole log, correct while
//! the service runs.

use crate::catalog::ShowCatalog;
use crate::rebuild::fold::{Read, Rebuild};
use crate::store::{Projection, Store, StoreError};

/// Rows written per replay statement.
pub const REPLAY_BATCH: usize = 10_000;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReplayReport {
    pub events: usize,
    pub batches: usize,
}

/// Rebuilds projections from the whole log without losing what commands
/// append meanwhile. It folds the log into tables in memory while commands
/// go on, reading below any transaction still open so that the fold can
/// continue from where it stopped; folds again what committed meanwhile;
/// then, in one write phase in which no append commits (`Store::quiesce`),
/// folds the rest of the log, resets the named projections and writes each
/// row once, in its final state. Commands wait during that last phase only
/// (the rows of the log's last moments, and the writing of every row), and
/// are never lost: an append either committed before the phase and is in
/// the fold, or commits after it, with its own rows.
pub async fn replay(
    store: &Store,
    catalog: &ShowCatalog,
    which: &[Projection],
) -> Result<ReplayReport, StoreError> {
    // Fresh planner statistics: a log that grew fast since the last
    // autovacuum would otherwise be read by sorting it whole for each batch.
    store.analyze_log().await?;
    let mut rebuild = Rebuild::default();
    rebuild.advance(store, catalog, Read::Tailing).await?;
    rebuild.advance(store, catalog, Read::Tailing).await?;
    let mut quiesced = store.quiesce().await?;
    rebuild.advance(store, catalog, Read::Committed).await?;
    quiesced.reset_projections(which).await?;
    let batches = quiesced.write_tables(&rebuild.tables, REPLAY_BATCH).await?;
    quiesced.commit().await?;
    Ok(ReplayReport {
        events: rebuild.events,
        batches,
    })
}
