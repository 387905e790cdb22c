//! `GET /v1/shows/{id}/availability` (public): every seat's status computed
//! against `expires_at` at the time of the query.

use axum::extract::{Path, State};
use axum::http::StatusCode;
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
struct AvailabilityQuery {
    section: Option<String>,
}

#[derive(Serialize)]
struct SeatAvailability<'a> {
    seat_id: &'a str,
    section: &'a str,
    status: SeatStatus,
}

#[derive(Serialize)]
struct PoolAvailability<'a> {
    pool_id: &'a str,
    capacity: u32,
    available: u32,
    held: u32,
    sold: u32,
}

#[derive(Serialize, Default)]
struct Summary {
    available: u32,
    held: u32,
    booked: u32,
}

#[derive(Serialize)]
struct AvailabilityResponse<'a> {
    show_id: &'a str,
    as_of: DateTime<Utc>,
    seats: Vec<SeatAvailability<'a>>,
    pools: Vec<PoolAvailability<'a>>,
    summary: Summary,
}

async fn availability(
    State(state): State<AppState>,
    Path(show_id): Path<String>,
    QueryParams(query): QueryParams<AvailabilityQuery>,
) -> Result<Response, ApiError> {
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
