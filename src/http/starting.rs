//! What the service's address answers before the service can start: while
//! no database host accepts writes (a cluster still starting, a failover
//! under way at start), `booking serve` keeps trying and the address
//! already answers, so that an orchestrator sees a live process that is not
//! ready rather than a crash loop: `/healthz` 200, `/readyz` 503
//! `not_ready`, everything else 503 `busy` with `Retry-After`.

use axum::routing::get;
use axum::Router;

use super::problem::ApiError;

pub fn router() -> Router {
    Router::new()
        .route("/healthz", get(super::ops::healthz))
        .route("/readyz", get(not_ready))
        .fallback(busy)
}

async fn not_ready() -> ApiError {
    ApiError::NotReady("starting: no database host accepts writes yet".into())
}

async fn busy() -> ApiError {
    ApiError::Busy
}
