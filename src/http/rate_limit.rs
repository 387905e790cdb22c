//! The rate limits at the edge (docs/api.md, "Rate limits"): who a request
//! is counted against, what is never counted, and the 429 past a limit.
//! The counts themselves are `crate::rate_limit`'s.
//!
//! A request with a valid token counts against its buyer (the token's
//! `sub`), whatever it asks for; one with no token, or a token that does
//! not verify (its handler then answers 401, as without the limits),
//! against the address its connection comes from. A refused request never
//! reaches a handler: nothing is read, decided or written. A live stream
//! is counted once, by the request that opens it.
//!
//! The layer sits inside the metrics layer (refusals show in
//! `http_requests_total` with their route and status 429) and outside the
//! request timeout, over every route and the fallbacks (`router()`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::problem::ApiError;
use crate::auth::TokenKeys;
use crate::rate_limit::{RateLimiter, Requester};

/// Never counted, whatever the method: the orchestrator's probes and the
/// metrics scraper (an instance refusing a crowd must stay observable and
/// must not be restarted for it).
const EXEMPT_PATHS: &[&str] = &["/healthz", "/readyz", "/metrics"];
/// Stripe's webhook calls: signed by Stripe, and refusing one would only
/// delay a checkout (Stripe retries) while the buyer waits on it.
const STRIPE_WEBHOOK_PATH: &str = "/v1/payments/stripe/webhook";

/// Is a request to `path` (a path or a route template) never limited?
pub fn is_exempt(method: &Method, path: &str) -> bool {
    EXEMPT_PATHS.contains(&path) || (method == Method::POST && path == STRIPE_WEBHOOK_PATH)
}

/// What the layer needs: the keys that verify tokens, and the counts.
pub struct Gate {
    keys: TokenKeys,
    limiter: RateLimiter,
}

impl Gate {
    pub fn new(keys: TokenKeys, limiter: RateLimiter) -> Self {
        Self { keys, limiter }
    }
}

/// The middleware: counts the request, and answers 429 `rate_limited`
/// with `Retry-After` past its limit.
pub async fn limit(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    if is_exempt(request.method(), request.uri().path()) {
        return next.run(request).await;
    }
    // As the `Actor` extractor reads it (http/extract.rs).
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or(""));
    let requester = match gate.keys.verify_header(authorization) {
        Ok(actor) if actor.is_admin() => return next.run(request).await,
        Ok(actor) => Requester::Buyer(actor.id),
        Err(_) => Requester::Client(client_address(&request)),
    };
    match gate.limiter.check(&requester) {
        Ok(()) => next.run(request).await,
        Err(refused) => {
            crate::metrics::rate_limited(refused.kind.as_str());
            ApiError::RateLimited {
                retry_after_seconds: refused.retry_after_seconds,
            }
            .into_response()
        }
    }
}

/// The address the connection comes from (`edge::serve` records it). An
/// IPv4 client of a dual-stack listener (`::ffff:a.b.c.d`) is the same
/// client as over IPv4. Without one (a router driven in process), every
/// request shares one unspecified address.
fn client_address(request: &Request) -> IpAddr {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |ConnectInfo(peer)| {
            peer.ip().to_canonical()
        })
}

/// HTTP methods as the OpenAPI document's path items name them.
const OPERATIONS: &[&str] = &["get", "put", "post", "delete", "patch", "head", "options"];

/// Documents the 429 on every operation of the OpenAPI document that can
/// be limited (all but the exempt ones), so that the contract names every
/// status a client can get.
pub fn document_refusals(doc: &mut Value) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        for name in OPERATIONS {
            let Ok(method) = Method::from_bytes(name.to_ascii_uppercase().as_bytes()) else {
                continue;
            };
            if is_exempt(&method, path) {
                continue;
            }
            if let Some(responses) = item
                .get_mut(*name)
                .and_then(|operation| operation.get_mut("responses"))
                .and_then(Value::as_object_mut)
            {
                responses.insert("429".into(), refusal());
            }
        }
    }
}

/// The 429 response as the document describes it.
fn refusal() -> Value {
    json!({
        "description": "rate_limited: past this buyer's or this client address's request rate; nothing was done; retry after Retry-After",
        "headers": {"Retry-After": {
            "description": "Seconds to wait before retrying (at least 1)",
            "required": true,
            "schema": {"type": "integer", "format": "int32", "minimum": 1}
        }},
        "content": {"application/problem+json": {
            "schema": {"$ref": "#/components/schemas/Problem"}
        }}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_but_the_exempt_ones_documents_the_429() {
        let ok = json!({"200": {"description": "ok"}});
        let mut doc = json!({"paths": {
            "/healthz": {"get": {"responses": ok.clone()}},
            "/v1/payments/stripe/webhook": {"post": {"responses": ok.clone()}},
            "/v1/holds/{hold_id}": {"get": {"responses": ok.clone()}, "delete": {"responses": ok.clone()}},
            "/openapi.json": {"get": {"responses": ok.clone()}, "parameters": []},
        }});
        document_refusals(&mut doc);
        let has_429 = |pointer: &str| doc.pointer(pointer).is_some();
        assert!(!has_429("/paths/~1healthz/get/responses/429"));
        assert!(!has_429(
            "/paths/~1v1~1payments~1stripe~1webhook/post/responses/429"
        ));
        assert!(has_429("/paths/~1v1~1holds~1{hold_id}/get/responses/429"));
        assert!(has_429(
            "/paths/~1v1~1holds~1{hold_id}/delete/responses/429"
        ));
        assert!(has_429("/paths/~1openapi.json/get/responses/429"));
        assert_eq!(
            doc.pointer(
                "/paths/~1openapi.json/get/responses/429/headers/Retry-After/schema/minimum"
            ),
            Some(&json!(1))
        );
    }

    #[test]
    fn probes_metrics_and_stripes_webhook_are_exempt_and_nothing_else() {
        for path in ["/healthz", "/readyz", "/metrics"] {
            assert!(is_exempt(&Method::GET, path), "{path}");
        }
        assert!(is_exempt(&Method::POST, "/v1/payments/stripe/webhook"));
        assert!(!is_exempt(&Method::GET, "/v1/payments/stripe/webhook"));
        for path in [
            "/v1/shows/{show_id}/availability",
            "/openapi.json",
            "/healthz/",
            "/v1/holds/{hold_id}",
        ] {
            assert!(!is_exempt(&Method::GET, path), "{path}");
        }
    }
}
