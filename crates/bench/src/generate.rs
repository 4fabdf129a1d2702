//! The benchmark builder: one procedural house per scene, its exploration video, current views, object
//! annotations and the twelve GST subtasks (plus GST-Bench-Local for ED and EDist), written in the release's
//! question schema.
//!
//! Layout of one split directory (`DIR/<split>/`):
//! ```text
//! questions/<uid>.json                 GST question files (paths relative to this folder)
//! videos/<scene>/explore.mp4           the whole exploration (H.264)
//! videos/<scene>/obj_<id>.mp4          the same video with a red box on one target (_visual tasks)
//! videos/<scene>/clip_*.mp4, sub_*.mp4 Local-Video clips and sub-trajectory videos
//! images/<scene>/*.png                 current views, top-downs, option images
//! scenes/<scene>/scene.json            ground truth: the house; annotations.json: per-instance annotations
//! scenes/<scene>/done.json             written last: a scene with it is skipped on resume
//! tum/<scene>/                         TUM RGB-D export of the exploration (rgb/, depth/, *.txt, calibration;
//!                                      instances/ + instances.txt: ground-truth instance ids, oracle only)
//! ```
//! Every scene is built from its own seed (derived from the run's seed and the scene's index), so scenes
//! can be built in parallel and in any order with byte-identical results.

use std::collections::BTreeMap;

use rayon::prelude::*;
use std::path::{Path, PathBuf};

use nalgebra::Point3;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use gst_core::{
    Answer, Calibration, Image, InstanceId, ObjectClass, PinholeCamera, Pose3, Question, QuestionImage,
    Setting, TaskId,
};
use gst_sim::alter::{Alteration, alter_scene};
use gst_sim::annotate::{AnnotationBuilder, Bbox2, InstanceAnnotation, TargetFilter, draw_box};
use gst_sim::explore::{ExploreConfig, explore, sub_trajectories};
use gst_sim::geometry::build_render_scene;
use gst_sim::library::{FurnitureLibrary, ModelSplit};
use gst_sim::noise::DepthSensor;
use gst_sim::plan::PlanConfig;
use gst_sim::render::{Frame, RenderOptions, render, render_into};
use gst_sim::scene::{Scene, SceneConfig, generate_scene};
use gst_sim::topdown::{TopdownImages, TopdownMapping, render_topdowns};
use gst_sim::views::{CurrentView, ViewConfig, sample_current_views};
use gst_sim::walk::FreeSpace;

use crate::BenchError;
use crate::draw::{
    START_BLUE, TRAJECTORY_RED, binary_iou, discrete_frechet, draw_polyline, fill_disc, rgb_from_binary,
};
use crate::texts::{self, Target};

/// Depth PNG units per metre in TUM exports.
pub const DEPTH_SCALE: f64 = 5000.0;
/// Red of the target box in `_visual` videos, and its line width.
pub const MARK_RED: [u8; 3] = [255, 0, 0];
pub const MARK_THICKNESS_PX: u32 = 3;
/// Mixed into a scene's seed for the depth sensor's own random stream, so that the sensor model draws
/// nothing from the stream that builds the scene and its questions.
const DEPTH_SENSOR_SALT: u64 = 0xD3E7_5E45_0A11_0001;

/// Settings of the benchmark builder. Defaults give GST-Bench-like scenes: 1–4 minute explorations at
/// 10 fps, about 50 questions a scene.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GenerateConfig {
    pub scene: SceneConfig,
    pub explore: ExploreConfig,
    pub views: ViewConfig,
    /// GST's filters on object targets: seen long and large enough, not heavily occluded, not confusable.
    pub targets: TargetFilter,
    /// Current views sampled off the trajectory per scene (Pos, Ori and the object tasks use them).
    pub current_views: usize,
    /// Targets marked with a red box (ED_v, EDist_v, GP_v) per scene; each costs one marked video.
    pub visual_targets: usize,
    /// Named targets (ED_s, EDist_s, GP_s) per scene, among classes unique in the scene.
    pub semantic_targets: usize,
    /// Trajectory-selection questions per scene.
    pub trajectory_questions: usize,
    /// Top-down-selection questions per scene and level (Easy, Medium, Hard), each with its own distractors.
    pub topdown_questions: usize,
    /// Sub-trajectory duration range, seconds.
    pub sub_trajectory_s: [f64; 2],
    /// Length of Local-Video clips, seconds.
    pub local_clip_s: f64,
    /// Smallest Fréchet distance (metres) between trajectory options.
    pub min_option_frechet_m: f64,
    /// Largest IoU between the truth's binary top-down and a TDS-Hard distractor.
    pub max_distractor_iou: f64,
    /// The depth sensor of the TUM export (the RGB-D track's depth stream): a profile name (`kinect`,
    /// `d435`, `perfect`) or a full `DepthNoise` model. Default `kinect`. Only the export's depth goes
    /// through it; videos, images and every other file are the same for every sensor.
    pub depth_sensor: DepthSensor,
}

impl Default for GenerateConfig {
    fn default() -> Self {
        Self {
            scene: SceneConfig::default(),
            explore: ExploreConfig::default(),
            views: ViewConfig::default(),
            targets: TargetFilter::default(),
            current_views: 6,
            visual_targets: 2,
            semantic_targets: 2,
            trajectory_questions: 2,
            topdown_questions: 1,
            sub_trajectory_s: [5.0, 20.0],
            local_clip_s: 4.0,
            min_option_frechet_m: 1.0,
            max_distractor_iou: 0.9,
            depth_sensor: DepthSensor::default(),
        }
    }
}

/// What one built scene contributes to the manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SceneRecord {
    pub scene: String,
    pub seed: u64,
    pub rooms: usize,
    pub instances: usize,
    pub frames: usize,
    pub duration_s: f64,
    pub questions: BTreeMap<String, usize>,
    /// Wall time of building the scene in this run (not stored: output must not depend on timing).
    #[serde(skip)]
    pub seconds: f64,
}

/// The seed of scene `index` in a run with `seed` (splitmix64 of both).
pub fn scene_seed(seed: u64, index: usize) -> u64 {
    let mut x = seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Paths of one scene inside a split directory.
struct Paths {
    split: PathBuf,
    scene: String,
}

impl Paths {
    fn video(&self, name: &str) -> (PathBuf, String) {
        let relative = format!("videos/{}/{name}", self.scene);
        (self.split.join(&relative), relative)
    }
    fn image(&self, name: &str) -> (PathBuf, String) {
        let relative = format!("images/{}/{name}", self.scene);
        (self.split.join(&relative), relative)
    }
    fn scene_dir(&self) -> PathBuf {
        self.split.join("scenes").join(&self.scene)
    }
}

/// Accumulates the questions of one scene.
struct QuestionSet {
    scene: String,
    questions: Vec<Question>,
    counters: BTreeMap<String, usize>,
    /// Per trajectory-selection uid, the options' paths (world x, y), in option order: ground truth for
    /// checking that options are distinct.
    trajectory_options: BTreeMap<String, Vec<Vec<[f64; 2]>>>,
}

impl QuestionSet {
    /// Adds a question; `video` and `images` are split-relative paths, stored relative to `questions/`.
    fn add(
        &mut self,
        task: TaskId,
        setting: Setting,
        answer: Answer,
        texts: Vec<String>,
        video: &str,
        images: &[String],
    ) {
        let key = format!(
            "{}{}",
            texts::short(task),
            if setting.is_global() { String::new() } else { format!("_{}", setting.name()) }
        );
        let counter = self.counters.entry(key.clone()).or_insert(0);
        let uid = format!("{}_{}_{}", self.scene, key.replace('-', "_"), counter);
        *counter += 1;
        self.questions.push(Question {
            task,
            uid,
            scene: self.scene.clone(),
            answer,
            texts,
            source_video_path: video.to_string(),
            copied_video_path: format!("../{video}"),
            images: images
                .iter()
                .enumerate()
                .map(|(k, path)| QuestionImage {
                    index: k as u32 + 1,
                    source_path: path.clone(),
                    copied_path: format!("../{path}"),
                })
                .collect(),
            setting,
        });
    }
}

impl QuestionSet {
    /// The direction and distance questions (ED, EDist) of one target from one current view.
    fn add_egocentric(
        &mut self,
        tasks: [TaskId; 3],
        setting: Setting,
        target: Target<'_>,
        intro: &str,
        video: &str,
        view: &CurrentView,
        view_path: &str,
        center: &Point3<f64>,
    ) {
        let (angle, distance) = egocentric(&view.world_from_camera, center);
        let image = [view_path.to_string()];
        let texts = |question: String| vec![intro.to_string(), texts::CURRENT_VIEW.to_string(), question];
        self.add(tasks[0], setting, Answer::Degrees(angle), texts(texts::direction(target)), video, &image);
        self.add(tasks[1], setting, metres(distance), texts(texts::distance(target)), video, &image);
    }
}

/// Per-frame visible boxes of every instance, from one pass over the instance image.
fn frame_boxes(ids: &gst_core::InstanceImage) -> BTreeMap<u16, (Bbox2, u32)> {
    let mut boxes: BTreeMap<u16, (Bbox2, u32)> = BTreeMap::new();
    for (y, row) in ids.rows().enumerate() {
        for (x, &id) in row.iter().enumerate() {
            if id == 0 {
                continue;
            }
            let (x, y) = (x as u32, y as u32);
            let entry = boxes.entry(id).or_insert((Bbox2 { x_min: x, y_min: y, x_max: x, y_max: y }, 0));
            entry.0.x_min = entry.0.x_min.min(x);
            entry.0.y_min = entry.0.y_min.min(y);
            entry.0.x_max = entry.0.x_max.max(x);
            entry.0.y_max = entry.0.y_max.max(y);
            entry.1 += 1;
        }
    }
    boxes
}

/// Direction (degrees, left positive, integer) and distance (metres) from a camera to a world point.
fn egocentric(world_from_camera: &Pose3, target: &Point3<f64>) -> (i32, f64) {
    let p = world_from_camera.inverse().transform_point(target);
    let angle = (-p.x).atan2(p.z).to_degrees().round() as i32;
    let angle = if angle == -180 { 180 } else { angle };
    let distance = (target - Point3::from(world_from_camera.translation())).norm();
    (angle, distance)
}

fn metres(value: f64) -> Answer {
    Answer::Metres((value * 10.0).round() / 10.0)
}

fn point(mapping: &TopdownMapping, xy: [f64; 2]) -> Answer {
    Answer::Point(mapping.normalized_from_world(xy))
}

fn letter(k: usize) -> char {
    (b'A' + k as u8) as char
}

/// Shuffles four options with the truth at a random position; returns the options and the truth's letter.
fn shuffle_options<T>(truth: T, distractors: Vec<T>, rng: &mut impl Rng) -> (Vec<T>, char) {
    let mut options: Vec<(bool, T)> =
        std::iter::once((true, truth)).chain(distractors.into_iter().map(|d| (false, d))).collect();
    for k in (1..options.len()).rev() {
        options.swap(k, rng.gen_range(0..=k));
    }
    let answer = options.iter().position(|(is_truth, _)| *is_truth).unwrap_or(0);
    (options.into_iter().map(|(_, o)| o).collect(), letter(answer))
}

/// Builds one scene of a split: renders, writes media and returns its questions.
pub fn build_scene(
    split_dir: &Path,
    scene_name: &str,
    seed: u64,
    config: &GenerateConfig,
    library: &FurnitureLibrary,
) -> Result<(SceneRecord, Vec<Question>), BenchError> {
    let started = std::time::Instant::now();
    let paths = Paths { split: split_dir.to_path_buf(), scene: scene_name.to_string() };
    // A house whose furniture cuts a room off from the explorer is redrawn (a few percent of houses).
    const HOUSE_ATTEMPTS: usize = 5;
    let mut attempt = 0;
    let (scene, trajectory, mut rng) = loop {
        let house_seed = if attempt == 0 { seed } else { scene_seed(seed ^ 0x0E7_B0A7, attempt) };
        let mut rng = ChaCha8Rng::seed_from_u64(house_seed);
        let mut scene = generate_scene(house_seed, &config.scene, library)?;
        scene.name = scene_name.to_string();
        match explore(&scene, &config.explore, &mut rng) {
            Ok(trajectory) => break (scene, trajectory, rng),
            Err(error) if attempt + 1 < HOUSE_ATTEMPTS => {
                tracing::info!("{scene_name}: house {attempt} cannot be explored ({error}); drawing another");
                attempt += 1;
            }
            Err(error) => return Err(error.into()),
        }
    };
    let render_scene = build_render_scene(&scene, library)?;
    let topdowns = render_topdowns(&scene, library)?;
    let camera = PinholeCamera::gst_benchmark();
    let calibration =
        Calibration { camera, depth_scale: Some(DEPTH_SCALE), camera_name: Some("gst-640x512".into()) };
    let fps = config.explore.fps;
    let options = RenderOptions::default();

    // The exploration: video, TUM export, annotations and every instance's visible box per frame.
    let (explore_path, explore_video) = paths.video("explore.mp4");
    let mut video = gst_io::video::VideoWriter::create(&explore_path, camera.width, camera.height, fps)?;
    let mut tum = gst_io::tum::TumWriter::create(&split_dir.join("tum").join(scene_name), &calibration)?;
    let mut annotations = AnnotationBuilder::new(&scene);
    let mut boxes_per_frame: Vec<BTreeMap<u16, (Bbox2, u32)>> = Vec::with_capacity(trajectory.len());
    let mut frame = Frame::empty(camera.width, camera.height, options.background);
    let sensor = config.depth_sensor.model();
    let mut sensor_rng = ChaCha8Rng::seed_from_u64(scene_seed(seed ^ DEPTH_SENSOR_SALT, 0));
    for (k, pose) in trajectory.poses().iter().enumerate() {
        render_into(&render_scene, &camera, &pose.world_from_camera, &options, &mut frame);
        video.write(&frame.rgb)?;
        let sensed;
        let depth = match &sensor {
            Some(model) => {
                sensed = model.apply_sensor(&frame.depth, Some(&frame.rgb), camera.fx, &mut sensor_rng)?;
                &sensed
            }
            None => &frame.depth,
        };
        tum.add_frame(pose.timestamp_s, &frame.rgb, depth, Some(&pose.world_from_camera))?;
        tum.add_instances(&frame.instances)?;
        annotations.add_frame(k, &frame.instances);
        boxes_per_frame.push(frame_boxes(&frame.instances));
    }
    video.finish()?;
    tum.finish()?;
    let annotations = annotations.finish();
    tracing::debug!(
        "{scene_name}: exploration rendered and written in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let scene_dir = paths.scene_dir();
    gst_io::atomic_write(&scene_dir.join("scene.json"), scene.to_json().as_bytes())?;
    gst_io::write_json(&scene_dir.join("annotations.json"), &annotations)?;
    gst_io::write_json(&scene_dir.join("topdown.json"), &topdowns.mapping)?;
    gst_io::write_json(&scene_dir.join("trajectory.json"), &trajectory)?;

    let (binary_path, binary_rel) = paths.image("topdown_binary.png");
    gst_io::write_gray_png(&binary_path, &topdowns.binary)?;
    let mut videos: Vec<VideoJob> = Vec::new();
    let mut set = QuestionSet {
        scene: scene_name.to_string(),
        questions: Vec::new(),
        counters: BTreeMap::new(),
        trajectory_options: BTreeMap::new(),
    };

    // Current views: Pos and Ori.
    let free = FreeSpace::new(&scene, config.explore.clearance_m);
    let path_xy: Vec<[f64; 2]> = trajectory
        .poses()
        .iter()
        .map(|p| {
            let t = p.world_from_camera.translation();
            [t.x, t.y]
        })
        .collect();
    let views = sample_current_views(
        &scene,
        &render_scene,
        &camera,
        &free,
        &path_xy,
        config.current_views,
        &config.views,
        &mut rng,
    )?;
    // The views' true poses, for evaluation (relocalisation accuracy) and oracle modes; never given to a model.
    let view_records: Vec<serde_json::Value> = views
        .iter()
        .enumerate()
        .map(|(k, v)| {
            serde_json::json!({
                "image": paths.image(&format!("view_{k:02}.png")).1,
                "world_from_camera": v.world_from_camera,
                "room": v.room,
            })
        })
        .collect();
    gst_io::write_json(&scene_dir.join("views.json"), &view_records)?;
    let mut view_paths = Vec::new();
    for (k, view) in views.iter().enumerate() {
        let image = render(&render_scene, &camera, &view.world_from_camera, &options).rgb;
        let (path, relative) = paths.image(&format!("view_{k:02}.png"));
        gst_io::write_rgb_png(&path, &image)?;
        view_paths.push(relative.clone());
        let t = view.world_from_camera.translation();
        set.add(
            TaskId::SelfPosition,
            Setting::Global,
            point(&topdowns.mapping, [t.x, t.y]),
            texts::self_localization(texts::SELF_POSITION),
            &explore_video,
            &[relative.clone(), binary_rel.clone()],
        );
        let heading =
            TopdownMapping::heading_deg_from_world_yaw(view.world_from_camera.camera_yaw()).round() as i32;
        set.add(
            TaskId::SelfOrientation,
            Setting::Global,
            Answer::Degrees(if heading == -180 { 180 } else { heading }),
            texts::self_localization(texts::SELF_ORIENTATION),
            &explore_video,
            &[relative, binary_rel.clone()],
        );
    }

    tracing::debug!("{scene_name}: current views at {:.1} s", started.elapsed().as_secs_f64());
    // Object targets.
    let class_counts: BTreeMap<ObjectClass, usize> =
        scene.instances.iter().fold(BTreeMap::new(), |mut m, i| {
            *m.entry(i.class).or_insert(0) += 1;
            m
        });
    let mut candidates: Vec<&InstanceAnnotation> = annotations
        .iter()
        .filter(|a| {
            // The filter measures occlusion and confusers in the target's best frame, rendered again.
            trajectory.poses().get(a.best_frame_idx).is_some_and(|pose| {
                let best = render(&render_scene, &camera, &pose.world_from_camera, &options);
                config.targets.accepts(a, &annotations, &best.instances, &camera, &pose.world_from_camera)
            })
        })
        .collect();
    for k in (1..candidates.len()).rev() {
        candidates.swap(k, rng.gen_range(0..=k));
    }
    let semantic: Vec<&InstanceAnnotation> = candidates
        .iter()
        .copied()
        .filter(|a| class_counts.get(&a.class) == Some(&1))
        .take(config.semantic_targets)
        .collect();
    let visual: Vec<&InstanceAnnotation> = candidates
        .iter()
        .copied()
        .filter(|a| !semantic.iter().any(|s| s.id == a.id))
        .take(config.visual_targets)
        .collect();

    for (annotation, marked) in semantic.iter().map(|a| (*a, false)).chain(visual.iter().map(|a| (*a, true)))
    {
        let Some(instance) = scene.instances.iter().find(|i| i.id == annotation.id) else { continue };
        let center = instance.bbox.center();
        let name = instance.class.text();
        let (target, tasks, video_rel) = if marked {
            let (path, relative) = paths.video(&format!("obj_{}.mp4", instance.id.0));
            videos.push(VideoJob { path, range: 0..trajectory.len(), mark: Some(instance.id) });
            (
                Target::Marked,
                [
                    TaskId::EgocentricDirectionVisual,
                    TaskId::EgocentricDistanceVisual,
                    TaskId::GlobalPositionVisual,
                ],
                relative,
            )
        } else {
            (
                Target::Named(name),
                [
                    TaskId::EgocentricDirectionSemantic,
                    TaskId::EgocentricDistanceSemantic,
                    TaskId::GlobalPositionSemantic,
                ],
                explore_video.clone(),
            )
        };
        // Global setting: a current view in which the target is not visible.
        let hidden: Vec<usize> = (0..views.len()).filter(|&k| !visible_in(&views[k], instance.id)).collect();
        if let Some(&k) = hidden.get(rng.gen_range(0..hidden.len().max(1))) {
            set.add_egocentric(
                tasks,
                Setting::Global,
                target,
                texts::VIDEO_WHOLE_PERIOD,
                &video_rel,
                &views[k],
                &view_paths[k],
                &center,
            );
            // Local-Video: a short clip around the target's best frame, same current view.
            let clip = clip_range(
                annotation.best_frame_idx,
                trajectory.len(),
                (config.local_clip_s * fps).round() as usize,
            );
            let (clip_path, clip_rel) = paths.video(&format!("clip_{}.mp4", instance.id.0));
            let marks = if marked { Some(instance.id) } else { None };
            videos.push(VideoJob { path: clip_path, range: clip, mark: marks });
            set.add_egocentric(
                tasks,
                Setting::LocalVideo,
                target,
                texts::VIDEO_CLIP,
                &clip_rel,
                &views[k],
                &view_paths[k],
                &center,
            );
        }
        // Local-Image: a current view in which the target is visible.
        if let Some(k) = (0..views.len()).find(|&k| visible_in(&views[k], instance.id)) {
            set.add_egocentric(
                tasks,
                Setting::LocalImage,
                target,
                texts::VIDEO_WHOLE_PERIOD,
                &video_rel,
                &views[k],
                &view_paths[k],
                &center,
            );
        }
        set.add(
            tasks[2],
            Setting::Global,
            point(&topdowns.mapping, [center.x, center.y]),
            vec![texts::VIDEO_WHOLE.into(), texts::TOPDOWN.into(), texts::global_position(target)],
            &video_rel,
            std::slice::from_ref(&binary_rel),
        );
    }

    tracing::debug!("{scene_name}: object questions at {:.1} s", started.elapsed().as_secs_f64());
    // Trajectory selection (its sub-trajectory videos join the other cut videos).
    trajectory_selection(&paths, &trajectory, &topdowns, config, &mut set, &mut videos, &mut rng)?;
    // The cut videos (marked, clips, sub-trajectories) are encoded in one pass over the lossless TUM frames,
    // on a second thread while top-down selection builds its distractor plans.
    let frames = gst_io::TumSequence::open(&split_dir.join("tum").join(scene_name), Some(DEPTH_SCALE))?;
    let frames: Vec<PathBuf> = frames.entries().iter().map(|e| e.rgb_path.clone()).collect();
    std::thread::scope(|scope| -> Result<(), BenchError> {
        let writing = scope.spawn(|| write_videos(&videos, &frames, &boxes_per_frame, fps));
        let selection = topdown_selection(
            &paths,
            &scene,
            &topdowns,
            seed,
            config,
            library,
            &explore_video,
            &mut set,
            &mut rng,
        );
        tracing::debug!("{scene_name}: top-down selection at {:.1} s", started.elapsed().as_secs_f64());
        let written = writing.join().unwrap_or_else(|_| {
            Err(BenchError::Generate(format!("{scene_name}: the video writer panicked")))
        });
        tracing::debug!("{scene_name}: videos written at {:.1} s", started.elapsed().as_secs_f64());
        selection.and(written)
    })?;

    gst_io::write_json(&scene_dir.join("trajectory_options.json"), &set.trajectory_options)?;
    let mut counts = BTreeMap::new();
    for q in &set.questions {
        *counts
            .entry(format!(
                "{}{}",
                q.task.column(),
                if q.setting.is_global() { String::new() } else { format!(" {}", q.setting.name()) }
            ))
            .or_insert(0) += 1;
    }
    let record = SceneRecord {
        scene: scene_name.to_string(),
        seed,
        rooms: scene.plan.rooms.len(),
        instances: scene.instances.len(),
        frames: trajectory.len(),
        duration_s: trajectory.duration_s(),
        questions: counts,
        seconds: started.elapsed().as_secs_f64(),
    };
    Ok((record, set.questions))
}

fn visible_in(view: &CurrentView, id: InstanceId) -> bool {
    view.visible.iter().any(|(v, _)| *v == id)
}

fn clip_range(center: usize, len: usize, frames: usize) -> std::ops::Range<usize> {
    let start = center.saturating_sub(frames / 2).min(len.saturating_sub(frames));
    start..(start + frames).min(len)
}

/// A video cut from the exploration: a range of its frames, optionally with a red box on one instance.
#[derive(Debug)]
struct VideoJob {
    path: PathBuf,
    range: std::ops::Range<usize>,
    mark: Option<InstanceId>,
}

/// Writes every job in one pass over the exploration's frames (`frames`: the TUM export's lossless colour
/// images, so nothing is encoded twice). Each frame is read once; each video's encoder runs on its own
/// thread (see `gst_io::video`), so the encodes overlap.
fn write_videos(
    jobs: &[VideoJob],
    frames: &[PathBuf],
    boxes: &[BTreeMap<u16, (Bbox2, u32)>],
    fps: f64,
) -> Result<(), BenchError> {
    if let Some(job) = jobs.iter().find(|j| j.range.is_empty() || j.range.end > frames.len()) {
        return Err(BenchError::Generate(format!(
            "{}: frames {:?} are not within the exploration's {} frames",
            job.path.display(),
            job.range,
            frames.len()
        )));
    }
    let mut writers: Vec<Option<gst_io::video::VideoWriter>> = jobs.iter().map(|_| None).collect();
    let last = jobs.iter().map(|j| j.range.end).max().unwrap_or(0);
    for (k, frame_path) in frames.iter().enumerate().take(last) {
        if !jobs.iter().any(|j| j.range.contains(&k)) {
            continue;
        }
        let image = gst_io::read_rgb(frame_path)?;
        for (job, slot) in jobs.iter().zip(writers.iter_mut()) {
            if !job.range.contains(&k) {
                continue;
            }
            let writer = match slot {
                Some(w) => w,
                None => slot.insert(gst_io::video::VideoWriter::create(
                    &job.path,
                    image.width(),
                    image.height(),
                    fps,
                )?),
            };
            match job.mark.and_then(|id| boxes.get(k).and_then(|b| b.get(&id.0))) {
                Some((bbox, _)) => {
                    let mut marked = image.clone();
                    draw_box(&mut marked, bbox, MARK_RED, MARK_THICKNESS_PX);
                    writer.write(&marked)?;
                }
                None => writer.write(&image)?,
            }
            if k + 1 == job.range.end
                && let Some(done) = slot.take()
            {
                done.finish()?;
            }
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn topdown_selection(
    paths: &Paths,
    scene: &Scene,
    topdowns: &TopdownImages,
    seed: u64,
    config: &GenerateConfig,
    library: &FurnitureLibrary,
    video: &str,
    set: &mut QuestionSet,
    rng: &mut impl Rng,
) -> Result<(), BenchError> {
    let truth = &topdowns.binary;
    let rooms = scene.plan.rooms.len();
    let area: f64 = scene.plan.rooms.iter().map(|r| r.area_m2()).sum();
    // Easy: other houses of any size. Medium: houses with the same room count and similar area.
    let other = |k: u64, same_size: bool| -> Result<Image<u8>, BenchError> {
        let mut config_k = config.scene.clone();
        if same_size {
            config_k.plan = PlanConfig {
                min_rooms: rooms,
                max_rooms: rooms,
                mean_room_area_m2: (area / rooms as f64).clamp(8.0, 60.0),
                ..config_k.plan
            };
        }
        let other = generate_scene(scene_seed(seed ^ 0xD15_7AC7, k as usize), &config_k, library)?;
        Ok(render_topdowns(&other, library)?.binary)
    };
    for (task, same_size) in [(TaskId::TopdownSelectionEasy, false), (TaskId::TopdownSelectionMedium, true)] {
        let mut k = if same_size { 100 } else { 0 };
        let limit = 200 + 100 * (config.topdown_questions.max(1) as u64 - 1);
        for question in 0..config.topdown_questions {
            let mut distractors = Vec::new();
            // Candidates are built four at a time in parallel and checked in order, so the choice does not
            // depend on the thread count; each question takes the next unused candidates.
            const BATCH: u64 = 4;
            while distractors.len() < 3 && k < limit {
                let batch: Vec<Result<Image<u8>, BenchError>> =
                    (k..k + BATCH).into_par_iter().map(|j| other(j, same_size)).collect();
                let mut used = 0;
                for image in batch {
                    if distractors.len() == 3 {
                        break;
                    }
                    used += 1;
                    let image = image?;
                    if binary_iou(truth, &image) < config.max_distractor_iou
                        && distractors.iter().all(|d| binary_iou(d, &image) < 0.98)
                    {
                        distractors.push(image);
                    }
                }
                k += used;
            }
            add_topdown_question(paths, task, question, truth, distractors, video, set, rng)?;
        }
    }
    // Hard: this house altered (mirrored, a room removed or added, doors moved).
    for question in 0..config.topdown_questions {
        let mut distractors: Vec<Image<u8>> = Vec::new();
        let mut alterations: Vec<Alteration> = Alteration::ALL.to_vec();
        for k in (1..alterations.len()).rev() {
            alterations.swap(k, rng.gen_range(0..=k));
        }
        for alteration in alterations.iter().cycle().take(12) {
            if distractors.len() == 3 {
                break;
            }
            let Some(altered) = alter_scene(scene, *alteration, rng) else { continue };
            let image = render_topdowns(&altered, library)?.binary;
            if binary_iou(truth, &image) < config.max_distractor_iou
                && distractors.iter().all(|d| binary_iou(d, &image) < config.max_distractor_iou)
            {
                distractors.push(image);
            }
        }
        add_topdown_question(
            paths,
            TaskId::TopdownSelectionHard,
            question,
            truth,
            distractors,
            video,
            set,
            rng,
        )?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn add_topdown_question(
    paths: &Paths,
    task: TaskId,
    question: usize,
    truth: &Image<u8>,
    distractors: Vec<Image<u8>>,
    video: &str,
    set: &mut QuestionSet,
    rng: &mut impl Rng,
) -> Result<(), BenchError> {
    if distractors.len() < 3 {
        tracing::warn!(
            "{}: only {} distractors for {}; question skipped",
            paths.scene,
            distractors.len(),
            task.column()
        );
        return Ok(());
    }
    let (options, answer) = shuffle_options(truth.clone(), distractors, rng);
    let mut images = Vec::new();
    for (k, image) in options.iter().enumerate() {
        // The first question of a level keeps the plain name (`TDS_E_A.png`), later ones are numbered.
        let name = if question == 0 {
            format!("{}_{}.png", task.column(), letter(k))
        } else {
            format!("{}_{question}_{}.png", task.column(), letter(k))
        };
        let (path, relative) = paths.image(&name);
        gst_io::write_gray_png(&path, image)?;
        images.push(relative);
    }
    set.add(
        task,
        Setting::Global,
        Answer::Choice(answer),
        texts::options(texts::VIDEO_WHOLE, texts::TOPDOWN_SELECTION),
        video,
        &images,
    );
    Ok(())
}

fn trajectory_selection(
    paths: &Paths,
    trajectory: &gst_core::Trajectory,
    topdowns: &TopdownImages,
    config: &GenerateConfig,
    set: &mut QuestionSet,
    videos: &mut Vec<VideoJob>,
    rng: &mut impl Rng,
) -> Result<(), BenchError> {
    let xy = |range: &std::ops::Range<usize>| -> Vec<[f64; 2]> {
        trajectory.poses()[range.clone()]
            .iter()
            .map(|p| {
                let t = p.world_from_camera.translation();
                [t.x, t.y]
            })
            .collect()
    };
    let candidates = sub_trajectories(trajectory, 12, config.sub_trajectory_s, rng);
    let mut asked = 0;
    for (k, truth) in candidates.iter().enumerate() {
        if asked == config.trajectory_questions {
            break;
        }
        // Three distractors, pairwise far (Fréchet) from the truth and from each other.
        let mut chosen: Vec<&std::ops::Range<usize>> = vec![truth];
        for other in candidates.iter().skip(k + 1).chain(candidates.iter().take(k)) {
            if chosen.len() == 4 {
                break;
            }
            if chosen.iter().all(|c| discrete_frechet(&xy(c), &xy(other)) >= config.min_option_frechet_m) {
                chosen.push(other);
            }
        }
        if chosen.len() < 4 {
            continue;
        }
        let (clip_path, clip_rel) = paths.video(&format!("sub_{asked}.mp4"));
        videos.push(VideoJob { path: clip_path, range: truth.clone(), mark: None });
        let distractors: Vec<std::ops::Range<usize>> = chosen[1..].iter().map(|r| (*r).clone()).collect();
        let (options, answer) = shuffle_options(truth.clone(), distractors, rng);
        let mut images = Vec::new();
        for (o, range) in options.iter().enumerate() {
            let mut image = rgb_from_binary(&topdowns.binary);
            let pixels: Vec<[f64; 2]> =
                xy(range).iter().map(|p| topdowns.mapping.pixel_from_world(*p)).collect();
            draw_polyline(&mut image, &pixels, 5.0, TRAJECTORY_RED);
            if let Some(start) = pixels.first() {
                fill_disc(&mut image, *start, 9.0, START_BLUE);
            }
            let (path, relative) = paths.image(&format!("traj_{asked}_{}.png", letter(o)));
            gst_io::write_rgb_png(&path, &image)?;
            images.push(relative);
        }
        set.add(
            TaskId::TrajectorySelection,
            Setting::Global,
            Answer::Choice(answer),
            texts::options(texts::VIDEO_SECTION, texts::TRAJECTORY_SELECTION),
            &clip_rel,
            &images,
        );
        if let Some(question) = set.questions.last() {
            let polylines = options.iter().map(xy).collect();
            set.trajectory_options.insert(question.uid.clone(), polylines);
        }
        asked += 1;
    }
    Ok(())
}

/// The benchmark's manifest: what was generated, with which settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format_version: u32,
    pub seed: u64,
    pub config: GenerateConfig,
    pub furniture_source: String,
    /// Per split, its scenes in order.
    pub splits: BTreeMap<String, Vec<SceneRecord>>,
    /// Per split, question counts per column (and setting).
    pub questions: BTreeMap<String, BTreeMap<String, usize>>,
}

/// One scene to build: split, name and seed.
#[derive(Clone, Debug)]
pub struct SceneJob {
    pub split: String,
    pub name: String,
    pub seed: u64,
}

/// The scenes of a run: `bench` scenes first, then `train` scenes, each with a seed derived from the run's
/// seed and its global index (so adding train scenes never changes bench scenes).
pub fn scene_jobs(bench_scenes: usize, train_scenes: usize, seed: u64) -> Vec<SceneJob> {
    (0..bench_scenes + train_scenes)
        .map(|k| {
            let (split, index) = if k < bench_scenes { ("bench", k) } else { ("train", k - bench_scenes) };
            SceneJob {
                split: split.to_string(),
                name: format!("scene_{index:03}"),
                seed: scene_seed(seed, k),
            }
        })
        .collect()
}

/// Builds one job unless its `done.json` exists (resume); writes its questions and the marker.
pub fn run_job(
    out: &Path,
    job: &SceneJob,
    config: &GenerateConfig,
    library: &FurnitureLibrary,
) -> Result<SceneRecord, BenchError> {
    let split_dir = out.join(&job.split);
    let done = split_dir.join("scenes").join(&job.name).join("done.json");
    if let Ok(text) = std::fs::read_to_string(&done)
        && let Ok(record) = serde_json::from_str::<SceneRecord>(&text)
        && record.seed == job.seed
    {
        return Ok(record);
    }
    // Training scenes of a bench furnished with held-out models take the other models: nothing trained on
    // them may have seen a test scene's furniture.
    let seen_config;
    let config = if job.split == "train" && config.scene.furnish.models == ModelSplit::Unseen {
        seen_config = {
            let mut c = config.clone();
            c.scene.furnish.models = ModelSplit::Seen;
            c
        };
        &seen_config
    } else {
        config
    };
    let (record, questions) = build_scene(&split_dir, &job.name, job.seed, config, library)?;
    for question in &questions {
        gst_io::gst::write_question(
            &split_dir.join("questions").join(format!("{}.json", question.uid)),
            question,
        )?;
    }
    gst_io::write_json(&done, &record)?;
    Ok(record)
}

/// Writes the manifest from the scene records (in job order).
pub fn write_manifest(
    out: &Path,
    seed: u64,
    config: &GenerateConfig,
    library: &FurnitureLibrary,
    records: &[(SceneJob, SceneRecord)],
) -> Result<Manifest, BenchError> {
    let mut splits: BTreeMap<String, Vec<SceneRecord>> = BTreeMap::new();
    let mut questions: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for (job, record) in records {
        splits.entry(job.split.clone()).or_default().push(record.clone());
        let counts = questions.entry(job.split.clone()).or_default();
        for (key, n) in &record.questions {
            *counts.entry(key.clone()).or_insert(0) += n;
        }
    }
    let manifest = Manifest {
        format_version: 1,
        seed,
        config: config.clone(),
        furniture_source: if library.uses_catalog() { "catalog".into() } else { "primitives".into() },
        splits,
        questions,
    };
    gst_io::write_json(&out.join("manifest.json"), &manifest)?;
    Ok(manifest)
}
