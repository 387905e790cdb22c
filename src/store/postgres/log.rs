//! The event log on PostgreSQL: appends through the group-commit appender
//! (`append.rs`), settled after a lost connection; reads on the pools of
//! this backend.

use std::time::Duration;

use async_trait::async_trait;
use domain::ids::ShowId;
use sqlx::PgPool;

use super::append::{self, PgAppender};
use super::PgBackend;
use crate::store::batch::AppendOutcome;
use crate::store::document::Document;
use crate::store::log::LogSql;
use crate::store::log::{EventLogPort, LogDialect};
use crate::store::sql::{Param, SqlPool};
use crate::store::{StoreError, StoreResult};

/// A [`LogEvent`]'s columns, its JSON as text.
const PG_COLUMNS: &str = "position, aggregate_type, aggregate_id, sequence, event_type, \
     payload::text AS payload, metadata::text AS metadata, recorded_at_us, show_id, rows_written";

impl LogDialect for PgBackend {
    const LOG_SQL: LogSql = LogSql {
        columns: PG_COLUMNS,
    };

    /// The ticket streams that ever named `$1` as their holder (the index
    /// `events_ticket_holders`).
    const TICKET_HOLDERS: &str = "SELECT DISTINCT aggregate_id FROM events WHERE aggregate_type = 'Ticket' \
         AND event_type IN ('TicketIssued', 'TicketTransferred') \
         AND coalesce(payload -> 'TicketIssued' ->> 'holder', payload -> 'TicketTransferred' ->> 'to') = $1";
}

#[async_trait]
impl EventLogPort for PgBackend {
    fn appended(&self) -> &tokio::sync::watch::Sender<u64> {
        &self.appended
    }

    fn host_changes(&self) -> Option<tokio::sync::watch::Receiver<Option<usize>>> {
        Some(self.primary.changes())
    }

    fn postgres_pool(&self) -> Option<&PgPool> {
        Some(&self.pool)
    }

    async fn notify(&self, channel: &str) -> StoreResult<()> {
        self.query
            .execute("SELECT pg_notify($1, '')", &[Param::Text(channel)])
            .await
            .map(drop)
    }

    async fn append(&self, document: &Document<'_>, rows_only: bool) -> StoreResult<AppendOutcome> {
        if self.primary.host().is_none() {
            // No host accepts writes now (a failover under way): say so at
            // once rather than after the pool's acquire timeout.
            return Err(StoreError::Unavailable(
                "no database host accepts writes now".into(),
            ));
        }
        match self.write_document(document, rows_only).await {
            Err(StoreError::ConnectionLost(why)) => match document.events.first() {
                Some(first) if !rows_only => {
                    append::settle(
                        &self.pool,
                        &self.primary,
                        document.show_id,
                        &document.to_json()?,
                        first,
                        why,
                    )
                    .await
                }
                _ => Err(StoreError::ConnectionLost(why)),
            },
            written => written,
        }
    }

    async fn write_document(
        &self,
        document: &Document<'_>,
        rows_only: bool,
    ) -> StoreResult<AppendOutcome> {
        if goes_alone(document, rows_only) {
            append::append(
                &self.pool,
                document.show_id,
                &document.to_json()?,
                rows_only,
            )
            .await
        } else {
            let appender: &PgAppender = &self.appender;
            appender.append(document).await
        }
    }

    async fn append_held(
        &self,
        document: &Document<'_>,
        open_for: Duration,
        commit: bool,
    ) -> StoreResult<AppendOutcome> {
        let mut tx = self.pool.begin().await.map_err(StoreError::classify)?;
        let written = sqlx::query(append::APPEND)
            .bind(document.show_id.map(ShowId::as_str))
            .bind(document.to_json()?)
            .execute(&mut *tx)
            .await;
        let outcome = match written {
            Ok(_) => AppendOutcome::Appended,
            Err(err) => append::refusal(&err).ok_or_else(|| StoreError::classify(err))?,
        };
        tokio::time::sleep(open_for).await;
        let ended = match (commit, outcome) {
            (true, AppendOutcome::Appended) => tx.commit().await,
            _ => tx.rollback().await,
        };
        ended.map_err(StoreError::classify)?;
        Ok(outcome)
    }

    async fn append_together(
        &self,
        documents: Vec<Document<'_>>,
    ) -> StoreResult<Vec<StoreResult<AppendOutcome>>> {
        // As the writer does: a document that goes alone is written alone,
        // in its turn; the runs between them in groups.
        let mut answers = Vec::with_capacity(documents.len());
        let mut run: Vec<Document<'_>> = Vec::new();
        for document in documents {
            if !goes_alone(&document, false) {
                run.push(document);
                continue;
            }
            answers.extend(append::append_together(&self.pool, &run).await?);
            run.clear();
            answers.push(
                append::append(&self.pool, document.show_id, &document.to_json()?, false).await,
            );
        }
        answers.extend(append::append_together(&self.pool, &run).await?);
        Ok(answers)
    }

    async fn analyze_log(&self) -> StoreResult<()> {
        self.pool.execute("ANALYZE events", &[]).await.map(drop)
    }
}

/// Whether a document is written alone on PostgreSQL, not in a group: the
/// projector's (rows only, a checkpoint to move), one without events, and
/// one with a deadline (`booking_append_group`'s terms).
fn goes_alone(document: &Document<'_>, rows_only: bool) -> bool {
    rows_only
        || document.checkpoint.is_some()
        || document.commit_by_us.is_some()
        || document.events.is_empty()
}
