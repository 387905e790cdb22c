//! Reading the event log, show by show in each show's order (`cursor.rs`),
//! for the projector, the webhooks, replay, verify and the audit API: the
//! statements both dialects share, each run on the pool a backend passes,
//! with its dialect's pieces ([`LogSql`]).

use cqrs_es::persist::SerializedEvent;

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

/// Events one statement of a whole-log scan reads ([`super::EventLog::scan_after`]):
/// a page ends in tens of milliseconds, so the scan never holds a snapshot
/// (and with it the cluster's oldest xmin, which vacuum waits for) for
/// longer; and the behavioural suite's replays of about ten thousand events
/// read several.
pub const SCAN_PAGE: i64 = 4_000;

/// Lag is counted up to this many events (readiness allows far fewer).
pub const MAX_COUNTED_LAG: i64 = 1_000_000;

/// What a dialect reads the log with.
pub struct LogSql {
    /// The columns of a [`LogEvent`], as text where the dialect stores
    /// JSON otherwise.
    pub columns: &'static str,
}

/// Which events a read takes. Every filter but `All` is of one show, whose
/// positions grow in commit order: a reader of it never passes an event
/// that commits later. `All` (a whole read of a small log, for tests and
/// tools) orders shows' positions among each other, which says nothing.
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
/// takes.
pub struct LogRead<'a> {
    pub filter: LogFilter<'a>,
    pub after: i64,
    pub limit: i64,
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

/// `(position, recorded_at_us)` of every event, each show's in order, read
/// on `pool`.
pub(super) async fn read_positions(pool: &impl SqlPool) -> StoreResult<Vec<(i64, i64)>> {
    pool.fetch_all(
        "SELECT position, recorded_at_us FROM events ORDER BY show_id, position",
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
        "SELECT {} FROM events WHERE position > $1 AND {condition} ORDER BY position LIMIT $2",
        sql.columns
    );
    let mut params = vec![Param::Int(read.after), Param::Int(read.limit)];
    params.extend(binds.into_iter().map(Param::Text));
    pool.fetch_all(&statement, &params).await
}

/// Every show's head (its last position), read on `pool`.
pub(super) async fn read_heads(pool: &impl SqlPool) -> StoreResult<Vec<(String, i64)>> {
    pool.fetch_all(
        "SELECT show_id, position FROM log_heads ORDER BY show_id",
        &[],
    )
    .await
}

/// Events of a show recorded at or before `at_us`, in the show's order, read
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

/// A checkpoint's count of moves and positions (a `LogCursor`'s JSON),
/// read on `pool`.
pub(super) async fn read_checkpoint(
    pool: &impl SqlPool,
    name: &str,
) -> StoreResult<Option<(i64, String)>> {
    pool.fetch_optional(
        "SELECT position, shows FROM projector_checkpoints WHERE name = $1",
        &[Param::Text(name)],
    )
    .await
}

/// Events of `show` after `position`, counted up to `limit`, on `pool`.
pub(super) async fn count_after(
    pool: &impl SqlPool,
    show: &str,
    position: i64,
    limit: i64,
) -> StoreResult<i64> {
    let count: Option<(i64,)> = pool
        .fetch_optional(
            "SELECT COUNT(*) FROM (SELECT 1 FROM events WHERE show_id = $1 AND position > $2 \
             ORDER BY position LIMIT $3) behind",
            &[Param::Text(show), Param::Int(position), Param::Int(limit)],
        )
        .await?;
    Ok(count.map_or(0, |(n,)| n))
}
