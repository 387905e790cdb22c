//! The service's pages: `GET /shows/{show_id}`, the seat map (docs/api.md,
//! "Seat map"); `GET /shows/{show_id}/scan`, the door (with its service
//! worker at `/shows/{show_id}/scan-sw.js`, which keeps the page for a reload
//! without the network); `GET /tickets/{ticket_id}`, a ticket to show or
//! print. Each page has its script and styles compiled into the binary and
//! inlined, so it needs nothing from anywhere else; its Content-Security-Policy says so to
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
use domain::ids::ShowId;
use sha2::{Digest, Sha256};

use super::extract::PathParams;
use super::problem::ApiError;
use super::AppState;
use crate::payment::stripe::StripeSettings;

const HTML: &str = include_str!("../../assets/seatmap.html");
const SCRIPT: &str = include_str!("../../assets/seatmap.js");
const STYLE: &str = include_str!("../../assets/seatmap.css");
const DOOR_HTML: &str = include_str!("../../assets/door.html");
const DOOR_SCRIPT: &str = include_str!("../../assets/door.js");
const DOOR_STYLE: &str = include_str!("../../assets/door.css");
const DOOR_WORKER: &str = include_str!("../../assets/door-sw.js");
const TICKET_HTML: &str = include_str!("../../assets/ticket.html");
const TICKET_SCRIPT: &str = include_str!("../../assets/ticket.js");
const TICKET_STYLE: &str = include_str!("../../assets/ticket.css");

/// A page as this service serves it: the HTML, and its policy.
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
        Page::with_policy(html, &policy)
    }

    /// The door's page: it talks to this origin only, registers its worker
    /// from here, and shows the camera's stream (a `MediaStream`, which no
    /// policy source governs) where there is one.
    pub fn door() -> Self {
        let html =
            DOOR_HTML
                .replacen("/*STYLE*/", DOOR_STYLE, 1)
                .replacen("/*SCRIPT*/", DOOR_SCRIPT, 1);
        let policy = format!(
            "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; worker-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            hash(DOOR_SCRIPT),
            hash(DOOR_STYLE)
        );
        Page::with_policy(html, &policy)
    }

    /// A ticket's page: its QR code is fetched with the holder's token and
    /// shown from a `blob:` address.
    pub fn ticket() -> Self {
        let html = TICKET_HTML.replacen("/*STYLE*/", TICKET_STYLE, 1).replacen(
            "/*SCRIPT*/",
            TICKET_SCRIPT,
            1,
        );
        let policy = format!(
            "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src 'self' blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            hash(TICKET_SCRIPT),
            hash(TICKET_STYLE)
        );
        Page::with_policy(html, &policy)
    }

    fn with_policy(html: String, policy: &str) -> Self {
        Page {
            html,
            // Hashes are base64, origins ASCII URLs: always a valid header.
            policy: HeaderValue::from_str(policy)
                .unwrap_or(HeaderValue::from_static("default-src 'self'")),
        }
    }

    fn respond(&self) -> Response {
        (
            StatusCode::OK,
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/html; charset=utf-8"),
                ),
                (header::CONTENT_SECURITY_POLICY, self.policy.clone()),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
                (
                    header::X_CONTENT_TYPE_OPTIONS,
                    HeaderValue::from_static("nosniff"),
                ),
            ],
            self.html.clone(),
        )
            .into_response()
    }
}

/// The service's pages, built once at start.
pub struct Pages {
    pub seat_map: Page,
    pub door: Page,
    pub ticket: Page,
}

impl Pages {
    pub fn new(stripe: Option<&StripeSettings>) -> Self {
        Pages {
            seat_map: Page::new(stripe),
            door: Page::door(),
            ticket: Page::ticket(),
        }
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/shows/{show_id}", super::etag::cached(get(seat_map)))
        .route("/shows/{show_id}/scan", get(door))
        .route("/shows/{show_id}/scan-sw.js", get(door_worker))
        .route("/tickets/{ticket_id}", get(ticket_page))
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
    Ok(state.pages.seat_map.respond())
}

/// The door's page of a show (HTML; a scanner's token after `#token=`).
#[utoipa::path(get, path = "/shows/{show_id}/scan", tag = "check-in",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses((status = 200, description = "the door's page", content_type = "text/html", body = String),
              (status = 404, description = "show_not_found", body = super::response::Problem, content_type = "application/problem+json")))]
pub(super) async fn door(
    State(state): State<AppState>,
    PathParams(show_id): PathParams<String>,
) -> Result<Response, ApiError> {
    super::response::show_entry(&state, &show_id).await?;
    Ok(state.pages.door.respond())
}

/// The door page's service worker (JavaScript): it keeps the page for a
/// reload without the network. Not checked against the catalogue (the
/// worker is the same for every show, and a browser asks for it again
/// while the network is down), only the id's form: a malformed id is no
/// show's.
#[utoipa::path(get, path = "/shows/{show_id}/scan-sw.js", tag = "check-in",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses((status = 200, description = "the door page's service worker", content_type = "text/javascript", body = String),
              (status = 404, description = "show_not_found: not a show id", body = super::response::Problem, content_type = "application/problem+json")))]
pub(super) async fn door_worker(
    PathParams(show_id): PathParams<String>,
) -> Result<Response, ApiError> {
    ShowId::parse(&show_id).map_err(|_| ApiError::ShowNotFound)?;
    Ok((
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/javascript; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        DOOR_WORKER,
    )
        .into_response())
}

/// A ticket's page (HTML; the holder's token after `#token=`): the ticket
/// itself is read by the page with that token, so the page answers for any
/// well-formed id and says nothing about whether it exists.
#[utoipa::path(get, path = "/tickets/{ticket_id}", tag = "tickets",
    params(("ticket_id" = String, Path, min_length = 1, max_length = 120)),
    responses((status = 200, description = "the ticket's page", content_type = "text/html", body = String),
              (status = 404, description = "ticket_not_found: not a ticket id", body = super::response::Problem, content_type = "application/problem+json")))]
pub(super) async fn ticket_page(
    State(state): State<AppState>,
    PathParams(ticket_id): PathParams<String>,
) -> Result<Response, ApiError> {
    crate::tickets::TicketRef::parse(&ticket_id).ok_or(ApiError::TicketNotFound)?;
    Ok(state.pages.ticket.respond())
}
