//! `PUT /v1/shows/{id}` (admin) and `GET /v1/shows/{id}` (public).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::response::json_response;
use axum::routing::get;
use axum::Router;
use domain::ids::ShowId;

use super::extract::{Admin, JsonBody, PathParams, MAX_SHOW_BODY_BYTES};
use super::problem::ApiError;
use super::AppState;
use crate::catalog::{CatalogEntry, Created, ShowDefinition};

pub fn router() -> Router<AppState> {
    // Only the GET is cached; `cached` wraps the methods given to it so far.
    Router::new().route(
        "/v1/shows/{show_id}",
        super::etag::cached(get(get_show)).put(put_show),
    )
}

fn show_response(status: StatusCode, entry: &CatalogEntry) -> Response {
    json_response(status, entry.to_json())
}

/// Creates a show (admin); the same definition again is 200.
#[utoipa::path(put, path = "/v1/shows/{show_id}", tag = "shows", params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    request_body = ShowDefinition,
    responses((status = 201, description = "Created: the definition with its show_id", body = crate::catalog::ShowView), (status = 200, description = "The same show again", body = crate::catalog::ShowView),
              (status = 409, description = "show_exists", body = super::response::Problem, content_type = "application/problem+json"),
              (status = "4XX", description = "unauthorized, forbidden, validation_failed, malformed_json, payload_too_large, unsupported_media_type", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn put_show(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    PathParams(show_id): PathParams<String>,
    JsonBody(definition): JsonBody<ShowDefinition, MAX_SHOW_BODY_BYTES>,
) -> Result<Response, ApiError> {
    let show_id = ShowId::parse(&show_id).map_err(|e| ApiError::Validation(e.to_string()))?;
    let now = state.clock.now();
    let (created, entry) = state.catalog.create(show_id, &definition, now).await?;
    let status = match created {
        Created::New => StatusCode::CREATED,
        Created::Same => StatusCode::OK,
    };
    Ok(show_response(status, &entry))
}

/// A show (public).
#[utoipa::path(get, path = "/v1/shows/{show_id}", tag = "shows", params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses((status = 200, description = "The definition with its show_id", body = crate::catalog::ShowView),
              (status = 404, description = "show_not_found", body = super::response::Problem, content_type = "application/problem+json")))]
pub(super) async fn get_show(
    State(state): State<AppState>,
    PathParams(show_id): PathParams<String>,
) -> Result<Response, ApiError> {
    let show_id = ShowId::parse(&show_id).map_err(|_| ApiError::ShowNotFound)?;
    let entry = state
        .catalog
        .get(&show_id)
        .await?
        .ok_or(ApiError::ShowNotFound)?;
    Ok(show_response(StatusCode::OK, &entry))
}
