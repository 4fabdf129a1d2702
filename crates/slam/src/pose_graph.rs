//! SE(3) pose-graph optimisation with a robust kernel and a sparse Cholesky solver.
//!
//! Loop closing adds loop edges between keyframes and calls [`PoseGraph::optimize`]; the per-edge χ² in the
//! returned [`OptimizationSummary`] lets the caller reject loop edges that the rest of the graph disagrees
//! with.
//!
//! # Conventions
//!
//! - A node holds `world_from_node` (a [`Pose3`]). Fixed nodes are never moved; at least one node must be
//!   fixed (the gauge: without one the problem has six free directions), and every free node must be
//!   connected through edges to a fixed one.
//! - An edge between nodes `a` and `b` holds the measurement `a_from_b`, i.e. what
//!   `world_from_a⁻¹ · world_from_b` should be.
//! - Tangent vectors are ordered `[ρ; φ]`: translation (metres) first, rotation (radians, axis-angle) second.
//!   Information matrices use the same order.
//! - The residual of an edge is `r = Log(a_from_b⁻¹ · world_from_a⁻¹ · world_from_b) ∈ ℝ⁶`: the pose of the
//!   estimated `b` seen from the measured `b`. Its χ² is `rᵀ Ω r` with the edge's information `Ω`.
//! - Updates are right perturbations: `world_from_node ← world_from_node · Exp(δ)`, δ in the node frame.
//!   With `E = a_from_b⁻¹ · a_from_world · world_from_b`, the analytic Jacobians are
//!   `∂r/∂δ_b = J_r⁻¹(r)` and `∂r/∂δ_a = −J_r⁻¹(r) · Ad(b_from_world · world_from_a)`, where `J_r` is the
//!   right Jacobian of SE(3) (Barfoot, *State Estimation for Robotics*, §7.1.5; `J_r(ξ) = J_l(−ξ)`).
//!
//! # Algorithm
//!
//! Levenberg–Marquardt on the robust cost `Σ_e ρ(χ²_e)`, where ρ is the identity (no kernel), Huber or
//! Cauchy. Each iteration linearises every edge, weights it by the kernel's `ρ'(χ²_e)` at the current
//! estimate (iteratively reweighted least squares), assembles the normal equations `H δ = −g` over the
//! free nodes in 6×6 blocks, adds Marquardt damping `λ · diag(H)` and solves with a sparse LLᵀ (faer). The
//! sparsity pattern of `H` depends only on the graph, so its symbolic factorisation (fill-reducing
//! ordering and elimination tree) is computed once per call and reused by every numeric factorisation.
//! A step is accepted when it lowers the robust cost; λ follows Nielsen's rule (shrink by the gain ratio
//! on success, double the growth factor on failure). The loop stops when an accepted step lowers the cost
//! by less than `relative_cost_tolerance` (relative), when the step becomes negligible, when λ grows past
//! any use, or after `max_iterations`.

use std::collections::VecDeque;

use faer::prelude::Solve;
use faer::sparse::linalg::solvers::{Llt, SymbolicLlt};
use faer::sparse::{Pair, SparseColMat, SymbolicSparseColMat};
use faer::{Mat, Side};
use gst_core::Pose3;
use nalgebra::{Matrix3, Matrix6, UnitQuaternion, Vector3, Vector6};
use serde::{Deserialize, Serialize};

use crate::SlamError;

/// χ² quantile of 6 degrees of freedom at 95 %: an edge whose χ² after optimisation exceeds this disagrees
/// with the graph more than its information claims (a common threshold to reject loop edges).
pub const CHI2_6DOF_95: f64 = 12.592;

/// Below this rotation angle (radians) the SO(3)/SE(3) series are evaluated by Taylor expansion, where the
/// closed forms lose precision to cancellation.
const SMALL_ANGLE_RAD: f64 = 1e-2;

/// Damping λ past which no step can lower the cost any more: the estimate is at a minimum.
const MAX_DAMPING: f64 = 1e16;

/// Lower bound of a Marquardt damping term, so that a direction the information leaves unconstrained
/// (a zero diagonal entry of H) is still damped.
const MIN_DAMPING_DIAGONAL: f64 = 1e-6;

/// Relative tolerance on the symmetry of an information matrix.
const SYMMETRY_TOLERANCE: f64 = 1e-9;

/// Index of a node in a [`PoseGraph`], in the order nodes were added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub usize);

/// Index of an edge in a [`PoseGraph`], in the order edges were added; indexes
/// [`OptimizationSummary::edge_chi2`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EdgeId(pub usize);

/// Where an edge's measurement came from; used for reporting and for rejecting loop edges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// Between consecutive keyframes, from visual odometry.
    Odometry,
    /// Between keyframes far apart in time, from loop detection.
    Loop,
}

/// A relative-pose measurement between two nodes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Edge {
    pub a: NodeId,
    pub b: NodeId,
    /// The measured pose of node `b` in the frame of node `a`: what `world_from_a⁻¹ · world_from_b` should be.
    pub a_from_b: Pose3,
    /// Inverse covariance of the residual (see the module docs), ordered `[translation; rotation]`, in the
    /// frame of node `b`. Symmetric positive definite.
    pub information: Matrix6<f64>,
    pub kind: EdgeKind,
}

impl Edge {
    /// Information of independent errors with standard deviations `translation_sigma_m` on each axis and
    /// `rotation_sigma_rad` about each axis.
    pub fn isotropic_information(translation_sigma_m: f64, rotation_sigma_rad: f64) -> Matrix6<f64> {
        let t = 1.0 / (translation_sigma_m * translation_sigma_m);
        let r = 1.0 / (rotation_sigma_rad * rotation_sigma_rad);
        Matrix6::from_diagonal(&Vector6::new(t, t, t, r, r, r))
    }
}

/// A robust kernel ρ applied to each edge's χ², so that a wrong edge (a false loop closure) pulls on the
/// graph with bounded (Huber) or vanishing (Cauchy) force.
///
/// Thresholds are in units of the square root of χ², i.e. standard deviations: an edge whose `√χ²` stays
/// below `threshold` is treated as quadratic. `√CHI2_6DOF_95 ≈ 3.55` is a good start; smaller values reject
/// more aggressively.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RobustKernel {
    /// Plain least squares: ρ(s) = s.
    None,
    /// ρ(s) = s for s ≤ k², 2k√s − k² beyond: quadratic near zero, linear in the residual beyond `k`.
    Huber { threshold: f64 },
    /// ρ(s) = k² ln(1 + s / k²): the influence of a residual falls off as it grows past `k`.
    Cauchy { threshold: f64 },
}

impl RobustKernel {
    /// ρ(s) of a χ² value `s`.
    fn cost(&self, chi2: f64) -> f64 {
        match *self {
            Self::None => chi2,
            Self::Huber { threshold } => {
                let k2 = threshold * threshold;
                if chi2 <= k2 { chi2 } else { 2.0 * threshold * chi2.sqrt() - k2 }
            }
            Self::Cauchy { threshold } => {
                let k2 = threshold * threshold;
                k2 * (chi2 / k2).ln_1p()
            }
        }
    }

    /// The IRLS weight ρ'(s).
    fn weight(&self, chi2: f64) -> f64 {
        match *self {
            Self::None => 1.0,
            Self::Huber { threshold } => {
                if chi2 <= threshold * threshold {
                    1.0
                } else {
                    threshold / chi2.sqrt()
                }
            }
            Self::Cauchy { threshold } => 1.0 / (1.0 + chi2 / (threshold * threshold)),
        }
    }

    fn validate(&self) -> Result<(), SlamError> {
        match *self {
            Self::None => Ok(()),
            Self::Huber { threshold } | Self::Cauchy { threshold } => {
                if threshold.is_finite() && threshold > 0.0 {
                    Ok(())
                } else {
                    Err(SlamError::InvalidInput(format!(
                        "robust kernel threshold must be finite and positive, is {threshold}"
                    )))
                }
            }
        }
    }
}

/// Options of [`PoseGraph::optimize`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoseGraphOptions {
    /// Kernel applied to every edge. Default: Cauchy at `√CHI2_6DOF_95` (≈ 3.55 σ): consistent edges stay
    /// nearly quadratic and a wrong loop edge loses its pull as its residual grows. Huber is convex (a
    /// unique minimum) but only bounds that pull: on a graph whose odometry bends easily, a gross outlier
    /// still distorts it and IRLS converges slowly; use it when outliers are moderate.
    pub robust_kernel: RobustKernel,
    /// At most this many linearisations (accepted or rejected steps). Default 100; a drifted loop of a few
    /// hundred keyframes typically converges in 5–20.
    pub max_iterations: usize,
    /// Stop when an accepted step lowers the robust cost by less than this fraction. Default 1e-6.
    pub relative_cost_tolerance: f64,
    /// Stop when the largest component of a step (metres or radians) is below this. Default 1e-9.
    pub step_tolerance: f64,
    /// Initial Levenberg–Marquardt damping, relative to diag(H). Default 1e-4 (nearly Gauss–Newton: pose
    /// graphs initialised from odometry are usually well inside the basin of convergence).
    pub initial_damping: f64,
}

impl Default for PoseGraphOptions {
    fn default() -> Self {
        Self {
            robust_kernel: RobustKernel::Cauchy { threshold: CHI2_6DOF_95.sqrt() },
            max_iterations: 100,
            relative_cost_tolerance: 1e-6,
            step_tolerance: 1e-9,
            initial_damping: 1e-4,
        }
    }
}

impl PoseGraphOptions {
    /// Checks every field; [`PoseGraph::optimize`] calls this first.
    pub fn validate(&self) -> Result<(), SlamError> {
        self.robust_kernel.validate()?;
        if self.max_iterations == 0 {
            return Err(SlamError::InvalidInput("max_iterations must be at least 1".into()));
        }
        for (name, value) in [
            ("relative_cost_tolerance", self.relative_cost_tolerance),
            ("step_tolerance", self.step_tolerance),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(SlamError::InvalidInput(format!("{name} must be finite and ≥ 0, is {value}")));
            }
        }
        if !(self.initial_damping.is_finite() && self.initial_damping > 0.0) {
            return Err(SlamError::InvalidInput(format!(
                "initial_damping must be finite and positive, is {}",
                self.initial_damping
            )));
        }
        Ok(())
    }
}

/// Why [`PoseGraph::optimize`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// An accepted step lowered the cost by less than `relative_cost_tolerance`.
    CostConverged,
    /// The step became smaller than `step_tolerance`.
    StepConverged,
    /// No step lowered the cost even with maximal damping: the estimate is at a (local) minimum.
    NoFurtherDecrease,
    /// `max_iterations` was reached first.
    MaxIterations,
    /// Every node is fixed: nothing to optimise.
    NothingToOptimize,
}

/// What [`PoseGraph::optimize`] did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptimizationSummary {
    /// Robust cost `Σ_e ρ(χ²_e)` before and after (equal to the total χ² without a kernel).
    pub initial_cost: f64,
    pub final_cost: f64,
    /// Total χ² `Σ_e rᵀ Ω r` before and after, without the kernel.
    pub initial_chi2: f64,
    pub final_chi2: f64,
    /// Linearisations done (accepted and rejected steps).
    pub iterations: usize,
    /// Steps that lowered the cost and were kept.
    pub accepted_steps: usize,
    pub termination: Termination,
    /// χ² of each edge after optimisation, without the kernel, indexed by [`EdgeId`]. Compare loop edges
    /// with [`CHI2_6DOF_95`] to find the ones the graph disagrees with.
    pub edge_chi2: Vec<f64>,
}

impl OptimizationSummary {
    /// The edge with the largest χ² after optimisation, and that χ².
    pub fn worst_edge(&self) -> Option<(EdgeId, f64)> {
        self.edge_chi2
            .iter()
            .copied()
            .enumerate()
            .max_by(|(_, x), (_, y)| x.total_cmp(y))
            .map(|(index, chi2)| (EdgeId(index), chi2))
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Node {
    world_from_node: Pose3,
    fixed: bool,
}

/// A graph of `world_from_node` poses and relative-pose edges; see the module docs for the conventions.
#[derive(Clone, Debug, Default)]
pub struct PoseGraph {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
}

impl PoseGraph {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node at `world_from_node`; a `fixed` node is never moved by [`Self::optimize`].
    pub fn add_node(&mut self, world_from_node: Pose3, fixed: bool) -> Result<NodeId, SlamError> {
        check_pose(&world_from_node).map_err(|what| {
            SlamError::InvalidInput(format!("node {}: world_from_node {what}", self.nodes.len()))
        })?;
        self.nodes.push(Node { world_from_node, fixed });
        Ok(NodeId(self.nodes.len() - 1))
    }

    /// Adds an edge after checking that both nodes exist and differ, the measurement is a finite rigid
    /// transform and the information matrix is finite, symmetric and positive definite.
    pub fn add_edge(&mut self, edge: Edge) -> Result<EdgeId, SlamError> {
        let id = self.edges.len();
        let invalid = |what: String| {
            SlamError::InvalidInput(format!("edge {id} ({:?} → {:?}): {what}", edge.a, edge.b))
        };
        for node in [edge.a, edge.b] {
            if node.0 >= self.nodes.len() {
                return Err(invalid(format!("node {} does not exist ({} nodes)", node.0, self.nodes.len())));
            }
        }
        if edge.a == edge.b {
            return Err(invalid("an edge must join two different nodes".into()));
        }
        check_pose(&edge.a_from_b).map_err(|what| invalid(format!("a_from_b {what}")))?;
        let information = &edge.information;
        if information.iter().any(|v| !v.is_finite()) {
            return Err(invalid("information matrix has non-finite entries".into()));
        }
        let asymmetry = (information - information.transpose()).abs().max();
        if asymmetry > SYMMETRY_TOLERANCE * information.abs().max() {
            return Err(invalid(format!("information matrix is not symmetric (asymmetry {asymmetry:e})")));
        }
        let information = (information + information.transpose()) * 0.5;
        if information.cholesky().is_none() {
            return Err(invalid("information matrix is not positive definite".into()));
        }
        self.edges.push(Edge { information, ..edge });
        Ok(EdgeId(id))
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }

    /// The current `world_from_node` of a node, `None` if it does not exist.
    pub fn pose(&self, node: NodeId) -> Option<Pose3> {
        self.nodes.get(node.0).map(|n| n.world_from_node)
    }

    /// All `world_from_node` poses, indexed by [`NodeId`].
    pub fn poses(&self) -> impl ExactSizeIterator<Item = Pose3> + '_ {
        self.nodes.iter().map(|n| n.world_from_node)
    }

    pub fn is_fixed(&self, node: NodeId) -> Option<bool> {
        self.nodes.get(node.0).map(|n| n.fixed)
    }

    pub fn edge(&self, edge: EdgeId) -> Option<&Edge> {
        self.edges.get(edge.0)
    }

    /// All edges, indexed by [`EdgeId`].
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// Moves a node (e.g. to re-initialise it), keeping whether it is fixed.
    pub fn set_pose(&mut self, node: NodeId, world_from_node: Pose3) -> Result<(), SlamError> {
        check_pose(&world_from_node)
            .map_err(|what| SlamError::InvalidInput(format!("node {}: world_from_node {what}", node.0)))?;
        let count = self.nodes.len();
        let slot = self.nodes.get_mut(node.0).ok_or_else(|| {
            SlamError::InvalidInput(format!("node {} does not exist ({count} nodes)", node.0))
        })?;
        slot.world_from_node = world_from_node;
        Ok(())
    }

    pub fn set_fixed(&mut self, node: NodeId, fixed: bool) -> Result<(), SlamError> {
        let count = self.nodes.len();
        let slot = self.nodes.get_mut(node.0).ok_or_else(|| {
            SlamError::InvalidInput(format!("node {} does not exist ({count} nodes)", node.0))
        })?;
        slot.fixed = fixed;
        Ok(())
    }

    /// χ² `rᵀ Ω r` of every edge at the current poses, indexed by [`EdgeId`].
    pub fn edge_chi2(&self) -> Vec<f64> {
        let poses: Vec<Pose3> = self.poses().collect();
        self.edges.iter().map(|edge| chi2(&edge_residual(edge, &poses), &edge.information)).collect()
    }

    /// Minimises the robust cost over the free nodes (see the module docs) and moves them to the result.
    ///
    /// Fails on invalid options, on a graph whose gauge is free (no fixed node, or a free node with no
    /// path of edges to a fixed one), and when the linear system cannot be factorised even when damped.
    pub fn optimize(&mut self, options: &PoseGraphOptions) -> Result<OptimizationSummary, SlamError> {
        options.validate()?;
        self.check_gauge()?;
        let kernel = options.robust_kernel;
        let mut poses: Vec<Pose3> = self.poses().collect();
        let (initial_cost, initial_chi2) = self.cost(&poses, &kernel);
        let mut summary = OptimizationSummary {
            initial_cost,
            final_cost: initial_cost,
            initial_chi2,
            final_chi2: initial_chi2,
            iterations: 0,
            accepted_steps: 0,
            termination: Termination::MaxIterations,
            edge_chi2: Vec::new(),
        };
        let system = NormalEquations::new(&self.nodes, &self.edges)?;
        if system.variable_count == 0 {
            summary.termination = Termination::NothingToOptimize;
            summary.edge_chi2 = self.edge_chi2();
            return Ok(summary);
        }
        let mut system = system;
        let mut cost = initial_cost;
        let mut damping = options.initial_damping;
        let mut damping_growth = 2.0;
        let mut linearised = false;
        let mut candidate = poses.clone();
        while summary.iterations < options.max_iterations {
            summary.iterations += 1;
            if !linearised {
                system.linearise(&self.edges, &poses, &kernel);
                linearised = true;
            }
            let Some(step) = system.solve(damping)? else {
                // Not positive definite at this damping: damp harder and try again.
                damping *= damping_growth;
                damping_growth *= 2.0;
                if damping > MAX_DAMPING {
                    return Err(SlamError::Optimisation(
                        "the normal equations stay indefinite even with maximal damping".into(),
                    ));
                }
                continue;
            };
            let step_size = step.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            if step_size < options.step_tolerance {
                summary.termination = Termination::StepConverged;
                break;
            }
            for (node, slot) in system.variable_of_node.iter().enumerate() {
                candidate[node] = match slot {
                    Some(var) => {
                        let delta = Vector6::from_column_slice(&step[6 * var..6 * var + 6]);
                        poses[node] * se3_exp(&delta)
                    }
                    None => poses[node],
                };
            }
            let (new_cost, _) = self.cost(&candidate, &kernel);
            let predicted_decrease = system.predicted_decrease(&step);
            let gain = (cost - new_cost) / predicted_decrease;
            tracing::trace!(iteration = summary.iterations, cost, new_cost, damping, gain, "pose-graph step");
            if new_cost.is_finite() && new_cost < cost && predicted_decrease > 0.0 {
                std::mem::swap(&mut poses, &mut candidate);
                summary.accepted_steps += 1;
                linearised = false;
                damping *= (1.0 - (2.0 * gain - 1.0).powi(3)).max(1.0 / 3.0);
                damping_growth = 2.0;
                let relative_decrease = (cost - new_cost) / cost.max(f64::MIN_POSITIVE);
                cost = new_cost;
                if relative_decrease < options.relative_cost_tolerance {
                    summary.termination = Termination::CostConverged;
                    break;
                }
            } else {
                damping *= damping_growth;
                damping_growth *= 2.0;
                if damping > MAX_DAMPING {
                    summary.termination = Termination::NoFurtherDecrease;
                    break;
                }
            }
        }
        for (node, pose) in self.nodes.iter_mut().zip(&poses) {
            node.world_from_node = *pose;
        }
        let (final_cost, final_chi2) = self.cost(&poses, &kernel);
        summary.final_cost = final_cost;
        summary.final_chi2 = final_chi2;
        summary.edge_chi2 = self.edge_chi2();
        if summary.termination == Termination::MaxIterations {
            tracing::warn!(
                iterations = summary.iterations,
                "pose graph did not converge within max_iterations"
            );
        }
        tracing::debug!(?summary.termination, summary.iterations, initial_cost, final_cost, "pose graph optimised");
        Ok(summary)
    }

    /// (robust cost, plain χ²) of all edges at `poses`.
    fn cost(&self, poses: &[Pose3], kernel: &RobustKernel) -> (f64, f64) {
        self.edges.iter().fold((0.0, 0.0), |(cost, total), edge| {
            let s = chi2(&edge_residual(edge, poses), &edge.information);
            (cost + kernel.cost(s), total + s)
        })
    }

    /// Every free node must reach a fixed node through edges, or its pose is undetermined.
    fn check_gauge(&self) -> Result<(), SlamError> {
        if self.nodes.iter().all(|n| !n.fixed) && !self.nodes.is_empty() {
            return Err(SlamError::InvalidInput(
                "no node is fixed: fix at least one (e.g. the first keyframe) to anchor the gauge".into(),
            ));
        }
        let mut neighbours = vec![Vec::new(); self.nodes.len()];
        for edge in &self.edges {
            neighbours[edge.a.0].push(edge.b.0);
            neighbours[edge.b.0].push(edge.a.0);
        }
        let mut reached: Vec<bool> = self.nodes.iter().map(|n| n.fixed).collect();
        let mut queue: VecDeque<usize> = (0..self.nodes.len()).filter(|&i| reached[i]).collect();
        while let Some(node) = queue.pop_front() {
            for &next in &neighbours[node] {
                if !reached[next] {
                    reached[next] = true;
                    queue.push_back(next);
                }
            }
        }
        match reached.iter().position(|r| !r) {
            Some(node) => Err(SlamError::InvalidInput(format!(
                "node {node} is free and not connected by edges to any fixed node: its pose is undetermined"
            ))),
            None => Ok(()),
        }
    }
}

/// Checks a pose for non-finite values and a non-unit rotation; returns what is wrong.
fn check_pose(pose: &Pose3) -> Result<(), &'static str> {
    let q = pose.rotation();
    if pose.translation().iter().any(|v| !v.is_finite()) || q.coords.iter().any(|v| !v.is_finite()) {
        return Err("has non-finite values");
    }
    if (q.coords.norm() - 1.0).abs() > 1e-6 {
        return Err("has a rotation that is not a unit quaternion");
    }
    Ok(())
}

fn chi2(residual: &Vector6<f64>, information: &Matrix6<f64>) -> f64 {
    residual.dot(&(information * residual))
}

fn edge_residual(edge: &Edge, poses: &[Pose3]) -> Vector6<f64> {
    let error = edge.a_from_b.inverse() * poses[edge.a.0].inverse() * poses[edge.b.0];
    se3_log(&error)
}

/// Residual of an edge and its Jacobians with respect to right perturbations of `world_from_a` and
/// `world_from_b` (see the module docs).
fn edge_linearisation(
    a_from_b: &Pose3,
    world_from_a: &Pose3,
    world_from_b: &Pose3,
) -> (Vector6<f64>, Matrix6<f64>, Matrix6<f64>) {
    let error = a_from_b.inverse() * world_from_a.inverse() * *world_from_b;
    let residual = se3_log(&error);
    let jacobian_b = se3_right_jacobian_inverse(&residual);
    let jacobian_a = -jacobian_b * se3_adjoint(&(world_from_b.inverse() * *world_from_a));
    (residual, jacobian_a, jacobian_b)
}

fn hat(v: &Vector3<f64>) -> Matrix3<f64> {
    Matrix3::new(0.0, -v.z, v.y, v.z, 0.0, -v.x, -v.y, v.x, 0.0)
}

/// Left Jacobian of SO(3).
fn so3_left_jacobian(phi: &Vector3<f64>) -> Matrix3<f64> {
    let theta = phi.norm();
    let phi_hat = hat(phi);
    let phi_hat2 = phi_hat * phi_hat;
    let (a, b) = if theta < SMALL_ANGLE_RAD {
        let t2 = theta * theta;
        (0.5 - t2 / 24.0, 1.0 / 6.0 - t2 / 120.0)
    } else {
        let t2 = theta * theta;
        ((1.0 - theta.cos()) / t2, (theta - theta.sin()) / (t2 * theta))
    };
    Matrix3::identity() + phi_hat * a + phi_hat2 * b
}

/// Inverse of the left Jacobian of SO(3).
fn so3_left_jacobian_inverse(phi: &Vector3<f64>) -> Matrix3<f64> {
    let theta = phi.norm();
    let phi_hat = hat(phi);
    let phi_hat2 = phi_hat * phi_hat;
    let c = if theta < SMALL_ANGLE_RAD {
        1.0 / 12.0 + theta * theta / 720.0
    } else {
        let half = 0.5 * theta;
        // (1 + cos θ) / (2 θ sin θ) written as cot(θ/2) / (2θ), which stays finite at θ = π.
        1.0 / (theta * theta) - half.cos() / (2.0 * theta * half.sin())
    };
    Matrix3::identity() - phi_hat * 0.5 + phi_hat2 * c
}

/// Exponential map of SE(3) for `ξ = [ρ; φ]`.
fn se3_exp(xi: &Vector6<f64>) -> Pose3 {
    let rho = xi.fixed_rows::<3>(0).into_owned();
    let phi = xi.fixed_rows::<3>(3).into_owned();
    Pose3::from_parts(so3_left_jacobian(&phi) * rho, UnitQuaternion::from_scaled_axis(phi))
}

/// Logarithm map of SE(3), `[ρ; φ]` with the rotation angle in [0, π].
fn se3_log(pose: &Pose3) -> Vector6<f64> {
    let phi = pose.rotation().scaled_axis();
    let rho = so3_left_jacobian_inverse(&phi) * pose.translation();
    Vector6::new(rho.x, rho.y, rho.z, phi.x, phi.y, phi.z)
}

/// Adjoint of SE(3) in `[ρ; φ]` order: `Exp(Ad(T) ξ) = T · Exp(ξ) · T⁻¹`.
fn se3_adjoint(pose: &Pose3) -> Matrix6<f64> {
    let rotation = pose.rotation_matrix();
    let mut adjoint = Matrix6::zeros();
    adjoint.fixed_view_mut::<3, 3>(0, 0).copy_from(&rotation);
    adjoint.fixed_view_mut::<3, 3>(0, 3).copy_from(&(hat(&pose.translation()) * rotation));
    adjoint.fixed_view_mut::<3, 3>(3, 3).copy_from(&rotation);
    adjoint
}

/// The `Q(ρ, φ)` block of the left Jacobian of SE(3) (Barfoot, eq. 7.86).
fn se3_q(rho: &Vector3<f64>, phi: &Vector3<f64>) -> Matrix3<f64> {
    let theta = phi.norm();
    let p = hat(phi);
    let r = hat(rho);
    let (c1, c2, c3) = if theta < SMALL_ANGLE_RAD {
        let t2 = theta * theta;
        (1.0 / 6.0 - t2 / 120.0, 1.0 / 24.0 - t2 / 720.0, 1.0 / 120.0 - t2 / 2520.0)
    } else {
        let (s, c) = theta.sin_cos();
        let t2 = theta * theta;
        let t4 = t2 * t2;
        (
            (theta - s) / (t2 * theta),
            (t2 + 2.0 * c - 2.0) / (2.0 * t4),
            (2.0 * theta - 3.0 * s + theta * c) / (2.0 * t4 * theta),
        )
    };
    let pr = p * r;
    let rp = r * p;
    let prp = pr * p;
    r * 0.5 + (pr + rp + prp) * c1 + (p * pr + rp * p - prp * 3.0) * c2 + (prp * p + p * prp) * c3
}

/// Inverse of the right Jacobian of SE(3): `Log(Exp(ξ) · Exp(δ)) ≈ ξ + J_r⁻¹(ξ) δ`.
fn se3_right_jacobian_inverse(xi: &Vector6<f64>) -> Matrix6<f64> {
    // J_r(ξ) = J_l(−ξ), and J_l⁻¹ = [[J⁻¹, −J⁻¹ Q J⁻¹], [0, J⁻¹]] with the SO(3) J⁻¹ of φ.
    let rho = -xi.fixed_rows::<3>(0).into_owned();
    let phi = -xi.fixed_rows::<3>(3).into_owned();
    let j_inv = so3_left_jacobian_inverse(&phi);
    let q = se3_q(&rho, &phi);
    let mut result = Matrix6::zeros();
    result.fixed_view_mut::<3, 3>(0, 0).copy_from(&j_inv);
    result.fixed_view_mut::<3, 3>(0, 3).copy_from(&(-j_inv * q * j_inv));
    result.fixed_view_mut::<3, 3>(3, 3).copy_from(&j_inv);
    result
}

/// Number of entries of the upper triangle of a 6×6 block.
const UPPER_BLOCK_LEN: usize = 21;

/// Where an edge's contributions go in the assembled system.
#[derive(Clone, Copy, Debug)]
struct EdgeSlots {
    variable_a: Option<usize>,
    variable_b: Option<usize>,
    /// Offset of the off-diagonal block in `NormalEquations::values` when both nodes are free.
    off_diagonal: Option<usize>,
}

/// The damped normal equations `(H + λ D) δ = −g` over the free nodes, with a fixed sparsity pattern.
///
/// `values` lists the upper triangle of `H` as triplets in a fixed order: the 21 upper entries of each free
/// node's diagonal block, then the 36 entries of the off-diagonal block of each edge between free nodes
/// (duplicates of the same position are summed by faer). The symbolic factorisation is computed once.
struct NormalEquations {
    variable_count: usize,
    variable_of_node: Vec<Option<usize>>,
    edge_slots: Vec<EdgeSlots>,
    pattern: SymbolicSparseColMat<usize>,
    argsort: faer::sparse::Argsort<usize>,
    symbolic: Option<SymbolicLlt<usize>>,
    /// Entries of H in triplet order (undamped).
    values: Vec<f64>,
    /// Scratch copy of `values` with damping added to the diagonal.
    damped: Vec<f64>,
    /// Positions in `values` of the diagonal entries of H, by variable index (6 per node).
    diagonal_positions: Vec<usize>,
    gradient: Vec<f64>,
}

impl std::fmt::Debug for NormalEquations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NormalEquations")
            .field("variable_count", &self.variable_count)
            .finish_non_exhaustive()
    }
}

/// Position of `(row, col)`, `row ≤ col`, in the upper-triangle listing of a 6×6 block.
fn upper_index(row: usize, col: usize) -> usize {
    // Rows listed one after the other: row r starts after 6 + 5 + … entries.
    row * 6 - row * (row.saturating_sub(1)) / 2 + (col - row)
}

impl NormalEquations {
    fn new(nodes: &[Node], edges: &[Edge]) -> Result<Self, SlamError> {
        let mut variable_of_node = Vec::with_capacity(nodes.len());
        let mut free = 0;
        for node in nodes {
            variable_of_node.push(if node.fixed {
                None
            } else {
                free += 1;
                Some(free - 1)
            });
        }
        let variable_count = free;
        let mut indices = Vec::with_capacity(free * UPPER_BLOCK_LEN + edges.len() * 36);
        for var in 0..free {
            for row in 0..6 {
                for col in row..6 {
                    indices.push(Pair::new(6 * var + row, 6 * var + col));
                }
            }
        }
        let mut edge_slots = Vec::with_capacity(edges.len());
        for edge in edges {
            let variable_a = variable_of_node[edge.a.0];
            let variable_b = variable_of_node[edge.b.0];
            let off_diagonal = match (variable_a, variable_b) {
                (Some(va), Some(vb)) => {
                    let offset = indices.len();
                    let (low, high) = (va.min(vb), va.max(vb));
                    for row in 0..6 {
                        for col in 0..6 {
                            indices.push(Pair::new(6 * low + row, 6 * high + col));
                        }
                    }
                    Some(offset)
                }
                _ => None,
            };
            edge_slots.push(EdgeSlots { variable_a, variable_b, off_diagonal });
        }
        let dimension = 6 * variable_count;
        let (pattern, argsort) =
            SymbolicSparseColMat::try_new_from_indices(dimension, dimension, &indices)
                .map_err(|e| SlamError::Optimisation(format!("building the sparsity pattern: {e:?}")))?;
        let diagonal_positions =
            (0..dimension).map(|i| (i / 6) * UPPER_BLOCK_LEN + upper_index(i % 6, i % 6)).collect();
        let len = indices.len();
        Ok(Self {
            variable_count,
            variable_of_node,
            edge_slots,
            pattern,
            argsort,
            symbolic: None,
            values: vec![0.0; len],
            damped: vec![0.0; len],
            diagonal_positions,
            gradient: vec![0.0; dimension],
        })
    }

    /// Fills H and g at `poses`, each edge weighted by the kernel's IRLS weight.
    fn linearise(&mut self, edges: &[Edge], poses: &[Pose3], kernel: &RobustKernel) {
        self.values.fill(0.0);
        self.gradient.fill(0.0);
        for (edge, slots) in edges.iter().zip(&self.edge_slots) {
            if slots.variable_a.is_none() && slots.variable_b.is_none() {
                continue;
            }
            let (residual, jacobian_a, jacobian_b) =
                edge_linearisation(&edge.a_from_b, &poses[edge.a.0], &poses[edge.b.0]);
            let weight = kernel.weight(chi2(&residual, &edge.information));
            let weighted_information = edge.information * weight;
            let information_r = weighted_information * residual;
            let information_ja = weighted_information * jacobian_a;
            let information_jb = weighted_information * jacobian_b;
            for (variable, jacobian, information_j) in [
                (slots.variable_a, &jacobian_a, &information_ja),
                (slots.variable_b, &jacobian_b, &information_jb),
            ] {
                let Some(var) = variable else { continue };
                let block = jacobian.transpose() * information_j;
                let base = var * UPPER_BLOCK_LEN;
                for row in 0..6 {
                    for col in row..6 {
                        self.values[base + upper_index(row, col)] += block[(row, col)];
                    }
                }
                let gradient = jacobian.transpose() * information_r;
                for row in 0..6 {
                    self.gradient[6 * var + row] += gradient[row];
                }
            }
            if let (Some(offset), Some(va), Some(vb)) =
                (slots.off_diagonal, slots.variable_a, slots.variable_b)
            {
                // The block at (low, high): J_lowᵀ Ω J_high.
                let block = if va < vb {
                    jacobian_a.transpose() * information_jb
                } else {
                    jacobian_b.transpose() * information_ja
                };
                for row in 0..6 {
                    for col in 0..6 {
                        self.values[offset + 6 * row + col] += block[(row, col)];
                    }
                }
            }
        }
    }

    /// Solves `(H + λ diag(H)) δ = −g`; `None` when the damped matrix is not positive definite.
    fn solve(&mut self, damping: f64) -> Result<Option<Vec<f64>>, SlamError> {
        self.damped.copy_from_slice(&self.values);
        for &position in &self.diagonal_positions {
            self.damped[position] += damping * self.values[position].max(MIN_DAMPING_DIAGONAL);
        }
        let matrix = SparseColMat::new_from_argsort(self.pattern.clone(), &self.argsort, &self.damped)
            .map_err(|e| SlamError::Optimisation(format!("assembling the normal equations: {e:?}")))?;
        let symbolic = match &self.symbolic {
            Some(symbolic) => symbolic.clone(),
            None => {
                let symbolic = SymbolicLlt::try_new(matrix.symbolic(), Side::Upper)
                    .map_err(|e| SlamError::Optimisation(format!("symbolic factorisation: {e:?}")))?;
                self.symbolic = Some(symbolic.clone());
                symbolic
            }
        };
        let factor = match Llt::try_new_with_symbolic(symbolic, matrix.as_ref(), Side::Upper) {
            Ok(factor) => factor,
            Err(faer::sparse::linalg::LltError::Numeric(_)) => return Ok(None),
            Err(e) => return Err(SlamError::Optimisation(format!("numeric factorisation: {e:?}"))),
        };
        let mut rhs = Mat::from_fn(self.gradient.len(), 1, |row, _| -self.gradient[row]);
        factor.solve_in_place(rhs.as_mut());
        let step: Vec<f64> = (0..self.gradient.len()).map(|row| rhs[(row, 0)]).collect();
        if step.iter().any(|v| !v.is_finite()) {
            return Ok(None);
        }
        Ok(Some(step))
    }

    /// Decrease of the (IRLS-weighted) quadratic model for `step`: `−(2 gᵀδ + δᵀ H δ)`, which equals
    /// `δᵀ H δ + 2λ δᵀ D δ` for the damped solution. Uses the undamped H.
    fn predicted_decrease(&self, step: &[f64]) -> f64 {
        let gradient_term: f64 = self.gradient.iter().zip(step).map(|(g, d)| g * d).sum();
        -(2.0 * gradient_term + self.quadratic_form(step))
    }

    /// `δᵀ H δ` from the upper-triangle triplets.
    fn quadratic_form(&self, step: &[f64]) -> f64 {
        let mut total = 0.0;
        for var in 0..self.variable_count {
            let base = var * UPPER_BLOCK_LEN;
            let d = &step[6 * var..6 * var + 6];
            for row in 0..6 {
                for col in row..6 {
                    let h = self.values[base + upper_index(row, col)];
                    total += if row == col { h * d[row] * d[col] } else { 2.0 * h * d[row] * d[col] };
                }
            }
        }
        for slots in &self.edge_slots {
            if let (Some(offset), Some(va), Some(vb)) =
                (slots.off_diagonal, slots.variable_a, slots.variable_b)
            {
                let (low, high) = (va.min(vb), va.max(vb));
                for row in 0..6 {
                    for col in 0..6 {
                        total += 2.0
                            * self.values[offset + 6 * row + col]
                            * step[6 * low + row]
                            * step[6 * high + col];
                    }
                }
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn gaussian(rng: &mut impl Rng) -> f64 {
        // Box–Muller; 1 − u keeps the logarithm finite.
        let u: f64 = 1.0 - rng.r#gen::<f64>();
        let v: f64 = rng.r#gen();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    fn noise(rng: &mut impl Rng, translation_sigma_m: f64, rotation_sigma_rad: f64) -> Pose3 {
        let xi = Vector6::from_fn(|i, _| {
            gaussian(rng) * if i < 3 { translation_sigma_m } else { rotation_sigma_rad }
        });
        se3_exp(&xi)
    }

    fn random_pose(rng: &mut impl Rng, max_angle_rad: f64) -> Pose3 {
        let axis = Vector3::from_fn(|_, _| rng.gen_range(-1.0..1.0)).normalize();
        let translation = Vector3::from_fn(|_, _| rng.gen_range(-3.0..3.0));
        Pose3::from_parts(
            translation,
            UnitQuaternion::from_scaled_axis(axis * rng.gen_range(0.0..max_angle_rad)),
        )
    }

    fn pose_distance(x: &Pose3, y: &Pose3) -> (f64, f64) {
        ((x.translation() - y.translation()).norm(), x.rotation().angle_to(&y.rotation()))
    }

    #[test]
    fn exp_and_log_are_inverse_and_adjoint_moves_perturbations() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for case in 0..200 {
            // Include tiny angles to exercise the series branches.
            let scale = if case % 4 == 0 { 1e-4 } else { 1.0 };
            let xi =
                Vector6::from_fn(|i, _| rng.gen_range(-1.0..1.0) * if i < 3 { 2.0 } else { 1.5 * scale });
            let back = se3_log(&se3_exp(&xi));
            assert!((back - xi).norm() < 1e-10, "{xi:?} → {back:?}");
            let pose = random_pose(&mut rng, 3.0);
            let delta = Vector6::from_fn(|_, _| rng.gen_range(-0.3..0.3));
            let left = se3_exp(&(se3_adjoint(&pose) * delta));
            let right = pose * se3_exp(&delta) * pose.inverse();
            let (dt, dr) = pose_distance(&left, &right);
            assert!(dt < 1e-10 && dr < 1e-10);
        }
    }

    #[test]
    fn analytic_jacobians_match_numerical_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let step = 1e-6;
        for case in 0..50 {
            let world_from_a = random_pose(&mut rng, 3.0);
            let world_from_b = random_pose(&mut rng, 3.0);
            // Residuals from tiny to large (up to ~1.2 rad), since J_r⁻¹ depends on the residual.
            let sigma = [1e-5, 0.05, 0.3, 0.7][case % 4];
            let a_from_b = world_from_a.inverse() * world_from_b * noise(&mut rng, sigma, sigma);
            let (residual, jacobian_a, jacobian_b) =
                edge_linearisation(&a_from_b, &world_from_a, &world_from_b);
            let residual_at = |wa: &Pose3, wb: &Pose3| se3_log(&(a_from_b.inverse() * wa.inverse() * *wb));
            assert!((residual - residual_at(&world_from_a, &world_from_b)).norm() < 1e-12);
            let mut numeric_a = Matrix6::zeros();
            let mut numeric_b = Matrix6::zeros();
            for k in 0..6 {
                let mut delta = Vector6::zeros();
                delta[k] = step;
                let plus = se3_exp(&delta);
                let minus = se3_exp(&-delta);
                numeric_a.set_column(
                    k,
                    &((residual_at(&(world_from_a * plus), &world_from_b)
                        - residual_at(&(world_from_a * minus), &world_from_b))
                        / (2.0 * step)),
                );
                numeric_b.set_column(
                    k,
                    &((residual_at(&world_from_a, &(world_from_b * plus))
                        - residual_at(&world_from_a, &(world_from_b * minus)))
                        / (2.0 * step)),
                );
            }
            let error_a = (numeric_a - jacobian_a).abs().max();
            let error_b = (numeric_b - jacobian_b).abs().max();
            assert!(error_a < 1e-6 && error_b < 1e-6, "case {case}: errors {error_a:e}, {error_b:e}");
        }
    }

    /// A ground-truth trajectory of two laps around a 3 m circle (with some height and tilt), the graph
    /// initialised by chaining noisy odometry from the fixed first node, and correct loop edges between
    /// the laps.
    struct Problem {
        truth: Vec<Pose3>,
        graph: PoseGraph,
    }

    const POSES_PER_LAP: usize = 100;
    const LAPS: usize = 2;
    const ODOMETRY_SIGMA_M: f64 = 0.005;
    const ODOMETRY_SIGMA_RAD: f64 = 0.015;
    const LOOP_SIGMA_M: f64 = 0.01;
    const LOOP_SIGMA_RAD: f64 = 0.002;

    fn circle_problem(seed: u64, poses_per_lap: usize, laps: usize, loop_stride: usize) -> Problem {
        circle_problem_with(seed, poses_per_lap, laps, loop_stride, ODOMETRY_SIGMA_M, ODOMETRY_SIGMA_RAD)
    }

    fn circle_problem_with(
        seed: u64,
        poses_per_lap: usize,
        laps: usize,
        loop_stride: usize,
        odometry_sigma_m: f64,
        odometry_sigma_rad: f64,
    ) -> Problem {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let count = poses_per_lap * laps;
        let truth: Vec<Pose3> = (0..count)
            .map(|k| {
                let angle = std::f64::consts::TAU * k as f64 / poses_per_lap as f64;
                let translation =
                    Vector3::new(3.0 * angle.cos(), 3.0 * angle.sin(), 1.2 + 0.2 * (3.0 * angle).sin());
                let rotation = UnitQuaternion::from_euler_angles(
                    0.05 * angle.sin(),
                    0.1 * (2.0 * angle).cos(),
                    angle + 1.5,
                );
                Pose3::from_parts(translation, rotation)
            })
            .collect();
        let mut graph = PoseGraph::new();
        graph.add_node(truth[0], true).unwrap();
        let odometry_information = Edge::isotropic_information(odometry_sigma_m, odometry_sigma_rad);
        for k in 1..count {
            let a_from_b =
                truth[k - 1].inverse() * truth[k] * noise(&mut rng, odometry_sigma_m, odometry_sigma_rad);
            let previous = graph.pose(NodeId(k - 1)).unwrap();
            let node = graph.add_node(previous * a_from_b, false).unwrap();
            graph
                .add_edge(Edge {
                    a: NodeId(k - 1),
                    b: node,
                    a_from_b,
                    information: odometry_information,
                    kind: EdgeKind::Odometry,
                })
                .unwrap();
        }
        let loop_information = Edge::isotropic_information(LOOP_SIGMA_M, LOOP_SIGMA_RAD);
        // Revisits of the same place one lap later, and views across the circle (half a lap later): the
        // latter make the shape observable, the former alone would only tie the laps together.
        let revisits = (0..count - poses_per_lap).step_by(loop_stride).map(|k| (k, k + poses_per_lap));
        let across = (loop_stride / 2..count - poses_per_lap / 2)
            .step_by(loop_stride)
            .map(|k| (k, k + poses_per_lap / 2));
        for (a, b) in revisits.chain(across) {
            let a_from_b = truth[a].inverse() * truth[b] * noise(&mut rng, LOOP_SIGMA_M, LOOP_SIGMA_RAD);
            graph
                .add_edge(Edge {
                    a: NodeId(a),
                    b: NodeId(b),
                    a_from_b,
                    information: loop_information,
                    kind: EdgeKind::Loop,
                })
                .unwrap();
        }
        Problem { truth, graph }
    }

    /// RMS position error against the truth after the best rigid alignment (Kabsch/Umeyama without scale),
    /// as evo's `ape --align` reports it: the global rotation about the fixed first node is only as well
    /// determined as that node's own odometry edges, and is not what loop closing is judged on.
    fn ate_rmse_m(graph: &PoseGraph, truth: &[Pose3]) -> f64 {
        let estimated: Vec<Vector3<f64>> = graph.poses().map(|p| p.translation()).collect();
        let reference: Vec<Vector3<f64>> = truth.iter().map(|p| p.translation()).collect();
        let count = reference.len() as f64;
        let centroid_estimated = estimated.iter().sum::<Vector3<f64>>() / count;
        let centroid_reference = reference.iter().sum::<Vector3<f64>>() / count;
        let covariance: Matrix3<f64> = estimated
            .iter()
            .zip(&reference)
            .map(|(e, r)| (r - centroid_reference) * (e - centroid_estimated).transpose())
            .sum();
        let svd = covariance.svd(true, true);
        let (u, v_t) = (svd.u.unwrap(), svd.v_t.unwrap());
        let sign = (u * v_t).determinant().signum();
        let reference_from_estimated = u * Matrix3::from_diagonal(&Vector3::new(1.0, 1.0, sign)) * v_t;
        let sum: f64 = estimated
            .iter()
            .zip(&reference)
            .map(|(e, r)| {
                (reference_from_estimated * (e - centroid_estimated) + centroid_reference - r).norm_squared()
            })
            .sum();
        (sum / count).sqrt()
    }

    /// A loop edge claiming that two places across the circle (about 6 m apart) are the same place.
    fn add_wrong_loop(graph: &mut PoseGraph) -> EdgeId {
        let a_from_b =
            Pose3::from_parts(Vector3::new(0.1, 0.0, 0.05), UnitQuaternion::from_euler_angles(0.0, 0.0, 0.2));
        graph
            .add_edge(Edge {
                a: NodeId(20),
                b: NodeId(170),
                a_from_b,
                information: Edge::isotropic_information(LOOP_SIGMA_M, LOOP_SIGMA_RAD),
                kind: EdgeKind::Loop,
            })
            .unwrap()
    }

    #[test]
    fn loop_closures_remove_odometry_drift() {
        let Problem { truth, mut graph } = circle_problem(12, POSES_PER_LAP, LAPS, 10);
        let before = ate_rmse_m(&graph, &truth);
        let summary = graph.optimize(&PoseGraphOptions::default()).unwrap();
        let after = ate_rmse_m(&graph, &truth);
        eprintln!(
            "ATE {before:.3} m → {after:.4} m in {} iterations ({:?}), cost {:.1} → {:.1}",
            summary.iterations, summary.termination, summary.initial_cost, summary.final_cost
        );
        assert!(before > 0.3, "the test needs real drift, has {before} m");
        assert!(after < 0.05, "ATE after optimisation {after} m");
        assert!(before / after > 10.0);
        assert!(summary.final_cost < summary.initial_cost);
        assert!(summary.iterations < 30);
        assert!(matches!(summary.termination, Termination::CostConverged | Termination::StepConverged));
        assert_eq!(summary.edge_chi2.len(), graph.edge_count());
        // The noise is what the information says: the total χ² is near its degrees of freedom
        // (6 per edge minus 6 per free node), and no single edge is far out.
        let dof = 6.0 * (graph.edge_count() as f64 - (graph.node_count() - 1) as f64);
        assert!((summary.final_chi2 / dof - 1.0).abs() < 0.3, "χ² {} for {dof} dof", summary.final_chi2);
        assert!(summary.edge_chi2.iter().all(|&c| c < 40.0), "{:?}", summary.worst_edge());
    }

    #[test]
    fn robust_kernel_withstands_a_wrong_loop_edge() {
        let Problem { truth, mut graph } = circle_problem(12, POSES_PER_LAP, LAPS, 10);
        let mut reference = graph.clone();
        reference.optimize(&PoseGraphOptions::default()).unwrap();
        let clean = ate_rmse_m(&reference, &truth);
        let wrong = add_wrong_loop(&mut graph);
        let run = |kernel: RobustKernel| {
            let mut graph = graph.clone();
            let summary =
                graph.optimize(&PoseGraphOptions { robust_kernel: kernel, ..Default::default() }).unwrap();
            let ate = ate_rmse_m(&graph, &truth);
            eprintln!(
                "{kernel:?}: ATE {ate:.4} m (without the wrong edge {clean:.4} m), {} iterations ({:?}), worst edge {:?}",
                summary.iterations,
                summary.termination,
                summary.worst_edge()
            );
            (ate, summary)
        };
        let (plain, plain_summary) = run(RobustKernel::None);
        let (cauchy, cauchy_summary) = run(PoseGraphOptions::default().robust_kernel);
        let (huber, huber_summary) = run(RobustKernel::Huber { threshold: CHI2_6DOF_95.sqrt() });
        assert!(plain > 0.2, "a wrong loop without a kernel should bend the map, ATE {plain} m");
        // The default (Cauchy) kernel ignores the wrong edge: the map is as good as without it.
        assert!(cauchy < clean + 0.01, "Cauchy ATE {cauchy} m, clean {clean} m");
        assert!(plain > 5.0 * cauchy, "without a kernel ATE {plain} m, with Cauchy {cauchy} m");
        assert!(matches!(
            cauchy_summary.termination,
            Termination::CostConverged | Termination::StepConverged
        ));
        // Huber bounds the wrong edge's pull: better than none, and still singles the edge out.
        assert!(huber < plain, "Huber ATE {huber} m, none {plain} m");
        for summary in [&plain_summary, &cauchy_summary, &huber_summary] {
            assert_eq!(summary.worst_edge().map(|(id, _)| id), Some(wrong));
        }
        assert!(cauchy_summary.edge_chi2[wrong.0] > 1000.0 * CHI2_6DOF_95);
        // Every correct edge stays consistent under the default kernel.
        let second_worst = cauchy_summary
            .edge_chi2
            .iter()
            .enumerate()
            .filter(|&(id, _)| id != wrong.0)
            .fold(0.0f64, |m, (_, &c)| m.max(c));
        assert!(second_worst < 40.0, "{second_worst}");
    }

    #[test]
    fn exact_measurements_recover_the_truth_from_a_drifted_start() {
        let Problem { truth, graph } = circle_problem(12, POSES_PER_LAP, LAPS, 10);
        let mut exact = PoseGraph::new();
        for (k, pose) in graph.poses().enumerate() {
            exact.add_node(pose, k == 0).unwrap();
        }
        for edge in graph.edges() {
            exact.add_edge(Edge { a_from_b: truth[edge.a.0].inverse() * truth[edge.b.0], ..*edge }).unwrap();
        }
        let options = PoseGraphOptions { relative_cost_tolerance: 1e-12, ..Default::default() };
        let summary = exact.optimize(&options).unwrap();
        for (estimated, reference) in exact.poses().zip(&truth) {
            let (dt, dr) = pose_distance(&estimated, reference);
            assert!(dt < 1e-8 && dr < 1e-8, "{dt} m, {dr} rad after {summary:?}");
        }
        assert!(summary.final_chi2 < 1e-12);
    }

    #[test]
    fn fixed_nodes_stay_put() {
        let Problem { mut graph, .. } = circle_problem(5, 40, 2, 7);
        // Fix a middle node at a pose away from where odometry put it.
        let moved = graph.pose(NodeId(30)).unwrap() * se3_exp(&Vector6::new(0.3, -0.2, 0.1, 0.05, 0.0, -0.1));
        graph.set_pose(NodeId(30), moved).unwrap();
        graph.set_fixed(NodeId(30), true).unwrap();
        let first = graph.pose(NodeId(0)).unwrap();
        graph.optimize(&PoseGraphOptions::default()).unwrap();
        assert_eq!(graph.pose(NodeId(0)), Some(first));
        assert_eq!(graph.pose(NodeId(30)), Some(moved));
        assert_eq!(graph.is_fixed(NodeId(30)), Some(true));
    }

    #[test]
    fn all_fixed_is_nothing_to_optimize() {
        let mut graph = PoseGraph::new();
        let a = graph.add_node(Pose3::identity(), true).unwrap();
        let b = graph.add_node(Pose3::identity(), true).unwrap();
        let a_from_b = Pose3::from_parts(Vector3::x(), UnitQuaternion::identity());
        let edge = Edge { a, b, a_from_b, information: Matrix6::identity(), kind: EdgeKind::Odometry };
        graph.add_edge(edge).unwrap();
        let summary = graph.optimize(&PoseGraphOptions::default()).unwrap();
        assert_eq!(summary.termination, Termination::NothingToOptimize);
        assert!((summary.edge_chi2[0] - 1.0).abs() < 1e-12);
    }

    #[test]
    fn two_nodes_converge_to_the_measurement_exactly() {
        let mut graph = PoseGraph::new();
        let a = graph.add_node(Pose3::identity(), true).unwrap();
        let b = graph.add_node(Pose3::identity(), false).unwrap();
        let a_from_b = Pose3::from_parts(
            Vector3::new(1.0, -2.0, 0.5),
            UnitQuaternion::from_euler_angles(0.4, -1.0, 2.5),
        );
        let edge = Edge {
            a,
            b,
            a_from_b,
            information: Edge::isotropic_information(0.1, 0.01),
            kind: EdgeKind::Odometry,
        };
        graph.add_edge(edge).unwrap();
        let summary = graph
            .optimize(&PoseGraphOptions { robust_kernel: RobustKernel::None, ..Default::default() })
            .unwrap();
        let (dt, dr) = pose_distance(&graph.pose(b).unwrap(), &a_from_b);
        assert!(dt < 1e-9 && dr < 1e-9, "{dt} {dr} {summary:?}");
    }

    #[test]
    fn bad_input_is_rejected_with_a_clear_error() {
        let mut graph = PoseGraph::new();
        let a = graph.add_node(Pose3::identity(), true).unwrap();
        let b = graph.add_node(Pose3::identity(), false).unwrap();
        let good = Edge {
            a,
            b,
            a_from_b: Pose3::identity(),
            information: Matrix6::identity(),
            kind: EdgeKind::Loop,
        };
        let message = |edge: Edge, graph: &mut PoseGraph| match graph.add_edge(edge) {
            Err(SlamError::InvalidInput(message)) => message,
            other => panic!("expected InvalidInput, got {other:?}"),
        };
        assert!(message(Edge { b: NodeId(7), ..good }, &mut graph).contains("node 7 does not exist"));
        assert!(message(Edge { b: a, ..good }, &mut graph).contains("two different nodes"));
        let nan_pose = Pose3::from_parts(Vector3::new(f64::NAN, 0.0, 0.0), UnitQuaternion::identity());
        assert!(message(Edge { a_from_b: nan_pose, ..good }, &mut graph).contains("non-finite"));
        let mut information = Matrix6::identity();
        information[(2, 2)] = f64::INFINITY;
        assert!(message(Edge { information, ..good }, &mut graph).contains("non-finite"));
        let mut information = Matrix6::identity();
        information[(4, 4)] = -1.0;
        assert!(message(Edge { information, ..good }, &mut graph).contains("not positive definite"));
        assert!(
            message(Edge { information: Matrix6::zeros(), ..good }, &mut graph)
                .contains("not positive definite")
        );
        let mut information = Matrix6::identity();
        information[(0, 1)] = 0.5;
        assert!(message(Edge { information, ..good }, &mut graph).contains("not symmetric"));
        assert_eq!(graph.edge_count(), 0, "rejected edges must not be added");
        assert!(matches!(graph.add_node(nan_pose, false), Err(SlamError::InvalidInput(_))));
        assert!(matches!(graph.set_pose(NodeId(9), Pose3::identity()), Err(SlamError::InvalidInput(_))));

        // b has no edge yet: its pose is undetermined.
        let error = graph.optimize(&PoseGraphOptions::default()).unwrap_err().to_string();
        assert!(error.contains("node 1 is free and not connected"), "{error}");
        graph.add_edge(good).unwrap();
        graph.set_fixed(a, false).unwrap();
        let error = graph.optimize(&PoseGraphOptions::default()).unwrap_err().to_string();
        assert!(error.contains("no node is fixed"), "{error}");
        graph.set_fixed(a, true).unwrap();

        for options in [
            PoseGraphOptions { max_iterations: 0, ..Default::default() },
            PoseGraphOptions { robust_kernel: RobustKernel::Cauchy { threshold: 0.0 }, ..Default::default() },
            PoseGraphOptions {
                robust_kernel: RobustKernel::Huber { threshold: f64::NAN },
                ..Default::default()
            },
            PoseGraphOptions { relative_cost_tolerance: -1.0, ..Default::default() },
            PoseGraphOptions { initial_damping: 0.0, ..Default::default() },
        ] {
            assert!(matches!(graph.optimize(&options), Err(SlamError::InvalidInput(_))), "{options:?}");
        }
        assert!(graph.optimize(&PoseGraphOptions::default()).is_ok());
    }

    #[test]
    fn options_serde_defaults_and_unknown_fields() {
        let options: PoseGraphOptions = serde_json::from_str("{}").unwrap();
        assert_eq!(options, PoseGraphOptions::default());
        let options: PoseGraphOptions = serde_json::from_str(
            r#"{"robust_kernel": {"kind": "cauchy", "threshold": 2.0}, "max_iterations": 5}"#,
        )
        .unwrap();
        assert_eq!(options.robust_kernel, RobustKernel::Cauchy { threshold: 2.0 });
        assert_eq!(options.max_iterations, 5);
        let text = serde_json::to_string(&PoseGraphOptions::default()).unwrap();
        assert_eq!(serde_json::from_str::<PoseGraphOptions>(&text).unwrap(), PoseGraphOptions::default());
        assert!(serde_json::from_str::<PoseGraphOptions>(r#"{"max_iteration": 5}"#).is_err());
        assert!(
            serde_json::from_str::<PoseGraphOptions>(
                r#"{"robust_kernel": {"kind": "huber", "threshold": 1, "x": 2}}"#
            )
            .is_err()
        );
        let options: PoseGraphOptions =
            serde_json::from_str(r#"{"robust_kernel": {"kind": "none"}}"#).unwrap();
        assert_eq!(options.robust_kernel, RobustKernel::None);
    }

    /// Reports the time to optimise a 2,000-node graph with about 4,000 edges (run with `--ignored`);
    /// `benches/pose_graph.rs` measures the same graph with criterion in release.
    #[test]
    #[ignore = "timing report, not a check"]
    fn large_graph_timing() {
        // 2,000 nodes, 1,999 odometry and 1,625 loop edges: the graph of `benches/pose_graph.rs`.
        let Problem { truth, mut graph } = circle_problem(21, 500, 4, 2);
        let before = ate_rmse_m(&graph, &truth);
        let start = std::time::Instant::now();
        let summary = graph.optimize(&PoseGraphOptions::default()).unwrap();
        let elapsed = start.elapsed();
        eprintln!(
            "{} nodes, {} edges: {:.3} s, {} iterations ({:?}), ATE {before:.3} m → {:.4} m",
            graph.node_count(),
            graph.edge_count(),
            elapsed.as_secs_f64(),
            summary.iterations,
            summary.termination,
            ate_rmse_m(&graph, &truth)
        );
    }
}
