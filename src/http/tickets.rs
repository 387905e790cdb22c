//! Tickets: an order's or a booking's (its buyer, or an admin), one ticket
//! and its QR code (its holder, or an admin), naming and transfers, the
//! caller's own, and the keys and revocations scanners verify codes with.
//! docs/api.md, "Tickets".

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use domain::ids::{BookingId, BuyerId, OrderId, ShowId};
use serde::{Deserialize, Serialize};

use super::extract::{JsonBody, PathParams, QueryParams};
use super::problem::ApiError;
use super::response::json_body;
use super::AppState;
use crate::auth::Actor;
use crate::command::context::RequestContext;
use crate::command::tickets::{TicketRef, TicketView};
use crate::query::door::RevocationsView;
use crate::tickets::keys::PublicKeyView;
use crate::tickets::qr;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/orders/{order_id}/tickets", get(order_tickets))
        .route("/v1/bookings/{booking_id}/tickets", get(booking_tickets))
        .route("/v1/tickets/{ticket_id}", get(ticket).patch(name_ticket))
        .route("/v1/tickets/{ticket_id}/transfer", post(transfer_ticket))
        .route("/v1/tickets/{ticket_id}/qr.svg", get(ticket_svg))
        .route("/v1/tickets/{ticket_id}/qr.png", get(ticket_png))
        .route("/v1/me/tickets", get(my_tickets))
        .route("/v1/shows/{show_id}/ticket-keys", get(ticket_keys))
        .route("/v1/shows/{show_id}/revocations", get(revocations))
}

/// Tickets as a list answers them.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct TicketsView {
    tickets: Vec<TicketView>,
}

/// The keys a scanner verifies codes with.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct TicketKeysView {
    keys: Vec<PublicKeyView>,
}

fn ticket_ref(raw: &str) -> Result<TicketRef, ApiError> {
    TicketRef::parse(raw).ok_or(ApiError::TicketNotFound)
}

fn show_id(raw: &str) -> Result<ShowId, ApiError> {
    ShowId::parse(raw).map_err(|_| ApiError::ShowNotFound)
}

/// An order's tickets, one per line (its buyer, or an admin).
#[utoipa::path(get, path = "/v1/orders/{order_id}/tickets", tag = "tickets",
    params(("order_id" = uuid::Uuid, Path)),
    responses(
        (status = 200, description = "The order's tickets", body = TicketsView),
        (status = "4XX", description = "unauthorized, forbidden, order_not_found", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn order_tickets(
    State(state): State<AppState>,
    actor: Actor,
    PathParams(order_id): PathParams<uuid::Uuid>,
) -> Result<Response, ApiError> {
    let tickets = state
        .checkout
        .order_tickets(&actor, OrderId(order_id))
        .await?;
    let tickets = state.tickets.views(&tickets).await?;
    json_body(StatusCode::OK, &TicketsView { tickets })
}

/// A booking's tickets (an order's booking: the order's).
#[utoipa::path(get, path = "/v1/bookings/{booking_id}/tickets", tag = "tickets",
    params(("booking_id" = uuid::Uuid, Path)),
    responses(
        (status = 200, description = "The booking's tickets", body = TicketsView),
        (status = "4XX", description = "unauthorized, forbidden, booking_not_found", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn booking_tickets(
    State(state): State<AppState>,
    actor: Actor,
    PathParams(booking_id): PathParams<uuid::Uuid>,
) -> Result<Response, ApiError> {
    let tickets = state
        .checkout
        .booking_tickets(&actor, BookingId(booking_id))
        .await?;
    let tickets = state.tickets.views(&tickets).await?;
    json_body(StatusCode::OK, &TicketsView { tickets })
}

/// One ticket (its holder, or an admin), with its code.
#[utoipa::path(get, path = "/v1/tickets/{ticket_id}", tag = "tickets",
    params(("ticket_id" = String, Path, description = "`{show_id}.{uuid}`", max_length = 101)),
    responses(
        (status = 200, description = "The ticket", body = TicketView),
        (status = "4XX", description = "unauthorized, ticket_not_found", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn ticket(
    State(state): State<AppState>,
    actor: Actor,
    PathParams(ticket_id): PathParams<String>,
) -> Result<Response, ApiError> {
    let ticket = ticket_ref(&ticket_id)?;
    json_body(
        StatusCode::OK,
        &state.tickets.ticket(&actor, &ticket).await?,
    )
}

/// The body of `PATCH /v1/tickets/{id}`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NameBody {
    /// Who comes with the ticket: 1..=100 characters (not in the code).
    #[schema(
        pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]{1,100}$",
        min_length = 1,
        max_length = 100
    )]
    holder_name: String,
}

/// Names who comes with the ticket (its holder, or an admin); the code
/// stays the same.
#[utoipa::path(patch, path = "/v1/tickets/{ticket_id}", tag = "tickets",
    params(("ticket_id" = String, Path, description = "`{show_id}.{uuid}`", max_length = 101)),
    request_body = NameBody,
    responses(
        (status = 200, description = "The ticket, named", body = TicketView),
        (status = 409, description = "ticket_revoked", body = super::response::Problem, content_type = "application/problem+json"),
        (status = "4XX", description = "unauthorized, ticket_not_found, validation_failed, malformed_json, unsupported_media_type", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn name_ticket(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(ticket_id): PathParams<String>,
    JsonBody(body): JsonBody<NameBody>,
) -> Result<Response, ApiError> {
    let ticket = ticket_ref(&ticket_id)?;
    let view = state.tickets.name(&ctx, &ticket, body.holder_name).await?;
    json_body(StatusCode::OK, &view)
}

/// The body of `POST /v1/tickets/{id}/transfer`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TransferBody {
    /// The buyer (a token's `sub`) who holds it from now on.
    #[schema(value_type = String, pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]{1,64}$", min_length = 1, max_length = 64)]
    to: BuyerId,
    /// Who comes with it (1..=100 characters).
    #[schema(
        pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]{1,100}$",
        min_length = 1,
        max_length = 100
    )]
    holder_name: Option<String>,
}

/// Hands the ticket on to another buyer: a new version and code, the old
/// code revoked in the same decision.
#[utoipa::path(post, path = "/v1/tickets/{ticket_id}/transfer", tag = "tickets",
    params(("ticket_id" = String, Path, description = "`{show_id}.{uuid}`", max_length = 101)),
    request_body = TransferBody,
    responses(
        (status = 200, description = "The ticket, held by `to`", body = TicketView),
        (status = 409, description = "ticket_checked_in, transfer_closed, ticket_revoked", body = super::response::Problem, content_type = "application/problem+json"),
        (status = "4XX", description = "unauthorized, ticket_not_found, validation_failed (to oneself), malformed_json, unsupported_media_type", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn transfer_ticket(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(ticket_id): PathParams<String>,
    JsonBody(body): JsonBody<TransferBody>,
) -> Result<Response, ApiError> {
    let ticket = ticket_ref(&ticket_id)?;
    let view = state
        .tickets
        .transfer(&ctx, &ticket, body.to, body.holder_name)
        .await?;
    metrics::counter!("tickets_transferred_total").increment(1);
    json_body(StatusCode::OK, &view)
}

/// The ticket's code as an SVG QR code (its holder, or an admin).
#[utoipa::path(get, path = "/v1/tickets/{ticket_id}/qr.svg", tag = "tickets",
    params(("ticket_id" = String, Path, description = "`{show_id}.{uuid}`", max_length = 101)),
    responses(
        (status = 200, description = "The QR code", content_type = "image/svg+xml", body = String),
        (status = "4XX", description = "unauthorized, ticket_not_found", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn ticket_svg(
    State(state): State<AppState>,
    actor: Actor,
    PathParams(ticket_id): PathParams<String>,
) -> Result<Response, ApiError> {
    let ticket = ticket_ref(&ticket_id)?;
    let view = state.tickets.ticket(&actor, &ticket).await?;
    let svg = qr::svg(&view.code).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response())
}

/// The ticket's code as a PNG QR code (its holder, or an admin).
#[utoipa::path(get, path = "/v1/tickets/{ticket_id}/qr.png", tag = "tickets",
    params(("ticket_id" = String, Path, description = "`{show_id}.{uuid}`", max_length = 101)),
    responses(
        (status = 200, description = "The QR code", content_type = "image/png", body = Vec<u8>),
        (status = "4XX", description = "unauthorized, ticket_not_found", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn ticket_png(
    State(state): State<AppState>,
    actor: Actor,
    PathParams(ticket_id): PathParams<String>,
) -> Result<Response, ApiError> {
    let ticket = ticket_ref(&ticket_id)?;
    let view = state.tickets.ticket(&actor, &ticket).await?;
    let png = qr::png(&view.code).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, "image/png")], png).into_response())
}

/// The caller's valid tickets, by show.
#[utoipa::path(get, path = "/v1/me/tickets", tag = "tickets",
    responses(
        (status = 200, description = "The caller's tickets", body = TicketsView),
        (status = "4XX", description = "unauthorized", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn my_tickets(
    State(state): State<AppState>,
    actor: Actor,
) -> Result<Response, ApiError> {
    let tickets = state.tickets.tickets_of(&actor.id).await?;
    json_body(StatusCode::OK, &TicketsView { tickets })
}

/// The public keys codes of the show are signed with (newest first).
#[utoipa::path(get, path = "/v1/shows/{show_id}/ticket-keys", tag = "tickets",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses(
        (status = 200, description = "The keys", body = TicketKeysView),
        (status = "4XX", description = "show_not_found", body = super::response::Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn ticket_keys(
    State(state): State<AppState>,
    PathParams(raw): PathParams<String>,
) -> Result<Response, ApiError> {
    let show_id = show_id(&raw)?;
    state
        .catalog
        .get(&show_id)
        .await?
        .ok_or(ApiError::ShowNotFound)?;
    let keys = state.tickets.public_keys();
    json_body(StatusCode::OK, &TicketKeysView { keys })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RevocationsQuery {
    after: Option<i64>,
}

/// The codes of the show revoked after `after`, in order (a scanner of the
/// show, or an admin).
#[utoipa::path(get, path = "/v1/shows/{show_id}/revocations", tag = "check-in",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64),
           ("after" = Option<i64>, Query, description = "the `next` of the last answer")),
    responses(
        (status = 200, description = "Codes revoked since", body = RevocationsView),
        (status = "4XX", description = "unauthorized, forbidden, show_not_found, validation_failed", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn revocations(
    State(state): State<AppState>,
    actor: Actor,
    PathParams(raw): PathParams<String>,
    QueryParams(query): QueryParams<RevocationsQuery>,
) -> Result<Response, ApiError> {
    let show_id = door_show(&state, &actor, &raw).await?;
    let view = state
        .door
        .revocations(&show_id, query.after.unwrap_or(0))
        .await?;
    json_body(StatusCode::OK, &view)
}

/// A show the actor may scan at (an admin, or its scanner), which exists.
pub(super) async fn door_show(
    state: &AppState,
    actor: &Actor,
    raw: &str,
) -> Result<ShowId, ApiError> {
    let show_id = show_id(raw)?;
    if !actor.may_scan(&show_id) {
        return Err(ApiError::Forbidden);
    }
    state
        .catalog
        .get(&show_id)
        .await?
        .ok_or(ApiError::ShowNotFound)?;
    Ok(show_id)
}
