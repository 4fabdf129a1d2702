//! Conversions from gst types to Rerun archetypes.

use gst_core::{PinholeCamera, Pose3};

/// Distance of the drawn image plane from the camera centre, metres.
const IMAGE_PLANE_DISTANCE_M: f32 = 0.25;

/// `parent_from_child` as a Rerun transform (Rerun's default relation: the entity is the child).
pub(crate) fn transform(parent_from_child: &Pose3) -> rerun::Transform3D {
    let t = parent_from_child.translation();
    let q = parent_from_child.rotation();
    rerun::Transform3D::from_translation_rotation(
        [t.x as f32, t.y as f32, t.z as f32],
        rerun::Quaternion::from_xyzw([q.i as f32, q.j as f32, q.k as f32, q.w as f32]),
    )
}

/// The pinhole of a camera. Our pixel centres are at integer coordinates (OpenCV); Rerun's image space puts
/// the top-left pixel's corner at (0, 0) and its centre at (0.5, 0.5), hence the half-pixel shift of the
/// principal point. The camera frame is OpenCV's, `ViewCoordinates::RDF`. Distortion is not drawn: frame
/// sources deliver undistorted images.
pub(crate) fn pinhole(camera: &PinholeCamera) -> rerun::Pinhole {
    let (fx, fy) = (camera.fx as f32, camera.fy as f32);
    let (cx, cy) = ((camera.cx + 0.5) as f32, (camera.cy + 0.5) as f32);
    rerun::Pinhole::new([[fx, 0.0, 0.0], [0.0, fy, 0.0], [cx, cy, 1.0]])
        .with_resolution([camera.width as f32, camera.height as f32])
        .with_camera_xyz(rerun::components::ViewCoordinates::RDF)
        .with_image_plane_distance(IMAGE_PLANE_DISTANCE_M)
}

pub(crate) fn point3(p: [f64; 3]) -> [f32; 3] {
    [p[0] as f32, p[1] as f32, p[2] as f32]
}

/// Whether every coordinate is finite (NaN would poison the viewer's bounding box).
pub(crate) fn finite3(p: &[f64; 3]) -> bool {
    p.iter().all(|v| v.is_finite())
}

pub(crate) fn rgba(rgb: [u8; 3], alpha: u8) -> rerun::Color {
    rerun::Color::from_unmultiplied_rgba(rgb[0], rgb[1], rgb[2], alpha)
}

pub(crate) fn rgb(rgb: [u8; 3]) -> rerun::Color {
    rerun::Color::from_rgb(rgb[0], rgb[1], rgb[2])
}
