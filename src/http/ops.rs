//! `GET /healthz` (the process answers) and `GET /readyz` (the database does).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;

use super::problem::ApiError;
use super::shows::json_response;
use super::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn healthz() -> Response {
    json_response(StatusCode::OK, r#"{"status":"ok"}"#.into())
}

async fn readyz(State(state): State<AppState>) -> Result<Response, ApiError> {
    state.store.ping().await?;
    Ok(json_response(
        StatusCode::OK,
        r#"{"status":"ready"}"#.into(),
    ))
}
