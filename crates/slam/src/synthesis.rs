//! Matching an image to the map across a wide baseline by view synthesis: the image is warped into the
//! viewpoints of the keyframes that see a pose hypothesis (by the keyframes' depth), and ORB features of the
//! warped images are matched to the keyframes' own features, whose map points give 2D–3D matches.
//!
//! A current view taken off the exploration's path sees its walls and furniture from angles and distances no
//! keyframe did: ORB descriptors are not invariant to that perspective, and guided matching of the map
//! points projected into the image finds too few matches (measured: 20 of 120 generated current views had
//! fewer than 15 even at their true pose, while the keyframes, warped into it, correlated with the image).
//! Warping the image the other way round undoes the perspective: in the keyframe's viewpoint the warped
//! image looks like the keyframe, and its features match the keyframe's. Every feature of a warped image
//! came from a known pixel of the image (the warp's source), so a match gives a 2D–3D pair in the image
//! itself, however far off the hypothesis was.
//!
//! A hypothesis a few degrees off shifts a warped image against its keyframe by tens of pixels, about the
//! same everywhere: the shift is found first by voting over the displacements of descriptor matches, and
//! matches are then searched near their shifted position. A second pass warps again from the pose the first
//! one gave, and matches within a few pixels.

use nalgebra::{Isometry3, Point3};

use gst_core::{PinholeCamera, RgbImage};

use crate::SlamError;
use crate::features::{Features, OrbExtractor, hamming};
use crate::map_file::{SlamMap, StoredKeyframe};
use crate::optimize::{Observation, optimize_pose, pnp_ransac};
use crate::thumbnail::THUMBNAIL_STEP;

/// Largest descriptor distance of a match between a warped image's feature and a keyframe's.
const MAX_DISTANCE: u32 = 50;
/// Displacements voted over in the first pass: within this radius, in bins of this side (pixels).
const SHIFT_RADIUS_PX: f32 = 96.0;
const SHIFT_BIN_PX: f32 = 8.0;
/// Largest descriptor distance of a match that votes for a displacement.
const VOTE_DISTANCE: u32 = 40;
/// Search radius around the expected position (at octave 0): after the voted shift, and in the second pass.
const FIRST_RADIUS_PX: f32 = 12.0;
const SECOND_RADIUS_PX: f32 = 8.0;
/// Smallest share of a keyframe's pixels the warp must fill for its image to be matched.
const MIN_FILLED: f64 = 0.1;
/// Keypoints are detected this many pixels inside the warp's filled region (their patches stay inside it).
const MASK_MARGIN_PX: usize = 8;
/// Neighbouring depth samples closer than this ratio are interpolated; across larger steps (occluding
/// edges) the nearest sample is taken.
const DEPTH_STEP_RATIO: f32 = 1.1;

/// A grey-level image at full resolution.
#[derive(Clone, Debug)]
pub struct GrayImage {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

impl GrayImage {
    /// Luma of a colour image (the weights ORB extraction uses).
    pub fn from_rgb(rgb: &RgbImage) -> Self {
        let pixels = rgb
            .data()
            .iter()
            .map(|p| ((77 * u32::from(p[0]) + 150 * u32::from(p[1]) + 29 * u32::from(p[2]) + 128) >> 8) as u8)
            .collect();
        GrayImage { width: rgb.width(), height: rgb.height(), pixels }
    }

    /// Bilinear sample at (u, v); `None` outside the image.
    fn sample(&self, u: f64, v: f64) -> Option<f32> {
        let (w, h) = (self.width as usize, self.height as usize);
        if !(u >= 0.0 && v >= 0.0 && u < (w - 1) as f64 && v < (h - 1) as f64) {
            return None;
        }
        let (x, y) = (u.floor() as usize, v.floor() as usize);
        let (fx, fy) = ((u - x as f64) as f32, (v - y as f64) as f32);
        let at = |x: usize, y: usize| f32::from(self.pixels[y * w + x]);
        let top = at(x, y) * (1.0 - fx) + at(x + 1, y) * fx;
        let bottom = at(x, y + 1) * (1.0 - fx) + at(x + 1, y + 1) * fx;
        Some(top * (1.0 - fy) + bottom * fy)
    }
}

/// 2D–3D matches of an image found by view synthesis, as observations for pose optimisation (pixels in the
/// image, map points in the world), with the map point of each.
#[derive(Clone, Debug, Default)]
pub struct SynthesizedMatches {
    pub observations: Vec<Observation>,
    pub points: Vec<u32>,
}

/// A match of a map point: descriptor distance, image pixel, pyramid level.
type Candidate = (u32, [f32; 2], u8);

/// One keyframe's warp of the image: per keyframe pixel, the image pixel it was sampled from.
struct Warp {
    gray: Vec<u8>,
    mask: Vec<u8>,
    /// Image pixel of each keyframe pixel (meaningful where the mask is set).
    source: Vec<[f32; 2]>,
}

/// Depth of a keyframe at full-resolution pixel (x, y), from its thumbnail's depth: bilinear between
/// samples of one surface, the nearest sample across an occluding edge; `None` where none is valid.
fn keyframe_depth(keyframe: &StoredKeyframe, x: f64, y: f64) -> Option<f32> {
    let thumbnail = &keyframe.thumbnail;
    let (w, h) = (thumbnail.camera.width as usize, thumbnail.camera.height as usize);
    if thumbnail.depth_m.len() != w * h || w < 2 || h < 2 {
        return None;
    }
    let s = f64::from(THUMBNAIL_STEP);
    let offset = (s - 1.0) / 2.0;
    let (tu, tv) =
        (((x - offset) / s).clamp(0.0, (w - 1) as f64), ((y - offset) / s).clamp(0.0, (h - 1) as f64));
    let (i, j) = ((tu.floor() as usize).min(w - 2), (tv.floor() as usize).min(h - 2));
    let (fx, fy) = ((tu - i as f64) as f32, (tv - j as f64) as f32);
    let d = [
        thumbnail.depth_m[j * w + i],
        thumbnail.depth_m[j * w + i + 1],
        thumbnail.depth_m[(j + 1) * w + i],
        thumbnail.depth_m[(j + 1) * w + i + 1],
    ];
    let weights = [(1.0 - fx) * (1.0 - fy), fx * (1.0 - fy), (1.0 - fx) * fy, fx * fy];
    let (lo, hi) = d.iter().fold((f32::INFINITY, 0.0f32), |(lo, hi), &z| (lo.min(z), hi.max(z)));
    if lo > 0.0 && hi <= lo * DEPTH_STEP_RATIO {
        return Some(d.iter().zip(&weights).map(|(z, w)| z * w).sum());
    }
    // The nearest valid sample (by weight).
    d.iter().zip(&weights).filter(|(z, _)| **z > 0.0).max_by(|a, b| a.1.total_cmp(b.1)).map(|(z, _)| *z)
}

/// Warps `image` (seen from `world_from_camera`) into `keyframe`'s viewpoint; `None` when too little of the
/// keyframe's image is filled.
fn warp_into(
    camera: &PinholeCamera,
    image: &GrayImage,
    world_from_camera: &Isometry3<f64>,
    keyframe: &StoredKeyframe,
) -> Option<Warp> {
    let (w, h) = (camera.width as usize, camera.height as usize);
    let camera_from_keyframe = world_from_camera.inverse() * keyframe.world_from_camera;
    let mut warp = Warp { gray: vec![0; w * h], mask: vec![0; w * h], source: vec![[0.0; 2]; w * h] };
    let mut filled = 0usize;
    for y in 0..h {
        for x in 0..w {
            let Some(z) = keyframe_depth(keyframe, x as f64, y as f64) else { continue };
            let z = f64::from(z);
            let p = Point3::new(
                (x as f64 - camera.cx) / camera.fx * z,
                (y as f64 - camera.cy) / camera.fy * z,
                z,
            );
            let q = camera_from_keyframe * p;
            if q.z < 0.1 {
                continue;
            }
            let (u, v) = (camera.fx * q.x / q.z + camera.cx, camera.fy * q.y / q.z + camera.cy);
            let Some(value) = image.sample(u, v) else { continue };
            let k = y * w + x;
            warp.gray[k] = value.round() as u8;
            warp.mask[k] = 1;
            warp.source[k] = [u as f32, v as f32];
            filled += 1;
        }
    }
    if (filled as f64) < MIN_FILLED * (w * h) as f64 {
        return None;
    }
    warp.mask = eroded(&warp.mask, w, h, MASK_MARGIN_PX);
    Some(warp)
}

/// 255 where every pixel within `margin` (a square) of a pixel is set in `mask`, else 0.
fn eroded(mask: &[u8], w: usize, h: usize, margin: usize) -> Vec<u8> {
    // Integral image of unset pixels.
    let mut integral = vec![0u32; (w + 1) * (h + 1)];
    for y in 0..h {
        let mut row = 0u32;
        for x in 0..w {
            row += u32::from(mask[y * w + x] == 0);
            integral[(y + 1) * (w + 1) + x + 1] = integral[y * (w + 1) + x + 1] + row;
        }
    }
    let mut out = vec![0u8; w * h];
    for y in margin..h.saturating_sub(margin) {
        for x in margin..w.saturating_sub(margin) {
            let (x0, x1, y0, y1) = (x - margin, x + margin + 1, y - margin, y + margin + 1);
            let unset = integral[y1 * (w + 1) + x1] + integral[y0 * (w + 1) + x0]
                - integral[y0 * (w + 1) + x1]
                - integral[y1 * (w + 1) + x0];
            if unset == 0 {
                out[y * w + x] = 255;
            }
        }
    }
    out
}

/// The displacement (keyframe feature minus warped feature) most descriptor matches agree on, pixels.
fn voted_shift(warped: &Features, keyframe: &StoredKeyframe) -> Option<(f32, f32)> {
    let bins = (2.0 * SHIFT_RADIUS_PX / SHIFT_BIN_PX).ceil() as usize + 1;
    let mut votes = vec![0u32; bins * bins];
    let mut near = Vec::new();
    let bin = |d: f32| ((d + SHIFT_RADIUS_PX) / SHIFT_BIN_PX).round() as usize;
    for (j, keypoint) in warped.keypoints.iter().enumerate() {
        keyframe.features.within(keypoint.u, keypoint.v, SHIFT_RADIUS_PX, &mut near);
        for &i in &near {
            if keyframe.points[i as usize].is_none()
                || hamming(&warped.descriptors[j], &keyframe.features.descriptors[i as usize]) > VOTE_DISTANCE
            {
                continue;
            }
            let other = &keyframe.features.keypoints[i as usize];
            let (bx, by) = (bin(other.u - keypoint.u), bin(other.v - keypoint.v));
            if bx < bins && by < bins {
                votes[by * bins + bx] += 1;
            }
        }
    }
    // The bin whose 3x3 neighbourhood has the most votes.
    let mut best: Option<(u32, usize, usize)> = None;
    for by in 1..bins - 1 {
        for bx in 1..bins - 1 {
            let mut sum = 0;
            for dy in 0..3 {
                for dx in 0..3 {
                    sum += votes[(by + dy - 1) * bins + bx + dx - 1];
                }
            }
            if best.is_none_or(|b| sum > b.0) {
                best = Some((sum, bx, by));
            }
        }
    }
    let (sum, bx, by) = best?;
    (sum > 0)
        .then_some((bx as f32 * SHIFT_BIN_PX - SHIFT_RADIUS_PX, by as f32 * SHIFT_BIN_PX - SHIFT_RADIUS_PX))
}

/// Matches of `image` at the hypothesis `world_from_camera` through the warps into `keyframes` (indices
/// into the map): per map point, the closest descriptor. `shifted`: vote for a common displacement first
/// (a hypothesis degrees off); otherwise matches are searched near where the warp puts them.
pub fn synthesized_matches(
    map: &SlamMap,
    orb: &mut OrbExtractor,
    image: &GrayImage,
    world_from_camera: &Isometry3<f64>,
    keyframes: &[usize],
    shifted: bool,
) -> Result<SynthesizedMatches, SlamError> {
    let camera = &map.camera;
    let scale = orb.config().scale_factor;
    // Per map point: (distance, image pixel, octave) of its best match.
    let mut best: std::collections::HashMap<u32, Candidate> = std::collections::HashMap::new();
    let mut near = Vec::new();
    for &k in keyframes {
        let Some(keyframe) = map.keyframes.get(k) else { continue };
        let Some(warp) = warp_into(camera, image, world_from_camera, keyframe) else { continue };
        let warped = orb.extract_gray(&warp.gray, camera.width, camera.height, Some(&warp.mask))?;
        let (du, dv) =
            if shifted { voted_shift(&warped, keyframe).unwrap_or((0.0, 0.0)) } else { (0.0, 0.0) };
        let radius = if shifted { FIRST_RADIUS_PX } else { SECOND_RADIUS_PX };
        for (j, keypoint) in warped.keypoints.iter().enumerate() {
            let r = radius * scale.powi(i32::from(keypoint.octave));
            keyframe.features.within(keypoint.u + du, keypoint.v + dv, r, &mut near);
            let found = near
                .iter()
                .filter_map(|&i| {
                    let point = keyframe.points[i as usize]?;
                    Some((hamming(&warped.descriptors[j], &keyframe.features.descriptors[i as usize]), point))
                })
                .min();
            let Some((distance, point)) = found.filter(|(d, _)| *d <= MAX_DISTANCE) else { continue };
            let (x, y) = (keypoint.u.round() as usize, keypoint.v.round() as usize);
            let Some(source) = warp.source.get(y * camera.width as usize + x) else { continue };
            let entry = best.entry(point).or_insert((u32::MAX, [0.0; 2], 0));
            if distance < entry.0 {
                *entry = (distance, *source, keypoint.octave);
            }
        }
    }
    let mut matches: Vec<(u32, Candidate)> = best.into_iter().collect();
    matches.sort_unstable_by_key(|(p, _)| *p);
    let mut out = SynthesizedMatches::default();
    for (point, (_, source, octave)) in matches {
        out.observations.push(Observation {
            point_world: map.points[point as usize].position,
            u: f64::from(source[0]),
            v: f64::from(source[1]),
            depth_m: None,
            sigma_px: f64::from(scale).powi(i32::from(octave)),
        });
        out.points.push(point);
    }
    Ok(out)
}

/// A pose from synthesized matches: PnP-RANSAC, then motion-only optimisation; (camera_from_world, inliers,
/// matches). `None` with fewer than `min_inliers`.
pub fn pose_from(
    camera: &PinholeCamera,
    matches: &SynthesizedMatches,
    start: Option<Isometry3<f64>>,
    min_inliers: usize,
) -> Result<Option<(Isometry3<f64>, usize, usize)>, SlamError> {
    let observations = &matches.observations;
    let (mut pose, mut inlier) = match start {
        Some(start) => (start, vec![true; observations.len()]),
        None => {
            let points: Vec<Point3<f64>> = observations.iter().map(|o| o.point_world).collect();
            let pixels: Vec<[f64; 2]> = observations.iter().map(|o| [o.u, o.v]).collect();
            let Some((pose, mask)) = pnp_ransac(camera, &points, &pixels, 6.0, min_inliers)? else {
                return Ok(None);
            };
            (pose, mask)
        }
    };
    if observations.len() < min_inliers {
        return Ok(None);
    }
    let inliers = optimize_pose(camera, &mut pose, observations, &mut inlier);
    Ok((inliers >= min_inliers).then_some((pose, inliers, observations.len())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thumbnail::Thumbnail;

    fn keyframe(
        camera: &PinholeCamera,
        world_from_camera: Isometry3<f64>,
        depth: impl Fn(usize) -> f32,
    ) -> StoredKeyframe {
        let small = Thumbnail::camera_for(camera);
        let n = (small.width * small.height) as usize;
        StoredKeyframe {
            id: 0,
            frame_index: 0,
            timestamp_s: 0.0,
            world_from_camera,
            features: Features::from_parts(Vec::new(), Vec::new(), camera.width, camera.height),
            points: Vec::new(),
            thumbnail: Thumbnail {
                camera: small,
                gray: vec![0; n],
                depth_m: (0..n).map(|k| depth(k % small.width as usize)).collect(),
            },
        }
    }

    #[test]
    fn erosion_keeps_pixels_whose_whole_neighbourhood_is_set() {
        let (w, h) = (12, 10);
        let mut mask = vec![1u8; w * h];
        mask[5 * w + 6] = 0;
        let out = eroded(&mask, w, h, 2);
        // Within 2 pixels of the hole or of the border: unset.
        assert_eq!(out[5 * w + 3], 255);
        assert_eq!(out[5 * w + 4], 0);
        assert_eq!(out[3 * w + 6], 0);
        assert_eq!(out[2 * w + 6], 255);
        assert_eq!(out[5 * w + 1], 0);
        assert_eq!(out[5 * w + 9], 255);
        assert_eq!(out[5 * w + 10], 0);
        assert_eq!(out.iter().filter(|&&m| m == 255).count(), (w - 4) * (h - 4) - 25);
    }

    #[test]
    fn depth_is_interpolated_on_a_surface_and_not_across_an_edge() {
        let camera = PinholeCamera::gst_benchmark();
        let small = Thumbnail::camera_for(&camera).width as usize;
        // A ramp over the left half of the thumbnail, a far wall from column `small / 2` on.
        let ramp = |i: usize| if i < small / 2 { 2.0 + 0.01 * i as f32 } else { 6.0 };
        let kf = keyframe(&camera, Isometry3::identity(), ramp);
        // Full-image x = 4 i + 1.5 is thumbnail column i; halfway between columns 10 and 11.
        let z = keyframe_depth(&kf, 4.0 * 10.5 + 1.5, 40.0).expect("depth");
        assert!((z - 2.105).abs() < 1e-4, "{z}");
        // Between the last ramp column and the wall: the nearer sample by weight, never a blend.
        let edge = (small / 2) as f64 - 1.0;
        let near = keyframe_depth(&kf, 4.0 * (edge + 0.25) + 1.5, 40.0).expect("depth");
        let far = keyframe_depth(&kf, 4.0 * (edge + 0.75) + 1.5, 40.0).expect("depth");
        assert!((near - ramp(small / 2 - 1)).abs() < 1e-6 && (far - 6.0).abs() < 1e-6, "{near} {far}");
        // No depth: none.
        let empty = keyframe(&camera, Isometry3::identity(), |_| 0.0);
        assert!(keyframe_depth(&empty, 100.0, 100.0).is_none());
    }

    #[test]
    fn a_wall_warped_into_a_keyframe_to_the_side_is_shifted_by_its_parallax() {
        let camera = PinholeCamera::gst_benchmark();
        let (w, h) = (camera.width as usize, camera.height as usize);
        // The image: vertical stripes of a fronto-parallel wall 2 m ahead, seen from the origin.
        let stripes = |x: f64| (128.0 + 100.0 * (x * 0.15).sin()) as f32;
        let image = GrayImage {
            width: camera.width,
            height: camera.height,
            pixels: (0..w * h).map(|k| stripes((k % w) as f64).round() as u8).collect(),
        };
        // A keyframe 0.3 m to the right sees the same wall 2 m ahead: its pixel x shows the image's
        // pixel x + fx * 0.3 / 2.
        let kf = keyframe(&camera, Isometry3::translation(0.3, 0.0, 0.0), |_| 2.0);
        let warp = warp_into(&camera, &image, &Isometry3::identity(), &kf).expect("warp");
        let shift = camera.fx * 0.3 / 2.0;
        let mut checked = 0;
        for y in (50..h - 50).step_by(37) {
            for x in (20..w - 20).step_by(13) {
                let k = y * w + x;
                if warp.mask[k] == 0 {
                    continue;
                }
                let [u, v] = warp.source[k];
                assert!(
                    (f64::from(u) - (x as f64 + shift)).abs() < 1e-3
                        && (f64::from(v) - y as f64).abs() < 1e-3
                );
                let expected = image.sample(x as f64 + shift, y as f64).expect("inside");
                assert!((f32::from(warp.gray[k]) - expected).abs() <= 0.5, "{} {expected}", warp.gray[k]);
                checked += 1;
            }
        }
        assert!(checked > 100, "{checked}");
        // Its right edge shows what the image never saw: unfilled.
        assert_eq!(warp.mask[h / 2 * w + w - 1 - MASK_MARGIN_PX], 0);
    }
}
