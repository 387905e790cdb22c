//! Reading the event log in global order: for the projector, replay,
//! verify and the audit API.

use futures::stream::{BoxStream, StreamExt};

use crate::store::{on_store, Backend, EventLog, StoreError, StoreResult};

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

/// Events one statement of a whole-log scan reads ([`EventLog::scan_log`]):
/// a page ends in tens of milliseconds, so the scan never holds a snapshot
/// (and with it every tailing reader of the cluster) for longer; and the
/// behavioural suite's replays of about ten thousand events read several.
pub const SCAN_PAGE: i64 = 4_000;

/// Lag is counted up to this many events (readiness allows far fewer).
pub const MAX_COUNTED_LAG: i64 = 1_000_000;

const PG_COLUMNS: &str = "position, aggregate_type, aggregate_id, sequence, event_type, \
     payload::text AS payload, metadata::text AS metadata, recorded_at_us, show_id, rows_written";
const SQLITE_COLUMNS: &str = "position, aggregate_type, aggregate_id, sequence, event_type, \
     payload, metadata, recorded_at_us, show_id, rows_written";

/// The position below which the log is final for the statement's snapshot,
/// `(oldest + xid_offset) * 65536` (see `PG_SAFE`), as a SQL expression: the
/// tailing readers' bound and the availability cache's watermark.
///
/// `oldest` is the oldest transaction the snapshot sees running that may be
/// this database's: the snapshot's xmin, but passing over the running
/// transactions (`pg_snapshot_xip`) that `pg_stat_get_activity` shows in
/// another database. Transaction ids are the server's, so with plain xmin
/// a long transaction in any database of the server (another tenant's
/// migration, a bulk load) froze every reader of this one: the projector,
/// the webhooks and the live feed. Only a transaction positively seen in
/// another database is passed: one the activity no longer shows (it ended
/// after the snapshot), a prepared one, or one of a role whose activity
/// this role may not read (without `pg_read_all_stats`) still holds the
/// bound, as before. Within one statement the snapshot comes first and the
/// activity is read after it, so a transaction of this database running at
/// the snapshot is either shown there with this database or has ended, and
/// is never passed. (`backend_xid` is 32 bits: compared with the low 32
/// bits of the snapshot's full ids, which are within 2^31 of each other.)
macro_rules! pg_log_bound {
    () => {
        "(((SELECT COALESCE(\
              (SELECT min(x::text::bigint) FROM pg_snapshot_xip(s) x \
               WHERE x::text::bigint % 4294967296 NOT IN (SELECT backend_xid::text::bigint \
                 FROM pg_stat_get_activity(NULL) WHERE backend_xid IS NOT NULL \
                 AND datid <> (SELECT oid FROM pg_database WHERE datname = current_database()))), \
              pg_snapshot_xmax(s)::text::bigint) \
            FROM pg_current_snapshot() s) \
         + (SELECT xid_offset FROM log_epoch)) << 16)"
    };
}
pub(crate) use pg_log_bound;

/// On PostgreSQL a reader of the log in position order must not pass a
/// transaction that has drawn positions but not committed: its events would
/// appear later *below* the reader's position. A transaction's positions are
/// `(xid + xid_offset) * 65536 + n` (see `booking_append`), and every
/// transaction of this database still running has an xid at or above the
/// oldest one running here (see `pg_log_bound!`), so every position below
/// `(oldest + xid_offset) * 65536` is final. (Stated on positions rather
/// than on the events' `txid` column, which after a move to another cluster
/// holds the old cluster's ids.) SQLite has one writer: commit order is
/// position order.
const PG_SAFE: &str = concat!("position < ", pg_log_bound!());

/// The statement of one scan of the whole log in position order (see
/// [`EventLog::scan_log`]); the scan borrows it.
pub struct LogScan(String);

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

impl EventLog {
    /// Up to `limit` events after `after` in global order, never past a
    /// transaction still open (see `PG_SAFE`): what a tailing reader needs.
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

    /// Positions and shows of up to `limit` events after `after`, in global
    /// order, never past a transaction still open (see `PG_SAFE`): what a
    /// reader needs that only asks which shows changed (the live feed).
    pub async fn log_touches(
        &self,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<(i64, Option<String>)>> {
        let safe = match self.backend() {
            Backend::Postgres(_) => format!(" AND {PG_SAFE}"),
            Backend::Sqlite(_) => String::new(),
        };
        let sql = format!(
            "SELECT position, show_id FROM events WHERE position > $1{safe} ORDER BY position LIMIT $2"
        );
        on_store!(self, query pool => {
            sqlx::query_as(&sql)
                .bind(after)
                .bind(limit)
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    /// The highest position a tailing reader can reach now (see `PG_SAFE`).
    pub async fn safe_head(&self) -> StoreResult<i64> {
        let sql = match self.backend() {
            Backend::Postgres(_) => format!("SELECT MAX(position) FROM events WHERE {PG_SAFE}"),
            Backend::Sqlite(_) => "SELECT MAX(position) FROM events".to_owned(),
        };
        on_store!(self, read pool => {
            let head: Option<i64> = sqlx::query_scalar(&sql)
                .fetch_one(pool)
                .await
                .map_err(StoreError::classify)?;
            Ok(head.unwrap_or(0))
        })
    }

    /// The statement that reads every event after a position in one scan:
    /// never past a transaction still open if `tailing` (see `PG_SAFE`),
    /// else every committed event (see [`EventLog::read_log_committed`]).
    pub fn log_scan(&self, tailing: bool) -> LogScan {
        let (columns, safe) = match self.backend() {
            Backend::Postgres(_) if tailing => (PG_COLUMNS, format!(" AND {PG_SAFE}")),
            Backend::Postgres(_) => (PG_COLUMNS, String::new()),
            Backend::Sqlite(_) => (SQLITE_COLUMNS, String::new()),
        };
        LogScan(format!(
            "SELECT {columns} FROM events WHERE position > $1{safe} ORDER BY position LIMIT $2"
        ))
    }

    /// Every event after `after` that `scan` reads, in position order, as a
    /// stream of pages of [`SCAN_PAGE`] events: each page one statement,
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
        futures::stream::unfold(Some(after), move |cursor| async move {
            let after = cursor?;
            let page: StoreResult<Vec<LogEvent>> = on_store!(self, read pool => {
                sqlx::query_as::<_, LogEvent>(&scan.0)
                    .bind(after)
                    .bind(SCAN_PAGE)
                    .fetch_all(pool)
                    .await
                    .map_err(StoreError::classify)
            });
            match page {
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
        })
        .flatten()
        .boxed()
    }

    async fn read_log_from(
        &self,
        filter: LogFilter<'_>,
        after: i64,
        limit: i64,
        tailing: bool,
    ) -> StoreResult<Vec<LogEvent>> {
        let (columns, safe) = match self.backend() {
            Backend::Postgres(_) if tailing => (PG_COLUMNS, format!(" AND {PG_SAFE}")),
            Backend::Postgres(_) => (PG_COLUMNS, String::new()),
            Backend::Sqlite(_) => (SQLITE_COLUMNS, String::new()),
        };
        let (condition, binds): (&str, Vec<&str>) = match filter {
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
        let sql = format!(
            "SELECT {columns} FROM events WHERE position > $1 AND {condition}{safe} ORDER BY position LIMIT $2"
        );
        on_store!(self, read pool => {
            let mut query = sqlx::query_as::<_, LogEvent>(&sql).bind(after).bind(limit);
            for bind in binds {
                query = query.bind(bind);
            }
            query.fetch_all(pool).await.map_err(StoreError::classify)
        })
    }

    /// Events of a show recorded at or before `at_us`, in global order.
    /// The ticket streams that ever named `holder` as their holder (the
    /// index `events_ticket_holders`): whose tickets they hold now is for
    /// the caller to fold.
    pub async fn ticket_streams_of(&self, holder: &str) -> StoreResult<Vec<String>> {
        let sql = match self.backend() {
            Backend::Postgres(_) => {
                "SELECT DISTINCT aggregate_id FROM events WHERE aggregate_type = 'Ticket' \
                 AND event_type IN ('TicketIssued', 'TicketTransferred') \
                 AND coalesce(payload -> 'TicketIssued' ->> 'holder', payload -> 'TicketTransferred' ->> 'to') = $1"
            }
            Backend::Sqlite(_) => {
                "SELECT DISTINCT aggregate_id FROM events WHERE aggregate_type = 'Ticket' \
                 AND event_type IN ('TicketIssued', 'TicketTransferred') \
                 AND coalesce(json_extract(payload, '$.TicketIssued.holder'), \
                              json_extract(payload, '$.TicketTransferred.to')) = $1"
            }
        };
        on_store!(self, read pool => {
            sqlx::query_scalar(sql)
                .bind(holder)
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    pub async fn show_log_until(&self, show_id: &str, at_us: i64) -> StoreResult<Vec<LogEvent>> {
        let columns = match self.backend() {
            Backend::Postgres(_) => PG_COLUMNS,
            Backend::Sqlite(_) => SQLITE_COLUMNS,
        };
        let sql = format!(
            "SELECT {columns} FROM events WHERE show_id = $1 AND recorded_at_us <= $2 ORDER BY position"
        );
        on_store!(self, read pool => {
            sqlx::query_as::<_, LogEvent>(&sql)
                .bind(show_id)
                .bind(at_us)
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    /// Refreshes the planner's statistics of the log (PostgreSQL; SQLite's
    /// planner needs none for these queries).
    pub async fn analyze_log(&self) -> StoreResult<()> {
        if let Backend::Postgres(s) = self.backend() {
            sqlx::query("ANALYZE events")
                .execute(&s.pool)
                .await
                .map_err(StoreError::classify)?;
        }
        Ok(())
    }

    pub async fn checkpoint(&self, name: &str) -> StoreResult<i64> {
        on_store!(self, read pool => {
            let position: Option<i64> = sqlx::query_scalar("SELECT position FROM projector_checkpoints WHERE name = $1")
                .bind(name)
                .fetch_optional(pool)
                .await
                .map_err(StoreError::classify)?;
            position.ok_or_else(|| StoreError::Corrupt(format!("no checkpoint {name}")))
        })
    }

    /// Events in the log after `position` (how far a reader there is
    /// behind), counted up to `MAX_COUNTED_LAG`: the count walks the
    /// position index, so a reader far behind costs a bounded read.
    pub async fn count_after(&self, position: i64) -> StoreResult<i64> {
        on_store!(self, read pool => {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM (SELECT 1 FROM events WHERE position > $1 ORDER BY position LIMIT $2) behind",
            )
            .bind(position)
            .bind(MAX_COUNTED_LAG)
            .fetch_one(pool)
            .await
            .map_err(StoreError::classify)
        })
    }

    /// The highest position in the log (0 when empty).
    pub async fn head_position(&self) -> StoreResult<i64> {
        on_store!(self, read pool => {
            let head: Option<i64> = sqlx::query_scalar("SELECT MAX(position) FROM events")
                .fetch_one(pool)
                .await
                .map_err(StoreError::classify)?;
            Ok(head.unwrap_or(0))
        })
    }
}
