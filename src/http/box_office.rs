//! The box office (admin): `POST /v1/shows/{id}/bookings` books seats or
//! pool places for a buyer at the counter, paid outside any provider (cash,
//! a card on the counter's terminal, an invoice, or a comp). It is a hold
//! placed for the buyer (atomic like any hold: 409 `seat_taken`), then an
//! order of that hold paid offline, so everything an order does (lines,
//! partial cancellation, recovery after a crash, webhooks, the show's
//! history) a box-office sale does; the clerk is recorded as `sold_by` on
//! every event and in the order.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use domain::ids::{BuyerId, ChannelId, PoolId, TicketType};
use domain::limits::MAX_NOTE_CHARS;
use domain::order::{BoxOfficeSale, OfflinePayment};
use serde::Deserialize;

use super::extract::{Admin, JsonBody, PathParams};
use super::holds::SeatEntry;
use super::problem::ApiError;
use super::response::json_response;
use super::AppState;
use crate::command::checkout::{OrderView, Ordered};
use crate::command::context::RequestContext;
use crate::command::holds::{HoldRequest, Placed, Sale};

pub fn router() -> Router<AppState> {
    Router::new().route(
        "/v1/shows/{show_id}/bookings",
        post(book).get(super::report::bookings_export),
    )
}

/// A sale at the counter as it is read: every field of both shapes, so
/// that a body with both, or neither, is refused naming the rule (the
/// schema is [`BoxOfficeBody`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BoxOfficeFields {
    seats: Option<Vec<SeatEntry>>,
    pool_id: Option<PoolId>,
    quantity: Option<u32>,
    ticket_type: Option<TicketType>,
    channel: Option<ChannelId>,
    buyer: BuyerId,
    payment: OfflinePaymentBody,
    note: Option<String>,
}

/// A sale at the counter: seats, or places of a pool, for `buyer`, paid as
/// `payment`.
#[derive(Debug, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(super) enum BoxOfficeBody {
    Seats(BoxOfficeSeats),
    Places(BoxOfficePlaces),
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub(super) struct BoxOfficeSeats {
    /// 1..=MAX_SEATS_PER_HOLD seats, each a seat id or `{"seat_id",
    /// "ticket_type"}`.
    #[schema(schema_with = super::holds::seat_ids_schema)]
    seats: Vec<serde_json::Value>,
    /// Sell from this channel's inventory (absent: public sale's).
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    channel: Option<String>,
    /// Who the tickets are for (`walk-in-17`): the order's buyer.
    #[schema(value_type = String, pattern = "^[\\x21-\\x7E]{1,64}$")]
    buyer: String,
    payment: OfflinePaymentBody,
    /// The clerk's note, 1..=MAX_NOTE_CHARS characters.
    #[schema(min_length = 1, max_length = 500)]
    note: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub(super) struct BoxOfficePlaces {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    pool_id: String,
    /// 1..=MAX_POOL_HOLD_QUANTITY places of the pool.
    #[schema(minimum = 1, maximum = 20)]
    quantity: u32,
    /// The ticket type of every place (absent: the show's default).
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    ticket_type: Option<String>,
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    channel: Option<String>,
    #[schema(value_type = String, pattern = "^[\\x21-\\x7E]{1,64}$")]
    buyer: String,
    payment: OfflinePaymentBody,
    #[schema(min_length = 1, max_length = 500)]
    note: Option<String>,
}

/// How it was paid: nothing goes through a provider (`comp`: given away,
/// priced 0).
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum OfflinePaymentBody {
    Cash,
    CardPresent,
    Invoice,
    Comp,
}

impl From<OfflinePaymentBody> for OfflinePayment {
    fn from(body: OfflinePaymentBody) -> Self {
        match body {
            OfflinePaymentBody::Cash => OfflinePayment::Cash,
            OfflinePaymentBody::CardPresent => OfflinePayment::CardPresent,
            OfflinePaymentBody::Invoice => OfflinePayment::Invoice,
            OfflinePaymentBody::Comp => OfflinePayment::Comp,
        }
    }
}

impl BoxOfficeFields {
    /// What the hold asks for, and from whose inventory at what price.
    fn hold(&mut self) -> Result<(HoldRequest, Sale), ApiError> {
        let request =
            match (self.seats.take(), self.pool_id.take(), self.quantity) {
                (Some(seats), None, None) if self.ticket_type.is_none() => {
                    HoldRequest::Seats(seats.into_iter().map(|SeatEntry(seat)| seat).collect())
                }
                (None, Some(pool_id), Some(quantity)) => HoldRequest::Pool {
                    pool_id,
                    quantity,
                    ticket_type: self.ticket_type.take(),
                },
                _ => return Err(ApiError::Validation(
                    "send \"seats\" (each with its own \"ticket_type\" if not the default), or \
                     \"pool_id\" with \"quantity\" (and a \"ticket_type\")"
                        .into(),
                )),
            };
        let sale = Sale {
            channel: self.channel.take(),
            comp: matches!(self.payment, OfflinePaymentBody::Comp),
        };
        Ok((request, sale))
    }

    fn note(&self) -> Result<Option<String>, ApiError> {
        let Some(note) = &self.note else {
            return Ok(None);
        };
        let chars = note.chars().count();
        if chars == 0 || chars > MAX_NOTE_CHARS {
            return Err(ApiError::Validation(format!(
                "note must be 1..={MAX_NOTE_CHARS} characters (MAX_NOTE_CHARS)"
            )));
        }
        if note.chars().any(|c| c.is_control() && c != '\n') {
            return Err(ApiError::Validation(
                "note must not contain control characters other than newlines".into(),
            ));
        }
        Ok(Some(note.clone()))
    }
}

fn respond(status: StatusCode, view: &OrderView) -> Result<Response, ApiError> {
    let json = serde_json::to_string(view).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(status, json))
}

/// Books at the counter: the seats or places held for the buyer and paid
/// offline in one request, all or nothing. The same `Idempotency-Key`
/// again answers the same booking (200).
#[utoipa::path(post, path = "/v1/shows/{show_id}/bookings", tag = "channels",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64),
        ("Idempotency-Key" = Option<String>, Header, pattern = "^[\\x21-\\x7E]([\\x20-\\x7E]{0,253}[\\x21-\\x7E])?$", min_length = 1, max_length = 255,
         description = "the same key and body return the same booking")),
    request_body = BoxOfficeBody,
    responses((status = 201, description = "Booked: an order paid offline (`sale`, `\"refund\": \"offline\"`); cancel it with POST /v1/orders/{id}/cancel", body = OrderView),
        (status = 200, description = "The booking an earlier request with this key made", body = OrderView),
        (status = 409, description = "seat_taken (with `seats`), seat_not_for_sale (with `seats`), sold_out (with `available`), buyer_limit_reached", body = super::response::Problem, content_type = "application/problem+json"),
        (status = 422, description = "unknown_seat, unknown_pool, unknown_channel, ticket_type_unavailable, validation_failed", body = super::response::Problem, content_type = "application/problem+json"),
        (status = "4XX", description = "unauthorized, forbidden, show_not_found", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn book(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    ctx: RequestContext,
    PathParams(show_id): PathParams<String>,
    JsonBody(mut body): JsonBody<BoxOfficeFields>,
) -> Result<Response, ApiError> {
    let entry = super::response::show_entry(&state, &show_id).await?;
    let show_id = entry.show.show_id.clone();
    let (request, sale) = body.hold()?;
    let sale_record = BoxOfficeSale {
        sold_by: ctx.actor.id.clone(),
        payment: body.payment.into(),
        note: body.note()?,
    };
    let buying = ctx.selling_to(body.buyer.clone());
    let placed = state.holds.place(&buying, &show_id, request, sale).await?;
    let (hold, new) = match placed {
        Placed::New(view) => (view.hold_id, true),
        Placed::Existing(view) => (view.hold_id, false),
    };
    let ordered = state
        .checkout
        .place_box_office_order(&buying, vec![hold], sale_record)
        .await;
    match ordered {
        Ok(Ordered::New(view)) => respond(StatusCode::CREATED, &view),
        Ok(Ordered::Existing(view)) => respond(StatusCode::OK, &view),
        Ok(Ordered::WaitingOnBuyer(_)) => Err(ApiError::Internal(
            "an offline payment waited on its buyer".into(),
        )),
        Err(error) => {
            // Nothing was booked: the hold this request placed is let go
            // at once rather than left to expire.
            if new {
                if let Err(release) = state.holds.release(&buying, &hold).await {
                    tracing::warn!(%release, %hold, "box office: the hold of a failed sale was not released");
                }
            }
            Err(error.into())
        }
    }
}
