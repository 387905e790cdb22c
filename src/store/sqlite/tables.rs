//! Every read model at once on SQLite: dumped on the read pool, reset on
//! the one writer, and the write phase of a rebuild (`store/quiesce.rs`):
//! `BEGIN IMMEDIATE` on the one write connection takes the database's
//! write lock.

use async_trait::async_trait;
use sqlx::{Sqlite, Transaction};

use super::append::{JobWrite, SqliteJob};
use super::{bulk, SqliteBackend};
use crate::store::batch::AppendOutcome;
use crate::store::document::Document;
use crate::store::projection_tables::QuiesceDialect;
use crate::store::quiesce::{Quiesced, QuiescedPort};
use crate::store::sql::SqlTx;
use crate::store::tables::{Table, Tables};
use crate::store::{StoreError, StoreResult};

#[async_trait]
impl QuiesceDialect for SqliteBackend {
    async fn begin_quiesced(&self) -> StoreResult<Quiesced> {
        let tx = self
            .write
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StoreError::classify)?;
        Ok(Quiesced::new(SqliteQuiesced(tx)))
    }
}

/// The write phase's transaction, holding the write lock.
struct SqliteQuiesced(Transaction<'static, Sqlite>);

#[async_trait]
impl QuiescedPort for SqliteQuiesced {
    async fn execute(&mut self, sql: &'static str) -> StoreResult<()> {
        SqlTx::execute(&mut self.0, sql, &[]).await.map(drop)
    }

    /// Nothing to do: SQLite's trigger marks each seat row it changes.
    async fn seat_rows_rewritten(&mut self) -> StoreResult<()> {
        Ok(())
    }

    async fn write_reset(&mut self, tables: &Tables, reset: &[Table]) -> StoreResult<usize> {
        bulk::write_reset(&mut self.0, tables, reset).await
    }

    async fn write_document(&mut self, document: &Document<'_>) -> StoreResult<AppendOutcome> {
        match SqliteJob::of(document)?.write(&mut self.0).await {
            JobWrite::Done(outcome) => outcome.map_err(StoreError::classify),
            // The phase's transaction is gone: its error ends the phase.
            JobWrite::TransactionLost(error) => Err(StoreError::classify(error)),
        }
    }

    async fn commit(self: Box<Self>) -> StoreResult<()> {
        SqlTx::commit(self.0).await
    }
}
