//! `GET /v1/shows/{id}/availability` (public): every seat's status computed
//! against `expires_at` at the time of the query.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use domain::ids::ShowId;
use domain::seat::SeatStatus;
use projections::time::{from_micros, to_micros};
use serde::{Deserialize, Serialize};

use super::extract::QueryParams;
use super::problem::ApiError;
use super::shows::json_response;
use super::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/shows/{show_id}/availability", get(availability))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AvailabilityQuery {
    section: Option<String>,
    /// An instant in the past (RFC 3339): availability as it was then, from
    /// the log (admin).
    as_of: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct SeatAvailability<'a> {
    seat_id: &'a str,
    section: &'a str,
    /// `available`, `held` or `booked`, at the time of the query.
    #[schema(value_type = String)]
    status: SeatStatus,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct PoolAvailability<'a> {
    pool_id: &'a str,
    capacity: u32,
    available: u32,
    held: u32,
    sold: u32,
}

#[derive(Serialize, Default, utoipa::ToSchema)]
pub(super) struct Summary {
    available: u32,
    held: u32,
    booked: u32,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct AvailabilityResponse<'a> {
    show_id: &'a str,
    as_of: DateTime<Utc>,
    seats: Vec<SeatAvailability<'a>>,
    pools: Vec<PoolAvailability<'a>>,
    summary: Summary,
}

/// Availability (public), or as it was at `as_of` (admin).
#[utoipa::path(get, path = "/v1/shows/{show_id}/availability", tag = "shows",
    params(("show_id" = String, Path), ("section" = Option<String>, Query), ("as_of" = Option<String>, Query, description = "RFC 3339, not in the future; admin only")),
    responses((status = 200, body = AvailabilityResponse),
              (status = "4XX", description = "show_not_found, validation_failed, unauthorized, forbidden", body = super::openapi::Problem, content_type = "application/problem+json")))]
pub(super) async fn availability(
    State(state): State<AppState>,
    Path(show_id): Path<String>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<AvailabilityQuery>,
) -> Result<Response, ApiError> {
    if let Some(as_of) = &query.as_of {
        let as_of = DateTime::parse_from_rfc3339(as_of)
            .map(|at| at.with_timezone(&Utc))
            .map_err(|e| ApiError::Validation(format!("as_of must be an RFC 3339 time: {e}")))?;
        let authorization = headers
            .get(header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap_or(""));
        let actor = state
            .keys
            .verify_header(authorization)
            .map_err(|e| ApiError::Unauthorized(e.to_string()))?;
        if !actor.is_admin() {
            return Err(ApiError::Forbidden);
        }
        return availability_as_of(&state, &show_id, query.section.as_deref(), as_of).await;
    }
    let show_id = ShowId::parse(&show_id).map_err(|_| ApiError::ShowNotFound)?;
    let entry = state
        .catalog
        .get(&state.store, &show_id)
        .await?
        .ok_or(ApiError::ShowNotFound)?;
    let rows = state
        .store
        .availability(show_id.as_str(), query.section.as_deref())
        .await?;
    let now = state.clock.now();
    let mut summary = Summary::default();
    let seats = rows
        .iter()
        .map(|row| {
            let status = SeatStatus::at(row.recorded, row.expires_at_us.and_then(from_micros), now);
            match status {
                SeatStatus::Available => summary.available += 1,
                SeatStatus::Held => summary.held += 1,
                SeatStatus::Booked => summary.booked += 1,
            }
            SeatAvailability {
                seat_id: &row.seat_id,
                section: &row.section,
                status,
            }
        })
        .collect();
    let figures = if entry.show.pools.is_empty() {
        Vec::new()
    } else {
        state
            .store
            .pool_figures(show_id.as_str(), to_micros(now))
            .await?
    };
    // In the show's order; counts clamp at zero and at the capacity.
    let pools = entry
        .show
        .pools
        .iter()
        .map(|pool| {
            let stored = figures.iter().find(|f| f.pool_id == pool.pool_id.as_str());
            let count = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
            let sold = stored.map_or(0, |f| count(f.sold));
            let held = stored.map_or(0, |f| count(f.held));
            PoolAvailability {
                pool_id: pool.pool_id.as_str(),
                capacity: pool.capacity,
                available: pool.capacity.saturating_sub(sold + held),
                held,
                sold,
            }
        })
        .collect();
    let body = AvailabilityResponse {
        show_id: show_id.as_str(),
        as_of: now,
        seats,
        pools,
        summary,
    };
    let json = serde_json::to_string(&body).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(StatusCode::OK, json))
}

/// Availability as it was at `as_of`, folded from the log up to that instant.
async fn availability_as_of(
    state: &AppState,
    show_id: &str,
    section: Option<&str>,
    as_of: DateTime<Utc>,
) -> Result<Response, ApiError> {
    let entry = super::audit::show_entry(state, show_id).await?;
    if as_of > state.clock.now() {
        return Err(ApiError::Validation(
            "as_of must not be in the future".into(),
        ));
    }
    let past = crate::audit::availability_at(&state.store, &entry, as_of).await?;
    let mut summary = Summary::default();
    let seats = entry
        .show
        .seats
        .iter()
        .zip(&past.seats)
        .filter(|(spec, _)| section.is_none_or(|s| s == spec.section))
        .map(|(spec, status)| {
            match status {
                SeatStatus::Available => summary.available += 1,
                SeatStatus::Held => summary.held += 1,
                SeatStatus::Booked => summary.booked += 1,
            }
            SeatAvailability {
                seat_id: spec.seat_id.as_str(),
                section: &spec.section,
                status: *status,
            }
        })
        .collect();
    let pools = entry
        .show
        .pools
        .iter()
        .zip(&past.pools)
        .map(|(pool, (held, sold))| PoolAvailability {
            pool_id: pool.pool_id.as_str(),
            capacity: pool.capacity,
            available: pool.capacity.saturating_sub(held + sold),
            held: *held,
            sold: *sold,
        })
        .collect();
    let body = AvailabilityResponse {
        show_id: entry.show.show_id.as_str(),
        as_of,
        seats,
        pools,
        summary,
    };
    let json = serde_json::to_string(&body).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(StatusCode::OK, json))
}
