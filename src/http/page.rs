//! `GET /shows/{show_id}`: the seat map (docs/api.md, "Seat map"). One
//! page, its script and styles compiled into the binary and inlined, so it
//! needs nothing from anywhere else; its Content-Security-Policy says so to
//! the browser (the inline script and styles are allowed by their hashes,
//! and it may connect only to this origin).

use std::sync::LazyLock;

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

const HTML: &str = include_str!("../../assets/seatmap.html");
const SCRIPT: &str = include_str!("../../assets/seatmap.js");
const STYLE: &str = include_str!("../../assets/seatmap.css");

struct Page {
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

static PAGE: LazyLock<Page> = LazyLock::new(|| {
    let html = HTML
        .replacen("/*STYLE*/", STYLE, 1)
        .replacen("/*SCRIPT*/", SCRIPT, 1);
    let policy = format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        hash(SCRIPT),
        hash(STYLE)
    );
    Page {
        html,
        // Hashes are base64 and the rest ASCII: always a valid header.
        policy: HeaderValue::from_str(&policy)
            .unwrap_or(HeaderValue::from_static("default-src 'self'")),
    }
});

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
    let page = &*PAGE;
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
