//! `GET /v1/shows/{id}/availability` (public): every seat's status computed
//! against `expires_at` at the time of the query.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use domain::ids::ChannelId;
use domain::seat::SeatStatus;
use serde::{Deserialize, Serialize};

use super::extract::{PathParams, QueryParams};
use super::problem::ApiError;
use super::AppState;
use crate::catalog::CatalogEntry;
use crate::query::availability::{render_document, PoolAvailability, RenderError, Summary, Viewer};
use crate::query::rendered::Rendered;

pub fn router() -> Router<AppState> {
    // Not behind `etag::cached`: the handler serves its kept answer, tag
    // and compressed bytes itself (`etag::answer`).
    Router::new().route("/v1/shows/{show_id}/availability", get(availability))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AvailabilityQuery {
    section: Option<String>,
    /// An instant in the past (RFC 3339): availability as it was then, from
    /// the log (admin).
    as_of: Option<String>,
    /// A sales channel's view (its buyers' token, or an admin's): the
    /// channel's free seats `available`, every other free seat
    /// `not_for_sale`.
    channel: Option<String>,
}

/// The documented shape of one seat (written by `render`).
#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub(super) struct SeatAvailability<'a> {
    seat_id: &'a str,
    section: &'a str,
    /// `available`, `held`, `booked` or `not_for_sale` (allocated to a
    /// sales channel), at the time of the query.
    #[schema(value_type = String)]
    status: SeatStatus,
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
        ("as_of" = Option<DateTime<Utc>>, Query, description = "RFC 3339 (date-time), not in the future; admin only"),
        ("channel" = Option<String>, Query, pattern = "^[A-Za-z0-9_-]{1,64}$", description = "a sales channel's view; a token whose `channels` claim names it, or an admin's")),
    responses((status = 200, body = AvailabilityResponse),
              (status = "4XX", description = "show_not_found, validation_failed, unknown_channel, unauthorized, forbidden", body = super::response::Problem, content_type = "application/problem+json")))]
pub(super) async fn availability(
    State(state): State<AppState>,
    PathParams(show_id): PathParams<String>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<AvailabilityQuery>,
) -> Result<Response, ApiError> {
    let as_of = match &query.as_of {
        None => None,
        Some(as_of) => Some(admin_as_of(&state, &headers, as_of)?),
    };
    let entry = super::response::show_entry(&state, &show_id).await?;
    let section = query.section.as_deref();
    let viewer = match &query.channel {
        None => Viewer::Public,
        Some(channel) => channel_viewer(&state, &headers, &entry, channel)?,
    };
    let rendered = match (as_of, &viewer) {
        (None, viewer) => current(&state, &entry, section, viewer).await?,
        (Some(as_of), Viewer::Public) => past(&state, &entry, section, as_of).await?,
        (Some(_), Viewer::Channel(_)) => {
            return Err(ApiError::Validation(
                "as_of: a past instant is the public's view only; not with channel".into(),
            ))
        }
    };
    Ok(super::etag::answer(&headers, &rendered).await)
}

/// Who the token says the caller is (this public route takes tokens only
/// for the reads that need one).
fn actor_of(state: &AppState, headers: &HeaderMap) -> Result<crate::auth::Actor, ApiError> {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or(""));
    state
        .keys
        .verify_header(authorization)
        .map_err(|e| ApiError::Unauthorized(e.to_string()))
}

/// A channel's view, for a caller whose token may sell through it (its
/// `channels` claim names it, or an admin) on a show that lists it.
fn channel_viewer(
    state: &AppState,
    headers: &HeaderMap,
    entry: &CatalogEntry,
    channel: &str,
) -> Result<Viewer, ApiError> {
    let actor = actor_of(state, headers)?;
    let channel =
        ChannelId::parse(channel).map_err(|e| ApiError::Validation(format!("channel: {e}")))?;
    if !actor.may_sell_through(&entry.show.show_id, &channel) {
        return Err(ApiError::Forbidden);
    }
    if entry.show.channel(&channel).is_none() {
        return Err(ApiError::UnknownChannel(channel.to_string()));
    }
    Ok(Viewer::Channel(channel))
}

/// The instant `as_of` asks for, once parsed and the caller shown to be an
/// admin (the past is an audit read).
fn admin_as_of(
    state: &AppState,
    headers: &HeaderMap,
    as_of: &str,
) -> Result<DateTime<Utc>, ApiError> {
    let as_of = DateTime::parse_from_rfc3339(as_of)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|e| ApiError::Validation(format!("as_of must be an RFC 3339 time: {e}")))?;
    let actor = actor_of(state, headers)?;
    if !actor.is_admin() {
        return Err(ApiError::Forbidden);
    }
    Ok(as_of)
}

/// The current answer: kept, and served again while still true.
async fn current(
    state: &AppState,
    entry: &Arc<CatalogEntry>,
    section: Option<&str>,
    viewer: &Viewer,
) -> Result<Arc<Rendered>, ApiError> {
    state
        .availability
        .rendered(&state.shows, entry, section, viewer, state.clock.as_ref())
        .await
        .map_err(|e| match e {
            RenderError::Store(e) => ApiError::from(e),
            RenderError::Render(e) => ApiError::Internal(e),
        })
}

/// The past, from the log: rendered (and compressed) per request;
/// an admin's audit read, rare, and not worth keeping.
async fn past(
    state: &AppState,
    entry: &Arc<CatalogEntry>,
    section: Option<&str>,
    as_of: DateTime<Utc>,
) -> Result<Arc<Rendered>, ApiError> {
    if as_of > state.clock.now() {
        return Err(ApiError::Validation(
            "as_of must not be in the future".into(),
        ));
    }
    let past = crate::query::audit::availability_at(&state.log, entry, as_of).await?;
    let body = render_document(entry, section, as_of, &past.seats, &past.pools, None)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(Arc::new(Rendered::new(body)))
}
