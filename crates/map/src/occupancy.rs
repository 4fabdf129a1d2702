//! The occupancy grid: posed depth → floor and obstacle points → a 2D grid of free, occupied and unknown
//! cells, plus the *structure* mask (walls seen above door height) that room segmentation splits along.
//!
//! Heights are measured from the floor, which is estimated from the depth itself: the strongest mode of
//! the heights of points well below the camera (a walking camera looking slightly down sees mostly floor
//! there). The ceiling is the strongest mode of points well above the camera, when seen. Each frame counts
//! at most once per cell and kind (floor, obstacle, free ray, structure), so counts are frames.
//!
//! Obstacle counts alone put a wall's face where its noisiest readings fall: axial depth noise grows with
//! z² (3 cm at 4 m for a Kinect-class sensor), so cells in front of every wall collected a few obstacle
//! readings and were lost to the room (7.5 % of the free floor of generated houses). Obstacle readings are
//! therefore also fused, as in TSDF fusion (Curless and Levoy 1996), into truncated signed distances along
//! their rays in voxels over the obstacle band; the mean over many readings puts the surface within a voxel,
//! and a cell is occupied only where a voxel lies behind it ([`MapConfig::surface_truncation_m`]).

use nalgebra::Point3;
use serde::{Deserialize, Serialize};

use gst_core::{DepthImage, PinholeCamera, Pose3};

use crate::MapConfig;
use crate::grid::{GridFrame, neighbours4};

/// Bins of the height histograms, metres.
const HISTOGRAM_BIN_M: f64 = 0.01;
/// Height range of the histograms around the map origin, metres.
const HISTOGRAM_HALF_RANGE_M: f64 = 20.0;
/// Points this far below the camera vote for the floor, metres.
const FLOOR_VOTE_BELOW_CAMERA_M: f64 = 0.5;
/// Points this far above the camera vote for the ceiling, metres.
const CEILING_VOTE_ABOVE_CAMERA_M: f64 = 0.6;
/// Fewest ceiling votes for the ceiling to count as seen.
const MIN_CEILING_VOTES: u64 = 2000;
/// The ceiling is the highest height bin with at least this fraction of the strongest bin's votes.
const CEILING_MODE_FRACTION: f64 = 0.3;
/// Extra room added around the grid when it grows, metres.
const GROW_MARGIN_M: f64 = 2.0;
/// Surface voxels are this many grid cells tall: the 2D decision needs the surface's position across the
/// floor, not its height, so coarser layers halve the memory.
const SURFACE_LAYER_CELLS: f64 = 2.0;
/// Every this-many-th obstacle reading of a frame is fused into the surface field: neighbouring readings
/// see nearly the same surface, and the mean over the frames averages the noise anyway; halves the cost.
const SURFACE_POINT_STRIDE: usize = 2;
/// Fewest readings for a surface voxel's mean distance to count.
const MIN_SURFACE_READINGS: f32 = 2.0;

/// What is known about a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellState {
    Unknown,
    Free,
    Occupied,
}

/// Per-cell frame counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct CellCounts {
    floor: u16,
    obstacle: u16,
    free: u16,
    structure: u16,
}

/// The finished grid.
#[derive(Clone, Debug, PartialEq)]
pub struct OccupancyGrid {
    pub frame: GridFrame,
    /// Row-major, `frame.width * frame.height`.
    pub cells: Vec<CellState>,
    /// Walls seen above door height (room boundaries), row-major.
    pub structure: Vec<bool>,
    /// Free cells that no frame saw but that hole filling inferred ([`MapConfig::hole_fill_max_area_m2`]),
    /// row-major; empty when there are none. Rooms are seeded from seen floor only.
    pub filled: Vec<bool>,
    /// Estimated floor height in the map frame, metres.
    pub floor_z_m: f64,
    /// Estimated ceiling height in the map frame, metres (floor + default when never seen).
    pub ceiling_z_m: f64,
}

impl OccupancyGrid {
    pub fn empty(resolution_m: f64) -> Self {
        Self {
            frame: GridFrame { origin_x_m: 0.0, origin_y_m: 0.0, resolution_m, width: 0, height: 0 },
            cells: Vec::new(),
            structure: Vec::new(),
            filled: Vec::new(),
            floor_z_m: 0.0,
            ceiling_z_m: 0.0,
        }
    }

    pub fn free_mask(&self) -> Vec<bool> {
        self.cells.iter().map(|c| *c == CellState::Free).collect()
    }

    pub fn free_area_m2(&self) -> f64 {
        self.cells.iter().filter(|c| **c == CellState::Free).count() as f64 * self.frame.cell_area_m2()
    }

    /// Whether cell `index` is free by hole filling rather than seen.
    pub fn is_filled(&self, index: usize) -> bool {
        self.filled.get(index).copied().unwrap_or(false)
    }

    /// The state at a map point (`Unknown` outside the grid).
    pub fn state_at(&self, x: f64, y: f64) -> CellState {
        match self.frame.cell_from_world(x, y) {
            Some((c, r)) => self.cells[self.frame.index(c, r)],
            None => CellState::Unknown,
        }
    }
}

/// Accumulates posed depth frames into counts.
#[derive(Clone, Debug)]
pub struct OccupancyAccumulator {
    config: MapConfig,
    frame: GridFrame,
    counts: Vec<CellCounts>,
    /// Per cell and kind, the last frame (1-based) that counted it.
    stamps: Vec<[u32; 4]>,
    frames: u32,
    /// The camera's floor position of every integrated frame (where the walker stood), map frame.
    camera_xy: Vec<[f64; 2]>,
    /// Per-frame buffers, kept for their allocations.
    floor_cells: Vec<(u32, u32)>,
    obstacle_points: Vec<[f64; 3]>,
    floor_votes: Vec<u64>,
    ceiling_votes: Vec<u64>,
    surface: SurfaceField,
}

/// The obstacle band as truncated signed distances: per cell, `layers` voxels from
/// `obstacle_min_height_m` above the floor up to `structure_min_height_m`, each the sum of the distances
/// along the rays of the obstacle readings near it (positive in front of the reading, negative behind) and
/// its reading count: only the mean's sign is read, which is the sum's. Empty when the surface test is off.
#[derive(Clone, Debug, Default)]
struct SurfaceField {
    layers: usize,
    layer_height_m: f64,
    /// `[sum of distances, readings]` per voxel, cell-major (`cell * layers + layer`).
    voxels: Vec<[f32; 2]>,
}

impl SurfaceField {
    fn new(config: &MapConfig) -> Self {
        if config.surface_truncation_m <= 0.0 {
            return Self::default();
        }
        let layer_height_m = SURFACE_LAYER_CELLS * config.resolution_m;
        let band = (config.structure_min_height_m - config.obstacle_min_height_m).max(layer_height_m);
        Self { layers: (band / layer_height_m).ceil() as usize, layer_height_m, voxels: Vec::new() }
    }

    /// Whether the cell's lowest voxel lies in front of a fused surface: rays passed through it, just
    /// above the floor, to readings beyond it.
    fn seen_empty_above_floor(&self, cell: usize) -> bool {
        self.voxels.get(cell * self.layers).is_some_and(|[d, n]| *n >= MIN_SURFACE_READINGS && *d > 0.0)
    }

    /// Whether any voxel of the cell lies behind a fused surface; `None` when none of its voxels has enough
    /// readings to tell (sparse data: the obstacle counts decide alone there).
    fn behind_surface(&self, cell: usize) -> Option<bool> {
        let column = self.voxels.get(cell * self.layers..(cell + 1) * self.layers)?;
        let mut known = column.iter().filter(|[_, n]| *n >= MIN_SURFACE_READINGS).peekable();
        known.peek()?;
        Some(known.any(|[d, _]| *d < 0.0))
    }
}

/// A depth sample in the map frame, classified.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Floor,
    Obstacle,
    Structure,
    Other,
}

impl OccupancyAccumulator {
    pub fn new(config: &MapConfig) -> Self {
        let bins = (2.0 * HISTOGRAM_HALF_RANGE_M / HISTOGRAM_BIN_M) as usize;
        Self {
            config: config.clone(),
            frame: GridFrame {
                origin_x_m: 0.0,
                origin_y_m: 0.0,
                resolution_m: config.resolution_m,
                width: 0,
                height: 0,
            },
            counts: Vec::new(),
            stamps: Vec::new(),
            frames: 0,
            camera_xy: Vec::new(),
            floor_cells: Vec::new(),
            obstacle_points: Vec::new(),
            floor_votes: vec![0; bins],
            ceiling_votes: vec![0; bins],
            surface: SurfaceField::new(config),
        }
    }

    /// Frames integrated so far.
    pub fn frames(&self) -> u32 {
        self.frames
    }

    fn bin_of(z: f64) -> Option<usize> {
        let b = ((z + HISTOGRAM_HALF_RANGE_M) / HISTOGRAM_BIN_M).floor();
        (0.0..2.0 * HISTOGRAM_HALF_RANGE_M / HISTOGRAM_BIN_M).contains(&b).then_some(b as usize)
    }

    fn z_of_bin(bin: usize) -> f64 {
        (bin as f64 + 0.5) * HISTOGRAM_BIN_M - HISTOGRAM_HALF_RANGE_M
    }

    /// The strongest mode of a histogram, refined by the weighted mean of its neighbourhood (±3 bins).
    fn mode(votes: &[u64]) -> Option<(f64, u64)> {
        let (best, &count) = votes.iter().enumerate().max_by_key(|(i, c)| (**c, std::cmp::Reverse(*i)))?;
        if count == 0 {
            return None;
        }
        let lo = best.saturating_sub(3);
        let hi = (best + 3).min(votes.len() - 1);
        let (mut sum, mut weight) = (0.0, 0.0);
        for (i, &v) in votes.iter().enumerate().take(hi + 1).skip(lo) {
            sum += Self::z_of_bin(i) * v as f64;
            weight += v as f64;
        }
        Some((sum / weight, votes[lo..=hi].iter().sum()))
    }

    /// The floor height estimated so far (map frame, metres).
    pub fn floor_z_m(&self) -> Option<f64> {
        Self::mode(&self.floor_votes).map(|(z, _)| z)
    }

    /// The ceiling height estimated so far, if seen: the highest strong mode of the heights above the
    /// camera (door and window tops, lintels and tall furniture form lower modes; the ceiling is the top).
    pub fn ceiling_z_m(&self) -> Option<f64> {
        let (_, strongest) = Self::mode(&self.ceiling_votes)?;
        if strongest < MIN_CEILING_VOTES {
            return None;
        }
        let peak = self.ceiling_votes.iter().copied().max().unwrap_or(0);
        let top =
            self.ceiling_votes.iter().rposition(|&v| v as f64 >= CEILING_MODE_FRACTION * peak as f64)?;
        let lo = top.saturating_sub(3);
        let window = &self.ceiling_votes[lo..=(top + 3).min(self.ceiling_votes.len() - 1)];
        Self::mode(window).map(|(z, _)| z + lo as f64 * HISTOGRAM_BIN_M)
    }

    /// Grows the grid so that it holds the box `[min, max]`.
    fn ensure_contains(&mut self, min: [f64; 2], max: [f64; 2]) {
        let f = self.frame;
        let res = f.resolution_m;
        let (cur_max_x, cur_max_y) =
            (f.origin_x_m + f64::from(f.width) * res, f.origin_y_m + f64::from(f.height) * res);
        if f.width > 0
            && min[0] >= f.origin_x_m
            && min[1] >= f.origin_y_m
            && max[0] < cur_max_x
            && max[1] < cur_max_y
        {
            return;
        }
        let (new_min_x, new_min_y, new_max_x, new_max_y) = if f.width == 0 {
            (min[0] - GROW_MARGIN_M, min[1] - GROW_MARGIN_M, max[0] + GROW_MARGIN_M, max[1] + GROW_MARGIN_M)
        } else {
            (
                if min[0] < f.origin_x_m { min[0] - GROW_MARGIN_M } else { f.origin_x_m },
                if min[1] < f.origin_y_m { min[1] - GROW_MARGIN_M } else { f.origin_y_m },
                if max[0] >= cur_max_x { max[0] + GROW_MARGIN_M } else { cur_max_x },
                if max[1] >= cur_max_y { max[1] + GROW_MARGIN_M } else { cur_max_y },
            )
        };
        // Keep old cells aligned: shift the origin by whole cells.
        let shift_x = if f.width == 0 { 0 } else { ((f.origin_x_m - new_min_x) / res).ceil() as i64 };
        let shift_y = if f.width == 0 { 0 } else { ((f.origin_y_m - new_min_y) / res).ceil() as i64 };
        let origin_x = if f.width == 0 { new_min_x } else { f.origin_x_m - shift_x as f64 * res };
        let origin_y = if f.width == 0 { new_min_y } else { f.origin_y_m - shift_y as f64 * res };
        let width = ((new_max_x - origin_x) / res).ceil().max(1.0) as u32;
        let height = ((new_max_y - origin_y) / res).ceil().max(1.0) as u32;
        let new_frame =
            GridFrame { origin_x_m: origin_x, origin_y_m: origin_y, resolution_m: res, width, height };
        let mut counts = vec![CellCounts::default(); new_frame.len()];
        let mut stamps = vec![[0u32; 4]; new_frame.len()];
        let layers = self.surface.layers;
        let mut voxels = vec![[0.0f32; 2]; new_frame.len() * layers];
        for row in 0..f.height {
            for col in 0..f.width {
                let old = f.index(col, row);
                let new = new_frame.index(col + shift_x as u32, row + shift_y as u32);
                counts[new] = self.counts[old];
                stamps[new] = self.stamps[old];
                if layers > 0 {
                    voxels[new * layers..(new + 1) * layers]
                        .copy_from_slice(&self.surface.voxels[old * layers..(old + 1) * layers]);
                }
            }
        }
        self.surface.voxels = voxels;
        tracing::debug!(width, height, "occupancy grid grown");
        self.frame = new_frame;
        self.counts = counts;
        self.stamps = stamps;
    }

    fn count(&mut self, index: usize, kind: usize) {
        let stamp = &mut self.stamps[index][kind];
        if *stamp == self.frames {
            return;
        }
        *stamp = self.frames;
        let c = &mut self.counts[index];
        let field = match kind {
            0 => &mut c.floor,
            1 => &mut c.obstacle,
            2 => &mut c.free,
            _ => &mut c.structure,
        };
        *field = field.saturating_add(1);
    }

    /// Integrates one frame: `map_from_camera` places the camera in the map frame (z up).
    pub fn integrate(&mut self, camera: &PinholeCamera, depth: &DepthImage, map_from_camera: &Pose3) {
        if depth.width() == 0 || depth.height() == 0 {
            return;
        }
        if (depth.width(), depth.height()) != (camera.width, camera.height) {
            tracing::warn!(
                "depth is {}x{} but the camera is {}x{}: frame skipped",
                depth.width(),
                depth.height(),
                camera.width,
                camera.height
            );
            return;
        }
        let rays = SampleRays::new(camera, self.config.pixel_stride as usize);
        self.integrate_samples(&rays.sample(depth, map_from_camera), map_from_camera);
    }

    /// Integrates one frame's depth samples ([`SampleRays::sample`] at the configured pixel stride); those
    /// outside the configured depth range are skipped.
    pub(crate) fn integrate_samples(&mut self, samples: &[DepthSample], map_from_camera: &Pose3) {
        let (min_r, max_r) = (self.config.min_range_m, self.config.max_range_m);
        let points =
            || samples.iter().filter(move |s| s.depth_m > min_r && s.depth_m < max_r).map(|s| &s.point);
        let cam = map_from_camera.translation();
        // Height votes first, so that the very first frame is classified with its own floor.
        for p in points() {
            if p[2] < cam.z - FLOOR_VOTE_BELOW_CAMERA_M {
                if let Some(b) = Self::bin_of(p[2]) {
                    self.floor_votes[b] += 1;
                }
            } else if p[2] > cam.z + CEILING_VOTE_ABOVE_CAMERA_M
                && let Some(b) = Self::bin_of(p[2])
            {
                self.ceiling_votes[b] += 1;
            }
        }
        let Some(floor) = self.floor_z_m() else {
            return;
        };
        let ceiling = self
            .ceiling_z_m()
            .filter(|c| {
                *c > floor + self.config.structure_min_height_m + self.config.structure_below_ceiling_m + 0.1
            })
            .unwrap_or(floor + self.config.default_ceiling_height_m);
        self.frames += 1;
        self.camera_xy.push([cam.x, cam.y]);
        let (mut min, mut max) = ([cam.x, cam.y], [cam.x, cam.y]);
        for p in points() {
            min = [min[0].min(p[0]), min[1].min(p[1])];
            max = [max[0].max(p[0]), max[1].max(p[1])];
        }
        self.ensure_contains(min, max);
        let c = self.config.clone();
        let obstacle_top = cam.z + c.obstacle_above_camera_m;
        let structure = (floor + c.structure_min_height_m, ceiling - c.structure_below_ceiling_m);
        let classify = |z: f64| {
            let dz = z - floor;
            if dz.abs() <= c.floor_tolerance_m {
                Kind::Floor
            } else if dz >= c.obstacle_min_height_m && z <= obstacle_top {
                Kind::Obstacle
            } else if z >= structure.0 && z <= structure.1 {
                Kind::Structure
            } else {
                Kind::Other
            }
        };
        let frame = self.frame;
        let Some(cam_cell) = frame.cell_from_world(cam.x, cam.y) else { return };
        // Buffers kept between frames for their allocations.
        let mut floor_cells = std::mem::take(&mut self.floor_cells);
        let mut obstacle_points = std::mem::take(&mut self.obstacle_points);
        floor_cells.clear();
        obstacle_points.clear();
        let mut kinds = [0usize; 4];
        for p in points() {
            let Some((col, row)) = frame.cell_from_world(p[0], p[1]) else { continue };
            let index = frame.index(col, row);
            let kind = classify(p[2]);
            kinds[match kind {
                Kind::Floor => 0,
                Kind::Obstacle => 1,
                Kind::Structure => 2,
                Kind::Other => 3,
            }] += 1;
            match kind {
                Kind::Floor => {
                    self.count(index, 0);
                    floor_cells.push((col, row));
                }
                Kind::Obstacle => {
                    self.count(index, 1);
                    if self.surface.layers > 0 {
                        obstacle_points.push(*p);
                    }
                }
                Kind::Structure => self.count(index, 3),
                Kind::Other => {}
            }
            // Obstacles up to camera height are structure too when above door height.
            if matches!(classify(p[2]), Kind::Obstacle) && p[2] >= structure.0 && p[2] <= structure.1 {
                self.count(index, 3);
            }
        }
        tracing::debug!(
            frame = self.frames,
            floor,
            ceiling,
            ?kinds,
            "classified depth samples (floor, obstacle, structure, other)"
        );
        self.fuse_surface(&obstacle_points, [cam.x, cam.y, cam.z], floor);
        // Free space: the floor is visible along the ray from the camera to every floor point. One thread:
        // a frame's rays take a fraction of a millisecond, less than handing them to a pool cost.
        floor_cells.sort_unstable();
        floor_cells.dedup();
        for &end in &floor_cells {
            trace_line(cam_cell, end, |c, r| self.count(frame.index(c, r), 2));
        }
        self.floor_cells = floor_cells;
        self.obstacle_points = obstacle_points;
    }

    /// Fuses obstacle readings into the surface field: along each reading's ray, the voxels within the
    /// truncation distance of it take the signed distance from their centre to it along the ray (positive
    /// on the camera's side).
    fn fuse_surface(&mut self, points: &[[f64; 3]], camera: [f64; 3], floor_z_m: f64) {
        let layers = self.surface.layers;
        if layers == 0 {
            return;
        }
        let truncation = self.config.surface_truncation_m;
        // One sample per cell along the ray: a diagonal ray may skip a corner voxel, which other rays fill.
        let step = self.frame.resolution_m.min(self.surface.layer_height_m);
        let band_bottom = floor_z_m + self.config.obstacle_min_height_m;
        let frame = self.frame;
        for p in points.iter().step_by(SURFACE_POINT_STRIDE) {
            let ray = [p[0] - camera[0], p[1] - camera[1], p[2] - camera[2]];
            let range = (ray[0] * ray[0] + ray[1] * ray[1] + ray[2] * ray[2]).sqrt();
            if range <= truncation {
                continue;
            }
            let unit = [ray[0] / range, ray[1] / range, ray[2] / range];
            let mut last = usize::MAX;
            let steps = (2.0 * truncation / step).floor() as usize;
            for s in 0..=steps {
                let t = range - truncation + s as f64 * step;
                let q = [camera[0] + unit[0] * t, camera[1] + unit[1] * t, camera[2] + unit[2] * t];
                let layer = (q[2] - band_bottom) / self.surface.layer_height_m;
                if !(0.0..layers as f64).contains(&layer) {
                    continue;
                }
                // Non-negative: truncating floors it.
                let layer = layer as usize;
                let Some((col, row)) = frame.cell_from_world(q[0], q[1]) else { continue };
                let voxel = frame.index(col, row) * layers + layer;
                if voxel == last {
                    continue;
                }
                last = voxel;
                // The voxel centre's distance along the ray (projective signed distance), not the sample's:
                // the first sample in a voxel is its nearest to the camera and would bias it positive.
                let [x, y] = frame.world_from_cell(col, row);
                let z = band_bottom + (layer as f64 + 0.5) * self.surface.layer_height_m;
                let along = (x - camera[0]) * unit[0] + (y - camera[1]) * unit[1] + (z - camera[2]) * unit[2];
                let distance = (range - along).clamp(-truncation, truncation) as f32;
                let [sum, readings] = &mut self.surface.voxels[voxel];
                *sum += distance;
                *readings += 1.0;
            }
        }
    }

    /// Per cell of the grid [`Self::finish`] returns: whether any frame saw an obstacle there (an unknown
    /// cell with such a glimpse may be furniture too little seen to be called occupied).
    pub fn glimpsed(&self) -> Vec<bool> {
        self.counts.iter().map(|k| k.obstacle > 0).collect()
    }

    /// The grid as it stands.
    pub fn finish(&self) -> OccupancyGrid {
        let Some(floor) = self.floor_z_m() else {
            return OccupancyGrid::empty(self.config.resolution_m);
        };
        let ceiling = self.ceiling_z_m().unwrap_or(floor + self.config.default_ceiling_height_m);
        let c = &self.config;
        let surface_test = self.surface.layers > 0;
        let mut cells: Vec<CellState> = self
            .counts
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let seen_free = u32::from(k.free) + u32::from(k.floor);
                if u32::from(k.obstacle) >= c.min_obstacle_frames
                    && f64::from(k.obstacle) >= c.obstacle_free_ratio * f64::from(seen_free)
                    && (!surface_test || self.surface.behind_surface(i) != Some(false))
                {
                    CellState::Occupied
                } else if k.floor > 0 || k.free >= 2 || self.surface.seen_empty_above_floor(i) {
                    CellState::Free
                } else {
                    CellState::Unknown
                }
            })
            .collect();
        let max_cells = (c.hole_fill_max_area_m2 / self.frame.cell_area_m2()).floor() as usize;
        let walked: Vec<usize> = self
            .camera_xy
            .iter()
            .filter_map(|p| self.frame.cell_from_world(p[0], p[1]))
            .map(|(col, row)| self.frame.index(col, row))
            .collect();
        let filled =
            fill_enclosed_holes(&mut cells, &self.frame, &walked, max_cells, c.hole_fill_min_free_border);
        let filled = if filled.iter().any(|f| *f) { filled } else { Vec::new() };
        let structure = self.counts.iter().map(|k| u32::from(k.structure) >= c.min_obstacle_frames).collect();
        OccupancyGrid { frame: self.frame, cells, structure, filled, floor_z_m: floor, ceiling_z_m: ceiling }
    }
}

/// Marks free every 4-connected region of unknown cells of at most `max_cells` that does not touch the
/// grid's edge and whose border (the known cells next to it, counted once per shared side) is free for at
/// least `min_free_border` of its length. Only free cells connected through free cells to a `walked` cell
/// (where the camera stood) count as free there: floor seen outside the house through a window is free
/// but cut off by the wall below the sill, and the unknown between such glimpses is not the house's.
/// Returns the mask of the cells filled.
pub(crate) fn fill_enclosed_holes(
    cells: &mut [CellState],
    frame: &GridFrame,
    walked: &[usize],
    max_cells: usize,
    min_free_border: f64,
) -> Vec<bool> {
    let (w, h) = (frame.width as usize, frame.height as usize);
    let mut filled = vec![false; cells.len()];
    if max_cells == 0 || w < 3 || h < 3 {
        return filled;
    }
    let mut reachable = vec![false; cells.len()];
    let mut stack: Vec<usize> =
        walked.iter().copied().filter(|&k| k < cells.len() && cells[k] == CellState::Free).collect();
    for &k in &stack {
        reachable[k] = true;
    }
    while let Some(k) = stack.pop() {
        for n in neighbours4(frame, k) {
            if !reachable[n] && cells[n] == CellState::Free {
                reachable[n] = true;
                stack.push(n);
            }
        }
    }
    let mut visited = vec![false; cells.len()];
    let mut region = Vec::new();
    for start in 0..cells.len() {
        if visited[start] || cells[start] != CellState::Unknown {
            continue;
        }
        visited[start] = true;
        stack.push(start);
        region.clear();
        let (mut enclosed, mut free_sides, mut other_sides) = (true, 0usize, 0usize);
        while let Some(k) = stack.pop() {
            region.push(k);
            let (col, row) = (k % w, k / w);
            enclosed &= col > 0 && row > 0 && col < w - 1 && row < h - 1;
            for n in neighbours4(frame, k) {
                match cells[n] {
                    CellState::Free if reachable[n] => free_sides += 1,
                    CellState::Free | CellState::Occupied => other_sides += 1,
                    CellState::Unknown if !visited[n] => {
                        visited[n] = true;
                        stack.push(n);
                    }
                    CellState::Unknown => {}
                }
            }
        }
        let border = free_sides + other_sides;
        if enclosed
            && region.len() <= max_cells
            && border > 0
            && free_sides as f64 >= min_free_border * border as f64
        {
            for &k in &region {
                cells[k] = CellState::Free;
                filled[k] = true;
            }
        }
    }
    filled
}

/// Visits the cells of the segment from `a` to `b` (Bresenham), `a` included, `b` excluded.
fn trace_line(a: (u32, u32), b: (u32, u32), mut visit: impl FnMut(u32, u32)) {
    let (mut x, mut y) = (i64::from(a.0), i64::from(a.1));
    let (x1, y1) = (i64::from(b.0), i64::from(b.1));
    let (dx, dy) = ((x1 - x).abs(), -(y1 - y).abs());
    let (sx, sy) = (if x < x1 { 1 } else { -1 }, if y < y1 { 1 } else { -1 });
    let mut err = dx + dy;
    while (x, y) != (x1, y1) {
        visit(x as u32, y as u32);
        let e2 = 2 * err;
        if e2 >= dy {
            err += dy;
            x += sx;
        }
        if e2 <= dx {
            err += dx;
            y += sy;
        }
    }
}

/// Back-projects a pixel of a depth image into the map frame (`None` without a valid depth).
/// A valid depth pixel of a frame, back-projected into the map frame.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DepthSample {
    /// Row-major pixel index (`v * width + u`), to look up the colour of the same pixel.
    pub pixel: usize,
    pub depth_m: f64,
    pub point: [f64; 3],
}

/// The rays of the pixels a frame is sampled at (every `stride`-th pixel in both directions), computed once
/// per camera: back-projecting a sample is then a scale and a rigid transform (no undistortion per pixel).
#[derive(Clone, Debug)]
pub(crate) struct SampleRays {
    width: u32,
    height: u32,
    /// Per sampled pixel: its row-major index and its ray's x and y at z = 1 in the camera frame.
    rays: Vec<(usize, [f64; 2])>,
}

impl SampleRays {
    pub(crate) fn new(camera: &PinholeCamera, stride: usize) -> Self {
        let stride = stride.max(1);
        let (w, h) = (camera.width as usize, camera.height as usize);
        let rays = (0..h)
            .step_by(stride)
            .flat_map(|v| (0..w).step_by(stride).map(move |u| (u, v)))
            .map(|(u, v)| {
                let ray = camera.ray(&nalgebra::Point2::new(u as f64, v as f64));
                (v * w + u, [ray.x, ray.y])
            })
            .collect();
        Self { width: camera.width, height: camera.height, rays }
    }

    /// Every sampled pixel with a finite, positive depth, back-projected into the map frame: the one pass
    /// over a frame's depth that occupancy and object candidates share. Empty when the depth is not the
    /// camera's size.
    pub(crate) fn sample(&self, depth: &DepthImage, map_from_camera: &Pose3) -> Vec<DepthSample> {
        let mut samples = Vec::new();
        self.sample_into(depth, map_from_camera, &mut samples);
        samples
    }

    /// [`Self::sample`] into `samples` (cleared first), reusing its allocation from frame to frame.
    pub(crate) fn sample_into(
        &self,
        depth: &DepthImage,
        map_from_camera: &Pose3,
        samples: &mut Vec<DepthSample>,
    ) {
        samples.clear();
        let data = depth.data();
        if (depth.width(), depth.height()) != (self.width, self.height) || data.len() != self.pixels() {
            return;
        }
        samples.reserve(self.rays.len());
        let r = map_from_camera.rotation_matrix();
        let t = map_from_camera.translation();
        samples.extend(self.rays.iter().filter_map(|&(pixel, [x, y])| {
            let d = f64::from(data[pixel]);
            if !(d.is_finite() && d > 0.0) {
                return None;
            }
            let (px, py) = (x * d, y * d);
            let point = [
                r[(0, 0)] * px + r[(0, 1)] * py + r[(0, 2)] * d + t.x,
                r[(1, 0)] * px + r[(1, 1)] * py + r[(1, 2)] * d + t.y,
                r[(2, 0)] * px + r[(2, 1)] * py + r[(2, 2)] * d + t.z,
            ];
            Some(DepthSample { pixel, depth_m: d, point })
        }));
    }

    fn pixels(&self) -> usize {
        self.width as usize * self.height as usize
    }
}

pub(crate) fn map_point(
    camera: &PinholeCamera,
    depth: &DepthImage,
    map_from_camera: &Pose3,
    u: u32,
    v: u32,
) -> Option<Point3<f64>> {
    let d = f64::from(*depth.get(u, v)?);
    if !(d.is_finite() && d > 0.0) {
        return None;
    }
    let p = camera.unproject(&nalgebra::Point2::new(f64::from(u), f64::from(v)), d);
    Some(map_from_camera.transform_point(&p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testworld::{Aabb, BoxWorld};
    use nalgebra::Vector3;

    /// One room whose wall faces sit off the cells' edges: x ∈ [0.02, 3.97], y ∈ [0.03, 2.96].
    fn room() -> BoxWorld {
        let (t, top) = (0.12, 2.6);
        BoxWorld {
            floor_z: 0.0,
            ceiling_z: top,
            boxes: vec![
                Aabb { min: [0.02 - t, -t, 0.0], max: [0.02, 3.0 + t, top] },
                Aabb { min: [3.97, -t, 0.0], max: [3.97 + t, 3.0 + t, top] },
                Aabb { min: [-t, 0.03 - t, 0.0], max: [4.0 + t, 0.03, top] },
                Aabb { min: [-t, 2.96, 0.0], max: [4.0 + t, 2.96 + t, top] },
            ],
        }
    }

    /// Axial noise of standard deviation `sigma_m` (a sum of uniform draws from a fixed linear congruential
    /// sequence: deterministic, near-Gaussian).
    fn add_noise(depth: &mut DepthImage, sigma_m: f32, state: &mut u64) {
        let mut uniform = || {
            *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (*state >> 40) as f32 / (1u64 << 24) as f32
        };
        for d in depth.data_mut() {
            let n: f32 = (0..4).map(|_| uniform()).sum::<f32>() - 2.0;
            // The sum of four uniforms has variance 1/3.
            *d += sigma_m * n * 3f32.sqrt();
        }
    }

    /// Of 1 cm samples within 0.15 m of a wall face (both sides), the fraction the grid gets wrong: free
    /// outside the room, or not free inside it.
    fn boundary_error(config: &MapConfig) -> f64 {
        let world = room();
        let camera = PinholeCamera::from_horizontal_fov(160, 128, 90.0).unwrap();
        let mut accumulator = OccupancyAccumulator::new(config);
        let mut state = 7u64;
        for (x, y) in [(1.0, 1.0), (3.0, 1.0), (1.0, 2.0), (3.0, 2.0), (2.0, 1.5)] {
            for k in 0..24 {
                let yaw = f64::from(k) * 15f64.to_radians();
                let pose =
                    Pose3::world_from_camera_yaw_pitch(Vector3::new(x, y, 1.4), yaw, -20f64.to_radians());
                let mut depth = world.render(&camera, &pose);
                add_noise(&mut depth, 0.03, &mut state);
                accumulator.integrate(&camera, &depth, &pose);
            }
        }
        let grid = accumulator.finish();
        let (mut wrong, mut total) = (0usize, 0usize);
        for i in -20..420 {
            for j in -20..320 {
                let (x, y) = (f64::from(i) * 0.01 + 0.005, f64::from(j) * 0.01 + 0.005);
                let to_face = [(x - 0.02).abs(), (x - 3.97).abs(), (y - 0.03).abs(), (y - 2.96).abs()];
                if to_face.iter().copied().fold(f64::INFINITY, f64::min) > 0.15 {
                    continue;
                }
                let inside = x > 0.02 && x < 3.97 && y > 0.03 && y < 2.96;
                let free = grid.state_at(x, y) == CellState::Free;
                total += 1;
                wrong += usize::from(free != inside);
            }
        }
        wrong as f64 / total as f64
    }

    /// Regression: single noisy readings put a wall's face a cell in front of where it is, so the band of
    /// floor along every wall was lost (7.5 % of the free floor of generated houses).
    #[test]
    fn the_surface_test_keeps_noisy_wall_faces_within_half_a_cell() {
        let with = boundary_error(&MapConfig::default());
        let without = boundary_error(&MapConfig { surface_truncation_m: 0.0, ..MapConfig::default() });
        // 0.15 m on each side of a face, one 5 cm cell split by it: a quarter cell wrong on average is
        // 1.25 cm of 30 cm, about 4 %.
        assert!(with < 0.08, "with the surface test {with:.3}");
        assert!(with < 0.6 * without, "with {with:.3}, without {without:.3}");
    }

    #[test]
    fn sampled_rays_back_project_as_the_camera_does() {
        let mut camera = PinholeCamera::gst_benchmark();
        camera.distortion = gst_core::Distortion { k1: -0.2, k2: 0.05, p1: 0.001, p2: -0.002, k3: 0.0 };
        let pose = Pose3::world_from_camera_yaw_pitch(Vector3::new(1.5, -2.0, 1.4), 0.7, -0.2);
        let (w, h) = (camera.width, camera.height);
        let depths: Vec<f32> = (0..w * h)
            .map(|i| {
                if i % 97 == 0 {
                    f32::NAN
                } else if i % 89 == 0 {
                    0.0
                } else {
                    0.5 + (i % 500) as f32 * 0.01
                }
            })
            .collect();
        let depth = DepthImage::from_vec(w, h, depths).expect("a depth image");
        let samples = SampleRays::new(&camera, 3).sample(&depth, &pose);
        let mut expected = 0;
        for v in (0..h).step_by(3) {
            for u in (0..w).step_by(3) {
                expected += usize::from(map_point(&camera, &depth, &pose, u, v).is_some());
            }
        }
        assert_eq!(samples.len(), expected);
        for s in samples.iter().step_by(37) {
            let (u, v) = ((s.pixel % w as usize) as u32, (s.pixel / w as usize) as u32);
            let q = map_point(&camera, &depth, &pose, u, v).expect("a valid pixel");
            assert!((q - Point3::from(s.point)).norm() < 1e-9, "pixel ({u}, {v})");
            assert_eq!(s.depth_m, f64::from(*depth.get(u, v).expect("in the image")));
        }
        let small = DepthImage::from_vec(4, 4, vec![1.0; 16]).expect("a depth image");
        assert!(SampleRays::new(&camera, 3).sample(&small, &pose).is_empty());
    }

    #[test]
    fn bresenham_visits_a_connected_line() {
        let mut cells = Vec::new();
        trace_line((0, 0), (5, 2), |c, r| cells.push((c, r)));
        assert_eq!(cells.first(), Some(&(0, 0)));
        assert_eq!(cells.len(), 5);
        assert!(!cells.contains(&(5, 2)));
        for pair in cells.windows(2) {
            assert!(pair[0].0.abs_diff(pair[1].0) <= 1 && pair[0].1.abs_diff(pair[1].1) <= 1);
        }
    }

    /// A 40x30 grid at 0.1 m: free everywhere inside a wall ring, with the given rectangles (columns and rows,
    /// end exclusive) set to `state`.
    fn ring_grid(patches: &[([usize; 4], CellState)]) -> (GridFrame, Vec<CellState>) {
        let frame = GridFrame { origin_x_m: 0.0, origin_y_m: 0.0, resolution_m: 0.1, width: 40, height: 30 };
        let mut cells = vec![CellState::Free; frame.len()];
        for row in 0..30 {
            for col in 0..40 {
                if row < 2 || col < 2 || row >= 28 || col >= 38 {
                    cells[frame.index(col, row)] = CellState::Occupied;
                }
            }
        }
        for ([c0, r0, c1, r1], state) in patches {
            for row in *r0..*r1 {
                for col in *c0..*c1 {
                    cells[frame.index(col as u32, row as u32)] = *state;
                }
            }
        }
        (frame, cells)
    }

    #[test]
    fn enclosed_unseen_floor_is_filled_and_other_unknown_is_not() {
        use CellState::{Free, Occupied, Unknown};
        let (frame, mut cells) = ring_grid(&[
            // A hole in the open floor (0.25 m²): filled.
            ([5, 5, 10, 10], Unknown),
            // A wardrobe: faces seen (occupied ring), inside never seen: stays unknown.
            ([20, 5, 26, 11], Occupied),
            ([21, 6, 25, 10], Unknown),
            // A hole against the wall ring (border half free): filled.
            ([2, 20, 8, 26], Unknown),
            // Unknown reaching the grid's edge (outside the house, not enclosed): stays unknown.
            ([30, 0, 34, 6], Unknown),
            // A hole larger than the limit (0.5 m²): stays unknown.
            ([14, 16, 24, 24], Unknown),
            // Floor seen beyond a wall (outside, through a window) with unknown between the glimpses: its
            // free border is not connected to where the camera walked, so it stays unknown.
            ([28, 14, 37, 26], Occupied),
            ([29, 15, 36, 25], Free),
            ([31, 17, 34, 23], Unknown),
        ]);
        let before = cells.clone();
        let walked = [frame.index(10, 15), frame.index(11, 15)];
        let filled = fill_enclosed_holes(&mut cells, &frame, &walked, 50, 0.4);
        let state = |c: u32, r: u32| cells[frame.index(c, r)];
        assert_eq!(state(7, 7), Free);
        assert_eq!(state(4, 23), Free);
        assert_eq!(state(22, 8), Unknown, "inside of the wardrobe");
        assert_eq!(state(31, 1), Unknown, "touches the edge");
        assert_eq!(state(19, 20), Unknown, "too large");
        assert_eq!(state(32, 20), Unknown, "beyond a wall");
        assert_eq!(filled.iter().filter(|f| **f).count(), 25 + 36);
        // Only unknown cells change, and exactly the filled ones.
        for i in 0..cells.len() {
            assert_eq!(filled[i], before[i] != cells[i], "cell {i}");
            assert!(!filled[i] || before[i] == Unknown);
        }
        // Off: nothing changes.
        let mut again = before.clone();
        assert!(!fill_enclosed_holes(&mut again, &frame, &walked, 0, 0.4).iter().any(|f| *f));
        // Where nobody walked, no floor counts as the house's: nothing is filled.
        assert!(!fill_enclosed_holes(&mut again, &frame, &[], 50, 0.4).iter().any(|f| *f));
        assert_eq!(again, before);
    }
}
