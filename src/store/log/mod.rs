//! The event log: one port, [`EventLog`], over one implementation per
//! backend (`postgres.rs`: the group-commit appender and our SQL functions;
//! `sqlite.rs`: the group-commit appender, one statement per table). The
//! port appends a command's batch (its events with the rows they produce),
//! loads streams, reads the log in global order (`read.rs`), and says when
//! this process appended (`appends`) or, across processes, notifies.

pub(crate) mod postgres;
mod read;
pub(crate) mod sqlite;

use std::sync::Arc;

use cqrs_es::persist::{PersistedEventRepository, SerializedEvent};
use cqrs_es::Aggregate;
use sqlx::PgPool;

pub(crate) use read::pg_log_bound;
pub use read::{LogEvent, LogFilter, LogScan};

use super::batch::{AppendBatch, AppendOutcome, MAX_EVENTS_PER_BATCH};
use super::error::retry_read;
use super::{document, on_store, Backend, StoreError, StoreResult};
use postgres::PgAppender;
use sqlite::SqliteAppender;

/// The event log: appends and every read of the events. A handle on the one
/// database, cheap to clone (see `store::port!`, written out here because
/// the log is the port a command's path goes through).
#[derive(Clone)]
pub struct EventLog {
    db: Arc<Backend>,
}

impl EventLog {
    pub(crate) fn on(db: Arc<Backend>) -> Self {
        Self { db }
    }

    /// The database behind the port (for `on_store!`).
    pub(crate) fn backend(&self) -> &Backend {
        &self.db
    }

    fn appended(&self) -> &tokio::sync::watch::Sender<u64> {
        match self.backend() {
            Backend::Postgres(s) => &s.appended,
            Backend::Sqlite(s) => &s.appended,
        }
    }

    /// Changes after every batch of events this process appends (a count,
    /// not a position): what wakes a reader tailing the log in-process
    /// instead of polling it. Appends by other processes are not seen here
    /// (on PostgreSQL, `live::wake` carries them with LISTEN/NOTIFY).
    pub fn appends(&self) -> tokio::sync::watch::Receiver<u64> {
        self.appended().subscribe()
    }

    /// Changes when the PostgreSQL host in use changes or is lost (`None`
    /// on SQLite): what tells a connection held for long, such as a LISTEN,
    /// to move.
    pub fn host_changes(&self) -> Option<tokio::sync::watch::Receiver<Option<usize>>> {
        match self.backend() {
            Backend::Postgres(s) => Some(s.primary.changes()),
            Backend::Sqlite(_) => None,
        }
    }

    /// The PostgreSQL pool, for what only PostgreSQL has (a LISTEN
    /// connection, held for as long as it listens).
    pub fn postgres_pool(&self) -> Option<&PgPool> {
        match self.backend() {
            Backend::Postgres(s) => Some(&s.pool),
            Backend::Sqlite(_) => None,
        }
    }

    /// `pg_notify(channel, '')` on PostgreSQL (a no-op on SQLite), on the
    /// pool kept for public queries: a notification after an append never
    /// waits behind, or takes a connection from, the commands.
    pub async fn notify(&self, channel: &str) -> StoreResult<()> {
        if let Backend::Postgres(s) = self.backend() {
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(channel)
                .execute(&s.query)
                .await
                .map_err(StoreError::classify)?;
        }
        Ok(())
    }

    /// Events of one stream with a sequence above `after`, in order, through
    /// the cqrs-es repository of the store.
    pub async fn stream_events<A: Aggregate>(
        &self,
        aggregate_id: &str,
        after: usize,
    ) -> StoreResult<Vec<SerializedEvent>> {
        if after > 0 {
            return self.events_after(A::TYPE, aggregate_id, after).await;
        }
        retry_read(move || async move {
            let result = match self.backend() {
                Backend::Postgres(s) => s.repo.get_events::<A>(aggregate_id).await,
                Backend::Sqlite(s) => s.repo.get_events::<A>(aggregate_id).await,
            };
            result.map_err(StoreError::from_persistence)
        })
        .await
    }

    /// What `get_last_events` of the cqrs-es repositories returns, with the
    /// sequence bound as a parameter: the crates format it into the SQL text,
    /// so every call is a new statement to parse and plan, and the prepared
    /// statement cache of each connection churns.
    async fn events_after(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        after: usize,
    ) -> StoreResult<Vec<SerializedEvent>> {
        const SQL: &str =
            "SELECT sequence, event_type, event_version, payload, metadata FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence > $3 ORDER BY sequence";
        type Row = (i64, String, String, serde_json::Value, serde_json::Value);
        let rows: Vec<Row> = retry_read(move || async move {
            on_store!(self, read pool => {
                sqlx::query_as(SQL)
                    .bind(aggregate_type)
                    .bind(aggregate_id)
                    .bind(after as i64)
                    .fetch_all(pool)
                    .await
                    .map_err(StoreError::classify)
            })
        })
        .await?;
        Ok(rows
            .into_iter()
            .map(|(sequence, event_type, event_version, payload, metadata)| {
                SerializedEvent::new(
                    aggregate_id.to_owned(),
                    sequence.max(0) as usize,
                    aggregate_type.to_owned(),
                    event_type,
                    event_version,
                    payload,
                    metadata,
                )
            })
            .collect())
    }

    /// `(position, recorded_at_us)` of every event in global order (diagnostics).
    pub async fn positions(&self) -> StoreResult<Vec<(i64, i64)>> {
        on_store!(self, read pool => {
            sqlx::query_as("SELECT position, recorded_at_us FROM events ORDER BY position")
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    /// Number of events in the log (for tests and diagnostics).
    pub async fn count_events(&self) -> StoreResult<i64> {
        on_store!(self, read pool => {
            let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events")
                .fetch_one(pool)
                .await
                .map_err(StoreError::classify)?;
            Ok(count)
        })
    }

    /// Appends the batch in one transaction. Returns `Conflict` (and writes
    /// nothing) if any stream already has an event at one of the sequences.
    pub async fn append(&self, batch: &AppendBatch) -> StoreResult<AppendOutcome> {
        if batch.events.len() > MAX_EVENTS_PER_BATCH {
            return Err(StoreError::TooLarge(format!(
                "a batch of {} events; one transaction holds at most {MAX_EVENTS_PER_BATCH}",
                batch.events.len()
            )));
        }
        if let Backend::Postgres(s) = self.backend() {
            if s.primary.host().is_none() {
                // No host accepts writes now (a failover under way): say so
                // at once rather than after the pool's acquire timeout.
                return Err(StoreError::Unavailable(
                    "no database host accepts writes now".into(),
                ));
            }
        }
        let document = document::Document::of(batch);
        let outcome = match self.write_document(&document, batch.rows_only).await {
            Err(StoreError::ConnectionLost(why)) => match (self.backend(), batch.events.first()) {
                (Backend::Postgres(s), Some(first)) if !batch.rows_only => {
                    postgres::settle(&s.pool, &s.primary, &document.to_json()?, first, why).await?
                }
                (_, _) => return Err(StoreError::ConnectionLost(why)),
            },
            written => written?,
        };
        if outcome == AppendOutcome::Appended && !batch.events.is_empty() {
            metrics::counter!("events_appended_total").increment(batch.events.len() as u64);
            self.appended().send_modify(|n| *n = n.wrapping_add(1));
        }
        Ok(outcome)
    }

    /// Appends the batch alone in a transaction that then stays open for
    /// `open_for` before it commits (`commit`) or rolls back: what a writer
    /// stalled between its append and its commit (a paused process, a slow
    /// disk, a lost client) looks like to the readers of the log. For tests
    /// and fault drills; commands never call it. On SQLite it holds the one
    /// writer meanwhile, as such a transaction would. The outcome is the
    /// append's, whichever way the transaction ended.
    pub async fn append_held(
        &self,
        batch: &AppendBatch,
        open_for: std::time::Duration,
        commit: bool,
    ) -> StoreResult<AppendOutcome> {
        let document = document::Document::of(batch);
        let outcome = match self.backend() {
            Backend::Postgres(s) => {
                let mut tx = s.pool.begin().await.map_err(StoreError::classify)?;
                let written = sqlx::query(postgres::APPEND)
                    .bind(document.to_json()?)
                    .execute(&mut *tx)
                    .await;
                let outcome = match written {
                    Ok(_) => AppendOutcome::Appended,
                    Err(err) => postgres::refusal(&err).ok_or_else(|| StoreError::classify(err))?,
                };
                tokio::time::sleep(open_for).await;
                let ended = match (commit, outcome) {
                    (true, AppendOutcome::Appended) => tx.commit().await,
                    _ => tx.rollback().await,
                };
                ended.map_err(StoreError::classify)?;
                outcome
            }
            Backend::Sqlite(s) => {
                let job = sqlite::SqliteJob::of(&document)?;
                let mut conn = s.write.acquire().await.map_err(StoreError::classify)?;
                let mut tx = sqlx::Connection::begin(&mut *conn)
                    .await
                    .map_err(StoreError::classify)?;
                let outcome = match job.write(&mut tx).await {
                    sqlite::JobWrite::Done(written) => written.map_err(StoreError::classify)?,
                    sqlite::JobWrite::TransactionLost(err) => {
                        return Err(StoreError::classify(err))
                    }
                };
                tokio::time::sleep(open_for).await;
                let ended = if commit {
                    tx.commit().await
                } else {
                    tx.rollback().await
                };
                ended.map_err(StoreError::classify)?;
                outcome
            }
        };
        if commit && outcome == AppendOutcome::Appended && !batch.events.is_empty() {
            self.appended().send_modify(|n| *n = n.wrapping_add(1));
        }
        Ok(outcome)
    }

    /// Appends the batches as the store's writer would if they had queued
    /// at the same instant: in groups, each in one transaction (on
    /// PostgreSQL, the groups its queue makes of them: one show, no hold's
    /// row written by two), in order; each answered as if appended alone
    /// after the ones before it.
    /// For tests and tools that must know the group is formed (which
    /// appends share a group otherwise depends on what else is queued).
    pub async fn append_together(
        &self,
        batches: &[AppendBatch],
    ) -> StoreResult<Vec<StoreResult<AppendOutcome>>> {
        let documents: Vec<document::Document<'_>> =
            batches.iter().map(document::Document::of).collect();
        let answers = match self.backend() {
            Backend::Postgres(s) => {
                // As the writer does: a document that goes alone is written
                // alone, in its turn; the runs between them in groups.
                let mut answers = Vec::with_capacity(documents.len());
                let mut run: Vec<document::Document<'_>> = Vec::new();
                for document in documents {
                    if !goes_alone(&document, false) {
                        run.push(document);
                        continue;
                    }
                    answers.extend(postgres::append_together(&s.pool, &run).await?);
                    run.clear();
                    answers.push(postgres::append(&s.pool, &document.to_json()?, false).await);
                }
                answers.extend(postgres::append_together(&s.pool, &run).await?);
                answers
            }
            Backend::Sqlite(s) => {
                let jobs = documents
                    .iter()
                    .map(sqlite::SqliteJob::of)
                    .collect::<Result<Vec<_>, _>>()?;
                sqlite::write_group(&s.write, &jobs.iter().collect::<Vec<_>>()).await
            }
        };
        if answers
            .iter()
            .any(|answer| matches!(answer, Ok(AppendOutcome::Appended)))
        {
            self.appended().send_modify(|n| *n = n.wrapping_add(1));
        }
        Ok(answers)
    }

    /// Writes one append document in one transaction, through the store's
    /// own writer: a group-committing appender on either store. On
    /// PostgreSQL the projector's batches (rows only, a checkpoint to move)
    /// go alone, with their commit not waiting for the disk, and so do a
    /// document without events and one with a deadline (the group
    /// function's terms: `booking_append_group.sql`).
    pub(crate) async fn write_document(
        &self,
        document: &document::Document<'_>,
        rows_only: bool,
    ) -> StoreResult<AppendOutcome> {
        match self.backend() {
            Backend::Postgres(s) if goes_alone(document, rows_only) => {
                postgres::append(&s.pool, &document.to_json()?, rows_only).await
            }
            Backend::Postgres(s) => {
                let appender: &PgAppender = &s.appender;
                appender.append(document).await
            }
            Backend::Sqlite(s) => {
                let appender: &SqliteAppender = &s.appender;
                appender.append(sqlite::SqliteJob::of(document)?).await
            }
        }
    }
}

/// Whether a document is written alone on PostgreSQL, not in a group: the
/// projector's (rows only, a checkpoint to move), one without events, and
/// one with a deadline (`booking_append_group`'s terms).
fn goes_alone(document: &document::Document<'_>, rows_only: bool) -> bool {
    rows_only
        || document.checkpoint.is_some()
        || document.commit_by_us.is_some()
        || document.events.is_empty()
}
