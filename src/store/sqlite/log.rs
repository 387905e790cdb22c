//! The event log on SQLite: appends through the one writer's group-commit
//! task (`append.rs`); reads with no late-commit bound, since one writer
//! commits in position order.

use std::time::Duration;

use async_trait::async_trait;
use cqrs_es::persist::SerializedEvent;
use sqlx::PgPool;

use super::append::{self, JobWrite, SqliteAppender, SqliteJob};
use super::SqliteBackend;
use crate::store::batch::AppendOutcome;
use crate::store::document::Document;
use crate::store::log::read::{self as shared, LogEvent, LogRead, LogScan, LogSql};
use crate::store::log::EventLogPort;
use crate::store::{StoreError, StoreResult};

const LOG_SQL: LogSql = LogSql {
    columns: "position, aggregate_type, aggregate_id, sequence, event_type, \
              payload, metadata, recorded_at_us, show_id, rows_written",
    tail_bound: None,
};

/// The ticket streams that ever named `$1` as their holder (the index
/// `events_ticket_holders`).
const TICKET_HOLDERS: &str =
    "SELECT DISTINCT aggregate_id FROM events WHERE aggregate_type = 'Ticket' \
     AND event_type IN ('TicketIssued', 'TicketTransferred') \
     AND coalesce(json_extract(payload, '$.TicketIssued.holder'), \
                  json_extract(payload, '$.TicketTransferred.to')) = $1";

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

    async fn stream(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        after: usize,
    ) -> StoreResult<Vec<SerializedEvent>> {
        shared::read_stream(&self.read, aggregate_type, aggregate_id, after).await
    }

    async fn positions(&self) -> StoreResult<Vec<(i64, i64)>> {
        shared::read_positions(&self.read).await
    }

    async fn count_events(&self) -> StoreResult<i64> {
        shared::count_events(&self.read).await
    }

    async fn read_log(&self, read: &LogRead<'_>) -> StoreResult<Vec<LogEvent>> {
        shared::read_log(&self.read, &LOG_SQL, read).await
    }

    async fn log_touches(&self, after: i64, limit: i64) -> StoreResult<Vec<(i64, Option<String>)>> {
        shared::log_touches(&self.read, &LOG_SQL, after, limit).await
    }

    async fn safe_head(&self) -> StoreResult<i64> {
        shared::safe_head(&self.read, &LOG_SQL).await
    }

    fn log_scan(&self, tailing: bool) -> LogScan {
        LogScan::new(&LOG_SQL, tailing)
    }

    async fn scan_page(&self, scan: &LogScan, after: i64) -> StoreResult<Vec<LogEvent>> {
        shared::scan_page(&self.read, scan, after).await
    }

    async fn ticket_streams_of(&self, holder: &str) -> StoreResult<Vec<String>> {
        shared::ticket_streams_of(&self.read, TICKET_HOLDERS, holder).await
    }

    async fn show_log_until(&self, show_id: &str, at_us: i64) -> StoreResult<Vec<LogEvent>> {
        shared::show_log_until(&self.read, &LOG_SQL, show_id, at_us).await
    }

    /// Nothing to do: SQLite's planner needs no statistics for these
    /// queries.
    async fn analyze_log(&self) -> StoreResult<()> {
        Ok(())
    }

    async fn checkpoint(&self, name: &str) -> StoreResult<Option<i64>> {
        shared::read_checkpoint(&self.read, name).await
    }

    async fn count_after(&self, position: i64) -> StoreResult<i64> {
        shared::count_after(&self.read, position).await
    }

    async fn head_position(&self) -> StoreResult<i64> {
        shared::head_position(&self.read).await
    }
}
