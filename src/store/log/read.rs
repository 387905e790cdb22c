//! Reading the event log in global order, for the projector, replay,
//! verify and the audit API: the statements both dialects share, each run
//! on the pool a backend passes, with its dialect's pieces ([`LogSql`]).

use cqrs_es::persist::SerializedEvent;
use futures::stream::{BoxStream, StreamExt};

use crate::store::sql::{Param, SqlPool};
use crate::store::StoreResult;

/// One event as the log holds it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LogEvent {
    pub position: i64,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub sequence: i64,
    pub event_type: String,
    pub payload: String,
    pub metadata: String,
    pub recorded_at_us: i64,
    pub show_id: Option<String>,
    /// The append that wrote it wrote its read-model rows too (migration
    /// 0014 on PostgreSQL, 0012 on SQLite): the projector passes over it.
    pub rows_written: bool,
}

/// Events one statement of a whole-log scan reads ([`super::EventLog::scan_log`]):
/// a page ends in tens of milliseconds, so the scan never holds a snapshot
/// (and with it every tailing reader of the cluster) for longer; and the
/// behavioural suite's replays of about ten thousand events read several.
pub const SCAN_PAGE: i64 = 4_000;

/// Lag is counted up to this many events (readiness allows far fewer).
pub const MAX_COUNTED_LAG: i64 = 1_000_000;

/// What a dialect reads the log with.
pub struct LogSql {
    /// The columns of a [`LogEvent`], as text where the dialect stores
    /// JSON otherwise.
    pub columns: &'static str,
    /// The condition a tailing reader must not pass (` AND ...`): on
    /// PostgreSQL, a transaction that has drawn positions but not
    /// committed (`postgres/log.rs`). `None` where commit order is position
    /// order (SQLite: one writer).
    pub tail_bound: Option<&'static str>,
}

impl LogSql {
    fn bound(&self, tailing: bool) -> &'static str {
        match self.tail_bound {
            Some(bound) if tailing => bound,
            _ => "",
        }
    }
}

/// The statement of one scan of the whole log in position order (see
/// [`super::EventLog::scan_log`]); the scan borrows it.
pub struct LogScan(String);

impl LogScan {
    /// Every event after a position (`$1`), up to `$2`: never past a
    /// transaction still open if `tailing`.
    pub(super) fn new(sql: &LogSql, tailing: bool) -> Self {
        LogScan(format!(
            "SELECT {} FROM events WHERE position > $1{} ORDER BY position LIMIT $2",
            sql.columns,
            sql.bound(tailing)
        ))
    }
}

pub enum LogFilter<'a> {
    All,
    Show(&'a str),
    Stream(&'a str, &'a str),
    /// A show's waiting room and queue entries (the index
    /// `events_waiting_room`, migrations `*_waiting_room.sql`).
    Queue(&'a str),
    /// A show's tickets (the index `events_tickets`, migrations
    /// `*_tickets.sql`).
    Tickets(&'a str),
}

/// A read of the log: up to `limit` events after `after` that `filter`
/// takes, never past a transaction still open if `tailing`.
pub struct LogRead<'a> {
    pub filter: LogFilter<'a>,
    pub after: i64,
    pub limit: i64,
    pub tailing: bool,
}

/// Events of one stream with a sequence above `after`, in order, read on
/// `pool`: the statement of `get_events` of the cqrs-es repositories (the
/// log is their `events` table; `tests/behaviour/cqrs.rs` loads it through
/// them), with the sequence bound as a parameter, where their
/// `get_last_events` formats it into the SQL text and every call is a new
/// statement to parse and plan.
pub(super) async fn read_stream(
    pool: &impl SqlPool,
    aggregate_type: &str,
    aggregate_id: &str,
    after: usize,
) -> StoreResult<Vec<SerializedEvent>> {
    const SQL: &str = "SELECT sequence, event_type, event_version, payload, metadata FROM events \
         WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence > $3 ORDER BY sequence";
    type Row = (i64, String, String, serde_json::Value, serde_json::Value);
    let rows: Vec<Row> = pool
        .fetch_all(
            SQL,
            &[
                Param::Text(aggregate_type),
                Param::Text(aggregate_id),
                Param::Int(i64::try_from(after).unwrap_or(i64::MAX)),
            ],
        )
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

/// `(position, recorded_at_us)` of every event, read on `pool`.
pub(super) async fn read_positions(pool: &impl SqlPool) -> StoreResult<Vec<(i64, i64)>> {
    pool.fetch_all(
        "SELECT position, recorded_at_us FROM events ORDER BY position",
        &[],
    )
    .await
}

/// Number of events in the log, counted on `pool`.
pub(super) async fn count_events(pool: &impl SqlPool) -> StoreResult<i64> {
    let count: Option<(i64,)> = pool
        .fetch_optional("SELECT COUNT(*) FROM events", &[])
        .await?;
    Ok(count.map_or(0, |(n,)| n))
}

/// The events a [`LogRead`] asks for, read on `pool`.
pub(super) async fn read_log(
    pool: &impl SqlPool,
    sql: &LogSql,
    read: &LogRead<'_>,
) -> StoreResult<Vec<LogEvent>> {
    let (condition, binds): (&str, Vec<&str>) = match read.filter {
        LogFilter::All => ("TRUE", vec![]),
        LogFilter::Show(show) => ("show_id = $3", vec![show]),
        LogFilter::Stream(kind, id) => {
            ("aggregate_type = $3 AND aggregate_id = $4", vec![kind, id])
        }
        LogFilter::Queue(show) => (
            "show_id = $3 AND aggregate_type IN ('WaitingRoom', 'QueueEntry')",
            vec![show],
        ),
        LogFilter::Tickets(show) => ("show_id = $3 AND aggregate_type = 'Ticket'", vec![show]),
    };
    let statement = format!(
        "SELECT {} FROM events WHERE position > $1 AND {condition}{} ORDER BY position LIMIT $2",
        sql.columns,
        sql.bound(read.tailing)
    );
    let mut params = vec![Param::Int(read.after), Param::Int(read.limit)];
    params.extend(binds.into_iter().map(Param::Text));
    pool.fetch_all(&statement, &params).await
}

/// Positions and shows of up to `limit` events after `after`, never past a
/// transaction still open, read on `pool`.
pub(super) async fn log_touches(
    pool: &impl SqlPool,
    sql: &LogSql,
    after: i64,
    limit: i64,
) -> StoreResult<Vec<(i64, Option<String>)>> {
    let statement = format!(
        "SELECT position, show_id FROM events WHERE position > $1{} ORDER BY position LIMIT $2",
        sql.bound(true)
    );
    pool.fetch_all(&statement, &[Param::Int(after), Param::Int(limit)])
        .await
}

/// The highest position a tailing reader can reach now, read on `pool`.
pub(super) async fn safe_head(pool: &impl SqlPool, sql: &LogSql) -> StoreResult<i64> {
    let statement = format!(
        "SELECT MAX(position) FROM events WHERE TRUE{}",
        sql.bound(true)
    );
    max_position(pool, &statement).await
}

/// The highest position in the log (0 when empty), read on `pool`.
pub(super) async fn head_position(pool: &impl SqlPool) -> StoreResult<i64> {
    max_position(pool, "SELECT MAX(position) FROM events").await
}

async fn max_position(pool: &impl SqlPool, statement: &str) -> StoreResult<i64> {
    let head: Option<(Option<i64>,)> = pool.fetch_optional(statement, &[]).await?;
    Ok(head.and_then(|(head,)| head).unwrap_or(0))
}

/// One page of `scan` after `after`, read on `pool`.
pub(super) async fn scan_page(
    pool: &impl SqlPool,
    scan: &LogScan,
    after: i64,
) -> StoreResult<Vec<LogEvent>> {
    pool.fetch_all(&scan.0, &[Param::Int(after), Param::Int(SCAN_PAGE)])
        .await
}

/// The events of pages read one after another from `after` (each by
/// `page`, from where the last ended) as one stream: the last page is the
/// one shorter than [`SCAN_PAGE`]; an error ends the stream.
pub(super) fn pages<'a, F, Fut>(after: i64, page: F) -> BoxStream<'a, StoreResult<LogEvent>>
where
    F: Fn(i64) -> Fut + Send + 'a,
    Fut: std::future::Future<Output = StoreResult<Vec<LogEvent>>> + Send + 'a,
{
    futures::stream::unfold(Some(after), move |cursor| {
        let read = cursor.map(&page);
        async move {
            match read?.await {
                Err(error) => Some((futures::stream::iter(vec![Err(error)]), None)),
                Ok(events) if events.is_empty() => None,
                Ok(events) => {
                    let next = (events.len() as i64 == SCAN_PAGE)
                        .then(|| events.last().map(|e| e.position))
                        .flatten();
                    let page: Vec<StoreResult<LogEvent>> = events.into_iter().map(Ok).collect();
                    Some((futures::stream::iter(page), next))
                }
            }
        }
    })
    .flatten()
    .boxed()
}

/// Events of a show recorded at or before `at_us`, in global order, read
/// on `pool`.
pub(super) async fn show_log_until(
    pool: &impl SqlPool,
    sql: &LogSql,
    show_id: &str,
    at_us: i64,
) -> StoreResult<Vec<LogEvent>> {
    let statement = format!(
        "SELECT {} FROM events WHERE show_id = $1 AND recorded_at_us <= $2 ORDER BY position",
        sql.columns
    );
    pool.fetch_all(&statement, &[Param::Text(show_id), Param::Int(at_us)])
        .await
}

/// The ticket streams that ever named `holder`, read on `pool` with the
/// dialect's statement (`statement`: JSON differs).
pub(super) async fn ticket_streams_of(
    pool: &impl SqlPool,
    statement: &str,
    holder: &str,
) -> StoreResult<Vec<String>> {
    let ids: Vec<(String,)> = pool.fetch_all(statement, &[Param::Text(holder)]).await?;
    Ok(ids.into_iter().map(|(id,)| id).collect())
}

/// A checkpoint's position, read on `pool`.
pub(super) async fn read_checkpoint(pool: &impl SqlPool, name: &str) -> StoreResult<Option<i64>> {
    let row: Option<(i64,)> = pool
        .fetch_optional(
            "SELECT position FROM projector_checkpoints WHERE name = $1",
            &[Param::Text(name)],
        )
        .await?;
    Ok(row.map(|(position,)| position))
}

/// Events in the log after `position`, counted up to [`MAX_COUNTED_LAG`],
/// on `pool`.
pub(super) async fn count_after(pool: &impl SqlPool, position: i64) -> StoreResult<i64> {
    let count: Option<(i64,)> = pool
        .fetch_optional(
            "SELECT COUNT(*) FROM (SELECT 1 FROM events WHERE position > $1 \
             ORDER BY position LIMIT $2) behind",
            &[Param::Int(position), Param::Int(MAX_COUNTED_LAG)],
        )
        .await?;
    Ok(count.map_or(0, |(n,)| n))
}
