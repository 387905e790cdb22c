//! `POST /v1/payments/stripe/webhook`: Stripe says a payment moved.
//!
//! The signature is checked first (`payment::stripe::verify_signature`); a
//! bad or stale one is 400 `invalid_signature` and nothing happens. A
//! verified event is a notice, never an order: the service reads the
//! PaymentIntent it names from Stripe and drives the checkout whose current
//! payment that is, from Stripe's state now, so an event that arrives
//! twice, late or out of order does nothing more than the first.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use domain::ids::HoldId;
use serde::Deserialize;

use super::extract::RawJsonBody;
use super::problem::ApiError;
use super::AppState;
use crate::payment::stripe::verify_signature;
use crate::payment::PaymentError;

/// Stripe's events are a few kilobytes; a PaymentIntent with its charges
/// stays far below this. A larger body is not Stripe's.
pub const MAX_STRIPE_EVENT_BYTES: usize = 256 * 1024;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/payments/stripe/webhook", post(stripe_webhook))
}

/// The fields of an event the service reads: which object it is about.
#[derive(Debug, Deserialize)]
struct Event {
    #[serde(default)]
    id: String,
    #[serde(rename = "type", default)]
    kind: String,
    data: EventData,
}

#[derive(Debug, Deserialize)]
struct EventData {
    object: EventObject,
}

#[derive(Debug, Deserialize)]
struct EventObject {
    id: String,
    object: String,
}

/// A Stripe event about a payment (Stripe calls it; no bearer token).
#[utoipa::path(post, path = "/v1/payments/stripe/webhook", tag = "payments",
    params(("Stripe-Signature" = String, Header, description = "t=<unix seconds>,v1=<hex HMAC-SHA256 of \"{t}.{body}\">")),
    request_body(content = Object, description = "A Stripe event", content_type = "application/json"),
    responses((status = 200, description = "Received (acted on, or nothing to do)"),
              (status = 400, description = "invalid_signature (missing, wrong or stale), malformed_json", body = super::response::Problem, content_type = "application/problem+json"),
              (status = 404, description = "not_found: the service does not pay through Stripe", body = super::response::Problem, content_type = "application/problem+json"),
              (status = 503, description = "busy or payment_unavailable: Stripe retries", body = super::response::Problem, content_type = "application/problem+json",
               headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
              (status = "4XX", description = "payload_too_large, unsupported_media_type", body = super::response::Problem, content_type = "application/problem+json")))]
pub(super) async fn stripe_webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawJsonBody(body): RawJsonBody<MAX_STRIPE_EVENT_BYTES>,
) -> Result<Response, ApiError> {
    let Some(signature) = headers
        .get("stripe-signature")
        .and_then(|v| v.to_str().ok())
    else {
        return Err(ApiError::InvalidSignature(
            "no Stripe-Signature header".into(),
        ));
    };
    let Some(stripe) = &state.stripe else {
        return Err(ApiError::NotFound);
    };
    verify_signature(
        &stripe.settings().webhook_secret,
        signature,
        &body,
        state.clock.now(),
    )
    .map_err(|e| {
        metrics::counter!("stripe_webhooks_total", "outcome" => "invalid_signature").increment(1);
        ApiError::InvalidSignature(e.to_string())
    })?;
    let event: Event = serde_json::from_slice(&body)
        .map_err(|e| ApiError::MalformedJson(format!("not a Stripe event: {e}")))?;
    if event.data.object.object != "payment_intent" {
        return Ok(received("ignored"));
    }
    let payment_id = event.data.object.id;
    // The PaymentIntent as Stripe has it now, not the event's copy.
    let hold = match stripe.hold_of(&payment_id).await {
        Ok((_, hold)) => hold.and_then(|h| h.parse().ok().map(HoldId)),
        Err(PaymentError::Invalid(why)) => {
            tracing::warn!(event = %event.id, %payment_id, %why, "a Stripe event names a PaymentIntent Stripe does not know");
            return Ok(received("unknown"));
        }
        Err(other) => return Err(ApiError::PaymentUnavailable(other.to_string())),
    };
    let Some(hold_id) = hold else {
        tracing::info!(event = %event.id, kind = %event.kind, %payment_id, "a PaymentIntent of no hold; acknowledged");
        return Ok(received("unknown"));
    };
    match state.checkout.payment_changed(hold_id, &payment_id).await? {
        Some(outcome) => {
            tracing::info!(event = %event.id, kind = %event.kind, %hold_id, ?outcome, "Stripe event");
            Ok(received("driven"))
        }
        None => {
            tracing::info!(event = %event.id, %hold_id, %payment_id, "a PaymentIntent no checkout pays with now; acknowledged");
            Ok(received("unknown"))
        }
    }
}

fn received(outcome: &'static str) -> Response {
    metrics::counter!("stripe_webhooks_total", "outcome" => outcome).increment(1);
    (
        StatusCode::OK,
        axum::Json(serde_json::json!({"received": true})),
    )
        .into_response()
}
