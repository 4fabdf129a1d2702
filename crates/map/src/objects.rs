//! Object landmarks: per-frame instance observations (a 2D mask or box, a class, maybe a track label)
//! are back-projected with depth and fused into landmarks by nearest-neighbour association (kiddo) on
//! their centres, gated by class and label. Each landmark keeps class votes, a 5 cm voxel set of its
//! surface, an observation count and the frames it was seen in; its box is fitted at the end.

use std::collections::BTreeMap;

use kiddo::ImmutableKdTree;
use kiddo::dist::SquaredEuclidean;
use nalgebra::Point3;
use serde::{Deserialize, Serialize};

use gst_core::{DepthImage, ObjectClass, PinholeCamera, Pose3};

use crate::MapConfig;
use crate::occupancy::map_point;

/// Side of the voxels that record a landmark's surface, metres.
const OBJECT_VOXEL_M: f64 = 0.05;
/// Most depth samples taken from one observation.
const MAX_SAMPLES_PER_OBSERVATION: usize = 1500;
/// Bin of the depth histogram of a box observation, metres.
const BOX_DEPTH_BIN_M: f64 = 0.05;
/// A depth mode must hold this fraction of a box's valid pixels to be the object.
const BOX_MODE_MIN_FRACTION: f64 = 0.12;
/// The object's depth interval grows over bins holding at least this fraction of the valid pixels.
const BOX_BIN_MIN_FRACTION: f64 = 0.01;
/// Fraction of points trimmed at each end of an axis when fitting a box.
const BOX_TRIM_FRACTION: f64 = 0.02;

/// Where an observation lies in the image.
#[derive(Clone, Debug, PartialEq)]
pub enum Region {
    /// Pixel indices (`y * width + x`) of the instance.
    Mask(Vec<u32>),
    /// A box, inclusive pixel bounds; the object is the nearest dominant depth surface inside it.
    Box { x_min: u32, y_min: u32, x_max: u32, y_max: u32 },
}

/// One object seen in one frame.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    pub class: Option<ObjectClass>,
    /// The perception's own identity of the object (a track id, an oracle instance id), if it has one:
    /// observations with different labels never fuse.
    pub label: Option<u32>,
    pub region: Region,
}

/// An axis-aligned-in-yaw box: centre, full extents along its own axes, yaw of its x axis (radians, from
/// the map's +x, counter-clockwise).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct YawBox {
    pub center_m: [f64; 3],
    pub size_m: [f64; 3],
    pub yaw_rad: f64,
}

impl YawBox {
    /// Whether a point (the box's frame) lies in the box grown by `margin_m` on every side.
    pub fn contains(&self, p: [f64; 3], margin_m: f64) -> bool {
        let (dx, dy) = (p[0] - self.center_m[0], p[1] - self.center_m[1]);
        let (sin, cos) = self.yaw_rad.sin_cos();
        let local = [cos * dx + sin * dy, -sin * dx + cos * dy, p[2] - self.center_m[2]];
        (0..3).all(|a| local[a].abs() <= self.size_m[a] / 2.0 + margin_m)
    }
}

/// A fused object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectLandmark {
    pub id: usize,
    /// The class with most votes (ties: the smallest class), if any observation had a class.
    pub class: Option<ObjectClass>,
    /// Votes per class.
    pub class_votes: BTreeMap<ObjectClass, u32>,
    /// The perception label of the observations, if they had one.
    pub label: Option<u32>,
    /// Centre of the fitted box, map frame, metres.
    pub centroid_m: [f64; 3],
    pub bbox: YawBox,
    pub observations: u32,
    pub first_frame: usize,
    pub last_frame: usize,
    /// The frame in which the most depth samples were seen.
    pub best_frame: usize,
    /// Surface voxels (5 cm) recorded.
    pub voxels: usize,
}

#[derive(Clone, Debug)]
struct Track {
    class_votes: BTreeMap<ObjectClass, u32>,
    label: Option<u32>,
    voxels: BTreeMap<[i32; 3], u32>,
    sum: [f64; 3],
    samples: f64,
    observations: u32,
    first_frame: usize,
    last_frame: usize,
    best: (usize, usize),
}

impl Track {
    fn mean(&self) -> [f64; 3] {
        let n = self.samples.max(1.0);
        [self.sum[0] / n, self.sum[1] / n, self.sum[2] / n]
    }
}

/// Fuses observations into landmarks.
#[derive(Clone, Debug)]
pub struct ObjectMap {
    association_radius_m: f64,
    min_points: usize,
    tracks: Vec<Track>,
}

/// The depth samples of an observation in the map frame.
pub fn observation_points(
    camera: &PinholeCamera,
    depth: &DepthImage,
    map_from_camera: &Pose3,
    region: &Region,
) -> Vec<Point3<f64>> {
    let width = depth.width();
    match region {
        Region::Mask(pixels) => {
            let step = pixels.len().div_ceil(MAX_SAMPLES_PER_OBSERVATION).max(1);
            let mut depths: Vec<(u32, u32, f32)> = pixels
                .iter()
                .step_by(step)
                .filter_map(|&i| {
                    let (u, v) = (i % width.max(1), i / width.max(1));
                    depth.get(u, v).filter(|d| d.is_finite() && **d > 0.0).map(|d| (u, v, *d))
                })
                .collect();
            // Mask edges mix in the background: keep depths near the median.
            if depths.is_empty() {
                return Vec::new();
            }
            let mut sorted: Vec<f32> = depths.iter().map(|d| d.2).collect();
            sorted.sort_by(f32::total_cmp);
            let median = sorted[sorted.len() / 2];
            depths.retain(|d| (d.2 - median).abs() < 1.5);
            depths.iter().filter_map(|&(u, v, _)| map_point(camera, depth, map_from_camera, u, v)).collect()
        }
        Region::Box { x_min, y_min, x_max, y_max } => {
            let (x0, x1) = ((*x_min).min(*x_max), (*x_min).max(*x_max).min(width.saturating_sub(1)));
            let (y0, y1) = ((*y_min).min(*y_max), (*y_min).max(*y_max).min(depth.height().saturating_sub(1)));
            let area = (u64::from(x1 - x0) + 1) * (u64::from(y1.saturating_sub(y0)) + 1);
            let step = ((area as f64 / MAX_SAMPLES_PER_OBSERVATION as f64).sqrt().ceil() as u32).max(1);
            let mut samples = Vec::new();
            for v in (y0..=y1).step_by(step as usize) {
                for u in (x0..=x1).step_by(step as usize) {
                    if let Some(d) = depth.get(u, v).filter(|d| d.is_finite() && **d > 0.0) {
                        samples.push((u, v, f64::from(*d)));
                    }
                }
            }
            let Some((lo, hi)) = object_depth_interval(&samples.iter().map(|s| s.2).collect::<Vec<_>>())
            else {
                return Vec::new();
            };
            samples
                .iter()
                .filter(|s| s.2 >= lo && s.2 <= hi)
                .filter_map(|&(u, v, _)| map_point(camera, depth, map_from_camera, u, v))
                .collect()
        }
    }
}

/// The depth interval of the object in a box: the nearest histogram mode holding at least
/// [`BOX_MODE_MIN_FRACTION`] of the samples, grown over neighbouring bins while they stay populated
/// (an object's surface is continuous in depth; the background behind it is separated by a gap).
pub fn object_depth_interval(depths_m: &[f64]) -> Option<(f64, f64)> {
    if depths_m.is_empty() {
        return None;
    }
    let max = depths_m.iter().copied().fold(0.0, f64::max);
    let bins = (max / BOX_DEPTH_BIN_M).floor() as usize + 1;
    let mut hist = vec![0usize; bins];
    for d in depths_m {
        hist[((d / BOX_DEPTH_BIN_M).floor() as usize).min(bins - 1)] += 1;
    }
    let n = depths_m.len() as f64;
    // Smoothed over three bins, so that a surface split across a bin edge still forms one mode.
    let smooth = |i: usize| hist[i.saturating_sub(1)..=(i + 1).min(bins - 1)].iter().sum::<usize>() as f64;
    let mode = (0..bins).find(|&i| {
        let s = smooth(i);
        s >= BOX_MODE_MIN_FRACTION * n
            && s >= smooth(i.saturating_sub(1))
            && s >= smooth((i + 1).min(bins - 1))
    })?;
    let populated = |i: usize| hist[i] as f64 >= BOX_BIN_MIN_FRACTION * n;
    let (mut lo, mut hi) = (mode, mode);
    while lo > 0 && populated(lo - 1) {
        lo -= 1;
    }
    while hi + 1 < bins && populated(hi + 1) {
        hi += 1;
    }
    Some((lo as f64 * BOX_DEPTH_BIN_M, (hi + 1) as f64 * BOX_DEPTH_BIN_M))
}

fn voxel_of(p: &Point3<f64>) -> [i32; 3] {
    [p.x, p.y, p.z].map(|c| (c / OBJECT_VOXEL_M).floor() as i32)
}

fn compatible(track: &Track, class: Option<ObjectClass>, label: Option<u32>) -> bool {
    if let (Some(a), Some(b)) = (track.label, label)
        && a != b
    {
        return false;
    }
    match class {
        Some(c) => track.class_votes.is_empty() || track.class_votes.contains_key(&c),
        None => true,
    }
}

impl ObjectMap {
    pub fn new(config: &MapConfig) -> Self {
        Self {
            association_radius_m: config.association_radius_m,
            min_points: config.min_object_points,
            tracks: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.tracks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tracks.is_empty()
    }

    /// Adds one frame's observations.
    pub fn add_frame(
        &mut self,
        frame_index: usize,
        camera: &PinholeCamera,
        depth: &DepthImage,
        map_from_camera: &Pose3,
        observations: &[Observation],
    ) {
        let centres: Vec<[f64; 3]> = self.tracks.iter().map(Track::mean).collect();
        let tree = (!centres.is_empty())
            .then(|| ImmutableKdTree::<f64, 3>::new_from_slice(&centres))
            .and_then(Result::ok);
        let radius2 = self.association_radius_m * self.association_radius_m;
        for observation in observations {
            let points = observation_points(camera, depth, map_from_camera, &observation.region);
            if points.len() < self.min_points {
                continue;
            }
            let n = points.len() as f64;
            let mean = points.iter().fold([0.0; 3], |a, p| [a[0] + p.x / n, a[1] + p.y / n, a[2] + p.z / n]);
            let matched = tree.as_ref().and_then(|tree| {
                let near = tree.query(&mean).within::<SquaredEuclidean<f64>>(radius2).execute();
                let mut near: Vec<(f64, usize)> =
                    near.iter().map(|nb| (nb.distance, nb.item as usize)).collect();
                near.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                near.into_iter()
                    .map(|(_, i)| i)
                    .find(|&i| compatible(&self.tracks[i], observation.class, observation.label))
            });
            let index = matched.unwrap_or_else(|| self.new_track(frame_index, observation.label));
            self.fuse(index, frame_index, observation.class, &points);
        }
    }

    /// Adds the points of one observation of a single tracked object (all calls fuse into one landmark).
    pub fn add_points(&mut self, frame_index: usize, points: &[Point3<f64>]) {
        if points.is_empty() {
            return;
        }
        let index = if self.tracks.is_empty() { self.new_track(frame_index, None) } else { 0 };
        self.fuse(index, frame_index, None, points);
    }

    fn new_track(&mut self, frame_index: usize, label: Option<u32>) -> usize {
        self.tracks.push(Track {
            class_votes: BTreeMap::new(),
            label,
            voxels: BTreeMap::new(),
            sum: [0.0; 3],
            samples: 0.0,
            observations: 0,
            first_frame: frame_index,
            last_frame: frame_index,
            best: (frame_index, 0),
        });
        self.tracks.len() - 1
    }

    fn fuse(&mut self, index: usize, frame_index: usize, class: Option<ObjectClass>, points: &[Point3<f64>]) {
        let Some(track) = self.tracks.get_mut(index) else { return };
        let n = points.len() as f64;
        if let Some(class) = class {
            *track.class_votes.entry(class).or_default() += 1;
        }
        for p in points {
            *track.voxels.entry(voxel_of(p)).or_default() += 1;
            track.sum = [track.sum[0] + p.x, track.sum[1] + p.y, track.sum[2] + p.z];
        }
        track.samples += n;
        track.observations += 1;
        track.first_frame = track.first_frame.min(frame_index);
        track.last_frame = track.last_frame.max(frame_index);
        if points.len() > track.best.1 {
            track.best = (frame_index, points.len());
        }
    }

    /// The landmarks, boxes fitted; landmarks seen fewer than `min_observations` times are dropped.
    pub fn landmarks(&self, min_observations: u32) -> Vec<ObjectLandmark> {
        self.tracks
            .iter()
            .filter(|t| t.observations >= min_observations)
            .enumerate()
            .map(|(id, t)| {
                let class =
                    t.class_votes.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(c, _)| *c);
                let bbox = fit_box(&t.voxels);
                ObjectLandmark {
                    id,
                    class,
                    class_votes: t.class_votes.clone(),
                    label: t.label,
                    centroid_m: bbox.center_m,
                    bbox,
                    observations: t.observations,
                    first_frame: t.first_frame,
                    last_frame: t.last_frame,
                    best_frame: t.best.0,
                    voxels: t.voxels.len(),
                }
            })
            .collect()
    }
}

/// Fits a yaw box to surface voxels: yaw from the principal axis of their footprint, extents from trimmed
/// percentiles along the box axes (robust to a few stray samples).
pub fn fit_box(voxels: &BTreeMap<[i32; 3], u32>) -> YawBox {
    let centres: Vec<[f64; 3]> =
        voxels.keys().map(|v| [0, 1, 2].map(|a| (f64::from(v[a]) + 0.5) * OBJECT_VOXEL_M)).collect();
    if centres.is_empty() {
        return YawBox { center_m: [0.0; 3], size_m: [0.0; 3], yaw_rad: 0.0 };
    }
    let n = centres.len() as f64;
    let (mx, my) =
        (centres.iter().map(|c| c[0]).sum::<f64>() / n, centres.iter().map(|c| c[1]).sum::<f64>() / n);
    let (mut sxx, mut syy, mut sxy) = (0.0, 0.0, 0.0);
    for c in &centres {
        let (dx, dy) = (c[0] - mx, c[1] - my);
        sxx += dx * dx;
        syy += dy * dy;
        sxy += dx * dy;
    }
    let yaw = 0.5 * (2.0 * sxy).atan2(sxx - syy);
    let (cos, sin) = (yaw.cos(), yaw.sin());
    let trimmed = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        let k = ((values.len() as f64) * BOX_TRIM_FRACTION).floor() as usize;
        let lo = values[k.min(values.len() - 1)];
        let hi = values[values.len() - 1 - k.min(values.len() - 1)];
        (lo - OBJECT_VOXEL_M / 2.0, hi + OBJECT_VOXEL_M / 2.0)
    };
    let a = trimmed(centres.iter().map(|c| cos * c[0] + sin * c[1]).collect());
    let b = trimmed(centres.iter().map(|c| -sin * c[0] + cos * c[1]).collect());
    let z = trimmed(centres.iter().map(|c| c[2]).collect());
    let (ca, cb) = ((a.0 + a.1) / 2.0, (b.0 + b.1) / 2.0);
    YawBox {
        center_m: [cos * ca - sin * cb, sin * ca + cos * cb, (z.0 + z.1) / 2.0],
        size_m: [a.1 - a.0, b.1 - b.0, z.1 - z.0],
        yaw_rad: yaw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_dominant_depth_mode_excludes_the_background() {
        // 60 % object at 1.95–2.3 m, 40 % wall at 4 m.
        let mut depths: Vec<f64> = (0..600).map(|i| 1.95 + 0.35 * f64::from(i) / 600.0).collect();
        depths.extend(std::iter::repeat_n(4.0, 400));
        let (lo, hi) = object_depth_interval(&depths).unwrap();
        assert!(lo <= 1.95 + 1e-9 && lo > 1.8, "lo {lo}");
        assert!((2.3..2.5).contains(&hi), "hi {hi}");
        // A sliver of clutter in front (5 %) is not the object.
        let mut with_clutter = depths.clone();
        with_clutter.extend(std::iter::repeat_n(0.9, 50));
        let (lo2, _) = object_depth_interval(&with_clutter).unwrap();
        assert!(lo2 > 1.8, "lo {lo2}");
        assert_eq!(object_depth_interval(&[]), None);
    }

    #[test]
    fn box_fit_recovers_a_rotated_box() {
        let mut voxels = BTreeMap::new();
        let yaw: f64 = 0.5;
        for i in 0..40 {
            for j in 0..16 {
                for k in 0..10 {
                    let (a, b) = (f64::from(i) * 0.025 - 0.5, f64::from(j) * 0.025 - 0.2);
                    let p = Point3::new(
                        3.0 + yaw.cos() * a - yaw.sin() * b,
                        1.0 + yaw.sin() * a + yaw.cos() * b,
                        0.25 + f64::from(k) * 0.05,
                    );
                    voxels.insert(voxel_of(&p), 1);
                }
            }
        }
        let fitted = fit_box(&voxels);
        assert!(
            (fitted.center_m[0] - 3.0).abs() < 0.06 && (fitted.center_m[1] - 1.0).abs() < 0.06,
            "{fitted:?}"
        );
        assert!((fitted.yaw_rad - yaw).abs() < 0.1 || (fitted.yaw_rad - yaw).abs() > 3.0, "{fitted:?}");
        assert!((fitted.size_m[0] - 1.0).abs() < 0.15, "{fitted:?}");
    }
}
