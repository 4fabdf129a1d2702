//! The explicit-map baseline: each scene's exploration becomes a SLAM map (for relocalising images) and a
//! semantic map (occupancy, rooms, objects), built once and cached; every question is answered by geometry
//! on them.
//!
//! - ED / EDist: the current view is relocalised (RGB only); the target is the red-boxed object of the
//!   question's marked video, located from the boxes and the exploration's depth (`_visual`), or the map's
//!   object of the named class (`_semantic`, needs object classes: oracle perception); then direction
//!   (left positive) and distance from the relocalised camera.
//! - GP / Pos / Ori: the map is registered to the question's top-down image (a 2D similarity) and the
//!   target, or the relocalised camera's position and heading, projected.
//! - TDS: the option whose registration scores highest.
//! - Traj: the sub-trajectory video's frames are relocalised; the path, projected through the registration
//!   to the options' plan, is compared with each option's red line and blue start.
//!
//! Fallbacks (a [`Reply::fallback`] with the reason, scored like any answer and counted per column): a
//! current view that does not relocalise takes the best pose the photometric check rejected
//! ([`gst_slam::RelocalizationOutcome::best_rejected`]), else the best render-and-compare pose
//! ([`gst_slam::Relocalizer::appearance_guess`]), either with its heading read from the view by the
//! Manhattan compass ([`gst_map::snap_heading`]) when the map and the view allow it; a target that cannot be found (no red box located, a
//! class the map does not have) is taken at the centre of the map's free space, 0.5 m above the floor; a
//! sub-trajectory with fewer than two relocalised frames is drawn from its frames' appearance guesses.
//!
//! Depth: the question videos are mp4 without depth; generated episodes ship the exploration's TUM RGB-D
//! export beside them (`<split>/tum/<scene>/`), and SLAM and mapping read frames, depth and calibration from
//! it. Local-Video clips are cut from the exploration: a clip is placed in it by matching its first frame to
//! the export's frames (thumbnails), so its boxes get the export's depth too.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nalgebra::Point3;

use gst_core::{ObjectClass, Pose3, RgbImage, Setting, TaskId};
use gst_io::TumSequence;
use gst_io::gst::QuestionFile;
use gst_map::{
    MapConfig, NoPerception, OraclePerception, Perception, Registration, SemanticMap, TopdownView,
    locate_marked_target_from, map_sequence, poses_per_frame, register, render_binary, render_semantic,
};
use gst_slam::SlamConfig;
use gst_slam::thumbnail::Thumbnail;

use crate::drawings::TrajectoryDrawing;
use crate::geometry::{egocentric, metres_text, point_text, wrap_deg};
use crate::scene_layout::{LAYOUT_HYPOTHESES, SceneLayout};
use crate::scene_slam::{PoseSource, SceneSlam, tum_dir};
use crate::{AnswerContext, Answerer, BaselineError, Grounding, Reply};

/// Where object classes come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectPerception {
    /// Ground-truth instance masks of the TUM export and `scenes/<scene>/annotations.json`: named oracle.
    Oracle,
    /// Only what the question's pixels show: red boxes in marked videos. Semantic targets are the map's
    /// object candidates scored by [`MapAnswererConfig::classifier`] when there is one, else none.
    Marked,
}

/// Where the camera of a question's current view comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewPoses {
    /// Relocalised from the image alone (RGB, no depth) against the SLAM map.
    Relocalised,
    /// ORACLE: the view's true pose from the generator's `scenes/<scene>/views.json` (needs
    /// [`PoseSource::OracleGroundTruth`], whose map is in the same world). Makes the answerer an upper
    /// bound of everything after localisation: the map, the target and the geometry of the answer.
    OracleGroundTruth,
}

/// Settings of the map answerer.
#[derive(Clone, Debug)]
pub struct MapAnswererConfig {
    pub poses: PoseSource,
    /// Cameras of current views: relocalised (default) or, ORACLE, their true poses.
    pub views: ViewPoses,
    pub perception: ObjectPerception,
    pub slam: SlamConfig,
    pub map: MapConfig,
    /// Frames of a sub-trajectory video relocalised (Traj), evenly spaced.
    pub trajectory_frames: usize,
    /// Object classes for the map's candidates (trained on GST-Train, `gst train-objects`): the target of a
    /// semantic question under marked perception is the candidate most likely of the named class.
    pub classifier: Option<Arc<gst_map::ObjectClassifier>>,
    /// Pose hypotheses from layout place recognition given to the relocaliser per current view
    /// ([`crate::scene_layout`]); 0 turns it off.
    pub layout_hypotheses: usize,
}

impl Default for MapAnswererConfig {
    fn default() -> Self {
        Self {
            poses: PoseSource::Slam,
            views: ViewPoses::Relocalised,
            perception: ObjectPerception::Marked,
            slam: SlamConfig::default(),
            map: MapConfig::default(),
            trajectory_frames: 12,
            classifier: None,
            layout_hypotheses: LAYOUT_HYPOTHESES,
        }
    }
}

/// What the answerer keeps of a scene.
struct SceneMemory {
    slam: SceneSlam,
    map: SemanticMap,
    sequence: TumSequence,
    /// One pose per frame of the export (world of the SLAM map), `None` where tracking failed.
    frame_poses: Vec<Option<Pose3>>,
    /// Thumbnails of every exploration frame, to place clips (computed on first use).
    thumbnails: Mutex<Option<Arc<Vec<Vec<u8>>>>>,
    registrations: Memo<Arc<Registration>>,
    targets: Memo<Option<[f64; 3]>>,
    /// Located current views (several questions share one view), with their fallback reasons.
    views: Memo<(Pose3, Option<String>)>,
    /// Layout place recognition (built on first use; `None` when the map or the keyframes allow none).
    layout: std::sync::OnceLock<Option<SceneLayout>>,
    /// [`ViewPoses::OracleGroundTruth`]: the current views' true poses by image path (canonical).
    true_views: Option<HashMap<PathBuf, Pose3>>,
}

impl SceneMemory {
    /// Up to `count` pose hypotheses for a current view from layout place recognition (none when it is
    /// unavailable).
    fn layout_hypotheses(&self, view: &RgbImage, count: usize) -> Vec<Pose3> {
        if count == 0 {
            return Vec::new();
        }
        self.layout().map(|l| l.hypotheses(view, count)).unwrap_or_default()
    }

    /// The layout hypotheses ranked below the first `skip` ([`SceneLayout::deeper_hypotheses`]): the
    /// relocaliser's last resort.
    fn deeper_layout_hypotheses(&self, view: &RgbImage, skip: usize) -> Vec<Pose3> {
        if skip == 0 {
            return Vec::new();
        }
        self.layout().map(|l| l.deeper_hypotheses(view, skip)).unwrap_or_default()
    }

    fn layout(&self) -> Option<&SceneLayout> {
        self.layout
            .get_or_init(|| {
                SceneLayout::build(&self.map, &self.slam.map, self.slam.sequence_dir()).unwrap_or_else(
                    |error| {
                        tracing::warn!("{error}: no layout place recognition");
                        None
                    },
                )
            })
            .as_ref()
    }
}

/// Results per file (a view, a marked video, a top-down image) that several questions share, each computed
/// once even when questions answered in parallel ask for it at the same time: the later ones wait for the
/// first's result rather than repeating its work. A failed computation is not kept.
struct Memo<V> {
    slots: Mutex<HashMap<PathBuf, Arc<Mutex<Option<V>>>>>,
}

impl<V: Clone> Memo<V> {
    fn new() -> Self {
        Memo { slots: Mutex::new(HashMap::new()) }
    }

    fn get_or_try(
        &self,
        key: &Path,
        compute: impl FnOnce() -> Result<V, BaselineError>,
    ) -> Result<V, BaselineError> {
        let slot = lock(&self.slots)?.entry(key.to_path_buf()).or_default().clone();
        let mut slot = lock(&slot)?;
        if let Some(value) = slot.as_ref() {
            return Ok(value.clone());
        }
        let value = compute()?;
        *slot = Some(value.clone());
        Ok(value)
    }
}

/// The geometric map answerer.
pub struct MapAnswerer {
    config: MapAnswererConfig,
    scenes: Mutex<BTreeMap<String, Arc<SceneMemory>>>,
}

impl std::fmt::Debug for MapAnswerer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MapAnswerer").field("config", &self.config).finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>, BaselineError> {
    mutex.lock().map_err(|_| BaselineError::Other("a lock was poisoned by a panic in another thread".into()))
}

impl MapAnswerer {
    pub fn new(config: MapAnswererConfig) -> Self {
        MapAnswerer { config, scenes: Mutex::new(BTreeMap::new()) }
    }

    /// The same answerer with `count` layout hypotheses per current view (0: none).
    pub fn with_layout_hypotheses(mut self, count: usize) -> Self {
        self.config.layout_hypotheses = count;
        self
    }

    fn scene(
        &self,
        question: &QuestionFile,
        context: &AnswerContext<'_>,
    ) -> Result<Arc<SceneMemory>, BaselineError> {
        let scene = &question.question.scene;
        if let Some(memory) = lock(&self.scenes)?.get(scene) {
            return Ok(memory.clone());
        }
        let memory = Arc::new(self.build_scene(scene, context)?);
        lock(&self.scenes)?.insert(scene.clone(), memory.clone());
        Ok(memory)
    }

    fn build_scene(&self, scene: &str, context: &AnswerContext<'_>) -> Result<SceneMemory, BaselineError> {
        let started = std::time::Instant::now();
        let memory = self.build_scene_now(scene, context)?;
        tracing::debug!("{scene}: SLAM and semantic map ready in {:.2} s", started.elapsed().as_secs_f64());
        Ok(memory)
    }

    fn build_scene_now(
        &self,
        scene: &str,
        context: &AnswerContext<'_>,
    ) -> Result<SceneMemory, BaselineError> {
        let slam = SceneSlam::load_or_build(
            context.split_dir,
            scene,
            context.cache_dir,
            self.config.poses,
            &self.config.slam,
        )?;
        let sequence = TumSequence::open(slam.sequence_dir(), None)?;
        let frame_poses = poses_per_frame(&sequence, &slam.trajectory);
        let suffix = match (self.config.poses, self.config.perception) {
            (PoseSource::Slam, ObjectPerception::Marked) => "",
            (PoseSource::Slam, ObjectPerception::Oracle) => "-oracle-objects",
            (PoseSource::OracleGroundTruth, ObjectPerception::Marked) => "-oracle-poses",
            (PoseSource::OracleGroundTruth, ObjectPerception::Oracle) => "-oracle-poses-objects",
        };
        let map_dir = context.cache_dir.join(format!("maps{suffix}")).join(scene);
        // A cached map of an older format is rebuilt.
        let cached = match SemanticMap::load(&map_dir) {
            Ok(map) => Some(map),
            Err(error) if map_dir.join("map.json").is_file() => {
                tracing::warn!("{}: {error}; rebuilding the map", map_dir.display());
                None
            }
            Err(_) => None,
        };
        let map = match cached {
            Some(map) => map,
            None => {
                let map = self.build_map(context.split_dir, scene, &sequence, &frame_poses)?;
                save_map(&map, &map_dir)?;
                map
            }
        };
        let true_views = match (self.config.views, self.config.poses) {
            (ViewPoses::Relocalised, _) => None,
            (ViewPoses::OracleGroundTruth, PoseSource::OracleGroundTruth) => {
                Some(read_true_views(context.split_dir, scene)?)
            }
            (ViewPoses::OracleGroundTruth, PoseSource::Slam) => {
                return Err(BaselineError::Other(
                    "ground-truth view poses need ground-truth exploration poses (the same world)".into(),
                ));
            }
        };
        Ok(SceneMemory {
            true_views,
            slam,
            map,
            sequence,
            frame_poses,
            thumbnails: Mutex::new(None),
            registrations: Memo::new(),
            targets: Memo::new(),
            views: Memo::new(),
            layout: std::sync::OnceLock::new(),
        })
    }

    fn build_map(
        &self,
        split_dir: &Path,
        scene: &str,
        sequence: &TumSequence,
        frame_poses: &[Option<Pose3>],
    ) -> Result<SemanticMap, BaselineError> {
        let map_error = |e: gst_map::MapError| BaselineError::Other(e.to_string());
        let mut perception: Box<dyn Perception> = match self.config.perception {
            ObjectPerception::Oracle => {
                let annotations = split_dir.join("scenes").join(scene).join("annotations.json");
                // ORACLE: the generator's instance masks, in the export beside the video.
                let export = tum_dir(split_dir, scene);
                Box::new(OraclePerception::open(&export, &annotations).map_err(map_error)?)
            }
            ObjectPerception::Marked => Box::new(NoPerception),
        };
        map_sequence(sequence, frame_poses, self.config.map.clone(), perception.as_mut()).map_err(map_error)
    }

    fn registration(
        &self,
        memory: &SceneMemory,
        image_path: &Path,
    ) -> Result<Arc<Registration>, BaselineError> {
        memory.registrations.get_or_try(image_path, || {
            let topdown = read_plan(image_path)?;
            Ok(Arc::new(
                register(&memory.map, &topdown)
                    .map_err(|e| BaselineError::file(image_path, e.to_string()))?,
            ))
        })
    }

    /// The target of a question, world frame (the SLAM map's): the red-boxed object of a marked video, or the
    /// map's object of the class the text names.
    fn target(&self, memory: &SceneMemory, question: &QuestionFile) -> Result<[f64; 3], BaselineError> {
        let uid = &question.question.uid;
        let none = |message: &str| BaselineError::Question { uid: uid.clone(), message: message.into() };
        if is_visual(question.question.task) {
            let video = question.video_path();
            let found = memory.targets.get_or_try(&video, || {
                let first_frame = self.clip_start(memory, &video)?;
                let camera = memory.slam.map.camera;
                Ok(locate_marked_target_from(
                    &video,
                    first_frame,
                    &memory.sequence,
                    &camera,
                    &memory.frame_poses,
                )
                .map_err(|e| BaselineError::file(&video, e.to_string()))?
                .map(|t| t.centroid_world_m))
            })?;
            return found.ok_or_else(|| none("no red box located in the marked video"));
        }
        let text = question.question.texts.join(" ").to_lowercase();
        let class = named_class(&text).ok_or_else(|| none("no object class named in the question"))?;
        if self.config.perception == ObjectPerception::Marked {
            let classifier = self.config.classifier.as_ref().ok_or_else(|| {
                none("no object classifier (semantic targets need object classes: gst train-objects)")
            })?;
            let (candidate, _) = classifier
                .best_candidate(&memory.map.candidates, class)
                .ok_or_else(|| none(&format!("no map object candidate scores as a {class}")))?;
            let p = memory.map.map_from_world.inverse().transform_point(&Point3::from(candidate.centroid_m));
            return Ok([p.x, p.y, p.z]);
        }
        let object = memory
            .map
            .objects
            .iter()
            .filter(|o| o.class == Some(class))
            .max_by_key(|o| o.observations)
            .ok_or_else(|| none(&format!("the map has no {class} (semantic targets need object classes)")))?;
        // Map frame → the SLAM map's world.
        let p = memory.map.map_from_world.inverse().transform_point(&Point3::from(object.centroid_m));
        Ok([p.x, p.y, p.z])
    }

    /// The exploration frame a marked video starts at: 0 for a whole-exploration video, else the frame whose
    /// thumbnail is closest to the video's first frame.
    fn clip_start(&self, memory: &SceneMemory, video: &Path) -> Result<usize, BaselineError> {
        let mut reader = gst_io::video::VideoReader::open(video)?;
        let frames = reader.frame_count_hint().unwrap_or(0);
        if frames + 2 >= memory.sequence.len() {
            return Ok(0);
        }
        let Some(first) = reader.next_frame()? else { return Ok(0) };
        let thumbnails = self.exploration_thumbnails(memory)?;
        let query = Thumbnail::new(&memory.slam.map.camera, &first, None, (0.0, 1.0)).gray;
        let best = thumbnails
            .iter()
            .enumerate()
            .map(|(k, t)| {
                (
                    t.iter()
                        .zip(&query)
                        .map(|(a, b)| (i32::from(*a) - i32::from(*b)).unsigned_abs())
                        .sum::<u32>(),
                    k,
                )
            })
            .min();
        Ok(best.map_or(0, |(_, k)| k))
    }

    /// Grey thumbnails of every exploration frame (what a clip's first frame is matched against), made once
    /// per scene.
    fn exploration_thumbnails(&self, memory: &SceneMemory) -> Result<Arc<Vec<Vec<u8>>>, BaselineError> {
        let mut cached = lock(&memory.thumbnails)?;
        if cached.is_none() {
            let camera = memory.slam.map.camera;
            let mut all = Vec::with_capacity(memory.sequence.len());
            for k in 0..memory.sequence.len() {
                let rgb = gst_io::read_rgb(&memory.sequence.entries()[k].rgb_path)?;
                all.push(Thumbnail::new(&camera, &rgb, None, (0.0, 1.0)).gray);
            }
            *cached = Some(Arc::new(all));
        }
        Ok(cached.clone().unwrap_or_default())
    }

    /// The camera of a question's image: relocalised, or the appearance fallback (with its reason).
    fn locate_view(
        &self,
        memory: &SceneMemory,
        question: &QuestionFile,
        image: usize,
    ) -> Result<(Pose3, Option<String>), BaselineError> {
        let path = question.image_paths().get(image).cloned().ok_or_else(|| BaselineError::Question {
            uid: question.question.uid.clone(),
            message: "no current view image".into(),
        })?;
        if let Some(truth) = &memory.true_views {
            let key = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            let pose = truth.get(&key).copied().ok_or_else(|| {
                BaselineError::file(&path, "oracle view poses: the image is not among the scene's views.json")
            })?;
            return Ok((pose, None));
        }
        memory.views.get_or_try(&path, || {
            let view = gst_io::read_rgb(&path)?;
            let mut relocalizer = memory.slam.relocalizer()?;
            let outcome = relocalizer.relocalize_outcome_with_deeper(
                &view,
                || memory.layout_hypotheses(&view, self.config.layout_hypotheses),
                || memory.deeper_layout_hypotheses(&view, self.config.layout_hypotheses),
            )?;
            let located = match (outcome.accepted, outcome.best_rejected) {
                (Some(found), _) => (found.world_from_camera, None),
                (None, Some(rejected)) => (
                    rejected.world_from_camera,
                    Some(format!(
                        "current view not verified: the best rejected pose (correlation {:.2}, {} inliers)",
                        rejected.ncc, rejected.inliers
                    )),
                ),
                (None, None) => {
                    let (keyframe, pose) =
                        relocalizer.appearance_guess(&view).ok_or_else(|| BaselineError::Question {
                            uid: question.question.uid.clone(),
                            message: "the current view could not be relocalised and the map has no keyframes"
                                .into(),
                        })?;
                    let reason = if keyframe == u32::MAX {
                        "current view not relocalised: the render-and-compare pose most alike".to_string()
                    } else {
                        format!(
                            "current view not relocalised: the pose of keyframe {keyframe}, the most alike"
                        )
                    };
                    (pose, Some(reason))
                }
            };
            // An unverified pose keeps its position and takes the heading the Manhattan compass reads from the
            // view (within 45° of the pose's own), when the map has clear wall directions and the view clear
            // lines along them.
            let located = match located {
                (pose, Some(reason)) => {
                    match gst_map::snap_heading(&memory.map, &memory.slam.map.camera, &view, &pose) {
                        Some((snapped, reading)) => (
                            snapped,
                            Some(format!(
                                "{reason}, its heading from the Manhattan compass (support {:.1})",
                                reading.support
                            )),
                        ),
                        None => (pose, Some(reason)),
                    }
                }
                verified => verified,
            };
            Ok(located)
        })
    }

    /// The question's target, or the centre of the map's free space (with the reason) when it cannot be
    /// found.
    fn target_or_fallback(
        &self,
        memory: &SceneMemory,
        question: &QuestionFile,
    ) -> Result<([f64; 3], Option<String>), BaselineError> {
        match self.target(memory, question) {
            Ok(target) => Ok((target, None)),
            Err(BaselineError::Question { message, .. }) => {
                let centre = free_space_centre(&memory.map).ok_or_else(|| BaselineError::Question {
                    uid: question.question.uid.clone(),
                    message: format!("{message}, and the map has no free space"),
                })?;
                Ok((centre, Some(format!("{message}: the centre of the map's free space"))))
            }
            Err(error) => Err(error),
        }
    }

    fn trajectory_choice(
        &self,
        memory: &SceneMemory,
        question: &QuestionFile,
    ) -> Result<Reply, BaselineError> {
        let images = question.image_paths();
        let drawings: Vec<Option<TrajectoryDrawing>> = images
            .iter()
            .map(|p| gst_io::read_rgb(p).map(|i| TrajectoryDrawing::read(&i)))
            .collect::<Result<_, _>>()?;
        // All options share the plan: register it once (drawings count as free floor).
        let plan = images.first().ok_or_else(|| BaselineError::Question {
            uid: question.question.uid.clone(),
            message: "no option images".into(),
        })?;
        let registration = self.registration(memory, plan)?;
        let mut reader = gst_io::video::VideoReader::open(&question.video_path())?;
        // Feature-only relocalisation (no render and compare): a dozen frames per question, and the path shape
        // survives a few frames that are not found.
        let mut relocalizer = memory.slam.feature_relocalizer()?;
        let mut path = Vec::new();
        let mut guessed = Vec::new();
        let mut k = 0usize;
        let pixel = |pose: &Pose3| {
            let t = pose.translation();
            registration.pixel_from_world([t.x, t.y, t.z])
        };
        // The frames follow one another: each is tracked from the last pose found (guided matching around
        // it), and relocalised from scratch only when that fails.
        let mut last: Option<Pose3> = None;
        let frames = reader.frame_count_hint().unwrap_or(0).max(1);
        let step = frames.div_ceil(self.config.trajectory_frames.max(2)).max(1);
        while let Some(frame) = reader.next_frame()? {
            if k.is_multiple_of(step) {
                let tracked = match &last {
                    Some(prior) => relocalizer.relocalize_near(&frame, prior)?,
                    None => None,
                };
                let found = match tracked {
                    Some(found) => Some(found),
                    None => relocalizer.relocalize(&frame)?,
                };
                match found {
                    Some(found) => {
                        path.push(pixel(&found.world_from_camera));
                        last = Some(found.world_from_camera);
                    }
                    None => {
                        guessed.extend(relocalizer.appearance_guess(&frame).map(|(_, pose)| pixel(&pose)))
                    }
                }
            }
            k += 1;
        }
        let mut fallback = None;
        if path.len() < 2 {
            fallback = Some(format!(
                "{} frames of the sub-trajectory relocalised: the path of their appearance guesses",
                path.len()
            ));
            path = guessed;
        }
        if path.len() < 2 {
            return Err(BaselineError::Question {
                uid: question.question.uid.clone(),
                message: "the sub-trajectory video has fewer than two usable frames".into(),
            });
        }
        let best = drawings
            .iter()
            .enumerate()
            .filter_map(|(k, d)| d.as_ref().map(|d| (d.mismatch(&path), k)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map_or(0, |(_, k)| k);
        Ok(Reply { text: letter(best), fallback, grounding: crate::Grounding::default() })
    }
}

impl Answerer for MapAnswerer {
    fn name(&self) -> String {
        let mut name = String::from("map-slam");
        if self.config.poses == PoseSource::OracleGroundTruth {
            name = "map-oracle-poses".into();
        }
        if self.config.views == ViewPoses::OracleGroundTruth {
            name.push_str(" (oracle views)");
        }
        if self.config.perception == ObjectPerception::Oracle {
            name.push_str(" (oracle objects)");
        }
        name
    }

    fn prepare(
        &self,
        _scene: &str,
        questions: &[&QuestionFile],
        context: &AnswerContext<'_>,
    ) -> Result<(), BaselineError> {
        // Everything the scene's questions share, so that it is built here (beside the answering of the scene
        // before) and not by the first question that needs it while others wait: SLAM and the semantic map,
        // the place index, and the thumbnails that clips of marked videos are placed with.
        let Some(first) = questions.first() else { return Ok(()) };
        let memory = self.scene(first, context)?;
        memory.slam.relocalizer()?;
        if questions.iter().any(|q| is_visual(q.question.task) && q.question.setting == Setting::LocalVideo) {
            self.exploration_thumbnails(&memory)?;
        }
        Ok(())
    }

    fn finish(&self, scene: &str) {
        if let Ok(mut scenes) = self.scenes.lock() {
            scenes.remove(scene);
        }
    }

    fn answer(&self, question: &QuestionFile, context: &AnswerContext<'_>) -> Result<Reply, BaselineError> {
        let started = std::time::Instant::now();
        let reply = self.answer_now(question, context);
        tracing::debug!("{}: answered in {:.2} s", question.question.uid, started.elapsed().as_secs_f64());
        reply
    }
}

impl MapAnswerer {
    fn answer_now(
        &self,
        question: &QuestionFile,
        context: &AnswerContext<'_>,
    ) -> Result<Reply, BaselineError> {
        let memory = self.scene(question, context)?;
        let task = question.question.task;
        let uid = &question.question.uid;
        match task {
            TaskId::EgocentricDirectionVisual
            | TaskId::EgocentricDirectionSemantic
            | TaskId::EgocentricDistanceVisual
            | TaskId::EgocentricDistanceSemantic => {
                let (target, target_fallback) = self.target_or_fallback(&memory, question)?;
                let (camera, view_fallback) = self.locate_view(&memory, question, 0)?;
                let (angle, distance) = egocentric(&camera, &Point3::from(target));
                let text = if matches!(
                    task,
                    TaskId::EgocentricDirectionVisual | TaskId::EgocentricDirectionSemantic
                ) {
                    angle.to_string()
                } else {
                    metres_text(distance)
                };
                let grounding = Grounding { camera: Some(camera), target: Some(target) };
                Ok(Reply { text, fallback: joined(target_fallback, view_fallback), grounding })
            }
            TaskId::GlobalPositionVisual | TaskId::GlobalPositionSemantic => {
                let (target, fallback) = self.target_or_fallback(&memory, question)?;
                let plan =
                    question.image_paths().first().cloned().ok_or_else(|| missing(uid, "top-down image"))?;
                let registration = self.registration(&memory, &plan)?;
                let pixel = registration.pixel_from_world(target);
                Ok(Reply {
                    text: point_text(pixel, registration.image_width, registration.image_height),
                    fallback,
                    grounding: Grounding { camera: None, target: Some(target) },
                })
            }
            TaskId::SelfPosition | TaskId::SelfOrientation => {
                // Images: the current view, then the top-down (as the generator writes them).
                let images = question.image_paths();
                let (view, plan) = current_view_and_plan(&images)?
                    .ok_or_else(|| missing(uid, "current view and top-down"))?;
                let (camera, fallback) = self.locate_view(&memory, question, view)?;
                let registration = self.registration(&memory, &images[plan])?;
                let text = if task == TaskId::SelfPosition {
                    let t = camera.translation();
                    let pixel = registration.pixel_from_world([t.x, t.y, t.z]);
                    point_text(pixel, registration.image_width, registration.image_height)
                } else {
                    wrap_deg(registration.heading_deg_from_world(&camera)).to_string()
                };
                Ok(Reply { text, fallback, grounding: Grounding { camera: Some(camera), target: None } })
            }
            TaskId::TopdownSelectionEasy | TaskId::TopdownSelectionMedium | TaskId::TopdownSelectionHard => {
                let mut best = (f64::NEG_INFINITY, 0);
                for (k, path) in question.image_paths().iter().enumerate() {
                    let score = self.registration(&memory, path)?.score;
                    if score > best.0 {
                        best = (score, k);
                    }
                }
                Ok(Reply::new(letter(best.1)))
            }
            TaskId::TrajectorySelection => self.trajectory_choice(&memory, question),
        }
    }
}

/// Both fallback reasons, when there are two.
fn joined(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

/// The centre of the map's free cells, 0.5 m above the estimated floor, in the poses' world.
fn free_space_centre(map: &SemanticMap) -> Option<[f64; 3]> {
    let g = &map.occupancy.frame;
    let mut sum = [0.0f64; 2];
    let mut count = 0usize;
    for (i, state) in map.occupancy.cells.iter().enumerate() {
        if *state == gst_map::CellState::Free {
            let c = g.world_from_cell((i % g.width as usize) as u32, (i / g.width as usize) as u32);
            sum = [sum[0] + c[0], sum[1] + c[1]];
            count += 1;
        }
    }
    if count == 0 {
        return None;
    }
    let n = count as f64;
    let centre = Point3::new(sum[0] / n, sum[1] / n, map.occupancy.floor_z_m + 0.5);
    let p = map.map_from_world.inverse().transform_point(&centre);
    Some([p.x, p.y, p.z])
}

fn missing(uid: &str, what: &str) -> BaselineError {
    BaselineError::Question { uid: uid.into(), message: format!("the question has no {what}") }
}

fn letter(k: usize) -> String {
    ['A', 'B', 'C', 'D'].get(k).copied().unwrap_or('A').to_string()
}

fn is_visual(task: TaskId) -> bool {
    matches!(
        task,
        TaskId::EgocentricDirectionVisual | TaskId::EgocentricDistanceVisual | TaskId::GlobalPositionVisual
    )
}

/// The object class a question names: the longest class name found in the text as whole words.
pub fn named_class(text: &str) -> Option<ObjectClass> {
    let words: Vec<&str> =
        text.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let joined = format!(" {} ", words.join(" "));
    ObjectClass::ALL
        .iter()
        .copied()
        .filter(|c| joined.contains(&format!(" {} ", c.text())))
        .max_by_key(|c| c.text().len())
}

/// Which of two images is the current view and which the top-down: the top-down is the one whose pixels
/// are more nearly all black or white.
fn current_view_and_plan(images: &[PathBuf]) -> Result<Option<(usize, usize)>, BaselineError> {
    if images.len() != 2 {
        return Ok(None);
    }
    let mut binary_share = [0.0; 2];
    for (k, path) in images.iter().enumerate() {
        let image = gst_io::read_rgb(path)?;
        let binary = image
            .data()
            .iter()
            .filter(|&&[r, g, b]| {
                let (lo, hi) = (r.min(g).min(b), r.max(g).max(b));
                hi - lo < 16 && (hi < 40 || lo > 215)
            })
            .count();
        binary_share[k] = binary as f64 / image.data().len().max(1) as f64;
    }
    Ok(Some(if binary_share[0] > binary_share[1] { (1, 0) } else { (0, 1) }))
}

/// A top-down image as a binary plan: white (and the red or blue of drawings) is free floor, all else not.
fn read_plan(path: &Path) -> Result<gst_core::Image<u8>, BaselineError> {
    let rgb: RgbImage = gst_io::read_rgb(path)?;
    let data = rgb
        .data()
        .iter()
        .map(|&[r, g, b]| {
            let (r, g, b) = (i32::from(r), i32::from(g), i32::from(b));
            let white = r > 200 && g > 200 && b > 200;
            let drawn = (r >= 150 && r - g.max(b) >= 60) || (b >= 150 && b - r.max(g) >= 60);
            if white || drawn { 255u8 } else { 0 }
        })
        .collect();
    gst_core::Image::from_vec(rgb.width(), rgb.height(), data)
        .map_err(|e| BaselineError::file(path, e.to_string()))
}

/// Writes a scene's map where the map answerers and the VLM `map` modes find it.
fn save_map(map: &SemanticMap, dir: &Path) -> Result<(), BaselineError> {
    let map_error = |e: gst_map::MapError| BaselineError::Other(e.to_string());
    map.save(dir).map_err(map_error)?;
    let view = TopdownView::fit(map, 640, 512);
    gst_io::write_gray_png(&dir.join("occupancy.png"), &render_binary(map, &view))?;
    gst_io::write_rgb_png(&dir.join("semantic.png"), &render_semantic(map, &view))?;
    Ok(())
}

/// The true poses of a generated scene's current views (`<split>/scenes/<scene>/views.json`, written by
/// `gst generate` for evaluation and oracle modes), by canonical image path.
fn read_true_views(split_dir: &Path, scene: &str) -> Result<HashMap<PathBuf, Pose3>, BaselineError> {
    #[derive(serde::Deserialize)]
    struct ViewRecord {
        image: PathBuf,
        world_from_camera: Pose3,
    }
    let path = split_dir.join("scenes").join(scene).join("views.json");
    let text = std::fs::read_to_string(&path).map_err(|e| BaselineError::io(&path, e))?;
    let records: Vec<ViewRecord> = serde_json::from_str(&text)
        .map_err(|e| BaselineError::file(&path, format!("not a views file: {e}")))?;
    Ok(records
        .into_iter()
        .map(|r| {
            let image = split_dir.join(&r.image);
            (std::fs::canonicalize(&image).unwrap_or(image), r.world_from_camera)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_named_class_as_whole_words() {
        assert_eq!(named_class("where is the sofa located?"), Some(ObjectClass::Sofa));
        assert_eq!(named_class("in which direction is the coffee table?"), Some(ObjectClass::CoffeeTable));
        assert_eq!(named_class("how far is the bed."), Some(ObjectClass::Bed));
        assert_eq!(named_class("bedside lamps are not beds"), None);
    }

    #[test]
    fn true_views_are_found_by_the_path_a_question_gives() -> Result<(), Box<dyn std::error::Error>> {
        let split = tempfile::tempdir()?;
        let scene_dir = split.path().join("scenes/house");
        std::fs::create_dir_all(&scene_dir)?;
        std::fs::create_dir_all(split.path().join("images/house"))?;
        std::fs::create_dir_all(split.path().join("questions"))?;
        std::fs::write(split.path().join("images/house/corner.png"), b"")?;
        let pose = Pose3::from_parts(
            nalgebra::Vector3::new(1.0, 2.0, 1.4),
            nalgebra::UnitQuaternion::from_euler_angles(0.1, 0.2, 0.3),
        );
        let records = serde_json::json!([{"image": "images/house/corner.png", "world_from_camera": pose}]);
        std::fs::write(scene_dir.join("views.json"), serde_json::to_string(&records)?)?;
        let views = read_true_views(split.path(), "house")?;
        // A question names its images relative to its own directory.
        let asked = split.path().join("questions/../images/house/corner.png");
        let found = views.get(&std::fs::canonicalize(&asked)?).ok_or("the view was not found")?;
        assert!((found.0.translation.vector - pose.0.translation.vector).norm() < 1e-12);
        assert!(found.0.rotation.angle_to(&pose.0.rotation) < 1e-12);
        // A scene without views.json is an error naming the file.
        let missing =
            read_true_views(split.path(), "other_house").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(missing.contains("other_house/views.json"), "{missing}");
        Ok(())
    }
}
