//! Place recognition by render and compare: where in the map could this image have been taken?
//!
//! Current views of GST questions are novel viewpoints (off the exploration path, any heading). Feature
//! matching alone finds few of them: procedural wallpapers and tiles repeat, and a view from a new angle
//! shares few reliable ORB matches with any keyframe. What a view does show unambiguously is the layout of
//! the place — where the floor ends, where the doors, windows and furniture stand, how bright each part is.
//! This module renders that layout from the map and compares it with the image:
//!
//! 1. The keyframes' colour frames with depth (or their grey thumbnails, [`crate::thumbnail`]) are fused into
//!    a voxel cloud in a level frame (gravity from the keyframe poses, [`gst_core::gravity_alignment`]).
//! 2. Candidate camera positions lie on a grid around the exploration path, at the keyframes' camera height,
//!    away from any surface. At each, the cloud is rendered once into a cylindrical panorama (z-buffered,
//!    [`PanoramaConfig::step_deg`] per pixel).
//! 3. The image is resampled into the same cylindrical geometry for a few pitches; every heading of every
//!    panorama is scored by normalised cross-correlation over the pixels both show.
//!
//! The best distinct poses go to [`crate::Relocalizer`], which refines them photometrically and by ORB
//! matching and verifies them; the render-and-compare score alone is only a hypothesis.

use std::collections::HashMap;

use nalgebra::{Point3, Vector3};
use rayon::prelude::*;

use gst_core::{DepthImage, PinholeCamera, Pose3, RgbImage};

use crate::map_file::SlamMap;
use crate::thumbnail::{THUMBNAIL_STEP, Thumbnail};

/// Settings of render-and-compare place recognition.
#[derive(Clone, Debug, PartialEq)]
pub struct PanoramaConfig {
    /// Voxel edge of the fused cloud, metres (default 0.08).
    pub voxel_m: f64,
    /// Angular size of a panorama pixel, degrees (default 2).
    pub step_deg: f64,
    /// Elevation range of the panoramas, degrees (default −55 to 45: floor to ceiling for a level camera).
    pub elevation_deg: [f64; 2],
    /// Grid step of candidate positions, metres (default 0.25).
    pub grid_m: f64,
    /// Candidate positions lie within this distance of a keyframe position, metres (default 3).
    pub reach_m: f64,
    /// A candidate position must be at least this far from every surface, metres (default 0.25).
    pub clearance_m: f64,
    /// Surfaces farther than this are not rendered, metres (default 10).
    pub max_range_m: f64,
    /// Camera pitches tried, degrees, positive up (default −12, −6, 0: GST's current views are level or
    /// slightly down).
    pub pitches_deg: Vec<f64>,
    /// Least share of the image's cylindrical samples that a panorama must cover (default 0.6).
    pub min_coverage: f64,
}

impl Default for PanoramaConfig {
    fn default() -> Self {
        Self {
            voxel_m: 0.08,
            step_deg: 2.0,
            elevation_deg: [-55.0, 45.0],
            grid_m: 0.25,
            reach_m: 3.0,
            clearance_m: 0.25,
            max_range_m: 10.0,
            pitches_deg: vec![-12.0, -6.0, 0.0],
            min_coverage: 0.6,
        }
    }
}

/// A pose hypothesis of render and compare.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlaceHypothesis {
    pub world_from_camera: Pose3,
    /// Normalised cross-correlation of the image with the rendered panorama, in [−1, 1].
    pub score: f64,
}

/// One rendered panorama: colours, `None` where nothing was rendered.
struct Panorama {
    position: Vector3<f64>,
    pixels: Vec<Option<[u8; 3]>>,
}

/// Builds a [`PlaceIndex`] from a map's keyframes and colour frames with depth.
pub struct PlaceIndexBuilder<'a> {
    map: &'a SlamMap,
    config: PanoramaConfig,
    level_from_world: Pose3,
    grid: VoxelGrid,
}

impl<'a> PlaceIndexBuilder<'a> {
    /// A builder for `map` (its keyframes give gravity, the camera height and where to put candidates).
    pub fn new(map: &'a SlamMap, config: PanoramaConfig) -> Self {
        let poses: Vec<Pose3> = map.keyframes.iter().map(|k| Pose3(k.world_from_camera)).collect();
        let level_from_world = gst_core::gravity_alignment(&poses);
        let grid = VoxelGrid { voxel_m: config.voxel_m, cells: HashMap::new() };
        PlaceIndexBuilder { map, config, level_from_world, grid }
    }

    /// Adds a posed colour frame with depth (every 4th pixel in each direction).
    pub fn add_frame(&mut self, rgb: &RgbImage, depth: &DepthImage, world_from_camera: &Pose3) {
        let c = &self.map.camera;
        if (rgb.width(), rgb.height()) != (depth.width(), depth.height()) {
            return;
        }
        let level_from_camera = self.level_from_world * *world_from_camera;
        let (w, h) = (rgb.width() as usize, rgb.height() as usize);
        let (colours, depths) = (rgb.data(), depth.data());
        for j in (0..h).step_by(FRAME_STEP) {
            for i in (0..w).step_by(FRAME_STEP) {
                let d = f64::from(depths[j * w + i]);
                if !(d > 0.0 && d.is_finite()) {
                    continue;
                }
                let p = level_from_camera.0.transform_point(&Point3::new(
                    (i as f64 - c.cx) / c.fx * d,
                    (j as f64 - c.cy) / c.fy * d,
                    d,
                ));
                self.grid.add(&p, colours[j * w + i].map(f32::from));
            }
        }
    }

    /// Renders the panoramas (parallel; about a second for a house).
    pub fn finish(self) -> PlaceIndex {
        let PlaceIndexBuilder { map, config, level_from_world, grid } = self;
        let columns = (360.0 / config.step_deg).round().max(8.0) as usize;
        let rows =
            ((config.elevation_deg[1] - config.elevation_deg[0]) / config.step_deg).round().max(4.0) as usize;
        let voxels = grid.voxels();
        let camera_positions: Vec<Vector3<f64>> = map
            .keyframes
            .iter()
            .map(|k| (level_from_world * Pose3(k.world_from_camera)).translation())
            .collect();
        let positions = candidate_positions(&camera_positions, &voxels, &config);
        let panoramas = positions
            .par_iter()
            .map(|p| Panorama { position: *p, pixels: render(&voxels, p, &config, columns, rows) })
            .collect();
        PlaceIndex { config, camera: map.camera, level_from_world, columns, rows, panoramas }
    }
}

impl std::fmt::Debug for PlaceIndexBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlaceIndexBuilder").field("voxels", &self.grid.cells.len()).finish_non_exhaustive()
    }
}

/// Pixel step of [`PlaceIndexBuilder::add_frame`].
const FRAME_STEP: usize = 4;

/// The map rendered at candidate positions, ready to compare images with.
pub struct PlaceIndex {
    config: PanoramaConfig,
    camera: PinholeCamera,
    /// Level frame from the map's world.
    level_from_world: Pose3,
    columns: usize,
    rows: usize,
    panoramas: Vec<Panorama>,
}

impl std::fmt::Debug for PlaceIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlaceIndex")
            .field("positions", &self.panoramas.len())
            .field("columns", &self.columns)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

/// A cylindrical sample of the image: panorama column offset from the heading, row, grey level.
#[derive(Clone, Copy)]
struct Sample {
    column: i32,
    row: usize,
    value: [f32; 3],
}

impl PlaceIndex {
    /// The place index of a map from its keyframes' grey thumbnails (no colour: prefer
    /// [`PlaceIndexBuilder`] with the keyframes' colour frames when they are at hand).
    pub fn build(map: &SlamMap, config: PanoramaConfig) -> Self {
        let mut builder = PlaceIndexBuilder::new(map, config);
        for keyframe in &map.keyframes {
            let t = &keyframe.thumbnail;
            let c = &t.camera;
            let (w, h) = (c.width as usize, c.height as usize);
            if t.depth_m.len() != w * h || t.gray.len() != w * h {
                continue;
            }
            let level_from_camera = builder.level_from_world.0 * keyframe.world_from_camera;
            for j in 0..h {
                for i in 0..w {
                    let d = f64::from(t.depth_m[j * w + i]);
                    if d > 0.0 {
                        let p = level_from_camera
                            * Point3::new((i as f64 - c.cx) / c.fx * d, (j as f64 - c.cy) / c.fy * d, d);
                        let g = f32::from(t.gray[j * w + i]);
                        builder.grid.add(&p, [g, g, g]);
                    }
                }
            }
        }
        builder.finish()
    }

    /// Candidate positions rendered.
    pub fn positions(&self) -> usize {
        self.panoramas.len()
    }

    /// The `count` best distinct poses of `image` (colour, no depth), best first.
    pub fn hypotheses(&self, image: &RgbImage, count: usize) -> Vec<PlaceHypothesis> {
        let query = Query::new(&self.camera, image);
        let step = self.config.step_deg.to_radians();
        let mut scored: Vec<(f64, usize, usize, f64)> = self
            .config
            .pitches_deg
            .iter()
            .flat_map(|&pitch_deg| {
                let samples = self.samples(&query, pitch_deg.to_radians());
                let min_count = (samples.len() as f64 * self.config.min_coverage) as usize;
                self.panoramas
                    .par_iter()
                    .enumerate()
                    .flat_map_iter(|(i, panorama)| {
                        let samples = &samples;
                        (0..self.columns).filter_map(move |heading| {
                            self.score(panorama, samples, heading, min_count.max(20))
                                .map(|s| (s, i, heading, pitch_deg))
                        })
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let world_from_level = self.level_from_world.inverse();
        let mut picked: Vec<(usize, usize, PlaceHypothesis)> = Vec::new();
        for (score, i, heading, pitch_deg) in scored {
            let position = self.panoramas[i].position;
            let distinct = picked.iter().all(|(j, h, _)| {
                let d = (self.panoramas[*j].position - position).norm();
                let turn = (heading as i64 - *h as i64).rem_euclid(self.columns as i64);
                let turn = turn.min(self.columns as i64 - turn) as f64 * self.config.step_deg;
                d > 0.6 || turn > 25.0
            });
            if !distinct {
                continue;
            }
            let yaw = heading as f64 * step;
            let level_from_camera = Pose3::world_from_camera_yaw_pitch(position, yaw, pitch_deg.to_radians());
            picked.push((
                i,
                heading,
                PlaceHypothesis { world_from_camera: world_from_level * level_from_camera, score },
            ));
            if picked.len() == count {
                break;
            }
        }
        picked.into_iter().map(|(_, _, h)| h).collect()
    }

    /// Diagnostics: the score of `thumbnail` at the candidate position nearest a pose, with the pose's own
    /// heading and pitch, and that position's distance from the pose (metres).
    pub fn score_pose(&self, image: &RgbImage, world_from_camera: &Pose3) -> Option<(f64, f64)> {
        let query = Query::new(&self.camera, image);
        let level = self.level_from_world * *world_from_camera;
        let position = level.translation();
        let forward = level.rotation() * Vector3::z();
        let pitch = forward.z.clamp(-1.0, 1.0).asin();
        let yaw = forward.y.atan2(forward.x).rem_euclid(std::f64::consts::TAU);
        let (distance, panorama) = self
            .panoramas
            .iter()
            .map(|p| ((p.position.xy() - position.xy()).norm(), p))
            .min_by(|a, b| a.0.total_cmp(&b.0))?;
        let heading = (yaw / self.config.step_deg.to_radians()).round() as usize % self.columns;
        let samples = self.samples(&query, pitch);
        self.score(panorama, &samples, heading, 20).map(|s| (s, distance))
    }

    /// Diagnostics: the panorama nearest a pose and the image resampled onto it at the pose's heading and
    /// pitch (black where absent), as two images of the panorama's size.
    pub fn debug_images(&self, image: &RgbImage, world_from_camera: &Pose3) -> Option<(RgbImage, RgbImage)> {
        let level = self.level_from_world * *world_from_camera;
        let forward = level.rotation() * Vector3::z();
        let pitch = forward.z.clamp(-1.0, 1.0).asin();
        let yaw = forward.y.atan2(forward.x).rem_euclid(std::f64::consts::TAU);
        let position = level.translation();
        let panorama = self
            .panoramas
            .iter()
            .min_by(|a, b| (a.position - position).norm().total_cmp(&(b.position - position).norm()))?;
        let heading = (yaw / self.config.step_deg.to_radians()).round() as i32;
        let rendered: Vec<[u8; 3]> = panorama.pixels.iter().map(|p| p.unwrap_or([0, 0, 0])).collect();
        let mut query = vec![[0u8; 3]; rendered.len()];
        for s in self.samples(&Query::new(&self.camera, image), pitch) {
            let column = (heading + s.column).rem_euclid(self.columns as i32) as usize;
            query[s.row * self.columns + column] = s.value.map(|v| v.round().clamp(0.0, 255.0) as u8);
        }
        let (w, h) = (self.columns as u32, self.rows as u32);
        Some((RgbImage::from_vec(w, h, rendered).ok()?, RgbImage::from_vec(w, h, query).ok()?))
    }

    /// The image resampled on the panorama grid for a camera at `pitch` (heading at column 0).
    fn samples(&self, query: &Query, pitch: f64) -> Vec<Sample> {
        let camera = &query.camera;
        let step = self.config.step_deg.to_radians();
        let half_fov = (f64::from(self.camera.width) / 2.0 / self.camera.fx).atan();
        let half_columns = (half_fov / step).ceil() as i32;
        let (w, h) = (camera.width as usize, camera.height as usize);
        // Block means over roughly one panorama pixel, so that sampling does not alias.
        let block = ((step * camera.fx).round() as usize).max(1);
        let mean_at = |u: f64, v: f64| -> Option<[f32; 3]> {
            let (u0, v0) = (u as isize - block as isize / 2, v as isize - block as isize / 2);
            let mut sum = [0.0f32; 3];
            let mut n = 0.0f32;
            for y in v0.max(0)..(v0 + block as isize).min(h as isize) {
                for x in u0.max(0)..(u0 + block as isize).min(w as isize) {
                    let c = query.colours.get(y as usize * w + x as usize)?;
                    for k in 0..3 {
                        sum[k] += c[k];
                    }
                    n += 1.0;
                }
            }
            (n > 0.0).then(|| sum.map(|s| s / n))
        };
        let (sp, cp) = pitch.sin_cos();
        let mut samples = Vec::new();
        for row in 0..self.rows {
            let elevation = self.elevation(row);
            let (se, ce) = elevation.sin_cos();
            for column in -half_columns..=half_columns {
                let azimuth = f64::from(column) * step;
                let (sa, ca) = azimuth.sin_cos();
                // Camera frame (x right, y down, z forward) of the direction at (azimuth left of the heading,
                // elevation) for a camera pitched up by `pitch`.
                let x = -ce * sa;
                let y = ce * ca * sp - se * cp;
                let z = ce * ca * cp + se * sp;
                if z <= 0.05 {
                    continue;
                }
                let u = camera.fx * x / z + camera.cx;
                let v = camera.fy * y / z + camera.cy;
                if u < 0.0 || v < 0.0 || u >= w as f64 || v >= h as f64 {
                    continue;
                }
                if let Some(value) = mean_at(u, v) {
                    samples.push(Sample { column, row, value });
                }
            }
        }
        samples
    }

    /// Elevation of the centre of panorama row `row`, radians.
    fn elevation(&self, row: usize) -> f64 {
        (self.config.elevation_deg[1] - (row as f64 + 0.5) * self.config.step_deg).to_radians()
    }

    /// Normalised cross-correlation of the samples with the panorama at `heading`, the three channels taken
    /// as one vector (each channel's mean removed): brightness and hue patterns count alike.
    fn score(
        &self,
        panorama: &Panorama,
        samples: &[Sample],
        heading: usize,
        min_count: usize,
    ) -> Option<f64> {
        let mut n = 0usize;
        let (mut sa, mut sb) = ([0.0f64; 3], [0.0f64; 3]);
        let (mut saa, mut sbb, mut sab) = (0.0f64, 0.0f64, 0.0f64);
        let columns = self.columns as i32;
        for s in samples {
            // (heading + s.column) mod columns without a division in the common case: samples lie within a
            // quarter turn of the heading, so one wrap at most.
            let column = match heading as i32 + s.column {
                c if (0..columns).contains(&c) => c,
                c if (-columns..0).contains(&c) => c + columns,
                c if (columns..2 * columns).contains(&c) => c - columns,
                c => c.rem_euclid(columns),
            } as usize;
            let Some(b) = panorama.pixels[s.row * self.columns + column] else { continue };
            n += 1;
            for k in 0..3 {
                let (a, b) = (f64::from(s.value[k]), f64::from(b[k]));
                sa[k] += a;
                sb[k] += b;
                saa += a * a;
                sbb += b * b;
                sab += a * b;
            }
        }
        if n < min_count {
            return None;
        }
        let nf = n as f64;
        let (mut cov, mut va, mut vb) = (sab / nf, saa / nf, sbb / nf);
        for k in 0..3 {
            let (ma, mb) = (sa[k] / nf, sb[k] / nf);
            cov -= ma * mb;
            va -= ma * ma;
            vb -= mb * mb;
        }
        if va < 3.0 || vb < 3.0 {
            return None;
        }
        Some(cov / (va * vb).sqrt())
    }
}

/// A query image as block means (the thumbnails' 1/4 resolution), in colour.
struct Query {
    camera: PinholeCamera,
    colours: Vec<[f32; 3]>,
}

impl Query {
    fn new(camera: &PinholeCamera, image: &RgbImage) -> Self {
        let small = Thumbnail::camera_for(camera);
        let (w, h) = (small.width as usize, small.height as usize);
        let s = THUMBNAIL_STEP as usize;
        let full_width = image.width() as usize;
        let data = image.data();
        let mut colours = Vec::with_capacity(w * h);
        for j in 0..h {
            for i in 0..w {
                let mut sum = [0.0f32; 3];
                for y in j * s..(j + 1) * s {
                    for x in i * s..(i + 1) * s {
                        if let Some(c) = data.get(y * full_width + x) {
                            for k in 0..3 {
                                sum[k] += f32::from(c[k]);
                            }
                        }
                    }
                }
                colours.push(sum.map(|v| v / (s * s) as f32));
            }
        }
        Query { camera: small, colours }
    }
}

/// A fused voxel: level-frame centre and mean colour.
struct Voxel {
    position: Vector3<f64>,
    colour: [f32; 3],
}

/// Colour points accumulated per voxel of the level frame.
#[derive(Default)]
struct VoxelGrid {
    voxel_m: f64,
    cells: HashMap<[i64; 3], (Vector3<f64>, [f64; 3], u32)>,
}

impl VoxelGrid {
    fn add(&mut self, p: &Point3<f64>, colour: [f32; 3]) {
        let v = self.voxel_m;
        let key = [(p.x / v).floor() as i64, (p.y / v).floor() as i64, (p.z / v).floor() as i64];
        let cell = self.cells.entry(key).or_insert((Vector3::zeros(), [0.0; 3], 0));
        cell.0 += p.coords;
        for (sum, c) in cell.1.iter_mut().zip(colour) {
            *sum += f64::from(c);
        }
        cell.2 += 1;
    }

    /// Voxels sorted by key, so that the result does not depend on hash order.
    fn voxels(self) -> Vec<Voxel> {
        let mut voxels: Vec<([i64; 3], Voxel)> = self
            .cells
            .into_iter()
            .map(|(key, (sum, colour, n))| {
                let n = f64::from(n);
                let colour = colour.map(|c| (c / n) as f32);
                (key, Voxel { position: sum / n, colour })
            })
            .collect();
        voxels.sort_by_key(|a| a.0);
        voxels.into_iter().map(|(_, v)| v).collect()
    }
}

/// Grid positions within `reach_m` of a camera position, at the cameras' median height, clear of surfaces.
fn candidate_positions(
    cameras: &[Vector3<f64>],
    voxels: &[Voxel],
    config: &PanoramaConfig,
) -> Vec<Vector3<f64>> {
    if cameras.is_empty() {
        return Vec::new();
    }
    let mut heights: Vec<f64> = cameras.iter().map(|c| c.z).collect();
    heights.sort_by(f64::total_cmp);
    let height = heights[heights.len() / 2];
    let g = config.grid_m;
    let reach = (config.reach_m / g).ceil() as i64;
    let mut cells = std::collections::BTreeSet::new();
    for c in cameras {
        let (cx, cy) = ((c.x / g).round() as i64, (c.y / g).round() as i64);
        for dy in -reach..=reach {
            for dx in -reach..=reach {
                let (x, y) = ((cx + dx) as f64 * g, (cy + dy) as f64 * g);
                if (x - c.x).hypot(y - c.y) <= config.reach_m {
                    cells.insert((cx + dx, cy + dy));
                }
            }
        }
    }
    // Occupied columns: voxels between knee and head height near a position mean it is inside furniture or
    // a wall; positions with no floor under them are outside the house.
    let clearance_cells = (config.clearance_m / g).ceil() as i64;
    let mut occupied = std::collections::HashSet::new();
    let mut floor = std::collections::HashSet::new();
    for v in voxels {
        let key = ((v.position.x / g).round() as i64, (v.position.y / g).round() as i64);
        let dz = v.position.z - height;
        if (-0.9..0.5).contains(&dz) {
            occupied.insert(key);
        } else if dz < -0.9 {
            floor.insert(key);
        }
    }
    cells
        .into_iter()
        .filter(|&(x, y)| {
            floor.contains(&(x, y))
                && (-clearance_cells..=clearance_cells).all(|dy| {
                    (-clearance_cells..=clearance_cells).all(|dx| !occupied.contains(&(x + dx, y + dy)))
                })
        })
        .map(|(x, y)| Vector3::new(x as f64 * g, y as f64 * g, height))
        .collect()
}

/// The cylindrical panorama of the voxels seen from `position`: column = azimuth counter-clockwise from +x,
/// row = elevation from the top of the range; each voxel splatted over its angular size, nearest wins.
fn render(
    voxels: &[Voxel],
    position: &Vector3<f64>,
    config: &PanoramaConfig,
    columns: usize,
    rows: usize,
) -> Vec<Option<[u8; 3]>> {
    let step = config.step_deg.to_radians();
    let top = config.elevation_deg[1].to_radians();
    let mut depth = vec![f64::INFINITY; columns * rows];
    let mut pixels = vec![None; columns * rows];
    for v in voxels {
        let d = v.position - position;
        let range = d.norm();
        if !(0.1..config.max_range_m).contains(&range) {
            continue;
        }
        let azimuth = d.y.atan2(d.x).rem_euclid(std::f64::consts::TAU);
        let elevation = d.z.atan2(d.x.hypot(d.y));
        let column = azimuth / step;
        let row = (top - elevation) / step;
        let radius = ((0.5 * config.voxel_m / range).atan() / step).min(4.0);
        let r = radius.ceil() as i64;
        for dr in -r..=r {
            let rr = (row + dr as f64).floor() as i64;
            if rr < 0 || rr >= rows as i64 {
                continue;
            }
            for dc in -r..=r {
                let cc = ((column + dc as f64).floor() as i64).rem_euclid(columns as i64) as usize;
                let k = rr as usize * columns + cc;
                if range < depth[k] {
                    depth[k] = range;
                    pixels[k] = Some(v.colour.map(|c| c.round().clamp(0.0, 255.0) as u8));
                }
            }
        }
    }
    pixels
}
