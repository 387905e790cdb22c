//! `GET /healthz` (the process answers) and `GET /readyz` (the database does).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::problem::ApiError;
use super::shows::json_response;
use super::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

async fn healthz() -> Response {
    json_response(StatusCode::OK, r#"{"status":"ok"}"#.into())
}

/// The projector may be this many events behind the log and the instance
/// still take traffic (read models are written inline; the projector's lag
/// only delays repairs). A few seconds of a storm.
pub const READY_MAX_PROJECTOR_LAG: i64 = 50_000;

/// Ready: the database answers, every migration is applied, and the
/// projector is within `READY_MAX_PROJECTOR_LAG` of the log.
async fn readyz(State(state): State<AppState>) -> Result<Response, ApiError> {
    state.store.ping().await?;
    let pending = state.store.pending_migrations().await?;
    if pending > 0 {
        return Err(ApiError::NotReady(format!(
            "{pending} migrations are not applied"
        )));
    }
    let lag = state.projector.lag().await?;
    if lag > READY_MAX_PROJECTOR_LAG {
        return Err(ApiError::NotReady(format!(
            "the projector is {lag} events behind (READY_MAX_PROJECTOR_LAG is {READY_MAX_PROJECTOR_LAG})"
        )));
    }
    let body = serde_json::json!({"status": "ready", "projector_lag_events": lag});
    Ok(json_response(StatusCode::OK, body.to_string()))
}

async fn metrics() -> Response {
    (
        StatusCode::OK,
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        crate::metrics::render(),
    )
        .into_response()
}
