//! Relocalisation of one RGB image without depth against a SLAM map: the building block of every current-view
//! question.
//!
//! Hypotheses come from three sources: the keyframes most voted for by the image's ORB descriptors
//! through the descriptor index ([`crate::index`]) and those whose coarse layout looks most like the
//! image's, each matched together with its neighbours in time; the places in space where most descriptors
//! find a stored copy ([`Relocalizer::window_matches`]: the map points of one place, whenever the
//! exploration saw it); and render-and-compare place recognition ([`crate::panorama`]), refined
//! photometrically. Matches give a first pose by PnP-RANSAC (OpenCV), and, when none is verified, by upright
//! PnP-RANSAC for a camera carried without roll ([`crate::upright`]: pairs instead of triples, for match sets
//! with few right matches); matching the map points of the
//! keyframes that see that pose projected into it, then motion-only optimisation on reprojection errors,
//! refine it. Each hypothesis is then checked photometrically ([`crate::thumbnail`]): the thumbnails of the
//! keyframes that see most of what the pose would see ([`Relocalizer::keyframes_seeing`] — for a novel
//! viewpoint these are often metres away or facing elsewhere), warped into it by their depth, are
//! correlated with the image's. Repeated textures (wallpaper, tiles) can make the matches of a keyframe
//! metres away agree on a shifted pose; what does not repeat in the view decides between them, and a
//! rejected pose on many inliers is moved by the texture's period (the shifts between its points and stored
//! copies of their descriptors, [`Relocalizer::try_shifts`]) or slid along the floor to where the image
//! correlates best ([`Relocalizer::slide`]) and matched again. Of the
//! hypotheses whose correlation reaches [`MIN_NCC`] the most confident wins (correlation weighed by inliers,
//! below: a symmetric room turned 180° may correlate better on a few matches than the truth on many); none
//! is returned when none reaches it. A place hypothesis whose matching fails is matched by view synthesis
//! ([`crate::synthesis`]: the image warped into the keyframes that see it, which undoes the perspective of a
//! viewpoint no keyframe shared), then, if that is not verified either, from a grid of starts around it
//! ([`Relocalizer::refine_around`]): photometric refinement stops decimetres off along flat directions of
//! its correlation, farther than tight matching reaches. The search ends early once a verified pose is
//! settled ([`SETTLED_NCC`], [`SETTLED_INLIERS`]): most views are found by their first match sets, and
//! render and compare is most of the time of the rest.
//!
//! When nothing at all is found, the last resorts are features of the image squeezed along each axis
//! ([`squeezed_features`]: the foreshortening of a wall seen at another angle than the exploration saw it,
//! simulated as ASIFT's tilts do), which only propose poses, matched again with the image's own features,
//! tightly and by view synthesis, and judged on those; then the rejected poses on most inliers turned a
//! quarter about the vertical and slid ([`Relocalizer::turned_slides`]: in rectilinear rooms a texture
//! covering two perpendicular walls, matched on the wrong one, gives a pose turned 90°), which also runs where
//! the verified pose rests on few inliers.
//!
//! A pose the check rejects by a little is accepted when nothing passes the check and a caller's hypothesis
//! corroborates it (layout place recognition predicted it and guided matching from there found it with many
//! inliers: three cues agree; [`Search::corroborate`]), or else when hundreds of inliers agree on it
//! ([`Search::outweigh`]: the check fails where the keyframes never saw part of the view).
//!
//! [`Relocalizer::relocalize_outcome`] also returns, when nothing is verified, the best rejected
//! hypothesis: an unverified guess for callers that must answer anyway (the map answerer's fallback).
//!
//! Confidence is `ncc · min(1, inliers / 50)`: near 1 for a view that the map's keyframes reproduce and
//! that has fifty or more consistent matches.

use std::collections::HashMap;
use std::sync::Arc;

use nalgebra::{Isometry3, Point3};
use serde::Serialize;

use gst_core::{PinholeCamera, Pose3, RgbImage};

use crate::features::{Features, OrbExtractor, hamming};
use crate::index::DescriptorIndex;
use crate::map_file::{SlamMap, StoredKeyframe, StoredPoint};
use crate::optimize::{optimize_pose, pnp_ransac};
use crate::panorama::PlaceIndex;
use crate::synthesis::{GrayImage, pose_from, synthesized_matches};
use crate::system::{match_to_points, observations};
use crate::thumbnail::{PhotometricCheck, Thumbnail, photometric_check};
use crate::upright::{UprightConfig, upright_ransac};
use crate::{SlamConfig, SlamError};

/// A relocalised camera.
#[derive(Clone, Debug, Serialize)]
pub struct Relocalization {
    pub world_from_camera: Pose3,
    /// Inlier 2D–3D matches after the final optimisation.
    pub inliers: usize,
    /// Matches that went into the final optimisation.
    pub matches: usize,
    /// In [0, 1] (see the module documentation).
    pub confidence: f64,
    /// The keyframe whose map points gave the first pose.
    pub keyframe: u32,
    /// Photometric check of the pose: correlation of the warped keyframes with the image, and their coverage.
    pub ncc: f64,
    pub coverage: f64,
}

/// What [`Relocalizer::relocalize_outcome`] found: the verified pose, or else the best rejected one.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RelocalizationOutcome {
    pub accepted: Option<Relocalization>,
    /// When nothing was verified: the hypothesis with the highest photometric correlation among those whose
    /// check covered enough of the image ([`Relocalization::ncc`] below [`MIN_NCC`]). Unverified.
    pub best_rejected: Option<Relocalization>,
}

/// Relocalises images against one map.
#[derive(Debug)]
pub struct Relocalizer<'a> {
    map: &'a SlamMap,
    /// Render-and-compare place recognition ([`crate::panorama`]), when given.
    places: Option<&'a PlaceIndex>,
    lookup: Arc<MapLookup>,
    orb: OrbExtractor,
    config: SlamConfig,
    /// Every judged hypothesis, when asked for ([`Relocalizer::with_judged_log`]; diagnostics).
    judged_log: Option<std::sync::Mutex<Vec<JudgedRecord>>>,
}

/// One judged hypothesis, as the diagnostics log keeps it ([`Relocalizer::with_judged_log`]).
#[derive(Clone, Debug, Serialize)]
pub struct JudgedRecord {
    pub world_from_camera: Pose3,
    pub inliers: usize,
    pub ncc: f64,
    pub coverage: f64,
    pub accepted: bool,
    pub scores: crate::thumbnail::AppearanceScores,
}

/// What relocalisation looks a map up by, built from the map alone: the same for every relocaliser over it,
/// so callers relocalising many images share one ([`Relocalizer::with_lookup`]).
#[derive(Debug)]
pub struct MapLookup {
    /// The descriptors of the keyframes' features that have a map point.
    index: DescriptorIndex,
    /// Per keyframe, its thumbnail's layout signature ([`layout`]).
    layouts: Vec<Vec<f32>>,
    /// Per keyframe, world points on a sparse grid of its thumbnail's depth: what it saw, to choose the
    /// keyframes that see what a pose would see ([`Relocalizer::keyframes_seeing`]).
    anchors: Vec<Vec<Point3<f64>>>,
    /// The world's vertical read from the keyframes (carried without roll), for upright PnP.
    up: Option<nalgebra::Vector3<f64>>,
}

impl MapLookup {
    pub fn build(map: &SlamMap) -> Self {
        let mut index = DescriptorIndex::new();
        for keyframe in &map.keyframes {
            for (f, point) in keyframe.points.iter().enumerate() {
                if point.is_some() {
                    index.insert(keyframe.id, f as u32, &keyframe.features.descriptors[f]);
                }
            }
        }
        let layouts = map.keyframes.iter().map(|k| layout(&k.thumbnail)).collect();
        let anchors = map.keyframes.iter().map(anchors).collect();
        let poses: Vec<Pose3> = map.keyframes.iter().map(|k| Pose3(k.world_from_camera)).collect();
        let up = gst_core::vertical_from_cameras(&poses);
        MapLookup { index, layouts, anchors, up }
    }
}

/// Keyframe hypotheses tried per image, and how far down the vote the last resort goes.
const HYPOTHESES: usize = 10;
const DEEP_HYPOTHESES: usize = 120;
/// PnP consensus sets tried per hypothesis (sequential RANSAC).
const CONSENSUS_ROUNDS: usize = 3;
/// Squeeze factors of [`squeezed_features`], and how many keyframes of their vote are matched.
const SQUEEZES: &[f64] = &[1.6, 2.5];
const SQUEEZED_HYPOTHESES: usize = 30;
/// Rejected poses at distinct places slid again turned a quarter ([`Relocalizer::turned_slides`]).
const TURNED_SEEDS: usize = 6;
/// Keyframe hypotheses chosen by layout similarity, besides the voted ones.
const LAYOUT_HYPOTHESES: usize = 10;
/// Lowest photometric correlation of an accepted pose.
pub const MIN_NCC: f64 = 0.5;
/// Lowest share of the image the warped keyframes must cover to judge a pose.
const MIN_COVERAGE: f64 = 0.15;
/// Rejected hypotheses with at least this many inliers seed the search for texture-period shifts.
const SHIFT_MIN_INLIERS: usize = 40;
/// Descriptor distance of copies of a repeated texture.
const SHIFT_DESCRIPTOR_DISTANCE: u32 = 30;
/// Fewest points voting for a shift, and shifts tried per seed.
const SHIFT_MIN_VOTES: usize = 5;
const SHIFT_CANDIDATES: usize = 8;
/// The slide of a rejected pose ([`Relocalizer::slide`]): grid steps each way, their length, metres, how
/// many of the best-correlated positions are matched, and the lowest correlation of such a grid position
/// (below [`MIN_NCC`]: the check is peaked, and a grid position up to half a step from the peak scores far
/// below it; the position is refined photometrically before it is matched).
const SLIDE_STEPS: i32 = 14;
const SLIDE_STEP_M: f64 = 0.25;
const SLIDE_CANDIDATES: usize = 3;
const SLIDE_MIN_NCC: f64 = 0.3;

/// What became of one place hypothesis ([`Relocalizer::trace_hypothesis`]).
#[derive(Clone, Debug)]
pub struct PlaceTrace<J> {
    /// The photometrically refined pose and its check (`None`: the check covered too little at the start).
    pub refined: Option<(Pose3, PhotometricCheck)>,
    /// The pose of guided matching from the refined one (wide, then tight), judged.
    pub matched: Option<J>,
    /// When that was not accepted: the pose of view-synthesis matching from the refined one, judged.
    pub synthesized: Option<J>,
    /// When neither was accepted: the best of tight matching from a grid of starts around it, judged.
    pub around: Option<J>,
}

/// A refined hypothesis and whether it passed the photometric check.
struct Judged {
    relocalization: Relocalization,
    accepted: bool,
}

/// The best verified and the best rejected hypothesis of one relocalisation so far.
#[derive(Default)]
struct Search {
    accepted: Option<Relocalization>,
    rejected: Option<Relocalization>,
    /// The best rejected pose that a caller's hypothesis corroborates ([`Search::corroborate`]).
    corroborated: Option<Relocalization>,
    /// The best rejected pose that overwhelming feature evidence carries ([`Search::outweigh`]).
    outweighed: Option<Relocalization>,
    /// The best distinct rejected poses of feature match sets, to match again by view synthesis
    /// ([`Search::remember`]).
    pool: Vec<Relocalization>,
    /// Seeds the texture-shift search ([`Relocalizer::try_shifts`]) and the slide ([`Relocalizer::slide`])
    /// have started from: one search of each kind per place ([`same_place`]). The slid ones are kept whole,
    /// as seeds of [`Relocalizer::turned_slides`].
    shifted_from: Vec<Pose3>,
    slid: Vec<Relocalization>,
}

impl Search {
    /// Keeps a judged hypothesis if it beats the best of its kind: verified ones by confidence (correlation
    /// weighed by inliers up to 50, then correlation), rejected ones by correlation, then inliers, and only
    /// when their check covered enough of the image. Correlation alone would prefer a symmetric room turned
    /// 180° on a few matches (one view: 32 inliers, correlation above 0.73) to the
    /// true pose on 153 (0.63).
    fn consider(&mut self, judged: Judged) {
        self.outweigh(&judged);
        let found = judged.relocalization;
        if judged.accepted {
            if self.accepted.as_ref().is_none_or(|b| rank(&found) > rank(b)) {
                self.accepted = Some(found);
            }
        } else if found.coverage >= MIN_COVERAGE
            && self.rejected.as_ref().is_none_or(|b| (found.ncc, found.inliers) > (b.ncc, b.inliers))
        {
            self.rejected = Some(found);
        }
    }

    /// Keeps a rejected pose of a caller's hypothesis `start` (layout place recognition: geometry, not
    /// appearance) when the three cues agree short of the photometric check's bar: the pose stayed within
    /// [`CORROBORATED_DISTANCE_M`] and [`CORROBORATED_TURN_DEG`] of the hypothesis, has at least
    /// [`CORROBORATED_INLIERS`] inliers and a correlation of at least [`CORROBORATED_NCC`] over enough of the
    /// image. It is accepted only when nothing passes the check.
    fn corroborate(&mut self, judged: &Judged, start: &Pose3) {
        let found = &judged.relocalization;
        if judged.accepted
            || found.coverage < MIN_COVERAGE
            || found.ncc < CORROBORATED_NCC
            || found.inliers < CORROBORATED_INLIERS
        {
            return;
        }
        let (distance, turn) = separation(&found.world_from_camera, start);
        if distance > CORROBORATED_DISTANCE_M || turn > CORROBORATED_TURN_DEG {
            return;
        }
        if self.corroborated.as_ref().is_none_or(|b| (found.ncc, found.inliers) > (b.ncc, b.inliers)) {
            self.corroborated = Some(found.clone());
        }
    }

    /// Keeps a rejected pose whose feature evidence outweighs the photometric check: at least
    /// [`OUTWEIGHING_INLIERS`] inliers and a correlation of at least [`OUTWEIGHING_NCC`] over enough of the
    /// image. The check compares the image with what the keyframes saw; where they never saw part of the view
    /// (an appliance in front of a wall they saw from behind it) it fails a pose hundreds of matches agree
    /// on. It is accepted only when nothing passes the check and no caller's hypothesis corroborates another.
    fn outweigh(&mut self, judged: &Judged) {
        let found = &judged.relocalization;
        if judged.accepted
            || found.coverage < MIN_COVERAGE
            || found.ncc < OUTWEIGHING_NCC
            || found.inliers < OUTWEIGHING_INLIERS
        {
            return;
        }
        if self.outweighed.as_ref().is_none_or(|b| (found.inliers, found.ncc) > (b.inliers, b.ncc)) {
            self.outweighed = Some(found.clone());
        }
    }

    /// Keeps a rejected pose among the [`SYNTHESIS_POOL`] best distinct ones (correlation over enough of the
    /// image): a pose within 0.3 m and 10° of a kept one replaces it only when it correlates better.
    fn remember(&mut self, judged: &Judged) {
        let found = &judged.relocalization;
        if judged.accepted || found.coverage < MIN_COVERAGE {
            return;
        }
        if let Some(kept) =
            self.pool.iter_mut().find(|k| same_place(&k.world_from_camera, &found.world_from_camera))
        {
            if found.ncc > kept.ncc {
                *kept = found.clone();
            }
        } else {
            self.pool.push(found.clone());
        }
        self.pool.sort_by(|a, b| b.ncc.total_cmp(&a.ncc));
        self.pool.truncate(SYNTHESIS_POOL);
    }

    /// Whether nothing is verified, corroborated or outweighed: the last resorts' condition.
    fn empty_handed(&self) -> bool {
        self.accepted.is_none() && self.corroborated.is_none() && self.outweighed.is_none()
    }

    /// Whether the verified pose is good enough to end the search ([`SETTLED_NCC`], [`SETTLED_INLIERS`]).
    fn settled(&self) -> bool {
        self.accepted.as_ref().is_some_and(|b| b.ncc >= SETTLED_NCC && b.inliers >= SETTLED_INLIERS)
    }

    fn outcome(self) -> RelocalizationOutcome {
        match self.accepted.or(self.corroborated).or(self.outweighed) {
            Some(accepted) => RelocalizationOutcome { accepted: Some(accepted), best_rejected: None },
            None => RelocalizationOutcome { accepted: None, best_rejected: self.rejected },
        }
    }
}

/// A pose the check rejected is still accepted, when nothing passes it, if a caller's hypothesis it stayed
/// near corroborates it ([`Search::corroborate`]): within this distance, metres, and turn, degrees...
const CORROBORATED_DISTANCE_M: f64 = 0.5;
const CORROBORATED_TURN_DEG: f64 = 10.0;
/// ...with at least this many inliers and this correlation (measured on the bench's current views: such poses
/// within the bounds had 28–40 inliers and correlations 0.46–0.48, those metres off at most 21 and 0.36).
const CORROBORATED_INLIERS: usize = 25;
const CORROBORATED_NCC: f64 = 0.42;

/// The order of verified poses: by confidence (correlation weighed by inliers up to 50), then correlation,
/// then inliers.
fn rank(found: &Relocalization) -> (f64, f64, usize) {
    (found.confidence, found.ncc, found.inliers)
}

/// How far apart two poses are: metres, and degrees of turn.
fn separation(a: &Pose3, b: &Pose3) -> (f64, f64) {
    let distance = (a.0.translation.vector - b.0.translation.vector).norm();
    (distance, (a.0.rotation.inverse() * b.0.rotation).angle().to_degrees())
}

/// Whether two poses are one place to the searches that keep distinct poses (within 0.3 m and 10°).
fn same_place(a: &Pose3, b: &Pose3) -> bool {
    let (distance, turn) = separation(a, b);
    distance < 0.3 && turn < 10.0
}

/// Whether `seed` is at none of the places in `searched` ([`same_place`]).
fn unsearched<'p>(searched: impl IntoIterator<Item = &'p Pose3>, seed: &Pose3) -> bool {
    !searched.into_iter().any(|p| same_place(p, seed))
}

/// The poses of `slid` seeds, for [`unsearched`].
fn slid_poses(slid: &[Relocalization]) -> impl Iterator<Item = &Pose3> {
    slid.iter().map(|seed| &seed.world_from_camera)
}

/// `pose` turned by `degrees` about the vertical through its camera (world `up`; the camera's own up, −y,
/// when no vertical is known): the position, the pitch and the roll kept, the heading turned.
fn turned_about(pose: &Isometry3<f64>, up: Option<&nalgebra::Vector3<f64>>, degrees: f64) -> Isometry3<f64> {
    let axis = up.copied().unwrap_or_else(|| pose.rotation * -nalgebra::Vector3::y());
    let turn =
        nalgebra::UnitQuaternion::from_axis_angle(&nalgebra::Unit::new_normalize(axis), degrees.to_radians());
    Isometry3::from_parts(pose.translation, turn * pose.rotation)
}

/// `pose` moved by `shift` (world frame), its rotation kept.
fn moved(pose: &Isometry3<f64>, shift: nalgebra::Vector3<f64>) -> Isometry3<f64> {
    Isometry3::from_parts(nalgebra::Translation3::from(pose.translation.vector + shift), pose.rotation)
}

/// A pose the check rejected is still accepted, when nothing passes it, on at least this many inliers with at
/// least this correlation ([`Search::outweigh`]; one view: 170–270 inliers 1 cm from the
/// truth, correlation 0.30–0.36).
const OUTWEIGHING_INLIERS: usize = 150;
const OUTWEIGHING_NCC: f64 = 0.25;
/// Place windows tried per image ([`Relocalizer::window_matches`]), the edge of their cells, metres, and the
/// descriptor distance of a copy.
const WINDOW_HYPOTHESES: usize = 6;
const WINDOW_CELL_M: f64 = 1.5;
const WINDOW_DISTANCE: u32 = 50;
/// Keyframes warped into a hypothesis for its photometric check.
const CHECK_KEYFRAMES: usize = 6;
/// Keyframes whose map points are matched around a hypothesis, besides those near it facing its way.
const MATCH_KEYFRAMES: usize = 10;
/// Thumbnail pixels between a keyframe's anchors, in each direction.
const ANCHOR_STEP: usize = 8;
/// Keyframes farther than this from a pose are not considered to see what it sees, metres.
const SEEING_RANGE_M: f64 = 10.0;
/// Cells per side of the image grid over which keyframes' views of a pose are compared.
const SEEING_CELLS: usize = 8;
/// Cells per side of the coarse depth buffer that hides anchors behind nearer surfaces.
const SEEING_DEPTH_CELLS: usize = 32;
/// Hamming distance under which a descriptor votes for a keyframe.
const VOTE_DISTANCE: u32 = 40;
/// Keyframes before and after a hypothesis whose points join its matching.
const NEIGHBOURS: u32 = 3;
/// Fewest PnP inliers for a hypothesis.
const MIN_INLIERS: usize = 15;
/// Render-and-compare hypotheses tried per image.
const PLACE_HYPOTHESES: usize = 12;
/// Radius of guided matching around projected map points, pixels at octave 0 (of a pose hypothesis from
/// matches / from render and compare).
const MATCH_RADIUS_PX: f64 = 8.0;
const PLACE_MATCH_RADIUS_PX: f64 = 30.0;
/// Starts of [`Relocalizer::refine_around`]: a grid of (2 * AROUND_STEPS + 1)² positions around a place
/// hypothesis, this far apart (metres).
const AROUND_STEPS: i32 = 2;
const AROUND_STEP_M: f64 = 0.2;
/// A verified pose with this correlation and this many inliers ends the search: the remaining match sets
/// and render and compare (most of the time of a view) are skipped.
const SETTLED_NCC: f64 = 0.75;
const SETTLED_INLIERS: usize = 60;
/// Halvings of the photometric refinement's steps (0.2 m and 4 degrees at first).
const PHOTOMETRIC_LEVELS: usize = 4;
/// Keyframes the image is warped into by view synthesis ([`crate::synthesis`]).
const SYNTHESIS_KEYFRAMES: usize = 4;
/// Rejected poses of feature match sets matched again by view synthesis when nothing is verified.
const SYNTHESIS_POOL: usize = 3;
/// Fewest matches an upright two-point consensus needs before guided matching ([`Relocalizer::try_upright`]):
/// four unknowns, so ten agreeing matches are far from chance; guided matching must then reach
/// [`MIN_INLIERS`].
const UPRIGHT_MIN_INLIERS: usize = 10;
/// Fewest inliers of a pose verified from a caller's deeper hypotheses
/// ([`Relocalizer::relocalize_outcome_with_deeper`]): on the bench, the 29th layout hypothesis of
/// one view gives the truth on 53, and one of another view's a pose 7 m and 169° off on 15.
const DEEPER_MIN_INLIERS: usize = 30;

impl<'a> Relocalizer<'a> {
    /// A relocaliser over `map` (from a run: [`SlamMap::from_output`]; from disk: [`SlamMap::load`]).
    pub fn new(map: &'a SlamMap, config: &SlamConfig) -> Result<Self, SlamError> {
        Self::with_lookup(map, config, Arc::new(MapLookup::build(map)))
    }

    /// A relocaliser over `map` with its lookup built before ([`MapLookup::build`] of the same map).
    pub fn with_lookup(
        map: &'a SlamMap,
        config: &SlamConfig,
        lookup: Arc<MapLookup>,
    ) -> Result<Self, SlamError> {
        Ok(Self {
            map,
            places: None,
            lookup,
            orb: OrbExtractor::new(&config.orb)?,
            config: config.clone(),
            judged_log: None,
        })
    }

    /// Adds render-and-compare hypotheses from `places` (built from the same map) to every relocalisation:
    /// they find novel viewpoints that share too few feature matches with any keyframe.
    pub fn with_places(mut self, places: &'a PlaceIndex) -> Self {
        self.places = Some(places);
        self
    }

    /// Keeps every judged hypothesis with further appearance scores, for [`Self::take_judged_log`]
    /// (diagnostics: costs a second warp per judgement).
    pub fn with_judged_log(mut self) -> Self {
        self.judged_log = Some(Default::default());
        self
    }

    /// The hypotheses judged since the last call (empty unless [`Self::with_judged_log`]).
    pub fn take_judged_log(&self) -> Vec<JudgedRecord> {
        self.judged_log
            .as_ref()
            .map(|log| std::mem::take(&mut *log.lock().unwrap_or_else(|e| e.into_inner())))
            .unwrap_or_default()
    }

    /// The camera pose of `image` in the map, or `None` when no hypothesis is verified.
    pub fn relocalize(&mut self, image: &RgbImage) -> Result<Option<Relocalization>, SlamError> {
        Ok(self.relocalize_outcome(image)?.accepted)
    }

    /// Like [`Self::relocalize`], with the best hypothesis the photometric check rejected (highest
    /// correlation among those covering enough of the image) beside the verified one: an unverified guess
    /// for callers that must answer anyway.
    pub fn relocalize_outcome(&mut self, image: &RgbImage) -> Result<RelocalizationOutcome, SlamError> {
        self.relocalize_outcome_with(image, Vec::new)
    }

    /// Like [`Self::relocalize_outcome`], with pose hypotheses from elsewhere (`world_from_camera`, best
    /// first; e.g. layout place recognition against an occupancy grid), asked for only when the feature
    /// hypotheses have not settled the search: tried before render and compare, each refined
    /// photometrically and by guided matching and verified like a render-and-compare hypothesis.
    pub fn relocalize_outcome_with(
        &mut self,
        image: &RgbImage,
        hypotheses: impl FnOnce() -> Vec<Pose3>,
    ) -> Result<RelocalizationOutcome, SlamError> {
        self.relocalize_outcome_with_deeper(image, hypotheses, Vec::new)
    }

    /// Like [`Self::relocalize_outcome_with`], with a caller's last resort: further hypotheses (`deeper`,
    /// best first; e.g. layout hypotheses ranked below those of `hypotheses`), asked for only when nothing is
    /// verified, corroborated or outweighed after every other source, and tried like those of `hypotheses`
    /// until one is verified.
    pub fn relocalize_outcome_with_deeper(
        &mut self,
        image: &RgbImage,
        hypotheses: impl FnOnce() -> Vec<Pose3>,
        deeper: impl FnOnce() -> Vec<Pose3>,
    ) -> Result<RelocalizationOutcome, SlamError> {
        let camera = &self.map.camera;
        if (image.width(), image.height()) != (camera.width, camera.height) {
            return Err(SlamError::InvalidInput(format!(
                "the image is {}x{} but the map's camera is {}x{}",
                image.width(),
                image.height(),
                camera.width,
                camera.height
            )));
        }
        let features = self.orb.extract(image, None)?;
        let thumbnail = Thumbnail::new(camera, image, None, (0.0, f32::INFINITY));
        let gray = GrayImage::from_rgb(image);
        if features.len() < MIN_INLIERS {
            return Ok(RelocalizationOutcome::default());
        }
        // A tight distance keeps the votes discriminative (at 64 nearly every keyframe gets hundreds).
        // Hypotheses: the keyframes most voted for by descriptors, then those whose coarse layout (where the
        // dark, bright and textured parts of the image are) looks most like the image's: repeated textures
        // draw the votes to every wall that carries them, the layout does not repeat.
        let voted: Vec<u32> = self
            .lookup
            .index
            .vote(&features.descriptors, VOTE_DISTANCE, |_| false)
            .into_iter()
            .take(DEEP_HYPOTHESES)
            .map(|(kf, _)| kf)
            .collect();
        let mut ranked: Vec<u32> = voted.iter().take(HYPOTHESES).copied().collect();
        let query_layout = layout(&thumbnail);
        let mut by_layout: Vec<(f32, u32)> = self
            .lookup
            .layouts
            .iter()
            .enumerate()
            .map(|(k, l)| (l.iter().zip(&query_layout).map(|(a, b)| a * b).sum::<f32>(), k as u32))
            .collect();
        by_layout.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for &(_, kf) in by_layout.iter().take(LAYOUT_HYPOTHESES) {
            if !ranked.contains(&kf) {
                ranked.push(kf);
            }
        }
        let mut search = Search::default();
        let mut shift_seeds: Vec<(Relocalization, Vec<u32>)> = Vec::new();
        // Match sets, tried in order until the search settles (each computed only when reached): each voted
        // keyframe with its neighbours in time, then the places in space where most of the image's
        // descriptors find a copy (keyframes of one place seen at different times). Neighbouring hypotheses
        // share keyframes, whose matches are computed once.
        let mut per_keyframe: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
        for &kf in &ranked {
            if search.settled() {
                break;
            }
            let matches = self.keyframe_match_set(&features, kf, &mut per_keyframe);
            self.try_match_set(camera, &features, &thumbnail, kf, matches, &mut search, &mut shift_seeds)?;
        }
        if !search.settled() {
            for matches in self.window_matches(&features) {
                if search.settled() {
                    break;
                }
                self.try_match_set(
                    camera,
                    &features,
                    &thumbnail,
                    u32::MAX,
                    matches,
                    &mut search,
                    &mut shift_seeds,
                )?;
            }
        }
        // Repeated textures: a rejected pose with many inliers may be shifted by whole texture periods
        // ([`Self::try_shifts`]).
        self.search_shift_seeds(&features, &thumbnail, &gray, &shift_seeds, false, &mut search);
        // Rejected poses of feature matches, matched again by view synthesis: a view far from every keyframe's
        // viewpoint gives a pose decimetres off on its few matches, and the check rejects it.
        if search.accepted.is_none() {
            for start in std::mem::take(&mut search.pool) {
                if let Some(found) = self.synthesized(&gray, &start.world_from_camera.0) {
                    let judged = self.judge(&thumbnail, found);
                    self.try_late_shifts(&features, &thumbnail, &gray, &judged, &mut search);
                    search.consider(judged);
                }
            }
        }
        // Render and compare: poses where the map's rendered layout looks like the image, refined
        // photometrically, then by guided ORB matching and verified as any other hypothesis. (Accepting
        // photometrically refined poses without matches was tried: on 6 current views all 4 such poses were
        // metres off.)
        if !search.settled() {
            for hypothesis in hypotheses() {
                if search.settled() {
                    break;
                }
                self.try_place(&features, &thumbnail, &gray, &hypothesis, true, &mut search);
            }
        }
        if let Some(places) = self.places.filter(|_| !search.settled()) {
            for hypothesis in places.hypotheses(image, PLACE_HYPOTHESES) {
                self.try_place(
                    &features,
                    &thumbnail,
                    &gray,
                    &hypothesis.world_from_camera,
                    false,
                    &mut search,
                );
            }
        }
        // Last resorts, when nothing is verified, corroborated or outweighed: the keyframes further down the
        // descriptor vote. A novel view's own keyframes can rank far down when repeated textures draw the
        // votes elsewhere (one view: ranks 84–116). Then the caller's deeper hypotheses.
        if search.empty_handed() {
            for &kf in voted.iter().skip(HYPOTHESES) {
                if search.accepted.is_some() {
                    break;
                }
                if ranked.contains(&kf) {
                    continue;
                }
                let matches = self.keyframe_match_set(&features, kf, &mut per_keyframe);
                self.try_match_set(
                    camera,
                    &features,
                    &thumbnail,
                    kf,
                    matches,
                    &mut search,
                    &mut shift_seeds,
                )?;
            }
        }
        // A deeper list gives a chance pose more tries: only a pose on [`DEEPER_MIN_INLIERS`] is taken from it.
        if search.empty_handed() {
            let mut deep = Search::default();
            let strong = |d: &Search| d.accepted.as_ref().is_some_and(|a| a.inliers >= DEEPER_MIN_INLIERS);
            for hypothesis in deeper() {
                if strong(&deep) {
                    break;
                }
                self.try_place(&features, &thumbnail, &gray, &hypothesis, true, &mut deep);
            }
            if strong(&deep) {
                search.accepted = deep.accepted;
            }
        }
        // Still nothing: every rejected pose of a match set with many inliers (the last resorts' too) is
        // shifted, then slid along the floor, as a late one is ([`Self::try_late_shifts`]). Sliding them all
        // first would cost every unsettled view its time; the seeds a view's search met first decided which
        // got slid (one view: with a map of slightly different keyframes, its 64-inlier
        // pose 1.6 m off came from the voted keyframes, not view synthesis, and was never slid).
        if search.empty_handed() {
            self.search_shift_seeds(&features, &thumbnail, &gray, &shift_seeds, true, &mut search);
        }
        // The very last resorts, each taken only on [`DEEPER_MIN_INLIERS`]: the image's features squeezed along
        // each axis propose poses ([`Self::squeezed_proposals`]); then the rejected poses with many inliers are
        // slid turned a quarter either way ([`Self::turned_slides`]), also where the verified pose rests on
        // fewer inliers than that bar, which a more confident turned pose replaces.
        if search.empty_handed() && !SQUEEZES.is_empty() {
            search.accepted = self.squeezed_proposals(&features, &thumbnail, &gray)?;
        }
        let weak = search.accepted.as_ref().is_some_and(|a| a.inliers < DEEPER_MIN_INLIERS);
        if search.empty_handed() || weak {
            let seeds = shift_seeds.iter().map(|(seed, _)| seed).chain(&search.slid);
            if let Some(turned) = self.turned_slides(&features, &thumbnail, &gray, seeds)
                && search.accepted.as_ref().is_none_or(|a| rank(&turned) > rank(a))
            {
                search.accepted = Some(turned);
            }
        }
        Ok(search.outcome())
    }

    /// The last resort for a surface the exploration saw only at another angle than the image: ORB on the
    /// image squeezed along each axis ([`squeezed_features`], an affine simulation of the oblique view) votes
    /// for [`SQUEEZED_HYPOTHESES`] keyframes, whose match sets propose poses. The squeezed features only
    /// propose: each pose is matched again with the image's own features, tightly and by view synthesis, and
    /// judged on those with [`DEEPER_MIN_INLIERS`]. The best verified pose, if any.
    fn squeezed_proposals(
        &mut self,
        features: &Features,
        thumbnail: &Thumbnail,
        gray: &GrayImage,
    ) -> Result<Option<Relocalization>, SlamError> {
        let camera = &self.map.camera;
        let squeezed = squeezed_features(&mut self.orb, gray, features, SQUEEZES)?;
        let candidates: Vec<u32> = self
            .lookup
            .index
            .vote(&squeezed.descriptors, VOTE_DISTANCE, |_| false)
            .into_iter()
            .map(|(kf, _)| kf)
            .take(SQUEEZED_HYPOTHESES)
            .collect();
        tracing::debug!("squeezed: {} features, keyframes {candidates:?}", squeezed.len());
        let mut per_squeezed: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
        let mut verified = Search::default();
        for kf in candidates {
            if verified.accepted.is_some() {
                break;
            }
            let (mut proposed, mut seeds) = (Search::default(), Vec::new());
            let matches = self.keyframe_match_set(&squeezed, kf, &mut per_squeezed);
            self.try_match_set(camera, &squeezed, thumbnail, kf, matches, &mut proposed, &mut seeds)?;
            let poses: Vec<Pose3> =
                proposed.accepted.iter().chain(&proposed.pool).map(|r| r.world_from_camera).collect();
            for pose in poses {
                let matched = self.refine(features, pose.0.inverse(), kf).map(|(found, _)| found);
                let synthesized = self.synthesized(gray, &pose.0);
                for found in [matched, synthesized].into_iter().flatten() {
                    if found.inliers < DEEPER_MIN_INLIERS {
                        continue;
                    }
                    let judged = self.judge(thumbnail, found);
                    tracing::debug!(
                        "squeezed proposal from keyframe {kf}: {} inliers, correlation {:.3}, accepted {}",
                        judged.relocalization.inliers,
                        judged.relocalization.ncc,
                        judged.accepted
                    );
                    verified.consider(judged);
                }
            }
        }
        Ok(verified.accepted)
    }

    /// The last resort for a repeated texture on perpendicular walls: of the rejected poses with many inliers
    /// (`seeds`: those of the match sets and those the search slid), the [`TURNED_SEEDS`] with most inliers at
    /// distinct places, each turned a quarter either way about the vertical through its camera
    /// ([`turned_about`]) and slid ([`Self::slide`]). The best verified pose on [`DEEPER_MIN_INLIERS`], if
    /// any. Rooms are rectilinear, so a texture matched on the wrong one of two perpendicular walls gives a
    /// pose turned a quarter (one view: polka dots on both walls of a corner, rejected
    /// poses on 53–144 inliers 1.2–2 m off, turned 85–90°; another view, verified 0.24 m
    /// and 12° off on 23 inliers beside rejected poses turned 90° on up to 235). Half turns are not tried: in
    /// a symmetric room they pass the check (one view: 39 inliers, 4 m off).
    fn turned_slides<'s>(
        &self,
        features: &Features,
        thumbnail: &Thumbnail,
        gray: &GrayImage,
        seeds: impl Iterator<Item = &'s Relocalization>,
    ) -> Option<Relocalization> {
        let mut seeds: Vec<&Relocalization> = seeds.collect();
        seeds.sort_by_key(|seed| std::cmp::Reverse(seed.inliers));
        let mut turned_from: Vec<Pose3> = Vec::new();
        let mut turned = Search::default();
        let strong = |s: &Search| s.accepted.as_ref().is_some_and(|a| a.inliers >= DEEPER_MIN_INLIERS);
        for seed in seeds {
            if strong(&turned) || turned_from.len() >= TURNED_SEEDS {
                break;
            }
            if !unsearched(&turned_from, &seed.world_from_camera) {
                continue;
            }
            turned_from.push(seed.world_from_camera);
            for degrees in [90.0, -90.0] {
                let start = turned_about(&seed.world_from_camera.0, self.lookup.up.as_ref(), degrees);
                tracing::debug!("a pose on {} inliers turned {degrees}°, slid", seed.inliers);
                self.slide(features, thumbnail, gray, &start, &mut turned);
                if strong(&turned) {
                    break;
                }
            }
        }
        turned.accepted.filter(|a| a.inliers >= DEEPER_MIN_INLIERS)
    }

    /// While nothing is verified, each rejected pose of a match set with many inliers (`seeds`, with the
    /// points of its inliers) is shifted by whole texture periods ([`Self::try_shifts`]), then, with `slide`,
    /// slid along the floor ([`Self::slide`]); each at most once per place.
    fn search_shift_seeds(
        &self,
        features: &Features,
        thumbnail: &Thumbnail,
        gray: &GrayImage,
        seeds: &[(Relocalization, Vec<u32>)],
        slide: bool,
        search: &mut Search,
    ) {
        for (seed, points) in seeds {
            if search.accepted.is_some() {
                return;
            }
            if unsearched(&search.shifted_from, &seed.world_from_camera) {
                search.shifted_from.push(seed.world_from_camera);
                self.try_shifts(features, thumbnail, seed, points, search);
            }
            if slide
                && search.accepted.is_none()
                && unsearched(slid_poses(&search.slid), &seed.world_from_camera)
            {
                search.slid.push(seed.clone());
                self.slide(features, thumbnail, gray, &seed.world_from_camera.0, search);
            }
        }
    }

    /// The matches (map point, feature) of the image's features to the points of keyframe `kf` and its
    /// neighbours in time (more of the place's points), each feature once; per keyframe, computed once.
    fn keyframe_match_set(
        &self,
        features: &Features,
        kf: u32,
        per_keyframe: &mut HashMap<u32, Vec<(u32, u32)>>,
    ) -> Vec<(u32, u32)> {
        let first = kf.saturating_sub(NEIGHBOURS);
        let last = (kf + NEIGHBOURS).min(self.map.keyframes.len().saturating_sub(1) as u32);
        let mut matches: Vec<(u32, u32)> = Vec::new();
        let mut taken = std::collections::HashSet::new();
        for k in first..=last {
            let Some(keyframe) = self.map.keyframes.get(k as usize) else { continue };
            let found = per_keyframe.entry(k).or_insert_with(|| {
                match_to_points(
                    features,
                    &keyframe.features,
                    &keyframe.points,
                    self.config.max_descriptor_distance,
                )
            });
            for &(p, f) in found.iter() {
                if taken.insert(f) {
                    matches.push((p, f));
                }
            }
        }
        matches
    }

    /// A place hypothesis (off by a few decimetres and degrees) refined photometrically, then by guided
    /// matching wide and tight, else by view synthesis, else from a grid of starts around it, and judged into
    /// `search`; a caller's
    /// hypothesis (`from_caller`) may also corroborate a rejected pose ([`Search::corroborate`]).
    fn try_place(
        &self,
        features: &Features,
        thumbnail: &Thumbnail,
        gray: &GrayImage,
        start: &Pose3,
        from_caller: bool,
        search: &mut Search,
    ) {
        let trace = self.trace_place(features, thumbnail, gray, start);
        for judged in [trace.matched, trace.around, trace.synthesized].into_iter().flatten() {
            if from_caller {
                search.corroborate(&judged, start);
            }
            self.try_late_shifts(features, thumbnail, gray, &judged, search);
            search.consider(judged);
        }
    }

    /// Repeated textures: a rejected pose with many inliers may be shifted by whole texture periods. The
    /// shifts between its inlier points and stored copies of their descriptors elsewhere
    /// ([`Self::texture_shifts`]) are the candidates; each that the check does not rule out is refined by
    /// tight matching and judged into `search`. Callers skip a seed at a place already searched
    /// (`Search::shifted_from`).
    fn try_shifts(
        &self,
        features: &Features,
        thumbnail: &Thumbnail,
        seed: &Relocalization,
        points: &[u32],
        search: &mut Search,
    ) {
        let pose = &seed.world_from_camera.0;
        let shifts = self.texture_shifts(points);
        tracing::debug!(
            "{} texture shifts from {} points of a pose on {} inliers",
            shifts.len(),
            points.len(),
            seed.inliers
        );
        for shift in shifts {
            let shifted = moved(pose, shift);
            let check = self.check(thumbnail, &Pose3(shifted));
            tracing::debug!("shift {shift:?} of keyframe {}'s pose: {check:?}", seed.keyframe);
            let Some(check) = check else { continue };
            if check.coverage < MIN_COVERAGE || check.ncc < MIN_NCC - 0.15 {
                continue;
            }
            let Some((found, _)) = self.refine(features, shifted.inverse(), seed.keyframe) else {
                continue;
            };
            search.consider(self.judge(thumbnail, found));
        }
    }

    /// A rejected pose found after the feature match sets (by view synthesis, or from a place or layout
    /// hypothesis) on at least [`SHIFT_MIN_INLIERS`] inliers, while nothing is verified, may also be a
    /// texture period off: the texture-shift search ([`Self::try_shifts`], seeded with the points of tight
    /// matching at the pose), then the pose slid along the floor ([`Self::slide`]); each at most once per
    /// place (`Search::shifted_from`, `Search::slid`).
    fn try_late_shifts(
        &self,
        features: &Features,
        thumbnail: &Thumbnail,
        gray: &GrayImage,
        judged: &Judged,
        search: &mut Search,
    ) {
        let seed = &judged.relocalization;
        if judged.accepted || search.accepted.is_some() || seed.inliers < SHIFT_MIN_INLIERS {
            return;
        }
        let shift_here = unsearched(&search.shifted_from, &seed.world_from_camera);
        let slide_here = unsearched(slid_poses(&search.slid), &seed.world_from_camera);
        if !shift_here && !slide_here {
            return;
        }
        let Some((_, points)) = self.refine(features, seed.world_from_camera.0.inverse(), seed.keyframe)
        else {
            return;
        };
        if shift_here {
            search.shifted_from.push(seed.world_from_camera);
            self.try_shifts(features, thumbnail, seed, &points, search);
        }
        if slide_here {
            search.slid.push(seed.clone());
            self.slide(features, thumbnail, gray, &seed.world_from_camera.0, search);
        }
    }

    /// `pose` (a seed's) slid over a level grid along its camera's right and forward axes
    /// ([`level_axes`]; [`SLIDE_STEPS`] each way, [`SLIDE_STEP_M`] apart, heading and height kept), each
    /// position scored by the photometric check; the [`SLIDE_CANDIDATES`] best-correlated distinct ones (at
    /// least [`SLIDE_MIN_NCC`]) go through the steps of a
    /// place hypothesis ([`Self::trace_place`]: photometric refinement, guided matching, view synthesis, the
    /// grid of starts) into `search`. A repeated texture the stored descriptors do not copy exactly (no
    /// texture shift gets votes) still repeats in the image: one view, whose view
    /// synthesis gives 97 inliers 1.6 m from the truth with the heading right, correlates 0.57 at the grid
    /// position nearest the truth, and matching from there verifies the truth on 58 inliers.
    fn slide(
        &self,
        features: &Features,
        thumbnail: &Thumbnail,
        gray: &GrayImage,
        pose: &Isometry3<f64>,
        search: &mut Search,
    ) {
        let (right, forward) = level_axes(pose, self.lookup.up.as_ref());
        let mut scored: Vec<(f64, nalgebra::Vector3<f64>, Isometry3<f64>)> = Vec::new();
        for i in -SLIDE_STEPS..=SLIDE_STEPS {
            for j in -SLIDE_STEPS..=SLIDE_STEPS {
                if i == 0 && j == 0 {
                    continue;
                }
                let shift = right * (f64::from(i) * SLIDE_STEP_M) + forward * (f64::from(j) * SLIDE_STEP_M);
                let shifted = moved(pose, shift);
                if let Some(check) = self.check(thumbnail, &Pose3(shifted))
                    && check.coverage >= MIN_COVERAGE
                    && check.ncc >= SLIDE_MIN_NCC
                {
                    scored.push((check.ncc, shift, shifted));
                }
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        tracing::debug!("slide: {} candidates", scored.len());
        let mut tried: Vec<nalgebra::Vector3<f64>> = Vec::new();
        for (ncc, shift, shifted) in scored {
            if tried.len() >= SLIDE_CANDIDATES {
                break;
            }
            if tried.iter().any(|t| (t - shift).norm() < 0.5) {
                continue;
            }
            tried.push(shift);
            let trace = self.trace_place(features, thumbnail, gray, &Pose3(shifted));
            tracing::debug!("slide {shift:?}: ncc {ncc:.3}");
            for judged in [trace.matched, trace.around, trace.synthesized].into_iter().flatten() {
                tracing::debug!(
                    "slide judged: {} inliers ncc {:.3} accepted {}",
                    judged.relocalization.inliers,
                    judged.relocalization.ncc,
                    judged.accepted
                );
                search.consider(judged);
            }
        }
    }

    /// The steps of [`Self::try_place`] for one start: the photometric refinement, the tight matching from
    /// it (judged), and, each only when the one before is not accepted, view-synthesis matching from it and
    /// the grid of starts around it (judged).
    fn trace_place(
        &self,
        features: &Features,
        thumbnail: &Thumbnail,
        gray: &GrayImage,
        start: &Pose3,
    ) -> PlaceTrace<Judged> {
        let mut trace = PlaceTrace { refined: None, matched: None, synthesized: None, around: None };
        let Some((refined, check)) = self.refine_photometric(thumbnail, start) else {
            return trace;
        };
        trace.refined = Some((refined, check));
        let wide = self.refine_within(features, refined.0.inverse(), u32::MAX, PLACE_MATCH_RADIUS_PX);
        let tight = wide.and_then(|(w, _)| self.refine(features, w.world_from_camera.0.inverse(), u32::MAX));
        trace.matched = tight.map(|(found, _)| self.judge(thumbnail, found));
        // A verified pose on few matches may sit decimetres off (matching locked onto part of the view):
        // view synthesis from it may do better; the search keeps whichever correlates best.
        let start = match &trace.matched {
            Some(m) if m.accepted && m.relocalization.inliers >= SETTLED_INLIERS => return trace,
            Some(m) if m.accepted => m.relocalization.world_from_camera.0,
            _ => refined.0,
        };
        trace.synthesized = self.synthesized(gray, &start).map(|found| self.judge(thumbnail, found));
        if [&trace.matched, &trace.synthesized].iter().any(|j| j.as_ref().is_some_and(|j| j.accepted)) {
            return trace;
        }
        trace.around =
            self.refine_around(features, &refined.0.inverse()).map(|(found, _)| self.judge(thumbnail, found));
        trace
    }

    /// Diagnostics: what becomes of a pose hypothesis for `image` (as for a layout or render-and-compare
    /// hypothesis): its photometric refinement, then the judged poses of matching from it and around it,
    /// each with whether the check accepted it.
    pub fn trace_hypothesis(
        &mut self,
        image: &RgbImage,
        start: &Pose3,
    ) -> Result<PlaceTrace<(Relocalization, bool)>, SlamError> {
        let features = self.orb.extract(image, None)?;
        let thumbnail = Thumbnail::new(&self.map.camera, image, None, (0.0, f32::INFINITY));
        let gray = GrayImage::from_rgb(image);
        let trace = self.trace_place(&features, &thumbnail, &gray, start);
        let open = |j: Option<Judged>| j.map(|j| (j.relocalization, j.accepted));
        Ok(PlaceTrace {
            refined: trace.refined,
            matched: open(trace.matched),
            around: open(trace.around),
            synthesized: open(trace.synthesized),
        })
    }

    /// Poses from one match set (`kf`: the keyframe it was gathered around, `u32::MAX` for a window in space),
    /// judged into `search`; rejected poses with many inliers become seeds of the texture-shift search.
    /// Sequential RANSAC: a consensus on a repeated texture can hide the true one; after a rejected pose its
    /// inliers are set aside and the rest tried again.
    #[allow(clippy::too_many_arguments)]
    fn try_match_set(
        &self,
        camera: &PinholeCamera,
        features: &Features,
        thumbnail: &Thumbnail,
        kf: u32,
        matches: Vec<(u32, u32)>,
        search: &mut Search,
        shift_seeds: &mut Vec<(Relocalization, Vec<u32>)>,
    ) -> Result<(), SlamError> {
        let (mut points, mut pixels) = self.correspondences(features, &matches);
        for _ in 0..CONSENSUS_ROUNDS {
            let Some((camera_from_world, mask)) = pnp_ransac(camera, &points, &pixels, 6.0, MIN_INLIERS)?
            else {
                break;
            };
            let Some((found, inlier_points)) = self.refine(features, camera_from_world, kf) else {
                break;
            };
            let found = self.judge(thumbnail, found);
            search.remember(&found);
            let accepted = found.accepted;
            if !accepted && found.relocalization.inliers >= SHIFT_MIN_INLIERS {
                shift_seeds.push((found.relocalization.clone(), inlier_points));
            }
            search.consider(found);
            if accepted {
                break;
            }
            let keep: Vec<bool> = mask.iter().map(|m| !m).collect();
            points = points.iter().zip(&keep).filter(|(_, k)| **k).map(|(p, _)| *p).collect();
            pixels = pixels.iter().zip(&keep).filter(|(_, k)| **k).map(|(p, _)| *p).collect();
        }
        // Few right matches among many (a view far from every keyframe's viewpoint): the level camera's
        // two-point RANSAC finds consensus sets the general one's triples miss.
        if search.accepted.is_none() {
            self.try_upright(features, thumbnail, kf, &matches, search, shift_seeds);
        }
        Ok(())
    }

    /// The map points and image pixels of matches (map point, feature).
    fn correspondences(
        &self,
        features: &Features,
        matches: &[(u32, u32)],
    ) -> (Vec<Point3<f64>>, Vec<[f64; 2]>) {
        matches
            .iter()
            .map(|&(p, f)| {
                let keypoint = &features.keypoints[f as usize];
                (self.map.points[p as usize].position, [f64::from(keypoint.u), f64::from(keypoint.v)])
            })
            .unzip()
    }

    /// Upright PnP-RANSAC ([`crate::upright`]) on a match set: the camera taken as carried without roll under
    /// the vertical of the map's keyframes, its pitch swept, so that two right matches give a pose. Its best
    /// consensus of at least [`UPRIGHT_MIN_INLIERS`] is refined by guided matching and judged into `search`.
    /// On the bench, one view's voted match sets hold 10 matches consistent with the truth among
    /// 370–400: the general RANSAC (triples, 15 inliers) never draws them; this one does (26 inliers after
    /// guided matching, 0.03 m off).
    fn try_upright(
        &self,
        features: &Features,
        thumbnail: &Thumbnail,
        kf: u32,
        matches: &[(u32, u32)],
        search: &mut Search,
        shift_seeds: &mut Vec<(Relocalization, Vec<u32>)>,
    ) {
        if !self.config.relocalize_upright {
            return;
        }
        let Some(up) = &self.lookup.up else { return };
        let (points, pixels) = self.correspondences(features, matches);
        let config = UprightConfig::default();
        let Some((camera_from_world, _)) =
            upright_ransac(&self.map.camera, &points, &pixels, up, &config, UPRIGHT_MIN_INLIERS)
        else {
            return;
        };
        if let Some((found, inlier_points)) = self.refine(features, camera_from_world, kf) {
            let judged = self.judge(thumbnail, found);
            tracing::debug!(
                "upright consensus from keyframe {kf}: {} inliers, correlation {:.3}, accepted {}",
                judged.relocalization.inliers,
                judged.relocalization.ncc,
                judged.accepted
            );
            search.remember(&judged);
            if !judged.accepted && judged.relocalization.inliers >= SHIFT_MIN_INLIERS {
                shift_seeds.push((judged.relocalization.clone(), inlier_points));
            }
            search.consider(judged);
        }
    }

    /// Match sets of the places in space where most of the image's features find a stored copy of their
    /// descriptor: map points are binned in [`WINDOW_CELL_M`] cells, each feature counts once per cell it
    /// has a copy in, and the [`WINDOW_HYPOTHESES`] best windows of 3x3x3 cells (non-overlapping centres)
    /// give, per feature, its nearest copy in the window. A place seen at several times of the exploration
    /// gathers its points from all of them, which the keyframe votes (neighbours in time) do not.
    fn window_matches(&self, features: &Features) -> Vec<Vec<(u32, u32)>> {
        type Cell = (i64, i64, i64);
        let cell_of = |p: &Point3<f64>| -> Cell {
            (
                (p.x / WINDOW_CELL_M).floor() as i64,
                (p.y / WINDOW_CELL_M).floor() as i64,
                (p.z / WINDOW_CELL_M).floor() as i64,
            )
        };
        let mut near = Vec::new();
        // Per feature, its copies: (point, distance, cell).
        let mut copies: Vec<Vec<(u32, u32, Cell)>> = Vec::with_capacity(features.len());
        let mut counts: HashMap<Cell, u32> = HashMap::new();
        for descriptor in &features.descriptors {
            self.lookup.index.near(
                descriptor,
                self.config.max_descriptor_distance.min(WINDOW_DISTANCE),
                &mut near,
            );
            let mut mine: Vec<(u32, u32, Cell)> = Vec::new();
            for entry in &near {
                let Some((p, point)) = self.entry_point(entry) else { continue };
                mine.push((p, hamming(descriptor, &point.descriptor), cell_of(&point.position)));
            }
            let mut cells: Vec<Cell> = mine.iter().map(|c| c.2).collect();
            cells.sort_unstable();
            cells.dedup();
            for cell in cells {
                *counts.entry(cell).or_insert(0) += 1;
            }
            copies.push(mine);
        }
        let window = |c: &Cell| -> u32 {
            let mut sum = 0;
            for dx in -1..=1 {
                for dy in -1..=1 {
                    for dz in -1..=1 {
                        sum += counts.get(&(c.0 + dx, c.1 + dy, c.2 + dz)).copied().unwrap_or(0);
                    }
                }
            }
            sum
        };
        let mut ranked: Vec<(u32, Cell)> = counts.keys().map(|c| (window(c), *c)).collect();
        ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut centres: Vec<Cell> = Vec::new();
        for (_, c) in ranked {
            if centres.len() == WINDOW_HYPOTHESES {
                break;
            }
            let apart = |o: &Cell| (c.0 - o.0).abs().max((c.1 - o.1).abs()).max((c.2 - o.2).abs()) >= 2;
            if centres.iter().all(apart) {
                centres.push(c);
            }
        }
        centres
            .iter()
            .map(|centre| {
                let inside = |c: &Cell| {
                    (c.0 - centre.0).abs() <= 1 && (c.1 - centre.1).abs() <= 1 && (c.2 - centre.2).abs() <= 1
                };
                copies
                    .iter()
                    .enumerate()
                    .filter_map(|(f, mine)| {
                        mine.iter()
                            .filter(|c| inside(&c.2))
                            .min_by_key(|c| (c.1, c.0))
                            .map(|c| (c.0, f as u32))
                    })
                    .collect()
            })
            .collect()
    }

    /// Render-and-compare hypotheses refined photometrically, with their checks (diagnostics).
    pub fn refined_places(&self, image: &RgbImage, count: usize) -> Vec<(Pose3, PhotometricCheck)> {
        let Some(places) = self.places else { return Vec::new() };
        let thumbnail = Thumbnail::new(&self.map.camera, image, None, (0.0, f32::INFINITY));
        places
            .hypotheses(image, count)
            .iter()
            .filter_map(|h| self.refine_photometric(&thumbnail, &h.world_from_camera))
            .collect()
    }

    /// Coordinate ascent of the photometric check's correlation over the camera's position (right, down,
    /// forward) and its yaw and pitch (about its own y and x axes), from `start`, with shrinking steps.
    fn refine_photometric(&self, thumbnail: &Thumbnail, start: &Pose3) -> Option<(Pose3, PhotometricCheck)> {
        // One level scores every step against the same keyframes (those seeing its starting pose): cheaper
        // than choosing per candidate, and the scores of one level stay comparable.
        let score = |pose: &Pose3, chosen: &[usize]| {
            self.check_against(thumbnail, pose, chosen).filter(|c| c.coverage >= MIN_COVERAGE).map(|c| c.ncc)
        };
        let mut best = *start;
        let mut chosen = self.keyframes_seeing(&best.0, CHECK_KEYFRAMES);
        let mut best_score = score(&best, &chosen)?;
        let (mut step_m, mut step_rad) = (0.2f64, 4f64.to_radians());
        for _ in 0..PHOTOMETRIC_LEVELS {
            loop {
                let mut improved = false;
                for axis in 0..5 {
                    for sign in [-1.0, 1.0] {
                        let delta = match axis {
                            0 => Isometry3::translation(sign * step_m, 0.0, 0.0),
                            1 => Isometry3::translation(0.0, sign * step_m, 0.0),
                            2 => Isometry3::translation(0.0, 0.0, sign * step_m),
                            3 => Isometry3::rotation(nalgebra::Vector3::y() * sign * step_rad),
                            _ => Isometry3::rotation(nalgebra::Vector3::x() * sign * step_rad),
                        };
                        let candidate = Pose3(best.0 * delta);
                        if let Some(s) = score(&candidate, &chosen)
                            && s > best_score + 1e-4
                        {
                            (best, best_score, improved) = (candidate, s, true);
                        }
                    }
                }
                if !improved {
                    break;
                }
            }
            step_m *= 0.5;
            step_rad *= 0.5;
            // The next level scores against the keyframes seeing where this one arrived (within a level
            // they stay fixed, so that its ascent ends).
            chosen = self.keyframes_seeing(&best.0, CHECK_KEYFRAMES);
            best_score = score(&best, &chosen).unwrap_or(f64::NEG_INFINITY);
        }
        self.check(thumbnail, &best).map(|check| (best, check))
    }

    /// A fallback when [`Self::relocalize`] verifies nothing: place recognition by appearance alone, no
    /// geometric check — the best render-and-compare pose when a place index is given (keyframe `u32::MAX`),
    /// else the pose of the keyframe whose coarse layout looks most like the image. `None` only for a map
    /// without keyframes or an image of the wrong size.
    pub fn appearance_guess(&self, image: &RgbImage) -> Option<(u32, Pose3)> {
        let camera = &self.map.camera;
        if (image.width(), image.height()) != (camera.width, camera.height) {
            return None;
        }
        if let Some(best) = self.places.and_then(|p| p.hypotheses(image, 1).into_iter().next()) {
            return Some((u32::MAX, best.world_from_camera));
        }
        let query = layout(&Thumbnail::new(camera, image, None, (0.0, f32::INFINITY)));
        let (_, best) = self
            .lookup
            .layouts
            .iter()
            .enumerate()
            .map(|(k, l)| (l.iter().zip(&query).map(|(a, b)| a * b).sum::<f32>(), k))
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)))?;
        let keyframe = self.map.keyframes.get(best)?;
        Some((keyframe.id, Pose3(keyframe.world_from_camera)))
    }

    /// Relocalises `image` starting from a prior pose (guided matching around it, optimisation, photometric
    /// check), without place recognition: for images whose pose is roughly known.
    pub fn relocalize_near(
        &mut self,
        image: &RgbImage,
        prior: &Pose3,
    ) -> Result<Option<Relocalization>, SlamError> {
        let features = self.orb.extract(image, None)?;
        let thumbnail = Thumbnail::new(&self.map.camera, image, None, (0.0, f32::INFINITY));
        let found = match self.refine(&features, prior.0.inverse(), u32::MAX) {
            Some((found, _)) => found,
            None => {
                let gray = GrayImage::from_rgb(image);
                match self.refine_synthesized(&gray, &prior.0)? {
                    Some(found) => found,
                    None => return Ok(None),
                }
            }
        };
        let judged = self.judge(&thumbnail, found);
        Ok(judged.accepted.then_some(judged.relocalization))
    }

    /// The photometric check of `image` at a pose (diagnostics: how well the map explains a given pose).
    pub fn check_pose(&self, image: &RgbImage, world_from_camera: &Pose3) -> Option<PhotometricCheck> {
        let thumbnail = Thumbnail::new(&self.map.camera, image, None, (0.0, f32::INFINITY));
        self.check(&thumbnail, world_from_camera)
    }

    /// Diagnostics of the photometric check at a pose, as one RGB strip: the image's thumbnail, what the
    /// chosen keyframes predict there (black where nothing), then each chosen keyframe's warp alone (red
    /// where nothing). `None` for an image of the wrong size.
    pub fn check_images(&self, image: &RgbImage, world_from_camera: &Pose3) -> Option<RgbImage> {
        let thumbnail = Thumbnail::new(&self.map.camera, image, None, (0.0, f32::INFINITY));
        let chosen: Vec<&StoredKeyframe> = self
            .keyframes_seeing(&world_from_camera.0, CHECK_KEYFRAMES)
            .into_iter()
            .filter_map(|k| self.map.keyframes.get(k))
            .collect();
        let camera_from_world = world_from_camera.0.inverse();
        let warp = |keyframes: &[&StoredKeyframe]| predict(&thumbnail.camera, &camera_from_world, keyframes);
        let query: Vec<Option<u8>> = thumbnail.gray.iter().map(|&g| Some(g)).collect();
        let mut panels = vec![(query, [0, 0, 0]), (warp(&chosen), [0, 0, 0])];
        panels.extend(chosen.iter().map(|k| (warp(&[k]), [255, 0, 0])));
        let (w, h) = (thumbnail.camera.width as usize, thumbnail.camera.height as usize);
        if panels.iter().any(|(p, _)| p.len() != w * h) {
            return None;
        }
        let mut data = Vec::with_capacity(panels.len() * w * h);
        for j in 0..h {
            for (panel, empty) in &panels {
                data.extend(panel[j * w..(j + 1) * w].iter().map(|p| p.map_or(*empty, |g| [g, g, g])));
            }
        }
        gst_core::Image::from_vec((panels.len() * w) as u32, h as u32, data).ok()
    }

    /// The map point (id and point) of a descriptor-index entry, if its keyframe feature has one.
    fn entry_point(&self, entry: &crate::index::Entry) -> Option<(u32, &StoredPoint)> {
        let id = (*self.map.keyframes.get(entry.keyframe as usize)?.points.get(entry.feature as usize)?)?;
        Some((id, self.map.points.get(id as usize)?))
    }

    /// Candidate shifts (world) of a pose whose inlier map points may be copies of a repeated texture: the
    /// offsets from those points to stored points with nearly the same descriptor, binned horizontally
    /// (0.2 m), most-voted first.
    fn texture_shifts(&self, points: &[u32]) -> Vec<nalgebra::Vector3<f64>> {
        let mut bins: HashMap<(i64, i64), (usize, nalgebra::Vector3<f64>)> = HashMap::new();
        let mut near = Vec::new();
        let mut voted = std::collections::HashSet::new();
        for &p in points {
            let Some(point) = self.map.points.get(p as usize) else { continue };
            self.lookup.index.near(&point.descriptor, SHIFT_DESCRIPTOR_DISTANCE, &mut near);
            voted.clear();
            for entry in &near {
                let Some((_, other)) = self.entry_point(entry) else { continue };
                let shift = other.position - point.position;
                let horizontal = shift.xy().norm();
                if !(0.3..12.0).contains(&horizontal) || shift.z.abs() > 0.25 {
                    continue;
                }
                let key = ((shift.x / 0.2).round() as i64, (shift.y / 0.2).round() as i64);
                if voted.insert(key) {
                    let bin = bins.entry(key).or_insert((0, nalgebra::Vector3::zeros()));
                    bin.0 += 1;
                    bin.1 += shift;
                }
            }
        }
        let mut ranked: Vec<(usize, (i64, i64), nalgebra::Vector3<f64>)> = bins
            .into_iter()
            .filter(|(_, (n, _))| *n >= SHIFT_MIN_VOTES)
            .map(|(key, (n, sum))| (n, key, sum / n as f64))
            .collect();
        ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        ranked.into_iter().take(SHIFT_CANDIDATES).map(|(_, _, shift)| shift).collect()
    }

    /// The photometric verdict on a refined pose.
    fn judge(&self, thumbnail: &Thumbnail, mut found: Relocalization) -> Judged {
        let Some(check) = self.check(thumbnail, &found.world_from_camera) else {
            return Judged { relocalization: found, accepted: false };
        };
        found.ncc = check.ncc;
        found.coverage = check.coverage;
        found.confidence = check.ncc.clamp(0.0, 1.0) * (found.inliers as f64 / 50.0).min(1.0);
        let accepted = check.coverage >= MIN_COVERAGE && check.ncc >= MIN_NCC;
        if let Some(log) = &self.judged_log {
            let chosen: Vec<&StoredKeyframe> = self
                .keyframes_seeing(&found.world_from_camera.0, CHECK_KEYFRAMES)
                .into_iter()
                .filter_map(|k| self.map.keyframes.get(k))
                .collect();
            let predicted = predict(&thumbnail.camera, &found.world_from_camera.0.inverse(), &chosen);
            let record = JudgedRecord {
                world_from_camera: found.world_from_camera,
                inliers: found.inliers,
                ncc: check.ncc,
                coverage: check.coverage,
                accepted,
                scores: crate::thumbnail::appearance_scores(thumbnail, &predicted),
            };
            log.lock().unwrap_or_else(|e| e.into_inner()).push(record);
        }
        if !accepted {
            tracing::debug!(
                "hypothesis from keyframe {} rejected: {check:?}, {} inliers",
                found.keyframe,
                found.inliers
            );
        }
        Judged { relocalization: found, accepted }
    }

    /// The photometric check of a pose against the keyframes that see most of what it would see.
    fn check(&self, thumbnail: &Thumbnail, world_from_camera: &Pose3) -> Option<PhotometricCheck> {
        let chosen = self.keyframes_seeing(&world_from_camera.0, CHECK_KEYFRAMES);
        self.check_against(thumbnail, world_from_camera, &chosen)
    }

    /// The photometric check of a pose against the keyframes `chosen` (indices).
    fn check_against(
        &self,
        thumbnail: &Thumbnail,
        world_from_camera: &Pose3,
        chosen: &[usize],
    ) -> Option<PhotometricCheck> {
        let camera_from_world = world_from_camera.0.inverse();
        photometric_check(
            thumbnail,
            &camera_from_world,
            chosen
                .iter()
                .filter_map(|&k| self.map.keyframes.get(k))
                .map(|k| (&k.thumbnail, &k.world_from_camera)),
        )
    }

    /// Up to `count` keyframes (indices) that saw what a camera at `world_from_camera` would see, chosen
    /// greedily to cover the most of its image: each keyframe's anchors are projected into the camera,
    /// anchors seen from the other side of their surface (rays more than 75° apart) or behind a nearer
    /// anchor of any keyframe are dropped, and a keyframe counts the cells of an 8x8 grid its anchors
    /// reach. A novel viewpoint (off the path, looking where the path looked from elsewhere) is seen by
    /// keyframes far from it or facing another way; nearest-and-aligned keyframes would miss it.
    fn keyframes_seeing(&self, world_from_camera: &Isometry3<f64>, count: usize) -> Vec<usize> {
        let camera = &self.map.camera;
        let camera_from_world = world_from_camera.inverse();
        let position = world_from_camera.translation.vector;
        let (w, h) = (f64::from(camera.width), f64::from(camera.height));
        // Projected anchors per keyframe: (depth cell, depth, view cell).
        type Hits = Vec<(usize, f32, u8)>;
        let mut projected: Vec<(usize, Hits)> = Vec::new();
        let mut nearest = vec![f32::INFINITY; SEEING_DEPTH_CELLS * SEEING_DEPTH_CELLS];
        for (k, keyframe) in self.map.keyframes.iter().enumerate() {
            let centre = keyframe.world_from_camera.translation.vector;
            if (centre - position).norm() > SEEING_RANGE_M {
                continue;
            }
            let centre = camera_from_world * Point3::from(centre);
            let mut hits = Vec::new();
            for anchor in self.lookup.anchors.get(k).into_iter().flatten() {
                let q = camera_from_world * anchor;
                if q.z < 0.1 || q.z > SEEING_RANGE_M {
                    continue;
                }
                let (u, v) = (camera.fx * q.x / q.z + camera.cx, camera.fy * q.y / q.z + camera.cy);
                if u < 0.0 || v < 0.0 || u >= w || v >= h {
                    continue;
                }
                let (to_query, to_keyframe) = (-q.coords, centre - q);
                if to_query.dot(&to_keyframe) < 0.26 * to_query.norm() * to_keyframe.norm() {
                    continue;
                }
                let cell = |n: usize| {
                    ((u / w * n as f64) as usize).min(n - 1) + n * ((v / h * n as f64) as usize).min(n - 1)
                };
                let depth_cell = cell(SEEING_DEPTH_CELLS);
                let z = q.z as f32;
                nearest[depth_cell] = nearest[depth_cell].min(z);
                hits.push((depth_cell, z, cell(SEEING_CELLS) as u8));
            }
            if !hits.is_empty() {
                projected.push((k, hits));
            }
        }
        let mut masks: Vec<(usize, u64)> = projected
            .into_iter()
            .map(|(k, hits)| {
                let mask = hits
                    .iter()
                    .filter(|&&(cell, z, _)| z <= nearest[cell] * 1.15 + 0.15)
                    .fold(0u64, |mask, &(_, _, view_cell)| mask | 1u64 << view_cell);
                (k, mask)
            })
            .filter(|(_, mask)| *mask != 0)
            .collect();
        let mut chosen = Vec::with_capacity(count);
        let mut covered = 0u64;
        while chosen.len() < count {
            // The most new cells; once nothing new is covered, the most cells (a denser warp).
            let Some((i, _)) = masks.iter().enumerate().max_by_key(|(_, (k, mask))| {
                ((mask & !covered).count_ones(), mask.count_ones(), std::cmp::Reverse(*k))
            }) else {
                break;
            };
            let (k, mask) = masks.swap_remove(i);
            covered |= mask;
            chosen.push(k);
        }
        chosen
    }

    /// Matches the map points of keyframes near the hypothesis projected into the image, and optimises.
    fn refine(
        &self,
        features: &Features,
        camera_from_world: Isometry3<f64>,
        keyframe: u32,
    ) -> Option<(Relocalization, Vec<u32>)> {
        self.refine_within(features, camera_from_world, keyframe, MATCH_RADIUS_PX)
    }

    /// [`Self::refine`] with matches searched within `radius_px` (at octave 0) of the projected points.
    fn refine_within(
        &self,
        features: &Features,
        camera_from_world: Isometry3<f64>,
        keyframe: u32,
        radius_px: f64,
    ) -> Option<(Relocalization, Vec<u32>)> {
        let matches = self.guided_matches(features, camera_from_world, radius_px);
        if matches.len() < MIN_INLIERS {
            return None;
        }
        let camera = &self.map.camera;
        let scale = self.config.orb.scale_factor;
        let observations = observations(&self.map.points, features, &matches, f64::from(scale), false);
        let mut pose = camera_from_world;
        let mut inlier = vec![true; observations.len()];
        let inliers = optimize_pose(camera, &mut pose, &observations, &mut inlier);
        if inliers < MIN_INLIERS {
            return None;
        }
        let inlier_points = matches.iter().zip(&inlier).filter(|(_, ok)| **ok).map(|(m, _)| m.0).collect();
        let found = Relocalization {
            world_from_camera: Pose3(pose.inverse()),
            inliers,
            matches: matches.len(),
            confidence: 0.0,
            keyframe,
            ncc: 0.0,
            coverage: 0.0,
        };
        Some((found, inlier_points))
    }

    /// A pose hypothesis degrees off, refined by view synthesis ([`crate::synthesis`]): the image warped into
    /// the keyframes that see the hypothesis, matched with a voted shift, posed by PnP-RANSAC; then warped
    /// again from that pose and matched tightly.
    fn refine_synthesized(
        &self,
        gray: &GrayImage,
        world_from_camera: &Isometry3<f64>,
    ) -> Result<Option<Relocalization>, SlamError> {
        if !self.config.relocalize_view_synthesis {
            return Ok(None);
        }
        let camera = &self.map.camera;
        let mut orb = OrbExtractor::new(&self.config.orb)?;
        let seeing = self.keyframes_seeing(world_from_camera, SYNTHESIS_KEYFRAMES);
        let first = synthesized_matches(self.map, &mut orb, gray, world_from_camera, &seeing, true)?;
        let Some((pose, inliers, matches)) = pose_from(camera, &first, None, MIN_INLIERS)? else {
            tracing::debug!("synthesis: {} first matches, no pose", first.points.len());
            return Ok(None);
        };
        let world = pose.inverse();
        let seeing = self.keyframes_seeing(&world, SYNTHESIS_KEYFRAMES);
        let second = synthesized_matches(self.map, &mut orb, gray, &world, &seeing, false)?;
        let (pose, inliers, matches) =
            pose_from(camera, &second, Some(pose), MIN_INLIERS)?.unwrap_or((pose, inliers, matches));
        tracing::debug!(
            "synthesis: {} first matches, {} second, {inliers} inliers of {matches}",
            first.points.len(),
            second.points.len()
        );
        Ok(Some(Relocalization {
            world_from_camera: Pose3(pose.inverse()),
            inliers,
            matches,
            confidence: 0.0,
            keyframe: u32::MAX,
            ncc: 0.0,
            coverage: 0.0,
        }))
    }

    /// [`Self::refine_synthesized`] for a search that goes on without it when it fails: an OpenCV error in
    /// one hypothesis's warps is logged as a warning and the hypothesis gives nothing.
    fn synthesized(&self, gray: &GrayImage, world_from_camera: &Isometry3<f64>) -> Option<Relocalization> {
        self.refine_synthesized(gray, world_from_camera).unwrap_or_else(|error| {
            tracing::warn!("view synthesis failed: {error}");
            None
        })
    }

    /// A pose hypothesis decimetres off (photometric refinement is flat along the view and across it):
    /// tight guided matching ([`Self::refine`]) from poses on a grid around it, in the camera's
    /// right–forward plane, [`AROUND_STEP_M`] apart; the start with the most inliers wins. Wider matching
    /// from the hypothesis itself is pulled off by wrong matches on repeated textures.
    fn refine_around(
        &self,
        features: &Features,
        camera_from_world: &Isometry3<f64>,
    ) -> Option<(Relocalization, Vec<u32>)> {
        let world_from_camera = camera_from_world.inverse();
        let mut best: Option<(Relocalization, Vec<u32>)> = None;
        for i in -AROUND_STEPS..=AROUND_STEPS {
            for j in -AROUND_STEPS..=AROUND_STEPS {
                let offset =
                    Isometry3::translation(f64::from(i) * AROUND_STEP_M, 0.0, f64::from(j) * AROUND_STEP_M);
                let start = (world_from_camera * offset).inverse();
                if let Some(found) = self.refine(features, start, u32::MAX)
                    && best.as_ref().is_none_or(|b| found.0.inliers > b.0.inliers)
                {
                    best = Some(found);
                }
            }
        }
        tracing::debug!("around: {:?} inliers", best.as_ref().map(|b| b.0.inliers));
        best
    }

    /// Per image feature, the map point near `camera_from_world` with the closest descriptor among those
    /// projecting within `radius_px` (at octave 0) of it, as (point, feature) pairs sorted by point: the
    /// points of the keyframes near the pose facing its way and of those that see what it would see.
    fn guided_matches(
        &self,
        features: &Features,
        camera_from_world: Isometry3<f64>,
        radius_px: f64,
    ) -> Vec<(u32, u32)> {
        let camera = &self.map.camera;
        let world_from_camera = camera_from_world.inverse();
        let position = world_from_camera.translation.vector;
        let forward = world_from_camera.rotation * nalgebra::Vector3::z();
        let scale = self.config.orb.scale_factor;
        let mut best: HashMap<u32, (u32, u32)> = HashMap::new();
        let mut nearby = Vec::new();
        let mut visited = std::collections::HashSet::new();
        let seeing = self.keyframes_seeing(&world_from_camera, MATCH_KEYFRAMES);
        for (k, kf) in self.map.keyframes.iter().enumerate() {
            let d = (kf.world_from_camera.translation.vector - position).norm();
            let f = kf.world_from_camera.rotation * nalgebra::Vector3::z();
            if (d > self.config.local_map_radius_m || f.dot(&forward) < 0.3) && !seeing.contains(&k) {
                continue;
            }
            for &p in kf.points.iter().flatten() {
                if !visited.insert(p) {
                    continue;
                }
                let point = &self.map.points[p as usize];
                let c = camera_from_world * point.position;
                if c.z < 0.1 {
                    continue;
                }
                let (u, v) = (camera.fx * c.x / c.z + camera.cx, camera.fy * c.y / c.z + camera.cy);
                if u < 0.0 || v < 0.0 || u >= f64::from(camera.width) || v >= f64::from(camera.height) {
                    continue;
                }
                features.within(
                    u as f32,
                    v as f32,
                    (radius_px * f64::from(scale.powi(i32::from(point.octave)))) as f32,
                    &mut nearby,
                );
                let found = nearby
                    .iter()
                    .map(|&i| (hamming(&point.descriptor, &features.descriptors[i as usize]), i))
                    .min();
                if let Some((distance, i)) = found
                    && distance <= self.config.max_descriptor_distance
                {
                    let entry = best.entry(i).or_insert((p, u32::MAX));
                    if distance < entry.1 {
                        *entry = (p, distance);
                    }
                }
            }
        }
        let mut matches: Vec<(u32, u32)> = best.into_iter().map(|(f, (p, _))| (p, f)).collect();
        matches.sort_unstable();
        matches
    }
}

/// The image's features together with those of the image squeezed along x or y by each factor of `squeezes`
/// (box-filtered), their keypoints mapped back to the image: ORB is not invariant to the foreshortening
/// of a wall seen at a grazing angle, and the squeeze simulates it (as ASIFT's tilts do).
fn squeezed_features(
    orb: &mut OrbExtractor,
    gray: &GrayImage,
    features: &Features,
    squeezes: &[f64],
) -> Result<Features, SlamError> {
    let mut keypoints = features.keypoints.clone();
    let mut descriptors = features.descriptors.clone();
    let (w, h) = (gray.width as usize, gray.height as usize);
    for &t in squeezes {
        for along_x in [true, false] {
            let (tw, th) = if along_x {
                (((w as f64) / t).floor() as usize, h)
            } else {
                (w, ((h as f64) / t).floor() as usize)
            };
            let mut pixels = vec![0u8; tw * th];
            for y in 0..th {
                for x in 0..tw {
                    let (x0, x1, y0, y1) = if along_x {
                        let a = (x as f64 * t) as usize;
                        (a, (((x + 1) as f64 * t) as usize).min(w).max(a + 1), y, y + 1)
                    } else {
                        let a = (y as f64 * t) as usize;
                        (x, x + 1, a, (((y + 1) as f64 * t) as usize).min(h).max(a + 1))
                    };
                    let mut sum = 0u32;
                    for yy in y0..y1 {
                        for xx in x0..x1 {
                            sum += u32::from(gray.pixels[yy * w + xx]);
                        }
                    }
                    pixels[y * tw + x] = (sum / ((x1 - x0) * (y1 - y0)) as u32) as u8;
                }
            }
            let found = orb.extract_gray(&pixels, tw as u32, th as u32, None)?;
            for (mut k, d) in found.keypoints.into_iter().zip(found.descriptors) {
                if along_x {
                    k.u = ((f64::from(k.u) + 0.5) * t - 0.5) as f32;
                } else {
                    k.v = ((f64::from(k.v) + 0.5) * t - 0.5) as f32;
                }
                keypoints.push(k);
                descriptors.push(d);
            }
        }
    }
    Ok(Features::from_parts(keypoints, descriptors, gray.width, gray.height))
}

/// What `keyframes` predict in a thumbnail camera at `camera_from_world` ([`crate::thumbnail::warp`]).
fn predict(
    camera: &gst_core::PinholeCamera,
    camera_from_world: &Isometry3<f64>,
    keyframes: &[&StoredKeyframe],
) -> Vec<Option<u8>> {
    crate::thumbnail::warp(
        camera,
        camera_from_world,
        keyframes.iter().map(|k| (&k.thumbnail, &k.world_from_camera)),
    )
}

/// A camera's right and forward axes levelled under the world's vertical `up` (world frame, unit length): a
/// slide along them keeps the camera's height, where its own right–forward plane, pitched down, would lower it
/// by a sixth of every metre forward at 10° of pitch. Forward keeps its level heading and right is
/// perpendicular to it and to the vertical, on the camera's right side (orthogonal even for a camera with some
/// roll). The camera's own axes when no vertical is known or the camera looks along it.
fn level_axes(
    pose: &Isometry3<f64>,
    up: Option<&nalgebra::Vector3<f64>>,
) -> (nalgebra::Vector3<f64>, nalgebra::Vector3<f64>) {
    let right = pose.rotation * nalgebra::Vector3::x();
    let forward = pose.rotation * nalgebra::Vector3::z();
    let Some(up) = up.and_then(|u| u.try_normalize(1e-9)) else { return (right, forward) };
    let Some(level_forward) = (forward - up * forward.dot(&up)).try_normalize(1e-6) else {
        return (right, forward);
    };
    let level_right = up.cross(&level_forward);
    (if level_right.dot(&right) < 0.0 { -level_right } else { level_right }, level_forward)
}

/// World points on a sparse grid of a keyframe's thumbnail depth (every [`ANCHOR_STEP`]th pixel).
fn anchors(keyframe: &StoredKeyframe) -> Vec<Point3<f64>> {
    let thumbnail = &keyframe.thumbnail;
    let c = &thumbnail.camera;
    let (w, h) = (c.width as usize, c.height as usize);
    if thumbnail.depth_m.len() != w * h {
        return Vec::new();
    }
    let mut points = Vec::new();
    for j in (ANCHOR_STEP / 2..h).step_by(ANCHOR_STEP) {
        for i in (ANCHOR_STEP / 2..w).step_by(ANCHOR_STEP) {
            let d = f64::from(thumbnail.depth_m[j * w + i]);
            if d > 0.0 {
                let p = Point3::new((i as f64 - c.cx) / c.fx * d, (j as f64 - c.cy) / c.fy * d, d);
                points.push(keyframe.world_from_camera * p);
            }
        }
    }
    points
}

/// A coarse layout signature of a thumbnail: 8x8 block means, zero mean, unit norm.
fn layout(thumbnail: &Thumbnail) -> Vec<f32> {
    let (w, h) = (thumbnail.camera.width as usize, thumbnail.camera.height as usize);
    let (bw, bh) = ((w / 8).max(1), (h / 8).max(1));
    let mut cells = Vec::with_capacity(64);
    for by in 0..8 {
        for bx in 0..8 {
            let mut sum = 0.0f32;
            let mut n = 0.0f32;
            for y in by * bh..((by + 1) * bh).min(h) {
                for x in bx * bw..((bx + 1) * bw).min(w) {
                    sum += f32::from(thumbnail.gray.get(y * w + x).copied().unwrap_or(0));
                    n += 1.0;
                }
            }
            cells.push(if n > 0.0 { sum / n } else { 0.0 });
        }
    }
    let mean = cells.iter().sum::<f32>() / cells.len() as f32;
    cells.iter_mut().for_each(|c| *c -= mean);
    let norm = cells.iter().map(|c| c * c).sum::<f32>().sqrt().max(1e-6);
    cells.iter_mut().for_each(|c| *c /= norm);
    cells
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::Features;
    use nalgebra::{Translation3, UnitQuaternion, Vector3};

    fn judged(x: f64, yaw_deg: f64, inliers: usize, ncc: f64, accepted: bool) -> Judged {
        let pose = Isometry3::from_parts(
            Translation3::new(x, 0.0, 0.0),
            UnitQuaternion::from_euler_angles(0.0, 0.0, yaw_deg.to_radians()),
        );
        let relocalization = Relocalization {
            world_from_camera: Pose3(pose),
            inliers,
            matches: inliers + 10,
            confidence: ncc * (inliers as f64 / 50.0).min(1.0),
            keyframe: 0,
            ncc,
            coverage: 0.6,
        };
        Judged { relocalization, accepted }
    }

    #[test]
    fn a_caller_hypothesis_corroborates_a_nearly_verified_pose_only_when_nothing_is_verified() {
        let start = Pose3(Isometry3::translation(0.2, 0.0, 0.0));
        // Near the hypothesis with many inliers and a correlation just short of the bar: corroborated.
        let mut search = Search::default();
        for candidate in [judged(0.0, 3.0, 30, 0.46, false), judged(0.05, 0.0, 20, 0.49, false)] {
            search.corroborate(&candidate, &start);
            search.consider(candidate);
        }
        let outcome = search.outcome();
        let accepted = outcome.accepted.expect("corroborated");
        assert_eq!(accepted.inliers, 30);
        assert!(outcome.best_rejected.is_none());
        // Too few inliers, too low a correlation, too far from or turned away from the hypothesis: not.
        for candidate in [
            judged(0.0, 0.0, 21, 0.46, false),
            judged(0.0, 0.0, 30, 0.36, false),
            judged(1.0, 0.0, 30, 0.46, false),
            judged(0.2, 15.0, 30, 0.46, false),
        ] {
            let mut search = Search::default();
            search.corroborate(&candidate, &start);
            search.consider(candidate);
            let outcome = search.outcome();
            assert!(outcome.accepted.is_none());
            assert!(outcome.best_rejected.is_some(), "still the best rejected guess");
        }
        // A verified pose wins over a corroborated one.
        let mut search = Search::default();
        let corroborated = judged(0.0, 0.0, 40, 0.48, false);
        search.corroborate(&corroborated, &start);
        search.consider(corroborated);
        search.consider(judged(3.0, 90.0, 30, 0.6, true));
        assert_eq!(search.outcome().accepted.map(|a| a.ncc), Some(0.6));
    }

    /// A camera 1.4 m up, pitched 12° down, turned 30° about the vertical (world z up; camera y down,
    /// z forward), and the rotation of a level camera looking along world +x.
    fn pitched_camera() -> (Isometry3<f64>, nalgebra::Rotation3<f64>) {
        let level = nalgebra::Rotation3::from_matrix_unchecked(nalgebra::Matrix3::new(
            0.0, 0.0, 1.0, //
            -1.0, 0.0, 0.0, //
            0.0, -1.0, 0.0,
        ));
        let rotation = nalgebra::Rotation3::from_axis_angle(&nalgebra::Vector3::z_axis(), 30f64.to_radians())
            * level
            * nalgebra::Rotation3::from_axis_angle(&nalgebra::Vector3::x_axis(), -12f64.to_radians());
        let pose = Isometry3::from_parts(
            nalgebra::Translation3::new(1.0, 2.0, 1.4),
            nalgebra::UnitQuaternion::from_rotation_matrix(&rotation),
        );
        (pose, level)
    }

    #[test]
    fn a_slide_keeps_a_pitched_cameras_height_and_heading() {
        let (pose, _) = pitched_camera();
        let up = nalgebra::Vector3::z();
        let forward_seen = pose.rotation * nalgebra::Vector3::z();
        assert!(forward_seen.z < -0.15, "the camera looks down");
        for up in [up, -up] {
            let (right, forward) = level_axes(&pose, Some(&up));
            assert!(right.z.abs() < 1e-12 && forward.z.abs() < 1e-12, "level: {right:?} {forward:?}");
            assert!((right.norm() - 1.0).abs() < 1e-12 && (forward.norm() - 1.0).abs() < 1e-12);
            assert!(right.dot(&forward).abs() < 1e-12);
            // Same heading as the camera's view, same side as its right.
            let heading = |v: &nalgebra::Vector3<f64>| v.y.atan2(v.x);
            assert!((heading(&forward) - heading(&forward_seen)).abs() < 1e-9);
            assert!(right.dot(&(pose.rotation * nalgebra::Vector3::x())) > 0.99);
        }
        // Without a vertical: the camera's own axes.
        let (right, forward) = level_axes(&pose, None);
        assert!((forward - forward_seen).norm() < 1e-12 && right.z.abs() < 1e-12);
    }

    #[test]
    fn a_quarter_turn_keeps_a_pitched_cameras_position_and_pitch_and_turns_its_heading() {
        let (pose, level) = pitched_camera();
        let forward = |p: &Isometry3<f64>| p.rotation * nalgebra::Vector3::z();
        let heading = |p: &Isometry3<f64>| forward(p).y.atan2(forward(p).x).to_degrees();
        let up = nalgebra::Vector3::z();
        for degrees in [90.0, -90.0] {
            let turned = turned_about(&pose, Some(&up), degrees);
            assert!((turned.translation.vector - pose.translation.vector).norm() < 1e-12);
            assert!((forward(&turned).z - forward(&pose).z).abs() < 1e-12, "the pitch is kept");
            let turn = (heading(&turned) - heading(&pose) + 540.0).rem_euclid(360.0) - 180.0;
            assert!((turn - degrees).abs() < 1e-9, "turned {turn}°, not {degrees}°");
            // No roll: the camera's right stays level.
            assert!((turned.rotation * nalgebra::Vector3::x()).z.abs() < 1e-12);
        }
        // Without a vertical: about the camera's own up; a level camera turns as with the world's.
        let level_pose =
            Isometry3::from_parts(pose.translation, nalgebra::UnitQuaternion::from_rotation_matrix(&level));
        let by_world = turned_about(&level_pose, Some(&up), 90.0);
        let by_camera = turned_about(&level_pose, None, 90.0);
        assert!(by_world.rotation.angle_to(&by_camera.rotation) < 1e-12);
    }

    #[test]
    fn verified_poses_rank_by_correlation_weighed_by_inliers() {
        // A symmetric room: the pose turned 180° correlates better on a few matches than the true one on many.
        let mut search = Search::default();
        search.consider(judged(0.0, 0.0, 153, 0.63, true));
        search.consider(judged(4.8, 180.0, 32, 0.75, true));
        assert_eq!(search.outcome().accepted.map(|a| a.inliers), Some(153));
        // Past 50 inliers correlation decides.
        let mut search = Search::default();
        search.consider(judged(0.0, 0.0, 300, 0.6, true));
        search.consider(judged(0.1, 0.0, 60, 0.7, true));
        assert_eq!(search.outcome().accepted.map(|a| a.inliers), Some(60));
    }

    #[test]
    fn overwhelming_feature_evidence_outweighs_a_failed_check_only_when_nothing_is_verified() {
        let mut search = Search::default();
        search.consider(judged(0.0, 0.0, 200, 0.32, false));
        search.consider(judged(2.0, 0.0, 40, 0.45, false));
        let outcome = search.outcome();
        assert_eq!(outcome.accepted.map(|a| a.inliers), Some(200));
        assert!(outcome.best_rejected.is_none());
        // Too few inliers or too low a correlation: the best rejected guess, unverified.
        for candidate in [judged(0.0, 0.0, 149, 0.4, false), judged(0.0, 0.0, 300, 0.2, false)] {
            let mut search = Search::default();
            search.consider(candidate);
            let outcome = search.outcome();
            assert!(outcome.accepted.is_none());
            assert!(outcome.best_rejected.is_some());
        }
        // A verified pose wins.
        let mut search = Search::default();
        search.consider(judged(0.0, 0.0, 200, 0.32, false));
        search.consider(judged(3.0, 90.0, 30, 0.6, true));
        assert_eq!(search.outcome().accepted.map(|a| a.inliers), Some(30));
    }

    /// A keyframe at `world_from_camera` whose thumbnail sees a fronto-parallel surface `depth_m` away.
    fn keyframe(
        id: u32,
        camera: &PinholeCamera,
        world_from_camera: Isometry3<f64>,
        depth_m: f32,
    ) -> StoredKeyframe {
        let small = Thumbnail::camera_for(camera);
        let n = (small.width * small.height) as usize;
        StoredKeyframe {
            id,
            frame_index: id as usize,
            timestamp_s: f64::from(id),
            world_from_camera,
            features: Features::from_parts(Vec::new(), Vec::new(), camera.width, camera.height),
            points: Vec::new(),
            thumbnail: Thumbnail {
                camera: small,
                gray: (0..n).map(|k| (k % 200) as u8).collect(),
                depth_m: vec![depth_m; n],
            },
        }
    }

    #[test]
    fn the_keyframes_seeing_a_novel_view_are_chosen_over_near_ones_facing_away() {
        let camera = PinholeCamera::from_horizontal_fov(160, 128, 90.0).expect("camera");
        // The query at the origin looks along +z at a wall 5 m away.
        let query = Isometry3::identity();
        let map = SlamMap {
            camera,
            keyframes: vec![
                // Half a metre away, looking back (−z): sees nothing the query sees.
                keyframe(
                    0,
                    &camera,
                    Isometry3::from_parts(
                        Translation3::new(0.5, 0.0, 0.0),
                        UnitQuaternion::from_axis_angle(&Vector3::y_axis(), std::f64::consts::PI),
                    ),
                    4.0,
                ),
                // 3.9 m away (beyond the tracking's local-map radius), looking at the same wall from 2 m.
                keyframe(1, &camera, Isometry3::translation(2.5, 0.0, 3.0), 2.0),
                // Beside the query, looking at the wall's left part from 5 m.
                keyframe(2, &camera, Isometry3::translation(-2.0, 0.0, 0.0), 5.0),
            ],
            points: Vec::new(),
        };
        let relocalizer = Relocalizer::new(&map, &SlamConfig::default()).expect("relocalizer");
        let chosen = relocalizer.keyframes_seeing(&query, 3);
        assert!(!chosen.contains(&0), "a keyframe facing away was chosen: {chosen:?}");
        assert_eq!(chosen.len(), 2, "{chosen:?}");
        assert!(chosen.contains(&1) && chosen.contains(&2), "{chosen:?}");
        // Together they cover the query's image, so the photometric check can judge the pose.
        let thumbnail = Thumbnail {
            camera: Thumbnail::camera_for(&camera),
            gray: (0..40 * 32).map(|k| (k % 97) as u8).collect(),
            depth_m: Vec::new(),
        };
        let check = relocalizer.check(&thumbnail, &Pose3(query)).expect("covered");
        assert!(check.coverage > 0.6, "{check:?}");
    }

    /// A textured wall (rectangles of random grey levels) of `width` x `height` pixels.
    fn wall(width: usize, height: usize) -> GrayImage {
        let mut pixels = vec![128u8; width * height];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..900 {
            let (x, y) = ((next() % width as u64) as usize, (next() % height as u64) as usize);
            let (w, h) = (6 + (next() % 28) as usize, 6 + (next() % 28) as usize);
            let level = (next() % 256) as u8;
            for yy in y..(y + h).min(height) {
                for xx in x..(x + w).min(width) {
                    pixels[yy * width + xx] = level;
                }
            }
        }
        GrayImage { width: width as u32, height: height as u32, pixels }
    }

    #[test]
    fn squeezed_features_match_a_wall_seen_at_a_grazing_angle() {
        // The map saw the wall face on; the image sees it at a grazing angle, foreshortened 2.5 times
        // across (its middle 256 columns, the rest blank).
        let (width, height, tilt, offset) = (640usize, 512usize, 2.5f64, 192usize);
        let face_on = wall(width, height);
        let mut pixels = vec![128u8; width * height];
        for y in 0..height {
            for x in 0..256 {
                let sum: u32 = (0..5).map(|i| u32::from(face_on.pixels[y * width + (5 * x + i) / 2])).sum();
                pixels[y * width + offset + x] = (sum / 5) as u8;
            }
        }
        let grazing = GrayImage { width: width as u32, height: height as u32, pixels };
        let mut orb = OrbExtractor::new(&crate::features::OrbConfig::default()).expect("orb");
        let map = orb.extract_gray(&face_on.pixels, width as u32, height as u32, None).expect("map");
        let plain = orb.extract_gray(&grazing.pixels, width as u32, height as u32, None).expect("plain");
        let squeezed = squeezed_features(&mut orb, &grazing, &plain, &[tilt]).expect("squeezed");
        assert!(squeezed.len() > plain.len());
        assert_eq!(&squeezed.descriptors[..plain.len()], &plain.descriptors[..]);
        // Right matches: the nearest map descriptor within 50 bits, where the wall's point of the image
        // feature lies (within 10 pixels of the face-on view).
        let right = |features: &Features| {
            features
                .keypoints
                .iter()
                .zip(&features.descriptors)
                .filter(|(k, d)| {
                    let Some((distance, m)) =
                        map.descriptors.iter().enumerate().map(|(m, e)| (hamming(d, e), m)).min()
                    else {
                        return false;
                    };
                    let expected = (f64::from(k.u) - offset as f64 + 0.5) * tilt - 0.5;
                    let found = &map.keypoints[m];
                    distance <= 50
                        && (f64::from(found.u) - expected).abs() < 10.0
                        && (found.v - k.v).abs() < 10.0
                })
                .count()
        };
        let (before, after) = (right(&plain), right(&squeezed));
        assert!(after >= 20 && after >= 2 * before, "right matches: {before} plain, {after} with squeezed");
        // Every keypoint mapped back lies in the image.
        assert!(
            squeezed
                .keypoints
                .iter()
                .all(|k| k.u >= -1.0 && k.u <= width as f32 && k.v >= -1.0 && k.v <= height as f32)
        );
    }
}
