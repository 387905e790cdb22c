//! The port of every read model at once, for replay and verify: dumped
//! into [`Tables`], reset, written back through the log, or rewritten in a
//! write phase no append commits beside ([`Quiesced`]).

use std::sync::Arc;

use async_trait::async_trait;
use projections::availability::SeatAvailabilityRow;
use projections::checkouts::CheckoutRow;
use projections::holds::{HoldRow, PoolHoldRow};
use projections::pools::PoolShardRow;
use serde::de::DeserializeOwned;

use super::batch::AppendOutcome;
use super::quiesce::Quiesced;
use super::sql::{Param, Pools, SqlPool, SqlTx};
use super::tables::{
    decode_row, Projection, Table, Tables, CHECKOUT_COLUMNS, HOLD_COLUMNS, POOL_HOLD_COLUMNS,
    POOL_SHARD_COLUMNS, SEAT_AVAILABILITY_COLUMNS,
};
use super::{retry_read, EventLog, StoreError, StoreResult};

/// Every read model at once. Implemented once, for every backend's
/// [`Pools`], with the write phase each dialect locks its own way
/// ([`QuiesceDialect`]).
#[async_trait]
pub trait ProjectionTablesPort: Send + Sync {
    /// Rows of `table` matching `condition` (a constant: never input), each
    /// as the JSON object of its `columns` (see [`SqlPool::row_object`]).
    async fn select_objects(
        &self,
        table: &str,
        columns: &[&str],
        condition: &str,
    ) -> StoreResult<Vec<String>>;

    /// Runs the reset `statements` in one transaction.
    async fn reset(&self, statements: &[&'static str]) -> StoreResult<()>;

    /// Starts a write phase in which no other append commits (see
    /// `quiesce.rs`).
    async fn quiesce(&self) -> StoreResult<Quiesced>;
}

/// How a dialect starts a write phase (`postgres/tables.rs`,
/// `sqlite/tables.rs`; see `quiesce.rs`).
#[async_trait]
pub trait QuiesceDialect {
    async fn begin_quiesced(&self) -> StoreResult<Quiesced>;
}

#[async_trait]
impl<B: Pools + QuiesceDialect> ProjectionTablesPort for B {
    async fn select_objects(
        &self,
        table: &str,
        columns: &[&str],
        condition: &str,
    ) -> StoreResult<Vec<String>> {
        select_objects(self.reads(), table, columns, condition).await
    }

    async fn reset(&self, statements: &[&'static str]) -> StoreResult<()> {
        reset(self.writes(), statements).await
    }

    async fn quiesce(&self) -> StoreResult<Quiesced> {
        self.begin_quiesced().await
    }
}

/// Every read model at once, for replay and verify: [`ProjectionTablesPort`],
/// and the log the rebuilt rows are written back through.
#[derive(Clone)]
pub struct ProjectionTables {
    port: Arc<dyn ProjectionTablesPort>,
    log: EventLog,
}

impl ProjectionTables {
    pub fn new(port: Arc<dyn ProjectionTablesPort>, log: EventLog) -> Self {
        Self { port, log }
    }

    /// Rows of `table` matching `condition` (a constant: never input) as `T`.
    pub(crate) async fn select_rows<T: DeserializeOwned>(
        &self,
        table: &str,
        columns: &[&str],
        condition: &str,
    ) -> StoreResult<Vec<T>> {
        let texts = retry_read(move || self.port.select_objects(table, columns, condition)).await?;
        texts.iter().map(|text| decode_row(table, text)).collect()
    }

    /// Starts a write phase in which no other append commits (see
    /// `quiesce.rs`). It ends with [`Quiesced::commit`]; dropped, it rolls
    /// back.
    pub async fn quiesce(&self) -> StoreResult<Quiesced> {
        self.port.quiesce().await
    }

    /// Every row of every projection (seat and shard rows only once an
    /// event touched them), for `booking verify`.
    pub async fn dump_projections(&self) -> StoreResult<Tables> {
        let mut tables = Tables::default();
        let seats: Vec<SeatAvailabilityRow> = self
            .select_rows(
                "seat_availability",
                SEAT_AVAILABILITY_COLUMNS,
                "last_seq > 0",
            )
            .await?;
        for row in seats {
            tables
                .seat_availability
                .insert((row.show_id.clone(), row.seat_id.clone()), row);
        }
        let shards: Vec<PoolShardRow> = self
            .select_rows("pool_shards", POOL_SHARD_COLUMNS, "last_seq > 0")
            .await?;
        for row in shards {
            tables
                .pool_shards
                .insert((row.show_id.clone(), row.pool_id.clone(), row.shard), row);
        }
        let holds: Vec<HoldRow> = self.select_rows("holds", HOLD_COLUMNS, "TRUE").await?;
        tables
            .holds
            .extend(holds.into_iter().map(|row| (row.hold_id, row)));
        let parts: Vec<PoolHoldRow> = self
            .select_rows("pool_holds", POOL_HOLD_COLUMNS, "TRUE")
            .await?;
        tables
            .pool_holds
            .extend(parts.into_iter().map(|row| ((row.hold_id, row.shard), row)));
        let checkouts: Vec<CheckoutRow> = self
            .select_rows("checkouts", CHECKOUT_COLUMNS, "TRUE")
            .await?;
        tables
            .checkouts
            .extend(checkouts.into_iter().map(|row| (row.hold_id, row)));
        Ok(tables)
    }

    /// Resets the named projections in one transaction (see
    /// [`Projection::reset_sql`]). Replaying the log rebuilds them.
    pub async fn reset_projections(&self, which: &[Projection]) -> StoreResult<()> {
        let statements: Vec<&str> = which
            .iter()
            .flat_map(|p| p.reset_sql().iter().copied())
            .collect();
        self.port.reset(&statements).await
    }

    /// Writes rebuilt tables into the live projections, `chunk` rows per
    /// transaction; returns the number of transactions.
    pub async fn write_tables(&self, tables: &Tables, chunk: usize) -> StoreResult<usize> {
        let docs = tables.documents(chunk, &Table::ALL);
        for document in &docs {
            let outcome = self.log.write_document(document, true).await?;
            if outcome != AppendOutcome::Appended {
                return Err(StoreError::Corrupt(format!(
                    "replay batch refused: {outcome:?}"
                )));
            }
        }
        Ok(docs.len())
    }
}

/// Rows of `table` matching `condition`, each as the JSON object of its
/// `columns`, read on `pool`.
async fn select_objects(
    pool: &impl SqlPool,
    table: &str,
    columns: &[&str],
    condition: &str,
) -> StoreResult<Vec<String>> {
    let sql = format!(
        "SELECT {} FROM {table} WHERE {condition}",
        pool.row_object(columns)
    );
    let texts: Vec<(String,)> = pool.fetch_all(&sql, &[]).await?;
    Ok(texts.into_iter().map(|(text,)| text).collect())
}

/// Runs the reset `statements` on `pool` in one transaction.
async fn reset(pool: &impl SqlPool, statements: &[&'static str]) -> StoreResult<()> {
    let mut tx = pool.begin_tx().await?;
    for sql in statements {
        tx.execute(sql, &[] as &[Param<'_>]).await?;
    }
    tx.commit().await
}
