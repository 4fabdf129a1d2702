//! Exploration episodes: the camera walk of a GST-style exploration video, through every room of a house.
//!
//! An episode stops once in every room, at a waypoint far from walls and furniture (the maximum of a distance
//! transform), and pans around there. Rooms are toured in a short order (nearest neighbour
//! improved by 2-opt over geodesic distances between waypoints), and each leg between waypoints is the
//! shortest grid path (Dijkstra on an 8-connected grid, with a cost that keeps it off obstacles), pulled
//! tight and then rounded at the corners. A walker then follows the legs at `fps`: it accelerates and brakes,
//! turns its heading towards the path ahead at a bounded rate and stops to turn in place where the path
//! bends sharply. Durations are fitted into `duration_s` by changing the look-around (and, for long
//! episodes, the walking speed), never by leaving the speed and turn limits.
//!
//! Why every pose is free by construction: a straight segment is accepted only if, for samples at most a
//! quarter cell apart, every cell meeting the square of half that spacing around each sample is free. Every
//! point of the segment lies within half the spacing of a sample, so its cell (as [`FreeSpace::is_free`]
//! reads it) is among those checked. Grid paths never cut a corner (a diagonal step needs both orthogonal
//! neighbours free), so the segments between consecutive path cells pass the test; string pulling and corner
//! cutting only ever replace segments by accepted ones, and poses lie on the segments or stand still on
//! their ends.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::f64::consts::{PI, TAU};
use std::ops::Range;
use std::path::PathBuf;

use rand::Rng;
use serde::{Deserialize, Serialize};
use tracing::debug;

use gst_core::{TimedPose, Trajectory};

use crate::SimError;
use crate::scene::Scene;
use crate::walk::{FREE_SPACE_CELL_M, FreeSpace, camera_pose};

/// Settings of exploration episodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExploreConfig {
    /// Frames per second of the episode (default 10). Higher rates give smoother video and more frames to
    /// render; timestamps are `k / fps`.
    pub fps: f64,
    /// Walking speed range, m/s; each episode walks at one speed drawn from it (default 0.4–0.7, a slow
    /// indoor walk). Long episodes may walk faster, up to the top of the range, to fit `duration_s`.
    pub speed_mps: [f64; 2],
    /// Fastest turn of the camera heading, degrees per second (default 60). Turns while walking use 90 % of
    /// it, look-around pans at most 75 %.
    pub max_turn_deg_per_s: f64,
    /// Distance the camera keeps from walls and furniture footprints, metres (default 0.3). Above ~0.4 m
    /// doors of 0.8 m no longer let the walker through.
    pub clearance_m: f64,
    /// Camera height range, metres; one height per episode, with a few millimetres of walking bob (default
    /// 1.2–1.6, chest to eye height).
    pub camera_height_m: [f64; 2],
    /// Camera pitch range, degrees, positive up (default −15 to −5: a slight downward tilt that keeps floor
    /// and furniture in view). The pitch drifts slowly within the range.
    pub pitch_deg: [f64; 2],
    /// Whether the camera pans around at each room's waypoint (default true): a full turn or a sweep of
    /// ±60–100°. When false, pans are still added if the episode would otherwise be shorter than
    /// `duration_s`.
    pub look_around: bool,
    /// Episode duration range, seconds (default 60–240: GST-Bench's one- to four-minute videos). An episode
    /// that cannot fit (a house too large to cross at the fastest speed) is an error naming the scene.
    pub duration_s: [f64; 2],
}

impl Default for ExploreConfig {
    fn default() -> Self {
        Self {
            fps: 10.0,
            speed_mps: [0.4, 0.7],
            max_turn_deg_per_s: 60.0,
            clearance_m: 0.3,
            camera_height_m: [1.2, 1.6],
            pitch_deg: [-15.0, -5.0],
            look_around: true,
            duration_s: [60.0, 240.0],
        }
    }
}

impl ExploreConfig {
    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::Config(m));
        let range_ok = |r: [f64; 2], low: f64, high: f64| r[0] >= low && r[0] <= r[1] && r[1] <= high;
        if !(self.fps > 0.0 && self.fps <= 120.0) {
            return bad(format!("explore fps {} is not in (0, 120]", self.fps));
        }
        if !range_ok(self.speed_mps, 0.05, 3.0) {
            return bad(format!(
                "explore speed_mps {:?} is not an increasing range in [0.05, 3]",
                self.speed_mps
            ));
        }
        if !(self.max_turn_deg_per_s >= 5.0 && self.max_turn_deg_per_s <= 360.0) {
            return bad(format!("explore max_turn_deg_per_s {} is not in [5, 360]", self.max_turn_deg_per_s));
        }
        if !(self.clearance_m >= 0.0 && self.clearance_m <= 1.0) {
            return bad(format!("explore clearance_m {} is not in [0, 1]", self.clearance_m));
        }
        if !range_ok(self.camera_height_m, 0.2, 2.5) {
            return bad(format!(
                "explore camera_height_m {:?} is not an increasing range in [0.2, 2.5]",
                self.camera_height_m
            ));
        }
        if !range_ok(self.pitch_deg, -80.0, 80.0) {
            return bad(format!(
                "explore pitch_deg {:?} is not an increasing range in [-80, 80]",
                self.pitch_deg
            ));
        }
        if !range_ok(self.duration_s, 1.0, 3600.0) {
            return bad(format!(
                "explore duration_s {:?} is not an increasing range in [1, 3600]",
                self.duration_s
            ));
        }
        Ok(())
    }
}

/// Shortest path a sub-trajectory must cover, metres: trajectory-selection options need real motion.
pub const MIN_SUB_TRAJECTORY_PATH_M: f64 = 1.5;

/// Turns while walking use this fraction of `max_turn_deg_per_s`.
const WALK_TURN_FRACTION: f64 = 0.9;
/// Look-around pans use at most this fraction of `max_turn_deg_per_s`.
const PAN_RATE_MAX_FRACTION: f64 = 0.75;
/// Slowest pan, degrees per second (lower only when `max_turn_deg_per_s` is tiny).
const PAN_RATE_MIN_DEG_PER_S: f64 = 12.0;
/// Range of the pan rate drawn per episode, degrees per second.
const PAN_RATE_DEG_PER_S: [f64; 2] = [25.0, 40.0];
/// Half-angle range of a look-around sweep, degrees; the largest sweep before extra turning is added.
const SWEEP_HALF_ANGLE_DEG: [f64; 2] = [60.0, 100.0];
const SWEEP_HALF_ANGLE_MAX_DEG: f64 = 135.0;
/// Pans smaller than this are skipped, radians.
const PAN_MIN_RAD: f64 = 0.05;
/// Angular acceleration of the heading, rad/s² (about 120°/s²): turns start and stop smoothly.
const YAW_ACCEL_RAD_PER_S2: f64 = 2.1;
/// Walking acceleration and braking, m/s².
const WALK_ACCEL_MPS2: f64 = 0.8;
/// Slowest approach speed at the end of a leg, m/s (the braking curve never reaches zero before the end).
const CREEP_MPS: f64 = 0.05;
/// The heading aims at the path this far ahead, metres: turns start before a corner.
const LOOKAHEAD_M: f64 = 0.5;
/// Full speed while the heading is within this angle of the path ahead; standing still (turning in place)
/// beyond `HEADING_STOP_RAD`; linear in between.
const HEADING_FULL_RAD: f64 = 20.0 * PI / 180.0;
const HEADING_STOP_RAD: f64 = 50.0 * PI / 180.0;
/// A pan is done when the heading is this close to its target, radians, and turning slower than
/// `PAN_DONE_RATE`, rad/s.
const PAN_DONE_RAD: f64 = 0.005;
const PAN_DONE_RATE: f64 = 0.05;
/// Vertical walking bob amplitude, metres, and stride length, metres per bob cycle.
const BOB_M: f64 = 0.003;
const STRIDE_M: f64 = 0.65;
/// Periods of the two sines that make the pitch drift, seconds.
const PITCH_PERIOD_S: [[f64; 2]; 2] = [[25.0, 45.0], [8.0, 14.0]];
/// Waypoints are drawn among cells with at least this fraction of the room's largest obstacle distance.
const WAYPOINT_DISTANCE_FRACTION: f64 = 0.85;
/// Path cost rises within this many cells of an obstacle, keeping paths mid-corridor.
const CENTRE_PULL_CELLS: f32 = 6.0;
/// Corner cutting: passes, the fraction of the shorter neighbouring segment cut, the longest cut (m).
const SMOOTHING_PASSES: usize = 3;
const CORNER_CUT_FRACTION: f64 = 0.25;
const CORNER_CUT_MAX_M: f64 = 0.6;
/// Sample spacing of the segment test, metres (a quarter cell).
const SEGMENT_STEP_M: f64 = FREE_SPACE_CELL_M / 4.0;
/// Rounds of duration fitting before giving up.
const FIT_ATTEMPTS: usize = 12;

/// An exploration episode of a scene: a collision-free camera walk through every room, with look-around
/// pans, at `config.fps`, lasting within `config.duration_s`. Timestamps are `k / fps` from 0.
///
/// Errors: an invalid configuration; a room with no free space reachable from the rest of the house at the
/// configured clearance; an episode that cannot be fitted into `duration_s`. Scene errors name the scene.
pub fn explore(scene: &Scene, config: &ExploreConfig, rng: &mut impl Rng) -> Result<Trajectory, SimError> {
    config.validate()?;
    let scene_error = |message: String| SimError::Scene { path: PathBuf::from(&scene.name), message };
    let free = FreeSpace::new(scene, config.clearance_m);
    let grid = Grid::new(&free);
    let distance = grid.distance_transform();
    let component = grid.largest_component();

    // One waypoint per room, among the cells farthest from obstacles.
    let mut waypoints = Vec::with_capacity(scene.plan.rooms.len());
    for (r, room) in scene.plan.rooms.iter().enumerate() {
        let cells: Vec<usize> =
            (0..grid.free_cell.len()).filter(|&k| component[k] && room.contains(grid.center(k))).collect();
        let best = cells.iter().map(|&k| distance[k]).fold(0.0f32, f32::max);
        let candidates: Vec<usize> =
            cells.into_iter().filter(|&k| distance[k] >= best * WAYPOINT_DISTANCE_FRACTION as f32).collect();
        if candidates.is_empty() {
            return Err(scene_error(format!(
                "room {r} ({:?}) has no free space reachable from the rest of the house with {:.2} m clearance",
                room.room_type, config.clearance_m
            )));
        }
        waypoints.push(candidates[rng.gen_range(0..candidates.len())]);
    }

    // Geodesic distances between waypoints, and the tour.
    let trees: Vec<PathTree> = waypoints.iter().map(|&w| grid.shortest_paths(&distance, w)).collect();
    let costs: Vec<Vec<u64>> =
        trees.iter().map(|tree| waypoints.iter().map(|&w| u64::from(tree.cost[w])).collect()).collect();
    let start = rng.gen_range(0..waypoints.len());
    let order = tour(&costs, start);

    let mut paths = Vec::with_capacity(order.len().saturating_sub(1));
    for pair in order.windows(2) {
        let cells = trees[pair[0]].path_to(waypoints[pair[1]]).ok_or_else(|| {
            scene_error(format!("no path between the waypoints of rooms {} and {}", pair[0], pair[1]))
        })?;
        let points: Vec<[f64; 2]> = cells.into_iter().map(|k| grid.center(k)).collect();
        let pulled = grid.string_pull(&points);
        paths.push(Polyline::new(grid.smooth_corners(pulled)));
    }

    // Per-episode draws, in a fixed order.
    let dt = 1.0 / config.fps;
    let max_turn = config.max_turn_deg_per_s.to_radians();
    let pan_max = max_turn * PAN_RATE_MAX_FRACTION;
    let pan_min = PAN_RATE_MIN_DEG_PER_S.to_radians().min(pan_max);
    let mut walk_speed = rng.gen_range(config.speed_mps[0]..=config.speed_mps[1]);
    let mut pan_rate = rng
        .gen_range(PAN_RATE_DEG_PER_S[0].to_radians()..=PAN_RATE_DEG_PER_S[1].to_radians())
        .clamp(pan_min, pan_max);
    let mut looks: Vec<Look> =
        order.iter().map(|_| if config.look_around { Look::random(rng) } else { Look::None }).collect();
    let fallback_looks: Vec<Look> = order.iter().map(|_| Look::full(rng)).collect();
    let start_yaw = rng.gen_range(-PI..PI);
    let bob = BOB_M.min((config.camera_height_m[1] - config.camera_height_m[0]) / 2.0);
    let height_m = rng.gen_range(config.camera_height_m[0] + bob..=config.camera_height_m[1] - bob);
    let pitch = PitchDrift::random(config.pitch_deg, rng);

    let [min_s, max_s] = config.duration_s;
    let margin_s = ((max_s - min_s) * 0.05).min(5.0);
    // Only a bug makes the walker run this long; longer episodes than `max_s` still finish, to be fitted.
    let frame_cap = (4.0 * max_s.max(600.0) * config.fps).ceil() as usize;
    let mut scale = 1.0;
    for _ in 0..FIT_ATTEMPTS {
        let motion =
            Motion { dt, walk_speed, walk_turn_rate: max_turn * WALK_TURN_FRACTION, pan_rate, frame_cap };
        let legs = build_legs(&paths, &looks, scale);
        let start_xy = grid.center(waypoints[order[0]]);
        let Some(run) = simulate(start_xy, start_yaw, &legs, &motion) else {
            return Err(scene_error(format!(
                "the exploration walk did not finish within {frame_cap} frames ({:.0} s)",
                frame_cap as f64 * dt
            )));
        };
        let duration_s = (run.samples.len() - 1) as f64 * dt;
        debug!(scene = %scene.name, duration_s, walk_speed, pan_rate, scale, "exploration episode");
        if duration_s >= min_s && duration_s <= max_s {
            if let Some(bad) = run.samples.iter().find(|s| !free.is_free(s.xy)) {
                return Err(scene_error(format!("exploration pose at {:?} is not in free space", bad.xy)));
            }
            return trajectory(&run.samples, config.fps, height_m, bob, &pitch);
        }
        let look_s = run.look_frames as f64 * dt;
        let rest_s = duration_s - look_s;
        if duration_s < min_s {
            let needed_s = min_s + margin_s - rest_s;
            if look_s <= 0.0 {
                // No pans to stretch: turn around in every room, slowly.
                looks.clone_from(&fallback_looks);
                pan_rate = pan_min;
                let one_round_s = looks.len() as f64 * TAU / pan_rate;
                scale = (needed_s / one_round_s).max(0.1);
            } else {
                let ratio = needed_s / look_s;
                let rate = (pan_rate / ratio).max(pan_min);
                scale *= ratio * rate / pan_rate;
                pan_rate = rate;
            }
        } else {
            let needed_s = max_s - margin_s - rest_s;
            if needed_s > 0.0 && look_s > 0.0 {
                let ratio = needed_s / look_s;
                let rate = (pan_rate / ratio).min(pan_max);
                scale *= ratio * rate / pan_rate;
                pan_rate = rate;
            } else if walk_speed < config.speed_mps[1] {
                walk_speed = config.speed_mps[1];
                if needed_s <= 0.0 {
                    scale = 0.0;
                }
            } else if look_s > 0.0 {
                scale = 0.0;
            } else {
                return Err(scene_error(format!(
                    "walking through every room takes {duration_s:.0} s at {walk_speed:.2} m/s, longer than \
                     duration_s allows ({max_s} s)"
                )));
            }
        }
    }
    Err(scene_error(format!(
        "could not fit the exploration into duration_s {:?} in {FIT_ATTEMPTS} attempts",
        config.duration_s
    )))
}

/// Frame index windows of a trajectory for trajectory-selection questions: up to `count` distinct windows,
/// each lasting within `duration_s` (seconds) and covering at least [`MIN_SUB_TRAJECTORY_PATH_M`] of path.
///
/// Windows overlapping an earlier one by more than half are avoided while other windows can be found.
/// Fewer than `count` come back when the trajectory does not hold enough of them (an empty list when it is
/// shorter than `duration_s[0]`).
pub fn sub_trajectories(
    trajectory: &Trajectory,
    count: usize,
    duration_s: [f64; 2],
    rng: &mut impl Rng,
) -> Vec<Range<usize>> {
    const ATTEMPTS_PER_WINDOW: usize = 200;
    const MAX_OVERLAP_FRACTION: f64 = 0.5;
    let poses = trajectory.poses();
    let [min_s, max_s] = duration_s;
    if poses.len() < 2 || count == 0 || !(min_s >= 0.0 && min_s <= max_s) {
        return Vec::new();
    }
    let times: Vec<f64> = poses.iter().map(|p| p.timestamp_s).collect();
    let mut walked_m = Vec::with_capacity(poses.len());
    let mut total = 0.0;
    walked_m.push(0.0);
    for pair in poses.windows(2) {
        let d = pair[1].world_from_camera.translation() - pair[0].world_from_camera.translation();
        total += d.x.hypot(d.y);
        walked_m.push(total);
    }

    let mut windows: Vec<Range<usize>> = Vec::with_capacity(count);
    for strict in [true, false] {
        for _ in 0..count * ATTEMPTS_PER_WINDOW {
            if windows.len() == count {
                return windows;
            }
            let start = rng.gen_range(0..poses.len());
            let length_s = rng.gen_range(min_s..=max_s);
            // The last frame no later than start + length.
            let end = times.partition_point(|&t| t <= times[start] + length_s);
            if end <= start + 1 {
                continue;
            }
            let window = start..end;
            let span_s = times[end - 1] - times[start];
            if span_s < min_s
                || span_s > max_s
                || walked_m[end - 1] - walked_m[start] < MIN_SUB_TRAJECTORY_PATH_M
            {
                continue;
            }
            let overlaps = |other: &Range<usize>| {
                let shared = end.min(other.end).saturating_sub(start.max(other.start));
                let shorter = window.len().min(other.len());
                shared as f64 > MAX_OVERLAP_FRACTION * shorter as f64
            };
            if windows.contains(&window) || (strict && windows.iter().any(overlaps)) {
                continue;
            }
            windows.push(window);
        }
    }
    windows
}

/// The free-space grid as a flat cell array, on which paths are planned.
struct Grid<'a> {
    free: &'a FreeSpace,
    nx: usize,
    ny: usize,
    /// Free cells, row-major (a copy of the free-space grid for fast indexing).
    free_cell: Vec<bool>,
}

/// Shortest-path tree from one cell: integer costs and parents (`u32::MAX` = none).
struct PathTree {
    cost: Vec<u32>,
    parent: Vec<u32>,
}

impl PathTree {
    /// Cells from the root to `target`, both included; `None` when `target` is unreachable.
    fn path_to(&self, target: usize) -> Option<Vec<usize>> {
        if self.cost[target] == u32::MAX {
            return None;
        }
        let mut cells = vec![target];
        let mut k = target;
        while self.parent[k] != u32::MAX {
            k = self.parent[k] as usize;
            cells.push(k);
        }
        cells.reverse();
        Some(cells)
    }
}

/// Neighbour offsets with their step costs (10 straight, 14 diagonal: √2 in integers).
const NEIGHBOURS: [(isize, isize, u32); 8] =
    [(1, 0, 10), (-1, 0, 10), (0, 1, 10), (0, -1, 10), (1, 1, 14), (1, -1, 14), (-1, 1, 14), (-1, -1, 14)];

impl<'a> Grid<'a> {
    fn new(free: &'a FreeSpace) -> Self {
        let [nx, ny] = free.dims();
        let free_cell = (0..nx * ny).map(|k| free.is_free_cell([k % nx, k / nx])).collect();
        Self { free, nx, ny, free_cell }
    }

    fn center(&self, k: usize) -> [f64; 2] {
        self.free.cell_center([k % self.nx, k / self.nx])
    }

    fn neighbour(&self, k: usize, di: isize, dj: isize) -> Option<usize> {
        let i = (k % self.nx).checked_add_signed(di)?;
        let j = (k / self.nx).checked_add_signed(dj)?;
        (i < self.nx && j < self.ny).then_some(j * self.nx + i)
    }

    /// Whether every cell meeting the square of half-width `half_m` around `p` is free.
    fn is_box_free(&self, p: [f64; 2], half_m: f64) -> bool {
        let origin = self.free.origin();
        let index = |v: f64, o: f64| ((v - o) / FREE_SPACE_CELL_M).floor();
        let (i0, i1) = (index(p[0] - half_m, origin[0]), index(p[0] + half_m, origin[0]));
        let (j0, j1) = (index(p[1] - half_m, origin[1]), index(p[1] + half_m, origin[1]));
        if i0 < 0.0 || j0 < 0.0 || i1 >= self.nx as f64 || j1 >= self.ny as f64 {
            return false;
        }
        (j0 as usize..=j1 as usize)
            .all(|j| (i0 as usize..=i1 as usize).all(|i| self.free_cell[j * self.nx + i]))
    }

    /// Whether every point of a segment is free: samples at most `SEGMENT_STEP_M` apart, each with the cells
    /// within half a step around it (see the module documentation).
    fn segment_is_free(&self, a: [f64; 2], b: [f64; 2]) -> bool {
        let length = (b[0] - a[0]).hypot(b[1] - a[1]);
        let steps = (length / SEGMENT_STEP_M).ceil().max(1.0) as usize;
        (0..=steps).all(|s| {
            let t = s as f64 / steps as f64;
            self.is_box_free([a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])], SEGMENT_STEP_M / 2.0)
        })
    }

    /// Approximate Euclidean distance (in cells) from each free cell to the nearest blocked one: a two-pass
    /// chamfer transform with weights 1 and √2.
    fn distance_transform(&self) -> Vec<f32> {
        let (nx, ny) = (self.nx, self.ny);
        let mut d: Vec<f32> = self.free_cell.iter().map(|&s| if s { f32::MAX } else { 0.0 }).collect();
        let diagonal = std::f32::consts::SQRT_2;
        let forward = [(-1isize, 0isize, 1.0f32), (0, -1, 1.0), (-1, -1, diagonal), (1, -1, diagonal)];
        for j in 0..ny {
            for i in 0..nx {
                let k = j * nx + i;
                for (di, dj, w) in forward {
                    if let Some(n) = self.neighbour(k, di, dj) {
                        d[k] = d[k].min(d[n] + w);
                    }
                }
            }
        }
        for j in (0..ny).rev() {
            for i in (0..nx).rev() {
                let k = j * nx + i;
                for (di, dj, w) in forward {
                    if let Some(n) = self.neighbour(k, -di, -dj) {
                        d[k] = d[k].min(d[n] + w);
                    }
                }
            }
        }
        d
    }

    /// Whether a move from `k` by `(di, dj)` stays on free cells; diagonal moves also need both
    /// orthogonal neighbours, so that no move cuts a corner.
    fn step(&self, k: usize, di: isize, dj: isize) -> Option<usize> {
        let n = self.neighbour(k, di, dj)?;
        let ok = self.free_cell[n]
            && (di == 0
                || dj == 0
                || (self.neighbour(k, di, 0).is_some_and(|a| self.free_cell[a])
                    && self.neighbour(k, 0, dj).is_some_and(|b| self.free_cell[b])));
        ok.then_some(n)
    }

    /// Cells of the largest 8-connected component of free cells.
    fn largest_component(&self) -> Vec<bool> {
        let mut label = vec![u32::MAX; self.free_cell.len()];
        let mut sizes: Vec<usize> = Vec::new();
        for seed in 0..self.free_cell.len() {
            if !self.free_cell[seed] || label[seed] != u32::MAX {
                continue;
            }
            let id = sizes.len() as u32;
            let mut stack = vec![seed];
            label[seed] = id;
            let mut size = 0;
            while let Some(k) = stack.pop() {
                size += 1;
                for (di, dj, _) in NEIGHBOURS {
                    if let Some(n) = self.step(k, di, dj)
                        && label[n] == u32::MAX
                    {
                        label[n] = id;
                        stack.push(n);
                    }
                }
            }
            sizes.push(size);
        }
        // The first largest component on ties: deterministic.
        let mut best = None;
        for (id, &size) in sizes.iter().enumerate() {
            if best.is_none_or(|(_, s)| size > s) {
                best = Some((id as u32, size));
            }
        }
        label.iter().map(|&l| best.is_some_and(|(id, _)| l == id)).collect()
    }

    /// Dijkstra from `source` over free cells; steps into cells near obstacles cost more.
    fn shortest_paths(&self, distance: &[f32], source: usize) -> PathTree {
        let mut cost = vec![u32::MAX; self.free_cell.len()];
        let mut parent = vec![u32::MAX; self.free_cell.len()];
        let mut heap = BinaryHeap::new();
        cost[source] = 0;
        heap.push(Reverse((0u32, source)));
        while let Some(Reverse((c, k))) = heap.pop() {
            if c > cost[k] {
                continue;
            }
            for (di, dj, base) in NEIGHBOURS {
                let Some(n) = self.step(k, di, dj) else { continue };
                let near = (CENTRE_PULL_CELLS - distance[n]).max(0.0);
                let step = base + (base as f32 * near / 2.0).round() as u32;
                let next = c.saturating_add(step);
                if next < cost[n] {
                    cost[n] = next;
                    parent[n] = k as u32;
                    heap.push(Reverse((next, n)));
                }
            }
        }
        PathTree { cost, parent }
    }

    /// String pulling: from each kept point, jump to the farthest following point reachable in a straight
    /// free segment (scanning forward until the first failure).
    fn string_pull(&self, points: &[[f64; 2]]) -> Vec<[f64; 2]> {
        let Some(&first) = points.first() else { return Vec::new() };
        let mut out = vec![first];
        let mut i = 0;
        while i + 1 < points.len() {
            let mut j = i + 1;
            while j + 1 < points.len() && self.segment_is_free(points[i], points[j + 1]) {
                j += 1;
            }
            out.push(points[j]);
            i = j;
        }
        out
    }

    /// Rounds corners by cutting each one where the cut stays free (Chaikin-like, a few passes).
    fn smooth_corners(&self, mut poly: Vec<[f64; 2]>) -> Vec<[f64; 2]> {
        for _ in 0..SMOOTHING_PASSES {
            if poly.len() < 3 {
                break;
            }
            let mut out = Vec::with_capacity(poly.len() * 2);
            out.push(poly[0]);
            for k in 1..poly.len() - 1 {
                let (a, v, b) = (poly[k - 1], poly[k], poly[k + 1]);
                let (la, lb) = (dist(a, v), dist(v, b));
                let cut = (CORNER_CUT_FRACTION * la.min(lb)).min(CORNER_CUT_MAX_M);
                if cut < 1e-3 {
                    out.push(v);
                    continue;
                }
                let c1 = [v[0] + (a[0] - v[0]) * cut / la, v[1] + (a[1] - v[1]) * cut / la];
                let c2 = [v[0] + (b[0] - v[0]) * cut / lb, v[1] + (b[1] - v[1]) * cut / lb];
                if self.segment_is_free(c1, c2) {
                    out.push(c1);
                    out.push(c2);
                } else {
                    out.push(v);
                }
            }
            out.push(poly[poly.len() - 1]);
            poly = out;
        }
        poly
    }
}

fn dist(a: [f64; 2], b: [f64; 2]) -> f64 {
    (b[0] - a[0]).hypot(b[1] - a[1])
}

/// Angle wrapped to [-π, π).
fn wrap(angle: f64) -> f64 {
    (angle + PI).rem_euclid(TAU) - PI
}

/// Visiting order of the waypoints from `start`: nearest neighbour, then 2-opt on the open path.
fn tour(costs: &[Vec<u64>], start: usize) -> Vec<usize> {
    let n = costs.len();
    let mut order = vec![start];
    let mut visited = vec![false; n];
    visited[start] = true;
    while order.len() < n {
        let last = order[order.len() - 1];
        let mut next = None;
        for (k, seen) in visited.iter().enumerate() {
            if !seen && next.is_none_or(|m: usize| costs[last][k] < costs[last][m]) {
                next = Some(k);
            }
        }
        let Some(next) = next else { break };
        visited[next] = true;
        order.push(next);
    }
    // Reversing order[i..=j] (the start stays first) changes two edges, one when j is last.
    let edge = |order: &[usize], a: usize, b: usize| costs[order[a]][order[b]];
    let mut improved = true;
    while improved {
        improved = false;
        for i in 1..n {
            for j in i + 1..n {
                let before = edge(&order, i - 1, i) + if j + 1 < n { edge(&order, j, j + 1) } else { 0 };
                let after = edge(&order, i - 1, j) + if j + 1 < n { edge(&order, i, j + 1) } else { 0 };
                if after < before {
                    order[i..=j].reverse();
                    improved = true;
                }
            }
        }
    }
    order
}

/// A polyline with its cumulative arc length.
#[derive(Clone, Debug)]
struct Polyline {
    points: Vec<[f64; 2]>,
    along_m: Vec<f64>,
}

impl Polyline {
    fn new(points: Vec<[f64; 2]>) -> Self {
        let mut along_m = Vec::with_capacity(points.len());
        let mut total = 0.0;
        for (k, p) in points.iter().enumerate() {
            if k > 0 {
                total += dist(points[k - 1], *p);
            }
            along_m.push(total);
        }
        Self { points, along_m }
    }

    fn length_m(&self) -> f64 {
        self.along_m.last().copied().unwrap_or(0.0)
    }

    /// The point at arc length `s` (clamped to the ends).
    fn at(&self, s: f64) -> [f64; 2] {
        let k = self.along_m.partition_point(|&a| a <= s);
        if k == 0 {
            return self.points.first().copied().unwrap_or([0.0, 0.0]);
        }
        if k >= self.points.len() {
            return self.points[self.points.len() - 1];
        }
        let (a, b) = (self.points[k - 1], self.points[k]);
        let span = self.along_m[k] - self.along_m[k - 1];
        let t = if span > 0.0 { (s - self.along_m[k - 1]) / span } else { 0.0 };
        [a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])]
    }
}

/// The look-around at one stop.
#[derive(Clone, Copy, Debug)]
enum Look {
    None,
    /// One full turn (scaled), `direction` ±1.
    Full {
        direction: f64,
    },
    /// Sweep to one side, across to the other and back, `half_angle` radians (scaled).
    Sweep {
        direction: f64,
        half_angle: f64,
    },
}

impl Look {
    fn full(rng: &mut impl Rng) -> Self {
        Look::Full { direction: if rng.gen_bool(0.5) { 1.0 } else { -1.0 } }
    }

    fn random(rng: &mut impl Rng) -> Self {
        let direction = if rng.gen_bool(0.5) { 1.0 } else { -1.0 };
        let half_angle = rng.gen_range(SWEEP_HALF_ANGLE_DEG[0]..=SWEEP_HALF_ANGLE_DEG[1]).to_radians();
        if rng.gen_bool(0.5) { Look::Full { direction } } else { Look::Sweep { direction, half_angle } }
    }

    /// Relative heading changes of the pans, with the total turning scaled by `scale`.
    fn pans(self, scale: f64) -> Vec<f64> {
        let pans = match self {
            Look::None => Vec::new(),
            Look::Full { direction } => vec![direction * TAU * scale],
            Look::Sweep { direction, half_angle } => {
                let total = 4.0 * half_angle * scale;
                let half = (total / 4.0).min(SWEEP_HALF_ANGLE_MAX_DEG.to_radians());
                let mut pans = vec![direction * half, -2.0 * direction * half, direction * half];
                // Beyond the widest sweep, keep turning the rest of the way.
                pans.push(direction * (total - 4.0 * half));
                pans
            }
        };
        pans.into_iter().filter(|p| p.abs() >= PAN_MIN_RAD).collect()
    }
}

/// A stretch of the episode.
#[derive(Debug)]
enum Leg<'a> {
    Walk(&'a Polyline),
    Look(Vec<f64>),
}

/// Stops and walks alternate: a look at the first stop, then a walk and a look for every following stop.
fn build_legs<'a>(paths: &'a [Polyline], looks: &[Look], scale: f64) -> Vec<Leg<'a>> {
    let mut legs = Vec::with_capacity(2 * looks.len());
    for (k, look) in looks.iter().enumerate() {
        if k > 0
            && let Some(path) = paths.get(k - 1)
        {
            legs.push(Leg::Walk(path));
        }
        legs.push(Leg::Look(look.pans(scale)));
    }
    legs
}

#[derive(Clone, Copy, Debug)]
struct Motion {
    dt: f64,
    walk_speed: f64,
    walk_turn_rate: f64,
    pan_rate: f64,
    frame_cap: usize,
}

/// The walker's state at one frame.
#[derive(Clone, Copy, Debug)]
struct Sample {
    xy: [f64; 2],
    /// Heading, radians, unwrapped.
    yaw: f64,
    /// Path walked so far, metres (drives the bob).
    walked_m: f64,
}

#[derive(Debug)]
struct Run {
    samples: Vec<Sample>,
    look_frames: usize,
}

struct Walker {
    sample: Sample,
    yaw_rate: f64,
    speed: f64,
}

impl Walker {
    /// Turns the heading towards an error of `error` radians: the rate moves towards the fastest rate that
    /// can still brake in time (and not overshoot within a frame) by at most the angular acceleration.
    fn turn(&mut self, error: f64, max_rate: f64, dt: f64) {
        let desired = if error.abs() < 1e-4 {
            0.0
        } else {
            error.signum()
                * max_rate.min((2.0 * YAW_ACCEL_RAD_PER_S2 * error.abs()).sqrt()).min(error.abs() / dt)
        };
        let dv = YAW_ACCEL_RAD_PER_S2 * dt;
        self.yaw_rate = desired.clamp(self.yaw_rate - dv, self.yaw_rate + dv).clamp(-max_rate, max_rate);
        self.sample.yaw += self.yaw_rate * dt;
    }
}

/// Runs the walker through the legs; `None` if it exceeds the frame cap.
fn simulate(start_xy: [f64; 2], start_yaw: f64, legs: &[Leg<'_>], motion: &Motion) -> Option<Run> {
    let dt = motion.dt;
    let mut walker =
        Walker { sample: Sample { xy: start_xy, yaw: start_yaw, walked_m: 0.0 }, yaw_rate: 0.0, speed: 0.0 };
    let mut samples = vec![walker.sample];
    let mut look_frames = 0;
    for leg in legs {
        match leg {
            Leg::Walk(path) => {
                let total = path.length_m();
                let mut s = 0.0;
                while s < total {
                    let here = path.at(s);
                    let ahead = path.at((s + LOOKAHEAD_M).min(total));
                    let error = if dist(here, ahead) > 1e-6 {
                        wrap((ahead[1] - here[1]).atan2(ahead[0] - here[0]) - walker.sample.yaw)
                    } else {
                        0.0
                    };
                    walker.turn(error, motion.walk_turn_rate, dt);
                    let aligned = ((HEADING_STOP_RAD - error.abs()) / (HEADING_STOP_RAD - HEADING_FULL_RAD))
                        .clamp(0.0, 1.0);
                    let braking = (2.0 * WALK_ACCEL_MPS2 * (total - s)).sqrt().max(CREEP_MPS);
                    walker.speed = (motion.walk_speed * aligned)
                        .min(walker.speed + WALK_ACCEL_MPS2 * dt)
                        .min(braking)
                        .max(0.0);
                    let ds = (walker.speed * dt).min(total - s);
                    s += ds;
                    walker.sample.walked_m += ds;
                    walker.sample.xy = path.at(s);
                    samples.push(walker.sample);
                    if samples.len() > motion.frame_cap {
                        return None;
                    }
                }
                walker.speed = 0.0;
            }
            Leg::Look(pans) => {
                let mut target = walker.sample.yaw;
                for pan in pans {
                    target += pan;
                    loop {
                        let error = target - walker.sample.yaw;
                        if error.abs() < PAN_DONE_RAD && walker.yaw_rate.abs() < PAN_DONE_RATE {
                            break;
                        }
                        walker.turn(error, motion.pan_rate, dt);
                        samples.push(walker.sample);
                        look_frames += 1;
                        if samples.len() > motion.frame_cap {
                            return None;
                        }
                    }
                }
            }
        }
    }
    Some(Run { samples, look_frames })
}

/// Slow pitch drift: two sines of random phase, together within the range.
#[derive(Clone, Copy, Debug)]
struct PitchDrift {
    mid_rad: f64,
    half_rad: f64,
    periods_s: [f64; 2],
    phases: [f64; 2],
}

impl PitchDrift {
    fn random(pitch_deg: [f64; 2], rng: &mut impl Rng) -> Self {
        Self {
            mid_rad: ((pitch_deg[0] + pitch_deg[1]) / 2.0).to_radians(),
            half_rad: ((pitch_deg[1] - pitch_deg[0]) / 2.0).to_radians(),
            periods_s: PITCH_PERIOD_S.map(|[a, b]| rng.gen_range(a..=b)),
            phases: [rng.gen_range(0.0..TAU), rng.gen_range(0.0..TAU)],
        }
    }

    fn at(&self, t: f64) -> f64 {
        let wave = |k: usize| (TAU * t / self.periods_s[k] + self.phases[k]).sin();
        // Weights sum to 0.98 < 1: the pitch stays strictly inside the range.
        self.mid_rad + self.half_rad * (0.6 * wave(0) + 0.38 * wave(1))
    }
}

fn trajectory(
    samples: &[Sample],
    fps: f64,
    height_m: f64,
    bob_m: f64,
    pitch: &PitchDrift,
) -> Result<Trajectory, SimError> {
    let poses = samples
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let t = k as f64 / fps;
            let z = height_m + bob_m * (TAU * s.walked_m / STRIDE_M).sin();
            TimedPose { timestamp_s: t, world_from_camera: camera_pose(s.xy, z, s.yaw, pitch.at(t)) }
        })
        .collect();
    Trajectory::new(poses).map_err(|e| SimError::Config(format!("exploration timestamps: {e}")))
}

#[cfg(test)]
mod tests {
    use nalgebra::Vector3;

    use std::sync::OnceLock;
    use std::time::Instant;

    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::library::FurnitureLibrary;
    use crate::scene::{SceneConfig, generate_scene};

    /// (seed, room count) of the test scenes.
    const SCENES: [(u64, usize); 6] = [(1, 3), (2, 3), (3, 6), (4, 6), (5, 10), (6, 10)];

    fn scenes() -> &'static [Scene] {
        static CELL: OnceLock<Vec<Scene>> = OnceLock::new();
        CELL.get_or_init(|| {
            let library = FurnitureLibrary::primitives_only();
            SCENES
                .iter()
                .map(|&(seed, rooms)| {
                    let mut config = SceneConfig::default();
                    config.plan.min_rooms = rooms;
                    config.plan.max_rooms = rooms;
                    generate_scene(seed, &config, &library).expect("scene generates")
                })
                .collect()
        })
    }

    fn explore_seeded(scene: &Scene, config: &ExploreConfig, seed: u64) -> Result<Trajectory, SimError> {
        explore(scene, config, &mut ChaCha8Rng::seed_from_u64(seed))
    }

    /// Default-config episodes of the test scenes, with their planning times.
    fn episodes() -> &'static [(Trajectory, f64)] {
        static CELL: OnceLock<Vec<(Trajectory, f64)>> = OnceLock::new();
        CELL.get_or_init(|| {
            scenes()
                .iter()
                .map(|scene| {
                    let started = Instant::now();
                    let trajectory =
                        explore_seeded(scene, &ExploreConfig::default(), scene.seed).expect("explores");
                    (trajectory, started.elapsed().as_secs_f64())
                })
                .collect()
        })
    }

    fn xy(pose: &TimedPose) -> [f64; 2] {
        let t = pose.world_from_camera.translation();
        [t.x, t.y]
    }

    fn check_episode(scene: &Scene, trajectory: &Trajectory, config: &ExploreConfig) {
        let free = FreeSpace::new(scene, config.clearance_m);
        let poses = trajectory.poses();
        for (r, room) in scene.plan.rooms.iter().enumerate() {
            assert!(poses.iter().any(|p| room.contains(xy(p))), "{}: room {r} never visited", scene.name);
        }
        let tolerance = 1.05;
        for (k, pose) in poses.iter().enumerate() {
            assert!(free.is_free(xy(pose)), "{}: frame {k} at {:?} is not free", scene.name, xy(pose));
            assert!(
                (pose.timestamp_s - k as f64 / config.fps).abs() < 1e-12,
                "{}: timestamp {k}",
                scene.name
            );
            let z = pose.world_from_camera.translation().z;
            assert!(z >= config.camera_height_m[0] && z <= config.camera_height_m[1], "height {z}");
            let pitch = pose.world_from_camera.camera_pitch().to_degrees();
            assert!(
                pitch >= config.pitch_deg[0] - 1e-6 && pitch <= config.pitch_deg[1] + 1e-6,
                "pitch {pitch}"
            );
        }
        for pair in poses.windows(2) {
            let dt = pair[1].timestamp_s - pair[0].timestamp_s;
            let d = pair[1].world_from_camera.translation() - pair[0].world_from_camera.translation();
            let speed = d.norm() / dt;
            assert!(speed <= config.speed_mps[1] * tolerance, "{}: speed {speed} m/s", scene.name);
            let turn = wrap(pair[1].world_from_camera.camera_yaw() - pair[0].world_from_camera.camera_yaw());
            let rate = turn.abs().to_degrees() / dt;
            assert!(rate <= config.max_turn_deg_per_s * tolerance, "{}: turn rate {rate} deg/s", scene.name);
        }
        let duration = trajectory.duration_s();
        assert!(
            duration >= config.duration_s[0] && duration <= config.duration_s[1],
            "{}: duration {duration} s",
            scene.name
        );
    }

    #[test]
    fn explore_visits_every_room_within_limits() {
        let config = ExploreConfig::default();
        for (scene, (trajectory, planning_s)) in scenes().iter().zip(episodes()) {
            eprintln!(
                "{} ({} rooms): {:.1} s, {} frames, path {:.1} m, planned in {:.2} s",
                scene.name,
                scene.plan.rooms.len(),
                trajectory.duration_s(),
                trajectory.len(),
                trajectory.path_length_m(),
                planning_s
            );
            check_episode(scene, trajectory, &config);
        }
    }

    #[test]
    fn explore_poses_match_camera_pose_at_every_heading() {
        for k in -720..=720 {
            let yaw = f64::from(k).to_radians() / 2.0;
            for pitch_deg in [-15.0f64, -10.0, 0.0, 5.0] {
                let pitch = pitch_deg.to_radians();
                let pose = camera_pose([1.0, 2.0], 1.4, yaw, pitch);
                assert!(wrap(pose.camera_yaw() - yaw).abs() < 1e-9, "yaw {yaw}");
                assert!((pose.camera_pitch() - pitch).abs() < 1e-9, "pitch at yaw {yaw}");
                let forward = pose.transform_vector(&Vector3::z());
                assert!((forward.z - pitch.sin()).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn explore_free_space_cells_map_to_points_and_back() {
        let scene = &scenes()[0];
        let free = FreeSpace::new(scene, 0.3);
        let [nx, ny] = free.dims();
        let mut count = 0;
        for j in 0..ny {
            for i in 0..nx {
                let c = free.cell_center([i, j]);
                assert_eq!(free.cell_of(c), Some([i, j]));
                assert_eq!(free.is_free_cell([i, j]), free.is_free(c));
                count += usize::from(free.is_free_cell([i, j]));
            }
        }
        assert_eq!(count, free.free_points().len());
        assert!(!free.is_free_cell([nx, 0]));
        let origin = free.origin();
        assert_eq!(free.cell_of([origin[0] - 0.01, origin[1]]), None);
        let outside = [origin[0] - 1.0, origin[1] - 1.0];
        let nearest = free.nearest_free(outside).expect("some free space");
        assert!(free.is_free(nearest));
        let d = dist(outside, nearest);
        assert!(free.free_points().iter().all(|p| dist(outside, *p) >= d - 1e-12));
    }

    #[test]
    fn explore_is_deterministic() {
        let scene = &scenes()[2];
        let again = explore_seeded(scene, &ExploreConfig::default(), scene.seed).expect("explores");
        assert_eq!(again, episodes()[2].0);
        let other = explore_seeded(scene, &ExploreConfig::default(), scene.seed + 1000).expect("explores");
        assert_ne!(other, again);
    }

    #[test]
    fn explore_fits_short_and_long_duration_ranges() {
        let scene = &scenes()[0];
        // Longer than the house needs: the look-around stretches, and without look-around pans are added.
        for look_around in [true, false] {
            let config =
                ExploreConfig { duration_s: [200.0, 210.0], look_around, ..ExploreConfig::default() };
            let trajectory = explore_seeded(scene, &config, 7).expect("stretches");
            check_episode(scene, &trajectory, &config);
        }
        // Shorter than usual: pans shrink (this house takes about 91 s to walk through at 0.7 m/s).
        let big = &scenes()[4];
        let config = ExploreConfig { duration_s: [100.0, 120.0], fps: 5.0, ..ExploreConfig::default() };
        let trajectory = explore_seeded(big, &config, 7).expect("shrinks");
        check_episode(big, &trajectory, &config);
        // Impossible: an error naming the scene.
        let config = ExploreConfig { duration_s: [5.0, 6.0], ..ExploreConfig::default() };
        let error = explore_seeded(big, &config, 7).expect_err("cannot fit");
        assert!(error.to_string().contains(&big.name), "{error}");
    }

    #[test]
    fn explore_config_validates_and_rejects_unknown_fields() {
        assert!(ExploreConfig::default().validate().is_ok());
        let bad = [
            ExploreConfig { fps: 0.0, ..ExploreConfig::default() },
            ExploreConfig { speed_mps: [0.7, 0.4], ..ExploreConfig::default() },
            ExploreConfig { max_turn_deg_per_s: f64::NAN, ..ExploreConfig::default() },
            ExploreConfig { clearance_m: -0.1, ..ExploreConfig::default() },
            ExploreConfig { camera_height_m: [1.6, 1.2], ..ExploreConfig::default() },
            ExploreConfig { pitch_deg: [-100.0, 0.0], ..ExploreConfig::default() },
            ExploreConfig { duration_s: [60.0, f64::INFINITY], ..ExploreConfig::default() },
        ];
        for config in bad {
            assert!(config.validate().is_err(), "{config:?}");
        }
        let parsed: ExploreConfig = serde_json::from_str(r#"{"fps": 5}"#).expect("parses");
        assert_eq!(parsed, ExploreConfig { fps: 5.0, ..ExploreConfig::default() });
        assert!(serde_json::from_str::<ExploreConfig>(r#"{"speed": 1}"#).is_err());
    }

    #[test]
    fn explore_sub_trajectories_move_and_last_within_range() {
        let (trajectory, _) = &episodes()[2];
        let range = [5.0, 20.0];
        let windows = sub_trajectories(trajectory, 8, range, &mut ChaCha8Rng::seed_from_u64(3));
        assert_eq!(windows.len(), 8);
        let poses = trajectory.poses();
        for (k, w) in windows.iter().enumerate() {
            let duration = poses[w.end - 1].timestamp_s - poses[w.start].timestamp_s;
            assert!(duration >= range[0] && duration <= range[1], "duration {duration}");
            let part = Trajectory::new(poses[w.clone()].to_vec()).expect("sub-trajectory");
            assert!(part.path_length_m() >= MIN_SUB_TRAJECTORY_PATH_M, "path {}", part.path_length_m());
            assert!(!windows[..k].contains(w), "duplicate window");
        }
        let again = sub_trajectories(trajectory, 8, range, &mut ChaCha8Rng::seed_from_u64(3));
        assert_eq!(again, windows);
        let short = Trajectory::new(poses[..20].to_vec()).expect("prefix");
        assert!(sub_trajectories(&short, 4, range, &mut ChaCha8Rng::seed_from_u64(3)).is_empty());
    }
}
