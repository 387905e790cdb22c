//! `PUT /v1/venues/{id}` (admin) and `GET /v1/venues/{id}` (public).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use domain::ids::VenueId;

use super::extract::{Admin, JsonBody, PathParams, MAX_SHOW_BODY_BYTES};
use super::problem::ApiError;
use super::response::json_response;
use super::AppState;
use crate::catalog::{Created, VenueCatalog, VenueDefinition};

pub fn router() -> Router<AppState> {
    Router::new().route(
        "/v1/venues/{venue_id}",
        super::etag::cached(get(get_venue)).put(put_venue),
    )
}

/// Creates a venue's seating chart (admin); the same definition again is
/// 200, another one 409 `venue_exists`.
#[utoipa::path(put, path = "/v1/venues/{venue_id}", tag = "venues", params(("venue_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    request_body = VenueDefinition,
    responses((status = 201, description = "Created: the definition with its venue_id", body = crate::catalog::VenueView), (status = 200, description = "The same venue again", body = crate::catalog::VenueView),
              (status = 409, description = "venue_exists", body = super::response::Problem, content_type = "application/problem+json"),
              (status = "4XX", description = "unauthorized, forbidden, validation_failed, malformed_json, payload_too_large, unsupported_media_type", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn put_venue(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    PathParams(venue_id): PathParams<String>,
    JsonBody(definition): JsonBody<VenueDefinition, MAX_SHOW_BODY_BYTES>,
) -> Result<Response, ApiError> {
    let venue_id = VenueId::parse(&venue_id).map_err(|e| ApiError::Validation(e.to_string()))?;
    let venues: &VenueCatalog = state.catalog.venues();
    let (created, entry) = venues
        .create(venue_id, &definition, state.clock.now())
        .await?;
    let status = match created {
        Created::New => StatusCode::CREATED,
        Created::Same => StatusCode::OK,
    };
    Ok(json_response(status, entry.to_json()))
}

/// A venue's seating chart (public).
#[utoipa::path(get, path = "/v1/venues/{venue_id}", tag = "venues", params(("venue_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses((status = 200, description = "The definition with its venue_id", body = crate::catalog::VenueView),
              (status = 404, description = "venue_not_found", body = super::response::Problem, content_type = "application/problem+json")))]
pub(super) async fn get_venue(
    State(state): State<AppState>,
    PathParams(venue_id): PathParams<String>,
) -> Result<Response, ApiError> {
    let venue_id = VenueId::parse(&venue_id).map_err(|_| ApiError::VenueNotFound)?;
    let entry = state
        .catalog
        .venues()
        .get(&venue_id)
        .await?
        .ok_or(ApiError::VenueNotFound)?;
    Ok(json_response(StatusCode::OK, entry.to_json()))
}
