//! Every read model at once on PostgreSQL: dumped and reset on the command
//! pool, and the write phase of a rebuild (`store/quiesce.rs`): one
//! transaction that locks the log and every read-model table in SHARE ROW
//! EXCLUSIVE mode.

use async_trait::async_trait;
use domain::ids::ShowId;
use sqlx::{Postgres, Transaction};

use super::append::{refusal, APPEND};
use super::{bulk, PgBackend};
use crate::store::batch::AppendOutcome;
use crate::store::document::Document;
use crate::store::projection_tables::QuiesceDialect;
use crate::store::quiesce::{Quiesced, QuiescedPort};
use crate::store::sql::SqlTx;
use crate::store::tables::{Table, Tables};
use crate::store::{StoreError, StoreResult};

/// `log_heads` first: every append takes its show's head before any other
/// table's row (`booking_append_group.sql`, "Positions"), so one waiting
/// here holds nothing the write phase will wait for.
const PG_LOCK: &str = "LOCK TABLE log_heads, events, seat_availability, pool_shards, holds, \
     pool_holds, checkouts IN SHARE ROW EXCLUSIVE MODE";

/// Every show stamped with a position taken for it (a gap in its events'):
/// the availability caches find changes through the log, and a show whose
/// seat rows were rewritten without events is read whole next time
/// (migrations 0013, 0025). The write phase holds `log_heads`' lock, so no
/// append holds a head meanwhile.
const PG_STAMP_SHOWS: &str = "UPDATE shows SET rows_rewritten_at = \
     booking_take_positions(show_id, 1)";

#[async_trait]
impl QuiesceDialect for PgBackend {
    async fn begin_quiesced(&self) -> StoreResult<Quiesced> {
        let mut tx = self.pool.begin().await.map_err(StoreError::classify)?;
        sqlx::query(PG_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::classify)?;
        Ok(Quiesced::new(PgQuiesced(tx)))
    }
}

/// The write phase's transaction, holding the lock.
struct PgQuiesced(Transaction<'static, Postgres>);

#[async_trait]
impl QuiescedPort for PgQuiesced {
    async fn execute(&mut self, sql: &'static str) -> StoreResult<()> {
        SqlTx::execute(&mut self.0, sql, &[]).await.map(drop)
    }

    async fn seat_rows_rewritten(&mut self) -> StoreResult<()> {
        self.execute(PG_STAMP_SHOWS).await
    }

    async fn write_reset(&mut self, tables: &Tables, reset: &[Table]) -> StoreResult<usize> {
        bulk::write_reset(&mut self.0, tables, reset).await
    }

    async fn write_document(&mut self, document: &Document<'_>) -> StoreResult<AppendOutcome> {
        let json = document.to_json()?;
        let show = document.show_id.map(ShowId::as_str);
        let written = sqlx::query(APPEND).bind(show).bind(json);
        match written.execute(&mut *self.0).await {
            Ok(_) => Ok(AppendOutcome::Appended),
            Err(err) => refusal(&err).ok_or_else(|| StoreError::classify(err)),
        }
    }

    async fn commit(self: Box<Self>) -> StoreResult<()> {
        SqlTx::commit(self.0).await
    }
}
