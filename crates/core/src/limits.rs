//! Size limits on outside input, checked before anything is allocated for it.
//!
//! gst reads files that come from other people (image folders, calibration files, meshes, question files).
//! A header that claims a 100000x100000 image would otherwise make a reader allocate 30 GB and abort the
//! process; these limits turn such files into a clear error that names the file. The defaults are far above
//! anything gst produces or any real camera delivers, and are documented in `docs/hardening.md`.

/// Largest image side accepted from a file header or a calibration file (pixels). 16384 covers 16K video.
pub const MAX_IMAGE_SIDE: u32 = 16_384;

/// Largest image area accepted (pixels): 64 megapixels, 192 MB as 8-bit RGB.
pub const MAX_IMAGE_PIXELS: u64 = 64 * 1024 * 1024;

/// Largest mesh file (OBJ) or material library (MTL) read into memory, in bytes: 256 MiB.
pub const MAX_MESH_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// Largest JSON or YAML file gst reads (question files, scene.json, map.json, keyframes.json): 512 MiB.
/// Nesting depth is bounded by serde_json's own recursion limit (128 levels), which fails fast.
pub const MAX_TEXT_FILE_BYTES: u64 = 512 * 1024 * 1024;

/// Checks an image size (from a file header, a video header or a calibration file) against
/// [`MAX_IMAGE_SIDE`] and [`MAX_IMAGE_PIXELS`]; the error message says what was claimed and the limit.
pub fn check_image_size(width: u64, height: u64) -> Result<(), String> {
    if width == 0 || height == 0 {
        return Err(format!("claims an empty {width}x{height} image"));
    }
    if width > u64::from(MAX_IMAGE_SIDE) || height > u64::from(MAX_IMAGE_SIDE) {
        return Err(format!(
            "claims a {width}x{height} image, larger than gst's limit of {MAX_IMAGE_SIDE} pixels a side"
        ));
    }
    if width * height > MAX_IMAGE_PIXELS {
        return Err(format!(
            "claims a {width}x{height} image, more than gst's limit of {MAX_IMAGE_PIXELS} pixels"
        ));
    }
    Ok(())
}

/// Checks a file's size in bytes against `limit`; `what` names the kind of file in the message.
pub fn check_file_size(bytes: u64, limit: u64, what: &str) -> Result<(), String> {
    if bytes > limit {
        return Err(format!("is {bytes} bytes, larger than gst's limit of {limit} bytes for {what}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_sizes_beyond_the_limits_are_refused() {
        assert!(check_image_size(640, 512).is_ok());
        assert!(check_image_size(16_384, 4096).is_ok());
        let error = check_image_size(100_000, 100_000).expect_err("too large");
        assert!(error.contains("100000x100000") && error.contains("16384"), "{error}");
        assert!(check_image_size(16_384, 16_384).is_err(), "256 Mpx is over the area limit");
        assert!(check_image_size(0, 10).is_err());
        assert!(check_file_size(10, 5, "meshes").expect_err("too big").contains("meshes"));
        assert!(check_file_size(5, 5, "meshes").is_ok());
        // A calibration claiming such a size is refused by the camera's validation.
        let camera =
            crate::PinholeCamera { width: 100_000, height: 100_000, ..crate::PinholeCamera::gst_benchmark() };
        let error = camera.validate().expect_err("huge calibration").to_string();
        assert!(error.contains("100000x100000"), "{error}");
    }
}
