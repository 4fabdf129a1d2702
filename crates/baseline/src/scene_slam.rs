//! The SLAM side of a scene's memory: the map and trajectory of its exploration, built once per scene and
//! cached on disk, and relocalisation of images in it.
//!
//! SLAM runs on the exploration as the RGB-D track gives it (`docs/protocol.md`): colour frames decoded from
//! the question's video and the depth stream of the TUM export beside it (`<split>/tum/<scene>/`: the
//! sensor-model depth and the intrinsics), paired by `crate::frames` into a sequence in the evaluation's
//! cache. `PoseSource::OracleGroundTruth` (the `map-oracle-poses` baseline, an upper bound) also reads the
//! export's `groundtruth.txt`: the SLAM map is moved onto the true trajectory by the ATE alignment and the
//! true poses replace the estimate.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nalgebra::{Isometry3, Rotation3, Translation3, UnitQuaternion};

use gst_core::{Pose3, RgbImage, Trajectory};
use gst_slam::metrics::{EvaluationOptions, evaluate};
use gst_slam::{
    MAP_FILE, MapLookup, PanoramaConfig, PlaceIndex, Relocalization, Relocalizer, SlamConfig, SlamMap,
    run_slam,
};

use crate::BaselineError;

/// Where the poses of the scene's frames come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoseSource {
    /// Our SLAM's estimate (the default baseline).
    Slam,
    /// The episode's ground truth (`groundtruth.txt`): an oracle upper bound.
    OracleGroundTruth,
}

/// A scene's SLAM map and its exploration's trajectory, in one world frame.
#[derive(Debug)]
pub struct SceneSlam {
    pub map: SlamMap,
    pub trajectory: Trajectory,
    pub poses: PoseSource,
    pub config: SlamConfig,
    /// The map's render-and-compare place index (built on first use: it renders a few hundred panoramas).
    places: std::sync::OnceLock<PlaceIndex>,
    /// What relocalisation looks the map up by (built on first use, shared by every relocaliser).
    lookup: std::sync::OnceLock<Arc<MapLookup>>,
    /// The sequence the map was built from (decoded video frames with the depth stream; the place index
    /// reads its keyframes' colour frames).
    sequence_dir: PathBuf,
}

/// The TUM export of a scene's exploration inside a split.
pub fn tum_dir(split_dir: &Path, scene: &str) -> PathBuf {
    split_dir.join("tum").join(scene)
}

impl SceneSlam {
    /// Loads the scene's SLAM outputs from `cache_dir/slam/<scene>/`, or runs SLAM on the scene's exploration
    /// (video frames with the export's depth, `crate::frames`) and writes them there first.
    pub fn load_or_build(
        split_dir: &Path,
        scene: &str,
        cache_dir: &Path,
        poses: PoseSource,
        config: &SlamConfig,
    ) -> Result<Self, BaselineError> {
        let export = tum_dir(split_dir, scene);
        if !export.join("depth.txt").is_file() {
            return Err(BaselineError::file(
                &export,
                "no depth stream of the exploration here (depth.txt missing): the map baseline is an RGB-D \
                 track answerer and needs the depth that `gst generate` exports beside the video",
            ));
        }
        let sequence = crate::frames::exploration_sequence(split_dir, scene, &export, cache_dir)?;
        let dir = cache_dir.join("slam").join(scene);
        let map_path = dir.join(MAP_FILE);
        let trajectory_path = dir.join("trajectory.tum");
        let (map, trajectory) = if map_path.is_file() && trajectory_path.is_file() {
            (SlamMap::load(&map_path)?, gst_io::read_trajectory_tum(&trajectory_path)?)
        } else {
            let mut source = gst_io::open_source(&sequence, None)?;
            let output = run_slam(source.as_mut(), config, &mut |_| {})?;
            gst_slam::output::write_outputs(&dir, &output)?;
            tracing::info!(
                "{scene}: SLAM over {} frames, {} keyframes, {} loop closures",
                output.stats.frames,
                output.stats.keyframes,
                output.stats.loop_closures
            );
            (SlamMap::from_output(&output), output.trajectory)
        };
        // Upright PnP models a camera carried without roll: kept only where the exploration shows one.
        let mut config = config.clone();
        let keyframe_poses: Vec<Pose3> = map.keyframes.iter().map(|k| Pose3(k.world_from_camera)).collect();
        let level_from_world = gst_core::gravity_alignment(&keyframe_poses);
        let level = keyframe_poses.iter().map(|p| level_from_world * *p);
        if let Some(priors) = crate::priors::CameraPriors::from_poses(level, 0.0)
            && config.relocalize_upright
            && !priors.roll_free()
        {
            tracing::info!(
                "{scene}: the exploration camera rolls ({:.1}° at the 90th percentile): no upright PnP",
                priors.roll_p90_deg
            );
            config.relocalize_upright = false;
        }
        let mut slam = SceneSlam {
            map,
            trajectory,
            poses,
            config,
            places: std::sync::OnceLock::new(),
            lookup: std::sync::OnceLock::new(),
            sequence_dir: sequence.clone(),
        };
        if poses == PoseSource::OracleGroundTruth {
            let truth_path = export.join("groundtruth.txt");
            if !truth_path.is_file() {
                return Err(BaselineError::file(&export, "oracle poses need groundtruth.txt"));
            }
            let groundtruth = gst_io::read_trajectory_tum(&truth_path)?;
            let evaluation = evaluate(&groundtruth, &slam.trajectory, &EvaluationOptions::default())?;
            let alignment = evaluation
                .alignment
                .ok_or_else(|| BaselineError::file(&export, "the SLAM trajectory could not be aligned"))?;
            let rotation =
                UnitQuaternion::from_rotation_matrix(&Rotation3::from_matrix_unchecked(alignment.rotation));
            let truth_from_estimate =
                Isometry3::from_parts(Translation3::from(alignment.translation), rotation);
            slam.map = transformed(&slam.map, &truth_from_estimate);
            slam.trajectory = groundtruth;
        }
        Ok(slam)
    }

    /// The pose of an RGB image (no depth) in this map, if it can be found.
    pub fn relocalize(&self, image: &RgbImage) -> Result<Option<Relocalization>, BaselineError> {
        Ok(self.relocalizer()?.relocalize(image)?)
    }

    /// A relocaliser over this map, with its place index.
    pub fn relocalizer(&self) -> Result<Relocalizer<'_>, BaselineError> {
        let places = self.places.get_or_init(|| {
            place_index(&self.map, &self.sequence_dir).unwrap_or_else(|error| {
                tracing::warn!("{error}: the place index falls back to the keyframes' grey thumbnails");
                PlaceIndex::build(&self.map, PanoramaConfig::default())
            })
        });
        Ok(self.feature_relocalizer()?.with_places(places))
    }

    /// A relocaliser over this map without the place index (feature hypotheses only).
    pub fn feature_relocalizer(&self) -> Result<Relocalizer<'_>, BaselineError> {
        let lookup = self.lookup.get_or_init(|| Arc::new(MapLookup::build(&self.map))).clone();
        Ok(Relocalizer::with_lookup(&self.map, &self.config, lookup)?)
    }

    /// The sequence the map was built from (decoded video frames with the depth stream).
    pub fn sequence_dir(&self) -> &Path {
        &self.sequence_dir
    }

    /// Camera positions of the exploration, in order.
    pub fn path(&self) -> Vec<Pose3> {
        self.trajectory.poses().iter().map(|p| p.world_from_camera).collect()
    }
}

/// The place index of a map from its keyframes' colour frames in the TUM recording it was built from.
pub fn place_index(map: &SlamMap, sequence: &Path) -> Result<PlaceIndex, BaselineError> {
    let recording = gst_io::TumSequence::open(sequence, None)?;
    let mut builder = gst_slam::PlaceIndexBuilder::new(map, PanoramaConfig::default());
    for keyframe in &map.keyframes {
        let frame = recording.frame(keyframe.frame_index)?;
        builder.add_frame(&frame.rgb, &frame.depth, &Pose3(keyframe.world_from_camera));
    }
    Ok(builder.finish())
}

/// The map moved rigidly by `new_from_old`.
pub fn transformed(map: &SlamMap, new_from_old: &Isometry3<f64>) -> SlamMap {
    let mut map = map.clone();
    for keyframe in &mut map.keyframes {
        keyframe.world_from_camera = new_from_old * keyframe.world_from_camera;
    }
    for point in &mut map.points {
        point.position = new_from_old * point.position;
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use gst_core::PinholeCamera;
    use gst_slam::map_file::{StoredKeyframe, StoredPoint};
    use gst_slam::thumbnail::Thumbnail;
    use nalgebra::{Point3, Vector3};

    #[test]
    fn moving_a_map_moves_keyframes_and_points_together() {
        let camera = PinholeCamera::from_horizontal_fov(64, 48, 90.0).expect("camera");
        let keyframe_pose = Isometry3::from_parts(
            Translation3::new(1.0, 2.0, 0.5),
            UnitQuaternion::from_axis_angle(&Vector3::y_axis(), 0.3),
        );
        let map = SlamMap {
            camera,
            keyframes: vec![StoredKeyframe {
                id: 0,
                frame_index: 0,
                timestamp_s: 0.0,
                world_from_camera: keyframe_pose,
                features: Default::default(),
                points: Vec::new(),
                thumbnail: Thumbnail {
                    camera: Thumbnail::camera_for(&camera),
                    gray: Vec::new(),
                    depth_m: Vec::new(),
                },
            }],
            points: vec![StoredPoint {
                position: Point3::new(1.0, 2.0, 3.5),
                descriptor: [0; 32],
                octave: 0,
            }],
        };
        let motion = Isometry3::from_parts(
            Translation3::new(-4.0, 0.5, 1.0),
            UnitQuaternion::from_axis_angle(&Vector3::z_axis(), 1.1),
        );
        let moved = transformed(&map, &motion);
        // The point keeps its coordinates in the keyframe's camera frame.
        let before = keyframe_pose.inverse() * map.points[0].position;
        let after = moved.keyframes[0].world_from_camera.inverse() * moved.points[0].position;
        assert!((before - after).norm() < 1e-12);
        assert!((moved.points[0].position - motion * map.points[0].position).norm() < 1e-12);
    }
}
