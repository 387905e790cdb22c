//! Large read answers (availability, show, history): compressed when the
//! client accepts `gzip` or `br`, tagged with a strong `ETag`, and answered
//! 304 with no body when `If-None-Match` names the current tag.
//!
//! Written once, as a layer a route opts into with [`cached`], and as
//! [`answer`] for a handler that keeps its rendered answers
//! ([`Rendered`]: availability), which serves the kept bytes as they are.
//! Nothing else in the router compresses: there is no global `CompressionLayer`, so a
//! route that must never be compressed (a future `text/event-stream`, whose
//! events a compressor would hold back in its buffer) is left out by
//! construction, simply by not being wrapped.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{to_bytes, Body, HttpBody as _};
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use tower_http::compression::CompressionLayer;

use crate::query::rendered::{etag_of, Encoding, Rendered};

/// Answers larger than this pass through untagged. The handlers build their
/// bodies in memory anyway, so reading one back costs no extra allocation;
/// the bound only guarantees the layer never buffers something unbounded.
pub const MAX_TAGGED_BODY_BYTES: usize = 64 * 1024 * 1024;

/// The route with compression and `ETag` / `If-None-Match` around it:
/// compression outside, so the tag is computed on the uncompressed body and
/// a 304 (empty) is never compressed.
pub fn cached<S>(route: MethodRouter<S>) -> MethodRouter<S>
where
    S: Clone + Send + Sync + 'static,
{
    route
        .layer::<_, Infallible>(middleware::from_fn(tag))
        .layer::<_, Infallible>(CompressionLayer::new().gzip(true).br(true))
}

async fn tag(request: Request, next: Next) -> Response {
    let if_none_match = if_none_match(request.headers());
    let response = next.run(request).await;
    if response.status() != StatusCode::OK {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let fits = body
        .size_hint()
        .exact()
        .is_some_and(|n| usize::try_from(n).is_ok_and(|n| n <= MAX_TAGGED_BODY_BYTES));
    if !fits {
        return Response::from_parts(parts, body);
    }
    let bytes = match to_bytes(body, MAX_TAGGED_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::warn!(%error, "a cached answer's body could not be read");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let etag = etag_of(&bytes);
    let Ok(value) = HeaderValue::from_str(&etag) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    if if_none_match.is_some_and(|list| matches(&list, &etag)) {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, value)]).into_response();
    }
    parts.headers.insert(header::ETAG, value);
    Response::from_parts(parts, Body::from(bytes))
}

/// A kept answer, as the client asked for it: 304 with the tag when
/// `If-None-Match` names it, else 200 with the body in the encoding the
/// client prefers (gzip on a tie; br only when preferred to gzip: it costs
/// more to make), compressed once per answer.
pub async fn answer(headers: &HeaderMap, rendered: &Arc<Rendered>) -> Response {
    let vary = (header::VARY, HeaderValue::from_static("accept-encoding"));
    let Ok(etag) = HeaderValue::from_str(rendered.etag()) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if if_none_match(headers).is_some_and(|list| matches(&list, rendered.etag())) {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag), vary]).into_response();
    }
    let (encoding, body) = rendered.encoded(preferred_encoding(headers)).await;
    let mut response = (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::ETAG, etag),
            vary,
        ],
        Body::new(body),
    )
        .into_response();
    if let Some(coding) = encoding.header_value() {
        response
            .headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding));
    }
    response
}

/// The encoding `Accept-Encoding` asks for (RFC 9110 §12.5.3): the
/// highest-weighted of gzip and br (`*` standing for an unnamed one), gzip
/// on a tie; identity when neither is acceptable, or the field is absent
/// or not text.
fn preferred_encoding(headers: &HeaderMap) -> Encoding {
    let (mut gzip, mut br, mut any) = (None, None, None);
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else {
            return Encoding::Identity;
        };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let mut weight = 1.0_f32;
            for parameter in parts {
                if let Some((name, q)) = parameter.split_once('=') {
                    if name.trim().eq_ignore_ascii_case("q") {
                        weight = q.trim().parse().unwrap_or(0.0);
                    }
                }
            }
            match coding.as_str() {
                "gzip" | "x-gzip" => gzip = Some(weight),
                "br" => br = Some(weight),
                "*" => any = Some(weight),
                _ => {}
            }
        }
    }
    let gzip = gzip.or(any).unwrap_or(0.0);
    let br = br.or(any).unwrap_or(0.0);
    if br > gzip {
        Encoding::Br
    } else if gzip > 0.0 {
        Encoding::Gzip
    } else {
        Encoding::Identity
    }
}

/// Every `If-None-Match` field line, joined as one list; `None` if absent
/// or not text.
fn if_none_match(headers: &HeaderMap) -> Option<String> {
    let values: Vec<&str> = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .map(|v| v.to_str())
        .collect::<Result<_, _>>()
        .ok()?;
    (!values.is_empty()).then(|| values.join(","))
}

/// RFC 9110 §13.1.2: `*` matches any current representation; otherwise a
/// list of entity tags, compared weakly (`W/"x"` matches `"x"`). A list that
/// does not parse matches nothing (the full answer is always safe).
fn matches(list: &str, etag: &str) -> bool {
    if list.trim() == "*" {
        return true;
    }
    let current = opaque(etag);
    entity_tags(list).is_some_and(|tags| tags.contains(&current))
}

/// The opaque tags (quotes included) of a list of entity tags, weakness
/// dropped; `None` if the list is malformed.
fn entity_tags(list: &str) -> Option<Vec<&str>> {
    let mut tags = Vec::new();
    let mut rest = list;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return Some(tags);
        }
        rest = rest.strip_prefix("W/").unwrap_or(rest);
        let inner = rest.strip_prefix('"')?;
        let end = inner.find('"')?;
        tags.push(&rest[..end + 2]);
        rest = &inner[end + 1..];
        if !(rest.is_empty() || rest.starts_with([' ', '\t', ','])) {
            return None;
        }
    }
}

fn opaque(etag: &str) -> &str {
    etag.strip_prefix("W/").unwrap_or(etag)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: &str = "\"0123456789abcdef\"";

    #[test]
    fn if_none_match_compares_weakly_and_reads_lists() {
        assert!(matches(TAG, TAG));
        assert!(matches("W/\"0123456789abcdef\"", TAG));
        assert!(matches("\"other\", W/\"0123456789abcdef\"", TAG));
        assert!(matches("\"a,b\",\"0123456789abcdef\"", TAG));
        assert!(matches(" * ", TAG));
        assert!(!matches("\"other\"", TAG));
        assert!(
            !matches("0123456789abcdef", TAG),
            "an unquoted tag is malformed"
        );
        assert!(!matches("\"0123456789abcdef", TAG));
        assert!(!matches("\"x\"y, \"0123456789abcdef\"", TAG));
        assert!(!matches("", TAG));
    }

    fn accepting(values: &[&str]) -> Encoding {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(
                header::ACCEPT_ENCODING,
                HeaderValue::from_str(value).unwrap(),
            );
        }
        preferred_encoding(&headers)
    }

    #[test]
    fn accept_encoding_picks_gzip_on_a_tie_and_br_only_when_preferred() {
        assert_eq!(accepting(&[]), Encoding::Identity);
        assert_eq!(accepting(&["identity"]), Encoding::Identity);
        assert_eq!(accepting(&["gzip, deflate, br, zstd"]), Encoding::Gzip);
        assert_eq!(accepting(&["br"]), Encoding::Br);
        assert_eq!(accepting(&["gzip;q=0.5, br"]), Encoding::Br);
        assert_eq!(accepting(&["GZIP;Q=0.9", "br;q=0.1"]), Encoding::Gzip);
        assert_eq!(accepting(&["gzip;q=0, br;q=0"]), Encoding::Identity);
        assert_eq!(accepting(&["*"]), Encoding::Gzip);
        assert_eq!(accepting(&["*;q=0.2, br;q=0.8"]), Encoding::Br);
        assert_eq!(accepting(&["deflate"]), Encoding::Identity);
    }
}
