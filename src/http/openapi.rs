//! The OpenAPI document, generated from the handlers' annotations and the
//! types they read and write (utoipa). `GET /openapi.json` serves it.

use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
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

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", responses((status = 200, description = "OpenAPI 3.1")))]
pub(super) async fn openapi_json() -> Response {
    match ApiDoc::openapi().to_json() {
        Ok(json) => json_response(StatusCode::OK, json),
        Err(e) => super::problem::ApiError::Internal(e.to_string()).into_response_now(),
    }
}
