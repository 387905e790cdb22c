//! The request timeout: a request still unanswered after it gets 503 `busy`
//! (problem+json, Retry-After) and its handler future is dropped, unless
//! its command has begun the write that is its outcome.
//!
//! A write that has begun may land whatever happens to the future that
//! started it, so cutting the request then would tell a buyer "busy" while
//! a hold exists in their name (and, without an idempotency key, nobody
//! could find it again). So the timer sets up an [`OutcomeMark`] per
//! request; the command marks it just before such an append
//! (`command::round`), and a request whose mark is set when the timer
//! fires runs on to its outcome and answers it, late
//! (`http_requests_finished_late_total`). What it waits for then is bounded
//! by the store's own timers (a connection or the writer within
//! `store::ACQUIRE_TIMEOUT`, a round's retries).
//!
//! Dropping a handler before that is safe for every route here: nothing of
//! the command was written, or it was a checkout's step, recorded on the
//! Checkout stream before any provider call with an idempotency key derived
//! from the hold, which the recovery worker finishes and the purchase asked
//! again answers.
//!
//! Streaming responses (`text/event-stream`) must never be cut by it: they
//! opt out by route. `router()` applies this layer with `Router::layer` to
//! the routes merged so far, and streaming routes are to be merged *after*
//! it (axum applies a layer only to the routes already in the router), so
//! the timer never wraps them.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::problem::ApiError;
use crate::command::context::OutcomeMark;

pub async fn request_timeout(
    State(limit): State<Duration>,
    mut request: Request,
    next: Next,
) -> Response {
    let outcome = OutcomeMark::default();
    request.extensions_mut().insert(outcome.clone());
    let handler = next.run(request);
    tokio::pin!(handler);
    match tokio::time::timeout(limit, &mut handler).await {
        Ok(response) => response,
        // The handler is not running while this looks (it is polled only
        // here): a mark not set now means no outcome write has begun.
        Err(_) if outcome.begun() => {
            tracing::warn!(
                ?limit,
                "request timed out during its command's write; answering its outcome"
            );
            crate::metrics::finished_late();
            handler.await
        }
        Err(_) => {
            tracing::warn!(?limit, "request timed out; answered 503 busy");
            ApiError::Busy.into_response()
        }
    }
}
