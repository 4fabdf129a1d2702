//! Property tests (proptest) of SE(3) poses: composition is associative, the inverse undoes a pose, and
//! composing transforms points like applying them one after the other.

use gst_core::Pose3;
use nalgebra::{Point3, UnitQuaternion, Vector3};
use proptest::prelude::*;

fn pose() -> impl Strategy<Value = Pose3> {
    (prop::array::uniform3(-50.0f64..50.0), prop::array::uniform3(-3.2f64..3.2)).prop_map(|(t, axis)| {
        Pose3::from_parts(Vector3::from(t), UnitQuaternion::from_scaled_axis(Vector3::from(axis)))
    })
}

fn point() -> impl Strategy<Value = Point3<f64>> {
    prop::array::uniform3(-20.0f64..20.0).prop_map(Point3::from)
}

fn close(a: &Pose3, b: &Pose3) -> bool {
    (a.translation() - b.translation()).norm() < 1e-9 && a.rotation().angle_to(&b.rotation()) < 1e-9
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn inverse_undoes_a_pose(a in pose(), p in point()) {
        prop_assert!(close(&(a * a.inverse()), &Pose3::identity()));
        prop_assert!(close(&(a.inverse() * a), &Pose3::identity()));
        let back = a.inverse().transform_point(&a.transform_point(&p));
        prop_assert!((back - p).norm() < 1e-9);
    }

    #[test]
    fn composition_is_associative_and_applies_in_order(a in pose(), b in pose(), c in pose(), p in point()) {
        prop_assert!(close(&((a * b) * c), &(a * (b * c))));
        let composed = (a * b).transform_point(&p);
        let stepwise = a.transform_point(&b.transform_point(&p));
        prop_assert!((composed - stepwise).norm() < 1e-9);
        prop_assert!(close(&(a * b).inverse(), &(b.inverse() * a.inverse())));
    }

    #[test]
    fn rotation_matrix_round_trips(a in pose()) {
        let back = Pose3::from_rotation_matrix(a.translation(), &a.rotation_matrix());
        prop_assert!(close(&a, &back));
        prop_assert!((a.rotation_matrix().determinant() - 1.0).abs() < 1e-12);
    }
}
