//! Holds (buyer): `POST /v1/shows/{id}/holds`, `GET` and `DELETE /v1/holds/{id}`,
//! `POST /v1/holds/{id}/extend`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use domain::ids::{CategoryId, ChannelId, HoldId, PoolId, SeatId, ShowId, TicketType};
use serde::Deserialize;

use super::extract::{JsonBody, PathParams};
use super::problem::ApiError;
use super::response::json_response;
use super::AppState;
use crate::auth::Actor;
use crate::command::context::RequestContext;
use crate::command::holds::{HoldRequest, HoldService, HoldView, Placed, Sale, SeatAsk};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/shows/{show_id}/holds", post(place_hold))
        .route("/v1/holds/{hold_id}", get(get_hold).delete(release_hold))
        .route("/v1/holds/{hold_id}/extend", post(extend_hold))
}

/// The body of `POST /v1/shows/{id}/holds`: seats, places of a pool, or
/// the best available seats, exactly one of them.
#[derive(Debug, utoipa::ToSchema)]
#[serde(untagged)]
pub(super) enum HoldBody {
    Seats(SeatsHold),
    Pool(PoolHold),
    BestAvailable(BestAvailableHold),
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SeatsHold {
    /// 1..=MAX_SEATS_PER_HOLD distinct seats of the show, held all or
    /// nothing: each a seat id, or `{"seat_id", "ticket_type"}` to sell it
    /// as a ticket type other than the show's default.
    #[schema(schema_with = seat_ids_schema)]
    seats: Vec<SeatEntry>,
    /// Hold from this sales channel's inventory (the token's `channels`
    /// claim must name it); absent: public sale.
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    channel: Option<ChannelId>,
}

/// One seat of a hold body: its id, or its id with a ticket type.
#[derive(Debug)]
pub(super) struct SeatEntry(pub(super) SeatAsk);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SeatWithType {
    seat_id: SeatId,
    ticket_type: Option<TicketType>,
}

impl<'de> Deserialize<'de> for SeatEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entry;
        impl<'de> serde::de::Visitor<'de> for Entry {
            type Value = SeatEntry;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a seat id, or an object with \"seat_id\" and \"ticket_type\"")
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SeatEntry, E> {
                let seat_id = SeatId::parse(v).map_err(E::custom)?;
                Ok(SeatEntry(SeatAsk::from(seat_id)))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<SeatEntry, A::Error> {
                let seat =
                    SeatWithType::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(SeatEntry(SeatAsk {
                    seat_id: seat.seat_id,
                    ticket_type: seat.ticket_type,
                }))
            }
        }
        d.deserialize_any(Entry)
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PoolHold {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_.:-]{1,32}$", min_length = 1, max_length = 32)]
    pool_id: PoolId,
    /// 1..=MAX_POOL_HOLD_QUANTITY places of the pool.
    #[schema(minimum = 1, maximum = 20)]
    quantity: u32,
    /// The ticket type of every place (absent: the show's default).
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    ticket_type: Option<TicketType>,
    /// Hold from this sales channel's inventory; absent: public sale.
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    channel: Option<ChannelId>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BestAvailableHold {
    best_available: BestAvailableAsk,
    /// Choose among this sales channel's seats; absent: public sale.
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    channel: Option<ChannelId>,
}

/// The service chooses `quantity` free seats side by side (one section and
/// row, consecutive numbers), never stranding a single free seat unless
/// every block would, best ranked first.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BestAvailableAsk {
    /// MIN_BEST_AVAILABLE_QUANTITY..=MAX_BEST_AVAILABLE_QUANTITY seats.
    #[schema(minimum = 1, maximum = 10)]
    quantity: u32,
    /// Only this section (one the show has; else 422); any section if absent.
    #[schema(min_length = 1, max_length = 200)]
    section: Option<String>,
    /// The ticket type of every seat (absent: the show's default).
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    ticket_type: Option<TicketType>,
    /// Only seats of this price category (one the show has; else 422).
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    category: Option<CategoryId>,
    /// Only wheelchair spaces (the show must have some; else 422). Without
    /// it, wheelchair spaces are never chosen.
    #[serde(default)]
    accessible: bool,
}

/// The schema of a hold's seats: each a seat id (`[A-Za-z0-9_.:-]{1,32}`)
/// or `{"seat_id", "ticket_type"}`, 1..=50.
pub(super) fn seat_ids_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
    let id = || {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[A-Za-z0-9_.:-]{1,32}$"))
            .min_length(Some(1))
            .max_length(Some(32))
    };
    let with_type = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("seat_id", id())
        .property("ticket_type", id())
        .required("seat_id")
        .additional_properties(Some(
            utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
        ));
    let seat = OneOfBuilder::new().item(id()).item(with_type);
    ArrayBuilder::new()
        .items(seat)
        .min_items(Some(1))
        .max_items(Some(domain::limits::MAX_SEATS_PER_HOLD))
        .build()
}

/// What a hold body is read as first: every field of the three shapes, so
/// that a body with two of them, or none, is refused naming the rule, and
/// an unknown field naming the field.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HoldFields {
    seats: Option<Vec<SeatEntry>>,
    pool_id: Option<PoolId>,
    quantity: Option<u32>,
    ticket_type: Option<TicketType>,
    best_available: Option<BestAvailableAsk>,
    channel: Option<ChannelId>,
}

impl<'de> Deserialize<'de> for HoldBody {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let fields = HoldFields::deserialize(deserializer)?;
        match fields {
            HoldFields {
                seats: Some(seats),
                pool_id: None,
                quantity: None,
                ticket_type: None,
                best_available: None,
                channel,
            } => Ok(HoldBody::Seats(SeatsHold { seats, channel })),
            HoldFields {
                seats: None,
                pool_id: Some(pool_id),
                quantity: Some(quantity),
                ticket_type,
                best_available: None,
                channel,
            } => Ok(HoldBody::Pool(PoolHold {
                pool_id,
                quantity,
                ticket_type,
                channel,
            })),
            HoldFields {
                seats: None,
                pool_id: None,
                quantity: None,
                ticket_type: None,
                best_available: Some(best_available),
                channel,
            } => Ok(HoldBody::BestAvailable(BestAvailableHold {
                best_available,
                channel,
            })),
            _ => Err(serde::de::Error::custom(
                "send exactly one of \"seats\", \"pool_id\" with \"quantity\" (and a \"ticket_type\"), or \"best_available\"",
            )),
        }
    }
}

impl From<HoldBody> for (HoldRequest, Sale) {
    fn from(body: HoldBody) -> Self {
        match body {
            HoldBody::Seats(SeatsHold { seats, channel }) => (
                HoldRequest::Seats(seats.into_iter().map(|SeatEntry(seat)| seat).collect()),
                Sale::through(channel),
            ),
            HoldBody::Pool(PoolHold {
                pool_id,
                quantity,
                ticket_type,
                channel,
            }) => (
                HoldRequest::Pool {
                    pool_id,
                    quantity,
                    ticket_type,
                },
                Sale::through(channel),
            ),
            HoldBody::BestAvailable(BestAvailableHold {
                channel,
                best_available:
                    BestAvailableAsk {
                        quantity,
                        section,
                        ticket_type,
                        category,
                        accessible,
                    },
            }) => (
                HoldRequest::BestAvailable {
                    quantity,
                    section,
                    ticket_type,
                    category,
                    accessible,
                },
                Sale::through(channel),
            ),
        }
    }
}

fn hold_response(status: StatusCode, view: &HoldView) -> Result<Response, ApiError> {
    let json = serde_json::to_string(view).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(status, json))
}

fn parse_hold_id(raw: &str) -> Result<HoldId, ApiError> {
    raw.parse().map(HoldId).map_err(|_| ApiError::HoldNotFound)
}

/// Holds seats (all or nothing), places of a pool, or the best available
/// block of seats side by side.
#[utoipa::path(post, path = "/v1/shows/{show_id}/holds", tag = "holds",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64),
        ("Idempotency-Key" = Option<String>, Header, pattern = "^[\\x21-\\x7E]([\\x20-\\x7E]{0,253}[\\x21-\\x7E])?$", min_length = 1, max_length = 255,
         description = "1..=255 printable ASCII (no space first or last: HTTP trims it); the same key and body return the same hold")),
    request_body = HoldBody,
    responses(
        (status = 201, description = "Held", body = HoldView),
        (status = 200, description = "The hold an earlier request with this key made", body = HoldView),
        (status = 409, description = "seat_taken (with `seats`), sold_out (with `available`) buyer_limit_reached (with `limit` and `current`) or no_adjacent_seats", body = super::response::Problem, content_type = "application/problem+json"),
        (status = 422, description = "unknown_seat, unknown_pool, validation_failed, idempotency_key_reused", body = super::response::Problem, content_type = "application/problem+json"),
        (status = "4XX", description = "unauthorized, show_not_found, malformed_json, payload_too_large, unsupported_media_type", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn place_hold(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(show_id): PathParams<String>,
    JsonBody(body): JsonBody<HoldBody>,
) -> Result<Response, ApiError> {
    let show_id = ShowId::parse(&show_id).map_err(|_| ApiError::ShowNotFound)?;
    let (request, sale) = <(HoldRequest, Sale)>::from(body);
    let kind = match &request {
        HoldRequest::Seats(_) => "seats",
        HoldRequest::Pool { .. } => "pool",
        HoldRequest::BestAvailable { .. } => "best",
    };
    let holds: &HoldService = &state.holds;
    let placed = holds.place(&ctx, &show_id, request, sale).await;
    placed_response(kind, placed)
}

fn placed_response(
    kind: &'static str,
    placed: Result<Placed, crate::command::holds::HoldError>,
) -> Result<Response, ApiError> {
    match placed {
        Ok(Placed::New(view)) => {
            metrics::counter!("holds_placed_total", "kind" => kind).increment(1);
            hold_response(StatusCode::CREATED, &view)
        }
        Ok(Placed::Existing(view)) => hold_response(StatusCode::OK, &view),
        Err(error) => {
            let error = ApiError::from(error);
            metrics::counter!("holds_refused_total", "kind" => kind, "reason" => error.code())
                .increment(1);
            Err(error)
        }
    }
}

/// A hold, with its status computed now.
#[utoipa::path(get, path = "/v1/holds/{hold_id}", tag = "holds", params(("hold_id" = uuid::Uuid, Path)),
    responses((status = 200, body = HoldView),
              (status = "4XX", description = "unauthorized, forbidden, hold_not_found", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn get_hold(
    State(state): State<AppState>,
    actor: Actor,
    PathParams(hold_id): PathParams<String>,
) -> Result<Response, ApiError> {
    let hold_id = parse_hold_id(&hold_id)?;
    let mut view = state.holds.get(&actor, &hold_id).await?;
    view.offer = is_offer(&state, &view).await?;
    hold_response(StatusCode::OK, &view)
}

/// Whether a hold is a waiting list's offer: its show keeps one whose
/// entry has the hold's id.
async fn is_offer(state: &AppState, view: &HoldView) -> Result<bool, ApiError> {
    let Ok(show_id) = domain::ids::ShowId::parse(&view.show_id) else {
        return Ok(false);
    };
    if state.waitlists.show(&show_id).await.is_err() {
        return Ok(false);
    }
    let entry = crate::query::waitlist::EntryRef {
        show_id,
        entry_id: domain::ids::EntryId(view.hold_id.0),
    };
    Ok(state.waitlist_book.entry(&entry).await?.is_some())
}

/// Releases a hold; releasing again, or an expired hold, is also 204.
#[utoipa::path(delete, path = "/v1/holds/{hold_id}", tag = "holds", params(("hold_id" = uuid::Uuid, Path)),
    responses((status = 204, description = "Released"),
              (status = 409, description = "hold_converted", body = super::response::Problem, content_type = "application/problem+json"),
              (status = "4XX", description = "unauthorized, forbidden, hold_not_found", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn release_hold(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(hold_id): PathParams<String>,
) -> Result<Response, ApiError> {
    let hold_id = parse_hold_id(&hold_id)?;
    let show_id = state.holds.release(&ctx, &hold_id).await?;
    state.waitlists.judge_freed(&show_id).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The body of `POST /v1/holds/{id}/extend`: `{}` (any field is refused).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ExtendBody {}

/// Extends a hold: it now expires `hold_ttl_seconds` from now, never later
/// than the show's `max_hold_seconds` after it was placed.
#[utoipa::path(post, path = "/v1/holds/{hold_id}/extend", tag = "holds", params(("hold_id" = uuid::Uuid, Path)),
    request_body = ExtendBody,
    responses((status = 200, description = "The hold with its new expires_at", body = HoldView),
              (status = 409, description = "hold_extension_limit, hold_expired, hold_released, hold_converted", body = super::response::Problem, content_type = "application/problem+json"),
              (status = 422, description = "validation_failed (a field in the body)", body = super::response::Problem, content_type = "application/problem+json"),
              (status = "4XX", description = "unauthorized, forbidden, hold_not_found, malformed_json, unsupported_media_type", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn extend_hold(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(hold_id): PathParams<String>,
    JsonBody(ExtendBody {}): JsonBody<ExtendBody>,
) -> Result<Response, ApiError> {
    let hold_id = parse_hold_id(&hold_id)?;
    match state.holds.extend(&ctx, &hold_id).await {
        Ok(view) => {
            metrics::counter!("holds_extended_total").increment(1);
            hold_response(StatusCode::OK, &view)
        }
        Err(error) => Err(error.into()),
    }
}
