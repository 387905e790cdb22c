//! `PUT /v1/shows/{id}` (admin), `GET /v1/shows/{id}` (public) and `PUT
//! /v1/shows/{id}/prices` (admin).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::response::json_response;
use axum::routing::{get, put};
use axum::Router;
use chrono::{DateTime, Utc};
use domain::ids::ShowId;
use domain::pricing::PriceEntry;
use serde::{Deserialize, Serialize};

use super::extract::{Admin, JsonBody, PathParams, QueryParams, MAX_SHOW_BODY_BYTES};
use super::problem::ApiError;
use super::AppState;
use crate::catalog::{CatalogEntry, Created, PriceDefinition, ShowDefinition};
use crate::command::context::RequestContext;
use crate::command::prices::PriceService;

pub fn router() -> Router<AppState> {
    // Only the GET is cached; `cached` wraps the methods given to it so far.
    Router::new()
        .route(
            "/v1/shows/{show_id}",
            super::etag::cached(get(get_show)).put(put_show),
        )
        .route("/v1/shows/{show_id}/prices", put(change_prices))
}

/// The show with the prices in force at `at`.
async fn show_response(
    status: StatusCode,
    entry: &CatalogEntry,
    at: DateTime<Utc>,
) -> Result<Response, ApiError> {
    let prices = entry.prices.fresh().await?;
    Ok(json_response(
        status,
        entry.to_json(prices.pricing.schedule.at(at)),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ShowQuery {
    /// An instant (RFC 3339): the prices in force then.
    as_of: Option<String>,
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
    show_response(status, &entry, now).await
}

/// A show (public), with the prices in force now or at `as_of`.
#[utoipa::path(get, path = "/v1/shows/{show_id}", tag = "shows", params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64),
        ("as_of" = Option<DateTime<Utc>>, Query, description = "RFC 3339 (date-time): the prices in force then (past or future)")),
    responses((status = 200, description = "The definition with its show_id", body = crate::catalog::ShowView),
              (status = "4XX", description = "show_not_found, validation_failed", body = super::response::Problem, content_type = "application/problem+json")))]
pub(super) async fn get_show(
    State(state): State<AppState>,
    PathParams(show_id): PathParams<String>,
    QueryParams(query): QueryParams<ShowQuery>,
) -> Result<Response, ApiError> {
    let at = match &query.as_of {
        Some(as_of) => DateTime::parse_from_rfc3339(as_of)
            .map(|at| at.with_timezone(&Utc))
            .map_err(|e| ApiError::Validation(format!("as_of must be an RFC 3339 time: {e}")))?,
        None => state.clock.now(),
    };
    let show_id = ShowId::parse(&show_id).map_err(|_| ApiError::ShowNotFound)?;
    let entry = state
        .catalog
        .get(&show_id)
        .await?
        .ok_or(ApiError::ShowNotFound)?;
    show_response(StatusCode::OK, &entry, at).await
}

/// The body of `PUT /v1/shows/{id}/prices`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PriceChangeBody {
    /// The new table: every category in use priced for the default ticket
    /// type.
    prices: Vec<PriceDefinition>,
    /// From when (RFC 3339, not in the past; absent: now). A change takes
    /// effect at the earliest `PRICE_CHANGE_LEAD_MS` (5 s) after it is
    /// recorded.
    effective_at: Option<DateTime<Utc>>,
}

/// A price change as recorded.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct PriceChangeView {
    show_id: String,
    effective_at: DateTime<Utc>,
    prices: Vec<PriceDefinition>,
}

/// Changes a show's prices from an instant on (admin): holds placed before
/// it keep their price.
#[utoipa::path(put, path = "/v1/shows/{show_id}/prices", tag = "shows", params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    request_body = PriceChangeBody,
    responses((status = 200, description = "The change as recorded: from when, which table", body = PriceChangeView),
              (status = "4XX", description = "unauthorized, forbidden, show_not_found, validation_failed, malformed_json", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn change_prices(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    ctx: RequestContext,
    PathParams(show_id): PathParams<String>,
    JsonBody(body): JsonBody<PriceChangeBody>,
) -> Result<Response, ApiError> {
    let show_id = ShowId::parse(&show_id).map_err(|_| ApiError::ShowNotFound)?;
    let prices: Vec<PriceEntry> = body
        .prices
        .into_iter()
        .map(|p| PriceEntry {
            category: p.category,
            ticket_type: p.ticket_type,
            price_cents: p.price_cents,
        })
        .collect();
    let service: &PriceService = &state.prices;
    let change = service
        .change(&ctx, &show_id, prices, body.effective_at)
        .await?;
    let view = PriceChangeView {
        show_id: show_id.to_string(),
        effective_at: change.effective_at,
        prices: change
            .prices
            .into_iter()
            .map(|p| PriceDefinition {
                category: p.category,
                ticket_type: p.ticket_type,
                price_cents: p.price_cents,
            })
            .collect(),
    };
    let json = serde_json::to_string(&view).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(StatusCode::OK, json))
}
