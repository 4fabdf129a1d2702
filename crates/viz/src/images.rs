//! How images go into a recording: raw or compressed, full size or downscaled.
//!
//! Raw frames are large (a 640x512 frame is 983 kB of RGB and 1.3 MB of f32 depth), so a recording of a whole
//! benchmark split would not fit on a laptop. [`ImageSettings::compact`] (the CLI's default) JPEG-encodes
//! colour and PNG-encodes depth in millimetres; [`ImageSettings::lossless`] keeps every value.
//! The measured sizes per frame are in the crate's README section.

use gst_core::{DepthImage, Image, InstanceImage, PinholeCamera, RgbImage};

use crate::VizError;

/// Encoding of colour images (camera frames and question images).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageEncoding {
    /// Uncompressed RGB8 (`Image`).
    Raw,
    /// JPEG (`EncodedImage`) at a quality of 1–100 (OpenCV's libjpeg).
    Jpeg { quality: u8 },
}

/// Encoding of depth frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DepthEncoding {
    /// `DepthImage` of f32 metres (`meter` = 1): exact.
    F32,
    /// `DepthImage` of u16 millimetres (`meter` = 1000): half the size, 1 mm steps, up to 65.5 m.
    U16Mm,
    /// `EncodedDepthImage`: a 16-bit PNG of millimetres (`meter` = 1000), lossless at 1 mm. Rerun marks this
    /// archetype unstable.
    PngMm,
}

/// What the recorder does with frame images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageSettings {
    pub rgb: ImageEncoding,
    pub depth: DepthEncoding,
    /// Integer factor by which camera frames (colour, depth, instances) are shrunk before logging; the logged
    /// pinhole is scaled to match. 1 = full size. Question images are never shrunk (their answer points are
    /// in their pixels).
    pub downscale: u32,
}

/// JPEG quality of [`ImageSettings::compact`]: text on top-down images stays readable.
pub const DEFAULT_JPEG_QUALITY: u8 = 85;
/// Depth units of the millimetre encodings.
const MM_PER_M: f32 = 1000.0;

impl ImageSettings {
    /// Every value as it was: raw RGB, f32 depth, full size.
    pub fn lossless() -> Self {
        Self { rgb: ImageEncoding::Raw, depth: DepthEncoding::F32, downscale: 1 }
    }

    /// JPEG colour, PNG millimetre depth, full size: what a long recording should use.
    pub fn compact() -> Self {
        Self {
            rgb: ImageEncoding::Jpeg { quality: DEFAULT_JPEG_QUALITY },
            depth: DepthEncoding::PngMm,
            downscale: 1,
        }
    }

    pub fn validate(&self) -> Result<(), VizError> {
        if self.downscale == 0 {
            return Err(VizError::Invalid("image downscale factor must be at least 1".into()));
        }
        if let ImageEncoding::Jpeg { quality } = self.rgb
            && !(1..=100).contains(&quality)
        {
            return Err(VizError::Invalid(format!("JPEG quality {quality} is not in 1..=100")));
        }
        Ok(())
    }
}

impl Default for ImageSettings {
    fn default() -> Self {
        Self::compact()
    }
}

/// The camera whose image is `camera`'s shrunk by `factor` (block `k` of `factor` x `factor` pixels becomes
/// pixel `k`). With pixel centres at integers, pixel `u` of the small image sits at `factor·u + (factor−1)/2`
/// of the large one.
pub fn downscaled_camera(camera: &PinholeCamera, factor: u32) -> PinholeCamera {
    if factor <= 1 {
        return *camera;
    }
    let f = f64::from(factor);
    PinholeCamera {
        width: camera.width / factor,
        height: camera.height / factor,
        fx: camera.fx / f,
        fy: camera.fy / f,
        cx: (camera.cx + 0.5) / f - 0.5,
        cy: (camera.cy + 0.5) / f - 0.5,
        distortion: camera.distortion,
    }
}

/// Shrinks colour by averaging each `factor` x `factor` block (partial blocks at the right and bottom edge are
/// dropped).
pub fn downscale_rgb(image: &RgbImage, factor: u32) -> RgbImage {
    if factor <= 1 {
        return image.clone();
    }
    let (w, h) = (image.width() / factor, image.height() / factor);
    let src = image.data();
    let stride = image.width() as usize;
    let k = factor as usize;
    let area = (k * k) as u32;
    let mut data = Vec::with_capacity(w as usize * h as usize);
    for y in 0..h as usize {
        for x in 0..w as usize {
            let mut sum = [0u32; 3];
            for dy in 0..k {
                let start = (y * k + dy) * stride + x * k;
                for p in &src[start..start + k] {
                    for c in 0..3 {
                        sum[c] += u32::from(p[c]);
                    }
                }
            }
            data.push(sum.map(|s| ((s + area / 2) / area) as u8));
        }
    }
    Image::from_vec(w, h, data).unwrap_or_else(|_| Image::filled(0, 0, [0; 3]))
}

/// Shrinks a depth or id image by taking each block's centre pixel: averaging would invent depths between
/// surfaces and ids that do not exist.
pub fn downscale_nearest<T: Copy + Default>(image: &Image<T>, factor: u32) -> Image<T> {
    if factor <= 1 {
        return image.clone();
    }
    let (w, h) = (image.width() / factor, image.height() / factor);
    let half = factor / 2;
    let mut data = Vec::with_capacity(w as usize * h as usize);
    for y in 0..h {
        for x in 0..w {
            data.push(image.get(x * factor + half, y * factor + half).copied().unwrap_or_default());
        }
    }
    Image::from_vec(w, h, data).unwrap_or_else(|_| Image::filled(0, 0, T::default()))
}

/// A colour image ready to log.
pub(crate) enum ColorPayload {
    Raw(rerun::Image),
    Encoded(rerun::EncodedImage),
}

pub(crate) fn color_payload(image: &RgbImage, encoding: ImageEncoding) -> Result<ColorPayload, VizError> {
    let bytes: Vec<u8> = image.data().iter().flatten().copied().collect();
    match encoding {
        ImageEncoding::Raw => {
            Ok(ColorPayload::Raw(rerun::Image::from_rgb24(bytes, [image.width(), image.height()])))
        }
        ImageEncoding::Jpeg { quality } => {
            let jpeg = gst_io::encode_jpeg(image, quality, std::path::Path::new("<recorded image>"))
                .map_err(|e| VizError::Encode(e.to_string()))?;
            Ok(ColorPayload::Encoded(
                rerun::EncodedImage::from_file_contents(jpeg).with_media_type(rerun::MediaType::jpeg()),
            ))
        }
    }
}

/// Depth in millimetres, 0 for missing, non-finite or out-of-range values.
fn depth_mm(depth: &DepthImage) -> Vec<u16> {
    depth
        .data()
        .iter()
        .map(|d| {
            let mm = (d * MM_PER_M).round();
            if d.is_finite() && mm > 0.0 && mm <= f32::from(u16::MAX) { mm as u16 } else { 0 }
        })
        .collect()
}

/// A depth image ready to log.
pub(crate) enum DepthPayload {
    Raw(rerun::DepthImage),
    Encoded(rerun::EncodedDepthImage),
}

pub(crate) fn depth_payload(depth: &DepthImage, encoding: DepthEncoding) -> Result<DepthPayload, VizError> {
    let resolution = [depth.width(), depth.height()];
    match encoding {
        DepthEncoding::F32 => {
            let bytes: Vec<u8> = depth.data().iter().flat_map(|d| d.to_le_bytes()).collect();
            Ok(DepthPayload::Raw(
                rerun::DepthImage::from_data_type_and_bytes(bytes, resolution, rerun::ChannelDatatype::F32)
                    .with_meter(1.0),
            ))
        }
        DepthEncoding::U16Mm => {
            let bytes: Vec<u8> = depth_mm(depth).iter().flat_map(|d| d.to_le_bytes()).collect();
            Ok(DepthPayload::Raw(rerun::DepthImage::from_gray16(bytes, resolution).with_meter(MM_PER_M)))
        }
        DepthEncoding::PngMm => {
            let png = gst_io::encode_gray16_png(
                depth.width(),
                depth.height(),
                &depth_mm(depth),
                std::path::Path::new("recorded depth frame"),
            )
            .map_err(|e| VizError::Encode(format!("depth PNG: {e}")))?;
            Ok(DepthPayload::Encoded(
                rerun::EncodedDepthImage::new(png)
                    .with_media_type(rerun::MediaType::png())
                    .with_meter(MM_PER_M),
            ))
        }
    }
}

/// Instance ids as a `SegmentationImage` of u16 class ids (the `AnnotationContext` on `world` names them).
pub(crate) fn segmentation(ids: &InstanceImage) -> rerun::SegmentationImage {
    let bytes: Vec<u8> = ids.data().iter().flat_map(|id| id.to_le_bytes()).collect();
    rerun::SegmentationImage::new(
        bytes,
        rerun::components::ImageFormat::segmentation(
            [ids.width(), ids.height()],
            rerun::ChannelDatatype::U16,
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downscaling_averages_colour_and_keeps_block_centres_of_ids() {
        let rgb = Image::from_vec(4, 2, (0..8u8).map(|v| [v * 10, 0, 255]).collect()).unwrap();
        let small = downscale_rgb(&rgb, 2);
        assert_eq!((small.width(), small.height()), (2, 1));
        // Block 0 holds values 0, 1, 4, 5 (x10): mean 25.
        assert_eq!(small.data()[0], [25, 0, 255]);
        let ids = Image::from_vec(4, 2, (0..8u16).collect()).unwrap();
        let small_ids = downscale_nearest(&ids, 2);
        assert_eq!(small_ids.data(), &[5, 7]);
    }

    #[test]
    fn a_downscaled_camera_projects_to_the_matching_small_pixel() {
        let camera = PinholeCamera::gst_benchmark();
        let small = downscaled_camera(&camera, 4);
        let point = nalgebra::Point3::new(0.3, -0.2, 2.0);
        let (Some(big), Some(px)) = (camera.project(&point), small.project(&point)) else {
            panic!("the point is in front of both cameras");
        };
        assert!((4.0 * px.x + 1.5 - big.x).abs() < 1e-9 && (4.0 * px.y + 1.5 - big.y).abs() < 1e-9);
    }

    #[test]
    fn millimetre_depth_drops_invalid_values() {
        let depth = Image::from_vec(4, 1, vec![1.2345, f32::NAN, -1.0, 70.0]).unwrap();
        assert_eq!(depth_mm(&depth), vec![1235, 0, 0, 0]);
        assert!(ImageSettings { downscale: 0, ..ImageSettings::compact() }.validate().is_err());
        assert!(
            ImageSettings { rgb: ImageEncoding::Jpeg { quality: 0 }, ..ImageSettings::compact() }
                .validate()
                .is_err()
        );
    }
}
