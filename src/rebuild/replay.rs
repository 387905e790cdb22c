//! `booking replay`: rebuilds projections from the whole log.

use crate::catalog::ShowCatalog;
use crate::rebuild::fold::rebuild;
use crate::store::{Projection, Store, StoreError};

/// Rows written per replay transaction.
pub const REPLAY_BATCH: usize = 10_000;

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
    which: &[Projection],
) -> Result<ReplayReport, StoreError> {
    // Fresh planner statistics: a log that grew fast since the last
    // autovacuum would otherwise be read by sorting it whole for each batch.
    store.analyze_log().await?;
    let (tables, events) = rebuild(store, catalog).await?;
    store.reset_projections(which).await?;
    let batches = store.write_tables(&tables, REPLAY_BATCH).await?;
    Ok(ReplayReport { events, batches })
}
