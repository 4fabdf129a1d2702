//! How much of a current view's surface the exploration saw, and from how similar a viewpoint: an ORACLE
//! diagnostic of generated data (it needs the view's true depth and the exploration's true poses and depth),
//! for telling a relocaliser's failures on views of surfaces the exploration never faced apart from its
//! failures on views it could have matched.
//!
//! The view's depth is sampled on a grid of pixels and each sample's surface point is projected into every
//! exploration frame given. A frame *saw* the point when the point lies in its image, in front of it, and its
//! depth there agrees with the point's (a nearer surface would occlude it). It saw it from a *similar
//! viewpoint* when, besides, the rays from the frame and from the view to the point are at most
//! [`OverlapConfig::max_angle_deg`] apart and their lengths differ by at most the factor
//! [`OverlapConfig::max_scale`]: the range over which binary descriptors (ORB) of a surface still match.

use gst_core::{DepthImage, PinholeCamera, Pose3};
use nalgebra::{Isometry3, Point2, Point3};

/// Settings of [`view_overlap`].
#[derive(Clone, Debug, PartialEq)]
pub struct OverlapConfig {
    /// The view's depth is sampled every this many pixels across and down.
    pub pixel_step: u32,
    /// Exploration depth is kept every this many pixels (the nearest kept pixel is compared).
    pub frame_step: u32,
    /// A frame's depth agrees with a point's when they differ by at most this share of the depth plus
    /// [`Self::depth_tolerance_m`].
    pub depth_tolerance: f32,
    pub depth_tolerance_m: f32,
    /// Largest angle between the frame's and the view's rays to a point seen from a similar viewpoint.
    pub max_angle_deg: f64,
    /// Largest ratio (either way) between the frame's and the view's distances to such a point.
    pub max_scale: f64,
}

impl Default for OverlapConfig {
    fn default() -> Self {
        Self {
            pixel_step: 8,
            frame_step: 4,
            depth_tolerance: 0.05,
            depth_tolerance_m: 0.03,
            max_angle_deg: 40.0,
            max_scale: 1.6,
        }
    }
}

/// What [`view_overlap`] measured for one view.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct ViewOverlap {
    /// Share of the view's sampled surface that some exploration frame saw.
    pub seen: f64,
    /// Share that some exploration frame saw from a similar viewpoint.
    pub similar: f64,
    /// Samples with depth (the denominator of both shares).
    pub samples: usize,
}

/// An exploration's posed depth, subsampled ([`OverlapConfig::frame_step`]).
#[derive(Debug)]
pub struct ExplorationDepth {
    camera: PinholeCamera,
    step: u32,
    columns: u32,
    rows: u32,
    frames: Vec<(Isometry3<f64>, Vec<f32>)>,
}

impl ExplorationDepth {
    /// An empty exploration seen through `camera`, its depth kept every `config.frame_step` pixels.
    pub fn new(camera: &PinholeCamera, config: &OverlapConfig) -> Self {
        let step = config.frame_step.max(1);
        Self {
            camera: *camera,
            step,
            columns: camera.width.div_ceil(step),
            rows: camera.height.div_ceil(step),
            frames: Vec::new(),
        }
    }

    /// Adds a frame (its depth must have the camera's size; another is skipped with a warning).
    pub fn add(&mut self, world_from_camera: &Pose3, depth: &DepthImage) {
        if (depth.width(), depth.height()) != (self.camera.width, self.camera.height) {
            tracing::warn!(
                "a {}x{} depth frame for a {}x{} camera: skipped",
                depth.width(),
                depth.height(),
                self.camera.width,
                self.camera.height
            );
            return;
        }
        let mut kept = Vec::with_capacity((self.columns * self.rows) as usize);
        for row in 0..self.rows {
            for column in 0..self.columns {
                let x = (column * self.step + self.step / 2).min(self.camera.width - 1);
                let y = (row * self.step + self.step / 2).min(self.camera.height - 1);
                kept.push(depth.get(x, y).copied().unwrap_or(0.0));
            }
        }
        self.frames.push((world_from_camera.0.inverse(), kept));
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

/// The share of a view's surface (its true `depth` from `world_from_view`, seen through `camera`) that the
/// exploration saw, and saw from a similar viewpoint. `None` when the view has no depth sample.
pub fn view_overlap(
    exploration: &ExplorationDepth,
    camera: &PinholeCamera,
    world_from_view: &Pose3,
    depth: &DepthImage,
    config: &OverlapConfig,
) -> Option<ViewOverlap> {
    let step = config.pixel_step.max(1);
    let centre = Point3::from(world_from_view.translation());
    let mut points = Vec::new();
    for y in (step / 2..depth.height()).step_by(step as usize) {
        for x in (step / 2..depth.width()).step_by(step as usize) {
            let z = f64::from(depth.get(x, y).copied().unwrap_or(0.0));
            if !(z.is_finite() && z > 0.0) {
                continue;
            }
            let local = camera.unproject(&Point2::new(f64::from(x), f64::from(y)), z);
            points.push(world_from_view.transform_point(&local));
        }
    }
    if points.is_empty() {
        return None;
    }
    let cos_max = config.max_angle_deg.to_radians().cos();
    let frame_camera = &exploration.camera;
    let (mut seen, mut similar) = (vec![false; points.len()], vec![false; points.len()]);
    for (camera_from_world, kept) in &exploration.frames {
        let frame_centre = Point3::from(camera_from_world.inverse().translation.vector);
        for (i, point) in points.iter().enumerate() {
            if similar[i] {
                continue;
            }
            let q = camera_from_world * point;
            if q.z < 0.1 {
                continue;
            }
            let Some(pixel) = frame_camera.project(&q) else { continue };
            let (u, v) = (pixel.x, pixel.y);
            if !(u >= 0.0
                && v >= 0.0
                && u < f64::from(frame_camera.width)
                && v < f64::from(frame_camera.height))
            {
                continue;
            }
            let (column, row) = ((u as u32) / exploration.step, (v as u32) / exploration.step);
            let Some(&d) = kept.get((row * exploration.columns + column) as usize) else { continue };
            let z = q.z as f32;
            if !(d > 0.0 && (d - z).abs() <= config.depth_tolerance * z + config.depth_tolerance_m) {
                continue;
            }
            seen[i] = true;
            let (from_frame, from_view) = (point - frame_centre, point - centre);
            let (a, b) = (from_frame.norm(), from_view.norm());
            let ratio = a / b.max(1e-9);
            if from_frame.dot(&from_view) >= cos_max * a * b
                && ratio <= config.max_scale
                && ratio >= 1.0 / config.max_scale
            {
                similar[i] = true;
            }
        }
    }
    let share = |flags: &[bool]| flags.iter().filter(|&&f| f).count() as f64 / flags.len() as f64;
    Some(ViewOverlap { seen: share(&seen), similar: share(&similar), samples: points.len() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::Vector3;

    /// A small camera, 90° across.
    fn camera() -> PinholeCamera {
        PinholeCamera::from_horizontal_fov(64, 48, 90.0).expect("camera")
    }

    /// Depth of the plane x = `wall_x` seen by `camera` at `world_from_camera` (0 where it is not in front).
    fn wall_depth(camera: &PinholeCamera, world_from_camera: &Pose3, wall_x: f64) -> DepthImage {
        let mut data = Vec::new();
        let origin = world_from_camera.translation();
        let rotation = world_from_camera.rotation_matrix();
        for y in 0..camera.height {
            for x in 0..camera.width {
                let ray_camera = Vector3::new(
                    (f64::from(x) - camera.cx) / camera.fx,
                    (f64::from(y) - camera.cy) / camera.fy,
                    1.0,
                );
                let ray = rotation * ray_camera;
                let t = if ray.x.abs() > 1e-9 { (wall_x - origin.x) / ray.x } else { -1.0 };
                data.push(if t > 0.0 { t as f32 } else { 0.0 });
            }
        }
        DepthImage::from_vec(camera.width, camera.height, data).expect("size")
    }

    fn looking(x: f64, y: f64, yaw_deg: f64) -> Pose3 {
        Pose3::world_from_camera_yaw_pitch(Vector3::new(x, y, 1.2), yaw_deg.to_radians(), 0.0)
    }

    fn test_config() -> OverlapConfig {
        OverlapConfig { pixel_step: 4, frame_step: 1, ..OverlapConfig::default() }
    }

    fn overlap_with(frames: &[Pose3], view: &Pose3, config: &OverlapConfig) -> ViewOverlap {
        let camera = camera();
        let mut exploration = ExplorationDepth::new(&camera, config);
        for frame in frames {
            exploration.add(frame, &wall_depth(&camera, frame, 3.0));
        }
        view_overlap(&exploration, &camera, view, &wall_depth(&camera, view, 3.0), config).expect("depth")
    }

    fn overlap(frames: &[Pose3], view: &Pose3) -> ViewOverlap {
        overlap_with(frames, view, &test_config())
    }

    #[test]
    fn the_same_viewpoint_saw_everything_similarly() {
        let view = looking(0.0, 0.0, 0.0);
        let o = overlap(std::slice::from_ref(&view), &view);
        assert!(o.samples > 100);
        assert!(o.seen > 0.99 && o.similar > 0.99, "{o:?}");
    }

    #[test]
    fn a_frame_facing_away_saw_nothing() {
        let o = overlap(&[looking(0.0, 0.0, 180.0)], &looking(0.0, 0.0, 0.0));
        assert_eq!((o.seen, o.similar), (0.0, 0.0));
        let empty = overlap(&[], &looking(0.0, 0.0, 0.0));
        assert_eq!((empty.seen, empty.similar), (0.0, 0.0));
    }

    #[test]
    fn an_oblique_or_distant_frame_saw_but_not_similarly() {
        // From 2.9 m along the wall, looking at the view's patch about 60° off the view's rays: part of the
        // patch is seen, little of it similarly; without the angle and scale gates all of it would be.
        let view = looking(0.0, 0.0, 0.0);
        let oblique = [looking(1.3, 2.6, -63.0)];
        let o = overlap(&oblique, &view);
        assert!(o.seen > 0.3, "{o:?}");
        assert!(o.similar < 0.5 * o.seen, "{o:?}");
        let ungated = OverlapConfig { max_angle_deg: 90.0, max_scale: f64::INFINITY, ..test_config() };
        let all = overlap_with(&oblique, &view, &ungated);
        assert_eq!((all.seen, all.similar), (o.seen, o.seen));
        // Straight on but 2.5 times as far: seen, at another scale.
        let far = looking(-4.5, 0.0, 0.0);
        let o = overlap(&[far], &view);
        assert!(o.seen > 0.9 && o.similar == 0.0, "{o:?}");
    }

    #[test]
    fn an_occluded_surface_was_not_seen() {
        // The frame's depth shows a nearer surface (a wall at x = 1.5) where the view sees x = 3.
        let camera = camera();
        let config = test_config();
        let view = looking(0.0, 0.0, 0.0);
        let mut exploration = ExplorationDepth::new(&camera, &config);
        exploration.add(&view, &wall_depth(&camera, &view, 1.5));
        let o =
            view_overlap(&exploration, &camera, &view, &wall_depth(&camera, &view, 3.0), &config).unwrap();
        assert_eq!(o.seen, 0.0);
        // A view without depth has nothing to measure.
        let blank = DepthImage::from_vec(camera.width, camera.height, vec![0.0; 64 * 48]).unwrap();
        assert!(view_overlap(&exploration, &camera, &view, &blank, &config).is_none());
    }
}
