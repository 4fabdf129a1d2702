//! Pose-graph optimisation time on a synthetic graph whose truth is known by construction: 2,000 keyframes
//! on four laps of a 3 m circle (with height and tilt changes), odometry edges between consecutive
//! keyframes with seeded noise (5 mm, 0.015 rad), and about 1,600 loop edges (1 cm, 0.002 rad; 3,600 edges in all): revisits of
//! the same place on later laps and views across the circle. The graph is initialised by chaining the
//! noisy odometry, so every run starts from about half a metre of drift and converges in a few iterations.
//!
//! One element is one optimisation from the drifted start to convergence (default options: Cauchy kernel).

// A benchmark on data built by construction: a failure is a bug, and panicking says so.
#![allow(clippy::expect_used)]

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use gst_core::Pose3;
use gst_slam::pose_graph::{Edge, EdgeKind, NodeId, PoseGraph, PoseGraphOptions};
use nalgebra::{UnitQuaternion, Vector3};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const POSES_PER_LAP: usize = 500;
const LAPS: usize = 4;
const RADIUS_M: f64 = 3.0;
const ODOMETRY_SIGMA_M: f64 = 0.005;
const ODOMETRY_SIGMA_RAD: f64 = 0.015;
const LOOP_SIGMA_M: f64 = 0.01;
const LOOP_SIGMA_RAD: f64 = 0.002;
/// Loop edges start at every this many keyframes (revisits and views across).
const LOOP_STRIDE: usize = 2;

fn gaussian(rng: &mut impl Rng) -> f64 {
    let u: f64 = 1.0 - rng.r#gen::<f64>();
    let v: f64 = rng.r#gen();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

fn noise(rng: &mut impl Rng, translation_sigma_m: f64, rotation_sigma_rad: f64) -> Pose3 {
    let translation = Vector3::from_fn(|_, _| gaussian(rng) * translation_sigma_m);
    let rotation = Vector3::from_fn(|_, _| gaussian(rng) * rotation_sigma_rad);
    Pose3::from_parts(translation, UnitQuaternion::from_scaled_axis(rotation))
}

fn drifted_circle(seed: u64) -> PoseGraph {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let count = POSES_PER_LAP * LAPS;
    let truth: Vec<Pose3> = (0..count)
        .map(|k| {
            let angle = std::f64::consts::TAU * k as f64 / POSES_PER_LAP as f64;
            let translation =
                Vector3::new(RADIUS_M * angle.cos(), RADIUS_M * angle.sin(), 1.2 + 0.2 * (3.0 * angle).sin());
            let rotation =
                UnitQuaternion::from_euler_angles(0.05 * angle.sin(), 0.1 * (2.0 * angle).cos(), angle + 1.5);
            Pose3::from_parts(translation, rotation)
        })
        .collect();
    let mut graph = PoseGraph::new();
    let mut world_from_previous = truth[0];
    graph.add_node(world_from_previous, true).expect("finite pose");
    let odometry_information = Edge::isotropic_information(ODOMETRY_SIGMA_M, ODOMETRY_SIGMA_RAD);
    for k in 1..count {
        let a_from_b =
            truth[k - 1].inverse() * truth[k] * noise(&mut rng, ODOMETRY_SIGMA_M, ODOMETRY_SIGMA_RAD);
        world_from_previous = world_from_previous * a_from_b;
        let node = graph.add_node(world_from_previous, false).expect("finite pose");
        let edge = Edge {
            a: NodeId(k - 1),
            b: node,
            a_from_b,
            information: odometry_information,
            kind: EdgeKind::Odometry,
        };
        graph.add_edge(edge).expect("valid edge");
    }
    let loop_information = Edge::isotropic_information(LOOP_SIGMA_M, LOOP_SIGMA_RAD);
    let revisits = (0..count - POSES_PER_LAP).step_by(LOOP_STRIDE).map(|k| (k, k + POSES_PER_LAP));
    let across = (1..count - POSES_PER_LAP / 2).step_by(LOOP_STRIDE).map(|k| (k, k + POSES_PER_LAP / 2));
    for (a, b) in revisits.chain(across) {
        let a_from_b = truth[a].inverse() * truth[b] * noise(&mut rng, LOOP_SIGMA_M, LOOP_SIGMA_RAD);
        let edge = Edge {
            a: NodeId(a),
            b: NodeId(b),
            a_from_b,
            information: loop_information,
            kind: EdgeKind::Loop,
        };
        graph.add_edge(edge).expect("valid edge");
    }
    graph
}

fn bench(c: &mut Criterion) {
    let graph = drifted_circle(21);
    let options = PoseGraphOptions::default();
    let mut probe = graph.clone();
    let summary = probe.optimize(&options).expect("optimisation");
    eprintln!(
        "pose graph: {} nodes, {} edges; {} iterations ({:?}), cost {:.1} → {:.1}",
        graph.node_count(),
        graph.edge_count(),
        summary.iterations,
        summary.termination,
        summary.initial_cost,
        summary.final_cost
    );
    let mut group = c.benchmark_group("pose_graph");
    group.sample_size(10);
    group.bench_function("optimize_2000_nodes", |b| {
        b.iter_batched(
            || graph.clone(),
            |mut graph| black_box(graph.optimize(&options).expect("optimisation")),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
