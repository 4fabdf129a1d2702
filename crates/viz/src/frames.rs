//! The camera over time: poses, pinhole, frame images, trajectories, map points, tracking metrics.

use nalgebra::Point3;

use gst_core::{
    DepthImage, InstanceId, InstanceImage, ObjectClass, PinholeCamera, Pose3, RgbImage, Trajectory,
};
use gst_slam::TrackingState;

use crate::convert::{pinhole, point3, rgb, transform};
use crate::images::{
    ColorPayload, DepthPayload, color_payload, depth_payload, downscale_nearest, downscale_rgb,
    downscaled_camera, segmentation,
};
use crate::{FrameTime, Recorder, VizError, paths};

/// Colour of the ground-truth trajectory (green) and of the estimate (orange).
const GROUNDTRUTH_COLOR: [u8; 3] = [40, 200, 80];
const ESTIMATE_COLOR: [u8; 3] = [255, 140, 0];
const TRAJECTORY_RADIUS_M: f32 = 0.015;
const MAP_POINT_COLOR: [u8; 3] = [120, 160, 255];
const MAP_POINT_RADIUS_M: f32 = 0.01;
/// Length of the axes drawn at the ground-truth camera, metres.
const AXIS_LENGTH_M: f32 = 0.3;
/// Colour of instance id 0 (walls, floor, ceiling) in segmentation images.
const STRUCTURE_COLOR: [u8; 3] = [90, 90, 90];

/// Which trajectory a path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrajectoryKind {
    /// The recording's ground truth, in [`paths::WORLD`].
    GroundTruth,
    /// The estimate (SLAM's poses), in [`paths::SLAM`].
    Estimate,
}

/// The number logged for a tracking state on [`paths::METRICS_TRACKING_STATE`]: higher is better, so the plot
/// dips where tracking fails (lost 0, initializing 1, relocalized 2, tracking 3).
pub fn tracking_code(state: TrackingState) -> i64 {
    match state {
        TrackingState::Lost => 0,
        TrackingState::Initializing => 1,
        TrackingState::Relocalized => 2,
        TrackingState::Tracking => 3,
    }
}

fn tracking_text(state: TrackingState) -> &'static str {
    match state {
        TrackingState::Lost => "lost",
        TrackingState::Initializing => "initializing",
        TrackingState::Relocalized => "relocalized",
        TrackingState::Tracking => "tracking",
    }
}

impl Recorder {
    /// The camera model of the frame images (static, at [`paths::CAMERA_IMAGE`]), scaled like the images.
    pub fn log_camera_model(&self, camera: &PinholeCamera) -> Result<(), VizError> {
        let Some(stream) = self.untimed() else { return Ok(()) };
        let camera = downscaled_camera(camera, self.images().downscale);
        stream.log_static(paths::CAMERA_IMAGE, &pinhole(&camera))?;
        Ok(())
    }

    /// The estimated camera pose of a frame (`slam_from_camera`, at [`paths::CAMERA`]).
    pub fn log_camera_pose(&self, time: &FrameTime, slam_from_camera: &Pose3) -> Result<(), VizError> {
        let Some(stream) = self.at_frame(time) else { return Ok(()) };
        stream.log(paths::CAMERA, &transform(slam_from_camera))?;
        Ok(())
    }

    /// The ground-truth camera pose of a frame (`world_from_camera`, at [`paths::GROUNDTRUTH_CAMERA`]).
    pub fn log_groundtruth_pose(&self, time: &FrameTime, world_from_camera: &Pose3) -> Result<(), VizError> {
        let Some(stream) = self.at_frame(time) else { return Ok(()) };
        stream.log(paths::GROUNDTRUTH_CAMERA, &transform(world_from_camera))?;
        if self.first_time(crate::recorder::ONCE_GROUNDTRUTH_AXES) {
            stream.log_static(paths::GROUNDTRUTH_CAMERA, &rerun::TransformAxes3D::new(AXIS_LENGTH_M))?;
        }
        Ok(())
    }

    /// A colour frame (at [`paths::CAMERA_RGB`]), shrunk and encoded as the image settings say.
    pub fn log_rgb(&self, time: &FrameTime, image: &RgbImage) -> Result<(), VizError> {
        if !self.is_on() {
            return Ok(());
        }
        let settings = self.images();
        let payload = if settings.downscale > 1 {
            color_payload(&downscale_rgb(image, settings.downscale), settings.rgb)?
        } else {
            color_payload(image, settings.rgb)?
        };
        let Some(stream) = self.at_frame(time) else { return Ok(()) };
        match payload {
            ColorPayload::Raw(image) => stream.log(paths::CAMERA_RGB, &image)?,
            ColorPayload::Encoded(image) => stream.log(paths::CAMERA_RGB, &image)?,
        }
        Ok(())
    }

    /// A depth frame in metres (at [`paths::CAMERA_DEPTH`]); 0 and non-finite values are missing.
    pub fn log_depth(&self, time: &FrameTime, depth: &DepthImage) -> Result<(), VizError> {
        if !self.is_on() {
            return Ok(());
        }
        let settings = self.images();
        let payload = if settings.downscale > 1 {
            depth_payload(&downscale_nearest(depth, settings.downscale), settings.depth)?
        } else {
            depth_payload(depth, settings.depth)?
        };
        let Some(stream) = self.at_frame(time) else { return Ok(()) };
        match payload {
            DepthPayload::Raw(image) => stream.log(paths::CAMERA_DEPTH, &image)?,
            DepthPayload::Encoded(image) => stream.log(paths::CAMERA_DEPTH, &image)?,
        }
        Ok(())
    }

    /// An instance-id frame (at [`paths::CAMERA_INSTANCES`]); [`Recorder::log_instance_classes`] (or
    /// [`Recorder::log_scene`]) names and colours the ids.
    pub fn log_instances(&self, time: &FrameTime, ids: &InstanceImage) -> Result<(), VizError> {
        if !self.is_on() {
            return Ok(());
        }
        let downscale = self.images().downscale;
        let image =
            if downscale > 1 { segmentation(&downscale_nearest(ids, downscale)) } else { segmentation(ids) };
        let Some(stream) = self.at_frame(time) else { return Ok(()) };
        stream.log(paths::CAMERA_INSTANCES, &image)?;
        Ok(())
    }

    /// The static `AnnotationContext` on [`paths::WORLD`] that labels instance ids with their class
    /// ("chair #12") and colours them by class; id 0 is structure.
    pub fn log_instance_classes(&self, classes: &[(InstanceId, ObjectClass)]) -> Result<(), VizError> {
        let Some(stream) = self.untimed() else { return Ok(()) };
        let labels: Vec<String> =
            classes.iter().map(|(id, class)| format!("{} #{}", class.text(), id.0)).collect();
        let mut descriptions: Vec<rerun::datatypes::ClassDescriptionMapElem> =
            vec![(0u16, "structure", rerun::datatypes::Rgba32::from(STRUCTURE_COLOR)).into()];
        descriptions.extend(classes.iter().zip(&labels).filter(|((id, _), _)| *id != InstanceId::NONE).map(
            |((id, class), label)| {
                (id.0, label.as_str(), rerun::datatypes::Rgba32::from(class.color())).into()
            },
        ));
        stream.log_static(paths::WORLD, &rerun::AnnotationContext::new(descriptions))?;
        Ok(())
    }

    /// A whole trajectory as one line strip (static): the ground truth at [`paths::GROUNDTRUTH_TRAJECTORY`],
    /// the estimate at [`paths::SLAM_TRAJECTORY`]. Log the estimate once SLAM has finished (after loop
    /// closure); the per-frame camera shows the path while it runs.
    pub fn log_trajectory(&self, kind: TrajectoryKind, trajectory: &Trajectory) -> Result<(), VizError> {
        let Some(stream) = self.untimed() else { return Ok(()) };
        let (path, color, label) = match kind {
            TrajectoryKind::GroundTruth => (paths::GROUNDTRUTH_TRAJECTORY, GROUNDTRUTH_COLOR, "ground truth"),
            TrajectoryKind::Estimate => (paths::SLAM_TRAJECTORY, ESTIMATE_COLOR, "estimate"),
        };
        let strip: Vec<[f32; 3]> = trajectory
            .poses()
            .iter()
            .map(|p| p.world_from_camera.translation())
            .filter(|t| t.iter().all(|v| v.is_finite()))
            .map(|t| [t.x as f32, t.y as f32, t.z as f32])
            .collect();
        stream.log_static(
            path,
            &rerun::LineStrips3D::new([strip])
                .with_colors([rgb(color)])
                .with_radii([TRAJECTORY_RADIUS_M])
                .with_labels([label]),
        )?;
        Ok(())
    }

    /// Places the estimate's world in the world (static `Transform3D` at [`paths::SLAM`]): the trajectory
    /// alignment onto the ground truth (`gt_world_from_est_world`), or the gravity alignment
    /// (`SemanticMap::map_from_world`) when there is no ground truth, so that the 3D view is z up.
    pub fn log_world_from_slam(&self, world_from_slam: &Pose3) -> Result<(), VizError> {
        let Some(stream) = self.untimed() else { return Ok(()) };
        stream.log_static(paths::SLAM, &transform(world_from_slam))?;
        Ok(())
    }

    /// SLAM's map points (static, at [`paths::SLAM_POINTS`]); non-finite points are skipped.
    pub fn log_map_points(&self, points: impl IntoIterator<Item = Point3<f64>>) -> Result<(), VizError> {
        let Some(stream) = self.untimed() else { return Ok(()) };
        let positions: Vec<[f32; 3]> =
            points.into_iter().map(|p| [p.x, p.y, p.z]).filter(crate::convert::finite3).map(point3).collect();
        stream.log_static(
            paths::SLAM_POINTS,
            &rerun::Points3D::new(positions)
                .with_colors([rgb(MAP_POINT_COLOR)])
                .with_radii([MAP_POINT_RADIUS_M]),
        )?;
        Ok(())
    }

    /// A frame's tracking result: the state code ([`tracking_code`]) and inlier count as scalars, and a text
    /// line when the state changed (at [`paths::LOG_TRACKING`]).
    pub fn log_tracking(
        &self,
        time: &FrameTime,
        state: TrackingState,
        inliers: usize,
        keyframe: bool,
    ) -> Result<(), VizError> {
        let Some(stream) = self.at_frame(time) else { return Ok(()) };
        let code = tracking_code(state);
        stream.log(paths::METRICS_TRACKING_STATE, &rerun::Scalars::single(code as f64))?;
        stream.log(paths::METRICS_INLIERS, &rerun::Scalars::single(inliers as f64))?;
        if self.tracking_changed(code) {
            let level = match state {
                TrackingState::Lost => rerun::TextLogLevel::WARN,
                _ => rerun::TextLogLevel::INFO,
            };
            let text = format!(
                "frame {}: {}{}",
                time.index,
                tracking_text(state),
                if keyframe { " (keyframe)" } else { "" }
            );
            stream.log(paths::LOG_TRACKING, &rerun::TextLog::new(text).with_level(level))?;
        }
        Ok(())
    }

    /// A frame's absolute trajectory error after alignment, metres (at [`paths::METRICS_ATE`]).
    pub fn log_ate(&self, time: &FrameTime, error_m: f64) -> Result<(), VizError> {
        let Some(stream) = self.at_frame(time) else { return Ok(()) };
        if error_m.is_finite() {
            stream.log(paths::METRICS_ATE, &rerun::Scalars::single(error_m))?;
        }
        Ok(())
    }
}
