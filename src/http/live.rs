//! `GET /v1/shows/{show_id}/availability/stream` (public): live
//! availability as server-sent events (docs/api.md, "Live availability").
//!
//! Merged past the request timeout (a stream never finishes) and never
//! compressed (a compressor would hold events back in its buffer).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Extension;
use axum::Router;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, watch};

use super::extract::PathParams;
use super::problem::ApiError;
use super::AppState;
use crate::edge::ClientSocket;
use crate::live::channel::{Frame, Snapshot, Start};
use crate::live::{LiveHub, SubscriberGuard};

/// A comment line this often keeps proxies and clients from closing a quiet
/// stream (docs/api.md promises one at least every 15 s).
pub const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The kernel send buffer of a stream's connection. Left alone it grows to
/// 4 MB for a client that stopped reading (with the write buffer of the
/// HTTP layer, about 400 kB, on top), all of it changes that reader would
/// then get late; bounded, the reader falls behind the broadcast sooner and
/// is sent one snapshot instead. 128 kB (256 kB as Linux counts it) still
/// carries a 20,000-seat snapshot (about 1 MB) in a few round trips.
pub const STREAM_SEND_BUFFER: usize = 128 * 1024;

/// How long a new subscriber waits for a show's first state (read from the
/// database) before the answer is 503 `busy`.
pub const FIRST_STATE_TIMEOUT: Duration = Duration::from_secs(5);

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/shows/{show_id}/availability/stream", get(stream))
}

/// Live availability: a `snapshot`, then `change` events.
#[utoipa::path(get, path = "/v1/shows/{show_id}/availability/stream", tag = "shows",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64),
        ("Last-Event-ID" = Option<i64>, Header, minimum = 0, description = "the last position seen (an event's `id:`): the changes since, or a new snapshot")),
    responses((status = 200, description = "`text/event-stream`: `snapshot` (the availability answer with `position`), then `change` events; `id:` is the position", content_type = "text/event-stream", body = String),
              (status = 422, description = "validation_failed: a Last-Event-ID that is no position", body = super::response::Problem, content_type = "application/problem+json"),
              (status = 404, description = "show_not_found", body = super::response::Problem, content_type = "application/problem+json"),
              (status = 503, description = "busy: the instance serves its maximum of streams", body = super::response::Problem, content_type = "application/problem+json")))]
pub(super) async fn stream(
    State(state): State<AppState>,
    PathParams(show_id): PathParams<String>,
    headers: HeaderMap,
    socket: Option<Extension<ClientSocket>>,
) -> Result<Response, ApiError> {
    let entry = super::response::show_entry(&state, &show_id).await?;
    if let Some(Extension(socket)) = socket {
        if let Err(error) = socket.bound_send_buffer(STREAM_SEND_BUFFER) {
            tracing::debug!(%error, "live: the stream's send buffer could not be bounded");
        }
    }
    let last_event_id = last_event_id(&headers)?;
    let guard = state.live.subscribe(entry).map_err(|error| {
        tracing::warn!(%error, "live: subscriber refused");
        ApiError::Busy
    })?;
    tokio::time::timeout(FIRST_STATE_TIMEOUT, guard.channel.ready())
        .await
        .map_err(|_| ApiError::Busy)?;
    let subscription = guard
        .channel
        .subscribe(last_event_id)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let pending = match subscription.start {
        Start::Snapshot(snapshot) => VecDeque::from([snapshot_event(&snapshot)]),
        Start::Resume(frames) => frames.iter().map(|f| change_event(f)).collect(),
    };
    let subscriber = Subscriber {
        closing: state.live.closing(),
        guard,
        frames: subscription.frames,
        last_seq: subscription.seq,
        pending,
    };
    let events = futures::stream::unfold(subscriber, |mut subscriber| async move {
        let event = subscriber.next().await?;
        Some((Ok::<_, Infallible>(event), subscriber))
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

/// `Last-Event-ID`: absent, or a position (0..=i64::MAX, as the stream's
/// `id:` lines carry them); anything else is refused, not taken for "no
/// position" (a client sending it resumes nothing it was sent).
fn last_event_id(headers: &HeaderMap) -> Result<Option<i64>, ApiError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<i64>().ok())
        .map(Some)
        .ok_or_else(|| {
            ApiError::Validation(
                "Last-Event-ID must be a position the stream sent (an integer 0..=9223372036854775807)"
                    .into(),
            )
        })
}

fn snapshot_event(snapshot: &Snapshot) -> Event {
    Event::default()
        .event("snapshot")
        .id(snapshot.position.to_string())
        .data(&*snapshot.data)
}

fn change_event(frame: &Frame) -> Event {
    Event::default()
        .event("change")
        .id(frame.position.to_string())
        .data(&*frame.data)
}

struct Subscriber {
    /// Counts this stream against the cap until it is dropped.
    guard: SubscriberGuard,
    frames: broadcast::Receiver<Arc<Frame>>,
    /// The last frame this subscriber has (in a change or a snapshot).
    last_seq: u64,
    pending: VecDeque<Event>,
    closing: watch::Receiver<bool>,
}

impl Subscriber {
    /// The next event, or `None` when the stream ends (the instance shuts down).
    async fn next(&mut self) -> Option<Event> {
        if let Some(event) = self.pending.pop_front() {
            return Some(event);
        }
        loop {
            tokio::select! {
                received = self.frames.recv() => match received {
                    Ok(frame) => {
                        if frame.seq <= self.last_seq {
                            continue;
                        }
                        self.last_seq = frame.seq;
                        return Some(change_event(&frame));
                    }
                    Err(RecvError::Lagged(missed)) => {
                        // Too slow for the broadcast: the frames it missed
                        // are gone, so it gets the whole state again (frames
                        // still queued for it that the snapshot includes are
                        // skipped by their seq).
                        self.guard.hub.note_lagged();
                        tracing::debug!(missed, "live: a subscriber lagged; sending a snapshot");
                        match self.guard.channel.snapshot() {
                            Ok(Some(snapshot)) => {
                                self.last_seq = snapshot.seq;
                                return Some(snapshot_event(&snapshot));
                            }
                            Ok(None) => return None,
                            Err(error) => {
                                tracing::error!(%error, "live: a snapshot could not be written");
                                return None;
                            }
                        }
                    }
                    Err(RecvError::Closed) => return None,
                },
                () = LiveHub::closed(&mut self.closing) => return None,
            }
        }
    }
}
