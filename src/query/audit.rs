//! The audit trail: history of a seat or a show from the log, and
//! availability as it was at an instant, folded from the log up to then.

use chrono::{DateTime, Utc};
use cqrs_es::Aggregate;
use domain::ids::{SeatId, ShowId};
use domain::seat::{Seat, SeatStatus};
use projections::time::from_micros;
use serde::Serialize;
use serde_json::Value;

use crate::catalog::CatalogEntry;
use crate::query::availability::{PoolNow, Viewer};
use crate::query::report::ShowFold;
use crate::store::{EventLog, LogEvent, LogFilter, StoreError};

/// Events per page of show history at most (`limit` is 1..=this).
pub const MAX_HISTORY_PAGE: i64 = 1_000;
/// Events per page when `limit` is not given.
pub const DEFAULT_HISTORY_PAGE: i64 = 100;
/// Events of one seat's history at most: a seat stream has a few events per
/// sale; this bounds an answer even for a seat held and released all day.
pub const MAX_SEAT_HISTORY: i64 = 10_000;

/// One event as the audit API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AuditEvent {
    pub position: i64,
    pub stream: String,
    pub stream_type: String,
    pub sequence: i64,
    #[serde(rename = "type")]
    pub event_type: String,
    pub recorded_at: Option<DateTime<Utc>>,
    #[schema(value_type = Object)]
    pub data: Value,
    /// actor, role, and idempotency_key and the client's request_id
    /// where there are.
    #[schema(value_type = Object)]
    pub metadata: Value,
}

impl AuditEvent {
    fn of(event: LogEvent) -> Self {
        // Payloads are `{"EventName": {...}}`: the data is the inner object.
        let payload: Value = serde_json::from_str(&event.payload).unwrap_or(Value::Null);
        let data = match payload {
            Value::Object(map) if map.len() == 1 => {
                map.into_iter().next().map_or(Value::Null, |(_, v)| v)
            }
            other => other,
        };
        Self {
            position: event.position,
            stream: event.aggregate_id,
            stream_type: event.aggregate_type,
            sequence: event.sequence,
            event_type: event.event_type,
            recorded_at: from_micros(event.recorded_at_us),
            data,
            metadata: serde_json::from_str(&event.metadata).unwrap_or(Value::Null),
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HistoryPage {
    pub events: Vec<AuditEvent>,
    pub next_after: Option<i64>,
}

pub async fn seat_history(
    log: &EventLog,
    show_id: &ShowId,
    seat_id: &SeatId,
) -> Result<HistoryPage, StoreError> {
    let stream = domain::ids::seat_stream_id(show_id, seat_id);
    let events = log
        .read_log(LogFilter::Stream(Seat::TYPE, &stream), 0, MAX_SEAT_HISTORY)
        .await?;
    let next_after = (events.len() as i64 == MAX_SEAT_HISTORY)
        .then(|| events.last().map(|e| e.position))
        .flatten();
    Ok(HistoryPage {
        events: events.into_iter().map(AuditEvent::of).collect(),
        next_after,
    })
}

pub async fn show_history(
    log: &EventLog,
    show_id: &ShowId,
    after: i64,
    limit: i64,
) -> Result<HistoryPage, StoreError> {
    let events = log
        .read_log(LogFilter::Show(show_id.as_str()), after, limit)
        .await?;
    let next_after = (events.len() as i64 == limit)
        .then(|| events.last().map(|e| e.position))
        .flatten();
    Ok(HistoryPage {
        events: events.into_iter().map(AuditEvent::of).collect(),
        next_after,
    })
}

/// What a show's inventory was at `at`, folded from the events recorded by then.
pub struct PastAvailability {
    /// Status of each seat, in show order.
    pub seats: Vec<SeatStatus>,
    /// Each pool's figures, in show order (as the public saw them).
    pub pools: Vec<PoolNow>,
}

pub async fn availability_at(
    log: &EventLog,
    entry: &CatalogEntry,
    at: DateTime<Utc>,
) -> Result<PastAvailability, StoreError> {
    let fold = ShowFold::at(log, entry, at).await?;
    let seats = (fold.seats.iter())
        .map(|seat| Viewer::Public.sees(seat.status_at(at), seat.channel.as_ref()))
        .collect();
    let pools = (fold.pools.iter())
        .map(|shards| {
            shards
                .iter()
                .fold(PoolNow::default(), |sum, shard| PoolNow {
                    held: sum.held + shard.public_held_at(at),
                    sold: sum.sold + shard.sold,
                    allocated: sum.allocated + shard.allocated_total(),
                    available: None,
                })
        })
        .collect();
    Ok(PastAvailability { seats, pools })
}
