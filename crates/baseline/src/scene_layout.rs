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
    pub fn build(map: &SemanticMap, slam: &SlamMap, sequence: &Path) -> Result<Option<Self>, BaselineError> {
        Self::build_with(map, slam, sequence, LayoutConfig::default())
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

    /// [`Self::hypotheses`] with their scores ([`gst_map::LayoutHypothesis::score`], lower is better).
    pub fn scored_hypotheses(&self, image: &RgbImage, count: usize) -> Vec<(Pose3, f32)> {
        let world_from_map = self.map_from_world.inverse();
        self.index
            .hypotheses(&self.model, &self.camera, image, count)
            .into_iter()
            .map(|h| (world_from_map * h.map_from_camera, h.score))
            .collect()
    }
}
