//! Image resampling for prompts and the ONNX backend's preprocessing (pure Rust, deterministic).

use gst_core::{Image, RgbImage};

/// Bilinear resize with pixel centres aligned (`align_corners = false`, as PIL and OpenCV's `INTER_LINEAR`
/// do), averaging over the source footprint when shrinking by more than 2x so that thin lines of a
/// top-down map do not vanish.
pub fn resize_bilinear(image: &RgbImage, width: u32, height: u32) -> RgbImage {
    let (src_w, src_h) = (image.width() as usize, image.height() as usize);
    let (dst_w, dst_h) = (width.max(1) as usize, height.max(1) as usize);
    if (src_w, src_h) == (dst_w, dst_h) || src_w == 0 || src_h == 0 {
        return image.clone();
    }
    // Shrinking a lot: box-filter by an integer factor first, then interpolate the rest.
    let factor = (src_w / dst_w).min(src_h / dst_h);
    if factor >= 2 {
        return resize_bilinear(&box_shrink(image, factor), width, height);
    }
    let data = image.data();
    let scale_x = src_w as f64 / dst_w as f64;
    let scale_y = src_h as f64 / dst_h as f64;
    let mut out = Vec::with_capacity(dst_w * dst_h);
    for y in 0..dst_h {
        let sy = ((y as f64 + 0.5) * scale_y - 0.5).clamp(0.0, (src_h - 1) as f64);
        let y0 = sy.floor() as usize;
        let y1 = (y0 + 1).min(src_h - 1);
        let fy = sy - y0 as f64;
        for x in 0..dst_w {
            let sx = ((x as f64 + 0.5) * scale_x - 0.5).clamp(0.0, (src_w - 1) as f64);
            let x0 = sx.floor() as usize;
            let x1 = (x0 + 1).min(src_w - 1);
            let fx = sx - x0 as f64;
            let mut pixel = [0u8; 3];
            for (c, value) in pixel.iter_mut().enumerate() {
                let at = |xx: usize, yy: usize| f64::from(data[yy * src_w + xx][c]);
                let top = at(x0, y0) * (1.0 - fx) + at(x1, y0) * fx;
                let bottom = at(x0, y1) * (1.0 - fx) + at(x1, y1) * fx;
                *value = (top * (1.0 - fy) + bottom * fy).round().clamp(0.0, 255.0) as u8;
            }
            out.push(pixel);
        }
    }
    Image::from_vec(dst_w as u32, dst_h as u32, out).unwrap_or_else(|_| image.clone())
}

/// Averages `factor` x `factor` blocks (the last partial block is dropped).
fn box_shrink(image: &RgbImage, factor: usize) -> RgbImage {
    let (src_w, src_h) = (image.width() as usize, image.height() as usize);
    let (dst_w, dst_h) = (src_w / factor, src_h / factor);
    let data = image.data();
    let mut out = Vec::with_capacity(dst_w * dst_h);
    let area = (factor * factor) as u32;
    for y in 0..dst_h {
        for x in 0..dst_w {
            let mut sum = [0u32; 3];
            for yy in y * factor..(y + 1) * factor {
                for xx in x * factor..(x + 1) * factor {
                    let p = data[yy * src_w + xx];
                    for c in 0..3 {
                        sum[c] += u32::from(p[c]);
                    }
                }
            }
            out.push(sum.map(|s| ((s + area / 2) / area) as u8));
        }
    }
    Image::from_vec(dst_w as u32, dst_h as u32, out).unwrap_or_else(|_| image.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resizing_keeps_a_flat_colour_and_the_requested_size() -> Result<(), Box<dyn std::error::Error>> {
        let image = Image::from_vec(64, 48, vec![[10, 200, 30]; 64 * 48])?;
        for (w, h) in [(32, 32), (7, 5), (100, 90)] {
            let out = resize_bilinear(&image, w, h);
            assert_eq!((out.width(), out.height()), (w, h));
            assert!(out.data().iter().all(|&p| p == [10, 200, 30]));
        }
        Ok(())
    }

    #[test]
    fn downscaling_a_ramp_keeps_it_monotonic() -> Result<(), Box<dyn std::error::Error>> {
        let data: Vec<[u8; 3]> = (0..256 * 4).map(|i| [(i % 256) as u8; 3]).collect();
        let out = resize_bilinear(&Image::from_vec(256, 4, data)?, 16, 1);
        let row: Vec<u8> = out.data().iter().map(|p| p[0]).collect();
        assert!(row.windows(2).all(|w| w[0] < w[1]), "{row:?}");
        Ok(())
    }
}
