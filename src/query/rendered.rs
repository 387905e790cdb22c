//! An answer rendered once and served many times: its body, its strong
//! `ETag`, and its compressed forms, each made the first time a client asks
//! for it and then kept with the body (compressed once, not per request).

use std::sync::Arc;

use axum::body::Bytes;
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

/// Hex characters of the SHA-256 of the body kept in the tag: 64 bits, so an
/// accidental collision between two versions of one answer is out of reach,
/// and the header stays short.
pub const ETAG_HEX_CHARS: usize = 16;

/// gzip level of a rendered answer. Level 1 compresses the 5.6 MB answer of
/// a 100,000-seat show to about 340 KB in about 25 ms; level 6 saves
/// another 15 % for more than twice the time, paid again at every change
/// of the show during an onsale.
pub const GZIP_LEVEL: u32 = 1;

/// Brotli quality of a rendered answer (0..=11). Above 4 the time grows
/// steeply (11 takes seconds for a large answer); br is only chosen for a
/// client that prefers it to gzip.
pub const BROTLI_QUALITY: u32 = 4;

/// Brotli window (log2 of bytes): 4 MB, so the repetitive seat list is
/// matched across the whole of a large answer.
const BROTLI_WINDOW_LOG2: u32 = 22;

/// How a body is sent (`Content-Encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    Gzip,
    Br,
}

impl Encoding {
    /// The `Content-Encoding` value; `None` for identity.
    pub fn header_value(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Gzip => Some("gzip"),
            Encoding::Br => Some("br"),
        }
    }
}

/// One rendered answer. Immutable once built, shared behind an `Arc`.
pub struct Rendered {
    body: Bytes,
    etag: String,
    gzip: OnceCell<Bytes>,
    br: OnceCell<Bytes>,
}

impl Rendered {
    /// The body and its tag (the SHA-256 of the whole body: a strong tag
    /// names exactly these bytes).
    pub fn new(body: impl Into<Bytes>) -> Self {
        let body = body.into();
        let etag = etag_of(&body);
        Rendered {
            body,
            etag,
            gzip: OnceCell::new(),
            br: OnceCell::new(),
        }
    }

    pub fn etag(&self) -> &str {
        &self.etag
    }

    /// The body in `encoding`, compressed on the first call for that
    /// encoding (off the async workers: 25 ms for a large answer) and kept.
    /// Should compression fail, the identity body, with `Identity`.
    pub async fn encoded(self: &Arc<Self>, encoding: Encoding) -> (Encoding, Bytes) {
        let cell = match encoding {
            Encoding::Identity => return (Encoding::Identity, self.body.clone()),
            Encoding::Gzip => &self.gzip,
            Encoding::Br => &self.br,
        };
        let body = self.body.clone();
        let compressed = cell
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || compress(&body, encoding))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())
            })
            .await;
        match compressed {
            Ok(bytes) => (encoding, bytes.clone()),
            Err(error) => {
                tracing::warn!(%error, ?encoding, "an answer could not be compressed");
                (Encoding::Identity, self.body.clone())
            }
        }
    }

    /// Bytes held: the body and the compressed forms made so far.
    pub fn held_bytes(&self) -> usize {
        self.body.len()
            + self.gzip.get().map_or(0, Bytes::len)
            + self.br.get().map_or(0, Bytes::len)
    }
}

fn compress(body: &[u8], encoding: Encoding) -> std::io::Result<Bytes> {
    use std::io::Write;
    match encoding {
        Encoding::Identity => Ok(Bytes::copy_from_slice(body)),
        Encoding::Gzip => {
            let out = Vec::with_capacity(body.len() / 8);
            let mut encoder =
                flate2::write::GzEncoder::new(out, flate2::Compression::new(GZIP_LEVEL));
            encoder.write_all(body)?;
            Ok(encoder.finish()?.into())
        }
        Encoding::Br => {
            let mut out = Vec::with_capacity(body.len() / 8);
            let params = brotli::enc::BrotliEncoderParams {
                quality: BROTLI_QUALITY as i32,
                lgwin: BROTLI_WINDOW_LOG2 as i32,
                ..Default::default()
            };
            brotli::BrotliCompress(&mut &body[..], &mut out, &params)?;
            Ok(out.into())
        }
    }
}

/// `"` + the first [`ETAG_HEX_CHARS`] hex characters of the SHA-256 of the
/// body + `"`.
pub fn etag_of(body: &[u8]) -> String {
    let digest = hex::encode(Sha256::digest(body));
    format!("\"{}\"", &digest[..ETAG_HEX_CHARS])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[tokio::test]
    async fn each_encoding_decodes_to_the_body_and_is_made_once() {
        let body: String = (0..2000)
            .map(|n| format!("{{\"seat_id\":\"S{n}\",\"status\":\"available\"}},"))
            .collect();
        let rendered = Arc::new(Rendered::new(body.clone()));
        let (encoding, gzip) = rendered.encoded(Encoding::Gzip).await;
        assert_eq!(encoding, Encoding::Gzip);
        let mut decoded = String::new();
        flate2::read::GzDecoder::new(&gzip[..])
            .read_to_string(&mut decoded)
            .unwrap();
        assert_eq!(decoded, body);
        let (_, again) = rendered.encoded(Encoding::Gzip).await;
        assert_eq!(again.as_ptr(), gzip.as_ptr(), "kept, not compressed again");
        let (encoding, br) = rendered.encoded(Encoding::Br).await;
        assert_eq!(encoding, Encoding::Br);
        let mut decoded = String::new();
        brotli::Decompressor::new(&br[..], 4096)
            .read_to_string(&mut decoded)
            .unwrap();
        assert_eq!(decoded, body);
        let (encoding, identity) = rendered.encoded(Encoding::Identity).await;
        assert_eq!(
            (encoding, &identity[..]),
            (Encoding::Identity, body.as_bytes())
        );
        assert_eq!(rendered.held_bytes(), body.len() + gzip.len() + br.len());
    }

    #[test]
    fn the_tag_is_16_hex_characters_of_the_whole_body() {
        let tag = etag_of(b"{\"as_of\":\"1\",\"seats\":[]}");
        assert_eq!(tag.len(), ETAG_HEX_CHARS + 2);
        assert!(tag.starts_with('"') && tag.ends_with('"'));
        assert_ne!(tag, etag_of(b"{\"as_of\":\"2\",\"seats\":[]}"));
    }
}
