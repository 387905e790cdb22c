//! An answer rendered once and served many times: its body, its strong
//! `ETag`, and its compressed forms, each made the first time a client asks
//! for it and then kept with the body (compressed once, not per request).
//!
//! A body is a sequence of [`Piece`]s (availability: a head, blocks of seats,
//! a tail), each hashed once and deflated once when first needed, so an
//! answer written again after a change costs the pieces that changed: its
//! gzip form is the pieces' deflate streams joined into one gzip member
//! (each piece's stream ends in a sync flush, byte-aligned and not final;
//! the CRC-32s are combined), its tag the SHA-256 of the pieces' digests,
//! and its identity body the pieces sent one after another, never copied.

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

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

/// The gzip member header (RFC 1952): deflate, no flags, no time, no extra
/// flags, OS unknown.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// The deflate block that ends the joined stream: final, fixed Huffman
/// codes, nothing but the end-of-block symbol (RFC 1951 §3.2.6).
const FINAL_EMPTY_BLOCK: [u8; 2] = [0x03, 0x00];

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

/// A part of a body: its bytes, their SHA-256, and (made on first need,
/// then kept) their raw deflate stream ending in a sync flush, with the
/// CRC-32 of the bytes. Shared by every answer that contains it.
pub struct Piece {
    bytes: Bytes,
    digest: [u8; 32],
    deflated: OnceLock<(Bytes, crc32fast::Hasher)>,
}

impl Piece {
    pub fn new(bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        let digest = Sha256::digest(&bytes).into();
        Piece {
            bytes,
            digest,
            deflated: OnceLock::new(),
        }
    }

    /// The raw deflate stream of the bytes, flushed (byte-aligned, no final
    /// block) so that streams of consecutive pieces join into one; made on
    /// the first call (blocking: call it off the async workers), then kept.
    fn deflated(&self) -> std::io::Result<&(Bytes, crc32fast::Hasher)> {
        if let Some(done) = self.deflated.get() {
            return Ok(done);
        }
        let mut compress = flate2::Compress::new(flate2::Compression::new(GZIP_LEVEL), false);
        let mut out = Vec::with_capacity(self.bytes.len() / 8 + 64);
        loop {
            let consumed = usize::try_from(compress.total_in()).unwrap_or(usize::MAX);
            let input = self.bytes.get(consumed..).unwrap_or_default();
            compress
                .compress_vec(input, &mut out, flate2::FlushCompress::Sync)
                .map_err(std::io::Error::other)?;
            let all_in = compress.total_in() == self.bytes.len() as u64;
            // zlib's rule: the flush is complete once a call leaves room in
            // the output.
            if all_in && out.len() < out.capacity() {
                break;
            }
            out.reserve(out.capacity().max(64));
        }
        let mut crc = crc32fast::Hasher::new();
        crc.update(&self.bytes);
        Ok(self.deflated.get_or_init(|| (out.into(), crc)))
    }
}

/// One rendered answer. Immutable once built, shared behind an `Arc`.
pub struct Rendered {
    pieces: Vec<Arc<Piece>>,
    len: usize,
    etag: String,
    gzip: OnceCell<Bytes>,
    br: OnceCell<Bytes>,
}

impl Rendered {
    /// A body of one piece; its tag is the SHA-256 of the body itself (as
    /// [`etag_of`]).
    pub fn new(body: impl Into<Bytes>) -> Self {
        Self::from_pieces(vec![Arc::new(Piece::new(body))])
    }

    /// A body made of `pieces`, in order. Its tag names exactly these bytes:
    /// the SHA-256 of the body for one piece, else the SHA-256 of the
    /// pieces' digests (equal tags mean equal pieces, so equal bytes).
    pub fn from_pieces(pieces: Vec<Arc<Piece>>) -> Self {
        let digest: [u8; 32] = match pieces.as_slice() {
            [one] => one.digest,
            many => {
                let mut hasher = Sha256::new();
                for piece in many {
                    hasher.update(piece.digest);
                }
                hasher.finalize().into()
            }
        };
        Rendered {
            len: pieces.iter().map(|p| p.bytes.len()).sum(),
            pieces,
            etag: tag_of_digest(&digest),
            gzip: OnceCell::new(),
            br: OnceCell::new(),
        }
    }

    pub fn etag(&self) -> &str {
        &self.etag
    }

    /// The body in `encoding`, compressed on the first call for that
    /// encoding (off the async workers) and kept; gzip reuses the deflate
    /// streams its pieces already have. Should compression fail, the
    /// identity body, with `Identity`.
    pub async fn encoded(self: &Arc<Self>, encoding: Encoding) -> (Encoding, Chunks) {
        let cell = match encoding {
            Encoding::Identity => return (Encoding::Identity, self.identity()),
            Encoding::Gzip => &self.gzip,
            Encoding::Br => &self.br,
        };
        let this = self.clone();
        let compressed = cell
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || match encoding {
                    Encoding::Gzip => this.gzip(),
                    _ => compress(&this.joined(), encoding),
                })
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())
            })
            .await;
        match compressed {
            Ok(bytes) => (encoding, Chunks::one(bytes.clone())),
            Err(error) => {
                tracing::warn!(%error, ?encoding, "an answer could not be compressed");
                (Encoding::Identity, self.identity())
            }
        }
    }

    fn identity(&self) -> Chunks {
        Chunks {
            chunks: self.pieces.iter().map(|p| p.bytes.clone()).collect(),
            remaining: self.len as u64,
        }
    }

    /// The whole body in one buffer (for brotli, which cannot join pieces).
    pub(crate) fn joined(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.len);
        for piece in &self.pieces {
            body.extend_from_slice(&piece.bytes);
        }
        body
    }

    /// One gzip member: the header, each piece's deflate stream (made now
    /// if it has none yet), an empty final block, the combined CRC-32 and
    /// the length.
    fn gzip(&self) -> std::io::Result<Bytes> {
        let mut deflated = Vec::with_capacity(self.pieces.len());
        for piece in &self.pieces {
            deflated.push(piece.deflated()?);
        }
        let size = deflated.iter().map(|(bytes, _)| bytes.len()).sum::<usize>();
        let mut out = Vec::with_capacity(GZIP_HEADER.len() + size + FINAL_EMPTY_BLOCK.len() + 8);
        out.extend_from_slice(&GZIP_HEADER);
        let mut crc = crc32fast::Hasher::new();
        for (bytes, piece_crc) in deflated {
            out.extend_from_slice(bytes);
            crc.combine(piece_crc);
        }
        out.extend_from_slice(&FINAL_EMPTY_BLOCK);
        out.extend_from_slice(&crc.finalize().to_le_bytes());
        // ISIZE: the length modulo 2^32 (RFC 1952).
        out.extend_from_slice(&(self.len as u32).to_le_bytes());
        Ok(out.into())
    }

    /// Bytes held: the pieces (shared with other answers of the same show)
    /// and the compressed forms made so far.
    pub fn held_bytes(&self) -> usize {
        self.len + self.gzip.get().map_or(0, Bytes::len) + self.br.get().map_or(0, Bytes::len)
    }
}

/// A response body sent as the buffers it is kept in, one frame each, with
/// its exact length known (a `Content-Length`, not chunked).
pub struct Chunks {
    chunks: std::collections::VecDeque<Bytes>,
    remaining: u64,
}

impl Chunks {
    fn one(bytes: Bytes) -> Self {
        Chunks {
            remaining: bytes.len() as u64,
            chunks: std::collections::VecDeque::from([bytes]),
        }
    }
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        while let Some(chunk) = self.chunks.pop_front() {
            if !chunk.is_empty() {
                self.remaining -= chunk.len() as u64;
                return Poll::Ready(Some(Ok(http_body::Frame::data(chunk))));
            }
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
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
    tag_of_digest(&Sha256::digest(body).into())
}

fn tag_of_digest(digest: &[u8; 32]) -> String {
    let hex = hex::encode(digest);
    format!("\"{}\"", &hex[..ETAG_HEX_CHARS])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    async fn bytes(chunks: Chunks) -> Vec<u8> {
        use http_body_util::BodyExt;
        let collected = chunks.collect().await.map(|c| c.to_bytes());
        match collected {
            Ok(bytes) => bytes.to_vec(),
            Err(never) => match never {},
        }
    }

    fn seats(from: usize, to: usize) -> String {
        (from..to)
            .map(|n| format!("{{\"seat_id\":\"S{n}\",\"status\":\"available\"}},"))
            .collect()
    }

    #[tokio::test]
    async fn each_encoding_decodes_to_the_body_and_is_made_once() {
        let body = seats(0, 2000);
        let rendered = Arc::new(Rendered::new(body.clone()));
        assert_eq!(rendered.etag(), etag_of(body.as_bytes()));
        let (encoding, gzip) = rendered.encoded(Encoding::Gzip).await;
        assert_eq!(encoding, Encoding::Gzip);
        let gzip = bytes(gzip).await;
        let mut decoded = String::new();
        flate2::read::GzDecoder::new(&gzip[..])
            .read_to_string(&mut decoded)
            .unwrap();
        assert_eq!(decoded, body);
        let (_, again) = rendered.encoded(Encoding::Gzip).await;
        assert_eq!(
            again.chunks[0].as_ptr(),
            rendered.gzip.get().unwrap().as_ptr(),
            "kept, not compressed again"
        );
        let (encoding, br) = rendered.encoded(Encoding::Br).await;
        assert_eq!(encoding, Encoding::Br);
        let br = bytes(br).await;
        let mut decoded = String::new();
        brotli::Decompressor::new(&br[..], 4096)
            .read_to_string(&mut decoded)
            .unwrap();
        assert_eq!(decoded, body);
        let (encoding, identity) = rendered.encoded(Encoding::Identity).await;
        assert_eq!(
            (encoding, bytes(identity).await),
            (Encoding::Identity, body.clone().into_bytes())
        );
        assert_eq!(rendered.held_bytes(), body.len() + gzip.len() + br.len());
    }

    #[tokio::test]
    async fn pieces_join_into_one_gzip_member_and_one_tag_of_their_bytes() {
        let parts = [
            "{\"head\":[".to_owned(),
            seats(0, 3000),
            String::new(),
            seats(3000, 3001),
            "]}".to_owned(),
        ];
        let pieces: Vec<Arc<Piece>> = parts
            .iter()
            .map(|p| Arc::new(Piece::new(p.clone())))
            .collect();
        let whole = parts.concat();
        let rendered = Arc::new(Rendered::from_pieces(pieces.clone()));
        let (encoding, identity) = rendered.encoded(Encoding::Identity).await;
        assert_eq!(
            (encoding, bytes(identity).await),
            (Encoding::Identity, whole.clone().into_bytes())
        );
        let (_, gzip) = rendered.encoded(Encoding::Gzip).await;
        let gzip = bytes(gzip).await;
        // One member: a single-member decoder reads the whole body, and
        // nothing follows the member.
        let mut decoder = flate2::read::GzDecoder::new(&gzip[..]);
        let mut decoded = String::new();
        decoder.read_to_string(&mut decoded).unwrap();
        assert_eq!(decoded, whole);
        assert!(decoder.into_inner().is_empty(), "nothing after the member");
        let level_one_whole = compress(whole.as_bytes(), Encoding::Gzip).unwrap();
        assert!(
            gzip.len() < level_one_whole.len() * 11 / 10,
            "joined pieces compress about as well as the whole ({} vs {})",
            gzip.len(),
            level_one_whole.len()
        );
        // The tag follows the bytes: the same pieces again, the same tag;
        // one piece changed, another.
        assert_eq!(
            Rendered::from_pieces(pieces.clone()).etag(),
            rendered.etag()
        );
        let mut changed = pieces.clone();
        changed[3] = Arc::new(Piece::new(seats(3001, 3002)));
        assert_ne!(
            Rendered::from_pieces(changed.clone()).etag(),
            rendered.etag()
        );
        // A piece's deflate stream is made once and serves every answer
        // that contains it.
        let kept = pieces[1].deflated().unwrap().0.as_ptr();
        let (_, _) = Arc::new(Rendered::from_pieces(changed))
            .encoded(Encoding::Gzip)
            .await;
        assert_eq!(pieces[1].deflated().unwrap().0.as_ptr(), kept);
    }

    #[test]
    fn the_tag_is_16_hex_characters_of_the_whole_body() {
        let tag = etag_of(b"{\"as_of\":\"1\",\"seats\":[]}");
        assert_eq!(tag.len(), ETAG_HEX_CHARS + 2);
        assert!(tag.starts_with('"') && tag.ends_with('"'));
        assert_ne!(tag, etag_of(b"{\"as_of\":\"2\",\"seats\":[]}"));
    }
}
