//! Purchase and bookings (buyer): `POST /v1/holds/{id}/purchase`,
//! `GET /v1/bookings/{id}`, `POST /v1/bookings/{id}/cancel`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use domain::ids::{BookingId, HoldId};
use serde::Deserialize;

use super::extract::JsonBody;
use super::problem::ApiError;
use super::shows::json_response;
use super::AppState;
use crate::auth::Actor;
use crate::checkout::{BookingView, Purchased};
use crate::holds::RequestContext;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/holds/{hold_id}/purchase", post(purchase))
        .route("/v1/bookings/{booking_id}", get(get_booking))
        .route("/v1/bookings/{booking_id}/cancel", post(cancel_booking))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PurchaseBody {
    payment_method: String,
}

fn booking_response(status: StatusCode, view: &BookingView) -> Result<Response, ApiError> {
    let json = serde_json::to_string(view).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(status, json))
}

async fn purchase(
    State(state): State<AppState>,
    ctx: RequestContext,
    Path(hold_id): Path<String>,
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
    }
}

fn parse_booking_id(raw: &str) -> Result<BookingId, ApiError> {
    raw.parse()
        .map(BookingId)
        .map_err(|_| ApiError::BookingNotFound)
}

async fn get_booking(
    State(state): State<AppState>,
    actor: Actor,
    Path(booking_id): Path<String>,
) -> Result<Response, ApiError> {
    let booking_id = parse_booking_id(&booking_id)?;
    let view = state.checkout.booking(&actor, booking_id).await?;
    booking_response(StatusCode::OK, &view)
}

async fn cancel_booking(
    State(state): State<AppState>,
    ctx: RequestContext,
    Path(booking_id): Path<String>,
) -> Result<Response, ApiError> {
    let booking_id = parse_booking_id(&booking_id)?;
    let view = state.checkout.cancel(&ctx, booking_id).await?;
    booking_response(StatusCode::OK, &view)
}
