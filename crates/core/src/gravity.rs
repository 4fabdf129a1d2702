//! Gravity from camera poses: the up direction of a world in which the poses were estimated (SLAM's world
//! is its first camera's frame, not level).

use nalgebra::{Matrix3, Rotation3, UnitQuaternion, Vector3};

use crate::Pose3;

/// `level_from_world`: a rotation that makes the world's up direction ([`vertical_from_cameras`]) +z.
/// Identity when the headings do not span the floor plane (fewer than two poses, or all facing one way).
pub fn gravity_alignment(world_from_camera: &[Pose3]) -> Pose3 {
    let Some(up) = vertical_from_cameras(world_from_camera) else { return Pose3::identity() };
    let rotation = Rotation3::rotation_between(&up, &Vector3::z()).unwrap_or_else(Rotation3::identity);
    Pose3::from_parts(Vector3::zeros(), UnitQuaternion::from_rotation_matrix(&rotation))
}

/// The world's up direction (unit) seen from cameras carried without roll: the direction most nearly
/// perpendicular to every camera's x axis (their x axes lie near the floor plane), the one of its two signs
/// opposite to the cameras' mean y (down) axis. `None` for fewer than two poses, or when their x axes lie
/// along one line (all facing one way).
pub fn vertical_from_cameras<'a>(
    world_from_camera: impl IntoIterator<Item = &'a Pose3>,
) -> Option<Vector3<f64>> {
    let mut scatter = Matrix3::<f64>::zeros();
    let mut down_sum = Vector3::zeros();
    let mut count = 0usize;
    for pose in world_from_camera {
        let r = pose.rotation_matrix();
        let x = r.column(0).into_owned();
        scatter += x * x.transpose();
        down_sum += r.column(1).into_owned();
        count += 1;
    }
    if count < 2 {
        return None;
    }
    let eigen = scatter.symmetric_eigen();
    let mut order = [0, 1, 2];
    order.sort_by(|&a, &b| eigen.eigenvalues[a].total_cmp(&eigen.eigenvalues[b]));
    if eigen.eigenvalues[order[1]] < 1e-3 * count as f64 {
        return None;
    }
    let up: Vector3<f64> = eigen.eigenvectors.column(order[0]).into_owned();
    Some(if up.dot(&down_sum) > 0.0 { -up } else { up })
}
