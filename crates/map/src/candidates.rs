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
use std::hash::{BuildHasherDefault, Hasher};

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

/// A multiply-rotate hash of the voxel keys (the one rustc uses for its own tables): every depth sample of
/// every frame looks its voxel up, and the standard library's SipHash made that lookup most of the
/// candidates' time. Deterministic: the same frames give the same table order.
#[derive(Clone, Copy, Debug, Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        // The product's low bits depend only on the words' low bits, and the table indexes by its low
        // bits: fold the high bits down (the last step of MurmurHash3's finaliser).
        let h = self.0 ^ (self.0 >> 33);
        h.wrapping_mul(0xff51_afd7_ed55_8ccd) ^ (h >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        // A key's three i32 come here as 12 bytes (slices of integers hash their bytes at once).
        let mut words = bytes.chunks_exact(4);
        for word in &mut words {
            self.write_u64(u64::from(u32::from_le_bytes([word[0], word[1], word[2], word[3]])));
        }
        for &b in words.remainder() {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, word: u32) {
        self.write_u64(u64::from(word));
    }

    fn write_i32(&mut self, word: i32) {
        self.write_u32(word as u32);
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }
}

/// Voxels per chunk side (a power of two): 4 x 4 x 4 voxels, 20 cm, 2.5 KB.
const CHUNK_SIDE: i32 = 4;
const CHUNK_VOXELS: usize = (CHUNK_SIDE * CHUNK_SIDE * CHUNK_SIDE) as usize;

/// A block of [`CHUNK_SIDE`]³ voxels, x fastest.
#[derive(Clone, Debug)]
struct Chunk([Voxel; CHUNK_VOXELS]);

impl Default for Chunk {
    fn default() -> Self {
        Self([Voxel::default(); CHUNK_VOXELS])
    }
}

/// A voxel's chunk and its index in it.
fn chunk_of(key: [i32; 3]) -> ([i32; 3], usize) {
    let local = key.map(|k| k.rem_euclid(CHUNK_SIDE) as usize);
    let side = CHUNK_SIDE as usize;
    (key.map(|k| k.div_euclid(CHUNK_SIDE)), local[0] + side * (local[1] + side * local[2]))
}

/// Accumulates the voxel votes.
#[derive(Clone, Debug, Default)]
pub struct CandidateAccumulator {
    /// Voxels in chunks: a frame's samples touch a few hundred chunks, each a small contiguous block, where
    /// one table entry per voxel scattered ~10k lookups a frame over megabytes. Chunks in creation order,
    /// with their keys.
    chunks: Vec<([i32; 3], Box<Chunk>)>,
    /// Chunk key → index in `chunks`.
    index: HashMap<[i32; 3], u32, BuildHasherDefault<KeyHasher>>,
    frames: u32,
    /// The current frame's runs of samples in one voxel (key, colour sum, samples), kept for the allocation.
    runs: Vec<([i32; 3], [u64; 3], u32)>,
}

/// Slots of the direct-mapped cache of chunk lookups that one frame's integration keeps: rows of samples
/// a few pixels apart cross the same few hundred chunks over and over.
const CHUNK_CACHE_SLOTS: usize = 512;

fn chunk_cache_slot(key: [i32; 3]) -> usize {
    let h = (key[0] as u32).wrapping_mul(0x9e37_79b1)
        ^ (key[1] as u32).wrapping_mul(0x85eb_ca77)
        ^ (key[2] as u32).wrapping_mul(0xc2b2_ae3d);
    ((h ^ (h >> 15)) as usize) % CHUNK_CACHE_SLOTS
}

fn voxel_key(p: [f64; 3]) -> [i32; 3] {
    p.map(|v| {
        // `floor` without the libm call (every depth sample of every frame comes here); the same value,
        // saturating and NaN to 0 alike.
        let q = v / CANDIDATE_VOXEL_M;
        let t = q as i32;
        if f64::from(t) > q { t.saturating_sub(1) } else { t }
    })
}

fn voxel_centre(key: [i32; 3]) -> [f64; 3] {
    key.map(|v| (f64::from(v) + 0.5) * CANDIDATE_VOXEL_M)
}

impl CandidateAccumulator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Votes one frame's depth samples (shared with the occupancy grid, [`crate::occupancy::SampleRays::sample`]) with the colour of
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
        // Neighbouring samples of a row mostly share a voxel and a chunk: sum each run of samples in one
        // voxel, then look each run of those in one chunk up once.
        let mut runs = std::mem::take(&mut self.runs);
        runs.clear();
        for s in kept {
            let Some(&colour) = colours.get(s.pixel) else { continue };
            let key = voxel_key(s.point);
            match runs.last_mut() {
                Some((k, rgb, samples)) if *k == key => {
                    for (sum, c) in rgb.iter_mut().zip(colour) {
                        *sum += u64::from(c);
                    }
                    *samples += 1;
                }
                _ => runs.push((key, colour.map(u64::from), 1)),
            }
        }
        let mut cache = [([i32::MIN; 3], u32::MAX); CHUNK_CACHE_SLOTS];
        let mut start = 0;
        while start < runs.len() {
            let (chunk_key, _) = chunk_of(runs[start].0);
            let end = start + runs[start..].iter().take_while(|r| chunk_of(r.0).0 == chunk_key).count();
            let slot = &mut cache[chunk_cache_slot(chunk_key)];
            if slot.0 != chunk_key {
                *slot = (chunk_key, self.chunk_index(chunk_key));
            }
            let chunk = &mut self.chunks[slot.1 as usize].1;
            for &(key, rgb, samples) in &runs[start..end] {
                let voxel = &mut chunk.0[chunk_of(key).1];
                if voxel.last_frame != stamp {
                    voxel.last_frame = stamp;
                    voxel.frames += 1;
                }
                for (sum, c) in voxel.rgb_sum.iter_mut().zip(rgb) {
                    *sum += c;
                }
                voxel.samples += samples;
            }
            start = end;
        }
        self.runs = runs;
    }

    /// The index of a chunk in `chunks`, created empty if new.
    fn chunk_index(&mut self, chunk_key: [i32; 3]) -> u32 {
        let chunks = &mut self.chunks;
        *self.index.entry(chunk_key).or_insert_with(|| {
            chunks.push((chunk_key, Box::default()));
            (chunks.len() - 1) as u32
        })
    }

    /// The voxel of a key, created empty if new.
    #[cfg(test)]
    fn voxel_mut(&mut self, key: [i32; 3]) -> &mut Voxel {
        let (chunk, index) = chunk_of(key);
        let i = self.chunk_index(chunk) as usize;
        &mut self.chunks[i].1.0[index]
    }

    /// Every voxel with samples, with its key.
    fn voxels(&self) -> impl Iterator<Item = ([i32; 3], &Voxel)> {
        self.chunks.iter().flat_map(|(chunk_key, chunk)| {
            let side = CHUNK_SIDE as usize;
            chunk.0.iter().enumerate().filter(|(_, v)| v.samples > 0).map(move |(i, v)| {
                let local = [i % side, (i / side) % side, i / (side * side)];
                let key = [0, 1, 2].map(|a| chunk_key[a] * CHUNK_SIDE + local[a] as i32);
                (key, v)
            })
        })
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
            .voxels()
            .filter(|(key, voxel)| {
                voxel.frames >= MIN_VOXEL_FRAMES && (wall_top.0..=wall_top.1).contains(&voxel_centre(*key)[2])
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
        for (key, voxel) in self.voxels() {
            let [x, y, z] = voxel_centre(key);
            if voxel.frames < MIN_VOXEL_FRAMES || !(MIN_HEIGHT_M..=MAX_HEIGHT_M).contains(&(z - floor)) {
                continue;
            }
            if !near_structure(x, y) {
                kept.insert(key, *voxel);
            } else if !near_ceiling_column.contains(&[key[0], key[1]]) {
                tall.insert(key, *voxel);
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
            filled: Vec::new(),
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
                        let v = acc.voxel_mut(voxel_key([x, y, z]));
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
    fn chunked_voxels_keep_every_key_and_vote_as_one_table_would() {
        // Samples on both sides of zero (negative keys), in runs and scattered, two frames.
        let rgb =
            RgbImage::from_vec(8, 8, (0..64u32).map(|i| [i as u8, (2 * i) as u8, 255 - i as u8]).collect())
                .expect("an 8x8 image");
        let points: Vec<[f64; 3]> = (0..64)
            .map(|i| {
                let i = f64::from(i);
                [-0.31 + 0.013 * i, 0.4 - 0.021 * (i % 7.0), 0.2 + 0.05 * (i % 3.0)]
            })
            .collect();
        let samples: Vec<DepthSample> = points
            .iter()
            .enumerate()
            .map(|(pixel, &point)| DepthSample { pixel, depth_m: 2.0, point })
            .collect();
        let mut acc = CandidateAccumulator::new();
        let mut expected: BTreeMap<[i32; 3], (u32, [u64; 3], u32)> = BTreeMap::new();
        for frame in 1..=2u32 {
            let order: Vec<DepthSample> =
                if frame == 1 { samples.clone() } else { samples.iter().rev().copied().collect() };
            acc.integrate(&order, &rgb, 0.0);
            let mut seen = HashSet::new();
            for s in &order {
                let e = expected.entry(voxel_key(s.point)).or_default();
                if seen.insert(voxel_key(s.point)) {
                    e.0 += 1;
                }
                for (sum, c) in e.1.iter_mut().zip(rgb.data()[s.pixel]) {
                    *sum += u64::from(c);
                }
                e.2 += 1;
            }
        }
        let got: BTreeMap<[i32; 3], (u32, [u64; 3], u32)> =
            acc.voxels().map(|(k, v)| (k, (v.frames, v.rgb_sum, v.samples))).collect();
        assert!(expected.keys().any(|k| k[0] < 0) && expected.keys().any(|k| k[0] > 0));
        assert_eq!(got, expected);
        for key in [[-1, -1, -1], [-4, 3, 0], [-5, -8, 7], [0, 0, 0], [3, 4, -9]] {
            let (chunk, index) = chunk_of(key);
            let side = CHUNK_SIDE as usize;
            let local = [index % side, (index / side) % side, index / (side * side)];
            assert_eq!([0, 1, 2].map(|a| chunk[a] * CHUNK_SIDE + local[a] as i32), key);
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
