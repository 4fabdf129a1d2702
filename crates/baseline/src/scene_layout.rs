//! Layout place recognition for a scene ([`gst_map::layout`]): a floor model trained on the exploration's
//! keyframes (their colour and depth from the TUM export, their poses from the SLAM map) and the range
//! tables of the semantic map's occupancy grid. It gives the relocaliser pose hypotheses for current views
//! that feature matching cannot place ([`gst_slam::Relocalizer::relocalize_outcome_with`]).

use std::path::Path;

use gst_core::{PinholeCamera, Pose3, RgbImage};
use gst_map::{FloorModel, FloorModelBuilder, LayoutConfig, LayoutIndex, SemanticMap};
use gst_slam::SlamMap;

use crate::BaselineError;

/// Keyframes the floor model is trained on (evenly spaced over the exploration).
const TRAINING_KEYFRAMES: usize = 60;
/// Hypotheses handed to the relocaliser per view.
pub const LAYOUT_HYPOTHESES: usize = 5;
/// How far down the ranking the relocaliser's last resort goes ([`SceneLayout::ranked_hypotheses`]): a view
/// whose floor outline is ambiguous can have its only right hypothesis far down the ranking.
pub const DEEP_LAYOUT_HYPOTHESES: usize = 40;

/// A scene's floor model and layout index.
#[derive(Debug)]
pub struct SceneLayout {
    model: FloorModel,
    index: LayoutIndex,
    camera: PinholeCamera,
    map_from_world: Pose3,
}

impl SceneLayout {
    /// Trains the floor model on the keyframes of `slam` (colour and depth read from the TUM export at
    /// `sequence`) and builds the layout index of `map`'s grid; `None` (warned) when the map has no free
    /// space or the keyframes show too little floor.
    /// The camera heights and fallback pitches searched are the exploration's own
    /// ([`crate::priors::CameraPriors`]), the defaults only when it has too few keyframes.
    pub fn build(map: &SemanticMap, slam: &SlamMap, sequence: &Path) -> Result<Option<Self>, BaselineError> {
        let config = match crate::priors::CameraPriors::from_exploration(map, slam) {
            Some(priors) => {
                tracing::debug!(
                    "layout priors from {} keyframes: heights {:?} m, pitches {:?}°",
                    priors.keyframes,
                    priors.heights_m,
                    priors.pitches_deg
                );
                priors.layout_config(LayoutConfig::default())
            }
            None => LayoutConfig::default(),
        };
        Self::build_with(map, slam, sequence, config)
    }

    /// [`Self::build`] with other settings of the layout search.
    pub fn build_with(
        map: &SemanticMap,
        slam: &SlamMap,
        sequence: &Path,
        config: LayoutConfig,
    ) -> Result<Option<Self>, BaselineError> {
        let started = std::time::Instant::now();
        let recording = gst_io::TumSequence::open(sequence, None)?;
        let mut builder = FloorModelBuilder::new(&slam.camera, map.occupancy.floor_z_m);
        let step = slam.keyframes.len().div_ceil(TRAINING_KEYFRAMES).max(1);
        for keyframe in slam.keyframes.iter().step_by(step) {
            let frame = recording.frame(keyframe.frame_index)?;
            let map_from_camera = map.map_from_world * Pose3(keyframe.world_from_camera);
            builder.add_frame(&frame.rgb, &frame.depth, &map_from_camera);
        }
        let Some(model) = builder.finish() else { return Ok(None) };
        let index = LayoutIndex::build(&map.occupancy, config);
        if index.is_empty() {
            tracing::warn!("the map has no free space: no layout place recognition");
            return Ok(None);
        }
        tracing::debug!(
            "layout: floor model of {} pixels from {} keyframes, {} positions, {:.1} s",
            model.samples(),
            model.frames,
            index.len(),
            started.elapsed().as_secs_f64()
        );
        Ok(Some(Self { model, index, camera: slam.camera, map_from_world: map.map_from_world }))
    }

    /// The best distinct camera poses (`world_from_camera`, the SLAM map's world) for an image, best first.
    pub fn hypotheses(&self, image: &RgbImage, count: usize) -> Vec<Pose3> {
        self.scored_hypotheses(image, count).into_iter().map(|(pose, _)| pose).collect()
    }

    /// The distinct hypotheses ranked `skip + 1` to `count` (not turned): the relocaliser's last resort
    /// ([`gst_slam::Relocalizer::relocalize_outcome_with_deeper`]) after the first `skip` have failed.
    pub fn ranked_hypotheses(&self, image: &RgbImage, skip: usize, count: usize) -> Vec<Pose3> {
        self.best(image, count).into_iter().skip(skip).map(|(pose, _)| pose).collect()
    }

    /// The last resort after the first `skip` hypotheses: those ranked below them, down to
    /// [`DEEP_LAYOUT_HYPOTHESES`] (none when `skip` is 0: layout hypotheses are off).
    pub fn deeper_hypotheses(&self, image: &RgbImage, skip: usize) -> Vec<Pose3> {
        if skip == 0 {
            return Vec::new();
        }
        self.ranked_hypotheses(image, skip, DEEP_LAYOUT_HYPOTHESES)
    }

    /// The `count` best distinct hypotheses with their scores, in the SLAM map's world.
    fn best(&self, image: &RgbImage, count: usize) -> Vec<(Pose3, f32)> {
        let world_from_map = self.map_from_world.inverse();
        self.index
            .hypotheses(&self.model, &self.camera, image, count)
            .into_iter()
            .map(|h| (world_from_map * h.map_from_camera, h.score))
            .collect()
    }

    /// [`Self::hypotheses`] with their scores ([`gst_map::LayoutHypothesis::score`], lower is better): the
    /// `count` best, then each of them turned ±90° ([`turned_quarter`], with its score), in that order.
    pub fn scored_hypotheses(&self, image: &RgbImage, count: usize) -> Vec<(Pose3, f32)> {
        let best = self.best(image, count);
        let turned: Vec<(Pose3, f32)> = best
            .iter()
            .flat_map(|(pose, score)| [90.0, -90.0].map(|deg| (turned_quarter(pose, deg), *score)))
            .collect();
        best.into_iter().chain(turned).collect()
    }
}

/// A camera pose turned `degrees` about its own vertical axis (the camera's y, pointing down), in place.
/// A nearly square room's floor outline matches the view about as well a quarter turn off, so hypotheses near
/// the right place can all be about 90° off; turned, one of them can be verified.
pub fn turned_quarter(world_from_camera: &Pose3, degrees: f64) -> Pose3 {
    let turn = nalgebra::UnitQuaternion::from_axis_angle(&nalgebra::Vector3::y_axis(), degrees.to_radians());
    Pose3(world_from_camera.0 * nalgebra::Isometry3::from_parts(nalgebra::Translation3::identity(), turn))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{Isometry3, Translation3, UnitQuaternion, Vector3};

    #[test]
    fn a_quarter_turn_keeps_the_position_and_turns_the_view_about_the_vertical() {
        // A level camera (y down) looking along world +x, 1.4 m above the floor (world z up).
        let look_x = UnitQuaternion::from_basis_unchecked(&[
            Vector3::new(0.0, -1.0, 0.0),
            Vector3::new(0.0, 0.0, -1.0),
            Vector3::new(1.0, 0.0, 0.0),
        ]);
        let pose = Pose3(Isometry3::from_parts(Translation3::new(2.0, 3.0, 1.4), look_x));
        let turned = turned_quarter(&pose, 90.0);
        assert!((turned.0.translation.vector - pose.0.translation.vector).norm() < 1e-12);
        let forward = turned.0.rotation * Vector3::z();
        // Still level, and a quarter turn from +x: along ±y.
        assert!(forward.z.abs() < 1e-12 && forward.x.abs() < 1e-12 && (forward.y.abs() - 1.0).abs() < 1e-12);
        let back = turned_quarter(&turned, -90.0);
        assert!((back.0.rotation.angle_to(&pose.0.rotation)).abs() < 1e-12);
    }
}
