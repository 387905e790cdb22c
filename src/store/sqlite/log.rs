//! The event log on SQLite: appends through the one writer's group-commit
//! task (`append.rs`); one writer commits in position order, over the whole
//! log and so within each show.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::PgPool;

use super::append::{self, JobWrite, SqliteAppender, SqliteJob};
use super::SqliteBackend;
use crate::store::batch::AppendOutcome;
use crate::store::document::Document;
use crate::store::log::LogSql;
use crate::store::log::{EventLogPort, LogDialect};
use crate::store::{StoreError, StoreResult};

impl LogDialect for SqliteBackend {
    const LOG_SQL: LogSql = LogSql {
        columns: "position, aggregate_type, aggregate_id, sequence, event_type, \
                  payload, metadata, recorded_at_us, show_id, rows_written",
    };

    /// The ticket streams that ever named `$1` as their holder (the index
    /// `events_ticket_holders`).
    const TICKET_HOLDERS: &str =
        "SELECT DISTINCT aggregate_id FROM events WHERE aggregate_type = 'Ticket' \
         AND event_type IN ('TicketIssued', 'TicketTransferred') \
         AND coalesce(json_extract(payload, '$.TicketIssued.holder'), \
                      json_extract(payload, '$.TicketTransferred.to')) = $1";
}

#[async_trait]
impl EventLogPort for SqliteBackend {
    fn appended(&self) -> &tokio::sync::watch::Sender<u64> {
        &self.appended
    }

    fn host_changes(&self) -> Option<tokio::sync::watch::Receiver<Option<usize>>> {
        None
    }

    fn postgres_pool(&self) -> Option<&PgPool> {
        None
    }

    /// Nothing to do: readers in this process wake on `appended`, and no
    /// other process writes the file.
    async fn notify(&self, _channel: &str) -> StoreResult<()> {
        Ok(())
    }

    async fn append(&self, document: &Document<'_>, rows_only: bool) -> StoreResult<AppendOutcome> {
        self.write_document(document, rows_only).await
    }

    async fn write_document(
        &self,
        document: &Document<'_>,
        _rows_only: bool,
    ) -> StoreResult<AppendOutcome> {
        let appender: &SqliteAppender = &self.appender;
        appender.append(SqliteJob::of(document)?).await
    }

    async fn append_held(
        &self,
        document: &Document<'_>,
        open_for: Duration,
        commit: bool,
    ) -> StoreResult<AppendOutcome> {
        let job = SqliteJob::of(document)?;
        let mut conn = self.write.acquire().await.map_err(StoreError::classify)?;
        let mut tx = sqlx::Connection::begin(&mut *conn)
            .await
            .map_err(StoreError::classify)?;
        let outcome = match job.write(&mut tx).await {
            JobWrite::Done(written) => written.map_err(StoreError::classify)?,
            JobWrite::TransactionLost(err) => return Err(StoreError::classify(err)),
        };
        tokio::time::sleep(open_for).await;
        let ended = if commit {
            tx.commit().await
        } else {
            tx.rollback().await
        };
        ended.map_err(StoreError::classify)?;
        Ok(outcome)
    }

    async fn append_together(
        &self,
        documents: Vec<Document<'_>>,
    ) -> StoreResult<Vec<StoreResult<AppendOutcome>>> {
        let jobs = documents
            .iter()
            .map(SqliteJob::of)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(append::write_group(&self.write, &jobs.iter().collect::<Vec<_>>()).await)
    }

    /// Nothing to do: SQLite's planner needs no statistics for these
    /// queries.
    async fn analyze_log(&self) -> StoreResult<()> {
        Ok(())
    }
}
