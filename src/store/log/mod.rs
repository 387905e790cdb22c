//! The event log: one port, [`EventLog`] over [`EventLogPort`], with one
//! implementation per backend (`postgres/log.rs` beside the group-commit
//! appender and our SQL functions, `postgres/append.rs`; `sqlite/log.rs`
//! beside its group-commit appender, `sqlite/append.rs`). The port appends a
//! command's batch (its events with the rows they produce), loads streams,
//! reads the log in global order (`read.rs`: the statements both dialects
//! share), and says when this process appended (`appends`) or, across
//! processes, notifies.

pub(crate) mod read;

use std::time::Duration;

use async_trait::async_trait;
use cqrs_es::persist::SerializedEvent;
use cqrs_es::Aggregate;
use futures::stream::BoxStream;
use sqlx::PgPool;

pub use read::{LogEvent, LogFilter, LogScan};
pub use read::{LogRead, LogSql};

use super::batch::{AppendBatch, AppendOutcome, MAX_EVENTS_PER_BATCH};
use super::document::Document;
use super::error::retry_read;
use super::sql::Pools;
use super::{handle, StoreError, StoreResult};

/// The event log as each backend keeps it: appends go through the
/// backend's own writer (`postgres/log.rs`, `sqlite/log.rs`); reads
/// ([`LogReadPort`]) are one statement each (the handle reads again after a
/// lost connection where that is safe).
#[async_trait]
pub trait EventLogPort: LogReadPort {
    /// Counts this process's appends; see [`EventLog::appends`].
    fn appended(&self) -> &tokio::sync::watch::Sender<u64>;

    /// See [`EventLog::host_changes`].
    fn host_changes(&self) -> Option<tokio::sync::watch::Receiver<Option<usize>>>;

    /// See [`EventLog::postgres_pool`].
    fn postgres_pool(&self) -> Option<&PgPool>;

    /// See [`EventLog::notify`].
    async fn notify(&self, channel: &str) -> StoreResult<()>;

    /// Appends one document in one transaction through the backend's
    /// writer, settling it if the connection was lost while it ran (see
    /// [`EventLog::append`]).
    async fn append(&self, document: &Document<'_>, rows_only: bool) -> StoreResult<AppendOutcome>;

    /// See [`EventLog::write_document`].
    async fn write_document(
        &self,
        document: &Document<'_>,
        rows_only: bool,
    ) -> StoreResult<AppendOutcome>;

    /// See [`EventLog::append_held`].
    async fn append_held(
        &self,
        document: &Document<'_>,
        open_for: Duration,
        commit: bool,
    ) -> StoreResult<AppendOutcome>;

    /// See [`EventLog::append_together`].
    async fn append_together(
        &self,
        documents: Vec<Document<'_>>,
    ) -> StoreResult<Vec<StoreResult<AppendOutcome>>>;

    /// See [`EventLog::analyze_log`].
    async fn analyze_log(&self) -> StoreResult<()>;
}

/// The reads of the log, as a dialect runs them: every statement is
/// shared but the pieces [`LogDialect`] names; implemented once, for every
/// backend's [`Pools`] (`read.rs`).
#[async_trait]
pub trait LogReadPort: Send + Sync {
    /// Events of one stream with a sequence above `after`, in order.
    async fn stream(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        after: usize,
    ) -> StoreResult<Vec<SerializedEvent>>;

    /// `(position, recorded_at_us)` of every event in global order.
    async fn positions(&self) -> StoreResult<Vec<(i64, i64)>>;

    /// Number of events in the log.
    async fn count_events(&self) -> StoreResult<i64>;

    /// Events of the log a [`LogRead`] asks for.
    async fn read_log(&self, read: &LogRead<'_>) -> StoreResult<Vec<LogEvent>>;

    /// See [`EventLog::log_touches`].
    async fn log_touches(&self, after: i64, limit: i64) -> StoreResult<Vec<(i64, Option<String>)>>;

    /// See [`EventLog::safe_head`].
    async fn safe_head(&self) -> StoreResult<i64>;

    /// See [`EventLog::log_scan`].
    fn log_scan(&self, tailing: bool) -> LogScan;

    /// One page of a scan: up to [`read::SCAN_PAGE`] events after `after`.
    async fn scan_page(&self, scan: &LogScan, after: i64) -> StoreResult<Vec<LogEvent>>;

    /// See [`EventLog::ticket_streams_of`].
    async fn ticket_streams_of(&self, holder: &str) -> StoreResult<Vec<String>>;

    /// See [`EventLog::show_log_until`].
    async fn show_log_until(&self, show_id: &str, at_us: i64) -> StoreResult<Vec<LogEvent>>;

    /// The checkpoint's position, if there is one of that name.
    async fn checkpoint(&self, name: &str) -> StoreResult<Option<i64>>;

    /// See [`EventLog::count_after`].
    async fn count_after(&self, position: i64) -> StoreResult<i64>;

    /// See [`EventLog::head_position`].
    async fn head_position(&self) -> StoreResult<i64>;
}

/// What a dialect reads the log with (`postgres/log.rs`, `sqlite/log.rs`).
pub trait LogDialect {
    /// The columns and the late-commit bound.
    const LOG_SQL: LogSql;
    /// The ticket streams that ever named `$1` as their holder (the index
    /// `events_ticket_holders`): JSON is each dialect's own.
    const TICKET_HOLDERS: &'static str;
}

#[async_trait]
impl<B: Pools + LogDialect> LogReadPort for B {
    async fn stream(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        after: usize,
    ) -> StoreResult<Vec<SerializedEvent>> {
        read::read_stream(self.reads(), aggregate_type, aggregate_id, after).await
    }

    async fn positions(&self) -> StoreResult<Vec<(i64, i64)>> {
        read::read_positions(self.reads()).await
    }

    async fn count_events(&self) -> StoreResult<i64> {
        read::count_events(self.reads()).await
    }

    async fn read_log(&self, read: &LogRead<'_>) -> StoreResult<Vec<LogEvent>> {
        read::read_log(self.reads(), &Self::LOG_SQL, read).await
    }

    async fn log_touches(&self, after: i64, limit: i64) -> StoreResult<Vec<(i64, Option<String>)>> {
        read::log_touches(self.queries(), &Self::LOG_SQL, after, limit).await
    }

    async fn safe_head(&self) -> StoreResult<i64> {
        read::safe_head(self.reads(), &Self::LOG_SQL).await
    }

    fn log_scan(&self, tailing: bool) -> LogScan {
        LogScan::new(&Self::LOG_SQL, tailing)
    }

    async fn scan_page(&self, scan: &LogScan, after: i64) -> StoreResult<Vec<LogEvent>> {
        read::scan_page(self.reads(), scan, after).await
    }

    async fn ticket_streams_of(&self, holder: &str) -> StoreResult<Vec<String>> {
        read::ticket_streams_of(self.reads(), Self::TICKET_HOLDERS, holder).await
    }

    async fn show_log_until(&self, show_id: &str, at_us: i64) -> StoreResult<Vec<LogEvent>> {
        read::show_log_until(self.reads(), &Self::LOG_SQL, show_id, at_us).await
    }

    async fn checkpoint(&self, name: &str) -> StoreResult<Option<i64>> {
        read::read_checkpoint(self.reads(), name).await
    }

    async fn count_after(&self, position: i64) -> StoreResult<i64> {
        read::count_after(self.reads(), position).await
    }

    async fn head_position(&self) -> StoreResult<i64> {
        read::head_position(self.reads()).await
    }
}

handle!(
    /// The event log: appends and every read of the events ([`EventLogPort`]).
    EventLog: EventLogPort
);

impl EventLog {
    /// Changes after every batch of events this process appends (a count,
    /// not a position): what wakes a reader tailing the log in-process
    /// instead of polling it. Appends by other processes are not seen here
    /// (on PostgreSQL, `live::wake` carries them with LISTEN/NOTIFY).
    pub fn appends(&self) -> tokio::sync::watch::Receiver<u64> {
        self.port.appended().subscribe()
    }

    /// Changes when the PostgreSQL host in use changes or is lost (`None`
    /// on SQLite): what tells a connection held for long, such as a LISTEN,
    /// to move.
    pub fn host_changes(&self) -> Option<tokio::sync::watch::Receiver<Option<usize>>> {
        self.port.host_changes()
    }

    /// The PostgreSQL pool, for what only PostgreSQL has (a LISTEN
    /// connection, held for as long as it listens).
    pub fn postgres_pool(&self) -> Option<&PgPool> {
        self.port.postgres_pool()
    }

    /// `pg_notify(channel, '')` on PostgreSQL (a no-op on SQLite), on the
    /// pool kept for public queries: a notification after an append never
    /// waits behind, or takes a connection from, the commands.
    pub async fn notify(&self, channel: &str) -> StoreResult<()> {
        self.port.notify(channel).await
    }

    /// Events of one stream with a sequence above `after`, in order.
    pub async fn stream_events<A: Aggregate>(
        &self,
        aggregate_id: &str,
        after: usize,
    ) -> StoreResult<Vec<SerializedEvent>> {
        retry_read(move || self.port.stream(A::TYPE, aggregate_id, after)).await
    }

    /// `(position, recorded_at_us)` of every event in global order (diagnostics).
    pub async fn positions(&self) -> StoreResult<Vec<(i64, i64)>> {
        self.port.positions().await
    }

    /// Number of events in the log (for tests and diagnostics).
    pub async fn count_events(&self) -> StoreResult<i64> {
        self.port.count_events().await
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
        let outcome = self
            .port
            .append(&Document::of(batch), batch.rows_only)
            .await?;
        if outcome == AppendOutcome::Appended && !batch.events.is_empty() {
            metrics::counter!("events_appended_total").increment(batch.events.len() as u64);
            self.port.appended().send_modify(|n| *n = n.wrapping_add(1));
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
        open_for: Duration,
        commit: bool,
    ) -> StoreResult<AppendOutcome> {
        let outcome = self
            .port
            .append_held(&Document::of(batch), open_for, commit)
            .await?;
        if commit && outcome == AppendOutcome::Appended && !batch.events.is_empty() {
            self.port.appended().send_modify(|n| *n = n.wrapping_add(1));
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
        let documents = batches.iter().map(Document::of).collect();
        let answers = self.port.append_together(documents).await?;
        if answers
            .iter()
            .any(|answer| matches!(answer, Ok(AppendOutcome::Appended)))
        {
            self.port.appended().send_modify(|n| *n = n.wrapping_add(1));
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
        document: &Document<'_>,
        rows_only: bool,
    ) -> StoreResult<AppendOutcome> {
        self.port.write_document(document, rows_only).await
    }

    /// Up to `limit` events after `after` in global order, never past a
    /// transaction still open (see `LogSql::tail_bound`): what a tailing
    /// reader needs.
    pub async fn read_log(
        &self,
        filter: LogFilter<'_>,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<LogEvent>> {
        self.read_log_from(filter, after, limit, true).await
    }

    /// Every committed event after `after`, even above an open transaction:
    /// for a whole-log fold (replay, verify, a report) that keeps no cursor.
    /// An event that commits later below the cursor is not in the fold; its
    /// rows come with its own transaction, and the projector applies it.
    pub async fn read_log_committed(
        &self,
        filter: LogFilter<'_>,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<LogEvent>> {
        self.read_log_from(filter, after, limit, false).await
    }

    async fn read_log_from(
        &self,
        filter: LogFilter<'_>,
        after: i64,
        limit: i64,
        tailing: bool,
    ) -> StoreResult<Vec<LogEvent>> {
        let read = LogRead {
            filter,
            after,
            limit,
            tailing,
        };
        self.port.read_log(&read).await
    }

    /// Positions and shows of up to `limit` events after `after`, in global
    /// order, never past a transaction still open: what a reader needs that
    /// only asks which shows changed (the live feed).
    pub async fn log_touches(
        &self,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<(i64, Option<String>)>> {
        self.port.log_touches(after, limit).await
    }

    /// The highest position a tailing reader can reach now.
    pub async fn safe_head(&self) -> StoreResult<i64> {
        self.port.safe_head().await
    }

    /// The statement that reads every event after a position in one scan:
    /// never past a transaction still open if `tailing`, else every
    /// committed event (see [`EventLog::read_log_committed`]).
    pub fn log_scan(&self, tailing: bool) -> LogScan {
        self.port.log_scan(tailing)
    }

    /// Every event after `after` that `scan` reads, in position order, as a
    /// stream of pages of [`read::SCAN_PAGE`] events: each page one statement,
    /// one walk of the position index from where the last page ended (no
    /// sort), decoded as the fold consumes it. Not one statement for the
    /// whole log: a statement holds its snapshot until its last row is
    /// read, and the cluster's every tailing reader (the projector, the
    /// live feed, the webhook dispatcher, in every database of the
    /// cluster) waits below the oldest snapshot; a replay's scan of a
    /// million events held them back for as long as its fold took.
    pub fn scan_log<'a>(
        &'a self,
        scan: &'a LogScan,
        after: i64,
    ) -> BoxStream<'a, StoreResult<LogEvent>> {
        read::pages(after, move |after| self.port.scan_page(scan, after))
    }

    /// The ticket streams that ever named `holder` as their holder (the
    /// index `events_ticket_holders`): whose tickets they hold now is for
    /// the caller to fold.
    pub async fn ticket_streams_of(&self, holder: &str) -> StoreResult<Vec<String>> {
        self.port.ticket_streams_of(holder).await
    }

    /// Events of a show recorded at or before `at_us`, in global order.
    pub async fn show_log_until(&self, show_id: &str, at_us: i64) -> StoreResult<Vec<LogEvent>> {
        self.port.show_log_until(show_id, at_us).await
    }

    /// Refreshes the planner's statistics of the log (PostgreSQL; SQLite's
    /// planner needs none for these queries).
    pub async fn analyze_log(&self) -> StoreResult<()> {
        self.port.analyze_log().await
    }

    pub async fn checkpoint(&self, name: &str) -> StoreResult<i64> {
        self.port
            .checkpoint(name)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("no checkpoint {name}")))
    }

    /// Events in the log after `position` (how far a reader there is
    /// behind), counted up to `MAX_COUNTED_LAG`: the count walks the
    /// position index, so a reader far behind costs a bounded read.
    pub async fn count_after(&self, position: i64) -> StoreResult<i64> {
        self.port.count_after(position).await
    }

    /// The highest position in the log (0 when empty).
    pub async fn head_position(&self) -> StoreResult<i64> {
        self.port.head_position().await
    }
}
