//! What every handler answers with: JSON bodies, the show a path names, and
//! the schema of the problem+json error (documented once, for OpenAPI).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use domain::ids::ShowId;
use utoipa::ToSchema;

use super::problem::ApiError;
use super::AppState;
use crate::catalog::CatalogEntry;

/// A JSON body that is already serialized.
pub fn json_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `value` as a JSON body.
pub fn json_body<T: serde::Serialize>(status: StatusCode, value: &T) -> Result<Response, ApiError> {
    let json = serde_json::to_string(value).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(status, json))
}

/// The show a path segment names, from the catalog; 404 `show_not_found`
/// for an id that is not a show's (or not a legal id).
pub async fn show_entry(
    state: &AppState,
    show_id: &str,
) -> Result<std::sync::Arc<CatalogEntry>, ApiError> {
    let show_id = ShowId::parse(show_id).map_err(|_| ApiError::ShowNotFound)?;
    state
        .catalog
        .get(&show_id)
        .await?
        .ok_or(ApiError::ShowNotFound)
}

/// Every error: `application/problem+json`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Problem {
    #[schema(example = "/problems/seat_taken")]
    r#type: String,
    title: String,
    status: u16,
    detail: String,
    /// One of the `ProblemCode` values.
    #[schema(example = "seat_taken")]
    code: String,
    /// `seat_taken`, `unknown_seat`: the seats concerned.
    seats: Option<Vec<String>>,
    /// `sold_out`: places free at that instant.
    available: Option<u32>,
    /// `buyer_limit_reached`: the show's `max_seats_per_buyer`.
    limit: Option<u32>,
    /// `buyer_limit_reached`: seats and places the buyer has on the show now.
    current: Option<u32>,
    /// `hold_expired`, `hold_released`: whether a charge was refunded.
    refunded: Option<bool>,
}
