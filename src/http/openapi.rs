//! The OpenAPI document, generated from the handlers' annotations and the
//! types they read and write (utoipa). `GET /openapi.json` serves it.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use domain::limits::{MAX_POOLS_PER_SHOW, MAX_POOL_SHARDS, MAX_SEATS_PER_SHOW};
use serde_json::{json, Value};
use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::problem::problem_codes;
use super::response::{json_response, Problem};
use super::{
    audit, availability, bookings, holds, live, ops, page, shows, stripe, webhooks, AppState,
};

struct Extras;

impl Modify for Extras {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
        let codes = ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::String))
            .description(Some("Every stable `code` a problem can carry"))
            .enum_values(Some(problem_codes()))
            .build();
        components
            .schemas
            .insert("ProblemCode".into(), codes.into());
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "booking", description = "Event-sourced seat reservation: a seat is sold at most once."),
    paths(
        shows::put_show, shows::get_show, availability::availability, live::stream, page::seat_map,
        holds::place_hold, holds::get_hold, holds::release_hold, holds::extend_hold,
        bookings::purchase, bookings::get_booking, bookings::cancel_booking, stripe::stripe_webhook,
        audit::seat_history, audit::show_history, audit::hold_ttl_advice,
        webhooks::register_webhook, webhooks::list_webhooks, webhooks::delete_webhook,
        webhooks::list_deliveries, webhooks::retry_delivery,
        ops::healthz, ops::readyz, ops::metrics, openapi_json,
    ),
    components(schemas(Problem, crate::webhooks::payload::RefundView)),
    modifiers(&Extras),
)]
pub struct ApiDoc;

pub fn router() -> Router<AppState> {
    Router::new().route("/openapi.json", get(openapi_json))
}

/// The payment methods the simulator takes (`payment::simulator`):
/// pm_sim_ok, pm_sim_declined, pm_sim_unavailable, pm_sim_delay_<0..=20000>
/// and pm_sim_3ds_<0..=600000>.
const SIMULATOR_METHODS: &str = "^pm_sim_(ok|declined|unavailable|delay_(0|[1-9][0-9]{0,3}|1[0-9]{4}|20000)|3ds_(0|[1-9][0-9]{0,4}|[1-5][0-9]{5}|600000))$";

/// Stripe PaymentMethod ids, as `payment::stripe` takes them.
const STRIPE_METHODS: &str = "^pm_[A-Za-z0-9_]{1,252}$";

/// The document `GET /openapi.json` serves: the generated one, with the
/// rules utoipa's attributes cannot say added from the constants, and the
/// payment methods of the provider this service pays through (`stripe`).
pub fn document(stripe: bool) -> Result<Value, serde_json::Error> {
    let mut doc = serde_json::to_value(ApiDoc::openapi())?;
    refine(&mut doc);
    if let Some(method) =
        doc.pointer_mut("/components/schemas/PurchaseBody/properties/payment_method")
    {
        method["pattern"] = json!(if stripe {
            STRIPE_METHODS
        } else {
            SIMULATOR_METHODS
        });
    }
    Ok(doc)
}

/// Rules between fields, and array rules the derive has no attribute for.
fn refine(doc: &mut Value) {
    let schemas = &mut doc["components"]["schemas"];
    // A hold names each seat once.
    if let Some(seats) = schemas.pointer_mut("/SeatsHold/properties/seats") {
        seats["uniqueItems"] = json!(true);
    }
    // An endpoint names each event type once.
    if let Some(events) = schemas.pointer_mut("/RegisterWebhook/properties/events") {
        events["uniqueItems"] = json!(true);
    }
    // A pool has at most as many shards as places (`ShowError::Shards`):
    // shards <= k <= capacity for some k in 1..=MAX_POOL_SHARDS.
    if let Some(pool) = schemas.get_mut("PoolDefinition") {
        let mut any_of = vec![json!({"not": {"required": ["shards"]}})];
        any_of.extend((1..=MAX_POOL_SHARDS).map(
            |k| json!({"properties": {"capacity": {"minimum": k}, "shards": {"maximum": k}}}),
        ));
        pool["anyOf"] = Value::Array(any_of);
    }
    // A show has seats, pools or both (`ShowError::Empty`).
    if let Some(definition) = schemas.get_mut("ShowDefinition") {
        definition["anyOf"] = json!([
            {"required": ["seats"], "properties": {"seats": {"minItems": 1, "maxItems": MAX_SEATS_PER_SHOW}}},
            {"required": ["pools"], "properties": {"pools": {"minItems": 1, "maxItems": MAX_POOLS_PER_SHOW}}},
        ]);
    }
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", responses((status = 200, description = "OpenAPI 3.1")))]
pub(super) async fn openapi_json(State(state): State<AppState>) -> Response {
    match document(state.stripe.is_some()) {
        Ok(doc) => json_response(StatusCode::OK, doc.to_string()),
        Err(e) => super::problem::ApiError::Internal(e.to_string()).into_response_now(),
    }
}

#[cfg(test)]
mod tests {
    use domain::limits::*;
    use serde_json::Value;

    use crate::query::audit::MAX_HISTORY_PAGE;

    fn at<'a>(doc: &'a Value, pointer: &str) -> &'a Value {
        doc.pointer(pointer)
            .unwrap_or_else(|| panic!("{pointer} is not in the document"))
    }

    /// The attributes need literals; each must equal its constant.
    #[test]
    fn the_literal_limits_equal_the_constants() {
        let doc = super::document(false).expect("document");
        let s = "/components/schemas";
        let checks: Vec<(String, i64)> = vec![
            (
                format!("{s}/ShowDefinition/properties/name/maxLength"),
                MAX_TEXT_CHARS as i64,
            ),
            (
                format!("{s}/ShowDefinition/properties/hold_ttl_seconds/minimum"),
                MIN_HOLD_TTL_SECONDS.into(),
            ),
            (
                format!("{s}/ShowDefinition/properties/hold_ttl_seconds/maximum"),
                MAX_HOLD_TTL_SECONDS.into(),
            ),
            (
                format!("{s}/ShowDefinition/properties/max_seats_per_buyer/minimum"),
                MIN_SEATS_PER_BUYER.into(),
            ),
            (
                format!("{s}/ShowDefinition/properties/max_seats_per_buyer/maximum"),
                MAX_SEATS_PER_BUYER.into(),
            ),
            (
                format!("{s}/ShowDefinition/properties/max_hold_seconds/minimum"),
                MIN_MAX_HOLD_SECONDS.into(),
            ),
            (
                format!("{s}/ShowDefinition/properties/max_hold_seconds/maximum"),
                MAX_HOLD_SECONDS_CAP.into(),
            ),
            (
                format!("{s}/ShowDefinition/properties/seats/maxItems"),
                MAX_SEATS_PER_SHOW as i64,
            ),
            (
                format!("{s}/ShowDefinition/properties/pools/maxItems"),
                MAX_POOLS_PER_SHOW as i64,
            ),
            (
                format!("{s}/SeatDefinition/properties/section/maxLength"),
                MAX_TEXT_CHARS as i64,
            ),
            (
                format!("{s}/SeatDefinition/properties/row/maxLength"),
                MAX_TEXT_CHARS as i64,
            ),
            (
                format!("{s}/SeatDefinition/properties/number/maximum"),
                (MAX_SEAT_NUMBER - 1).into(),
            ),
            (
                format!("{s}/SeatDefinition/properties/price_cents/maximum"),
                MAX_PRICE_CENTS,
            ),
            (
                format!("{s}/SeatDefinition/properties/seat_id/maxLength"),
                MAX_SEAT_ID_CHARS as i64,
            ),
            (
                format!("{s}/PoolDefinition/properties/capacity/maximum"),
                MAX_POOL_CAPACITY.into(),
            ),
            (
                format!("{s}/PoolDefinition/properties/price_cents/maximum"),
                MAX_PRICE_CENTS,
            ),
            (
                format!("{s}/PoolDefinition/properties/shards/maximum"),
                MAX_POOL_SHARDS.into(),
            ),
            (
                format!("{s}/SeatsHold/properties/seats/maxItems"),
                MAX_SEATS_PER_HOLD as i64,
            ),
            (
                format!("{s}/PoolHold/properties/quantity/maximum"),
                MAX_POOL_HOLD_QUANTITY.into(),
            ),
            (
                format!("{s}/PoolHold/properties/pool_id/maxLength"),
                MAX_SEAT_ID_CHARS as i64,
            ),
            (
                format!("{s}/BestAvailableAsk/properties/quantity/minimum"),
                MIN_BEST_AVAILABLE_QUANTITY as i64,
            ),
            (
                format!("{s}/BestAvailableAsk/properties/quantity/maximum"),
                MAX_BEST_AVAILABLE_QUANTITY as i64,
            ),
            (
                format!("{s}/BestAvailableAsk/properties/section/maxLength"),
                MAX_TEXT_CHARS as i64,
            ),
            (
                format!("{s}/SeatDefinition/properties/rank/maximum"),
                MAX_SEAT_RANK,
            ),
            (
                format!("{s}/RegisterWebhook/properties/url/maxLength"),
                crate::webhooks::endpoints::MAX_URL_CHARS as i64,
            ),
            (
                format!("{s}/RegisterWebhook/properties/events/maxItems"),
                crate::store::WebhookEventType::ALL.len() as i64,
            ),
        ];
        for (pointer, expected) in checks {
            assert_eq!(at(&doc, &pointer).as_i64(), Some(expected), "{pointer}");
        }
        let history = at(
            &doc,
            "/paths/~1v1~1shows~1{show_id}~1history/get/parameters",
        );
        let limit = history
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == "limit"))
            .expect("limit");
        assert_eq!(limit["schema"]["maximum"].as_i64(), Some(MAX_HISTORY_PAGE));
        let deliveries = at(
            &doc,
            "/paths/~1v1~1webhooks~1{webhook_id}~1deliveries/get/parameters",
        );
        let limit = deliveries
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == "limit"))
            .expect("limit");
        assert_eq!(
            limit["schema"]["maximum"].as_i64(),
            Some(crate::webhooks::endpoints::MAX_DELIVERIES_PAGE)
        );
        let holds = at(&doc, "/paths/~1v1~1shows~1{show_id}~1holds/post/parameters");
        for p in holds.as_array().expect("parameters") {
            let expected = match p["name"].as_str() {
                Some("show_id") => MAX_SHOW_ID_CHARS,
                Some("Idempotency-Key") => MAX_IDEMPOTENCY_KEY_BYTES,
                other => panic!("{other:?}"),
            };
            assert_eq!(p["schema"]["maxLength"].as_u64(), Some(expected as u64));
        }
        let method = at(
            &doc,
            &format!("{s}/PurchaseBody/properties/payment_method/maxLength"),
        );
        assert_eq!(
            method.as_u64(),
            Some(crate::payment::MAX_PAYMENT_METHOD_CHARS as u64)
        );
        let pattern = at(
            &doc,
            &format!("{s}/PurchaseBody/properties/payment_method/pattern"),
        );
        let max_delay = crate::payment::simulator::MAX_SIM_DELAY_MS.to_string();
        let max_3ds = crate::payment::simulator::MAX_SIM_3DS_MS.to_string();
        let pattern = pattern.as_str().unwrap_or("");
        assert!(
            pattern.contains(&max_delay) && pattern.contains(&max_3ds),
            "{pattern}"
        );
    }
}
