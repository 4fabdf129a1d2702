//! Gravity from camera poses: the up direction of a world in which the poses were estimated (SLAM's world
//! is its first camera's frame, not level).

use nalgebra::{Matrix3, Rotation3, UnitQuaternion, Vector3};

use crate::Pose3;

/// `level_from_world`: a rotation that makes the world's up direction +z. Up is the direction most nearly
/// perpendicular to every camera's x axis (cameras roll little: their x axes lie near the floor plane), the
/// one of its two signs opposite to the cameras' mean y (down) axis. Identity when the headings do not span
/// the floor plane (fewer than two poses, or all facing one way).
pub fn gravity_alignment(world_from_camera: &[Pose3]) -> Pose3 {
    let mut scatter = Matrix3::<f64>::zeros();
    let mut down_sum = Vector3::zeros();
    for pose in world_from_camera {
        let r = pose.rotation_matrix();
        let x = r.column(0).into_owned();
        scatter += x * x.transpose();
        down_sum += r.column(1).into_owned();
    }
    if world_from_camera.len() < 2 {
        return Pose3::identity();
    }
    let eigen = scatter.symmetric_eigen();
    let (mut smallest, mut second) = (0, 1);
    for i in 0..3 {
        if eigen.eigenvalues[i] < eigen.eigenvalues[smallest] {
            smallest = i;
        }
    }
    for i in 0..3 {
        if i != smallest && (second == smallest || eigen.eigenvalues[i] < eigen.eigenvalues[second]) {
            second = i;
        }
    }
    // Degenerate: all headings alike (x axes along one line): keep the world as it is.
    if eigen.eigenvalues[second] < 1e-3 * world_from_camera.len() as f64 {
        return Pose3::identity();
    }
    let mut up: Vector3<f64> = eigen.eigenvectors.column(smallest).into_owned();
    if up.dot(&down_sum) > 0.0 {
        up = -up;
    }
    let rotation = Rotation3::rotation_between(&up, &Vector3::z()).unwrap_or_else(Rotation3::identity);
    Pose3::from_parts(Vector3::zeros(), UnitQuaternion::from_rotation_matrix(&rotation))
}
