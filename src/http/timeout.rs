//! The request timeout: a request still unanswered after it gets 503 `busy`
//! (problem+json, Retry-After) and its handler future is dropped.
//!
//! Dropping a handler is safe for every route here: a checkout records its
//! intent on the Checkout stream before calling the provider, with an
//! idempotency key derived from the hold, and the recovery worker finishes
//! whatever a dropped (or crashed) purchase left half way.
//!
//! Streaming responses (`text/event-stream`) must never be cut by it: they
//! opt out by route. `router()` applies this layer with `Router::layer` to
//! the routes merged so far, and streaming routes are to be merged *after*
//! it (axum applies a layer only to the routes already in the router), so
//! the timer never wraps them. There are none yet.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::problem::ApiError;

pub async fn request_timeout(
    State(limit): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(?limit, "request timed out; answered 503 busy");
            ApiError::Busy.into_response()
        }
    }
}
