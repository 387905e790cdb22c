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
    allocations, audit, availability, bookings, box_office, checkins, holds, live, ops, orders,
    page, report, shows, stripe, tickets, venues, waiting_room, waitlist, webhooks, AppState,
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
        shows::put_show, shows::get_show, shows::change_prices, venues::put_venue, venues::get_venue, availability::availability, live::stream, page::seat_map, page::door, page::door_worker, page::ticket_page,
        holds::place_hold, holds::get_hold, holds::release_hold, holds::extend_hold,
        waiting_room::join, waiting_room::me, waiting_room::stream, waiting_room::overview, waiting_room::change_rate,
        bookings::purchase, bookings::get_booking, bookings::cancel_booking, stripe::stripe_webhook,
        orders::place_order, orders::get_order, orders::cancel_order,
        allocations::allocate, allocations::release, allocations::allocations,
        box_office::book, report::show_report, report::bookings_export,
        waitlist::join, waitlist::waitlist, waitlist::mine, waitlist::entry, waitlist::leave,
        tickets::order_tickets, tickets::booking_tickets, tickets::ticket, tickets::name_ticket,
        tickets::transfer_ticket, tickets::ticket_svg, tickets::ticket_png, tickets::my_tickets,
        tickets::ticket_keys, tickets::revocations,
        checkins::check_in, checkins::check_in_batch, checkins::conflicts, checkins::attendance,
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
    super::rate_limit::document_refusals(&mut doc);
    for body in ["PurchaseBody", "OrderBody"] {
        let pointer = format!("/components/schemas/{body}/properties/payment_method");
        if let Some(method) = doc.pointer_mut(&pointer) {
            method["pattern"] = json!(if stripe {
                STRIPE_METHODS
            } else {
                SIMULATOR_METHODS
            });
        }
    }
    Ok(doc)
}

/// The event streams' events, described by their JSON schemas. In an
/// OpenAPI 3.1 document a `text/event-stream` media type's `schema`
/// describes one event, as a tool reads it: an object of the event's
/// fields (`event`, `data`, `id`). Each `data:` is one JSON document: its
/// schema is the `contentSchema` of the `data` string.
fn describe_streams(doc: &mut Value) {
    let schemas = &mut doc["components"]["schemas"];
    describe_availability_data(schemas);
    schemas["AvailabilitySnapshotEvent"] = stream_event("snapshot", "AvailabilitySnapshot", true);
    schemas["AvailabilityChangeEvent"] = stream_event("change", "AvailabilityChange", true);
    schemas["QueueEvent"] = stream_event("queue", "QueueView", false);
    attach_stream_schemas(doc);
}

/// The `data` of the availability stream's two events: the whole answer
/// first, then only what changed.
fn describe_availability_data(schemas: &mut Value) {
    schemas["AvailabilitySnapshot"] = json!({
        "description": "the availability answer with the log position it describes",
        "allOf": [
            {"$ref": "#/components/schemas/AvailabilityResponse"},
            {"type": "object", "required": ["position"],
             "properties": {"position": {"type": "integer", "format": "int64", "minimum": 0}}}
        ]
    });
    schemas["AvailabilityChange"] = json!({
        "description": "only what changed since the event before, as absolute statuses",
        "type": "object",
        "required": ["position", "seats", "pools"],
        "properties": {
            "position": {"type": "integer", "format": "int64", "minimum": 0},
            "seats": {"type": "array", "items": {"$ref": "#/components/schemas/SeatAvailability"}},
            "pools": {"type": "array", "items": {"$ref": "#/components/schemas/PoolAvailability"}}
        }
    });
}

/// One event of a stream: its name, its `id:` if it has one, and its
/// data as JSON of `data`.
fn stream_event(name: &str, data: &str, id: bool) -> Value {
    let mut fields = json!({
        "event": {"type": "string", "const": name},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {"$ref": format!("#/components/schemas/{data}")}
        }
    });
    let mut required = vec!["event", "data"];
    if id {
        fields["id"] = json!({"type": "string", "pattern": "^(0|[1-9][0-9]{0,18})$",
                              "description": "the event's position, for Last-Event-ID"});
        required.push("id");
    }
    json!({"type": "object", "required": required, "properties": fields})
}

/// Each stream's `text/event-stream` response: the schema of its events.
fn attach_stream_schemas(doc: &mut Value) {
    let streams = [
        (
            "/v1/shows/{show_id}/availability/stream",
            json!({"oneOf": [
                {"$ref": "#/components/schemas/AvailabilitySnapshotEvent"},
                {"$ref": "#/components/schemas/AvailabilityChangeEvent"}
            ]}),
        ),
        (
            "/v1/shows/{show_id}/queue/me/stream",
            json!({"$ref": "#/components/schemas/QueueEvent"}),
        ),
    ];
    for (path, schema) in streams {
        let pointer = format!(
            "/paths/{}/get/responses/200/content/text~1event-stream",
            path.replace('~', "~0").replace('/', "~1")
        );
        if let Some(media) = doc.pointer_mut(&pointer) {
            media["schema"] = schema;
        }
    }
}

/// Rules between fields, and array rules the derive has no attribute for.
fn refine(doc: &mut Value) {
    describe_streams(doc);
    let schemas = &mut doc["components"]["schemas"];
    // A hold names each seat once.
    if let Some(seats) = schemas.pointer_mut("/SeatsHold/properties/seats") {
        seats["uniqueItems"] = json!(true);
    }
    // An order names each hold once.
    if let Some(holds) = schemas.pointer_mut("/OrderBody/properties/holds") {
        holds["uniqueItems"] = json!(true);
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
    // A show has seats, pools or both (`ShowError::Empty`), or a venue's.
    if let Some(definition) = schemas.get_mut("ShowDefinition") {
        definition["anyOf"] = json!([
            {"required": ["seats"], "properties": {"seats": {"minItems": 1, "maxItems": MAX_SEATS_PER_SHOW}}},
            {"required": ["pools"], "properties": {"pools": {"minItems": 1, "maxItems": MAX_POOLS_PER_SHOW}}},
            {"required": ["venue_id"]},
        ]);
    }
    // A venue has seats, pools or both.
    if let Some(definition) = schemas.get_mut("VenueDefinition") {
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

    /// The waiting room's limits, as the document states them.
    #[test]
    fn the_waiting_room_limits_equal_the_constants() {
        use domain::waiting_room::*;
        let doc = super::document(false).expect("document");
        let s = "/components/schemas";
        for (pointer, expected) in [
            (
                format!("{s}/WaitingRoomDefinition/properties/admit_per_minute/minimum"),
                MIN_ADMIT_PER_MINUTE,
            ),
            (
                format!("{s}/WaitingRoomDefinition/properties/admit_per_minute/maximum"),
                MAX_ADMIT_PER_MINUTE,
            ),
            (
                format!("{s}/WaitingRoomDefinition/properties/admission_ttl_seconds/minimum"),
                MIN_ADMISSION_TTL_SECONDS,
            ),
            (
                format!("{s}/WaitingRoomDefinition/properties/admission_ttl_seconds/maximum"),
                MAX_ADMISSION_TTL_SECONDS,
            ),
            (
                format!("{s}/RoomPatch/properties/admit_per_minute/minimum"),
                MIN_ADMIT_PER_MINUTE,
            ),
            (
                format!("{s}/RoomPatch/properties/admit_per_minute/maximum"),
                MAX_ADMIT_PER_MINUTE,
            ),
        ] {
            assert_eq!(
                at(&doc, &pointer).as_u64(),
                Some(u64::from(expected)),
                "{pointer}"
            );
        }
    }

    /// Both event streams describe each event, its data by a schema the
    /// document has; and every `$ref` anywhere resolves.
    #[test]
    fn the_streams_events_have_schemas_and_every_ref_resolves() {
        let doc = super::document(false).expect("document");
        let s = "/components/schemas";
        for (name, event, data) in [
            (
                "AvailabilitySnapshotEvent",
                "snapshot",
                "AvailabilitySnapshot",
            ),
            ("AvailabilityChangeEvent", "change", "AvailabilityChange"),
            ("QueueEvent", "queue", "QueueView"),
        ] {
            let schema = at(&doc, &format!("{s}/{name}"));
            assert_eq!(schema["properties"]["event"]["const"], event);
            assert_eq!(
                schema["properties"]["data"]["contentSchema"]["$ref"],
                format!("#{s}/{data}")
            );
        }
        for path in [
            "/v1/shows/{show_id}/availability/stream",
            "/v1/shows/{show_id}/queue/me/stream",
        ] {
            let pointer = format!(
                "/paths/{}/get/responses/200/content/text~1event-stream/schema",
                path.replace('/', "~1")
            );
            assert!(at(&doc, &pointer).is_object(), "{path}");
        }
        fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(r)) = map.get("$ref") {
                        out.push(r);
                    }
                    map.values().for_each(|v| refs(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(all.len() > 20);
        for r in all {
            let pointer = r.strip_prefix('#').expect("a local reference");
            assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
        }
    }

    /// `Last-Event-ID` is declared as what the stream enforces.
    #[test]
    fn last_event_id_is_declared_as_a_position() {
        let doc = super::document(false).expect("document");
        let parameters = at(
            &doc,
            "/paths/~1v1~1shows~1{show_id}~1availability~1stream/get/parameters",
        );
        let header = parameters
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == "Last-Event-ID"))
            .expect("the header");
        assert_eq!(header["schema"]["minimum"], 0, "{header}");
        assert_eq!(header["schema"]["format"], "int64", "{header}");
    }
}
