//! Orders (buyer): `POST /v1/orders`, `GET /v1/orders/{id}`,
//! `POST /v1/orders/{id}/cancel`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use domain::ids::{HoldId, OrderId};
use domain::limits::MAX_LINES_PER_ORDER;
use domain::order::LineId;
use serde::{Deserialize, Serialize};

use super::extract::{JsonBody, PathParams};
use super::problem::ApiError;
use super::response::json_response;
use super::AppState;
use crate::auth::Actor;
use crate::command::checkout::{OrderActionView, OrderView, Ordered};
use crate::command::context::RequestContext;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/orders", post(place_order))
        .route("/v1/orders/{order_id}", get(get_order))
        .route("/v1/orders/{order_id}/cancel", post(cancel_order))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct OrderBody {
    /// 1..=20 hold ids (MAX_HOLDS_PER_ORDER), all the buyer's, all held, of
    /// one show, none twice. The same holds (in any order) are the same
    /// order: they scope the order's idempotency.
    #[schema(value_type = Vec<uuid::Uuid>, min_items = 1, max_items = 20)]
    holds: Vec<String>,
    /// As for a purchase (`POST /v1/holds/{id}/purchase`).
    #[schema(pattern = "^pm_[A-Za-z0-9_]{1,252}$", min_length = 4, max_length = 255)]
    payment_method: String,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CancelOrderBody {
    /// The lines to cancel; absent or empty: every line still confirmed.
    #[serde(default)]
    #[schema(max_items = 1000)]
    lines: Vec<LineId>,
}

fn respond<T: Serialize>(status: StatusCode, view: &T) -> Result<Response, ApiError> {
    let json = serde_json::to_string(view).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(status, json))
}

/// Pays for several holds at once: one authorization for their sum, every
/// hold converted (all or nothing), one capture.
#[utoipa::path(post, path = "/v1/orders", tag = "orders",
    request_body = OrderBody,
    responses((status = 201, body = OrderView), (status = 200, description = "A retry with the same holds: the same order", body = OrderView),
              (status = 202, description = "requires_action: the card needs the buyer (3-D Secure) once for the order; continue with `client_secret`, then send the order again (or wait for the provider's webhook)", body = OrderActionView),
              (status = 402, description = "payment_declined", body = super::response::Problem, content_type = "application/problem+json"),
              (status = 409, description = "hold_expired, hold_released or hold_converted, with `holds` (the lost ones), `refunded` and `voided`: no hold was converted, nothing charged", body = super::response::Problem, content_type = "application/problem+json"),
              (status = 503, description = "payment_unavailable or busy; retry after Retry-After", body = super::response::Problem, content_type = "application/problem+json",
               headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
              (status = "4XX", description = "unauthorized, forbidden, hold_not_found, validation_failed", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn place_order(
    State(state): State<AppState>,
    ctx: RequestContext,
    JsonBody(body): JsonBody<OrderBody>,
) -> Result<Response, ApiError> {
    let holds = body
        .holds
        .iter()
        .map(|raw| raw.parse().map(HoldId))
        .collect::<Result<Vec<HoldId>, _>>()
        .map_err(|_| ApiError::Validation("holds: each must be a hold id (a UUID)".into()))?;
    match state
        .checkout
        .place_order(&ctx, holds, body.payment_method)
        .await?
    {
        Ordered::New(view) => respond(StatusCode::CREATED, &view),
        Ordered::Existing(view) => respond(StatusCode::OK, &view),
        Ordered::WaitingOnBuyer(action) => respond(StatusCode::ACCEPTED, &action),
    }
}

fn parse_order_id(raw: &str) -> Result<OrderId, ApiError> {
    raw.parse()
        .map(OrderId)
        .map_err(|_| ApiError::OrderNotFound)
}

/// An order (owner or admin).
#[utoipa::path(get, path = "/v1/orders/{order_id}", tag = "orders", params(("order_id" = uuid::Uuid, Path)),
    responses((status = 200, body = OrderView),
              (status = 409, description = "the order is not paid: hold_expired, hold_released or hold_converted (voided), payment_declined, or busy while it is being paid", body = super::response::Problem, content_type = "application/problem+json"),
              (status = "4XX", description = "unauthorized, forbidden, order_not_found", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn get_order(
    State(state): State<AppState>,
    actor: Actor,
    PathParams(order_id): PathParams<String>,
) -> Result<Response, ApiError> {
    let order_id = parse_order_id(&order_id)?;
    let view = state.checkout.order(&actor, order_id).await?;
    respond(StatusCode::OK, &view)
}

/// Cancels lines of an order (admin; the owner too until the show's
/// `buyer_cancellation_until`) and refunds them in one partial refund. A
/// line is refunded once, however often it is cancelled.
#[utoipa::path(post, path = "/v1/orders/{order_id}/cancel", tag = "orders", params(("order_id" = uuid::Uuid, Path)),
    request_body = CancelOrderBody,
    responses((status = 200, body = OrderView),
              (status = 409, description = "order_not_confirmed, cancellation_closed", body = super::response::Problem, content_type = "application/problem+json"),
              (status = 503, description = "payment_unavailable (the refund did not go through; retry after Retry-After)", body = super::response::Problem, content_type = "application/problem+json",
               headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
              (status = "4XX", description = "unauthorized, forbidden, order_not_found, unknown_line, validation_failed", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn cancel_order(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(order_id): PathParams<String>,
    JsonBody(body): JsonBody<CancelOrderBody>,
) -> Result<Response, ApiError> {
    let order_id = parse_order_id(&order_id)?;
    if body.lines.len() > MAX_LINES_PER_ORDER {
        return Err(ApiError::Validation(format!(
            "lines: at most {MAX_LINES_PER_ORDER} (MAX_LINES_PER_ORDER)"
        )));
    }
    let view = state
        .checkout
        .cancel_order_lines(&ctx, order_id, body.lines)
        .await?;
    super::bookings::judge_freed(&state, &view.show_id).await;
    respond(StatusCode::OK, &view)
}
