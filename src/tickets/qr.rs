//! A ticket's code as a QR code, in SVG (for the page, scales to any size
//! and prints sharp) and PNG (for a wallet or an email). The matrix comes
//! from the `qrcode` crate; the PNG is written here (grayscale, one zlib
//! stream, as the format defines it) rather than through an image crate.

use std::io::Write;

use qrcode::{Color, EcLevel, QrCode};

/// Error correction: medium (15 %): a phone screen with a crack or glare
/// still scans, and a 400-character code stays a version a door scanner
/// reads at arm's length.
const EC_LEVEL: EcLevel = EcLevel::M;

/// White modules around the code, as the standard asks (4).
const QUIET_ZONE_MODULES: usize = 4;

/// Pixels per module in the PNG: about 300 px across for a ticket's code.
const PNG_PIXELS_PER_MODULE: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum QrError {
    #[error("the code does not fit a QR code: {0}")]
    TooLong(String),
    #[error("writing the PNG: {0}")]
    Png(#[from] std::io::Error),
}

fn matrix(code: &str) -> Result<QrCode, QrError> {
    QrCode::with_error_correction_level(code.as_bytes(), EC_LEVEL)
        .map_err(|e| QrError::TooLong(e.to_string()))
}

/// The QR code of `code` as an SVG document (black on white, with its quiet
/// zone; sized by its container).
pub fn svg(code: &str) -> Result<String, QrError> {
    Ok(matrix(code)?
        .render::<qrcode::render::svg::Color<'_>>()
        .quiet_zone(true)
        .min_dimensions(240, 240)
        .build())
}

/// The QR code of `code` as a PNG image (8-bit grayscale).
pub fn png(code: &str) -> Result<Vec<u8>, QrError> {
    let qr = matrix(code)?;
    let modules = qr.width();
    let colors = qr.to_colors();
    let side = (modules + 2 * QUIET_ZONE_MODULES) * PNG_PIXELS_PER_MODULE;
    let dark_at = |x: usize, y: usize| {
        let (mx, my) = (x / PNG_PIXELS_PER_MODULE, y / PNG_PIXELS_PER_MODULE);
        let inside = |m: usize| (QUIET_ZONE_MODULES..QUIET_ZONE_MODULES + modules).contains(&m);
        inside(mx)
            && inside(my)
            && colors[(my - QUIET_ZONE_MODULES) * modules + (mx - QUIET_ZONE_MODULES)]
                == Color::Dark
    };
    // Each scanline: filter type 0 (none), then one byte a pixel.
    let mut raw = Vec::with_capacity(side * (side + 1));
    for y in 0..side {
        raw.push(0u8);
        raw.extend((0..side).map(|x| if dark_at(x, y) { 0u8 } else { 255u8 }));
    }
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    zlib.write_all(&raw)?;
    let idat = zlib.finish()?;
    let side = u32::try_from(side).unwrap_or(u32::MAX);
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend(side.to_be_bytes());
    ihdr.extend(side.to_be_bytes());
    // Bit depth 8, colour type 0 (grayscale), deflate, no filter set, no interlace.
    ihdr.extend([8, 0, 0, 0, 0]);
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    for (kind, data) in [(b"IHDR", ihdr), (b"IDAT", idat), (b"IEND", Vec::new())] {
        chunk(&mut png, kind, &data);
    }
    Ok(png)
}

/// One PNG chunk: its length, type, data and the CRC-32 of type and data.
fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend(u32::try_from(data.len()).unwrap_or(u32::MAX).to_be_bytes());
    png.extend(kind);
    png.extend(data);
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    png.extend(crc.finalize().to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_of_the_longest_length_is_drawn_in_both_formats() {
        let code = "x".repeat(super::super::code::MAX_CODE_CHARS);
        let svg = svg(&code).unwrap();
        assert!(
            svg.starts_with("<?xml") && svg.contains("<svg"),
            "{}",
            &svg[..80]
        );
        let png = png(&code).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(&png[png.len() - 8..png.len() - 4], b"IEND");
        // The image is square and holds the matrix with its quiet zone.
        let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
        let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
        assert_eq!(width, height);
        let modules = matrix(&code).unwrap().width();
        assert_eq!(width as usize, (modules + 8) * PNG_PIXELS_PER_MODULE);
    }

    #[test]
    fn the_png_decodes_to_the_matrix() {
        let code = "ticket";
        let png = png(code).unwrap();
        // The one IDAT chunk, inflated: scanlines of filter byte + pixels.
        let idat_len = u32::from_be_bytes(png[33..37].try_into().unwrap()) as usize;
        assert_eq!(&png[37..41], b"IDAT");
        let mut raw = Vec::new();
        use std::io::Read;
        flate2::read::ZlibDecoder::new(&png[41..41 + idat_len])
            .read_to_end(&mut raw)
            .unwrap();
        let qr = matrix(code).unwrap();
        let side = (qr.width() + 8) * PNG_PIXELS_PER_MODULE;
        assert_eq!(raw.len(), side * (side + 1));
        // The top-left finder pattern's corner module is dark.
        let (x, y) = (4 * PNG_PIXELS_PER_MODULE, 4 * PNG_PIXELS_PER_MODULE);
        assert_eq!(raw[y * (side + 1) + 1 + x], 0);
        assert_eq!(raw[1], 255, "the quiet zone is white");
    }
}
