//! Holds (buyer): `POST /v1/shows/{id}/holds`, `GET` and `DELETE /v1/holds/{id}`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use domain::ids::{HoldId, PoolId, SeatId, ShowId};
use serde::Deserialize;

use super::extract::JsonBody;
use super::problem::ApiError;
use super::shows::json_response;
use super::AppState;
use crate::auth::Actor;
use crate::holds::{HoldRequest, HoldView, Placed, RequestContext};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/shows/{show_id}/holds", post(place_hold))
        .route("/v1/holds/{hold_id}", get(get_hold).delete(release_hold))
}

/// Either `{"seats": [...]}` or `{"pool_id": "...", "quantity": n}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HoldBody {
    seats: Option<Vec<SeatId>>,
    pool_id: Option<PoolId>,
    quantity: Option<u32>,
}

fn hold_response(status: StatusCode, view: &HoldView) -> Result<Response, ApiError> {
    let json = serde_json::to_string(view).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(status, json))
}

fn parse_hold_id(raw: &str) -> Result<HoldId, ApiError> {
    raw.parse().map(HoldId).map_err(|_| ApiError::HoldNotFound)
}

async fn place_hold(
    State(state): State<AppState>,
    ctx: RequestContext,
    Path(show_id): Path<String>,
    JsonBody(body): JsonBody<HoldBody>,
) -> Result<Response, ApiError> {
    let show_id = ShowId::parse(&show_id).map_err(|_| ApiError::ShowNotFound)?;
    let request =
        match body {
            HoldBody {
                seats: Some(seats),
                pool_id: None,
                quantity: None,
            } => HoldRequest::Seats(seats),
            HoldBody {
                seats: None,
                pool_id: Some(pool_id),
                quantity: Some(quantity),
            } => HoldRequest::Pool { pool_id, quantity },
            _ => return Err(ApiError::Validation(
                "send either \"seats\", or \"pool_id\" with \"quantity\"; not both, not neither"
                    .into(),
            )),
        };
    let kind = match &request {
        HoldRequest::Seats(_) => "seats",
        HoldRequest::Pool { .. } => "pool",
    };
    match state.holds.place(&ctx, &show_id, request).await {
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

async fn get_hold(
    State(state): State<AppState>,
    actor: Actor,
    Path(hold_id): Path<String>,
) -> Result<Response, ApiError> {
    let hold_id = parse_hold_id(&hold_id)?;
    let view = state.holds.get(&actor, &hold_id).await?;
    hold_response(StatusCode::OK, &view)
}

async fn release_hold(
    State(state): State<AppState>,
    ctx: RequestContext,
    Path(hold_id): Path<String>,
) -> Result<Response, ApiError> {
    let hold_id = parse_hold_id(&hold_id)?;
    state.holds.release(&ctx, &hold_id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
