//! Rigid transforms in 3D.

use nalgebra::{Isometry3, Matrix3, Point3, Rotation3, Translation3, UnitQuaternion, Vector3};
use serde::{Deserialize, Serialize};

/// A rigid transform `a_from_b` (SE(3)): it maps points expressed in frame `b` into frame `a`.
///
/// Values of this type are named after the frames they connect (`world_from_camera`), so that composition
/// reads right to left: `world_from_camera = world_from_body * body_from_camera`.
/// Serialised as `{"translation": [x, y, z], "rotation_xyzw": [x, y, z, w]}`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pose3(pub Isometry3<f64>);

impl Pose3 {
    pub fn identity() -> Self {
        Self(Isometry3::identity())
    }

    pub fn from_parts(translation: Vector3<f64>, rotation: UnitQuaternion<f64>) -> Self {
        Self(Isometry3::from_parts(Translation3::from(translation), rotation))
    }

    /// From a rotation matrix that is already orthonormal (det +1), such as one built from axes.
    /// (`Rotation3::from_matrix` would re-fit it iteratively from the identity, which stalls on half turns.)
    pub fn from_rotation_matrix(translation: Vector3<f64>, rotation: &Matrix3<f64>) -> Self {
        let rotation = Rotation3::from_matrix_unchecked(*rotation);
        Self::from_parts(translation, UnitQuaternion::from_rotation_matrix(&rotation))
    }

    /// The pose of a camera (OpenCV axes: x right, y down, z forward) standing at `position` in a z-up world,
    /// looking along heading `yaw` (0 = +x, counter-clockwise positive seen from above), tilted up by `pitch`.
    /// The result is `world_from_camera`. Roll is zero: the camera's x axis stays horizontal.
    pub fn world_from_camera_yaw_pitch(position: Vector3<f64>, yaw: f64, pitch: f64) -> Self {
        let forward = Vector3::new(yaw.cos() * pitch.cos(), yaw.sin() * pitch.cos(), pitch.sin());
        let right = Vector3::new(yaw.sin(), -yaw.cos(), 0.0);
        let down = forward.cross(&right);
        let rotation = Matrix3::from_columns(&[right, down, forward]);
        Self::from_rotation_matrix(position, &rotation)
    }

    pub fn inverse(&self) -> Self {
        Self(self.0.inverse())
    }

    pub fn translation(&self) -> Vector3<f64> {
        self.0.translation.vector
    }

    pub fn rotation(&self) -> UnitQuaternion<f64> {
        self.0.rotation
    }

    pub fn rotation_matrix(&self) -> Matrix3<f64> {
        *self.0.rotation.to_rotation_matrix().matrix()
    }

    pub fn transform_point(&self, point: &Point3<f64>) -> Point3<f64> {
        self.0.transform_point(point)
    }

    pub fn transform_vector(&self, vector: &Vector3<f64>) -> Vector3<f64> {
        self.0.transform_vector(vector)
    }

    /// Heading of a camera pose (`world_from_camera`): the angle of its optical axis projected on the floor,
    /// 0 = +x, counter-clockwise positive. Undefined (returns 0) for a camera looking straight down.
    pub fn camera_yaw(&self) -> f64 {
        let forward = self.transform_vector(&Vector3::z());
        forward.y.atan2(forward.x)
    }

    /// Pitch of a camera pose: the elevation of its optical axis, positive when looking up.
    pub fn camera_pitch(&self) -> f64 {
        let forward = self.transform_vector(&Vector3::z());
        forward.z.clamp(-1.0, 1.0).asin()
    }
}

impl std::ops::Mul for Pose3 {
    type Output = Pose3;
    fn mul(self, rhs: Pose3) -> Pose3 {
        Pose3(self.0 * rhs.0)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pose3Repr {
    translation: [f64; 3],
    rotation_xyzw: [f64; 4],
}

impl Serialize for Pose3 {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let t = self.translation();
        let q = self.rotation();
        Pose3Repr { translation: [t.x, t.y, t.z], rotation_xyzw: [q.i, q.j, q.k, q.w] }.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Pose3 {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let repr = Pose3Repr::deserialize(deserializer)?;
        let [x, y, z, w] = repr.rotation_xyzw;
        let quaternion = nalgebra::Quaternion::new(w, x, y, z);
        let norm = quaternion.norm();
        if !(norm.is_finite() && (norm - 1.0).abs() < 1e-3) {
            return Err(serde::de::Error::custom(format!(
                "rotation_xyzw must be a unit quaternion, has norm {norm}"
            )));
        }
        if repr.translation.iter().any(|v| !v.is_finite()) {
            return Err(serde::de::Error::custom("translation must be finite"));
        }
        // A quaternion unit to rounding (as every pose we write) is taken as written, so that reading and
        // writing a file again gives the same bytes (normalising moves the last digits); others are
        // normalised.
        let rotation = if (norm - 1.0).abs() < 1e-12 {
            UnitQuaternion::new_unchecked(quaternion)
        } else {
            UnitQuaternion::from_quaternion(quaternion)
        };
        Ok(Pose3::from_parts(Vector3::from(repr.translation), rotation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn random_pose(rng: &mut impl Rng) -> Pose3 {
        let axis = Vector3::new(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0));
        let rotation = UnitQuaternion::from_scaled_axis(axis * 2.0);
        let translation =
            Vector3::new(rng.gen_range(-9.0..9.0), rng.gen_range(-9.0..9.0), rng.gen_range(-2.0..2.0));
        Pose3::from_parts(translation, rotation)
    }

    #[test]
    fn inverse_composes_to_identity_property() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        for _ in 0..500 {
            let world_from_a = random_pose(&mut rng);
            let a_from_world = world_from_a.inverse();
            let identity = world_from_a * a_from_world;
            assert!(identity.translation().norm() < 1e-9);
            assert!(identity.rotation().angle() < 1e-9);
            let p = Point3::new(rng.gen_range(-5.0..5.0), rng.gen_range(-5.0..5.0), rng.gen_range(-5.0..5.0));
            let back = a_from_world.transform_point(&world_from_a.transform_point(&p));
            assert!((back - p).norm() < 1e-9);
        }
    }

    #[test]
    fn camera_axes_follow_opencv_convention() {
        let yaw = 30f64.to_radians();
        let pose = Pose3::world_from_camera_yaw_pitch(Vector3::new(1.0, 2.0, 1.5), yaw, 0.0);
        let forward = pose.transform_vector(&Vector3::z());
        let down = pose.transform_vector(&Vector3::y());
        let right = pose.transform_vector(&Vector3::x());
        assert!((forward - Vector3::new(yaw.cos(), yaw.sin(), 0.0)).norm() < 1e-12);
        assert!((down - Vector3::new(0.0, 0.0, -1.0)).norm() < 1e-12);
        // Looking along +x from above, the camera's right is -y.
        assert!(right.y < 0.0 && right.z.abs() < 1e-12);
        assert!((pose.camera_yaw() - yaw).abs() < 1e-12);
        let tilted = Pose3::world_from_camera_yaw_pitch(Vector3::zeros(), yaw, 0.2);
        assert!((tilted.camera_pitch() - 0.2).abs() < 1e-12);
        assert!((tilted.rotation_matrix().determinant() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn camera_poses_are_right_for_every_heading_including_half_turns() {
        // Regression: heading -90° (axis-aligned corridors) once came back pitched straight up.
        for yaw_deg in [-180.0f64, -135.0, -90.0, -45.0, 0.0, 45.0, 90.0, 135.0, 180.0] {
            for pitch_deg in [-15.0f64, 0.0, 10.0] {
                let pose = Pose3::world_from_camera_yaw_pitch(
                    Vector3::zeros(),
                    yaw_deg.to_radians(),
                    pitch_deg.to_radians(),
                );
                let forward = pose.transform_vector(&Vector3::z());
                let expected = Vector3::new(
                    yaw_deg.to_radians().cos() * pitch_deg.to_radians().cos(),
                    yaw_deg.to_radians().sin() * pitch_deg.to_radians().cos(),
                    pitch_deg.to_radians().sin(),
                );
                assert!((forward - expected).norm() < 1e-9, "yaw {yaw_deg}, pitch {pitch_deg}: {forward:?}");
                assert!((pose.transform_vector(&Vector3::x()).z).abs() < 1e-9, "roll must stay zero");
            }
        }
    }

    #[test]
    fn serde_round_trip_and_rejects_non_unit_quaternion() -> Result<(), serde_json::Error> {
        let pose = Pose3::world_from_camera_yaw_pitch(Vector3::new(1.0, -2.0, 1.4), 1.0, -0.1);
        let text = serde_json::to_string(&pose)?;
        let back: Pose3 = serde_json::from_str(&text)?;
        assert!((back.translation() - pose.translation()).norm() < 1e-12);
        assert!(back.rotation().angle_to(&pose.rotation()) < 1e-9);
        let bad = r#"{"translation":[0,0,0],"rotation_xyzw":[0,0,0,2]}"#;
        assert!(serde_json::from_str::<Pose3>(bad).is_err());
        // Written poses read back to the same bytes (a rotation of a relocalised view, unit to rounding,
        // whose normalisation would change its last digits); a rotation off unit norm is normalised.
        let written = r#"{"translation":[1.1292815879817997,-1.0112192273753062,3.5772188702819205],"rotation_xyzw":[-0.011849681295680564,-0.2666415810718848,-0.05737294380364945,0.9620136161281604]}"#;
        assert_eq!(serde_json::to_string(&serde_json::from_str::<Pose3>(written)?)?, written);
        let scaled: Pose3 =
            serde_json::from_str(r#"{"translation":[0,0,0],"rotation_xyzw":[0,0,0,1.0001]}"#)?;
        assert_eq!(scaled.rotation().quaternion().w, 1.0);
        Ok(())
    }
}
