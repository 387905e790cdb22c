//! Audit (admin): seat history and show history, from the log.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use domain::ids::SeatId;
use serde::Deserialize;

use super::etag::cached;
use super::extract::{Admin, PathParams, QueryParams};
use super::problem::ApiError;
use super::response::{json_response, show_entry};
use super::AppState;
use crate::query::audit::{self, HistoryPage, DEFAULT_HISTORY_PAGE, MAX_HISTORY_PAGE};

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/shows/{show_id}/seats/{seat_id}/history",
            cached(get(seat_history)),
        )
        .route("/v1/shows/{show_id}/history", cached(get(show_history)))
        .route("/v1/shows/{show_id}/hold-ttl-advice", get(hold_ttl_advice))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HistoryQuery {
    after: Option<i64>,
    limit: Option<i64>,
}

fn page_response(page: &HistoryPage) -> Result<Response, ApiError> {
    let json = serde_json::to_string(page).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(StatusCode::OK, json))
}

/// Every event of one seat, in order (admin).
#[utoipa::path(get, path = "/v1/shows/{show_id}/seats/{seat_id}/history", tag = "audit",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64), ("seat_id" = String, Path, pattern = "^[A-Za-z0-9_.:-]{1,32}$", min_length = 1, max_length = 32)),
    responses((status = 200, body = HistoryPage),
              (status = "4XX", description = "unauthorized, forbidden, show_not_found, unknown_seat", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn seat_history(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    PathParams((show_id, seat_id)): PathParams<(String, String)>,
) -> Result<Response, ApiError> {
    let entry = show_entry(&state, &show_id).await?;
    let seat_id = SeatId::parse(&seat_id)
        .ok()
        .filter(|seat| entry.show.seat(seat).is_some())
        .ok_or_else(|| ApiError::UnknownSeatHere(seat_id.clone()))?;
    let page = audit::seat_history(&state.log, &entry.show.show_id, &seat_id).await?;
    page_response(&page)
}

/// The show's events in its positions' order (its commit order), paged by position (admin).
#[utoipa::path(get, path = "/v1/shows/{show_id}/history", tag = "audit",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64), ("after" = Option<i64>, Query, minimum = 0, description = "a position: 0 or more, default 0"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 1000, description = "1..=MAX_HISTORY_PAGE, default 100")),
    responses((status = 200, body = HistoryPage),
              (status = "4XX", description = "unauthorized, forbidden, show_not_found, validation_failed", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn show_history(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    PathParams(show_id): PathParams<String>,
    QueryParams(query): QueryParams<HistoryQuery>,
) -> Result<Response, ApiError> {
    let entry = show_entry(&state, &show_id).await?;
    let after = query.after.unwrap_or(0);
    let limit = query.limit.unwrap_or(DEFAULT_HISTORY_PAGE);
    if after < 0 {
        return Err(ApiError::Validation(
            "after must be a position, 0 or more".into(),
        ));
    }
    if !(1..=MAX_HISTORY_PAGE).contains(&limit) {
        return Err(ApiError::Validation(format!(
            "limit must be 1..={MAX_HISTORY_PAGE} (MAX_HISTORY_PAGE)"
        )));
    }
    let page = audit::show_history(&state.log, &entry.show.show_id, after, limit).await?;
    page_response(&page)
}

/// Hold-duration advice from the show's log (admin).
#[utoipa::path(get, path = "/v1/shows/{show_id}/hold-ttl-advice", tag = "audit", params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses((status = 200, body = crate::query::advice::TtlAdvice),
              (status = "4XX", description = "unauthorized, forbidden, show_not_found", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn hold_ttl_advice(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    PathParams(show_id): PathParams<String>,
) -> Result<Response, ApiError> {
    let entry = show_entry(&state, &show_id).await?;
    let advice = crate::query::advice::advise(&state.log, &entry, state.clock.now()).await?;
    let json = serde_json::to_string(&advice).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(StatusCode::OK, json))
}
