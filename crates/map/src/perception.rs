//! Where object observations come from: the [`Perception`] trait and its implementations.
//!
//! - [`OraclePerception`] (named oracle: simulator ground truth) reads the instance-id images of a
//!   generated episode's TUM export and the instance classes of the scene's `annotations.json`.
//! - [`detect_red_box`] / [`MarkedBoxPerception`] are real perception: they find the red rectangle that
//!   GST-Bench draws around the target of `_visual` questions in the pixels of a marked video.
//! - [`locate_marked_target`] fuses a marked video with depth and poses into the target's position.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use gst_core::{ObjectClass, PinholeCamera, Pose3, RgbImage};
use gst_io::{TumSequence, VideoReader};

use crate::objects::{Observation, Region, observation_points};
use crate::{MapConfig, MapError, ObjectMap};

/// Instances with fewer visible pixels than this are not reported by the oracle.
const ORACLE_MIN_PIXELS: usize = 400;
/// Red of the marking after H.264: red channel at least this...
const RED_MIN: u8 = 130;
/// ...and exceeding green and blue by at least this (the 4:2:0 chroma of a 3 px line bleeds into its
/// neighbours, so a pure threshold on (255, 0, 0) would miss it).
const RED_MARGIN: i32 = 90;
/// Width of the band along each side of a candidate box checked for red, pixels.
const RED_BAND_PX: u32 = 4;
/// Fraction of each side's band that must be red.
const RED_SIDE_MIN_FRACTION: f64 = 0.6;
/// Largest fraction of red inside the box (a red object is not a frame).
const RED_INTERIOR_MAX_FRACTION: f64 = 0.35;
/// Smallest side of a detected box, pixels.
const RED_MIN_SIDE_PX: u32 = 10;
/// Thickness of the marking drawn outside the object's box (GST-Bench: 3 px).
const MARK_THICKNESS_PX: u32 = 3;
/// Voxel of the target's candidate surface, metres.
const TARGET_VOXEL_M: f64 = 0.05;
/// A voxel projecting this close outside a box (fraction of the box's longer side) still counts as inside.
const TARGET_BOX_MARGIN: f64 = 0.05;
/// Voxels inside the box in at least this fraction of the views that see them are the target...
const TARGET_VOTE_FRACTION: f64 = 0.8;
/// ...when seen by at least this fraction of the views of the most-seen voxel.
const TARGET_MIN_SEEN_FRACTION: f64 = 0.3;

/// Gives the object observations of a frame.
pub trait Perception {
    /// Observations in frame `frame_index` (its colour image is `rgb`). Frames are asked in increasing order.
    fn observe(&mut self, frame_index: usize, rgb: &RgbImage) -> Result<Vec<Observation>, MapError>;
}

/// No objects.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPerception;

impl Perception for NoPerception {
    fn observe(&mut self, _frame_index: usize, _rgb: &RgbImage) -> Result<Vec<Observation>, MapError> {
        Ok(Vec::new())
    }
}

#[derive(Deserialize)]
struct AnnotationRecord {
    id: u32,
    class: ObjectClass,
}

/// Reads `id` → class from a generated scene's `annotations.json` (other fields are ignored).
pub fn read_instance_classes(path: &Path) -> Result<BTreeMap<u32, ObjectClass>, MapError> {
    let text = std::fs::read_to_string(path).map_err(|source| MapError::Io { path: path.into(), source })?;
    let records: Vec<AnnotationRecord> =
        serde_json::from_str(&text).map_err(|source| MapError::Json { path: path.into(), source })?;
    Ok(records.into_iter().map(|r| (r.id, r.class)).collect())
}

/// ORACLE perception: simulator instance masks and classes (evaluation and upper bounds only).
#[derive(Debug)]
pub struct OraclePerception {
    sequence: TumSequence,
    classes: BTreeMap<u32, ObjectClass>,
}

impl OraclePerception {
    /// `tum_dir` is a generated episode's TUM export (with `instances.txt`); `annotations` the scene's
    /// `annotations.json`.
    pub fn open(tum_dir: &Path, annotations: &Path) -> Result<Self, MapError> {
        let sequence = TumSequence::open(tum_dir, None)?;
        if !sequence.has_instances() {
            return Err(MapError::InvalidInput {
                path: tum_dir.into(),
                message: "no instances.txt: oracle perception needs a generated episode's instance images"
                    .into(),
            });
        }
        Ok(Self { sequence, classes: read_instance_classes(annotations)? })
    }
}

impl Perception for OraclePerception {
    fn observe(&mut self, frame_index: usize, _rgb: &RgbImage) -> Result<Vec<Observation>, MapError> {
        let Some(ids) = self.sequence.instance_image(frame_index)? else { return Ok(Vec::new()) };
        let mut masks: BTreeMap<u16, Vec<u32>> = BTreeMap::new();
        for (i, &id) in ids.data().iter().enumerate() {
            if id != 0 {
                masks.entry(id).or_default().push(i as u32);
            }
        }
        Ok(masks
            .into_iter()
            .filter(|(_, m)| m.len() >= ORACLE_MIN_PIXELS)
            .map(|(id, mask)| Observation {
                class: self.classes.get(&u32::from(id)).copied(),
                label: Some(u32::from(id)),
                region: Region::Mask(mask),
            })
            .collect())
    }
}

/// A box found in an image, inclusive pixel bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PixelBox {
    pub x_min: u32,
    pub y_min: u32,
    pub x_max: u32,
    pub y_max: u32,
}

impl PixelBox {
    pub fn area(&self) -> u64 {
        (u64::from(self.x_max - self.x_min) + 1) * (u64::from(self.y_max - self.y_min) + 1)
    }
}

fn is_red(p: [u8; 3]) -> bool {
    let [r, g, b] = p.map(i32::from);
    p[0] >= RED_MIN && r - g >= RED_MARGIN && r - b >= RED_MARGIN
}

/// Finds the red rectangle GST-Bench draws around a target (3 px, outside the object's box) and returns the
/// object's box (inside the frame), or `None` when the image has no such frame.
///
/// Red pixels are grouped into 8-connected components; a component is a frame when each side of its
/// bounding box is mostly red and its inside mostly not. The largest such component wins.
pub fn detect_red_box(rgb: &RgbImage) -> Option<PixelBox> {
    let (w, h) = (rgb.width(), rgb.height());
    let red: Vec<bool> = rgb.data().iter().map(|p| is_red(*p)).collect();
    let mut seen = vec![false; red.len()];
    let mut best: Option<PixelBox> = None;
    let mut stack = Vec::new();
    for start in 0..red.len() {
        if !red[start] || seen[start] {
            continue;
        }
        seen[start] = true;
        stack.push(start);
        let (mut x0, mut y0, mut x1, mut y1) = (u32::MAX, u32::MAX, 0, 0);
        while let Some(i) = stack.pop() {
            let (x, y) = ((i % w as usize) as u32, (i / w as usize) as u32);
            (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
            for dy in -1i64..=1 {
                for dx in -1i64..=1 {
                    let (nx, ny) = (i64::from(x) + dx, i64::from(y) + dy);
                    if nx < 0 || ny < 0 || nx >= i64::from(w) || ny >= i64::from(h) {
                        continue;
                    }
                    let j = ny as usize * w as usize + nx as usize;
                    if red[j] && !seen[j] {
                        seen[j] = true;
                        stack.push(j);
                    }
                }
            }
        }
        if x1 - x0 + 1 < RED_MIN_SIDE_PX || y1 - y0 + 1 < RED_MIN_SIDE_PX {
            continue;
        }
        let candidate = PixelBox { x_min: x0, y_min: y0, x_max: x1, y_max: y1 };
        if is_frame(&red, w, &candidate) && best.is_none_or(|b| candidate.area() > b.area()) {
            best = Some(candidate);
        }
    }
    // The object's box is inside the frame, except on sides the frame was pushed onto the image edge.
    best.map(|b| {
        let inset = |v: u32, at_edge: bool| if at_edge { v } else { v + MARK_THICKNESS_PX };
        let outset = |v: u32, at_edge: bool| if at_edge { v } else { v.saturating_sub(MARK_THICKNESS_PX) };
        PixelBox {
            x_min: inset(b.x_min, b.x_min == 0),
            y_min: inset(b.y_min, b.y_min == 0),
            x_max: outset(b.x_max, b.x_max + 1 == w).max(inset(b.x_min, b.x_min == 0)),
            y_max: outset(b.y_max, b.y_max + 1 == h).max(inset(b.y_min, b.y_min == 0)),
        }
    })
}

fn is_frame(red: &[bool], w: u32, b: &PixelBox) -> bool {
    let at = |x: u32, y: u32| red[y as usize * w as usize + x as usize];
    let band = RED_BAND_PX.min((b.x_max - b.x_min) / 3).min((b.y_max - b.y_min) / 3).max(1);
    let fraction = |xs: std::ops::RangeInclusive<u32>, ys: std::ops::RangeInclusive<u32>| {
        let (mut n, mut r) = (0usize, 0usize);
        for y in ys {
            for x in xs.clone() {
                n += 1;
                r += usize::from(at(x, y));
            }
        }
        if n == 0 { 0.0 } else { r as f64 / n as f64 }
    };
    // A side is red when, across its band, most positions along it have a red pixel.
    let side = |horizontal: bool, near: bool| {
        let mut hits = 0usize;
        let len = if horizontal { b.x_max - b.x_min + 1 } else { b.y_max - b.y_min + 1 };
        for k in 0..len {
            let any = (0..band).any(|t| {
                let (x, y) = match (horizontal, near) {
                    (true, true) => (b.x_min + k, b.y_min + t),
                    (true, false) => (b.x_min + k, b.y_max - t),
                    (false, true) => (b.x_min + t, b.y_min + k),
                    (false, false) => (b.x_max - t, b.y_min + k),
                };
                at(x, y)
            });
            hits += usize::from(any);
        }
        hits as f64 / f64::from(len) >= RED_SIDE_MIN_FRACTION
    };
    if !(side(true, true) && side(true, false) && side(false, true) && side(false, false)) {
        return false;
    }
    // The interior starts past the marking (the whole band when there is room, else just past the
    // drawn thickness): a small solid red blob has all four sides red and must fail here.
    let inner = [2 * band + 1, MARK_THICKNESS_PX + 1]
        .into_iter()
        .find(|&inner| b.x_max - b.x_min > 2 * inner && b.y_max - b.y_min > 2 * inner);
    let Some(inner) = inner else { return false };
    fraction(b.x_min + inner..=b.x_max - inner, b.y_min + inner..=b.y_max - inner)
        <= RED_INTERIOR_MAX_FRACTION
}

/// Real perception of a `_visual` target: the red box of an object-marked video (frame k of the video is
/// frame k of the exploration), reported as one observation labelled 0 in each frame that shows it.
#[derive(Debug)]
pub struct MarkedBoxPerception {
    reader: VideoReader,
    next_index: usize,
}

impl MarkedBoxPerception {
    pub fn open(marked_video: &Path) -> Result<Self, MapError> {
        Ok(Self { reader: VideoReader::open(marked_video)?, next_index: 0 })
    }

    /// The box in frame `frame_index` of the video (frames before it are skipped; asking for an earlier
    /// frame than the last is an error).
    pub fn box_in_frame(&mut self, frame_index: usize) -> Result<Option<PixelBox>, MapError> {
        if frame_index < self.next_index {
            return Err(MapError::InvalidInput {
                path: self.reader.path().into(),
                message: format!("frame {frame_index} asked after frame {}", self.next_index - 1),
            });
        }
        loop {
            let Some(frame) = self.reader.next_frame()? else { return Ok(None) };
            let index = self.next_index;
            self.next_index += 1;
            if index == frame_index {
                return Ok(detect_red_box(&frame));
            }
        }
    }
}

impl Perception for MarkedBoxPerception {
    fn observe(&mut self, frame_index: usize, _rgb: &RgbImage) -> Result<Vec<Observation>, MapError> {
        Ok(self
            .box_in_frame(frame_index)?
            .map(|b| Observation {
                class: None,
                label: Some(0),
                region: Region::Box { x_min: b.x_min, y_min: b.y_min, x_max: b.x_max, y_max: b.y_max },
            })
            .into_iter()
            .collect())
    }
}

/// Where the marked target is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetEstimate {
    /// Centre of the target in the poses' world frame, metres.
    pub centroid_world_m: [f64; 3],
    /// Frames whose box was found and used.
    pub observations: usize,
    /// Frames in which a box was found at all.
    pub detections: usize,
    /// The frame with the largest box, and that box.
    pub best_frame: usize,
    pub best_box: PixelBox,
    pub marked_video: PathBuf,
}

/// Locates the red-boxed target of a marked video in the world of `world_from_camera` (one pose per frame
/// of `sequence`, `None` where tracking failed), with depth from `sequence` (frame k of the video = frame k
/// of the sequence). `None` when no frame shows a usable box.
///
/// The box of one frame holds the target and whatever is around it. Each frame's nearest dominant depth
/// surface in the box gives candidate voxels; across frames only the target stays inside the boxes, so each
/// voxel is scored by the fraction of the views that see it whose box it projects into (a visual hull by
/// voting), and a box is fitted to the voxels inside nearly all of them.
pub fn locate_marked_target(
    marked_video: &Path,
    sequence: &TumSequence,
    camera: &PinholeCamera,
    world_from_camera: &[Option<Pose3>],
) -> Result<Option<TargetEstimate>, MapError> {
    locate_marked_target_from(marked_video, 0, sequence, camera, world_from_camera)
}

/// [`locate_marked_target`] for a marked video that starts at frame `first_frame` of `sequence` (a clip
/// cut from it): frame k of the video is frame `first_frame + k` of the sequence, and of `world_from_camera`.
pub fn locate_marked_target_from(
    marked_video: &Path,
    first_frame: usize,
    sequence: &TumSequence,
    camera: &PinholeCamera,
    world_from_camera: &[Option<Pose3>],
) -> Result<Option<TargetEstimate>, MapError> {
    let mut reader = VideoReader::open(marked_video)?;
    let mut views: Vec<(usize, PixelBox, Pose3)> = Vec::new();
    let mut voxels: BTreeMap<[i32; 3], u32> = BTreeMap::new();
    let mut detections = 0;
    let mut index = 0usize;
    while let Some(frame) = reader.next_frame()? {
        let k = first_frame + index;
        index += 1;
        let Some(found) = detect_red_box(&frame) else { continue };
        detections += 1;
        let (Some(Some(pose)), true) = (world_from_camera.get(k), k < sequence.len()) else { continue };
        let depth = sequence.frame(k)?.depth;
        // Candidates: the nearest dominant depth surface in the box (not the background behind the target).
        let region =
            Region::Box { x_min: found.x_min, y_min: found.y_min, x_max: found.x_max, y_max: found.y_max };
        let points = observation_points(camera, &depth, pose, &region);
        let samples = points.len();
        for p in &points {
            *voxels.entry([p.x, p.y, p.z].map(|c| (c / TARGET_VOXEL_M).floor() as i32)).or_default() += 1;
        }
        tracing::trace!(frame = k, ?found, samples, "marked box");
        if samples > 0 {
            views.push((k, found, *pose));
        }
    }
    if views.is_empty() || voxels.is_empty() {
        tracing::warn!(video = %marked_video.display(), detections, "no usable red box in the marked video");
        return Ok(None);
    }
    // Vote: in how many views does each voxel centre project inside the box (with a small margin)?
    let cameras: Vec<(Pose3, PixelBox)> = views.iter().map(|(_, b, pose)| (pose.inverse(), *b)).collect();
    let keys: Vec<[i32; 3]> = voxels.keys().copied().collect();
    // Per voxel: views that see its centre in the image, and those of them whose box holds it.
    let votes: Vec<(usize, usize)> = keys
        .iter()
        .map(|key| {
            let centre = nalgebra::Point3::from(key.map(|c| (f64::from(c) + 0.5) * TARGET_VOXEL_M));
            let mut seen = 0;
            let mut inside = 0;
            for (camera_from_world, b) in &cameras {
                let p = camera_from_world.transform_point(&centre);
                let Some(px) = camera.project(&p).filter(|px| camera.contains(px)) else { continue };
                seen += 1;
                let margin = TARGET_BOX_MARGIN * f64::from((b.x_max - b.x_min).max(b.y_max - b.y_min));
                if px.x >= f64::from(b.x_min) - margin
                    && px.x <= f64::from(b.x_max) + margin
                    && px.y >= f64::from(b.y_min) - margin
                    && px.y <= f64::from(b.y_max) + margin
                {
                    inside += 1;
                }
            }
            (seen, inside)
        })
        .collect();
    let most_seen = votes.iter().map(|v| v.0).max().unwrap_or(0);
    let min_seen = ((TARGET_MIN_SEEN_FRACTION * most_seen as f64).ceil() as usize).max(1);
    let keep = |&(seen, inside): &(usize, usize)| {
        seen >= min_seen && inside as f64 >= TARGET_VOTE_FRACTION * seen as f64
    };
    let mut objects = ObjectMap::new(&MapConfig {
        association_radius_m: 1e3,
        min_object_points: 1,
        ..MapConfig::default()
    });
    let kept: Vec<nalgebra::Point3<f64>> = keys
        .iter()
        .zip(&votes)
        .filter(|(_, v)| keep(v))
        .map(|(key, _)| nalgebra::Point3::from(key.map(|c| (f64::from(c) + 0.5) * TARGET_VOXEL_M)))
        .collect();
    tracing::debug!(
        video = %marked_video.display(),
        detections,
        views = views.len(),
        voxels = keys.len(),
        most_seen,
        kept = kept.len(),
        "marked target voxels"
    );
    objects.add_points(views[0].0, &kept);
    let (best_frame, best_box) = views
        .iter()
        .max_by_key(|(k, b, _)| (b.area(), std::cmp::Reverse(*k)))
        .map(|(k, b, _)| (*k, *b))
        .unwrap_or((views[0].0, views[0].1));
    let Some(landmark) = objects.landmarks(1).into_iter().next() else { return Ok(None) };
    Ok(Some(TargetEstimate {
        centroid_world_m: landmark.centroid_m,
        observations: views.len(),
        detections,
        best_frame,
        best_box,
        marked_video: marked_video.into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn textured(w: u32, h: u32) -> RgbImage {
        let data = (0..w * h)
            .map(|i| {
                let (x, y) = (i % w, i / w);
                // Brownish clutter, including a reddish brick colour that must not count as the marking.
                if (x / 16 + y / 16) % 2 == 0 { [170, 90, 70] } else { [90, 120, 140] }
            })
            .collect();
        RgbImage::from_vec(w, h, data).unwrap()
    }

    fn draw_frame(img: &mut RgbImage, b: PixelBox, t: u32, color: [u8; 3]) {
        for y in b.y_min.saturating_sub(t)..=(b.y_max + t).min(img.height() - 1) {
            for x in b.x_min.saturating_sub(t)..=(b.x_max + t).min(img.width() - 1) {
                let inside = x >= b.x_min && x <= b.x_max && y >= b.y_min && y <= b.y_max;
                if !inside {
                    *img.get_mut(x, y).unwrap() = color;
                }
            }
        }
    }

    #[test]
    fn finds_a_drawn_red_box_and_nothing_without_one() {
        let mut img = textured(320, 256);
        assert_eq!(detect_red_box(&img), None);
        let target = PixelBox { x_min: 100, y_min: 60, x_max: 180, y_max: 150 };
        draw_frame(&mut img, target, 3, [255, 0, 0]);
        assert_eq!(detect_red_box(&img), Some(target));
        // H.264-like bleeding: a washed-out red still counts.
        let mut washed = textured(320, 256);
        draw_frame(&mut washed, target, 3, [225, 60, 55]);
        let found = detect_red_box(&washed).unwrap();
        assert!(found.x_min.abs_diff(100) <= 1 && found.y_max.abs_diff(150) <= 1, "{found:?}");
    }

    #[test]
    fn a_red_object_is_not_a_frame() {
        let mut img = textured(200, 200);
        for y in 50..120 {
            for x in 40..110 {
                *img.get_mut(x, y).unwrap() = [230, 20, 20];
            }
        }
        assert_eq!(detect_red_box(&img), None);
    }

    #[test]
    fn a_small_red_blob_is_not_a_frame_but_a_small_frame_is() {
        // A distant red knob: 11x11 solid red, four red sides, no hollow inside.
        let mut img = textured(200, 200);
        for y in 40..51 {
            for x in 60..71 {
                *img.get_mut(x, y).unwrap() = [235, 25, 30];
            }
        }
        assert_eq!(detect_red_box(&img), None);
        // The smallest marking of a far object: a 4x5 box framed by 3 px of red.
        let target = PixelBox { x_min: 120, y_min: 120, x_max: 123, y_max: 124 };
        draw_frame(&mut img, target, 3, [255, 0, 0]);
        assert_eq!(detect_red_box(&img), Some(target));
    }
}

#[cfg(test)]
mod video_probe {
    /// Prints the colours along the top edge of a marked frame (calibration aid; needs a generated split).
    #[test]
    #[ignore = "needs GST_MAP_PROBE=video.mp4:frame:x0:y0:x1 from a generated split"]
    fn probe_marked_video_colours() {
        let Ok(spec) = std::env::var("GST_MAP_PROBE") else { return };
        let parts: Vec<&str> = spec.split(':').collect();
        let n = |i: usize| parts[i].parse::<u32>().unwrap();
        let mut reader = gst_io::VideoReader::open(std::path::Path::new(parts[0])).unwrap();
        let mut frame = None;
        for _ in 0..=n(1) {
            frame = reader.next_frame().unwrap();
        }
        let frame = frame.unwrap();
        for y in n(3).saturating_sub(6)..n(3) + 3 {
            let row: Vec<[u8; 3]> = (n(2)..n(4)).step_by(7).map(|x| *frame.get(x, y).unwrap()).collect();
            eprintln!("y={y}: {row:?}");
        }
        eprintln!("detected: {:?}", super::detect_red_box(&frame));
    }
}
