//! Large read answers (availability, show, history): compressed when the
//! client accepts `gzip` or `br`, tagged with a strong `ETag`, and answered
//! 304 with no body when `If-None-Match` names the current tag.
//!
//! Written once, as a layer a route opts into with [`cached`]. Nothing else
//! in the router compresses: there is no global `CompressionLayer`, so a
//! route that must never be compressed (a future `text/event-stream`, whose
//! events a compressor would hold back in its buffer) is left out by
//! construction, simply by not being wrapped.

use std::convert::Infallible;
use std::ops::Range;

use axum::body::{to_bytes, Body, Bytes, HttpBody as _};
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use sha2::{Digest, Sha256};
use tower_http::compression::CompressionLayer;

/// Hex characters of the SHA-256 of the body kept in the tag: 64 bits, so an
/// accidental collision between two versions of one answer is out of reach,
/// and the header stays short.
pub const ETAG_HEX_CHARS: usize = 16;

/// Answers larger than this pass through untagged. The handlers build their
/// bodies in memory anyway (a 100,000-seat availability is about 6 MB), so
/// reading one back costs no extra allocation; the bound only guarantees
/// the layer never buffers something unbounded.
pub const MAX_TAGGED_BODY_BYTES: usize = 64 * 1024 * 1024;

/// A response extension a handler may attach: the byte range of its body
/// that the tag leaves out. Availability names its `as_of`, the instant of
/// the answer, which moves with every request while the statuses it
/// describes do not; leaving it out lets an unchanged availability keep its
/// tag. The body itself is sent whole.
#[derive(Debug, Clone)]
pub struct UntaggedRange(pub Range<usize>);

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
    let untagged = parts.extensions.remove::<UntaggedRange>();
    let etag = etag_of(&bytes, untagged.map(|r| r.0));
    let Ok(value) = HeaderValue::from_str(&etag) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    if if_none_match.is_some_and(|list| matches(&list, &etag)) {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, value)]).into_response();
    }
    parts.headers.insert(header::ETAG, value);
    Response::from_parts(parts, Body::from(bytes))
}

/// `"` + the first [`ETAG_HEX_CHARS`] hex characters of the SHA-256 of the
/// body (without `untagged`, if given and inside it) + `"`.
pub fn etag_of(body: &Bytes, untagged: Option<Range<usize>>) -> String {
    let mut hasher = Sha256::new();
    match untagged.filter(|r| r.start <= r.end && r.end <= body.len()) {
        Some(range) => {
            hasher.update(&body[..range.start]);
            hasher.update(&body[range.end..]);
        }
        None => hasher.update(body),
    }
    let digest = hex::encode(hasher.finalize());
    format!("\"{}\"", &digest[..ETAG_HEX_CHARS])
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

    #[test]
    fn the_tag_is_16_hex_characters_of_the_body_without_the_untagged_range() {
        let a = Bytes::from_static(b"{\"as_of\":\"1\",\"seats\":[]}");
        let b = Bytes::from_static(b"{\"as_of\":\"2\",\"seats\":[]}");
        let tag = etag_of(&a, None);
        assert_eq!(tag.len(), ETAG_HEX_CHARS + 2);
        assert_ne!(tag, etag_of(&b, None));
        assert_eq!(etag_of(&a, Some(9..12)), etag_of(&b, Some(9..12)));
        assert_eq!(etag_of(&a, Some(9..100)), tag, "a range outside is ignored");
    }
}
