//! Undistortion of RGB-D frames through OpenCV (`initUndistortRectifyMap` once, `remap` per frame).
//!
//! The undistorted camera keeps the calibration's camera matrix and image size and drops the distortion:
//! it is what TUM RGB-D and most RGB-D SLAM systems assume, keeps the image centre's resolution, and
//! loses a thin border at the image edges where the distorted image has no pixels (filled with black and
//! missing depth). Colour is resampled bilinearly; depth with the nearest neighbour, so that no depth is
//! invented between a near and a far surface, and missing depth stays missing. Colour and depth go
//! through the same map, which keeps depth registered to colour pixel by pixel (TUM's depth images are
//! registered to the colour camera).

use std::path::{Path, PathBuf};

use opencv::calib3d;
use opencv::core::{CV_8UC3, CV_32FC1, CV_64FC1, Mat, Scalar, Size};
use opencv::imgproc;
use opencv::prelude::*;

use gst_core::{DepthImage, Distortion, Image, PinholeCamera, RgbImage, RgbdFrame};

use crate::IoError;

/// Precomputed undistortion maps of one camera.
pub struct Undistorter {
    /// The calibration file the camera came from, named in errors.
    origin: PathBuf,
    distorted: PinholeCamera,
    undistorted: PinholeCamera,
    /// For every pixel of the undistorted image, where to sample the distorted one (x and y, `CV_32FC1`).
    map_x: Mat,
    map_y: Mat,
}

impl std::fmt::Debug for Undistorter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Undistorter")
            .field("origin", &self.origin)
            .field("distorted", &self.distorted)
            .field("undistorted", &self.undistorted)
            .finish_non_exhaustive()
    }
}

fn f64_mat(rows: i32, cols: i32, values: &[f64]) -> opencv::Result<Mat> {
    let mut mat = Mat::new_rows_cols_with_default(rows, cols, CV_64FC1, Scalar::all(0.0))?;
    for (slot, value) in mat.data_typed_mut::<f64>()?.iter_mut().zip(values) {
        *slot = *value;
    }
    Ok(mat)
}

impl Undistorter {
    /// Builds the maps for `camera`; `origin` (the calibration file) is named in errors.
    pub fn new(camera: &PinholeCamera, origin: &Path) -> Result<Self, IoError> {
        let fail = |message: String| IoError::Calibration { path: origin.into(), message };
        camera.validate().map_err(|e| fail(e.to_string()))?;
        if camera.width > i32::MAX as u32 || camera.height > i32::MAX as u32 {
            return Err(fail(format!("image size {}x{} is too large", camera.width, camera.height)));
        }
        let opencv = |e: opencv::Error| fail(format!("cannot build the undistortion maps: {e}"));
        let k = [camera.fx, 0.0, camera.cx, 0.0, camera.fy, camera.cy, 0.0, 0.0, 1.0];
        let k = f64_mat(3, 3, &k).map_err(opencv)?;
        let d = camera.distortion;
        let coefficients = f64_mat(1, 5, &[d.k1, d.k2, d.p1, d.p2, d.k3]).map_err(opencv)?;
        let size = Size::new(camera.width as i32, camera.height as i32);
        let (mut map_x, mut map_y) = (Mat::default(), Mat::default());
        calib3d::init_undistort_rectify_map(
            &k,
            &coefficients,
            &Mat::default(),
            &k,
            size,
            CV_32FC1,
            &mut map_x,
            &mut map_y,
        )
        .map_err(opencv)?;
        let undistorted = PinholeCamera { distortion: Distortion::default(), ..*camera };
        Ok(Self { origin: origin.into(), distorted: *camera, undistorted, map_x, map_y })
    }

    /// The camera of the input frames (with distortion).
    pub fn distorted_camera(&self) -> &PinholeCamera {
        &self.distorted
    }

    /// The camera of the output frames: the same camera matrix and size, no distortion.
    pub fn camera(&self) -> &PinholeCamera {
        &self.undistorted
    }

    fn check_size(&self, what: &str, width: u32, height: u32) -> Result<(), IoError> {
        if (width, height) != (self.distorted.width, self.distorted.height) {
            return Err(IoError::Calibration {
                path: self.origin.clone(),
                message: format!(
                    "cannot undistort a {width}x{height} {what} image with a {}x{} calibration",
                    self.distorted.width, self.distorted.height
                ),
            });
        }
        Ok(())
    }

    fn remap(&self, source: &Mat, interpolation: i32) -> Result<Mat, IoError> {
        let mut output = Mat::default();
        imgproc::remap(
            source,
            &mut output,
            &self.map_x,
            &self.map_y,
            interpolation,
            opencv::core::BORDER_CONSTANT,
            Scalar::all(0.0),
        )
        .map_err(|e| IoError::Calibration {
            path: self.origin.clone(),
            message: format!("remap failed: {e}"),
        })?;
        Ok(output)
    }

    fn opencv_error(&self, e: opencv::Error) -> IoError {
        IoError::Calibration { path: self.origin.clone(), message: format!("undistortion failed: {e}") }
    }

    /// Undistorts a colour image (bilinear; pixels with no source are black).
    pub fn undistort_rgb(&self, rgb: &RgbImage) -> Result<RgbImage, IoError> {
        self.check_size("colour", rgb.width(), rgb.height())?;
        let (width, height) = (rgb.width() as i32, rgb.height() as i32);
        let mut source = Mat::new_rows_cols_with_default(height, width, CV_8UC3, Scalar::all(0.0))
            .map_err(|e| self.opencv_error(e))?;
        // remap treats channels alike, so the bytes go in and come out in R, G, B order.
        let bytes = source.data_bytes_mut().map_err(|e| self.opencv_error(e))?;
        for (chunk, pixel) in bytes.chunks_exact_mut(3).zip(rgb.data()) {
            chunk.copy_from_slice(pixel);
        }
        let output = self.remap(&source, imgproc::INTER_LINEAR)?;
        let bytes = output.data_bytes().map_err(|e| self.opencv_error(e))?;
        let data = bytes.chunks_exact(3).map(|b| [b[0], b[1], b[2]]).collect();
        Image::from_vec(rgb.width(), rgb.height(), data).map_err(|e| self.opencv_error_core(e))
    }

    /// Undistorts a depth image (nearest neighbour; pixels with no source are missing, 0).
    pub fn undistort_depth(&self, depth: &DepthImage) -> Result<DepthImage, IoError> {
        self.check_size("depth", depth.width(), depth.height())?;
        let (width, height) = (depth.width() as i32, depth.height() as i32);
        let mut source = Mat::new_rows_cols_with_default(height, width, CV_32FC1, Scalar::all(0.0))
            .map_err(|e| self.opencv_error(e))?;
        let values = source.data_typed_mut::<f32>().map_err(|e| self.opencv_error(e))?;
        values.copy_from_slice(depth.data());
        let output = self.remap(&source, imgproc::INTER_NEAREST)?;
        let values = output.data_typed::<f32>().map_err(|e| self.opencv_error(e))?;
        Image::from_vec(depth.width(), depth.height(), values.to_vec()).map_err(|e| self.opencv_error_core(e))
    }

    /// Undistorts a frame's colour and depth images.
    pub fn undistort_frame(&self, frame: RgbdFrame) -> Result<RgbdFrame, IoError> {
        let rgb = self.undistort_rgb(&frame.rgb)?;
        let depth = frame.depth.as_ref().map(|depth| self.undistort_depth(depth)).transpose()?;
        Ok(RgbdFrame { rgb, depth, ..frame })
    }

    fn opencv_error_core(&self, e: gst_core::CoreError) -> IoError {
        IoError::Calibration { path: self.origin.clone(), message: format!("undistortion failed: {e}") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TUM fr1's colour camera: the strongest distortion of the TUM RGB-D cameras.
    fn fr1() -> PinholeCamera {
        PinholeCamera {
            width: 640,
            height: 480,
            fx: 517.3,
            fy: 516.5,
            cx: 318.6,
            cy: 255.3,
            distortion: Distortion { k1: 0.2624, k2: -0.9531, p1: -0.0054, p2: 0.0026, k3: 1.1633 },
        }
    }

    /// Where the camera's distortion moves an ideal (undistorted) pixel.
    fn distort_pixel(camera: &PinholeCamera, u: f64, v: f64) -> (f64, f64) {
        let (x, y) = ((u - camera.cx) / camera.fx, (v - camera.cy) / camera.fy);
        let (xd, yd) = camera.distortion.distort(x, y);
        (camera.fx * xd + camera.cx, camera.fy * yd + camera.cy)
    }

    /// Ideal pixel positions of a grid of dots that stay inside the distorted image.
    fn dot_grid() -> Vec<(f64, f64)> {
        let mut dots = Vec::new();
        for row in 0..5 {
            for column in 0..7 {
                dots.push((60.0 + 85.0 * f64::from(column), 50.0 + 95.0 * f64::from(row)));
            }
        }
        dots
    }

    #[test]
    fn undistortion_puts_distorted_dots_back_within_a_pixel() -> Result<(), IoError> {
        let camera = fr1();
        let undistorter = Undistorter::new(&camera, Path::new("fr1.yaml"))?;
        assert!(undistorter.camera().distortion.is_zero());
        assert_eq!((undistorter.camera().fx, undistorter.camera().cx), (camera.fx, camera.cx));

        // Render each dot where the lens puts it: a Gaussian blob at the distorted position.
        let dots = dot_grid();
        let distorted: Vec<(f64, f64)> = dots.iter().map(|&(u, v)| distort_pixel(&camera, u, v)).collect();
        let sigma = 1.5_f64;
        let mut data = vec![[0u8; 3]; 640 * 480];
        for (index, pixel) in data.iter_mut().enumerate() {
            let (u, v) = ((index % 640) as f64, (index / 640) as f64);
            let intensity: f64 = distorted
                .iter()
                .map(|&(du, dv)| (-((u - du).powi(2) + (v - dv).powi(2)) / (2.0 * sigma * sigma)).exp())
                .sum();
            let value = (255.0 * intensity.min(1.0)).round() as u8;
            *pixel = [value, value / 2, 0];
        }
        let image = Image::from_vec(640, 480, data)?;
        let undistorted = undistorter.undistort_rgb(&image)?;

        for &(u, v) in &dots {
            // Intensity-weighted centroid in a window around the ideal position.
            let (mut sum, mut su, mut sv) = (0.0, 0.0, 0.0);
            for y in (v as i64 - 6)..=(v as i64 + 6) {
                for x in (u as i64 - 6)..=(u as i64 + 6) {
                    let value = f64::from(undistorted.get(x as u32, y as u32).map_or(0, |p| p[0]));
                    sum += value;
                    su += value * x as f64;
                    sv += value * y as f64;
                }
            }
            assert!(sum > 100.0, "the dot at ({u}, {v}) vanished");
            let error = ((su / sum - u).powi(2) + (sv / sum - v).powi(2)).sqrt();
            assert!(error < 1.0, "dot at ({u}, {v}) came back at ({}, {}): {error} px", su / sum, sv / sum);
        }
        Ok(())
    }

    #[test]
    fn the_maps_invert_the_model_at_every_dot() -> Result<(), IoError> {
        let camera = fr1();
        let undistorter = Undistorter::new(&camera, Path::new("fr1.yaml"))?;
        for (u, v) in dot_grid() {
            let (du, dv) = distort_pixel(&camera, u, v);
            let at = |map: &Mat| map.at_2d::<f32>(v as i32, u as i32).map(|x| f64::from(*x));
            let (mx, my) = (at(&undistorter.map_x), at(&undistorter.map_y));
            let (mx, my) =
                (mx.map_err(|e| undistorter.opencv_error(e))?, my.map_err(|e| undistorter.opencv_error(e))?);
            assert!(
                (mx - du).abs() < 0.01 && (my - dv).abs() < 0.01,
                "({u}, {v}): map ({mx}, {my}) model ({du}, {dv})"
            );
        }
        Ok(())
    }

    #[test]
    fn depth_is_resampled_without_inventing_values() -> Result<(), IoError> {
        let camera = fr1();
        let undistorter = Undistorter::new(&camera, Path::new("fr1.yaml"))?;
        // Two surfaces with a diagonal edge, and a hole of missing depth.
        let mut data = Vec::with_capacity(640 * 480);
        for y in 0..480u32 {
            for x in 0..640u32 {
                let depth = if (200..240).contains(&x) && (200..240).contains(&y) {
                    0.0
                } else if x + y < 560 {
                    1.0
                } else {
                    3.0
                };
                data.push(depth);
            }
        }
        let depth = Image::from_vec(640, 480, data)?;
        let undistorted = undistorter.undistort_depth(&depth)?;
        let mut counts = [0usize; 3];
        for value in undistorted.data() {
            match *value {
                0.0 => counts[0] += 1,
                1.0 => counts[1] += 1,
                3.0 => counts[2] += 1,
                other => panic!("invented depth {other}"),
            }
        }
        assert!(counts.iter().all(|c| *c > 1000), "{counts:?}");
        Ok(())
    }

    #[test]
    fn zero_distortion_is_the_identity_and_sizes_are_checked() -> Result<(), IoError> {
        let camera = PinholeCamera { distortion: Distortion::default(), ..fr1() };
        let undistorter = Undistorter::new(&camera, Path::new("fr3.yaml"))?;
        let data: Vec<[u8; 3]> = (0..640 * 480).map(|i| [(i % 251) as u8, (i % 13) as u8, 7]).collect();
        let image = Image::from_vec(640, 480, data)?;
        assert_eq!(undistorter.undistort_rgb(&image)?, image);
        let small = Image::filled(320, 240, [0u8; 3]);
        let error = undistorter.undistort_rgb(&small).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("fr3.yaml") && error.contains("320x240"), "{error}");
        Ok(())
    }
}
