//! Registration of the map to a given binary top-down image (white = free floor, as GST-Bench's 640x512
//! top-downs): the similarity `image_from_map` (rotation, uniform scale, translation; no mirror) found by an
//! exhaustive coarse search over rotation x scale x translation on the chamfer distance between the map's
//! free-space boundary and the image's, then refined by a local search; scored by the Dice overlap of the
//! free areas in [0, 1], which separates the true plan from other plans. The coarse search runs in two
//! levels: every rotation and scale on a sparse translation grid with few points and a wider chamfer cap
//! (a wide basin), then a dense translation grid around the best of those.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use gst_core::{Image, Pose3};

use crate::grid::distance_transform;
use crate::occupancy::CellState;
use crate::{MapError, SemanticMap};

/// Chamfer distances are truncated here, pixels (robust to unexplored parts and clutter).
const CHAMFER_CAP_PX: f32 = 10.0;
/// The first coarse level's cap: wider, so that a pose between its grid points still scores well.
const SPARSE_CHAMFER_CAP_PX: f32 = 16.0;
/// Boundary points of the first coarse level / the second coarse level / the refinement.
const SPARSE_POINTS: usize = 120;
const COARSE_POINTS: usize = 250;
const FINE_POINTS: usize = 1500;
/// Free-area points used for the score.
const SCORE_POINTS: usize = 4000;
/// Coarse rotation step, degrees.
const COARSE_ROTATION_DEG: f64 = 3.0;
/// Coarse scale factors around the area-based initial guess.
const COARSE_SCALES: [f64; 9] = [0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2];
/// Coarse translation search: ± this many pixels around the centroid alignment, in steps of... (first
/// level), then ± `DENSE_SHIFT_PX` in steps of `DENSE_SHIFT_STEP_PX` around the best `DENSE_CANDIDATES`.
const COARSE_SHIFT_PX: i32 = 48;
const COARSE_SHIFT_STEP_PX: i32 = 8;
const DENSE_SHIFT_PX: i32 = 6;
const DENSE_SHIFT_STEP_PX: i32 = 2;
const DENSE_CANDIDATES: usize = 48;
/// How far into a non-free neighbour the map's free boundary is placed, cells (0.5 = the cell edge).
const BOUNDARY_OFFSET_CELLS: f64 = 0.75;
/// Candidates refined.
const REFINED_CANDIDATES: usize = 6;

/// `image_from_map`: `u = s (cos θ x − sin θ y) + tx`, `v = −s (sin θ x + cos θ y) + ty` (the image's v
/// axis points down, so map +y at θ = 0 is up in the image: a rotation and scale, never a mirror).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Similarity2 {
    /// Pixels per metre.
    pub scale: f64,
    pub rotation_rad: f64,
    pub translation_px: [f64; 2],
}

impl Similarity2 {
    pub fn apply(&self, xy: [f64; 2]) -> [f64; 2] {
        let (c, s) = (self.rotation_rad.cos(), self.rotation_rad.sin());
        [
            self.scale * (c * xy[0] - s * xy[1]) + self.translation_px[0],
            -self.scale * (s * xy[0] + c * xy[1]) + self.translation_px[1],
        ]
    }

    pub fn inverse_apply(&self, uv: [f64; 2]) -> [f64; 2] {
        let (c, s) = (self.rotation_rad.cos(), self.rotation_rad.sin());
        let a = (uv[0] - self.translation_px[0]) / self.scale;
        let b = -(uv[1] - self.translation_px[1]) / self.scale;
        [c * a + s * b, -s * a + c * b]
    }
}

/// The result of [`register`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registration {
    pub image_from_map: Similarity2,
    /// Map frame from the poses' world (copied from the map), so that world points can be placed.
    pub map_from_world: Pose3,
    /// Dice overlap of the map's free area and the image's white area after alignment, in [0, 1].
    pub score: f64,
    /// Mean truncated chamfer distance of the boundaries, pixels.
    pub chamfer_px: f64,
    pub image_width: u32,
    pub image_height: u32,
}

impl Registration {
    /// Pixel (u right, v down) of a point in the poses' world.
    pub fn pixel_from_world(&self, world: [f64; 3]) -> [f64; 2] {
        let p = self.map_from_world.transform_point(&nalgebra::Point3::from(world));
        self.image_from_map.apply([p.x, p.y])
    }

    /// Pixel of a map-frame point.
    pub fn pixel_from_map(&self, xy: [f64; 2]) -> [f64; 2] {
        self.image_from_map.apply(xy)
    }

    /// Normalised `<point>x y</point>` coordinates in [0, 999] of a world point (GST's answer format).
    pub fn normalized_from_world(&self, world: [f64; 3]) -> [u32; 2] {
        let [u, v] = self.pixel_from_world(world);
        let n = |p: f64, size: u32| (p / f64::from(size) * 1000.0).floor().clamp(0.0, 999.0) as u32;
        [n(u, self.image_width), n(v, self.image_height)]
    }

    /// Heading on the image of a camera in the poses' world: degrees in (−180, 180], 0 = towards the top of
    /// the image, counter-clockwise positive (the Ori answer).
    pub fn heading_deg_from_world(&self, world_from_camera: &Pose3) -> f64 {
        let forward = (self.map_from_world * *world_from_camera).rotation_matrix().column(2).into_owned();
        self.heading_deg_from_map_yaw(forward.y.atan2(forward.x))
    }

    /// Heading on the image of a map-frame yaw (radians from map +x, counter-clockwise).
    pub fn heading_deg_from_map_yaw(&self, yaw_rad: f64) -> f64 {
        let deg = (yaw_rad + self.image_from_map.rotation_rad).to_degrees() - 90.0;
        let wrapped = (deg + 180.0).rem_euclid(360.0) - 180.0;
        if wrapped == -180.0 { 180.0 } else { wrapped }
    }
}

/// Evenly spaced subsample (deterministic).
fn subsample<T: Copy>(items: &[T], count: usize) -> Vec<T> {
    if items.len() <= count {
        return items.to_vec();
    }
    (0..count).map(|k| items[k * items.len() / count]).collect()
}

struct Target {
    width: usize,
    height: usize,
    white: Vec<bool>,
    boundary_dt: Vec<f32>,
    white_pixels: Vec<[f64; 2]>,
}

impl Target {
    fn chamfer(&self, t: &Similarity2, points: &[[f64; 2]]) -> f64 {
        self.chamfer_capped(t, points, CHAMFER_CAP_PX)
    }

    fn chamfer_capped(&self, t: &Similarity2, points: &[[f64; 2]], cap: f32) -> f64 {
        let mut sum = 0.0f64;
        for p in points {
            let [u, v] = t.apply(*p);
            let d = if u >= 0.0 && v >= 0.0 && (u as usize) < self.width && (v as usize) < self.height {
                self.boundary_dt[v as usize * self.width + u as usize].min(cap)
            } else {
                cap
            };
            sum += f64::from(d);
        }
        sum / points.len().max(1) as f64
    }
}

/// Registers the map to a binary top-down (pixels > 127 are free floor).
pub fn register(map: &SemanticMap, topdown: &Image<u8>) -> Result<Registration, MapError> {
    let (width, height) = (topdown.width() as usize, topdown.height() as usize);
    let white: Vec<bool> = topdown.data().iter().map(|p| *p > 127).collect();
    let white_count = white.iter().filter(|w| **w).count();
    if white_count < 16 {
        return Err(MapError::Invalid("the top-down image has no free (white) area".into()));
    }
    let g = &map.occupancy.frame;
    let cell = |i: usize| g.world_from_cell((i % g.width as usize) as u32, (i / g.width as usize) as u32);
    let free: Vec<usize> =
        (0..map.occupancy.cells.len()).filter(|&i| map.occupancy.cells[i] == CellState::Free).collect();
    if free.len() < 16 {
        return Err(MapError::Invalid("the map has no free area to register".into()));
    }
    let is_free = |i: usize| map.occupancy.cells[i] == CellState::Free;
    // Boundary points sit on the edge between a free cell and each of its non-free neighbours, pushed
    // BOUNDARY_OFFSET_CELLS into the neighbour: a wall-face cell holds floor as well as wall, so the free
    // floor ends inside it, where the top-down's white ends.
    let grid_width = g.width as usize;
    let map_boundary: Vec<[f64; 2]> = free
        .iter()
        .flat_map(|&i| {
            let c = cell(i);
            crate::grid::neighbours4(g, i)
                .filter(|&j| !is_free(j))
                .map(|j| {
                    let (dx, dy) = (
                        (j % grid_width) as f64 - (i % grid_width) as f64,
                        (j / grid_width) as f64 - (i / grid_width) as f64,
                    );
                    let offset = BOUNDARY_OFFSET_CELLS * g.resolution_m;
                    [c[0] + dx * offset, c[1] + dy * offset]
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let boundary: Vec<bool> = (0..width * height)
        .map(|i| {
            let (x, y) = (i % width, i / width);
            white[i]
                && (x == 0
                    || y == 0
                    || x + 1 == width
                    || y + 1 == height
                    || !white[i - 1]
                    || !white[i + 1]
                    || !white[i - width]
                    || !white[i + width])
        })
        .collect();
    let white_pixels: Vec<[f64; 2]> = (0..width * height)
        .filter(|&i| white[i])
        .map(|i| [(i % width) as f64 + 0.5, (i / width) as f64 + 0.5])
        .collect();
    let target = Target {
        width,
        height,
        boundary_dt: distance_transform(width, height, &boundary),
        white,
        white_pixels,
    };

    let free_points: Vec<[f64; 2]> = free.iter().map(|&i| cell(i)).collect();
    let map_area = free.len() as f64 * g.cell_area_m2();
    let scale0 = (white_count as f64 / map_area).sqrt();
    let map_centroid = centroid(&free_points);
    let image_centroid = centroid(&target.white_pixels);
    let sparse = subsample(&map_boundary, SPARSE_POINTS);
    let coarse = subsample(&map_boundary, COARSE_POINTS);

    let rotations: Vec<f64> = (0..(360.0 / COARSE_ROTATION_DEG) as usize)
        .map(|k| (k as f64 * COARSE_ROTATION_DEG).to_radians())
        .collect();
    // First level: the best sparse-grid translation of every rotation and scale.
    let mut sparse_best: Vec<(f64, Similarity2)> = rotations
        .par_iter()
        .flat_map_iter(|&theta| {
            let target = &target;
            let sparse = &sparse;
            COARSE_SCALES.iter().map(move |&f| {
                let s = scale0 * f;
                let base = Similarity2 { scale: s, rotation_rad: theta, translation_px: [0.0, 0.0] };
                let c = base.apply(map_centroid);
                let t0 = [image_centroid[0] - c[0], image_centroid[1] - c[1]];
                best_shift(base, t0, COARSE_SHIFT_PX, COARSE_SHIFT_STEP_PX, |t| {
                    target.chamfer_capped(t, sparse, SPARSE_CHAMFER_CAP_PX)
                })
            })
        })
        .collect();
    sparse_best.sort_by(|a, b| a.0.total_cmp(&b.0));
    sparse_best.truncate(DENSE_CANDIDATES);
    // Second level: a dense translation grid around each of the best.
    let mut candidates: Vec<(f64, Similarity2)> = sparse_best
        .par_iter()
        .map(|(_, start)| {
            best_shift(*start, start.translation_px, DENSE_SHIFT_PX, DENSE_SHIFT_STEP_PX, |t| {
                target.chamfer(t, &coarse)
            })
        })
        .collect();
    candidates.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Keep distinct candidates (different rotations) for refinement.
    let mut picked: Vec<Similarity2> = Vec::new();
    for (_, c) in &candidates {
        let distinct = picked.iter().all(|p| {
            let d = (p.rotation_rad - c.rotation_rad).abs() % std::f64::consts::TAU;
            d.min(std::f64::consts::TAU - d) > 10f64.to_radians()
        });
        if distinct {
            picked.push(*c);
        }
        if picked.len() == REFINED_CANDIDATES {
            break;
        }
    }
    let fine = subsample(&map_boundary, FINE_POINTS);
    let score_points = subsample(&free_points, SCORE_POINTS);
    let refined: Vec<(f64, f64, Similarity2)> = picked
        .par_iter()
        .map(|c| {
            let t = refine(&target, &fine, *c);
            let cost = target.chamfer(&t, &fine);
            (dice(&target, map, &score_points, &t), cost, t)
        })
        .collect();
    let Some((score, chamfer, best)) =
        refined.into_iter().max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)))
    else {
        return Err(MapError::Invalid("registration found no candidate".into()));
    };
    Ok(Registration {
        image_from_map: best,
        map_from_world: map.map_from_world,
        score,
        chamfer_px: chamfer,
        image_width: topdown.width(),
        image_height: topdown.height(),
    })
}

/// The translation on a square grid (± `range` pixels around `t0`, in `step`s) of least cost.
fn best_shift(
    base: Similarity2,
    t0: [f64; 2],
    range: i32,
    step: i32,
    cost: impl Fn(&Similarity2) -> f64,
) -> (f64, Similarity2) {
    let mut best = (f64::INFINITY, Similarity2 { translation_px: t0, ..base });
    for dy in (-range..=range).step_by(step as usize) {
        for dx in (-range..=range).step_by(step as usize) {
            let t = Similarity2 { translation_px: [t0[0] + f64::from(dx), t0[1] + f64::from(dy)], ..base };
            let c = cost(&t);
            if c < best.0 {
                best = (c, t);
            }
        }
    }
    best
}

fn centroid(points: &[[f64; 2]]) -> [f64; 2] {
    let n = points.len().max(1) as f64;
    points.iter().fold([0.0, 0.0], |a, p| [a[0] + p[0] / n, a[1] + p[1] / n])
}

/// Coordinate descent on (θ, s, tx, ty) with shrinking steps.
fn refine(target: &Target, points: &[[f64; 2]], start: Similarity2) -> Similarity2 {
    let mut best = start;
    let mut cost = target.chamfer(&best, points);
    let centre = centroid(points);
    let mut steps = [1.5f64.to_radians(), 0.02, 2.0, 2.0];
    for _ in 0..8 {
        let mut improved = true;
        while improved {
            improved = false;
            for (k, step) in steps.iter().enumerate() {
                for sign in [-1.0, 1.0] {
                    let mut t = best;
                    match k {
                        0 => t.rotation_rad += sign * step,
                        1 => t.scale *= 1.0 + sign * step,
                        2 => t.translation_px[0] += sign * step,
                        _ => t.translation_px[1] += sign * step,
                    }
                    // Rotation and scale move about the points' centre: keep it fixed in the image.
                    if k < 2 {
                        let (before, after) = (best.apply(centre), t.apply(centre));
                        t.translation_px[0] += before[0] - after[0];
                        t.translation_px[1] += before[1] - after[1];
                    }
                    let c = target.chamfer(&t, points);
                    if c < cost - 1e-9 {
                        (best, cost, improved) = (t, c, true);
                    }
                }
            }
        }
        for s in &mut steps {
            *s *= 0.5;
        }
    }
    best
}

/// Dice coefficient of the map's free area and the image's white area under `t`.
fn dice(target: &Target, map: &SemanticMap, free_points: &[[f64; 2]], t: &Similarity2) -> f64 {
    let on_white = free_points
        .iter()
        .filter(|p| {
            let [u, v] = t.apply(**p);
            u >= 0.0
                && v >= 0.0
                && (u as usize) < target.width
                && (v as usize) < target.height
                && target.white[v as usize * target.width + u as usize]
        })
        .count();
    let precision = on_white as f64 / free_points.len().max(1) as f64;
    let sample = subsample(&target.white_pixels, SCORE_POINTS);
    let covered = sample.iter().filter(|uv| {
        let [x, y] = t.inverse_apply(**uv);
        map.occupancy.state_at(x, y) == CellState::Free
    });
    let recall = covered.count() as f64 / sample.len().max(1) as f64;
    if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::{MapStats, SemanticMap};
    use crate::testworld::{GridPlan, grid_from_plan};

    fn map_of(plan: &GridPlan) -> SemanticMap {
        let occupancy = grid_from_plan(plan, 0.05);
        let n = occupancy.cells.len();
        SemanticMap {
            map_from_world: Pose3::identity(),
            occupancy,
            room_labels: vec![0; n],
            rooms: Vec::new(),
            doors: Vec::new(),
            objects: Vec::new(),
            candidates: Vec::new(),
            trajectory: Vec::new(),
            stats: MapStats::default(),
        }
    }

    fn plan_a() -> GridPlan {
        GridPlan {
            rooms: vec![
                vec![[0.0, 0.0, 6.0, 3.0], [0.0, 3.0, 3.0, 7.0]],
                vec![[3.0, 3.0, 6.0, 5.0]],
                vec![[6.0, 0.0, 9.0, 2.5]],
            ],
            doors: vec![([4.5, 3.0], 0.9), ([6.0, 1.5], 0.9)],
        }
    }

    /// The binary top-down of a map under a known similarity. As in real maps, the true free floor reaches
    /// a quarter cell into the cells next to the free ones (a wall-face cell is partly floor).
    fn draw(map: &SemanticMap, t: &Similarity2) -> Image<u8> {
        let mut img = Image::filled(640, 512, 0u8);
        let d = (BOUNDARY_OFFSET_CELLS - 0.5) * map.occupancy.frame.resolution_m;
        for v in 0..512u32 {
            for u in 0..640u32 {
                let [x, y] = t.inverse_apply([f64::from(u) + 0.5, f64::from(v) + 0.5]);
                let free = |x: f64, y: f64| map.occupancy.state_at(x, y) == CellState::Free;
                if free(x, y) || free(x + d, y) || free(x - d, y) || free(x, y + d) || free(x, y - d) {
                    *img.get_mut(u, v).unwrap() = 255;
                }
            }
        }
        img
    }

    #[test]
    fn similarity_inverts() {
        let t = Similarity2 { scale: 23.0, rotation_rad: 2.1, translation_px: [100.0, -40.0] };
        let p = [1.5, -2.25];
        let q = t.inverse_apply(t.apply(p));
        assert!((q[0] - p[0]).abs() < 1e-9 && (q[1] - p[1]).abs() < 1e-9);
        // Map +y is up in the image at rotation 0; headings follow the Ori convention.
        let r = Registration {
            image_from_map: Similarity2 { scale: 10.0, rotation_rad: 0.0, translation_px: [0.0, 0.0] },
            map_from_world: Pose3::identity(),
            score: 1.0,
            chamfer_px: 0.0,
            image_width: 640,
            image_height: 512,
        };
        assert!(r.pixel_from_map([0.0, 1.0])[1] < r.pixel_from_map([0.0, 0.0])[1]);
        assert!((r.heading_deg_from_map_yaw(std::f64::consts::FRAC_PI_2)).abs() < 1e-9);
        assert!((r.heading_deg_from_map_yaw(std::f64::consts::PI) - 90.0).abs() < 1e-9);
    }

    #[test]
    fn registration_recovers_a_known_similarity_and_prefers_the_true_plan() {
        let map = map_of(&plan_a());
        let truth =
            Similarity2 { scale: 48.0, rotation_rad: 37f64.to_radians(), translation_px: [250.0, 330.0] };
        let image = draw(&map, &truth);
        let r = register(&map, &image).unwrap();
        let g = &map.occupancy.frame;
        let mut worst = 0.0f64;
        for (i, c) in map.occupancy.cells.iter().enumerate() {
            if *c == CellState::Free {
                let p = g.world_from_cell((i % g.width as usize) as u32, (i / g.width as usize) as u32);
                let (a, b) = (r.pixel_from_map(p), truth.apply(p));
                worst = worst.max(((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt());
            }
        }
        assert!(worst < 2.0, "worst pixel error {worst}, {r:?}");
        assert!(r.score > 0.95, "{r:?}");
        // Another plan of similar size scores lower against the same image.
        let other = map_of(&GridPlan {
            rooms: vec![vec![[0.0, 0.0, 4.5, 4.0]], vec![[4.5, 0.0, 9.0, 4.0]], vec![[0.0, 4.0, 9.0, 6.0]]],
            doors: vec![([4.5, 2.0], 0.9), ([2.0, 4.0], 0.9)],
        });
        let other_score = register(&other, &image).unwrap().score;
        assert!(other_score < r.score - 0.1, "true {} vs other {other_score}", r.score);
    }

    #[test]
    fn empty_inputs_are_errors() {
        let map = map_of(&plan_a());
        assert!(register(&map, &Image::filled(64, 64, 0u8)).is_err());
    }
}
