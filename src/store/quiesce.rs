//! A write phase in which no append can commit: how a rebuild swaps its
//! tables in while the service runs (`booking replay`), and how verify reads
//! the live tables at one instant of the log.
//!
//! PostgreSQL: one transaction that locks the log and every read-model table
//! in SHARE ROW EXCLUSIVE mode. Every append inserts into one of them first
//! (events, or a read-model row for a projection batch), taking ROW
//! EXCLUSIVE, which conflicts: the lock waits for appends in flight to
//! commit, and appends that arrive meanwhile wait for this transaction.
//! Readers (ACCESS SHARE) are never blocked. SQLite: `BEGIN IMMEDIATE` on
//! the one write connection takes the database's write lock.
//!
//! While quiesced, reads through the store's pools see every append that
//! will ever commit below the log's current head: nothing can commit until
//! the phase ends.

use async_trait::async_trait;

use super::batch::AppendOutcome;
use super::document::Document;
use super::tables::{Projection, Table, Tables};
use super::{StoreError, StoreResult};

/// A write phase as each backend holds it (`postgres/quiesce.rs`,
/// `sqlite/quiesce.rs`): one transaction no append commits beside.
#[async_trait]
pub trait QuiescedPort: Send {
    /// Runs one statement (a constant: never input) in the phase.
    async fn execute(&mut self, sql: &'static str) -> StoreResult<()>;

    /// Seat rows were rewritten without events: what the availability
    /// caches need to know of it.
    async fn seat_rows_rewritten(&mut self) -> StoreResult<()>;

    /// Writes the rows of the `reset` tables set-based (`bulk.rs`); returns
    /// the statements that carried rows.
    async fn write_reset(&mut self, tables: &Tables, reset: &[Table]) -> StoreResult<usize>;

    /// Writes one append document in the phase.
    async fn write_document(&mut self, document: &Document<'_>) -> StoreResult<AppendOutcome>;

    async fn commit(self: Box<Self>) -> StoreResult<()>;
}

/// A write phase in which no other append commits: it ends with
/// [`Quiesced::commit`]; dropped, it rolls back.
pub struct Quiesced(Box<dyn QuiescedPort>);

impl Quiesced {
    pub(super) fn new(phase: impl QuiescedPort + 'static) -> Self {
        Self(Box::new(phase))
    }

    /// Resets the named projections (see [`Projection`]).
    pub async fn reset_projections(&mut self, which: &[Projection]) -> StoreResult<()> {
        // Collected first: an iterator of borrowed statements held across
        // the awaits makes the future not `Send` for every lifetime.
        let statements: Vec<&'static str> = which
            .iter()
            .flat_map(|p| p.reset_sql().iter().copied())
            .collect();
        for sql in statements {
            self.0.execute(sql).await?;
        }
        if which.contains(&Projection::Availability) {
            self.0.seat_rows_rewritten().await?;
        }
        Ok(())
    }

    /// Writes rebuilt tables inside the phase; returns the statements that
    /// carried rows. The tables of the projections `reset` in this phase
    /// are written set-based ([`super::bulk`]): every row there is new or
    /// replaces a reset one. Any other table gets append documents of
    /// `chunk` rows, whose guards merge the rows with those it holds.
    pub async fn write_tables(
        &mut self,
        tables: &Tables,
        reset: &[Projection],
        chunk: usize,
    ) -> StoreResult<usize> {
        let bulk: Vec<Table> = reset.iter().flat_map(|p| p.tables()).copied().collect();
        let merged: Vec<Table> = Table::ALL
            .into_iter()
            .filter(|t| !bulk.contains(t))
            .collect();
        let mut statements = self.0.write_reset(tables, &bulk).await?;
        let docs = tables.documents(chunk, &merged);
        for document in &docs {
            let outcome = self.0.write_document(document).await?;
            if outcome != AppendOutcome::Appended {
                return Err(StoreError::Corrupt(format!(
                    "replay batch refused: {outcome:?}"
                )));
            }
        }
        statements += docs.len();
        Ok(statements)
    }

    pub async fn commit(self) -> StoreResult<()> {
        self.0.commit().await
    }
}
