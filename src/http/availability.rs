//! `GET /v1/shows/{id}/availability` (public): every seat's status computed
//! against `expires_at` at the time of the query.

use std::ops::Range;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use domain::seat::SeatStatus;
use projections::time::to_micros;
use serde::{Deserialize, Serialize};

use super::etag::UntaggedRange;
use super::extract::{PathParams, QueryParams};
use super::problem::ApiError;
use super::response::json_response;
use super::AppState;
use crate::catalog::CatalogEntry;

pub fn router() -> Router<AppState> {
    Router::new().route(
        "/v1/shows/{show_id}/availability",
        super::etag::cached(get(availability)),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AvailabilityQuery {
    section: Option<String>,
    /// An instant in the past (RFC 3339): availability as it was then, from
    /// the log (admin).
    as_of: Option<String>,
}

/// The documented shape of one seat (written by `render`).
#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
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

/// The documented shape of the answer (written by `render`).
#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub(super) struct AvailabilityResponse<'a> {
    show_id: &'a str,
    as_of: DateTime<Utc>,
    seats: Vec<SeatAvailability<'a>>,
    pools: Vec<PoolAvailability<'a>>,
    summary: Summary,
}

/// Availability (public), or as it was at `as_of` (admin).
#[utoipa::path(get, path = "/v1/shows/{show_id}/availability", tag = "shows",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64), ("section" = Option<String>, Query),
        ("as_of" = Option<DateTime<Utc>>, Query, description = "RFC 3339 (date-time), not in the future; admin only")),
    responses((status = 200, body = AvailabilityResponse),
              (status = "4XX", description = "show_not_found, validation_failed, unauthorized, forbidden", body = super::response::Problem, content_type = "application/problem+json")))]
pub(super) async fn availability(
    State(state): State<AppState>,
    PathParams(show_id): PathParams<String>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<AvailabilityQuery>,
) -> Result<Response, ApiError> {
    let as_of = match &query.as_of {
        None => None,
        Some(as_of) => {
            let as_of = DateTime::parse_from_rfc3339(as_of)
                .map(|at| at.with_timezone(&Utc))
                .map_err(|e| {
                    ApiError::Validation(format!("as_of must be an RFC 3339 time: {e}"))
                })?;
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
            Some(as_of)
        }
    };
    let entry = super::response::show_entry(&state, &show_id).await?;
    let now = state.clock.now();
    let (at, statuses, pools) = match as_of {
        Some(as_of) => {
            if as_of > now {
                return Err(ApiError::Validation(
                    "as_of must not be in the future".into(),
                ));
            }
            let past = crate::query::audit::availability_at(&state.store, &entry, as_of).await?;
            (as_of, past.seats, past.pools)
        }
        None => {
            let statuses = state
                .availability
                .statuses(&state.store, &entry, now)
                .await?;
            let figures = if entry.show.pools.is_empty() {
                Vec::new()
            } else {
                state
                    .store
                    .pool_figures(&entry.show.show_id, to_micros(now))
                    .await?
            };
            let count = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
            let pools = entry
                .show
                .pools
                .iter()
                .map(|pool| {
                    let stored = figures.iter().find(|f| f.pool_id == pool.pool_id);
                    (
                        stored.map_or(0, |f| count(f.held)),
                        stored.map_or(0, |f| count(f.sold)),
                    )
                })
                .collect();
            (now, statuses, pools)
        }
    };
    let (body, as_of_range) = render(&entry, query.section.as_deref(), at, &statuses, &pools)?;
    let mut response = json_response(StatusCode::OK, body);
    response.extensions_mut().insert(UntaggedRange(as_of_range));
    Ok(response)
}

/// Writes the answer (the shape of `AvailabilityResponse`) from the show's
/// preserialized seat entries: for 100,000 seats, a concatenation. Also
/// the byte range of the `as_of` value, which the `ETag` leaves out.
fn render(
    entry: &CatalogEntry,
    section: Option<&str>,
    as_of: DateTime<Utc>,
    statuses: &[SeatStatus],
    pools: &[(u32, u32)],
) -> Result<(String, Range<usize>), ApiError> {
    let show = &entry.show;
    let mut out = String::with_capacity(256 + statuses.len() * 56);
    out.push_str("{\"show_id\":");
    out.push_str(&json(show.show_id.as_str())?);
    out.push_str(",\"as_of\":");
    let as_of_start = out.len();
    out.push_str(&json(&as_of)?);
    let as_of_range = as_of_start..out.len();
    out.push_str(",\"seats\":[");
    let mut summary = Summary::default();
    let mut first = true;
    for ((spec, prefix), status) in show.seats.iter().zip(&entry.seat_json_prefix).zip(statuses) {
        if section.is_some_and(|s| s != spec.section) {
            continue;
        }
        match status {
            SeatStatus::Available => summary.available += 1,
            SeatStatus::Held => summary.held += 1,
            SeatStatus::Booked => summary.booked += 1,
        }
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(prefix);
        out.push_str(status.as_str());
        out.push_str("\"}");
    }
    let pools: Vec<PoolAvailability<'_>> = show
        .pools
        .iter()
        .zip(pools)
        .map(|(pool, (held, sold))| PoolAvailability {
            pool_id: pool.pool_id.as_str(),
            capacity: pool.capacity,
            available: pool.capacity.saturating_sub(held + sold),
            held: *held,
            sold: *sold,
        })
        .collect();
    out.push_str("],\"pools\":");
    out.push_str(&json(&pools)?);
    out.push_str(",\"summary\":");
    out.push_str(&json(&summary)?);
    out.push('}');
    Ok((out, as_of_range))
}

fn json<T: Serialize + ?Sized>(value: &T) -> Result<String, ApiError> {
    serde_json::to_string(value).map_err(|e| ApiError::Internal(e.to_string()))
}
