//! Purchase and bookings (buyer): `POST /v1/holds/{id}/purchase`,
//! `GET /v1/bookings/{id}`, `POST /v1/bookings/{id}/cancel`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use domain::ids::{BookingId, HoldId};
use serde::Deserialize;

use super::extract::{JsonBody, PathParams};
use super::problem::ApiError;
use super::response::json_response;
use super::AppState;
use crate::auth::Actor;
use crate::command::checkout::{ActionView, BookingView, Purchased};
use crate::command::context::RequestContext;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/holds/{hold_id}/purchase", post(purchase))
        .route("/v1/bookings/{booking_id}", get(get_booking))
        .route("/v1/bookings/{booking_id}/cancel", post(cancel_booking))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PurchaseBody {
    /// With Stripe: a PaymentMethod id the buyer's client created
    /// (`pm_...`). With the built-in simulator: pm_sim_ok, pm_sim_declined,
    /// pm_sim_unavailable, pm_sim_delay_<ms> (ms 0..=MAX_SIM_DELAY_MS) or
    /// pm_sim_3ds_<ms> (ms 0..=MAX_SIM_3DS_MS). Another method is 422.
    #[schema(pattern = "^pm_[A-Za-z0-9_]{1,252}$", min_length = 4, max_length = 255)]
    payment_method: String,
}

fn booking_response(status: StatusCode, view: &BookingView) -> Result<Response, ApiError> {
    let json = serde_json::to_string(view).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(status, json))
}

/// Buys a hold: authorize the price, convert every seat in the append that
/// re-checks the hold, then capture; an authorization that outlives the
/// hold is cancelled (voided), nothing charged.
#[utoipa::path(post, path = "/v1/holds/{hold_id}/purchase", tag = "bookings", params(("hold_id" = uuid::Uuid, Path)),
    request_body = PurchaseBody,
    responses((status = 201, body = BookingView), (status = 200, description = "A retry: the same booking", body = BookingView),
              (status = 202, description = "requires_action: the card needs the buyer (3-D Secure); continue with `client_secret`, then send the purchase again (or wait for the provider's webhook)", body = ActionView),
              (status = 402, description = "payment_declined (with `decline_code` when the provider gave one; with `reversed` and `booking_id` when a booking was undone because its authorization could not be captured)", body = super::response::Problem, content_type = "application/problem+json"),
              (status = 409, description = "hold_expired or hold_released, with `refunded` and `voided`", body = super::response::Problem, content_type = "application/problem+json"),
              (status = 503, description = "payment_unavailable (pm_sim_unavailable: the provider is down) or busy; retry after Retry-After", body = super::response::Problem, content_type = "application/problem+json",
               headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
              (status = "4XX", description = "unauthorized, forbidden, hold_not_found, validation_failed", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn purchase(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(hold_id): PathParams<String>,
    JsonBody(body): JsonBody<PurchaseBody>,
) -> Result<Response, ApiError> {
    let hold_id: HoldId = hold_id
        .parse()
        .map(HoldId)
        .map_err(|_| ApiError::HoldNotFound)?;
    match state
        .checkout
        .purchase(&ctx, hold_id, body.payment_method)
        .await?
    {
        Purchased::New(view) => booking_response(StatusCode::CREATED, &view),
        Purchased::Existing(view) => booking_response(StatusCode::OK, &view),
        Purchased::WaitingOnBuyer(action) => {
            let json =
                serde_json::to_string(&action).map_err(|e| ApiError::Internal(e.to_string()))?;
            Ok(json_response(StatusCode::ACCEPTED, json))
        }
    }
}

fn parse_booking_id(raw: &str) -> Result<BookingId, ApiError> {
    raw.parse()
        .map(BookingId)
        .map_err(|_| ApiError::BookingNotFound)
}

/// A booking (owner or admin).
#[utoipa::path(get, path = "/v1/bookings/{booking_id}", tag = "bookings", params(("booking_id" = uuid::Uuid, Path)),
    responses((status = 200, body = BookingView),
              (status = "4XX", description = "unauthorized, forbidden, booking_not_found", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn get_booking(
    State(state): State<AppState>,
    actor: Actor,
    PathParams(booking_id): PathParams<String>,
) -> Result<Response, ApiError> {
    let booking_id = parse_booking_id(&booking_id)?;
    let view = state.checkout.booking(&actor, booking_id).await?;
    booking_response(StatusCode::OK, &view)
}

/// Cancels a booking: refunds it and frees its seats; cancelling again is the same answer.
#[utoipa::path(post, path = "/v1/bookings/{booking_id}/cancel", tag = "bookings", params(("booking_id" = uuid::Uuid, Path)),
    responses((status = 200, body = BookingView),
              (status = 503, description = "payment_unavailable (the refund did not go through; retry after Retry-After)", body = super::response::Problem, content_type = "application/problem+json",
               headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
              (status = "4XX", description = "unauthorized, forbidden, booking_not_found", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn cancel_booking(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(booking_id): PathParams<String>,
) -> Result<Response, ApiError> {
    let booking_id = parse_booking_id(&booking_id)?;
    let view = state.checkout.cancel(&ctx, booking_id).await?;
    judge_freed(&state, &view.show_id).await;
    booking_response(StatusCode::OK, &view)
}

/// The line of a show whose seats a request freed, judged before the
/// answer (`WaitlistService::judge_freed`).
pub(super) async fn judge_freed(state: &AppState, show_id: &str) {
    if let Ok(show_id) = domain::ids::ShowId::parse(show_id) {
        state.waitlists.judge_freed(&show_id).await;
    }
}
