//! The event log: one port, [`EventLog`] over [`EventLogPort`], with one
//! implementation per backend (`postgres/log.rs` beside the group-commit
//! appender and our SQL functions, `postgres/append.rs`; `sqlite/log.rs`
//! beside its group-commit appender, `sqlite/append.rs`). The port appends a
//! command's batch (its events with the rows they produce), loads streams,
//! reads the log show by show, each show in its positions' order, which is
//! its commit order (`cursor.rs`; `read.rs`: the statements both dialects
//! share), and says when this process appended (`appends`) or, across
//! processes, notifies.

pub(crate) mod cursor;
pub(crate) mod read;

use std::time::Duration;

use async_trait::async_trait;
use cqrs_es::persist::SerializedEvent;
use cqrs_es::Aggregate;
use futures::stream::{BoxStream, StreamExt};
use sqlx::PgPool;

pub use cursor::{Checkpoint, LogCursor};
pub use read::{LogEvent, LogFilter};
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

    /// `(position, recorded_at_us)` of every event, each show's in order.
    async fn positions(&self) -> StoreResult<Vec<(i64, i64)>>;

    /// Number of events in the log.
    async fn count_events(&self) -> StoreResult<i64>;

    /// Events of the log a [`LogRead`] asks for.
    async fn read_log(&self, read: &LogRead<'_>) -> StoreResult<Vec<LogEvent>>;

    /// See [`EventLog::heads`].
    async fn heads(&self) -> StoreResult<Vec<(String, i64)>>;

    /// See [`EventLog::ticket_streams_of`].
    async fn ticket_streams_of(&self, holder: &str) -> StoreResult<Vec<String>>;

    /// See [`EventLog::show_log_until`].
    async fn show_log_until(&self, show_id: &str, at_us: i64) -> StoreResult<Vec<LogEvent>>;

    /// The checkpoint, if there is one of that name.
    async fn checkpoint(&self, name: &str) -> StoreResult<Option<Checkpoint>>;

    /// Events of `show` after `position`, counted up to `limit`.
    async fn count_after(&self, show: &str, position: i64, limit: i64) -> StoreResult<i64>;
}

/// What a dialect reads the log with (`postgres/log.rs`, `sqlite/log.rs`).
pub trait LogDialect {
    /// The columns.
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

    async fn heads(&self) -> StoreResult<Vec<(String, i64)>> {
        read::read_heads(self.queries()).await
    }

    async fn ticket_streams_of(&self, holder: &str) -> StoreResult<Vec<String>> {
        read::ticket_streams_of(self.reads(), Self::TICKET_HOLDERS, holder).await
    }

    async fn show_log_until(&self, show_id: &str, at_us: i64) -> StoreResult<Vec<LogEvent>> {
        read::show_log_until(self.reads(), &Self::LOG_SQL, show_id, at_us).await
    }

    async fn checkpoint(&self, name: &str) -> StoreResult<Option<Checkpoint>> {
        let row = read::read_checkpoint(self.reads(), name).await?;
        row.map(|(moves, shows)| {
            Ok(Checkpoint {
                moves,
                cursor: LogCursor::from_json(&shows)?,
            })
        })
        .transpose()
    }

    async fn count_after(&self, show: &str, position: i64, limit: i64) -> StoreResult<i64> {
        read::count_after(self.reads(), show, position, limit).await
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

    /// `(position, recorded_at_us)` of every event, each show's in order
    /// (diagnostics).
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

    /// Up to `limit` events after `after` that `filter` takes, in position
    /// order: for a filter of one show (every filter but `All`), that
    /// show's commit order, so a reader that goes on from the last one it
    /// read never passes an event that commits later.
    pub async fn read_log(
        &self,
        filter: LogFilter<'_>,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<LogEvent>> {
        let read = LogRead {
            filter,
            after,
            limit,
        };
        self.port.read_log(&read).await
    }

    /// Every show's head: its last position (a show with no event has none).
    pub async fn heads(&self) -> StoreResult<Vec<(String, i64)>> {
        self.port.heads().await
    }

    /// Where a reader that starts now, and wants only what comes next,
    /// starts: every show's head.
    pub async fn head_cursor(&self) -> StoreResult<LogCursor> {
        let mut cursor = LogCursor::default();
        for (show, head) in self.heads().await? {
            cursor.move_to(&show, head);
        }
        Ok(cursor)
    }

    /// Up to `limit` events after `cursor`, show by show (each show's in
    /// its order; the shows in the order of their ids), and the cursor to
    /// read on from: what a reader of every show (the projector, the
    /// webhooks dispatcher) reads next.
    ///
    /// A show read to its end moves to its head, read before its events:
    /// every position up to that head had committed, so one without an
    /// event is a gap (a position taken for rows rewritten without events),
    /// not one still to come. The cursor may so move with no event read.
    /// (Heads and events are both read on the primary, the heads first: a
    /// read of a server behind the heads' would pass events it had not yet
    /// replayed.)
    pub async fn read_after(
        &self,
        cursor: &LogCursor,
        limit: i64,
    ) -> StoreResult<(Vec<LogEvent>, LogCursor)> {
        let heads = self.heads().await?;
        let (mut events, mut next) = (Vec::new(), cursor.clone());
        for (show, after, head) in cursor.behind(&heads) {
            let left = limit - events.len() as i64;
            if left <= 0 {
                break;
            }
            let page = self.read_log(LogFilter::Show(show), after, left).await?;
            page.iter().for_each(|event| next.pass(event));
            if (page.len() as i64) < left {
                next.move_to(show, head);
            }
            events.extend(page);
        }
        Ok((events, next))
    }

    /// Every event after `cursor`, show by show as [`EventLog::read_after`]
    /// reads them, as a stream of pages of [`read::SCAN_PAGE`] events: each
    /// page one statement, one walk of a show's position index from where
    /// the last page ended (no sort), decoded as the fold consumes it. Not
    /// one statement for the whole log: a statement holds its snapshot
    /// until its last row is read, and with it the cluster's oldest xmin,
    /// which vacuum waits for; a replay's scan of a million events held it
    /// for as long as its fold took. The shows are those with a head when
    /// the scan starts: a show whose first event commits later is read by
    /// the next scan from the cursor it leaves.
    pub fn scan_after(&self, cursor: LogCursor) -> BoxStream<'_, StoreResult<LogEvent>> {
        enum Scan {
            Start(LogCursor),
            Shows(std::collections::VecDeque<(String, i64)>),
        }
        futures::stream::unfold(Some(Scan::Start(cursor)), move |scan| async move {
            let mut shows = match scan? {
                Scan::Start(cursor) => match self.heads().await {
                    Ok(heads) => cursor
                        .behind(&heads)
                        .into_iter()
                        .map(|(show, after, _)| (show.to_owned(), after))
                        .collect(),
                    Err(error) => return Some((vec![Err(error)], None)),
                },
                Scan::Shows(shows) => shows,
            };
            let (show, after) = shows.pop_front()?;
            let page = match self
                .read_log(LogFilter::Show(&show), after, read::SCAN_PAGE)
                .await
            {
                Ok(page) => page,
                Err(error) => return Some((vec![Err(error)], None)),
            };
            if page.len() as i64 == read::SCAN_PAGE {
                if let Some(last) = page.last() {
                    shows.push_front((show, last.position));
                }
            }
            Some((page.into_iter().map(Ok).collect(), Some(Scan::Shows(shows))))
        })
        .flat_map(futures::stream::iter)
        .boxed()
    }

    /// The ticket streams that ever named `holder` as their holder (the
    /// index `events_ticket_holders`): whose tickets they hold now is for
    /// the caller to fold.
    pub async fn ticket_streams_of(&self, holder: &str) -> StoreResult<Vec<String>> {
        self.port.ticket_streams_of(holder).await
    }

    /// Events of a show recorded at or before `at_us`, in the show's order.
    pub async fn show_log_until(&self, show_id: &str, at_us: i64) -> StoreResult<Vec<LogEvent>> {
        self.port.show_log_until(show_id, at_us).await
    }

    /// Refreshes the planner's statistics of the log (PostgreSQL; SQLite's
    /// planner needs none for these queries).
    pub async fn analyze_log(&self) -> StoreResult<()> {
        self.port.analyze_log().await
    }

    /// The reader's checkpoint of that name.
    pub async fn checkpoint(&self, name: &str) -> StoreResult<Checkpoint> {
        self.port
            .checkpoint(name)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("no checkpoint {name}")))
    }

    /// Events in the log after `cursor` (how far a reader there is behind),
    /// counted up to [`read::MAX_COUNTED_LAG`]: each show's count walks its
    /// position index, so a reader far behind costs a bounded read.
    pub async fn count_behind(&self, cursor: &LogCursor) -> StoreResult<i64> {
        let heads = self.heads().await?;
        let mut behind = 0;
        for (show, after, _) in cursor.behind(&heads) {
            let left = read::MAX_COUNTED_LAG - behind;
            if left <= 0 {
                break;
            }
            behind += self.port.count_after(show, after, left).await?;
        }
        Ok(behind)
    }
}
