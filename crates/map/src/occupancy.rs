//! The occupancy grid: posed depth → floor and obstacle points → a 2D grid of free, occupied and unknown
//! cells, plus the *structure* mask (walls seen above door height) that room segmentation splits along.
//!
//! Heights are measured from the floor, which is estimated from the depth itself: the strongest mode of
//! the heights of points well below the camera (a walking camera looking slightly down sees mostly floor
//! there). The ceiling is the strongest mode of points well above the camera, when seen. Each frame counts
//! at most once per cell and kind (floor, obstacle, free ray, structure), so counts are frames.

use nalgebra::Point3;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use gst_core::{DepthImage, PinholeCamera, Pose3};

use crate::MapConfig;
use crate::grid::GridFrame;

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
    floor_votes: Vec<u64>,
    ceiling_votes: Vec<u64>,
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
            floor_votes: vec![0; bins],
            ceiling_votes: vec![0; bins],
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
        for row in 0..f.height {
            for col in 0..f.width {
                let old = f.index(col, row);
                let new = new_frame.index(col + shift_x as u32, row + shift_y as u32);
                counts[new] = self.counts[old];
                stamps[new] = self.stamps[old];
            }
        }
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
        let samples = sample_depth(camera, depth, map_from_camera, self.config.pixel_stride as usize);
        self.integrate_samples(&samples, map_from_camera);
    }

    /// Integrates one frame's depth samples ([`sample_depth`] at the configured pixel stride); those outside
    /// the configured depth range are skipped.
    pub(crate) fn integrate_samples(&mut self, samples: &[DepthSample], map_from_camera: &Pose3) {
        let (min_r, max_r) = (self.config.min_range_m, self.config.max_range_m);
        let points: Vec<[f64; 3]> =
            samples.iter().filter(|s| s.depth_m > min_r && s.depth_m < max_r).map(|s| s.point).collect();
        let cam = map_from_camera.translation();
        // Height votes first, so that the very first frame is classified with its own floor.
        for p in &points {
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
        let (mut min, mut max) = ([cam.x, cam.y], [cam.x, cam.y]);
        for p in &points {
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
        let mut floor_cells = Vec::new();
        let mut kinds = [0usize; 4];
        for p in &points {
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
                Kind::Obstacle => self.count(index, 1),
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
        // Free space: the floor is visible along the ray from the camera to every floor point.
        floor_cells.sort_unstable();
        floor_cells.dedup();
        let rays: Vec<Vec<usize>> = floor_cells
            .par_chunks(256)
            .map(|chunk| {
                let mut out = Vec::new();
                for &(col, row) in chunk {
                    trace_line(cam_cell, (col, row), |c, r| out.push(frame.index(c, r)));
                }
                out
            })
            .collect();
        for index in rays.into_iter().flatten() {
            self.count(index, 2);
        }
    }

    /// The grid as it stands.
    pub fn finish(&self) -> OccupancyGrid {
        let Some(floor) = self.floor_z_m() else {
            return OccupancyGrid::empty(self.config.resolution_m);
        };
        let ceiling = self.ceiling_z_m().unwrap_or(floor + self.config.default_ceiling_height_m);
        let c = &self.config;
        let cells = self
            .counts
            .iter()
            .map(|k| {
                let seen_free = u32::from(k.free) + u32::from(k.floor);
                if u32::from(k.obstacle) >= c.min_obstacle_frames
                    && f64::from(k.obstacle) >= c.obstacle_free_ratio * f64::from(seen_free)
                {
                    CellState::Occupied
                } else if k.floor > 0 || k.free >= 2 {
                    CellState::Free
                } else {
                    CellState::Unknown
                }
            })
            .collect();
        let structure = self.counts.iter().map(|k| u32::from(k.structure) >= c.min_obstacle_frames).collect();
        OccupancyGrid { frame: self.frame, cells, structure, floor_z_m: floor, ceiling_z_m: ceiling }
    }
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

/// Every `stride`-th pixel (in both directions) with a finite, positive depth, back-projected into the map
/// frame in parallel: the one pass over a frame's depth that occupancy and object candidates share.
pub(crate) fn sample_depth(
    camera: &PinholeCamera,
    depth: &DepthImage,
    map_from_camera: &Pose3,
    stride: usize,
) -> Vec<DepthSample> {
    let stride = stride.max(1);
    let (w, h) = (depth.width() as usize, depth.height() as usize);
    if w == 0 || h == 0 || depth.data().len() != w * h {
        return Vec::new();
    }
    let data = depth.data();
    (0..h.div_ceil(stride))
        .into_par_iter()
        .flat_map_iter(|ri| {
            let v = ri * stride;
            (0..w.div_ceil(stride)).filter_map(move |ci| {
                let u = ci * stride;
                let d = f64::from(data[v * w + u]);
                if !(d.is_finite() && d > 0.0) {
                    return None;
                }
                let p = camera.unproject(&nalgebra::Point2::new(u as f64, v as f64), d);
                let q = map_from_camera.transform_point(&p);
                Some(DepthSample { pixel: v * w + u, depth_m: d, point: [q.x, q.y, q.z] })
            })
        })
        .collect()
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
}
