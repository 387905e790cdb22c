//! `GET /healthz` (the process answers) and `GET /readyz` (the database does).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::problem::ApiError;
use super::response::json_response;
use super::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

/// The process answers.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "Alive")))]
pub(super) async fn healthz() -> Response {
    json_response(StatusCode::OK, r#"{"status":"ok"}"#.into())
}

/// The projector may be this many events behind the log and the instance
/// still take traffic (read models are written inline; the projector's lag
/// only delays repairs). A few seconds of a storm.
pub const READY_MAX_PROJECTOR_LAG: i64 = 50_000;

/// Ready: a database host that accepts writes is known (PostgreSQL), it answers, every migration is applied, and the
/// projector is within `READY_MAX_PROJECTOR_LAG` of the log.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "Ready, with projector_lag_events"),
              (status = 503, description = "busy (database) or not_ready", body = super::response::Problem, content_type = "application/problem+json")))]
pub(super) async fn readyz(State(state): State<AppState>) -> Result<Response, ApiError> {
    let Some(host) = state.database.database_host() else {
        return Err(ApiError::NotReady(format!(
            "no database host accepts writes now (DATABASE_URL names {})",
            state.database.database_hosts().join(", ")
        )));
    };
    state.database.ping().await?;
    let pending = state.database.pending_migrations().await?;
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
    let body =
        serde_json::json!({"status": "ready", "projector_lag_events": lag, "database_host": host});
    Ok(json_response(StatusCode::OK, body.to_string()))
}

/// Prometheus text.
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, description = "Prometheus exposition format", content_type = "text/plain")))]
pub(super) async fn metrics() -> Response {
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
