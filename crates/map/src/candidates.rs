//! Class-agnostic object candidates: what stands on the floor and is not a wall, from posed RGB-D alone.
//!
//! Every integrated frame's depth samples (those of the occupancy grid, at its pixel stride; with their
//! colour) vote into a sparse 5 cm voxel set in the map
//! frame. At the end, voxels seen in at least two frames, between just above the estimated floor and 2.2 m
//! above it, and not over a wall cell of the occupancy grid (`structure`: seen above door height), are
//! grouped into 26-connected clusters; each cluster large enough is a candidate with a yaw box and a
//! feature vector (extents, height profile, footprint fill, colour) that an [`crate::ObjectClassifier`]
//! trained on GST-Train scenes turns into class scores. A wardrobe or a tall cabinet is seen above the door
//! tops too, so its cells are structure; but a wall rises to the ceiling and furniture stops short of it:
//! the voxels over structure cells with no ceiling-reaching column within 40 cm are clustered on their own
//! (apart from the rest, so that objects standing by a wall never merge with it) into candidates as well.
//! Nothing here reads ground truth.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use gst_core::RgbImage;

use crate::objects::{YawBox, fit_box};
use crate::occupancy::{DepthSample, OccupancyGrid};

/// Side of the candidate voxels, metres (the landmarks' voxel size, so [`fit_box`] applies).
pub const CANDIDATE_VOXEL_M: f64 = 0.05;
/// Depth outside this range is too close or too noisy to shape objects, metres.
const MIN_RANGE_M: f64 = 0.1;
const MAX_RANGE_M: f64 = 5.0;
/// A voxel counts when seen in at least this many frames.
const MIN_VOXEL_FRAMES: u32 = 2;
/// Voxels this close to the floor are floor, metres.
const MIN_HEIGHT_M: f64 = 0.06;
/// Voxels above this height over the floor belong to walls, ceilings and lamps, metres.
const MAX_HEIGHT_M: f64 = 2.2;
/// Votes are kept in a band around the floor estimate of the moment (it settles after a few frames); the
/// top reaches ceilings up to 3.5 m, so that walls can be told from tall furniture by their top.
const VOTE_BAND_M: (f64, f64) = (-0.5, 3.5);
/// A column with a voxel this far below the estimated ceiling (metres: from, to) reaches the ceiling — a
/// wall; below the band's bottom stop wardrobes and tall cabinets; above its top the ceiling's own voxels.
const WALL_TOP_BELOW_CEILING_M: (f64, f64) = (0.2, 0.1);
/// Voxels over structure cells are tall furniture when no ceiling-reaching column is within this many
/// voxels (40 cm: a wall seen near the ceiling in only some of its columns still counts as one).
const TALL_COLUMN_RADIUS: i32 = 8;
/// Fewest voxels of a candidate.
const MIN_CANDIDATE_VOXELS: usize = 25;
/// Wall cells are grown by this many cells before voxels over them are dropped (noise around walls).
const WALL_DILATION_CELLS: i64 = 1;
/// Bins of the height profile feature, over [0, MAX_HEIGHT_M].
const HEIGHT_BINS: usize = 5;
/// Length of [`ObjectCandidate::features`].
pub const FEATURE_COUNT: usize = 8 + HEIGHT_BINS + 4;

#[derive(Clone, Copy, Debug, Default)]
struct Voxel {
    frames: u32,
    last_frame: u32,
    rgb_sum: [u64; 3],
    samples: u32,
}

/// A cluster of voxels that may be an object (map frame, metres).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectCandidate {
    pub id: usize,
    /// Centre of the fitted box, map frame.
    pub centroid_m: [f64; 3],
    pub bbox: YawBox,
    pub voxels: usize,
    /// Mean colour of its voxels, 0–255.
    pub color: [u8; 3],
    /// The classifier's input ([`FEATURE_COUNT`] values; see [`candidate_features`]).
    pub features: Vec<f64>,
}

/// Accumulates the voxel votes.
#[derive(Clone, Debug, Default)]
pub struct CandidateAccumulator {
    voxels: HashMap<[i32; 3], Voxel>,
    frames: u32,
}

fn voxel_key(p: [f64; 3]) -> [i32; 3] {
    p.map(|v| (v / CANDIDATE_VOXEL_M).floor() as i32)
}

fn voxel_centre(key: [i32; 3]) -> [f64; 3] {
    key.map(|v| (f64::from(v) + 0.5) * CANDIDATE_VOXEL_M)
}

impl CandidateAccumulator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Votes one frame's depth samples (shared with the occupancy grid, [`sample_depth`]) with the colour of
    /// their pixels into voxels; `floor_z_m` is the floor estimate of the moment (samples far outside the
    /// band above it are skipped, as are depths beyond 5 m). `rgb` must be the depth's size.
    pub(crate) fn integrate(&mut self, samples: &[DepthSample], rgb: &RgbImage, floor_z_m: f64) {
        self.frames += 1;
        let stamp = self.frames;
        let colours = rgb.data();
        let band = (floor_z_m + VOTE_BAND_M.0, floor_z_m + VOTE_BAND_M.1);
        let kept = samples.iter().filter(|s| {
            s.depth_m > MIN_RANGE_M && s.depth_m < MAX_RANGE_M && (band.0..=band.1).contains(&s.point[2])
        });
        for s in kept {
            let Some(&colour) = colours.get(s.pixel) else { continue };
            let key = voxel_key(s.point);
            let voxel = self.voxels.entry(key).or_default();
            if voxel.last_frame != stamp {
                voxel.last_frame = stamp;
                voxel.frames += 1;
            }
            for (sum, c) in voxel.rgb_sum.iter_mut().zip(colour) {
                *sum += u64::from(c);
            }
            voxel.samples += 1;
        }
    }

    /// The candidates, given the finished occupancy grid (its floor and wall cells).
    pub fn finish(&self, occupancy: &OccupancyGrid) -> Vec<ObjectCandidate> {
        let g = &occupancy.frame;
        if g.is_empty() {
            return Vec::new();
        }
        let floor = occupancy.floor_z_m;
        let wall_top = (
            occupancy.ceiling_z_m - WALL_TOP_BELOW_CEILING_M.0,
            occupancy.ceiling_z_m - WALL_TOP_BELOW_CEILING_M.1,
        );
        // Columns with a wall rising to the ceiling, and every column within reach of one.
        let ceiling_columns: HashSet<[i32; 2]> = self
            .voxels
            .iter()
            .filter(|(key, voxel)| {
                voxel.frames >= MIN_VOXEL_FRAMES
                    && (wall_top.0..=wall_top.1).contains(&voxel_centre(**key)[2])
            })
            .map(|(key, _)| [key[0], key[1]])
            .collect();
        let near_ceiling_column: HashSet<[i32; 2]> = ceiling_columns
            .iter()
            .flat_map(|c| {
                (-TALL_COLUMN_RADIUS..=TALL_COLUMN_RADIUS).flat_map(move |dy| {
                    (-TALL_COLUMN_RADIUS..=TALL_COLUMN_RADIUS).map(move |dx| [c[0] + dx, c[1] + dy])
                })
            })
            .collect();
        let near_structure = |x: f64, y: f64| -> bool {
            let Some((c, r)) = g.cell_from_world(x, y) else { return false };
            for dr in -WALL_DILATION_CELLS..=WALL_DILATION_CELLS {
                for dc in -WALL_DILATION_CELLS..=WALL_DILATION_CELLS {
                    let (cc, rr) = (i64::from(c) + dc, i64::from(r) + dr);
                    if cc >= 0
                        && rr >= 0
                        && cc < i64::from(g.width)
                        && rr < i64::from(g.height)
                        && occupancy.structure[g.index(cc as u32, rr as u32)]
                    {
                        return true;
                    }
                }
            }
            false
        };
        // Off the structure cells: objects. Over them but away from any wall that reaches the ceiling:
        // tall furniture (clustered on its own, so that objects never merge with walls through it).
        let (mut kept, mut tall): (BTreeMap<[i32; 3], Voxel>, BTreeMap<[i32; 3], Voxel>) =
            (BTreeMap::new(), BTreeMap::new());
        for (key, voxel) in &self.voxels {
            let [x, y, z] = voxel_centre(*key);
            if voxel.frames < MIN_VOXEL_FRAMES || !(MIN_HEIGHT_M..=MAX_HEIGHT_M).contains(&(z - floor)) {
                continue;
            }
            if !near_structure(x, y) {
                kept.insert(*key, *voxel);
            } else if !near_ceiling_column.contains(&[key[0], key[1]]) {
                tall.insert(*key, *voxel);
            }
        }
        let mut candidates = Vec::new();
        for set in [&kept, &tall] {
            for cluster in clusters(set) {
                let voxels: Vec<([i32; 3], Voxel)> = cluster.iter().map(|k| (*k, set[k])).collect();
                candidates.push(candidate(candidates.len(), &voxels, floor));
            }
        }
        candidates
    }
}

/// The 26-connected clusters of a voxel set with at least [`MIN_CANDIDATE_VOXELS`] voxels, in key order.
fn clusters(set: &BTreeMap<[i32; 3], Voxel>) -> Vec<Vec<[i32; 3]>> {
    let mut seen: HashSet<[i32; 3]> = HashSet::new();
    let mut found = Vec::new();
    for &start in set.keys() {
        if !seen.insert(start) {
            continue;
        }
        let mut cluster = vec![start];
        let mut next = 0;
        while next < cluster.len() {
            let v = cluster[next];
            next += 1;
            for dz in -1..=1 {
                for dy in -1..=1 {
                    for dx in -1..=1 {
                        let n = [v[0] + dx, v[1] + dy, v[2] + dz];
                        if set.contains_key(&n) && seen.insert(n) {
                            cluster.push(n);
                        }
                    }
                }
            }
        }
        if cluster.len() >= MIN_CANDIDATE_VOXELS {
            found.push(cluster);
        }
    }
    found
}

fn candidate(id: usize, voxels: &[([i32; 3], Voxel)], floor_z_m: f64) -> ObjectCandidate {
    let set: BTreeMap<[i32; 3], u32> = voxels.iter().map(|(k, v)| (*k, v.frames)).collect();
    let bbox = fit_box(&set);
    let (mut sum, mut samples) = ([0u64; 3], 0u64);
    for (_, v) in voxels {
        for (s, c) in sum.iter_mut().zip(v.rgb_sum) {
            *s += c;
        }
        samples += u64::from(v.samples);
    }
    let color = sum.map(|s| (s / samples.max(1)).min(255) as u8);
    let features = candidate_features(voxels, &bbox, floor_z_m);
    ObjectCandidate { id, centroid_m: bbox.center_m, bbox, voxels: voxels.len(), color, features }
}

/// The feature vector of a cluster: footprint length and width (m, longer first), top and bottom height
/// over the floor (m), box height, footprint fill (occupied footprint cells over the box's footprint),
/// volume fill, log voxel count; the share of voxels in each of five height bands from the floor to 2.2 m;
/// mean colour (r, g, b in 0–1) and the spread of brightness.
fn candidate_features(voxels: &[([i32; 3], Voxel)], bbox: &YawBox, floor_z_m: f64) -> Vec<f64> {
    let long = bbox.size_m[0].max(bbox.size_m[1]);
    let short = bbox.size_m[0].min(bbox.size_m[1]);
    let heights: Vec<f64> = voxels.iter().map(|(k, _)| voxel_centre(*k)[2] - floor_z_m).collect();
    let top = heights.iter().copied().fold(f64::MIN, f64::max) + CANDIDATE_VOXEL_M / 2.0;
    let bottom = heights.iter().copied().fold(f64::MAX, f64::min) - CANDIDATE_VOXEL_M / 2.0;
    let footprint: HashSet<[i32; 2]> = voxels.iter().map(|(k, _)| [k[0], k[1]]).collect();
    let cell = CANDIDATE_VOXEL_M * CANDIDATE_VOXEL_M;
    let footprint_fill = (footprint.len() as f64 * cell / (long * short).max(cell)).min(1.0);
    let volume_fill =
        (voxels.len() as f64 * cell * CANDIDATE_VOXEL_M / (long * short * bbox.size_m[2]).max(cell)).min(1.0);
    let mut bands = [0.0f64; HEIGHT_BINS];
    for h in &heights {
        let b = ((h / MAX_HEIGHT_M) * HEIGHT_BINS as f64).floor().clamp(0.0, (HEIGHT_BINS - 1) as f64);
        bands[b as usize] += 1.0;
    }
    let n = voxels.len().max(1) as f64;
    let mut colour = [0.0f64; 3];
    let mut brightness = Vec::with_capacity(voxels.len());
    for (_, v) in voxels {
        let mean = v.rgb_sum.map(|s| s as f64 / f64::from(v.samples.max(1)) / 255.0);
        for (c, m) in colour.iter_mut().zip(mean) {
            *c += m / n;
        }
        brightness.push((mean[0] + mean[1] + mean[2]) / 3.0);
    }
    let mean_brightness = brightness.iter().sum::<f64>() / n;
    let spread = (brightness.iter().map(|b| (b - mean_brightness).powi(2)).sum::<f64>() / n).sqrt();
    let mut features = vec![
        long,
        short,
        top,
        bottom,
        bbox.size_m[2],
        footprint_fill,
        volume_fill,
        (voxels.len() as f64).ln(),
    ];
    features.extend(bands.iter().map(|b| b / n));
    features.extend(colour);
    features.push(spread);
    debug_assert_eq!(features.len(), FEATURE_COUNT);
    features
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::GridFrame;
    use crate::occupancy::CellState;

    fn grid(walls: &[(u32, u32)]) -> OccupancyGrid {
        let frame =
            GridFrame { origin_x_m: 0.0, origin_y_m: 0.0, resolution_m: 0.05, width: 200, height: 200 };
        let mut structure = vec![false; 200 * 200];
        for &(c, r) in walls {
            structure[frame.index(c, r)] = true;
        }
        OccupancyGrid {
            frame,
            cells: vec![CellState::Free; 200 * 200],
            structure,
            floor_z_m: 0.0,
            ceiling_z_m: 2.6,
        }
    }

    fn add_box(acc: &mut CandidateAccumulator, min: [f64; 3], max: [f64; 3], frames: u32) {
        for _ in 0..frames {
            acc.frames += 1;
            let stamp = acc.frames;
            let mut x = min[0];
            while x <= max[0] {
                let mut y = min[1];
                while y <= max[1] {
                    let mut z = min[2];
                    while z <= max[2] {
                        let v = acc.voxels.entry(voxel_key([x, y, z])).or_default();
                        if v.last_frame != stamp {
                            v.last_frame = stamp;
                            v.frames += 1;
                        }
                        v.rgb_sum = [v.rgb_sum[0] + 200, v.rgb_sum[1] + 100, v.rgb_sum[2] + 50];
                        v.samples += 1;
                        z += 0.05;
                    }
                    y += 0.05;
                }
                x += 0.05;
            }
        }
    }

    #[test]
    fn separate_boxes_become_candidates_and_walls_do_not() {
        let mut acc = CandidateAccumulator::new();
        // A bed-sized box and a small table, far apart, seen twice; a wall column (structure cells) and a
        // speck seen once.
        add_box(&mut acc, [1.0, 1.0, 0.07], [2.9, 2.4, 0.55], 2);
        add_box(&mut acc, [5.0, 5.0, 0.07], [5.5, 5.5, 0.75], 2);
        add_box(&mut acc, [7.0, 1.0, 0.07], [7.04, 4.0, 2.55], 2);
        add_box(&mut acc, [8.5, 8.5, 0.5], [8.6, 8.6, 0.6], 1);
        // A wardrobe against another wall, 2.35 m tall: seen above door height too (structure cells), but
        // it stops short of the 2.6 m ceiling, so it stays an object.
        add_box(&mut acc, [3.0, 7.0, 0.07], [4.0, 7.6, 2.35], 2);
        let mut walls: Vec<(u32, u32)> = (20..80).map(|r| (140, r)).collect();
        walls.extend((60..80).flat_map(|c| (140..152).map(move |r| (c, r))));
        let candidates = acc.finish(&grid(&walls));
        assert_eq!(candidates.len(), 3, "{candidates:#?}");
        let wardrobe = candidates.iter().find(|c| c.centroid_m[1] > 6.5).unwrap();
        assert!((wardrobe.features[0] - 1.0).abs() < 0.15, "wardrobe extents {:?}", &wardrobe.features[..2]);
        let bed = candidates.iter().find(|c| c.centroid_m[0] < 3.0).unwrap();
        let f = &bed.features;
        assert_eq!(f.len(), FEATURE_COUNT);
        assert!((f[0] - 1.95).abs() < 0.15 && (f[1] - 1.45).abs() < 0.15, "extents {:?}", &f[..2]);
        assert!((f[2] - 0.6).abs() < 0.1, "top {}", f[2]);
        assert!(f[5] > 0.8, "a solid box fills its footprint: {}", f[5]);
        assert!((f[13] - 200.0 / 255.0).abs() < 1e-6, "red {}", f[13]);
        assert_eq!(bed.color, [200, 100, 50]);
    }

    #[test]
    fn nothing_integrated_gives_no_candidates() {
        let acc = CandidateAccumulator::new();
        assert!(acc.finish(&grid(&[])).is_empty());
        assert!(acc.finish(&OccupancyGrid::empty(0.05)).is_empty());
    }
}
