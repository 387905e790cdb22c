//! Webhooks (admin): `POST /v1/webhooks`, `GET /v1/webhooks`,
//! `DELETE /v1/webhooks/{id}`, `GET /v1/webhooks/{id}/deliveries` and
//! `POST /v1/webhooks/{id}/deliveries/{delivery_id}/retry`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use projections::time::from_micros;
use serde::{Deserialize, Serialize};

use super::extract::{Admin, JsonBody, PathParams, QueryParams};
use super::problem::ApiError;
use super::response::json_body;
use super::AppState;
use crate::store::{DeliveryId, DeliveryRow, DeliveryStatus, EndpointId, EndpointRow};
use crate::webhooks::endpoints::MAX_DELIVERIES_PAGE;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/webhooks", post(register_webhook).get(list_webhooks))
        .route("/v1/webhooks/{webhook_id}", delete(delete_webhook))
        .route("/v1/webhooks/{webhook_id}/deliveries", get(list_deliveries))
        .route(
            "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry",
            post(retry_delivery),
        )
}

/// The event types, for the document (the body reads names, so that an
/// unknown one is answered `unknown_event_type`).
#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub(super) enum WebhookEventName {
    #[serde(rename = "booking.confirmed")]
    BookingConfirmed,
    #[serde(rename = "booking.cancelled")]
    BookingCancelled,
    #[serde(rename = "refund.issued")]
    RefundIssued,
    #[serde(rename = "hold.expired")]
    HoldExpired,
    #[serde(rename = "order.confirmed")]
    OrderConfirmed,
    #[serde(rename = "order.cancelled")]
    OrderCancelled,
    #[serde(rename = "waitlist.offered")]
    WaitlistOffered,
    #[serde(rename = "ticket.transferred")]
    TicketTransferred,
    #[serde(rename = "ticket.revoked")]
    TicketRevoked,
    #[serde(rename = "ticket.checked_in")]
    TicketCheckedIn,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RegisterWebhook {
    /// `http` or `https`, without credentials, at most MAX_URL_CHARS printable ASCII characters.
    #[schema(
        max_length = 2048,
        pattern = "^[Hh][Tt][Tt][Pp][Ss]?://[!-~]+$",
        example = "https://example.com/hooks"
    )]
    url: String,
    /// The event types to deliver, each once.
    #[schema(value_type = Vec<WebhookEventName>, min_items = 1, max_items = 10)]
    events: Vec<String>,
}

/// An endpoint as listed (the secret is shown once, at registration).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct WebhookView {
    #[schema(value_type = uuid::Uuid)]
    webhook_id: EndpointId,
    url: String,
    #[schema(value_type = Vec<WebhookEventName>)]
    events: Vec<&'static str>,
    created_at: Option<DateTime<Utc>>,
}

impl WebhookView {
    fn of(row: &EndpointRow) -> Self {
        Self {
            webhook_id: row.endpoint_id,
            url: row.url.clone(),
            events: row.events.iter().map(|e| e.as_str()).collect(),
            created_at: from_micros(row.created_at_us),
        }
    }
}

/// A registered endpoint, with its signing secret (shown only here).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct WebhookCreated {
    #[serde(flatten)]
    endpoint: WebhookView,
    /// `whsec_` and the base64 of the key: verify signatures with it.
    #[schema(pattern = "^whsec_[A-Za-z0-9+/]+=*$")]
    secret: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct WebhookList {
    webhooks: Vec<WebhookView>,
}

/// One delivery of one event to the endpoint.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct DeliveryView {
    #[schema(value_type = uuid::Uuid)]
    delivery_id: DeliveryId,
    /// The `webhook-id` header every attempt carries: receivers dedupe on it.
    #[serde(rename = "webhook-id")]
    message_id: String,
    #[schema(value_type = WebhookEventName)]
    event_type: &'static str,
    /// `pending`, `delivered` or `failed`.
    status: &'static str,
    attempts: i32,
    /// The receiver's HTTP status at the last attempt, if it answered.
    last_status: Option<i32>,
    /// Why the last attempt did not deliver, if it did not.
    last_error: Option<String>,
    /// When the next attempt is due (pending deliveries).
    next_attempt_at: Option<DateTime<Utc>>,
    created_at: Option<DateTime<Utc>>,
    updated_at: Option<DateTime<Utc>>,
}

impl DeliveryView {
    fn of(row: &DeliveryRow) -> Self {
        Self {
            delivery_id: row.delivery_id,
            message_id: row.webhook_id.clone(),
            event_type: row.event_type.as_str(),
            status: row.status.as_str(),
            attempts: row.attempts,
            last_status: row.last_status,
            last_error: row.last_error.clone(),
            next_attempt_at: (row.status == DeliveryStatus::Pending)
                .then(|| from_micros(row.next_attempt_at_us))
                .flatten(),
            created_at: from_micros(row.created_at_us),
            updated_at: from_micros(row.updated_at_us),
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct DeliveryList {
    deliveries: Vec<DeliveryView>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DeliveriesQuery {
    status: Option<String>,
    limit: Option<i64>,
}

fn endpoint_id(raw: &str) -> Result<EndpointId, ApiError> {
    raw.parse()
        .map(EndpointId)
        .map_err(|_| ApiError::WebhookNotFound)
}

/// Registers an endpoint (admin); it receives events recorded from now on.
#[utoipa::path(post, path = "/v1/webhooks", tag = "webhooks", request_body = RegisterWebhook,
    responses((status = 201, description = "Registered: the endpoint and its secret, shown only now", body = WebhookCreated),
              (status = 409, description = "webhook_limit_reached", body = super::response::Problem, content_type = "application/problem+json"),
              (status = "4XX", description = "unauthorized, forbidden, validation_failed, webhook_url_invalid, webhook_url_too_long, webhook_url_credentials, unknown_event_type, malformed_json, unsupported_media_type", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn register_webhook(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    JsonBody(body): JsonBody<RegisterWebhook>,
) -> Result<Response, ApiError> {
    let row = state.webhooks.register(&body.url, &body.events).await?;
    json_body(
        StatusCode::CREATED,
        &WebhookCreated {
            endpoint: WebhookView::of(&row),
            secret: row.secret.clone(),
        },
    )
}

/// Every endpoint, oldest first (admin); secrets are not shown.
#[utoipa::path(get, path = "/v1/webhooks", tag = "webhooks",
    responses((status = 200, body = WebhookList),
              (status = "4XX", description = "unauthorized, forbidden", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn list_webhooks(
    State(state): State<AppState>,
    Admin(_admin): Admin,
) -> Result<Response, ApiError> {
    let rows = state.webhooks.list().await?;
    json_body(
        StatusCode::OK,
        &WebhookList {
            webhooks: rows.iter().map(WebhookView::of).collect(),
        },
    )
}

/// Deletes an endpoint and its deliveries, sent or not (admin).
#[utoipa::path(delete, path = "/v1/webhooks/{webhook_id}", tag = "webhooks", params(("webhook_id" = uuid::Uuid, Path)),
    responses((status = 204, description = "Deleted"),
              (status = "4XX", description = "unauthorized, forbidden, webhook_not_found", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn delete_webhook(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    PathParams(webhook_id): PathParams<String>,
) -> Result<Response, ApiError> {
    state.webhooks.delete(endpoint_id(&webhook_id)?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// An endpoint's deliveries, newest first, of one status or all (admin).
#[utoipa::path(get, path = "/v1/webhooks/{webhook_id}/deliveries", tag = "webhooks",
    params(("webhook_id" = uuid::Uuid, Path),
        ("status" = Option<String>, Query, pattern = "^(pending|delivered|failed)$", description = "pending, delivered or failed; all if absent"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 500, description = "1..=MAX_DELIVERIES_PAGE, default 100")),
    responses((status = 200, body = DeliveryList),
              (status = "4XX", description = "unauthorized, forbidden, webhook_not_found, validation_failed", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn list_deliveries(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    PathParams(webhook_id): PathParams<String>,
    QueryParams(query): QueryParams<DeliveriesQuery>,
) -> Result<Response, ApiError> {
    let id = endpoint_id(&webhook_id)?;
    let status = query
        .status
        .as_deref()
        .map(str::parse::<DeliveryStatus>)
        .transpose()
        .map_err(|_| ApiError::Validation("status must be pending, delivered or failed".into()))?;
    if let Some(limit) = query.limit {
        if !(1..=MAX_DELIVERIES_PAGE).contains(&limit) {
            return Err(ApiError::Validation(format!(
                "limit must be 1..={MAX_DELIVERIES_PAGE} (MAX_DELIVERIES_PAGE)"
            )));
        }
    }
    let rows = state.webhooks.deliveries(id, status, query.limit).await?;
    json_body(
        StatusCode::OK,
        &DeliveryList {
            deliveries: rows.iter().map(DeliveryView::of).collect(),
        },
    )
}

/// Sends a delivery again: pending, due now, with a new retry window and the same `webhook-id` (admin).
#[utoipa::path(post, path = "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry", tag = "webhooks",
    params(("webhook_id" = uuid::Uuid, Path), ("delivery_id" = uuid::Uuid, Path)),
    responses((status = 202, description = "Accepted: the delivery, pending again", body = DeliveryView),
              (status = "4XX", description = "unauthorized, forbidden, webhook_not_found, delivery_not_found", body = super::response::Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub(super) async fn retry_delivery(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    PathParams((webhook_id, delivery_id)): PathParams<(String, String)>,
) -> Result<Response, ApiError> {
    let id = endpoint_id(&webhook_id)?;
    let delivery = delivery_id
        .parse()
        .map(DeliveryId)
        .map_err(|_| ApiError::DeliveryNotFound)?;
    let row = state.webhooks.retry(id, delivery).await?;
    json_body(StatusCode::ACCEPTED, &DeliveryView::of(&row))
}
