//! Waiting rooms: `POST /v1/shows/{id}/queue` and `GET .../queue/me`
//! (buyer), `GET .../queue/me/stream` (buyer, server-sent events),
//! `GET .../queue` and `PATCH .../waiting-room` (admin). docs/api.md,
//! "Waiting room".

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch};
use axum::Router;
use domain::ids::{BuyerId, ShowId};
use serde::Deserialize;

use super::extract::{Admin, JsonBody, PathParams};
use super::live::KEEP_ALIVE;
use super::problem::ApiError;
use super::response::json_body;
use super::AppState;
use crate::auth::Actor;
use crate::command::context::RequestContext;
use crate::command::waiting_room::{QueueOverview, QueueStatus, QueueView, WaitingRoomService};

/// How often an open queue stream looks again at where its buyer stands
/// when nothing else wakes it: `ahead` falls between two looks, and the
/// buyer is told at most this late. The instant of the buyer's admission
/// wakes the stream by itself (a timer), so it is told then, but for the
/// time a burst of wakes takes to get through (BENCHMARKS.md, "Waiting
/// room": 10,000 admitted within a second).
pub const QUEUE_STREAM_TICK: Duration = Duration::from_secs(1);

/// Queue streams one instance serves at once; past it, 503 `busy` (a
/// client retries after `Retry-After`). A waiting buyer's stream, with its
/// connection's buffers, takes about 32 kB of heap (BENCHMARKS.md,
/// "Waiting room"): 50,000 of them about 1.6 GB. A crowd larger than that
/// is spread over instances.
pub const MAX_QUEUE_STREAMS: usize = 50_000;

/// A waiting buyer whose line has not moved is told again this often
/// (the estimate, refreshed), and otherwise only when something changes.
pub const QUEUE_STREAM_REFRESH: Duration = Duration::from_secs(10);

/// An estimate within this many seconds of the last one counted down is
/// not news.
const ESTIMATE_SLACK_SECONDS: i64 = 2;

/// The least a stream waits between two looks: a change due now that the
/// log does not show yet (a seed being drawn) is not looked for in a spin.
const QUEUE_STREAM_MIN_WAIT: Duration = Duration::from_millis(20);

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/shows/{show_id}/queue", get(overview).post(join))
        .route("/v1/shows/{show_id}/queue/me", get(me))
        .route("/v1/shows/{show_id}/waiting-room", patch(change_rate))
}

/// The streaming route, merged past the request timeout.
pub fn stream_router() -> Router<AppState> {
    Router::new().route("/v1/shows/{show_id}/queue/me/stream", get(stream))
}

/// The body of `POST /v1/shows/{id}/queue`: `{}` (any field is refused).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct JoinBody {}

/// The body of `PATCH /v1/shows/{id}/waiting-room`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RoomPatch {
    /// MIN_ADMIT_PER_MINUTE..=MAX_ADMIT_PER_MINUTE, from half a second after
    /// the change on (every instance knows of it by then).
    #[schema(minimum = 1, maximum = 1000000)]
    admit_per_minute: u32,
}

fn show_id(raw: &str) -> Result<ShowId, ApiError> {
    ShowId::parse(raw).map_err(|_| ApiError::ShowNotFound)
}

/// Joins the show's queue, once: joining again answers the same place.
#[utoipa::path(post, path = "/v1/shows/{show_id}/queue", tag = "queue",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    request_body = JoinBody,
    responses(
        (status = 201, description = "Joined", body = QueueView),
        (status = 200, description = "Already in the queue: the same place", body = QueueView),
        (status = 409, description = "sold_out: everything is booked, the room is closed", body = super::response::Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed (a field in the body)", body = super::response::Problem, content_type = "application/problem+json"),
        (status = "4XX", description = "unauthorized, show_not_found, waiting_room_not_found, malformed_json, unsupported_media_type", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn join(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(show_id_raw): PathParams<String>,
    JsonBody(JoinBody {}): JsonBody<JoinBody>,
) -> Result<Response, ApiError> {
    let show_id = show_id(&show_id_raw)?;
    let (new, view) = state.waiting_rooms.join(&ctx, &show_id).await?;
    if new {
        metrics::counter!("waiting_room_joins_total").increment(1);
    }
    json_body(
        if new {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        &view,
    )
}

/// Where the buyer stands in the show's queue, exact at this instant.
#[utoipa::path(get, path = "/v1/shows/{show_id}/queue/me", tag = "queue",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses(
        (status = 200, body = QueueView),
        (status = "4XX", description = "unauthorized, show_not_found, waiting_room_not_found, queue_entry_not_found", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn me(
    State(state): State<AppState>,
    actor: Actor,
    PathParams(show_id_raw): PathParams<String>,
) -> Result<Response, ApiError> {
    let show_id = show_id(&show_id_raw)?;
    let view = state.waiting_rooms.me(&actor.id, &show_id).await?;
    json_body(StatusCode::OK, &view)
}

/// The queue as its operator sees it.
#[utoipa::path(get, path = "/v1/shows/{show_id}/queue", tag = "queue",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses(
        (status = 200, body = QueueOverview),
        (status = "4XX", description = "unauthorized, forbidden (not an admin), show_not_found, waiting_room_not_found", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn overview(
    State(state): State<AppState>,
    Admin(_): Admin,
    PathParams(show_id_raw): PathParams<String>,
) -> Result<Response, ApiError> {
    let show_id = show_id(&show_id_raw)?;
    let view = state.waiting_rooms.overview(&show_id).await?;
    json_body(StatusCode::OK, &view)
}

/// Changes the rate of admissions from now on (an event in the show's
/// history).
#[utoipa::path(patch, path = "/v1/shows/{show_id}/waiting-room", tag = "queue",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    request_body = RoomPatch,
    responses(
        (status = 200, description = "The queue with its new rate", body = QueueOverview),
        (status = 409, description = "sold_out: the room is closed", body = super::response::Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed: admit_per_minute out of range, or a field in the body", body = super::response::Problem, content_type = "application/problem+json"),
        (status = "4XX", description = "unauthorized, forbidden (not an admin), show_not_found, waiting_room_not_found, malformed_json, unsupported_media_type", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn change_rate(
    State(state): State<AppState>,
    Admin(actor): Admin,
    ctx: RequestContext,
    PathParams(show_id_raw): PathParams<String>,
    JsonBody(RoomPatch { admit_per_minute }): JsonBody<RoomPatch>,
) -> Result<Response, ApiError> {
    let show_id = show_id(&show_id_raw)?;
    debug_assert!(actor.is_admin());
    let view = state
        .waiting_rooms
        .change_rate(&ctx, &show_id, admit_per_minute)
        .await?;
    json_body(StatusCode::OK, &view)
}

/// Where the buyer stands, live: a `queue` event (the `queue/me` answer)
/// at once and whenever it changes; the stream ends after the buyer's
/// admission ends or the room closes.
#[utoipa::path(get, path = "/v1/shows/{show_id}/queue/me/stream", tag = "queue",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses(
        (status = 200, description = "`text/event-stream` of `queue` events, each the `queue/me` answer (QueueView) as JSON", content_type = "text/event-stream", body = String),
        (status = 503, description = "busy: the instance serves its maximum of streams", body = super::response::Problem, content_type = "application/problem+json"),
        (status = "4XX", description = "unauthorized, show_not_found, waiting_room_not_found, queue_entry_not_found", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn stream(
    State(state): State<AppState>,
    actor: Actor,
    PathParams(show_id_raw): PathParams<String>,
) -> Result<Response, ApiError> {
    let show_id = show_id(&show_id_raw)?;
    let slot = state
        .waiting_rooms
        .stream_slot(MAX_QUEUE_STREAMS)
        .ok_or(ApiError::Busy)?;
    // The first answer is the stream's first event; an error is the answer.
    let first = state.waiting_rooms.me(&actor.id, &show_id).await?;
    let watcher = Watcher {
        waiting_rooms: state.waiting_rooms.clone(),
        buyer: actor.id,
        show_id,
        last: None,
        told_at: std::time::Instant::now(),
        next: Some(first),
        closing: state.live.closing(),
        _slot: slot,
    };
    let events = futures::stream::unfold(watcher, |mut watcher| async move {
        let event = watcher.next().await?;
        Some((Ok::<_, Infallible>(event), watcher))
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

/// One buyer's queue stream.
struct Watcher {
    waiting_rooms: Arc<WaitingRoomService>,
    buyer: BuyerId,
    show_id: ShowId,
    /// What the buyer was last told, and when.
    last: Option<QueueView>,
    told_at: std::time::Instant,
    /// A view read but not sent yet.
    next: Option<QueueView>,
    closing: tokio::sync::watch::Receiver<bool>,
    /// Counts this stream against `MAX_QUEUE_STREAMS` until dropped.
    _slot: crate::command::waiting_room::StreamSlot,
}

/// Whether `view` tells the buyer something new, `elapsed` after `last`
/// was told: another status, number or `ahead`, or an estimate that is no
/// longer the last one counted down (a rate change, a pause), or the last
/// was told `QUEUE_STREAM_REFRESH` ago. An estimate that merely counts
/// down (or stays at zero, admitted) is not sent every second to every
/// buyer.
fn worth_telling(last: Option<&QueueView>, view: &QueueView, elapsed: Duration) -> bool {
    let Some(last) = last else {
        return true;
    };
    let same = last.status == view.status
        && last.position == view.position
        && last.ahead == view.ahead
        && last.admitted_until == view.admitted_until
        && last.reason == view.reason;
    let counted_down = match (last.estimated_wait_seconds, view.estimated_wait_seconds) {
        // Paused (no admission scheduled): the estimate holds still.
        (Some(was), Some(now)) if view.changes_at.is_none() => was == now,
        (Some(was), Some(now)) => {
            // A countdown stops at zero (an admitted buyer's estimate).
            let expected = (was - i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)).max(0);
            (now - expected).abs() <= ESTIMATE_SLACK_SECONDS
        }
        (was, now) => was == now,
    };
    !(same && counted_down) || elapsed >= QUEUE_STREAM_REFRESH
}

impl Watcher {
    /// The next event: the buyer's standing when it changes; `None` when
    /// the stream ends (an admission over, a room closed, the instance
    /// shutting down).
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(view) = self.next.take() {
                if worth_telling(self.last.as_ref(), &view, self.told_at.elapsed()) {
                    let data = serde_json::to_string(&view).ok()?;
                    self.last = Some(view);
                    self.told_at = std::time::Instant::now();
                    return Some(Event::default().event("queue").data(data));
                }
            }
            let last = self.last.as_ref()?;
            if matches!(last.status, QueueStatus::Expired | QueueStatus::Closed) {
                return None;
            }
            let wake = self
                .waiting_rooms
                .next_change(last)
                .map_or(QUEUE_STREAM_TICK, |wait| {
                    wait.clamp(QUEUE_STREAM_MIN_WAIT, QUEUE_STREAM_TICK)
                });
            tokio::select! {
                () = tokio::time::sleep(wake) => {}
                () = crate::live::LiveHub::closed(&mut self.closing) => return None,
            }
            match self.waiting_rooms.me(&self.buyer, &self.show_id).await {
                Ok(view) => self.next = Some(view),
                Err(error) => {
                    // The database is away: try again at the next tick.
                    tracing::debug!(%error, "queue stream: standing not read");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

    fn view(status: QueueStatus, ahead: u64, wait: i64, changes_in: Option<i64>) -> QueueView {
        let start = Utc.with_ymd_and_hms(2026, 12, 2, 4, 0, 0).unwrap();
        QueueView {
            status,
            position: Some(7),
            ahead: Some(ahead),
            estimated_wait_seconds: Some(wait),
            admitted_until: (status == QueueStatus::Admitted)
                .then(|| start + chrono::Duration::minutes(10)),
            sale_starts_at: start,
            reason: None,
            changes_at: changes_in.map(|s| start + chrono::Duration::seconds(s)),
        }
    }

    #[test]
    fn a_standing_that_only_counts_down_is_told_at_the_refresh_only() {
        let secs = Duration::from_secs;
        let waiting = view(QueueStatus::Waiting, 3, 30, Some(30));
        assert!(
            worth_telling(None, &waiting, secs(0)),
            "the first is always told"
        );
        // Five seconds on, 25 s left: the countdown the client keeps.
        let later = view(QueueStatus::Waiting, 3, 25, Some(25));
        assert!(!worth_telling(Some(&waiting), &later, secs(5)));
        assert!(worth_telling(Some(&waiting), &later, QUEUE_STREAM_REFRESH));
        // A rate change moved the estimate, or the queue moved: told.
        let slower = view(QueueStatus::Waiting, 3, 60, Some(60));
        assert!(worth_telling(Some(&waiting), &slower, secs(5)));
        let moved = view(QueueStatus::Waiting, 2, 25, Some(25));
        assert!(worth_telling(Some(&waiting), &moved, secs(5)));

        // Admitted: the estimate stays at zero, which is no news.
        let admitted = view(QueueStatus::Admitted, 0, 0, Some(600));
        assert!(worth_telling(Some(&later), &admitted, secs(1)));
        for after in [1, 3, 5, 9] {
            assert!(
                !worth_telling(Some(&admitted), &admitted, secs(after)),
                "{after} s"
            );
        }

        // Paused: nothing scheduled, the estimate holds still.
        let paused = view(QueueStatus::Waiting, 3, 30, None);
        for after in [1, 3, 5, 9] {
            assert!(
                !worth_telling(Some(&paused), &paused, secs(after)),
                "{after} s"
            );
        }
    }
}
