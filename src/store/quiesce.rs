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

use sqlx::{Postgres, Sqlite, Transaction};

use super::batch::AppendOutcome;
use super::tables::{Projection, Table, Tables};
use super::{Backend, ProjectionTables, StoreError, StoreResult};

const PG_LOCK: &str = "LOCK TABLE events, seat_availability, pool_shards, holds, \
     pool_holds, checkouts IN SHARE ROW EXCLUSIVE MODE";

const PG_STAMP_SHOWS: &str = "UPDATE shows SET rows_rewritten_at = \
     (pg_current_xact_id()::text::bigint + (SELECT xid_offset FROM log_epoch)) << 16";

pub enum Quiesced {
    Postgres(Transaction<'static, Postgres>),
    Sqlite(Transaction<'static, Sqlite>),
}

impl ProjectionTables {
    /// Starts a write phase in which no other append commits (see the
    /// module's comment). It ends with [`Quiesced::commit`]; dropped, it
    /// rolls back.
    pub async fn quiesce(&self) -> StoreResult<Quiesced> {
        match self.backend() {
            Backend::Postgres(s) => {
                let mut tx = s.pool.begin().await.map_err(StoreError::classify)?;
                sqlx::query(PG_LOCK)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::classify)?;
                Ok(Quiesced::Postgres(tx))
            }
            Backend::Sqlite(s) => {
                let tx = s
                    .write
                    .begin_with("BEGIN IMMEDIATE")
                    .await
                    .map_err(StoreError::classify)?;
                Ok(Quiesced::Sqlite(tx))
            }
        }
    }
}

impl Quiesced {
    /// Resets the named projections (see [`Projection`]).
    pub async fn reset_projections(&mut self, which: &[Projection]) -> StoreResult<()> {
        // Collected first: an iterator of borrowed statements held across
        // the awaits makes the future not `Send` for every lifetime.
        let statements: Vec<&'static str> = which
            .iter()
            .flat_map(|p| p.reset_sql().iter().copied())
            .collect();
        for sql in statements {
            match self {
                Quiesced::Postgres(tx) => sqlx::query(sql).execute(&mut **tx).await.map(drop),
                Quiesced::Sqlite(tx) => sqlx::query(sql).execute(&mut **tx).await.map(drop),
            }
            .map_err(StoreError::classify)?;
        }
        // Seat rows rewritten without events: on PostgreSQL the availability
        // caches find changes through the log, so every show is stamped
        // with a position of this transaction and read whole next time
        // (migration 0013). (SQLite's trigger marks each row it changes.)
        if let (Quiesced::Postgres(tx), true) =
            (&mut *self, which.contains(&Projection::Availability))
        {
            sqlx::query(PG_STAMP_SHOWS)
                .execute(&mut **tx)
                .await
                .map_err(StoreError::classify)?;
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
        let mut statements = match self {
            Quiesced::Postgres(tx) => super::bulk::write_postgres(tx, tables, &bulk).await?,
            Quiesced::Sqlite(tx) => super::bulk::write_sqlite(tx, tables, &bulk).await?,
        };
        let docs = tables.documents(chunk, &merged);
        for document in &docs {
            let outcome = match self {
                Quiesced::Postgres(tx) => {
                    let json = document.to_json()?;
                    match sqlx::query(super::log::postgres::APPEND)
                        .bind(json)
                        .execute(&mut **tx)
                        .await
                    {
                        Ok(_) => AppendOutcome::Appended,
                        Err(err) => super::log::postgres::refusal(&err)
                            .ok_or_else(|| StoreError::classify(err))?,
                    }
                }
                Quiesced::Sqlite(tx) => {
                    let job = super::log::sqlite::SqliteJob::of(document)?;
                    match job.write(tx).await {
                        super::log::sqlite::JobWrite::Done(outcome) => {
                            outcome.map_err(StoreError::classify)?
                        }
                        // The caller's transaction is gone: its error ends the phase.
                        super::log::sqlite::JobWrite::TransactionLost(error) => {
                            return Err(StoreError::classify(error))
                        }
                    }
                }
            };
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
        match self {
            Quiesced::Postgres(tx) => tx.commit().await,
            Quiesced::Sqlite(tx) => tx.commit().await,
        }
        .map_err(StoreError::classify)
    }
}
