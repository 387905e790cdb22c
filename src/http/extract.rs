//! Request parsing with problem+json rejections: JSON bodies (415, 413, 400,
//! 422 naming the field), query strings, the bearer token, and the request
//! metadata stamped on events.

use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{header, Method};
use domain::ids::IdempotencyKey;
use futures::StreamExt;
use serde::de::DeserializeOwned;

use super::problem::ApiError;
use super::AppState;
use crate::auth::{Actor, AuthError};
use crate::command::context::{OutcomeMark, RequestContext};

/// Request bodies up to this size, except show definitions.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// A show definition of 100,000 seats is about 10 MiB of JSON.
pub const MAX_SHOW_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Longest `x-request-id` kept in event metadata; longer ones are replaced.
pub const MAX_REQUEST_ID_CHARS: usize = 128;

fn is_json(content_type: Option<&str>) -> bool {
    let Some(value) = content_type else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// A body larger than its limit is still read (and dropped) up to this many
/// bytes more, so that the client finishes sending and reads the 413; past
/// that, the connection is closed on it.
pub const MAX_DISCARDED_BYTES: usize = 32 * 1024 * 1024;

/// How long a whole request body may take to arrive once its head has: the
/// largest body (MAX_SHOW_BODY_BYTES) takes well under a second on any link
/// a buyer uses; a body still trickling in after 10 s is a stall or an
/// attack holding a connection (408, then the connection is closed).
pub const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A JSON body of `T` of at most `LIMIT` bytes, refused with the problem the
/// API promises.
pub struct JsonBody<T, const LIMIT: usize = MAX_BODY_BYTES>(pub T);

impl<S: Send + Sync, T: DeserializeOwned, const LIMIT: usize> FromRequest<S>
    for JsonBody<T, LIMIT>
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let RawJsonBody(body) = RawJsonBody::<LIMIT>::from_request(req, state).await?;
        parse_json(&body).map(JsonBody)
    }
}

/// The bytes of a JSON body of at most `LIMIT` bytes, unparsed (what a
/// signature is computed over), refused as [`JsonBody`] refuses.
pub struct RawJsonBody<const LIMIT: usize = MAX_BODY_BYTES>(pub Vec<u8>);

impl<S: Send + Sync, const LIMIT: usize> FromRequest<S> for RawJsonBody<LIMIT> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        if !is_json(content_type) {
            return Err(ApiError::UnsupportedMediaType);
        }
        let too_large = || {
            ApiError::PayloadTooLarge(format!(
                "the body exceeds the limit of {LIMIT} bytes ({MAX_SHOW_BODY_BYTES} for a show, \
                 MAX_SHOW_BODY_BYTES; {MAX_BODY_BYTES} otherwise, MAX_BODY_BYTES)"
            ))
        };
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|n| n > LIMIT + MAX_DISCARDED_BYTES) {
            return Err(too_large());
        }
        let mut stream = req.into_body().into_data_stream();
        let mut body = Vec::with_capacity(declared.unwrap_or(0).min(LIMIT));
        let mut received = 0usize;
        let read = async {
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| {
                    ApiError::MalformedJson(format!("the body could not be read: {e}"))
                })?;
                received += chunk.len();
                if received <= LIMIT {
                    body.extend_from_slice(&chunk);
                } else if received > LIMIT + MAX_DISCARDED_BYTES {
                    break;
                }
            }
            Ok::<(), ApiError>(())
        };
        tokio::time::timeout(BODY_READ_TIMEOUT, read)
            .await
            .map_err(|_| ApiError::BodyTimeout)??;
        if received > LIMIT {
            return Err(too_large());
        }
        Ok(RawJsonBody(body))
    }
}

/// Parses JSON, naming the path of the first bad field. A number with an
/// integral value (`15.0`) is an integer, as in JSON Schema.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    integral_floats_to_integers(&mut value);
    let value = serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        match inner.classify() {
            serde_json::error::Category::Data => {
                if path == "." {
                    ApiError::Validation(inner.to_string())
                } else {
                    ApiError::Validation(format!("{path}: {inner}"))
                }
            }
            _ => ApiError::MalformedJson(inner.to_string()),
        }
    })?;
    Ok(value)
}

fn integral_floats_to_integers(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            // i64 covers every integer field of the API.
            if f.fract() == 0.0 && f.abs() < 9.0e15 {
                *value = serde_json::Value::from(f as i64);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(integral_floats_to_integers),
        serde_json::Value::Object(map) => map.values_mut().for_each(integral_floats_to_integers),
        _ => {}
    }
}

/// A query string of `T`; an unparsable one is 422 naming the problem.
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or("");
        serde_urlencoded::from_str(query)
            .map(QueryParams)
            .map_err(|e| ApiError::Validation(format!("query string: {e}")))
    }
}

impl FromRequestParts<AppState> for Actor {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap_or(""));
        state.keys.verify_header(header).map_err(|e| match e {
            AuthError::Missing => {
                ApiError::Unauthorized("send Authorization: Bearer <token>".into())
            }
            AuthError::Invalid(why) => ApiError::Unauthorized(why),
        })
    }
}

/// An admin, or 403.
pub struct Admin(pub Actor);

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let actor = Actor::from_request_parts(parts, state).await?;
        if !actor.is_admin() {
            return Err(ApiError::Forbidden);
        }
        Ok(Admin(actor))
    }
}

pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub const REQUEST_ID: &str = "x-request-id";

/// Marks a request that arrived with its own `X-Request-Id` (the service
/// sets one on every other request, after this mark).
#[derive(Debug, Clone, Copy)]
pub struct ClientRequestId;

/// The outermost layer: marks a request whose client sent a request id.
pub async fn mark_client_request_id(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if request.headers().contains_key(REQUEST_ID) {
        request.extensions_mut().insert(ClientRequestId);
    }
    next.run(request).await
}

/// Path parameters of `T`: axum's `Path`, with its rejections answered as
/// problem+json (docs/api.md, "The edge under a hostile crowd"). A segment
/// that is not valid UTF-8 cannot be any id, so it is the not-found of the
/// parameter it stands in; anything else the router passes but `T` cannot
/// hold is 400 `validation_failed`.
pub struct PathParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| PathParams(value))
            .map_err(|rejection| path_rejection(rejection, &parts.method))
    }
}

fn path_rejection(rejection: PathRejection, method: &Method) -> ApiError {
    match rejection {
        PathRejection::FailedToDeserializePathParams(failed) => match failed.kind() {
            // `PUT` names the resource it creates: a bad id there is invalid
            // input (as `PUT /v1/shows/bad.id` is), not a missing resource.
            ErrorKind::InvalidUtf8InPathParam { key } if method == Method::PUT => {
                ApiError::Validation(format!("{key} must be valid UTF-8"))
            }
            ErrorKind::InvalidUtf8InPathParam { key } => not_found_for(key),
            ErrorKind::UnsupportedType { .. } | ErrorKind::WrongNumberOfParameters { .. } => {
                ApiError::Internal(failed.body_text())
            }
            _ => ApiError::BadPath(failed.body_text()),
        },
        other => ApiError::Internal(other.body_text()),
    }
}

/// The not-found answer of an id named `key` in a route.
fn not_found_for(key: &str) -> ApiError {
    match key {
        "show_id" => ApiError::ShowNotFound,
        "hold_id" => ApiError::HoldNotFound,
        "booking_id" => ApiError::BookingNotFound,
        "webhook_id" => ApiError::WebhookNotFound,
        "delivery_id" => ApiError::DeliveryNotFound,
        "seat_id" => ApiError::UnknownSeatHere("(not valid UTF-8)".into()),
        _ => ApiError::NotFound,
    }
}

/// The actor with the request id and idempotency key of this request.
impl FromRequestParts<AppState> for RequestContext {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let actor = Actor::from_request_parts(parts, state).await?;
        let idempotency_key = match parts.headers.get(IDEMPOTENCY_KEY) {
            None => None,
            Some(value) => {
                let text = value.to_str().unwrap_or("\u{0}");
                Some(IdempotencyKey::parse(text).map_err(|e| ApiError::Validation(e.to_string()))?)
            }
        };
        // The client's own id only (`ClientRequestId`, marked before the
        // service sets one on a request without it).
        let request_id = parts
            .extensions
            .get::<ClientRequestId>()
            .and_then(|_| parts.headers.get(REQUEST_ID))
            .and_then(|v| v.to_str().ok())
            .filter(|id| !id.is_empty() && id.chars().count() <= MAX_REQUEST_ID_CHARS)
            .map(str::to_owned);
        // The request timer's mark, when the route runs under it.
        let outcome = parts
            .extensions
            .get::<OutcomeMark>()
            .cloned()
            .unwrap_or_default();
        Ok(RequestContext {
            actor,
            sold_by: None,
            request_id,
            idempotency_key,
            outcome,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types_are_recognised_with_parameters() {
        assert!(is_json(Some("application/json")));
        assert!(is_json(Some("Application/JSON; charset=utf-8")));
        assert!(!is_json(Some("text/plain")));
        assert!(!is_json(None));
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        seats: Vec<u32>,
    }

    #[test]
    fn a_wrong_type_is_a_validation_error_naming_the_path() {
        match parse_json::<Body>(br#"{"seats": [1, "x"]}"#) {
            Err(ApiError::Validation(detail)) => {
                assert!(detail.starts_with("seats[1]"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unknown_field_is_named() {
        match parse_json::<Body>(br#"{"seats": [], "extra": 1}"#) {
            Err(ApiError::Validation(detail)) => assert!(detail.contains("extra"), "{detail}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn broken_json_and_trailing_bytes_are_malformed() {
        assert!(matches!(
            parse_json::<Body>(b"{\"seats\": ["),
            Err(ApiError::MalformedJson(_))
        ));
        assert!(matches!(
            parse_json::<Body>(b"{\"seats\": []} x"),
            Err(ApiError::MalformedJson(_))
        ));
    }
}
