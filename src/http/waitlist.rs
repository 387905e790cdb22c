//! Waiting lists: `POST /v1/shows/{id}/waitlist` (buyer), `GET
//! /v1/shows/{id}/waitlist` (admin: the waiting list in order), `GET` and `DELETE
//! /v1/waitlist/{entry_id}` (the entry's buyer, or an admin). docs/api.md,
//! "Waiting list".

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use domain::ids::{CategoryId, PoolId, ShowId};
use domain::waitlist::Ask;
use serde::Deserialize;

use super::extract::{Admin, JsonBody, PathParams};
use super::problem::ApiError;
use super::response::json_body;
use super::AppState;
use crate::command::context::RequestContext;
use crate::command::waitlist::WaitlistError;
use crate::query::waitlist::{EntryRef, EntryView, WaitlistView};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/shows/{show_id}/waitlist", get(waitlist).post(join))
        .route("/v1/shows/{show_id}/waitlist/me", get(mine))
        .route("/v1/waitlist/{entry_id}", get(entry).delete(leave))
}

/// The body of `POST /v1/shows/{id}/waitlist`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct WaitlistJoin {
    /// Seats (or places) wanted, 1..=MAX_WAITLIST_QUANTITY.
    #[schema(minimum = 1, maximum = 10)]
    quantity: u32,
    /// Only seats of this category.
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    category: Option<CategoryId>,
    /// Only seats of this section.
    #[schema(min_length = 1, max_length = 200)]
    section: Option<String>,
    /// Places of this pool (not offered yet: 422).
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    pool_id: Option<PoolId>,
    /// Seats in one row with consecutive numbers.
    #[serde(default)]
    adjacent: bool,
}

fn show_id(raw: &str) -> Result<ShowId, ApiError> {
    ShowId::parse(raw).map_err(|_| ApiError::ShowNotFound)
}

fn entry_ref(raw: &str) -> Result<EntryRef, ApiError> {
    EntryRef::parse(raw).ok_or(ApiError::WaitlistEntryNotFound)
}

/// Joins the show's waiting list, once: the same body again answers the
/// same entry.
#[utoipa::path(post, path = "/v1/shows/{show_id}/waitlist", tag = "waitlist",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    request_body = WaitlistJoin,
    responses(
        (status = 201, description = "Joined", body = EntryView),
        (status = 200, description = "The buyer's entry for the same ask", body = EntryView),
        (status = 409, description = "no_waitlist, available_now, waitlist_entry_exists (with entry_id), waitlist_full", body = super::response::Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed (naming the field)", body = super::response::Problem, content_type = "application/problem+json"),
        (status = "4XX", description = "unauthorized, show_not_found, malformed_json, unsupported_media_type", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn join(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(show_id_raw): PathParams<String>,
    JsonBody(body): JsonBody<WaitlistJoin>,
) -> Result<Response, ApiError> {
    let show_id = show_id(&show_id_raw)?;
    let ask = Ask {
        quantity: body.quantity,
        category: body.category,
        section: body.section,
        pool_id: body.pool_id,
        adjacent: body.adjacent,
    };
    let (entry_id, new) = state.waitlists.join(&ctx, &show_id, ask).await?;
    if new {
        metrics::counter!("waitlist_joins_total").increment(1);
    }
    let found = EntryRef { show_id, entry_id };
    let view = (state.waitlist_book.entry(&found).await?).ok_or(ApiError::WaitlistEntryNotFound)?;
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    json_body(status, &view)
}

/// The show's waiting list in order, with counts by status (admin).
#[utoipa::path(get, path = "/v1/shows/{show_id}/waitlist", tag = "waitlist",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses(
        (status = 200, description = "The waiting list", body = WaitlistView),
        (status = "4XX", description = "unauthorized, forbidden, show_not_found, no_waitlist", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn waitlist(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    PathParams(show_id_raw): PathParams<String>,
) -> Result<Response, ApiError> {
    let show_id = show_id(&show_id_raw)?;
    state.waitlists.show(&show_id).await?;
    json_body(StatusCode::OK, &state.waitlist_book.list(&show_id).await?)
}

/// The buyer's own entry on the show (not one they left): what the seat
/// map follows.
#[utoipa::path(get, path = "/v1/shows/{show_id}/waitlist/me", tag = "waitlist",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses(
        (status = 200, description = "The buyer's entry", body = EntryView),
        (status = "4XX", description = "unauthorized, show_not_found, no_waitlist, waitlist_entry_not_found", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn mine(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(show_id_raw): PathParams<String>,
) -> Result<Response, ApiError> {
    let show_id = show_id(&show_id_raw)?;
    state.waitlists.show(&show_id).await?;
    let view = (state
        .waitlist_book
        .entry_of(&show_id, &ctx.actor.id)
        .await?)
        .ok_or(ApiError::WaitlistEntryNotFound)?;
    json_body(StatusCode::OK, &view)
}

/// A waiting list's refusal where an entry is named: a show without a list, or
/// none at all, has no such entry.
fn hidden_waitlist(e: WaitlistError) -> ApiError {
    match e {
        WaitlistError::ShowNotFound | WaitlistError::NoWaitlist => ApiError::WaitlistEntryNotFound,
        other => other.into(),
    }
}

/// The buyer's entry (to its buyer, or an admin).
async fn owned(state: &AppState, ctx: &RequestContext, raw: &str) -> Result<EntryView, ApiError> {
    let found = entry_ref(raw)?;
    state
        .waitlists
        .show(&found.show_id)
        .await
        .map_err(hidden_waitlist)?;
    let view = (state.waitlist_book.entry(&found).await?).ok_or(ApiError::WaitlistEntryNotFound)?;
    if view.buyer != ctx.actor.id.as_str() && !ctx.actor.is_admin() {
        // Another buyer's entry is not theirs to know of.
        return Err(ApiError::WaitlistEntryNotFound);
    }
    Ok(view)
}

/// An entry: waiting (with its place), offered (the hold), booked, lapsed
/// or left.
#[utoipa::path(get, path = "/v1/waitlist/{entry_id}", tag = "waitlist",
    params(("entry_id" = String, Path, description = "`{show_id}.{uuid}`", min_length = 38, max_length = 101)),
    responses(
        (status = 200, description = "The entry", body = EntryView),
        (status = "4XX", description = "unauthorized, waitlist_entry_not_found", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn entry(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(entry_id): PathParams<String>,
) -> Result<Response, ApiError> {
    json_body(StatusCode::OK, &owned(&state, &ctx, &entry_id).await?)
}

/// Leaves the waiting list: the entry is never offered (an offer made
/// already stays the buyer's hold, to buy or release).
#[utoipa::path(delete, path = "/v1/waitlist/{entry_id}", tag = "waitlist",
    params(("entry_id" = String, Path, description = "`{show_id}.{uuid}`", min_length = 38, max_length = 101)),
    responses(
        (status = 204, description = "Left (again: still 204)"),
        (status = "4XX", description = "unauthorized, waitlist_entry_not_found", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn leave(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(entry_id): PathParams<String>,
) -> Result<Response, ApiError> {
    let found = entry_ref(&entry_id)?;
    (state
        .waitlists
        .leave(&ctx, &found.show_id, found.entry_id)
        .await)
        .map_err(hidden_waitlist)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

impl From<WaitlistError> for ApiError {
    fn from(e: WaitlistError) -> Self {
        match e {
            WaitlistError::ShowNotFound => ApiError::ShowNotFound,
            WaitlistError::NoWaitlist => ApiError::NoWaitlist,
            WaitlistError::Invalid(detail) => ApiError::Validation(detail),
            WaitlistError::AvailableNow => ApiError::AvailableNow,
            WaitlistError::EntryExists(show_id, entry_id) => ApiError::WaitlistEntryExists {
                entry_id: EntryRef { show_id, entry_id }.to_string(),
            },
            WaitlistError::Full => ApiError::WaitlistFull,
            WaitlistError::EntryNotFound => ApiError::WaitlistEntryNotFound,
            WaitlistError::Bug(what) => ApiError::Internal(what),
            WaitlistError::Busy => ApiError::Busy,
            WaitlistError::Store(e) => e.into(),
        }
    }
}
