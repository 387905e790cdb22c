//! Sales channels' allocations (admin): `POST /v1/shows/{id}/allocations`,
//! `POST /v1/shows/{id}/allocations/release`, `GET
//! /v1/shows/{id}/allocations`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use domain::ids::{ChannelId, PoolId, SeatId};
use serde::{Deserialize, Serialize};

use super::extract::{Admin, JsonBody, PathParams};
use super::problem::ApiError;
use super::response::json_response;
use super::AppState;
use crate::command::allocations::{ChannelAllocation, Inventory};
use crate::command::context::RequestContext;

/// An allocation's body: up to MAX_SEATS_PER_ALLOCATION seat ids of about
/// 20 bytes each in JSON, well inside this.
pub const MAX_ALLOCATION_BODY_BYTES: usize = 1024 * 1024;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/shows/{show_id}/allocations",
            post(allocate).get(allocations),
        )
        .route("/v1/shows/{show_id}/allocations/release", post(release))
}

/// What moves, as it is read: every field of the shapes, so that a body
/// with two of them, or none, is refused naming the rule (the schema is
/// [`AllocationBody`] and [`ReleaseBody`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AllocationFields {
    channel_id: ChannelId,
    seats: Option<Vec<SeatId>>,
    pool_id: Option<PoolId>,
    quantity: Option<u32>,
    unsold: Option<bool>,
}

/// The body of an allocation: seats, or places of a pool.
#[derive(Debug, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(super) enum AllocationBody {
    Seats(SeatsMove),
    Pool(PlacesMove),
}

/// The body of a release: seats, places of a pool, or everything of the
/// channel not held or sold through it.
#[derive(Debug, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(super) enum ReleaseBody {
    Seats(SeatsMove),
    Pool(PlacesMove),
    Unsold(UnsoldMove),
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub(super) struct SeatsMove {
    /// A sales channel the show lists.
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    channel_id: String,
    /// 1..=MAX_SEATS_PER_ALLOCATION seats of the show, each once.
    #[schema(schema_with = seat_list_schema)]
    seats: Vec<String>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub(super) struct PlacesMove {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    channel_id: String,
    /// A pool of the show.
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    pool_id: String,
    /// 1..=the pool's capacity places.
    #[schema(minimum = 1)]
    quantity: u32,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub(super) struct UnsoldMove {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    channel_id: String,
    /// `true`: everything of the channel not held or sold through it.
    #[schema(schema_with = true_only)]
    unsold: bool,
}

/// Seat ids, 1..=MAX_SEATS_PER_ALLOCATION, each once.
fn seat_list_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let id = ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some("^[A-Za-z0-9_.:-]{1,32}$"))
        .min_length(Some(1))
        .max_length(Some(32));
    ArrayBuilder::new()
        .items(id)
        .min_items(Some(1))
        .max_items(Some(domain::limits::MAX_SEATS_PER_ALLOCATION))
        .unique_items(true)
        .build()
}

/// The boolean `true` alone.
fn true_only() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::Boolean)
        .enum_values(Some([true]))
        .build()
}

impl AllocationFields {
    fn inventory(self) -> Result<(ChannelId, Inventory), ApiError> {
        let what = match (self.seats, self.pool_id, self.quantity, self.unsold) {
            (Some(seats), None, None, None) => Inventory::Seats(seats),
            (None, Some(pool_id), Some(quantity), None) => Inventory::Pool { pool_id, quantity },
            (None, None, None, Some(true)) => Inventory::Unsold,
            (None, None, None, Some(false)) => {
                return Err(ApiError::Validation(
                    "unsold: true, or leave it out and name seats or a pool".into(),
                ))
            }
            _ => {
                return Err(ApiError::Validation(
                    "send exactly one of \"seats\", \"pool_id\" with \"quantity\", or (a release) \
                     \"unsold\": true"
                        .into(),
                ))
            }
        };
        Ok((self.channel_id, what))
    }
}

/// Every channel's allocation.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct AllocationsView {
    show_id: String,
    channels: Vec<ChannelAllocation>,
}

/// The show a request names (looked up first: an unknown show is 404
/// whatever the body), and the channel and inventory its body names.
async fn named(
    state: &AppState,
    show_id: &str,
    body: AllocationFields,
) -> Result<
    (
        std::sync::Arc<crate::catalog::CatalogEntry>,
        ChannelId,
        Inventory,
    ),
    ApiError,
> {
    let entry = super::response::show_entry(state, show_id).await?;
    let (channel, what) = body.inventory()?;
    Ok((entry, channel, what))
}

fn respond<T: Serialize>(status: StatusCode, view: &T) -> Result<Response, ApiError> {
    let json = serde_json::to_string(view).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(status, json))
}

/// Moves free seats, or places of a pool, from public sale to a channel,
/// all or nothing.
#[utoipa::path(post, path = "/v1/shows/{show_id}/allocations", tag = "channels",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    request_body = AllocationBody,
    responses((status = 201, description = "The channel's allocation after it", body = ChannelAllocation),
        (status = 409, description = "seat_taken (with `seats`: held, booked or another channel's), sold_out (with `available`)", body = super::response::Problem, content_type = "application/problem+json"),
        (status = 422, description = "unknown_channel, unknown_seat, unknown_pool, validation_failed", body = super::response::Problem, content_type = "application/problem+json"),
        (status = "4XX", description = "unauthorized, forbidden, show_not_found", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn allocate(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    ctx: RequestContext,
    PathParams(show_id): PathParams<String>,
    JsonBody(body): JsonBody<AllocationFields, MAX_ALLOCATION_BODY_BYTES>,
) -> Result<Response, ApiError> {
    let (entry, channel, what) = named(&state, &show_id, body).await?;
    let allocations = &state.allocations;
    let allocation = allocations.allocate(&ctx, &entry, &channel, &what).await?;
    respond(StatusCode::CREATED, &allocation)
}

/// Gives seats or places back from a channel to public sale (all or
/// nothing), or everything of it unsold.
#[utoipa::path(post, path = "/v1/shows/{show_id}/allocations/release", tag = "channels",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    request_body = ReleaseBody,
    responses((status = 200, description = "The channel's allocation after it", body = ChannelAllocation),
        (status = 409, description = "seat_taken (with `seats`: held or sold through the channel), sold_out (with `available`: the channel's free places)", body = super::response::Problem, content_type = "application/problem+json"),
        (status = 422, description = "unknown_channel, unknown_seat, unknown_pool, validation_failed", body = super::response::Problem, content_type = "application/problem+json"),
        (status = "4XX", description = "unauthorized, forbidden, show_not_found", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn release(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    ctx: RequestContext,
    PathParams(show_id): PathParams<String>,
    JsonBody(body): JsonBody<AllocationFields, MAX_ALLOCATION_BODY_BYTES>,
) -> Result<Response, ApiError> {
    let (entry, channel, what) = named(&state, &show_id, body).await?;
    let allocations = &state.allocations;
    let allocation = allocations.release(&ctx, &entry, &channel, &what).await?;
    state.waitlists.judge_freed(&entry.show.show_id).await;
    respond(StatusCode::OK, &allocation)
}

/// What each of the show's channels has allocated now.
#[utoipa::path(get, path = "/v1/shows/{show_id}/allocations", tag = "channels",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses((status = 200, body = AllocationsView),
        (status = "4XX", description = "unauthorized, forbidden, show_not_found", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn allocations(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    PathParams(show_id): PathParams<String>,
) -> Result<Response, ApiError> {
    let entry = super::response::show_entry(&state, &show_id).await?;
    let mut channels = Vec::with_capacity(entry.show.channels.len());
    for channel in &entry.show.channels {
        channels.push(
            state
                .allocations
                .allocation(&entry, &channel.channel_id)
                .await?,
        );
    }
    respond(
        StatusCode::OK,
        &AllocationsView {
            show_id: entry.show.show_id.to_string(),
            channels,
        },
    )
}
