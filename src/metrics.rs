//! Prometheus metrics, through the `metrics` facade.
//!
//! One recorder per process (the facade is global); every application in
//! the process (tests start several) reports into it.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Latency buckets in seconds: from a cached answer to a slow payment.
const LATENCY_BUCKETS_SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process's recorder, installed on first use.
pub fn handle() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(LATENCY_BUCKETS_SECONDS)
                .map(PrometheusBuilder::build_recorder)
                .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics may be empty");
            }
            handle
        })
        .clone()
}

/// The Prometheus text of every metric.
pub fn render() -> String {
    let handle = handle();
    handle.run_upkeep();
    handle.render()
}

/// The method as a label: the standard methods by name, anything else
/// `other`, so that made-up methods cannot add series.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// Counts every request by route, method and status, and times it.
pub async fn track(request: Request, next: Next) -> Response {
    let started = Instant::now();
    // Route labels are the route templates (a fixed set) or `unmatched`:
    // never the request's path.
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = method_label(request.method());
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("http_requests_total", "route" => route.clone(), "method" => method, "status" => status)
        .increment(1);
    metrics::histogram!("http_request_duration_seconds", "route" => route, "method" => method)
        .record(started.elapsed().as_secs_f64());
    response
}

/// Counts a request that passed the request timeout while its command's
/// outcome was being written, and was answered with that outcome, late
/// (`http::timeout`): a steady count means the store is slower than
/// `BOOKING_REQUEST_TIMEOUT_SECONDS` allows.
pub fn finished_late() {
    metrics::counter!("http_requests_finished_late_total").increment(1);
}

/// Counts a request refused by a rate limit, by the limit that refused it
/// (`buyer` or `client`): refusals against `http_requests_total` tell a
/// limit set too low from a crowd held back.
pub fn rate_limited(limit: &'static str) {
    metrics::counter!("http_rate_limited_total", "limit" => limit).increment(1);
}
