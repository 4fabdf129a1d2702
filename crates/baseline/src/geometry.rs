//! The answer formats of the GST tasks as geometry: egocentric direction and distance from a camera pose,
//! points and headings on a top-down image. Conventions (those of the benchmark and of our generator):
//!
//! - ED: integer degrees in [-180, 180], 0 = the camera's optical axis, **left positive**, measured in the
//!   camera frame (x right, y down, z forward): `atan2(-x, z)`.
//! - EDist: metres from the camera centre to the target's centre, one decimal.
//! - Points on a top-down image: `<point>x y</point>`, x right and y down, each `floor(pixel / size · 1000)`
//!   clamped to [0, 999].
//! - Ori: integer degrees in [-180, 180], 0 = towards the top of the image, counter-clockwise positive as
//!   the image is seen (towards the image's left is +90).

use nalgebra::{Point3, Vector3};

use gst_core::Pose3;

/// Direction (left positive) and distance of `target` seen from a camera at `world_from_camera`.
pub fn egocentric(world_from_camera: &Pose3, target: &Point3<f64>) -> (i32, f64) {
    let p = world_from_camera.inverse().transform_point(target);
    (direction_deg(&p.coords), (target - Point3::from(world_from_camera.translation())).norm())
}

/// The ED angle of a point in camera coordinates.
pub fn direction_deg(camera_point: &Vector3<f64>) -> i32 {
    wrap_deg((-camera_point.x).atan2(camera_point.z).to_degrees())
}

/// Degrees rounded to an integer in (-180, 180] (the benchmark writes 180, never -180).
pub fn wrap_deg(degrees: f64) -> i32 {
    let mut d = degrees.round() as i64 % 360;
    if d > 180 {
        d -= 360;
    }
    if d <= -180 {
        d += 360;
    }
    d as i32
}

/// A distance as EDist answers it: metres with one decimal.
pub fn metres_text(distance_m: f64) -> String {
    format!("{:.1}", (distance_m * 10.0).round() / 10.0)
}

/// A pixel position on a `width` x `height` image as the benchmark's normalised point.
pub fn normalized_point(pixel: [f64; 2], width: u32, height: u32) -> [u32; 2] {
    let n = |v: f64, size: u32| (v / f64::from(size) * 1000.0).floor().clamp(0.0, 999.0) as u32;
    [n(pixel[0], width), n(pixel[1], height)]
}

/// `<point>x y</point>` of a pixel position.
pub fn point_text(pixel: [f64; 2], width: u32, height: u32) -> String {
    let [x, y] = normalized_point(pixel, width, height);
    format!("<point>{x} {y}</point>")
}

/// The Ori heading of a direction on the image (dx right, dy down in pixels).
pub fn image_heading_deg(direction: [f64; 2]) -> i32 {
    wrap_deg((-direction[0]).atan2(-direction[1]).to_degrees())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{Translation3, UnitQuaternion};

    /// A level camera at `position` (world z up) looking along world yaw `yaw_deg` (0 = +x).
    fn level_camera(position: [f64; 3], yaw_deg: f64) -> Pose3 {
        // Camera axes in the world: z forward = (cos, sin, 0), x right = (sin, -cos, 0), y down = -z.
        let yaw = yaw_deg.to_radians();
        let forward = Vector3::new(yaw.cos(), yaw.sin(), 0.0);
        let right = Vector3::new(yaw.sin(), -yaw.cos(), 0.0);
        let down = Vector3::new(0.0, 0.0, -1.0);
        let rotation = nalgebra::Rotation3::from_matrix_unchecked(nalgebra::Matrix3::from_columns(&[
            right, down, forward,
        ]));
        Pose3(nalgebra::Isometry3::from_parts(
            Translation3::new(position[0], position[1], position[2]),
            UnitQuaternion::from_rotation_matrix(&rotation),
        ))
    }

    #[test]
    fn left_is_positive_and_behind_is_180() {
        // Looking along +x from the origin: +y is to the left.
        let camera = level_camera([0.0, 0.0, 1.4], 0.0);
        let at = |x: f64, y: f64| egocentric(&camera, &Point3::new(x, y, 1.4));
        assert_eq!(at(2.0, 0.0).0, 0);
        assert_eq!(at(0.0, 3.0).0, 90, "left");
        assert_eq!(at(0.0, -3.0).0, -90, "right");
        assert_eq!(at(-2.0, 0.0).0, 180, "behind");
        assert_eq!(at(2.0, 2.0).0, 45);
        assert_eq!(at(-2.0, -2.0).0, -135);
        assert!((at(3.0, 4.0).1 - 5.0).abs() < 1e-12);
        // Turned to face +y, the same point at +y is ahead.
        assert_eq!(egocentric(&level_camera([0.0, 0.0, 1.4], 90.0), &Point3::new(0.0, 3.0, 1.4)).0, 0);
        // Height differences count in the distance.
        assert!((egocentric(&camera, &Point3::new(4.0, 0.0, 4.4)).1 - 5.0).abs() < 1e-12);
        assert_eq!(wrap_deg(-180.0), 180);
        assert_eq!(wrap_deg(540.4), 180);
        assert_eq!(wrap_deg(-190.0), 170);
    }

    #[test]
    fn points_and_headings_follow_the_image_axes() {
        assert_eq!(normalized_point([0.0, 0.0], 640, 512), [0, 0]);
        assert_eq!(normalized_point([320.0, 128.0], 640, 512), [500, 250]);
        assert_eq!(normalized_point([640.0, 600.0], 640, 512), [999, 999]);
        assert_eq!(normalized_point([-3.0, 511.9], 640, 512), [0, 999]);
        assert_eq!(point_text([64.0, 256.0], 640, 512), "<point>100 500</point>");
        assert_eq!(image_heading_deg([0.0, -1.0]), 0, "up");
        assert_eq!(image_heading_deg([-1.0, 0.0]), 90, "left is counter-clockwise");
        assert_eq!(image_heading_deg([1.0, 0.0]), -90, "right");
        assert_eq!(image_heading_deg([0.0, 1.0]), 180, "down");
        assert_eq!(image_heading_deg([-1.0, -1.0]), 45);
        assert_eq!(metres_text(3.449), "3.4");
        assert_eq!(metres_text(3.45), "3.5");
        assert_eq!(metres_text(0.04), "0.0");
    }
}
