//! Sales reports (admin): `GET /v1/shows/{id}/report` and the export of a
//! show's bookings, `GET /v1/shows/{id}/bookings` (routed with the box
//! office's `POST` of the same path), each as JSON or, asked with `Accept:
//! text/csv`, as CSV with a header line.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::extract::{Admin, PathParams, QueryParams};
use super::problem::ApiError;
use super::response::json_response;
use super::AppState;
use crate::query::report::{self, BookingLine, Report, ShowFold, BOOKING_COLUMNS, REPORT_COLUMNS};

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/shows/{show_id}/report", get(show_report))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AsOfQuery {
    /// An instant in the past (RFC 3339).
    as_of: Option<String>,
}

impl AsOfQuery {
    /// The instant asked for, not in the future; `None`: now.
    fn instant(&self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, ApiError> {
        let Some(as_of) = &self.as_of else {
            return Ok(None);
        };
        let at = DateTime::parse_from_rfc3339(as_of)
            .map(|at| at.with_timezone(&Utc))
            .map_err(|e| ApiError::Validation(format!("as_of must be an RFC 3339 time: {e}")))?;
        if at > now {
            return Err(ApiError::Validation(
                "as_of must not be in the future".into(),
            ));
        }
        Ok(Some(at))
    }
}

/// Whether the client asked for CSV.
fn wants_csv(headers: &HeaderMap) -> bool {
    (headers.get_all(header::ACCEPT).iter())
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|t| t.trim().starts_with("text/csv")))
}

fn csv_response<T: Serialize>(rows: &[T], columns: &[&str]) -> Result<Response, ApiError> {
    let body = report::to_csv(rows, columns).map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    Ok(response)
}

fn json<T: Serialize>(view: &T) -> Result<Response, ApiError> {
    let json = serde_json::to_string(view).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(StatusCode::OK, json))
}

/// Counts and revenue by section, category, ticket type, channel and
/// status, now (from the read models) or as of a past instant (from the
/// log).
#[utoipa::path(get, path = "/v1/shows/{show_id}/report", tag = "channels",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64),
        ("as_of" = Option<DateTime<Utc>>, Query, description = "RFC 3339 (date-time), not in the future")),
    responses((status = 200, description = "The report; with `Accept: text/csv`, its rows as CSV with a header line", body = Report),
        (status = "4XX", description = "unauthorized, forbidden, show_not_found, validation_failed", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn show_report(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    PathParams(show_id): PathParams<String>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<AsOfQuery>,
) -> Result<Response, ApiError> {
    let entry = super::response::show_entry(&state, &show_id).await?;
    let now = state.clock.now();
    let as_of = query.instant(now)?;
    let report: Report = match as_of {
        None => report::current(&state.availability, &state.shows, &entry, now).await?,
        Some(at) => ShowFold::at(&state.log, &entry, at)
            .await?
            .report(&entry, at),
    };
    if wants_csv(&headers) {
        return csv_response(&report.rows, &REPORT_COLUMNS);
    }
    json(&report)
}

/// The export of a show's bookings.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct BookingsExport {
    show_id: String,
    as_of: DateTime<Utc>,
    bookings: Vec<BookingLine>,
}

/// One line per booked seat and per booked pool place, with its buyer,
/// channel, ticket type, price and booking (an order's booking id is its
/// order id), folded from the log now or as of a past instant.
#[utoipa::path(get, path = "/v1/shows/{show_id}/bookings", tag = "channels",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64),
        ("as_of" = Option<DateTime<Utc>>, Query, description = "RFC 3339 (date-time), not in the future")),
    responses((status = 200, description = "The bookings; with `Accept: text/csv`, as CSV with a header line", body = BookingsExport),
        (status = "4XX", description = "unauthorized, forbidden, show_not_found, validation_failed", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn bookings_export(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    PathParams(show_id): PathParams<String>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<AsOfQuery>,
) -> Result<Response, ApiError> {
    let entry = super::response::show_entry(&state, &show_id).await?;
    let now = state.clock.now();
    let at = query.instant(now)?.unwrap_or(now);
    let bookings = ShowFold::at(&state.log, &entry, at).await?.bookings(&entry);
    if wants_csv(&headers) {
        return csv_response(&bookings, &BOOKING_COLUMNS);
    }
    json(&BookingsExport {
        show_id: entry.show.show_id.to_string(),
        as_of: at,
        bookings,
    })
}
