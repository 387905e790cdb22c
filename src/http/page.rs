//! `GET /shows/{show_id}`: the seat map (docs/api.md, "Seat map"). One
//! page, its script and styles compiled into the binary and inlined, so it
//! needs nothing from anywhere else; its Content-Security-Policy says so to
//! the browser (the inline script and styles are allowed by their hashes,
//! and it may connect only to this origin). With Stripe, the page loads
//! Stripe.js from `BOOKING_STRIPE_JS_URL` (which must come from Stripe to
//! keep card numbers out of this service), and the policy allows that
//! origin for the script and its frames (card fields, the 3-D Secure
//! challenge), and Stripe's API for what Stripe.js sends.
//!
//! The policy has no `'unsafe-inline'` for styles: the script gives a venue's
//! seats their category colours and stroke widths, and the chart its shape,
//! through the CSSOM (`insertRule`, `element.style`), which a policy does not
//! restrict, never through `style` attributes or elements, which it would.

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::extract::PathParams;
use super::problem::ApiError;
use super::AppState;
use crate::payment::stripe::StripeSettings;

const HTML: &str = include_str!("../../assets/seatmap.html");
const SCRIPT: &str = include_str!("../../assets/seatmap.js");
const STYLE: &str = include_str!("../../assets/seatmap.css");

/// The seat map as this service serves it: the page, and its policy.
pub struct Page {
    html: String,
    policy: HeaderValue,
}

fn hash(source: &str) -> String {
    let digest = Sha256::digest(source.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// The origin (`scheme://host[:port]`) of a URL, for a policy.
fn origin(url: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    Some(url.origin().ascii_serialization()).filter(|o| o != "null")
}

/// Stripe's 3-D Secure challenge frames come from here (Stripe's own
/// Content-Security-Policy guide).
const STRIPE_HOOKS_ORIGIN: &str = "https://hooks.stripe.com";

fn escape(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Page {
    /// The page for a service paying through Stripe (`Some`) or the
    /// simulator: the body says which (`data-payment-provider`), and the
    /// policy allows Stripe.js's origin only when it is used.
    pub fn new(stripe: Option<&StripeSettings>) -> Self {
        let mut body = String::from("<body data-payment-provider=\"simulator\">");
        let (mut script_src, mut frame_src, mut connect_src) =
            (hash(SCRIPT), String::from("'none'"), String::from("'self'"));
        if let Some(stripe) = stripe {
            body = format!(
                "<body data-payment-provider=\"stripe\" data-stripe-key=\"{}\" data-stripe-js=\"{}\">",
                escape(stripe.publishable_key.as_deref().unwrap_or("")),
                escape(&stripe.js_url)
            );
            if let Some(js) = origin(&stripe.js_url) {
                script_src = format!("{script_src} {js}");
                frame_src = format!("{js} {STRIPE_HOOKS_ORIGIN}");
            }
            if let Some(api) = origin(&stripe.api_base) {
                connect_src = format!("'self' {api}");
            }
        }
        let html = HTML
            .replacen("<body>", &body, 1)
            .replacen("/*STYLE*/", STYLE, 1)
            .replacen("/*SCRIPT*/", SCRIPT, 1);
        let policy = format!(
            "default-src 'none'; script-src {script_src}; style-src {}; connect-src {connect_src}; frame-src {frame_src}; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            hash(STYLE)
        );
        Page {
            html,
            // Hashes are base64, origins ASCII URLs: always a valid header.
            policy: HeaderValue::from_str(&policy)
                .unwrap_or(HeaderValue::from_static("default-src 'self'")),
        }
    }
}

pub fn router() -> Router<AppState> {
    Router::new().route("/shows/{show_id}", super::etag::cached(get(seat_map)))
}

/// The seat map page of a show (HTML).
#[utoipa::path(get, path = "/shows/{show_id}", tag = "shows",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses((status = 200, description = "the seat map page", content_type = "text/html", body = String),
              (status = 404, description = "show_not_found", body = super::response::Problem, content_type = "application/problem+json")))]
pub(super) async fn seat_map(
    State(state): State<AppState>,
    PathParams(show_id): PathParams<String>,
) -> Result<Response, ApiError> {
    super::response::show_entry(&state, &show_id).await?;
    let page = &state.seat_map;
    Ok((
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CONTENT_SECURITY_POLICY, page.policy.clone()),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        page.html.clone(),
    )
        .into_response())
}
