//! The pinhole camera model with OpenCV's radial-tangential ("plumb bob") distortion.

use nalgebra::{Point2, Point3, Vector3};
use serde::{Deserialize, Serialize};

use crate::CoreError;

/// Radial-tangential distortion coefficients in OpenCV's order `k1 k2 p1 p2 k3`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Distortion {
    pub k1: f64,
    pub k2: f64,
    pub p1: f64,
    pub p2: f64,
    pub k3: f64,
}

impl Distortion {
    pub fn is_zero(&self) -> bool {
        [self.k1, self.k2, self.p1, self.p2, self.k3].iter().all(|c| *c == 0.0)
    }

    /// Applies the distortion to a point on the normalised image plane (z = 1).
    pub fn distort(&self, x: f64, y: f64) -> (f64, f64) {
        let r2 = x * x + y * y;
        let radial = 1.0 + r2 * (self.k1 + r2 * (self.k2 + r2 * self.k3));
        let dx = 2.0 * self.p1 * x * y + self.p2 * (r2 + 2.0 * x * x);
        let dy = self.p1 * (r2 + 2.0 * y * y) + 2.0 * self.p2 * x * y;
        (x * radial + dx, y * radial + dy)
    }

    /// Inverts [`Self::distort`] by fixed-point iteration (as OpenCV's `undistortPoints`), which converges
    /// for the mild distortion of RGB-D cameras.
    pub fn undistort(&self, xd: f64, yd: f64) -> (f64, f64) {
        const ITERATIONS: usize = 20;
        let (mut x, mut y) = (xd, yd);
        for _ in 0..ITERATIONS {
            let r2 = x * x + y * y;
            let radial = 1.0 + r2 * (self.k1 + r2 * (self.k2 + r2 * self.k3));
            let dx = 2.0 * self.p1 * x * y + self.p2 * (r2 + 2.0 * x * x);
            let dy = self.p1 * (r2 + 2.0 * y * y) + 2.0 * self.p2 * x * y;
            x = (xd - dx) / radial;
            y = (yd - dy) / radial;
        }
        (x, y)
    }
}

/// A pinhole camera: image size in pixels, focal lengths and principal point in pixels, and distortion.
/// Pixel centres are at integer coordinates (OpenCV convention): the top-left pixel covers [-0.5, 0.5)².
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinholeCamera {
    pub width: u32,
    pub height: u32,
    pub fx: f64,
    pub fy: f64,
    pub cx: f64,
    pub cy: f64,
    #[serde(default)]
    pub distortion: Distortion,
}

impl PinholeCamera {
    /// A distortion-free camera with square pixels, the principal point at the image centre and the given
    /// horizontal field of view.
    pub fn from_horizontal_fov(width: u32, height: u32, hfov_deg: f64) -> Result<Self, CoreError> {
        if !(hfov_deg > 0.0 && hfov_deg < 180.0) {
            return Err(CoreError::InvalidCamera(format!(
                "horizontal field of view {hfov_deg}° is not in (0, 180)"
            )));
        }
        let fx = f64::from(width) / 2.0 / (hfov_deg.to_radians() / 2.0).tan();
        let camera = Self {
            width,
            height,
            fx,
            fy: fx,
            cx: (f64::from(width) - 1.0) / 2.0,
            cy: (f64::from(height) - 1.0) / 2.0,
            distortion: Distortion::default(),
        };
        camera.validate()?;
        Ok(camera)
    }

    /// The benchmark camera of GST-Bench: 640x512, 90° horizontal field of view.
    pub fn gst_benchmark() -> Self {
        let fx = 320.0; // 640 / 2 / tan(45°)
        Self { width: 640, height: 512, fx, fy: fx, cx: 319.5, cy: 255.5, distortion: Distortion::default() }
    }

    pub fn validate(&self) -> Result<(), CoreError> {
        if self.width == 0 || self.height == 0 {
            return Err(CoreError::InvalidCamera(format!(
                "image size {}x{} is empty",
                self.width, self.height
            )));
        }
        crate::limits::check_image_size(u64::from(self.width), u64::from(self.height))
            .map_err(|e| CoreError::InvalidCamera(format!("the calibration {e}")))?;
        if !(self.fx.is_finite() && self.fy.is_finite() && self.fx > 0.0 && self.fy > 0.0) {
            return Err(CoreError::InvalidCamera(format!(
                "focal lengths must be positive, got fx={} fy={}",
                self.fx, self.fy
            )));
        }
        if !(self.cx.is_finite() && self.cy.is_finite()) {
            return Err(CoreError::InvalidCamera("principal point must be finite".into()));
        }
        Ok(())
    }

    pub fn horizontal_fov(&self) -> f64 {
        2.0 * (f64::from(self.width) / 2.0 / self.fx).atan()
    }

    /// Projects a point in the camera frame to pixel coordinates; `None` behind the camera.
    pub fn project(&self, point_camera: &Point3<f64>) -> Option<Point2<f64>> {
        if point_camera.z <= 0.0 {
            return None;
        }
        let (x, y) = (point_camera.x / point_camera.z, point_camera.y / point_camera.z);
        let (x, y) = if self.distortion.is_zero() { (x, y) } else { self.distortion.distort(x, y) };
        Some(Point2::new(self.fx * x + self.cx, self.fy * y + self.cy))
    }

    /// The ray through a pixel as a direction with z = 1 in the camera frame.
    pub fn ray(&self, pixel: &Point2<f64>) -> Vector3<f64> {
        let (x, y) = ((pixel.x - self.cx) / self.fx, (pixel.y - self.cy) / self.fy);
        let (x, y) = if self.distortion.is_zero() { (x, y) } else { self.distortion.undistort(x, y) };
        Vector3::new(x, y, 1.0)
    }

    /// Back-projects a pixel with depth (z along the optical axis, metres) to a point in the camera frame.
    pub fn unproject(&self, pixel: &Point2<f64>, depth_m: f64) -> Point3<f64> {
        Point3::from(self.ray(pixel) * depth_m)
    }

    pub fn contains(&self, pixel: &Point2<f64>) -> bool {
        pixel.x >= -0.5
            && pixel.y >= -0.5
            && pixel.x < f64::from(self.width) - 0.5
            && pixel.y < f64::from(self.height) - 0.5
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmark_camera_has_90_degree_fov() -> Result<(), CoreError> {
        let camera = PinholeCamera::gst_benchmark();
        assert!((camera.horizontal_fov().to_degrees() - 90.0).abs() < 1e-9);
        let from_fov = PinholeCamera::from_horizontal_fov(640, 512, 90.0)?;
        assert!(
            (from_fov.fx - camera.fx).abs() < 1e-9 && from_fov.cx == camera.cx && from_fov.cy == camera.cy
        );
        Ok(())
    }

    #[test]
    fn project_unproject_round_trip_with_distortion() {
        // TUM fr1's calibration: strong distortion, valid over its own 640x480 field of view.
        let mut camera = PinholeCamera::gst_benchmark();
        (camera.fx, camera.fy, camera.cx, camera.cy) = (517.3, 516.5, 318.6, 255.3);
        camera.distortion = Distortion { k1: 0.26, k2: -0.95, p1: -0.005, p2: 0.003, k3: 1.16 };
        for (u, v, z) in [(10.0, 20.0, 1.0), (320.0, 256.0, 3.0), (600.0, 480.0, 0.7)] {
            let pixel = Point2::new(u, v);
            let point = camera.unproject(&pixel, z);
            assert!((point.z - z).abs() < 1e-12);
            let back = camera.project(&point).expect("in front of the camera");
            assert!((back - pixel).norm() < 1e-6, "{back} vs {pixel}");
        }
        assert!(camera.project(&Point3::new(0.0, 0.0, -1.0)).is_none());
    }

    #[test]
    fn invalid_cameras_are_rejected() {
        assert!(PinholeCamera::from_horizontal_fov(640, 512, 0.0).is_err());
        assert!(PinholeCamera::from_horizontal_fov(0, 512, 90.0).is_err());
    }
}
