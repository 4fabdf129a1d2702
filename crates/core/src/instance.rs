//! Object instances and their oriented boxes.

use nalgebra::{Point3, Vector3};
use serde::{Deserialize, Serialize};

use crate::{ObjectClass, Pose3};

/// Identifier of an object instance within one scene; also the value in instance images, where 0 is
/// structure (walls, floor, ceiling) or nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InstanceId(pub u16);

impl InstanceId {
    pub const NONE: InstanceId = InstanceId(0);
}

/// An oriented 3D box: `world_from_box` places the box frame (origin at the box centre, axes along its
/// edges), `size_m` is the full extent along the box's x, y, z axes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrientedBox3 {
    pub world_from_box: Pose3,
    pub size_m: [f64; 3],
}

impl OrientedBox3 {
    pub fn center(&self) -> Point3<f64> {
        Point3::from(self.world_from_box.translation())
    }

    /// The eight corners in the world frame, bottom four first (box z = -size/2).
    pub fn corners(&self) -> [Point3<f64>; 8] {
        let h = Vector3::from(self.size_m) / 2.0;
        let mut corners = [Point3::origin(); 8];
        for (i, corner) in corners.iter_mut().enumerate() {
            let sx = if i & 1 == 0 { -h.x } else { h.x };
            let sy = if i & 2 == 0 { -h.y } else { h.y };
            let sz = if i & 4 == 0 { -h.z } else { h.z };
            *corner = self.world_from_box.transform_point(&Point3::new(sx, sy, sz));
        }
        corners
    }

    /// Whether a world point lies inside the box (boundary included, with `margin_m` of slack).
    pub fn contains(&self, point: &Point3<f64>, margin_m: f64) -> bool {
        let local = self.world_from_box.inverse().transform_point(point);
        (0..3).all(|i| local[i].abs() <= self.size_m[i] / 2.0 + margin_m)
    }
}

/// One object in a scene.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Instance {
    pub id: InstanceId,
    pub class: ObjectClass,
    /// Human-readable model name (for example the catalog entry it came from).
    pub name: String,
    pub bbox: OrientedBox3,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corners_lie_on_the_box_and_contain_its_centre() {
        let pose = Pose3::world_from_camera_yaw_pitch(Vector3::new(1.0, 2.0, 0.5), 0.7, 0.0);
        let bbox = OrientedBox3 { world_from_box: pose, size_m: [2.0, 1.0, 1.0] };
        assert!(bbox.contains(&bbox.center(), 0.0));
        for corner in bbox.corners() {
            assert!(bbox.contains(&corner, 1e-9));
            assert!((corner - bbox.center()).norm() - (1.5f64).sqrt() < 1e-9);
        }
        assert!(!bbox.contains(&Point3::new(10.0, 0.0, 0.0), 0.0));
    }
}
