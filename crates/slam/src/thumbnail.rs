//! Small grey-level images with depth (1/4 resolution) kept by every keyframe, and the photometric check of
//! a camera pose they allow: the keyframes near the pose are warped into it by their depth and compared with
//! the image by normalised cross-correlation.
//!
//! Relocalisation needs the check where ORB matching alone is fooled: procedural wallpaper and tiles repeat,
//! so the matches of a wall seen from a keyframe metres away can agree on a pose shifted by a whole number
//! of texture periods (measured: 3 of 18 current views placed 1.6–4.8 m off with the heading right). The
//! rest of the view (a door, furniture, the end of a corridor) does not repeat, and the warped keyframes
//! show it where the true pose puts it.

use nalgebra::{Isometry3, Point3};
use serde::Serialize;

use gst_core::{DepthImage, PinholeCamera, RgbImage};

/// Pixels of the full image per thumbnail pixel, in each direction.
pub const THUMBNAIL_STEP: u32 = 4;

/// Largest splat of a warped keyframe pixel, pixels per side.
const MAX_SPLAT: f64 = 4.0;

/// A grey-level image at 1/[`THUMBNAIL_STEP`] resolution (block means) with depth sampled at the blocks'
/// centres, and the camera of that resolution.
#[derive(Clone, Debug, PartialEq)]
pub struct Thumbnail {
    pub camera: PinholeCamera,
    pub gray: Vec<u8>,
    /// Metres, 0 where missing; empty for an image without depth.
    pub depth_m: Vec<f32>,
}

impl Thumbnail {
    /// The camera of a thumbnail of images from `camera`: pixel (i, j) is the block whose centre is full-image
    /// pixel (4i + 1.5, 4j + 1.5).
    pub fn camera_for(camera: &PinholeCamera) -> PinholeCamera {
        let s = f64::from(THUMBNAIL_STEP);
        let offset = (s - 1.0) / 2.0;
        PinholeCamera {
            width: camera.width / THUMBNAIL_STEP,
            height: camera.height / THUMBNAIL_STEP,
            fx: camera.fx / s,
            fy: camera.fy / s,
            cx: (camera.cx - offset) / s,
            cy: (camera.cy - offset) / s,
            distortion: Default::default(),
        }
    }

    /// The thumbnail of an image (and its depth, kept where it lies in `range` metres).
    pub fn new(
        camera: &PinholeCamera,
        rgb: &RgbImage,
        depth: Option<&DepthImage>,
        range: (f32, f32),
    ) -> Self {
        let small = Self::camera_for(camera);
        let (w, h) = (small.width as usize, small.height as usize);
        let s = THUMBNAIL_STEP as usize;
        let full_width = rgb.width() as usize;
        let data = rgb.data();
        let mut gray = Vec::with_capacity(w * h);
        for j in 0..h {
            for i in 0..w {
                let mut sum = 0u32;
                for y in j * s..(j + 1) * s {
                    for x in i * s..(i + 1) * s {
                        let [r, g, b] = data.get(y * full_width + x).copied().unwrap_or([0, 0, 0]);
                        sum += 77 * u32::from(r) + 150 * u32::from(g) + 29 * u32::from(b);
                    }
                }
                gray.push((sum / (256 * (s * s) as u32)) as u8);
            }
        }
        let depth_m = match depth {
            Some(depth) => (0..h)
                .flat_map(|j| (0..w).map(move |i| (i, j)))
                .map(|(i, j)| {
                    let d = depth.get((i * s + s / 2) as u32, (j * s + s / 2) as u32).copied().unwrap_or(0.0);
                    if d.is_finite() && d >= range.0 && d <= range.1 { d } else { 0.0 }
                })
                .collect(),
            None => Vec::new(),
        };
        Thumbnail { camera: small, gray, depth_m }
    }
}

/// How well keyframe thumbnails warped into a pose explain an image's thumbnail.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhotometricCheck {
    /// Normalised cross-correlation over the pixels the keyframes cover, in [-1, 1].
    pub ncc: f64,
    /// Share of the image's pixels covered.
    pub coverage: f64,
}

/// The grey levels `keyframes` predict in the camera `camera` at `camera_from_world`, `None` where none
/// reaches (z-buffered, nearest pixel). A surface this camera would see from the other side than the
/// keyframe did (rays more than 90° apart: a wall's far face, seen from the next room) predicts nothing,
/// but it still hides what lies behind it: left out, the rooms beyond an interior wall that the keyframes
/// never faced from this side would show through it.
pub fn warp<'a>(
    camera: &PinholeCamera,
    camera_from_world: &Isometry3<f64>,
    keyframes: impl IntoIterator<Item = (&'a Thumbnail, &'a Isometry3<f64>)>,
) -> Vec<Option<u8>> {
    // Rounding is a function call on the x86-64 baseline and one instruction with SSE4.1 (same results).
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.1") {
        #[allow(unsafe_code)]
        // SAFETY: the CPU has SSE4.1, checked just above.
        return unsafe { warp_sse41(camera, camera_from_world, keyframes) };
    }
    warp_portable(camera, camera_from_world, keyframes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.1")]
fn warp_sse41<'a>(
    camera: &PinholeCamera,
    camera_from_world: &Isometry3<f64>,
    keyframes: impl IntoIterator<Item = (&'a Thumbnail, &'a Isometry3<f64>)>,
) -> Vec<Option<u8>> {
    warp_portable(camera, camera_from_world, keyframes)
}

#[inline(always)]
fn warp_portable<'a>(
    camera: &PinholeCamera,
    camera_from_world: &Isometry3<f64>,
    keyframes: impl IntoIterator<Item = (&'a Thumbnail, &'a Isometry3<f64>)>,
) -> Vec<Option<u8>> {
    let (w, h) = (camera.width as usize, camera.height as usize);
    let mut z_buffer = vec![f32::INFINITY; w * h];
    // A grey level, or HIDDEN where the nearest surface was seen from its other side.
    const HIDDEN: u16 = 256;
    let mut predicted = vec![0u16; w * h];
    for (thumbnail, world_from_keyframe) in keyframes {
        let kc = &thumbnail.camera;
        let query_from_keyframe = camera_from_world * world_from_keyframe;
        let centre = Point3::from(query_from_keyframe.translation.vector);
        let (kw, kh) = (kc.width as usize, kc.height as usize);
        if thumbnail.depth_m.len() != kw * kh || thumbnail.gray.len() != kw * kh {
            continue;
        }
        for j in 0..kh {
            for i in 0..kw {
                let d = f64::from(thumbnail.depth_m[j * kw + i]);
                if d <= 0.0 {
                    continue;
                }
                let p = Point3::new((i as f64 - kc.cx) / kc.fx * d, (j as f64 - kc.cy) / kc.fy * d, d);
                let q = query_from_keyframe * p;
                if q.z < 0.05 {
                    continue;
                }
                // A surface seen from its other side (rays from the two cameras more than 90° apart): its
                // appearance is of the far face, but it occludes all the same.
                let facing = (-q.coords).dot(&(centre - q)) >= 0.0;
                // A keyframe pixel covers about (its depth / the depth here) pixels of this camera in each
                // direction: splatted so, a surface seen closer than from the keyframe has no holes for
                // the background to show through.
                let size = (d / q.z * camera.fx / kc.fx).ceil().clamp(1.0, MAX_SPLAT);
                let u0 = (camera.fx * q.x / q.z + camera.cx - (size - 1.0) / 2.0).round();
                let v0 = (camera.fy * q.y / q.z + camera.cy - (size - 1.0) / 2.0).round();
                if u0 + size <= 0.0 || v0 + size <= 0.0 || u0 >= w as f64 || v0 >= h as f64 {
                    continue;
                }
                let z = q.z as f32;
                let gray = if facing { u16::from(thumbnail.gray[j * kw + i]) } else { HIDDEN };
                let (u0, v0, size) = (u0 as i64, v0 as i64, size as i64);
                for v in v0.max(0)..(v0 + size).min(h as i64) {
                    for u in u0.max(0)..(u0 + size).min(w as i64) {
                        let k = v as usize * w + u as usize;
                        if z < z_buffer[k] {
                            z_buffer[k] = z;
                            predicted[k] = gray;
                        }
                    }
                }
            }
        }
    }
    z_buffer
        .iter()
        .zip(predicted)
        .map(|(z, p)| if z.is_finite() && p < HIDDEN { Some(p as u8) } else { None })
        .collect()
}

/// Warps `keyframes` (thumbnail and `world_from_camera`) into the camera at `camera_from_world` (z-buffered,
/// nearest pixel) and compares the result with `query`. `None` when fewer than 100 pixels are covered or
/// either side is flat.
pub fn photometric_check<'a>(
    query: &Thumbnail,
    camera_from_world: &Isometry3<f64>,
    keyframes: impl IntoIterator<Item = (&'a Thumbnail, &'a Isometry3<f64>)>,
) -> Option<PhotometricCheck> {
    let predicted = warp(&query.camera, camera_from_world, keyframes);
    let (w, h) = (query.camera.width as usize, query.camera.height as usize);
    if predicted.len() != w * h || query.gray.len() != w * h {
        return None;
    }
    let mut acc = Acc::default();
    for (a, b) in predicted.iter().zip(&query.gray) {
        if let Some(a) = a {
            acc.add(f64::from(*a), f64::from(*b));
        }
    }
    if acc.n < 100 {
        return None;
    }
    Some(PhotometricCheck { ncc: acc.ncc(1.0)?, coverage: acc.n as f64 / (w * h) as f64 })
}

/// Further appearance scores of a prediction against an image: diagnostics for choosing a verifier
/// (`gst bench reloc` with `GST_DEBUG_JUDGED=FILE` logs them for every judged hypothesis). Local and
/// gradient correlations ignore how bright one part of the view is against another, which the global
/// correlation of [`photometric_check`] weighs most.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct AppearanceScores {
    /// Mean correlation over 8x8 blocks covered at least 5/8 and textured on both sides.
    pub patch_mean: f64,
    /// Share of those blocks correlating at least 0.5.
    pub patch_agree: f64,
    /// Number of such blocks.
    pub patches: usize,
    /// Correlation of the gradient fields (central differences) where the prediction has all four neighbours.
    pub gradient: f64,
    /// Correlation after a 3x3 box blur of both sides (over covered pixels).
    pub blurred: f64,
}

/// [`AppearanceScores`] of `predicted` (a [`warp`]) against `query`.
pub fn appearance_scores(query: &Thumbnail, predicted: &[Option<u8>]) -> AppearanceScores {
    let (w, h) = (query.camera.width as usize, query.camera.height as usize);
    let mut scores = AppearanceScores::default();
    if predicted.len() != w * h || query.gray.len() != w * h {
        return scores;
    }
    let q = |x: usize, y: usize| f64::from(query.gray[y * w + x]);
    let p = |x: usize, y: usize| predicted[y * w + x].map(f64::from);
    // Blocks.
    let (mut sum, mut agree) = (0.0, 0usize);
    for by in 0..h / 8 {
        for bx in 0..w / 8 {
            let mut acc = Acc::default();
            for y in by * 8..by * 8 + 8 {
                for x in bx * 8..bx * 8 + 8 {
                    if let Some(a) = p(x, y) {
                        acc.add(a, q(x, y));
                    }
                }
            }
            if acc.n >= 40
                && let Some(r) = acc.ncc(9.0)
            {
                scores.patches += 1;
                sum += r;
                agree += usize::from(r >= 0.5);
            }
        }
    }
    if scores.patches > 0 {
        scores.patch_mean = sum / scores.patches as f64;
        scores.patch_agree = agree as f64 / scores.patches as f64;
    }
    // Gradients.
    let (mut gab, mut gaa, mut gbb) = (0.0, 0.0, 0.0);
    let mut blur = Acc::default();
    for y in 1..h.saturating_sub(1) {
        for x in 1..w.saturating_sub(1) {
            let (Some(l), Some(r), Some(u), Some(d), Some(_)) =
                (p(x - 1, y), p(x + 1, y), p(x, y - 1), p(x, y + 1), p(x, y))
            else {
                continue;
            };
            let (ax, ay) = (r - l, d - u);
            let (bx, by) = (q(x + 1, y) - q(x - 1, y), q(x, y + 1) - q(x, y - 1));
            gab += ax * bx + ay * by;
            gaa += ax * ax + ay * ay;
            gbb += bx * bx + by * by;
            let (mut pa, mut pb, mut n) = (0.0, 0.0, 0.0);
            for yy in y - 1..=y + 1 {
                for xx in x - 1..=x + 1 {
                    if let Some(a) = p(xx, yy) {
                        pa += a;
                        pb += q(xx, yy);
                        n += 1.0;
                    }
                }
            }
            blur.add(pa / n, pb / n);
        }
    }
    if gaa > 0.0 && gbb > 0.0 {
        scores.gradient = gab / (gaa * gbb).sqrt();
    }
    scores.blurred = blur.ncc(1.0).unwrap_or(0.0);
    scores
}

/// Sums for the normalised cross-correlation of pairs (a, b).
#[derive(Default)]
struct Acc {
    n: usize,
    sa: f64,
    sb: f64,
    saa: f64,
    sbb: f64,
    sab: f64,
}

impl Acc {
    fn add(&mut self, a: f64, b: f64) {
        self.n += 1;
        self.sa += a;
        self.sb += b;
        self.saa += a * a;
        self.sbb += b * b;
        self.sab += a * b;
    }

    /// The correlation, `None` when empty or when either side's variance is below `min_variance`.
    fn ncc(&self, min_variance: f64) -> Option<f64> {
        let n = self.n as f64;
        if self.n == 0 {
            return None;
        }
        let cov = self.sab / n - (self.sa / n) * (self.sb / n);
        let (va, vb) = (self.saa / n - (self.sa / n).powi(2), self.sbb / n - (self.sb / n).powi(2));
        (va >= min_variance && vb >= min_variance).then(|| cov / (va * vb).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gst_core::Image;
    use nalgebra::{Translation3, UnitQuaternion, Vector3};

    /// A textured wall 3 m in front of a camera at the origin (world = camera frame): rgb and depth.
    fn wall(camera: &PinholeCamera, world_from_camera: &Isometry3<f64>) -> (RgbImage, DepthImage) {
        wall_at(camera, world_from_camera, 3.0)
    }

    /// A textured wall in the plane z = `plane_z` (world) as a camera at `world_from_camera` sees it.
    fn wall_at(
        camera: &PinholeCamera,
        world_from_camera: &Isometry3<f64>,
        plane_z: f64,
    ) -> (RgbImage, DepthImage) {
        let camera_from_world = world_from_camera.inverse();
        let (w, h) = (camera.width, camera.height);
        let mut rgb = Vec::new();
        let mut depth = Vec::new();
        for v in 0..h {
            for u in 0..w {
                // Ray through the pixel, intersected with the plane z = plane_z (world).
                let ray_c = Vector3::new(
                    (f64::from(u) - camera.cx) / camera.fx,
                    (f64::from(v) - camera.cy) / camera.fy,
                    1.0,
                );
                let origin = world_from_camera.translation.vector;
                let ray_w = world_from_camera.rotation * ray_c;
                let t = (plane_z - origin.z) / ray_w.z;
                let hit = origin + ray_w * t;
                // A non-repeating pattern: smooth blobs.
                let value = 128.0
                    + 60.0 * (hit.x * 2.1).sin() * (hit.y * 1.3 + hit.x * 0.4).cos()
                    + 40.0 * (hit.y * 3.7).sin();
                let g = value.clamp(0.0, 255.0) as u8;
                rgb.push([g, g, g]);
                depth.push((camera_from_world * Point3::from(hit)).z as f32);
            }
        }
        (Image::from_vec(w, h, rgb).expect("size"), Image::from_vec(w, h, depth).expect("size"))
    }

    /// The query of the tests: 0.4 m to the right of the keyframe, turned 10°.
    fn query_pose() -> Isometry3<f64> {
        Isometry3::from_parts(
            Translation3::new(0.4, 0.0, 0.0),
            UnitQuaternion::from_axis_angle(&Vector3::y_axis(), 10f64.to_radians()),
        )
    }

    #[test]
    fn the_true_pose_scores_higher_than_a_shifted_one() {
        let camera = PinholeCamera::from_horizontal_fov(160, 128, 90.0).expect("camera");
        let keyframe_pose = Isometry3::identity();
        let (rgb, depth) = wall(&camera, &keyframe_pose);
        let keyframe = Thumbnail::new(&camera, &rgb, Some(&depth), (0.1, 10.0));
        assert_eq!((keyframe.camera.width, keyframe.camera.height), (40, 32));
        assert_eq!(keyframe.depth_m.len(), 40 * 32);
        let query_pose = query_pose();
        let (query_rgb, _) = wall(&camera, &query_pose);
        let query = Thumbnail::new(&camera, &query_rgb, None, (0.1, 10.0));
        assert!(query.depth_m.is_empty());
        let check =
            |pose: &Isometry3<f64>| photometric_check(&query, &pose.inverse(), [(&keyframe, &keyframe_pose)]);
        let truth = check(&query_pose).expect("covered");
        assert!(truth.ncc > 0.9 && truth.coverage > 0.5, "{truth:?}");
        let shifted = Isometry3::from_parts(Translation3::new(1.2, 0.3, 0.0), query_pose.rotation);
        let wrong = check(&shifted).expect("covered");
        assert!(wrong.ncc < truth.ncc - 0.3, "true {truth:?}, shifted {wrong:?}");
        // Behind the wall nothing is covered.
        let behind = Isometry3::from_parts(Translation3::new(0.0, 0.0, 5.0), UnitQuaternion::identity());
        assert_eq!(check(&behind), None);
    }

    #[test]
    fn local_and_gradient_scores_prefer_the_true_pose() {
        let camera = PinholeCamera::from_horizontal_fov(320, 256, 90.0).expect("camera");
        let keyframe_pose = Isometry3::identity();
        let (rgb, depth) = wall(&camera, &keyframe_pose);
        let keyframe = Thumbnail::new(&camera, &rgb, Some(&depth), (0.1, 10.0));
        // The keyframe's own image against itself: every score is 1.
        let own = Thumbnail::new(&camera, &rgb, None, (0.1, 10.0));
        let itself = warp(&own.camera, &Isometry3::identity(), [(&keyframe, &keyframe_pose)]);
        let perfect = appearance_scores(&own, &itself);
        assert_eq!(perfect.patches, 80, "{perfect:?}");
        for score in [perfect.patch_mean, perfect.patch_agree, perfect.gradient, perfect.blurred] {
            assert!(score > 0.99, "{perfect:?}");
        }
        let query_pose = query_pose();
        let (query_rgb, _) = wall(&camera, &query_pose);
        let query = Thumbnail::new(&camera, &query_rgb, None, (0.1, 10.0));
        let scores = |pose: &Isometry3<f64>| {
            appearance_scores(&query, &warp(&query.camera, &pose.inverse(), [(&keyframe, &keyframe_pose)]))
        };
        let truth = scores(&query_pose);
        let shifted = scores(&Isometry3::from_parts(Translation3::new(1.2, 0.3, 0.0), query_pose.rotation));
        assert!(truth.patch_mean > shifted.patch_mean + 0.3, "true {truth:?}, shifted {shifted:?}");
        assert!(truth.gradient > shifted.gradient + 0.3, "true {truth:?}, shifted {shifted:?}");
        // A prediction of the wrong size scores nothing.
        assert_eq!(appearance_scores(&query, &[]), AppearanceScores::default());
    }

    #[test]
    fn a_closer_camera_gets_a_warp_without_holes_and_a_wall_is_not_seen_through() {
        let camera = PinholeCamera::from_horizontal_fov(160, 128, 90.0).expect("camera");
        let keyframe_pose = Isometry3::identity();
        let (rgb, depth) = wall(&camera, &keyframe_pose);
        let keyframe = Thumbnail::new(&camera, &rgb, Some(&depth), (0.1, 10.0));
        let small = Thumbnail::camera_for(&camera);
        // 1.5 m closer to the wall (3 m away): each keyframe pixel spans two of the query's.
        let closer = Isometry3::translation(0.0, 0.0, 1.5);
        let predicted = warp(&small, &closer.inverse(), [(&keyframe, &keyframe_pose)]);
        let covered = predicted.iter().filter(|p| p.is_some()).count();
        assert_eq!(covered, predicted.len(), "holes in the warp of a closer view");
        // From behind the wall, looking back at it, its far face is not what the keyframe saw.
        let behind = Isometry3::from_parts(
            Translation3::new(0.0, 0.0, 4.0),
            UnitQuaternion::from_axis_angle(&Vector3::y_axis(), std::f64::consts::PI),
        );
        let predicted = warp(&small, &behind.inverse(), [(&keyframe, &keyframe_pose)]);
        assert!(predicted.iter().all(Option::is_none), "the wall was warped onto its back");
        // A second keyframe at the origin looking the other way sees a wall at z = -3. From behind the first
        // wall (z = 6, looking back), that second wall lies beyond the first one, which hides it.
        let turned = Isometry3::from_parts(
            Translation3::identity(),
            UnitQuaternion::from_axis_angle(&Vector3::y_axis(), std::f64::consts::PI),
        );
        let (rgb, depth) = wall_at(&camera, &turned, -3.0);
        let beyond = Thumbnail::new(&camera, &rgb, Some(&depth), (0.1, 10.0));
        let farther = Isometry3::from_parts(Translation3::new(0.0, 0.0, 6.0), turned.rotation);
        let alone = warp(&small, &farther.inverse(), [(&beyond, &turned)]);
        assert!(alone.iter().filter(|p| p.is_some()).count() > alone.len() / 20, "the far wall is in view");
        let both = warp(&small, &farther.inverse(), [(&beyond, &turned), (&keyframe, &keyframe_pose)]);
        let near = warp(&small, &farther.inverse(), [(&keyframe, &keyframe_pose)]);
        assert_eq!(both, near, "the far wall was seen through the near one");
    }
}
