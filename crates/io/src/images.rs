//! Image files: PNG for colour, 16-bit depth (TUM convention) and 16-bit instance ids. PNGs of the common
//! colour types are read by the `png` crate (about 3x faster than OpenCV's codec here, see [`decode_png`]);
//! anything else goes through OpenCV's codecs (imgcodecs: any format OpenCV reads). PNG output goes through
//! the `png` crate, which is six times faster at our settings (see [`encode_png`]).

use std::path::Path;

use opencv::core::{CV_8UC1, CV_8UC3, CV_16UC1, Mat, Vector};
use opencv::imgcodecs;
use opencv::prelude::*;

use gst_core::{DepthImage, Image, InstanceImage, RgbImage};

use crate::{IoError, atomic_write};

/// PNG colour types the writers produce.
#[derive(Clone, Copy)]
enum PngKind {
    Rgb8,
    Gray8,
    Gray16,
}

/// Encodes raw pixel bytes (16-bit samples big-endian, as PNG stores them) as a PNG in memory.
///
/// Encoding goes through the `png` crate rather than OpenCV: with fdeflate's fast compression and the Paeth
/// filter it takes 2.2 ms for a 640x512 colour frame and 0.9 ms for a 16-bit depth frame, where OpenCV's
/// libpng path takes 12.9 ms and 10.9 ms at similar sizes (measured on this machine; the TUM export writes
/// two per frame). Same pixels, same bytes.
fn encode_png(path: &Path, width: u32, height: u32, kind: PngKind, bytes: &[u8]) -> Result<Vec<u8>, IoError> {
    let fail = |e: png::EncodingError| IoError::Encode { path: path.into(), message: e.to_string() };
    let mut out = Vec::with_capacity(bytes.len() / 3);
    let mut encoder = png::Encoder::new(&mut out, width, height);
    let (color, depth) = match kind {
        PngKind::Rgb8 => (png::ColorType::Rgb, png::BitDepth::Eight),
        PngKind::Gray8 => (png::ColorType::Grayscale, png::BitDepth::Eight),
        PngKind::Gray16 => (png::ColorType::Grayscale, png::BitDepth::Sixteen),
    };
    encoder.set_color(color);
    encoder.set_depth(depth);
    encoder.set_compression(png::Compression::Fast);
    encoder.set_filter(png::FilterType::Paeth);
    encoder.set_adaptive_filter(png::AdaptiveFilterType::NonAdaptive);
    let mut writer = encoder.write_header().map_err(fail)?;
    writer.write_image_data(bytes).map_err(fail)?;
    writer.finish().map_err(fail)?;
    Ok(out)
}

/// Writes an RGB image as an 8-bit PNG.
pub fn write_rgb_png(path: &Path, image: &RgbImage) -> Result<(), IoError> {
    let bytes: Vec<u8> = image.data().iter().flatten().copied().collect();
    atomic_write(path, &encode_png(path, image.width(), image.height(), PngKind::Rgb8, &bytes)?)
}

/// Writes a single-channel 8-bit image as a PNG.
pub fn write_gray_png(path: &Path, image: &Image<u8>) -> Result<(), IoError> {
    atomic_write(path, &encode_png(path, image.width(), image.height(), PngKind::Gray8, image.data())?)
}

/// Writes depth as a 16-bit PNG in units of `1 / depth_scale` metres (TUM: 5000, i.e. 0.2 mm); 0 = missing.
/// Depths beyond the 16-bit range (13.1 m at scale 5000) are written as missing.
pub fn write_depth_png(path: &Path, depth: &DepthImage, depth_scale: f64) -> Result<(), IoError> {
    let to_units = |d: &f32| {
        let units = (f64::from(*d) * depth_scale).round();
        if d.is_finite() && units > 0.0 && units <= f64::from(u16::MAX) { units as u16 } else { 0 }
    };
    let bytes: Vec<u8> = depth.data().iter().flat_map(|d| to_units(d).to_be_bytes()).collect();
    atomic_write(path, &encode_png(path, depth.width(), depth.height(), PngKind::Gray16, &bytes)?)
}

/// Writes instance ids as a 16-bit PNG (0 = structure or nothing).
pub fn write_instance_png(path: &Path, ids: &InstanceImage) -> Result<(), IoError> {
    atomic_write(path, &encode_gray16_png(ids.width(), ids.height(), ids.data(), path)?)
}

/// Encodes 16-bit grey samples (row-major) as a PNG in memory, with the fast settings of the writers here;
/// `what` names the image in errors.
pub fn encode_gray16_png(width: u32, height: u32, samples: &[u16], what: &Path) -> Result<Vec<u8>, IoError> {
    let bytes: Vec<u8> = samples.iter().flat_map(|v| v.to_be_bytes()).collect();
    encode_png(what, width, height, PngKind::Gray16, &bytes)
}

/// Encodes an RGB image as JPEG in memory (OpenCV's libjpeg, `quality` 1–100); `what` names the image in
/// errors. What VLM backends send: images travel as base64 JPEG data URLs.
pub fn encode_jpeg(image: &RgbImage, quality: u8, what: &Path) -> Result<Vec<u8>, IoError> {
    let fail = |message: String| IoError::Encode { path: what.into(), message };
    let bgr: Vec<u8> = image.data().iter().flat_map(|&[r, g, b]| [b, g, r]).collect();
    let flat = Mat::from_slice(&bgr).map_err(|e| fail(e.to_string()))?;
    let mat = flat.reshape(3, image.height() as i32).map_err(|e| fail(e.to_string()))?;
    let params =
        Vector::<i32>::from_slice(&[imgcodecs::IMWRITE_JPEG_QUALITY, i32::from(quality.clamp(1, 100))]);
    let mut out = Vector::<u8>::new();
    let written = imgcodecs::imencode(".jpg", &mat, &mut out, &params).map_err(|e| fail(e.to_string()))?;
    if !written {
        return Err(fail("OpenCV could not encode the image as JPEG".into()));
    }
    Ok(out.to_vec())
}

/// What a reader wants a file's pixels as.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wanted {
    /// 8-bit colour (grey replicated, alpha dropped: what OpenCV's `IMREAD_COLOR` gives).
    Rgb8,
    /// 8-bit grey, stored as such.
    Gray8,
    /// 16-bit grey, stored as such.
    Gray16,
}

const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];

/// A PNG read by the `png` crate: pixel bytes in the layout `wanted` asks for (RGB triplets, grey bytes, or
/// 16-bit samples native-endian), width and height. `None` where the file is not a PNG, its colour type needs
/// a conversion OpenCV defines (16-bit colour, palettes, grey asked of colour), or the crate cannot read it:
/// OpenCV then reads it, and reports what is wrong with a broken file.
///
/// Measured on the 640x512 frames of a TUM export (`gst generate`, Paeth filter, fast deflate): 3.2 ms a colour
/// frame and 2.5 ms a depth frame, where `imdecode` and its copy-out took 10.3 ms and 5.9 ms. The pixels are
/// the same (PNG is lossless; `reads_pngs_like_opencv` checks every colour type against OpenCV).
fn decode_png(bytes: &[u8], wanted: Wanted) -> Option<(Vec<u8>, u32, u32)> {
    if !bytes.starts_with(&PNG_SIGNATURE) {
        return None;
    }
    let mut reader = png::Decoder::new(bytes).read_info().ok()?;
    let (color, depth) = reader.output_color_type();
    let supported = match wanted {
        Wanted::Rgb8 => {
            depth == png::BitDepth::Eight
                && matches!(
                    color,
                    png::ColorType::Rgb
                        | png::ColorType::Rgba
                        | png::ColorType::Grayscale
                        | png::ColorType::GrayscaleAlpha
                )
        }
        Wanted::Gray8 => depth == png::BitDepth::Eight && color == png::ColorType::Grayscale,
        Wanted::Gray16 => depth == png::BitDepth::Sixteen && color == png::ColorType::Grayscale,
    };
    if !supported {
        return None;
    }
    let mut raw = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut raw).ok()?;
    raw.truncate(info.buffer_size());
    let (width, height) = (info.width, info.height);
    let pixels = match (wanted, color) {
        (Wanted::Rgb8, png::ColorType::Rgb) | (Wanted::Gray8, _) => raw,
        (Wanted::Rgb8, png::ColorType::Rgba) => {
            raw.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect()
        }
        (Wanted::Rgb8, png::ColorType::GrayscaleAlpha) => {
            raw.chunks_exact(2).flat_map(|p| [p[0], p[0], p[0]]).collect()
        }
        (Wanted::Rgb8, _) => raw.iter().flat_map(|&g| [g, g, g]).collect(),
        (Wanted::Gray16, _) => {
            raw.chunks_exact(2).flat_map(|p| u16::from_be_bytes([p[0], p[1]]).to_ne_bytes()).collect()
        }
    };
    let bytes_per_pixel = if wanted == Wanted::Rgb8 {
        3
    } else if wanted == Wanted::Gray16 {
        2
    } else {
        1
    };
    (pixels.len() == width as usize * height as usize * bytes_per_pixel).then_some((pixels, width, height))
}

fn read_file(path: &Path) -> Result<Vec<u8>, IoError> {
    let bytes = std::fs::read(path).map_err(|source| IoError::Io { path: path.into(), source })?;
    if bytes.is_empty() {
        return Err(IoError::Decode { path: path.into(), message: "the file is empty".into() });
    }
    if let Some((width, height)) = header_size(&bytes) {
        gst_core::limits::check_image_size(width, height)
            .map_err(|e| IoError::Decode { path: path.into(), message: format!("its header {e}") })?;
    }
    Ok(bytes)
}

fn be16(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?])))
}

fn le16(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u16::from_le_bytes([*b.get(at)?, *b.get(at + 1)?])))
}

fn be32(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?)))
}

fn le32(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?)))
}

/// The width and height an image file's header claims, read before any decoder allocates for them: PNG,
/// JPEG (any start-of-frame marker), BMP, PNM, GIF and WebP. `None` for other formats and headers too short
/// to tell; OpenCV then applies its own limit (2^30 pixels) to those.
pub fn header_size(bytes: &[u8]) -> Option<(u64, u64)> {
    if bytes.starts_with(&PNG_SIGNATURE) {
        return (bytes.get(12..16)? == b"IHDR").then_some((be32(bytes, 16)?, be32(bytes, 20)?));
    }
    if bytes.starts_with(&[0xFF, 0xD8]) {
        // JPEG: walk the marker segments to the first start-of-frame (SOF0..SOF15 but DHT, JPG, DAC).
        let mut at = 2;
        while at + 4 <= bytes.len() {
            if bytes[at] != 0xFF {
                return None;
            }
            let marker = bytes[at + 1];
            if marker == 0xFF {
                at += 1;
                continue;
            }
            if (0xD0..=0xD9).contains(&marker) || marker == 0x01 {
                at += 2;
                continue;
            }
            let length = be16(bytes, at + 2)? as usize;
            if (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
                return Some((be16(bytes, at + 7)?, be16(bytes, at + 5)?));
            }
            at += 2 + length;
        }
        return None;
    }
    if bytes.starts_with(b"BM") {
        let height = le32(bytes, 22)? as u32 as i32;
        return Some((le32(bytes, 18)?, u64::from(height.unsigned_abs())));
    }
    if bytes.starts_with(b"GIF8") {
        return Some((le16(bytes, 6)?, le16(bytes, 8)?));
    }
    if bytes.starts_with(b"RIFF") && bytes.get(8..12)? == b"WEBP" {
        return match bytes.get(12..16)? {
            b"VP8 " => Some((le16(bytes, 26)? & 0x3FFF, le16(bytes, 28)? & 0x3FFF)),
            b"VP8L" => {
                let bits = le32(bytes, 21)?;
                Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
            }
            b"VP8X" => {
                let w = le32(bytes, 24)? & 0xFF_FFFF;
                let h = le32(bytes, 27)? & 0xFF_FFFF;
                Some((w + 1, h + 1))
            }
            _ => None,
        };
    }
    if bytes.len() > 2 && bytes[0] == b'P' && (b'1'..=b'6').contains(&bytes[1]) {
        // PNM: magic, then width and height as decimal tokens, with '#' comments between.
        let text = String::from_utf8_lossy(&bytes[2..bytes.len().min(512)]);
        let mut tokens =
            text.lines().map(|l| l.split('#').next().unwrap_or("")).flat_map(str::split_whitespace);
        let width = tokens.next()?.parse().ok()?;
        let height = tokens.next()?.parse().ok()?;
        return Some((width, height));
    }
    None
}

/// Reads an image file: through [`decode_png`] where it can, else through OpenCV with `flags`, checking
/// OpenCV's pixel type; `from` turns one pixel's bytes into a sample.
fn read_image<T: Copy>(
    path: &Path,
    wanted: Wanted,
    flags: i32,
    expected_type: i32,
    from: impl Fn(&[u8]) -> T,
) -> Result<Image<T>, IoError> {
    let bytes = read_file(path)?;
    decode_image(path, &bytes, wanted, flags, expected_type, from)
}

/// [`read_image`] on bytes in memory; `path` names them in errors.
fn decode_image<T: Copy>(
    path: &Path,
    bytes: &[u8],
    wanted: Wanted,
    flags: i32,
    expected_type: i32,
    from: impl Fn(&[u8]) -> T,
) -> Result<Image<T>, IoError> {
    if bytes.is_empty() {
        return Err(IoError::Decode { path: path.into(), message: "the image data is empty".into() });
    }
    let bytes_per_pixel = match wanted {
        Wanted::Rgb8 => 3,
        Wanted::Gray8 => 1,
        Wanted::Gray16 => 2,
    };
    if let Some((raw, width, height)) = decode_png(bytes, wanted) {
        let data: Vec<T> = raw.chunks_exact(bytes_per_pixel).map(&from).collect();
        return Image::from_vec(width, height, data)
            .map_err(|e| IoError::Decode { path: path.into(), message: e.to_string() });
    }
    let mat = decode_with_opencv(path, bytes, flags)?;
    // OpenCV's colour comes as BGR.
    if wanted == Wanted::Rgb8 {
        return pixels(path, &mat, expected_type, bytes_per_pixel, |b| from(&[b[2], b[1], b[0]]));
    }
    pixels(path, &mat, expected_type, bytes_per_pixel, from)
}

fn decode_with_opencv(path: &Path, bytes: &[u8], flags: i32) -> Result<Mat, IoError> {
    let fail = |message: String| IoError::Decode { path: path.into(), message };
    let buffer = Vector::<u8>::from_slice(bytes);
    let mat = imgcodecs::imdecode(&buffer, flags).map_err(|e| fail(e.to_string()))?;
    if mat.empty() {
        return Err(fail("not an image OpenCV can read (corrupt or unknown format)".into()));
    }
    Ok(mat)
}

fn pixels<T: Copy>(
    path: &Path,
    mat: &Mat,
    expected_type: i32,
    bytes_per_pixel: usize,
    from: impl Fn(&[u8]) -> T,
) -> Result<Image<T>, IoError> {
    let fail = |message: String| IoError::Decode { path: path.into(), message };
    if mat.typ() != expected_type {
        return Err(fail(format!("unexpected pixel type {} (expected {expected_type})", mat.typ())));
    }
    let continuous =
        if mat.is_continuous() { mat.clone() } else { mat.try_clone().map_err(|e| fail(e.to_string()))? };
    let bytes = continuous.data_bytes().map_err(|e| fail(e.to_string()))?;
    let data: Vec<T> = bytes.chunks_exact(bytes_per_pixel).map(from).collect();
    Image::from_vec(mat.cols() as u32, mat.rows() as u32, data).map_err(|e| fail(e.to_string()))
}

/// Reads a colour image (any format OpenCV reads) as RGB.
pub fn read_rgb(path: &Path) -> Result<RgbImage, IoError> {
    read_image(path, Wanted::Rgb8, imgcodecs::IMREAD_COLOR, CV_8UC3, |b| [b[0], b[1], b[2]])
}

/// Reads an image as 8-bit grey.
pub fn read_gray(path: &Path) -> Result<Image<u8>, IoError> {
    read_image(path, Wanted::Gray8, imgcodecs::IMREAD_GRAYSCALE, CV_8UC1, |b| b[0])
}

/// Reads a 16-bit depth PNG in units of `1 / depth_scale` metres.
pub fn read_depth_png(path: &Path, depth_scale: f64) -> Result<DepthImage, IoError> {
    let scale = depth_scale as f32;
    read_image(path, Wanted::Gray16, imgcodecs::IMREAD_UNCHANGED, CV_16UC1, |b| {
        f32::from(u16::from_ne_bytes([b[0], b[1]])) / scale
    })
}

/// Decodes an encoded colour image in memory (PNG, JPEG, any format OpenCV reads) as RGB; `what` names
/// the bytes in errors (a file, or a bag's topic and message).
pub fn decode_rgb(bytes: &[u8], what: &Path) -> Result<RgbImage, IoError> {
    decode_image(what, bytes, Wanted::Rgb8, imgcodecs::IMREAD_COLOR, CV_8UC3, |b| [b[0], b[1], b[2]])
}

/// Decodes an encoded 16-bit grey image in memory (a 16-bit PNG) as its raw samples.
pub fn decode_gray16(bytes: &[u8], what: &Path) -> Result<Image<u16>, IoError> {
    decode_image(what, bytes, Wanted::Gray16, imgcodecs::IMREAD_UNCHANGED, CV_16UC1, |b| {
        u16::from_ne_bytes([b[0], b[1]])
    })
}

/// Reads a 16-bit instance-id PNG.
pub fn read_instance_png(path: &Path) -> Result<InstanceImage, IoError> {
    read_image(path, Wanted::Gray16, imgcodecs::IMREAD_UNCHANGED, CV_16UC1, |b| {
        u16::from_ne_bytes([b[0], b[1]])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_round_trip_through_png() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let rgb = Image::from_vec(
            3,
            2,
            vec![[255, 0, 0], [0, 255, 0], [0, 0, 255], [1, 2, 3], [4, 5, 6], [7, 8, 9]],
        )?;
        write_rgb_png(&dir.path().join("rgb.png"), &rgb)?;
        assert_eq!(read_rgb(&dir.path().join("rgb.png"))?, rgb);

        let depth = Image::from_vec(2, 2, vec![0.0, 1.2345, 13.0, 20.0])?;
        write_depth_png(&dir.path().join("depth.png"), &depth, 5000.0)?;
        let back = read_depth_png(&dir.path().join("depth.png"), 5000.0)?;
        assert_eq!(back.data()[0], 0.0);
        assert!((back.data()[1] - 1.2345).abs() <= 0.0001);
        assert!((back.data()[2] - 13.0).abs() <= 0.0001);
        assert_eq!(back.data()[3], 0.0, "beyond 13.1 m is written as missing");

        let ids = Image::from_vec(2, 1, vec![0u16, 65000])?;
        write_instance_png(&dir.path().join("ids.png"), &ids)?;
        assert_eq!(read_instance_png(&dir.path().join("ids.png"))?, ids);
        Ok(())
    }

    /// A PNG of `color` and `depth` with deterministic, non-smooth samples (and a palette for indexed colour).
    fn odd_png(
        path: &Path,
        color: png::ColorType,
        depth: png::BitDepth,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let (width, height) = (37u32, 23u32);
        let channels = match color {
            png::ColorType::Grayscale | png::ColorType::Indexed => 1,
            png::ColorType::GrayscaleAlpha => 2,
            png::ColorType::Rgb => 3,
            png::ColorType::Rgba => 4,
        };
        let bytes_per_sample = if depth == png::BitDepth::Sixteen { 2 } else { 1 };
        let n = (width * height) as usize * channels * bytes_per_sample;
        let data: Vec<u8> = (0..n)
            .map(|i| {
                if color == png::ColorType::Indexed {
                    (i * 7 % 16) as u8
                } else {
                    ((i * 2_654_435_761) >> 13) as u8
                }
            })
            .collect();
        let mut out = Vec::new();
        {
            let mut encoder = png::Encoder::new(&mut out, width, height);
            encoder.set_color(color);
            encoder.set_depth(depth);
            if color == png::ColorType::Indexed {
                encoder.set_palette((0..16u8).flat_map(|k| [k * 16, 255 - k * 9, k * 5]).collect::<Vec<_>>());
            }
            encoder.write_header()?.write_image_data(&data)?;
        }
        std::fs::write(path, out)?;
        Ok(())
    }

    fn opencv_rgb(path: &Path) -> Result<RgbImage, IoError> {
        let bytes = read_file(path)?;
        let mat = decode_with_opencv(path, &bytes, imgcodecs::IMREAD_COLOR)?;
        pixels(path, &mat, CV_8UC3, 3, |b| [b[2], b[1], b[0]])
    }

    #[test]
    fn reads_pngs_like_opencv() -> Result<(), Box<dyn std::error::Error>> {
        use png::{BitDepth, ColorType};
        let dir = tempfile::tempdir()?;
        let kinds = [
            (ColorType::Rgb, BitDepth::Eight, true),
            (ColorType::Rgba, BitDepth::Eight, true),
            (ColorType::Grayscale, BitDepth::Eight, true),
            (ColorType::GrayscaleAlpha, BitDepth::Eight, true),
            // OpenCV's own conversions: left to it.
            (ColorType::Rgb, BitDepth::Sixteen, false),
            (ColorType::Grayscale, BitDepth::Sixteen, false),
            (ColorType::Indexed, BitDepth::Eight, false),
        ];
        for (k, (color, depth, fast)) in kinds.into_iter().enumerate() {
            let path = dir.path().join(format!("{k}.png"));
            odd_png(&path, color, depth)?;
            let bytes = std::fs::read(&path)?;
            assert_eq!(decode_png(&bytes, Wanted::Rgb8).is_some(), fast, "{color:?} {depth:?}");
            assert_eq!(read_rgb(&path)?, opencv_rgb(&path)?, "{color:?} {depth:?} as colour");
            if (color, depth) == (ColorType::Grayscale, BitDepth::Eight) {
                let mat = decode_with_opencv(&path, &bytes, imgcodecs::IMREAD_GRAYSCALE)?;
                assert_eq!(read_gray(&path)?, pixels(&path, &mat, CV_8UC1, 1, |b| b[0])?);
            }
            if (color, depth) == (ColorType::Grayscale, BitDepth::Sixteen) {
                assert!(decode_png(&bytes, Wanted::Gray16).is_some());
                let mat = decode_with_opencv(&path, &bytes, imgcodecs::IMREAD_UNCHANGED)?;
                let reference = pixels(&path, &mat, CV_16UC1, 2, |b| u16::from_ne_bytes([b[0], b[1]]))?;
                assert_eq!(read_instance_png(&path)?, reference);
                assert!(reference.data().iter().any(|&v| v > 255), "16-bit samples exercised");
            }
        }
        // A truncated PNG: the crate refuses it, OpenCV is asked, and the error names the file.
        let whole = std::fs::read(dir.path().join("0.png"))?;
        let cut = dir.path().join("cut.png");
        std::fs::write(&cut, &whole[..whole.len() / 2])?;
        assert!(decode_png(&whole[..whole.len() / 2], Wanted::Rgb8).is_none());
        let error = read_rgb(&cut).expect_err("truncated").to_string();
        assert!(error.contains("cut.png"), "{error}");
        Ok(())
    }

    #[test]
    fn jpeg_in_memory_decodes_to_the_same_picture() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let data: Vec<[u8; 3]> =
            (0..48 * 32).map(|i| [(i % 48 * 5) as u8, 128, (i / 48 * 8) as u8]).collect();
        let image = Image::from_vec(48, 32, data)?;
        let jpeg = encode_jpeg(&image, 95, Path::new("test image"))?;
        assert_eq!(&jpeg[..2], &[0xFF, 0xD8], "JPEG start-of-image marker");
        std::fs::write(dir.path().join("a.jpg"), &jpeg)?;
        let back = read_rgb(&dir.path().join("a.jpg"))?;
        assert_eq!((back.width(), back.height()), (48, 32));
        let worst =
            image.data().iter().zip(back.data()).flat_map(|(a, b)| (0..3).map(|c| a[c].abs_diff(b[c]))).max();
        assert!(worst.is_some_and(|d| d <= 24), "lossy but close: worst channel difference {worst:?}");
        Ok(())
    }

    /// A PNG whose header claims `width`x`height` (and whose data is a few zero bytes).
    fn huge_png(width: u32, height: u32, bit_depth: u8, color: u8) -> Vec<u8> {
        fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
            out.extend((data.len() as u32).to_be_bytes());
            out.extend(kind);
            out.extend(data);
            out.extend([0; 4]); // CRC: never reached, the header is refused first
        }
        let mut out = PNG_SIGNATURE.to_vec();
        let mut ihdr = width.to_be_bytes().to_vec();
        ihdr.extend(height.to_be_bytes());
        ihdr.extend([bit_depth, color, 0, 0, 0]);
        chunk(&mut out, b"IHDR", &ihdr);
        chunk(&mut out, b"IDAT", &[0; 16]);
        chunk(&mut out, b"IEND", &[]);
        out
    }

    #[test]
    fn huge_image_headers_are_refused_before_allocation() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let rgb = dir.path().join("huge.png");
        std::fs::write(&rgb, huge_png(100_000, 100_000, 8, 2))?;
        let error = read_rgb(&rgb).expect_err("100000x100000").to_string();
        assert!(error.contains("huge.png") && error.contains("100000x100000"), "{error}");
        let depth = dir.path().join("huge-depth.png");
        std::fs::write(&depth, huge_png(100_000, 100_000, 16, 0))?;
        assert!(read_depth_png(&depth, 5000.0).expect_err("huge").to_string().contains("huge-depth.png"));
        // A JPEG whose start-of-frame claims 60000x60000 (OpenCV would try to allocate 10 GB).
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 11, 8];
        jpeg.extend(60_000u16.to_be_bytes());
        jpeg.extend(60_000u16.to_be_bytes());
        jpeg.extend([1, 1, 0x11, 0]);
        let path = dir.path().join("huge.jpg");
        std::fs::write(&path, &jpeg)?;
        assert_eq!(header_size(&jpeg), Some((60_000, 60_000)));
        assert!(read_rgb(&path).expect_err("huge jpeg").to_string().contains("60000x60000"));
        // Real headers are read right.
        let small = encode_jpeg(&Image::from_vec(48, 32, vec![[9u8, 9, 9]; 48 * 32])?, 90, &path)?;
        assert_eq!(header_size(&small), Some((48, 32)));
        assert_eq!(header_size(&huge_png(37, 23, 8, 2)), Some((37, 23)));
        assert_eq!(header_size(b"P6\n# comment\n640 480\n255\n"), Some((640, 480)));
        assert_eq!(header_size(b"GIF89a\x80\x02\xe0\x01"), Some((640, 480)));
        Ok(())
    }

    #[test]
    fn corrupt_and_missing_images_name_the_file() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let corrupt = dir.path().join("corrupt.png");
        std::fs::write(&corrupt, b"\x89PNG\r\n\x1a\nnot really")?;
        let error = read_rgb(&corrupt).expect_err("corrupt").to_string();
        assert!(error.contains("corrupt.png"), "{error}");
        let empty = dir.path().join("empty.png");
        std::fs::write(&empty, b"")?;
        assert!(read_rgb(&empty).expect_err("empty").to_string().contains("empty"));
        let missing = dir.path().join("missing.png");
        assert!(read_depth_png(&missing, 5000.0).expect_err("missing").to_string().contains("missing.png"));
        // An 8-bit PNG is not a depth image.
        let rgb = Image::from_vec(1, 1, vec![[1u8, 2, 3]])?;
        write_rgb_png(&dir.path().join("rgb.png"), &rgb)?;
        assert!(read_depth_png(&dir.path().join("rgb.png"), 5000.0).is_err());
        Ok(())
    }
}
