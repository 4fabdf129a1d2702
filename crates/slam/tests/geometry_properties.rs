//! Property tests (proptest): Umeyama recovers a known Sim(3)/SE(3) transform, a Sim(3) alignment's pose
//! transform inverts, and pose-graph optimisation never raises the cost it minimises.

use gst_core::Pose3;
use gst_slam::metrics::{Alignment, umeyama};
use gst_slam::pose_graph::{Edge, EdgeKind, NodeId, PoseGraph, PoseGraphOptions};
use nalgebra::{UnitQuaternion, Vector3};
use proptest::prelude::*;

fn rotation() -> impl Strategy<Value = UnitQuaternion<f64>> {
    prop::array::uniform3(-3.1f64..3.1).prop_map(|axis| UnitQuaternion::from_scaled_axis(Vector3::from(axis)))
}

fn pose(extent: f64) -> impl Strategy<Value = Pose3> {
    (prop::array::uniform3(-extent..extent), rotation())
        .prop_map(|(t, r)| Pose3::from_parts(Vector3::from(t), r))
}

fn similarity() -> impl Strategy<Value = Alignment> {
    (rotation(), prop::array::uniform3(-9.0f64..9.0), 0.1f64..10.0).prop_map(|(r, t, scale)| Alignment {
        rotation: *r.to_rotation_matrix().matrix(),
        translation: Vector3::from(t),
        scale,
    })
}

/// Points that span at least a plane: three fixed non-collinear ones plus random ones.
fn points() -> impl Strategy<Value = Vec<Vector3<f64>>> {
    prop::collection::vec(prop::array::uniform3(-5.0f64..5.0), 0..20).prop_map(|extra| {
        let mut points =
            vec![Vector3::new(0.0, 0.0, 0.0), Vector3::new(2.0, 0.0, 0.0), Vector3::new(0.0, 3.0, 0.0)];
        points.extend(extra.into_iter().map(Vector3::from));
        points
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn umeyama_recovers_a_known_similarity(truth in similarity(), source in points(), with_scale in any::<bool>()) {
        let truth = Alignment { scale: if with_scale { truth.scale } else { 1.0 }, ..truth };
        let target: Vec<Vector3<f64>> = source.iter().map(|p| truth.transform_point(p)).collect();
        let found = umeyama(&source, &target, with_scale).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!((found.rotation - truth.rotation).norm() < 1e-7, "{found:?} vs {truth:?}");
        prop_assert!((found.translation - truth.translation).norm() < 1e-6);
        prop_assert!((found.scale - truth.scale).abs() < 1e-7);
    }

    #[test]
    fn sim3_pose_transform_inverts(alignment in similarity(), p in pose(20.0)) {
        let there = alignment.transform_pose(&p);
        let back = alignment.inverse_transform_pose(&there);
        prop_assert!((back.translation() - p.translation()).norm() < 1e-8);
        prop_assert!(back.rotation().angle_to(&p.rotation()) < 1e-9);
    }

    /// A chain of poses with noisy odometry edges and one loop edge: optimisation may only lower the cost.
    #[test]
    fn pose_graph_optimisation_never_raises_the_cost(
        truth in prop::collection::vec(pose(5.0), 3..12),
        noise in prop::collection::vec(pose(0.3), 12),
        start_noise in prop::collection::vec(pose(0.5), 12),
    ) {
        let mut graph = PoseGraph::new();
        let mut nodes = Vec::new();
        for (k, world_from_node) in truth.iter().enumerate() {
            let start = if k == 0 { *world_from_node } else { *world_from_node * start_noise[k] };
            nodes.push(graph.add_node(start, k == 0).map_err(|e| TestCaseError::fail(e.to_string()))?);
        }
        let information = Edge::isotropic_information(0.05, 0.02);
        let mut add = |a: usize, b: usize, kind: EdgeKind, noisy: Pose3| -> Result<(), TestCaseError> {
            let a_from_b = truth[a].inverse() * truth[b] * noisy;
            graph
                .add_edge(Edge { a: nodes[a], b: nodes[b], a_from_b, information, kind })
                .map(|_| ())
                .map_err(|e| TestCaseError::fail(e.to_string()))
        };
        for (k, step_noise) in noise.iter().enumerate().take(truth.len()).skip(1) {
            add(k - 1, k, EdgeKind::Odometry, *step_noise)?;
        }
        add(0, truth.len() - 1, EdgeKind::Loop, noise[0])?;
        let summary = graph.optimize(&PoseGraphOptions::default()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(summary.final_cost <= summary.initial_cost * (1.0 + 1e-12), "{summary:?}");
        prop_assert!(summary.final_cost.is_finite());
        prop_assert_eq!(graph.pose(NodeId(0)), Some(truth[0]), "the fixed node stays put");
    }
}
