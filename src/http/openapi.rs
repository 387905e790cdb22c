//! The OpenAPI document, generated from the handlers' annotations and the
//! types they read and write (utoipa). `GET /openapi.json` serves it.

use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use domain::limits::{MAX_POOLS_PER_SHOW, MAX_SEATS_PER_SHOW};
use serde_json::{json, Value};
use utoipa::{Modify, OpenApi};

use super::problem::PROBLEM_CODES;
use super::response::{json_response, Problem};
use super::{audit, availability, bookings, holds, ops, shows, AppState};

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
            .enum_values(Some(PROBLEM_CODES.iter().copied()))
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
        shows::put_show, shows::get_show, availability::availability,
        holds::place_hold, holds::get_hold, holds::release_hold,
        bookings::purchase, bookings::get_booking, bookings::cancel_booking,
        audit::seat_history, audit::show_history, audit::hold_ttl_advice,
        ops::healthz, ops::readyz, ops::metrics, openapi_json,
    ),
    components(schemas(Problem)),
    modifiers(&Extras),
)]
pub struct ApiDoc;

pub fn router() -> Router<AppState> {
    Router::new().route("/openapi.json", get(openapi_json))
}

/// The document `GET /openapi.json` serves: the generated one, with the
/// rules utoipa's attributes cannot say added from the constants.
pub fn document() -> Result<Value, serde_json::Error> {
    let mut doc = serde_json::to_value(ApiDoc::openapi())?;
    refine(&mut doc);
    Ok(doc)
}

/// Rules between fields, and array rules the derive has no attribute for.
fn refine(doc: &mut Value) {
    let schemas = &mut doc["components"]["schemas"];
    // A hold names each seat once.
    if let Some(seats) = schemas.pointer_mut("/SeatsHold/properties/seats") {
        seats["uniqueItems"] = json!(true);
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
pub(super) async fn openapi_json() -> Response {
    match document() {
        Ok(doc) => json_response(StatusCode::OK, doc.to_string()),
        Err(e) => super::problem::ApiError::Internal(e.to_string()).into_response_now(),
    }
}
