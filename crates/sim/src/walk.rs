//! Where a camera can stand: a free-space grid of the house (inside rooms, clear of walls and furniture,
//! passing through door openings) with helpers for sampling views and random walks.

use nalgebra::Vector3;
use rand::Rng;

use gst_core::Pose3;

use crate::plan::{Axis, Rect};
use crate::scene::Scene;
use crate::topdown::scene_bounds;

/// Cell size of the free-space grid, metres.
pub const FREE_SPACE_CELL_M: f64 = 0.05;

/// A boolean grid over the house: true where a walker of the given clearance can stand.
#[derive(Clone, Debug)]
pub struct FreeSpace {
    origin: [f64; 2],
    nx: usize,
    ny: usize,
    free: Vec<bool>,
}

impl FreeSpace {
    /// Free space for a walker keeping `clearance_m` from walls and furniture footprints.
    pub fn new(scene: &Scene, clearance_m: f64) -> Self {
        let bounds = scene_bounds(scene);
        let origin = bounds.min;
        let nx = (bounds.width() / FREE_SPACE_CELL_M).ceil() as usize;
        let ny = (bounds.height() / FREE_SPACE_CELL_M).ceil() as usize;
        let footprints: Vec<Rect> = scene
            .instances
            .iter()
            .filter(|i| i.elevation_m < 1.0)
            .map(|i| i.footprint().inflate(clearance_m))
            .collect();
        let plan = &scene.plan;
        let mut free = vec![false; nx * ny];
        for j in 0..ny {
            for i in 0..nx {
                let p = [
                    origin[0] + (i as f64 + 0.5) * FREE_SPACE_CELL_M,
                    origin[1] + (j as f64 + 0.5) * FREE_SPACE_CELL_M,
                ];
                if !plan.rooms.iter().any(|r| r.contains(p)) {
                    continue;
                }
                let blocked_by_wall = plan.walls.iter().enumerate().any(|(w, wall)| {
                    let (across, along) = match wall.axis {
                        Axis::X => (p[1] - wall.offset_m, p[0]),
                        Axis::Y => (p[0] - wall.offset_m, p[1]),
                    };
                    let reach = wall.thickness_m / 2.0 + clearance_m;
                    if across.abs() >= reach || along < wall.start_m - reach || along > wall.end_m + reach {
                        return false;
                    }
                    // Door openings let the walker through if it fits.
                    !plan.doors.iter().any(|d| {
                        d.opening.wall == w
                            && along >= d.opening.start_m() + clearance_m
                            && along <= d.opening.end_m() - clearance_m
                    })
                });
                if !blocked_by_wall && !footprints.iter().any(|f| f.contains(p)) {
                    free[j * nx + i] = true;
                }
            }
        }
        Self { origin, nx, ny, free }
    }

    pub fn is_free(&self, p: [f64; 2]) -> bool {
        let i = ((p[0] - self.origin[0]) / FREE_SPACE_CELL_M).floor();
        let j = ((p[1] - self.origin[1]) / FREE_SPACE_CELL_M).floor();
        i >= 0.0
            && j >= 0.0
            && (i as usize) < self.nx
            && (j as usize) < self.ny
            && self.free[j as usize * self.nx + i as usize]
    }

    /// Whether the straight segment between two points stays in free space (checked every half cell).
    pub fn segment_is_free(&self, a: [f64; 2], b: [f64; 2]) -> bool {
        let length = ((b[0] - a[0]).powi(2) + (b[1] - a[1]).powi(2)).sqrt();
        let steps = (length / (FREE_SPACE_CELL_M / 2.0)).ceil().max(1.0) as usize;
        (0..=steps).all(|k| {
            let t = k as f64 / steps as f64;
            self.is_free([a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])])
        })
    }

    /// All free cell centres, in row-major order.
    pub fn free_points(&self) -> Vec<[f64; 2]> {
        (0..self.free.len())
            .filter(|&k| self.free[k])
            .map(|k| {
                [
                    self.origin[0] + ((k % self.nx) as f64 + 0.5) * FREE_SPACE_CELL_M,
                    self.origin[1] + ((k / self.nx) as f64 + 0.5) * FREE_SPACE_CELL_M,
                ]
            })
            .collect()
    }

    /// Fraction of cells that are free.
    pub fn free_fraction(&self) -> f64 {
        self.free.iter().filter(|f| **f).count() as f64 / self.free.len().max(1) as f64
    }

    /// Grid size in cells: `[columns along x, rows along y]`. Cell `[i, j]` covers
    /// `origin + [i, j] * FREE_SPACE_CELL_M` to one cell further.
    pub fn dims(&self) -> [usize; 2] {
        [self.nx, self.ny]
    }

    /// World xy of the grid's lower corner (the corner of cell `[0, 0]`), metres.
    pub fn origin(&self) -> [f64; 2] {
        self.origin
    }

    /// Whether cell `[i, j]` is free; false outside the grid.
    pub fn is_free_cell(&self, cell: [usize; 2]) -> bool {
        cell[0] < self.nx && cell[1] < self.ny && self.free[cell[1] * self.nx + cell[0]]
    }

    /// The cell holding a point (the same cell [`FreeSpace::is_free`] reads); `None` outside the grid.
    pub fn cell_of(&self, p: [f64; 2]) -> Option<[usize; 2]> {
        let i = ((p[0] - self.origin[0]) / FREE_SPACE_CELL_M).floor();
        let j = ((p[1] - self.origin[1]) / FREE_SPACE_CELL_M).floor();
        (i >= 0.0 && j >= 0.0 && (i as usize) < self.nx && (j as usize) < self.ny)
            .then_some([i as usize, j as usize])
    }

    /// World xy of a cell's centre, metres.
    pub fn cell_center(&self, cell: [usize; 2]) -> [f64; 2] {
        [
            self.origin[0] + (cell[0] as f64 + 0.5) * FREE_SPACE_CELL_M,
            self.origin[1] + (cell[1] as f64 + 0.5) * FREE_SPACE_CELL_M,
        ]
    }

    /// The centre of the free cell nearest to `p` (the first in row-major order on ties); `None` when no cell
    /// is free.
    pub fn nearest_free(&self, p: [f64; 2]) -> Option<[f64; 2]> {
        let mut best: Option<([f64; 2], f64)> = None;
        for k in (0..self.free.len()).filter(|&k| self.free[k]) {
            let c = self.cell_center([k % self.nx, k / self.nx]);
            let d = dist2(c, p);
            if best.is_none_or(|(_, b)| d < b) {
                best = Some((c, d));
            }
        }
        best.map(|(c, _)| c)
    }
}

/// A camera pose at `position` (x, y), height `height_m`, heading `yaw`, pitch `pitch` (radians).
pub fn camera_pose(position: [f64; 2], height_m: f64, yaw: f64, pitch: f64) -> Pose3 {
    Pose3::world_from_camera_yaw_pitch(Vector3::new(position[0], position[1], height_m), yaw, pitch)
}

/// One view per room (up to `count`), from a free point looking towards the room's far side.
pub fn sample_room_views(scene: &Scene, free: &FreeSpace, count: usize, rng: &mut impl Rng) -> Vec<Pose3> {
    let points = free.free_points();
    let mut views = Vec::new();
    for room in scene.plan.rooms.iter().take(count) {
        let inside: Vec<&[f64; 2]> = points.iter().filter(|p| room.contains(**p)).collect();
        if inside.is_empty() {
            continue;
        }
        let p = *inside[rng.gen_range(0..inside.len())];
        // Look at the farthest corner of the room's bounds: the most of the room in view.
        let b = room.bounds();
        let corners =
            [[b.min[0], b.min[1]], [b.max[0], b.min[1]], [b.max[0], b.max[1]], [b.min[0], b.max[1]]];
        let far = corners
            .iter()
            .max_by(|a, c| dist2(p, **a).total_cmp(&dist2(p, **c)))
            .copied()
            .unwrap_or(room.centroid());
        let yaw = (far[1] - p[1]).atan2(far[0] - p[0]);
        views.push(camera_pose(p, rng.gen_range(1.3..1.5), yaw, rng.gen_range(-0.15..0.0)));
    }
    views
}

fn dist2(a: [f64; 2], b: [f64; 2]) -> f64 {
    (a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)
}

/// A random walk through free space: `steps` poses `step_m` apart, heading drifting randomly, turning away
/// from obstacles, camera height 1.2–1.6 m with a slight random pitch. Empty if there is no free space.
pub fn random_walk(free: &FreeSpace, steps: usize, step_m: f64, rng: &mut impl Rng) -> Vec<Pose3> {
    let points = free.free_points();
    if points.is_empty() {
        return Vec::new();
    }
    let mut p = points[rng.gen_range(0..points.len())];
    let mut yaw: f64 = rng.gen_range(-std::f64::consts::PI..std::f64::consts::PI);
    let height = rng.gen_range(1.2..1.6);
    let mut poses = Vec::with_capacity(steps);
    for _ in 0..steps {
        yaw += rng.gen_range(-0.3..0.3);
        let mut moved = false;
        for attempt in 0..24 {
            let heading = yaw
                + if attempt == 0 { 0.0 } else { rng.gen_range(-std::f64::consts::PI..std::f64::consts::PI) };
            let next = [p[0] + step_m * heading.cos(), p[1] + step_m * heading.sin()];
            if free.segment_is_free(p, next) {
                p = next;
                yaw = heading;
                moved = true;
                break;
            }
        }
        if !moved {
            yaw += std::f64::consts::FRAC_PI_2; // stuck: turn on the spot
        }
        poses.push(camera_pose(p, height, yaw, rng.gen_range(-0.2..0.1)));
    }
    poses
}
