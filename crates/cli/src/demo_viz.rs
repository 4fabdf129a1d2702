//! The demo's Rerun recording: the first scene of the demo bench — its ground-truth house, every 5th frame
//! of the exploration (colour, depth, instances, estimated and true camera), both trajectories with the
//! per-frame ATE, SLAM's map points, the semantic map, and every question of the scene with the answer
//! given and the true one. Images are JPEG-compressed (`ImageSettings::compact`) so the file stays small.
//!
//! Everything logged comes from files the demo wrote (the TUM export, the eval cache, the predictions):
//! nothing here feeds an answer.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use gst_baseline::scene_slam::tum_dir;
use gst_core::{Answer, Pose3, TaskId};
use gst_io::{QuestionReadOptions, read_bench_questions};
use gst_slam::metrics::{EvaluationOptions, evaluate};
use gst_viz::{
    CurrentView, FrameTime, ImageSettings, NamedImage, QuestionLog, Recorder, TopdownAnswer, TrajectoryKind,
};

/// Exploration frames logged: every this many.
const FRAME_STEP: usize = 5;

pub fn record(bench: &Path, eval_dir: &Path, rrd: &Path, spawn: bool) -> Result<()> {
    let recorder = if spawn { Recorder::spawn("gst demo")? } else { Recorder::to_file("gst demo", rrd)? };
    let recorder = recorder.with_images(ImageSettings::compact())?;
    let files = read_bench_questions(bench, QuestionReadOptions { check_files: false })?;
    let Some(scene) = files.iter().map(|f| f.question.scene.clone()).min() else { return Ok(()) };
    let cache = eval_dir.join("cache");

    let scene_file = bench.join("scenes").join(&scene).join("scene.json");
    if scene_file.is_file() {
        recorder.log_scene(&gst_sim::scene::Scene::load(&scene_file)?)?;
    }
    let sequence = gst_io::TumSequence::open(&tum_dir(bench, &scene), None)?;
    let estimate = gst_io::read_trajectory_tum(&cache.join("slam").join(&scene).join("trajectory.tum"))
        .context("the demo's SLAM trajectory")?;
    let mut gt_from_est: Option<gst_slam::metrics::Alignment> = None;
    if let Some(truth) = sequence.groundtruth() {
        let evaluation = evaluate(truth, &estimate, &EvaluationOptions::default())?;
        if let Some(alignment) = evaluation.alignment {
            recorder.log_world_from_slam(&alignment_pose(&alignment))?;
            gt_from_est = Some(alignment);
        }
        recorder.log_trajectory(TrajectoryKind::GroundTruth, truth)?;
    }
    recorder.log_trajectory(TrajectoryKind::Estimate, &estimate)?;
    if let Some(camera) = sequence.calibration().map(|c| c.camera) {
        recorder.log_camera_model(&camera)?;
    }
    let poses = gst_map::poses_per_frame(&sequence, &estimate);
    let truths: Vec<Option<Pose3>> = match sequence.groundtruth() {
        Some(truth) => gst_map::poses_per_frame(&sequence, truth),
        None => vec![None; sequence.len()],
    };
    for k in (0..sequence.len()).step_by(FRAME_STEP) {
        let frame = sequence.frame(k)?;
        let time = FrameTime::new(k, frame.timestamp_s);
        recorder.log_rgb(&time, &frame.rgb)?;
        recorder.log_depth(&time, &frame.depth)?;
        if let Some(ids) = sequence.instance_image(k)? {
            recorder.log_instances(&time, &ids)?;
        }
        if let Some(pose) = poses.get(k).copied().flatten() {
            recorder.log_camera_pose(&time, &pose)?;
            if let (Some(truth), Some(alignment)) = (truths.get(k).copied().flatten(), &gt_from_est) {
                let aligned = alignment.transform_pose(&pose);
                recorder.log_ate(&time, (aligned.translation() - truth.translation()).norm())?;
            }
        }
        if let Some(truth) = truths.get(k).copied().flatten() {
            recorder.log_groundtruth_pose(&time, &truth)?;
        }
    }
    let slam_map = gst_slam::SlamMap::load(&cache.join("slam").join(&scene).join(gst_slam::MAP_FILE))?;
    recorder.log_map_points(slam_map.points.iter().map(|p| p.position))?;
    let map_dir = cache.join("maps").join(&scene);
    if map_dir.join("map.json").is_file() {
        recorder.log_semantic_map(&gst_map::SemanticMap::load(&map_dir)?, None)?;
    }

    log_questions(&recorder, bench, &files, Some(&scene), eval_dir)?;
    recorder.finish()?;
    Ok(())
}

/// Logs the questions of `files` (those of `scene` only, when given) with the answers in
/// `eval_dir/predictions.jsonl` and the true ones, on the `question` timeline; where a prediction carries
/// its grounding, the located current view (in the camera of the scene's TUM export under `bench`) and the
/// target in 3D.
pub fn log_questions(
    recorder: &Recorder,
    bench: &Path,
    files: &[gst_io::gst::QuestionFile],
    scene: Option<&str>,
    eval_dir: &Path,
) -> Result<()> {
    let predictions: BTreeMap<String, gst_baseline::PredictionLine> =
        gst_baseline::read_predictions(&eval_dir.join("predictions.jsonl"))?
            .into_iter()
            .map(|p| (p.uid.clone(), p))
            .collect();
    let mut cameras: BTreeMap<String, Option<gst_core::PinholeCamera>> = BTreeMap::new();
    let chosen = files.iter().filter(|f| scene.is_none_or(|s| f.question.scene == s));
    for (index, file) in chosen.enumerate() {
        let q = &file.question;
        let line = predictions.get(&q.uid);
        let prediction = line.map(|p| p.prediction.clone()).unwrap_or_default();
        let grounding = line.map(|p| p.grounding).unwrap_or_default();
        let camera = match cameras.get(&q.scene) {
            Some(camera) => *camera,
            None => {
                let camera = scene_camera(bench, &q.scene);
                cameras.insert(q.scene.clone(), camera);
                camera
            }
        };
        let paths = file.image_paths();
        let images: Vec<gst_core::RgbImage> =
            paths.iter().map(|p| gst_io::read_rgb(p)).collect::<Result<_, _>>()?;
        let names: Vec<String> = (0..images.len()).map(|k| format!("image {}", k + 1)).collect();
        let truth_text = q.answer.to_raw().to_string();
        let point = |answer: Option<Answer>| match answer {
            Some(Answer::Point([x, y])) => Some([f64::from(x), f64::from(y)]),
            _ => None,
        };
        let heading = |answer: Option<Answer>| match answer {
            Some(Answer::Degrees(d)) => Some(f64::from(d)),
            _ => None,
        };
        let predicted = gst_core::extract::extract(q.task.answer_kind(), &prediction);
        // The top-down of GP / Pos / Ori questions is their last image.
        let topdown_task = matches!(
            q.task,
            TaskId::GlobalPositionVisual
                | TaskId::GlobalPositionSemantic
                | TaskId::SelfPosition
                | TaskId::SelfOrientation
        );
        let topdown = match (topdown_task, images.last()) {
            (true, Some(image)) => Some(TopdownAnswer {
                image,
                predicted: point(predicted),
                truth: point(Some(q.answer)),
                predicted_heading_deg: heading(predicted),
                truth_heading_deg: heading(Some(q.answer)),
            }),
            _ => None,
        };
        // The current view of ED / EDist / Pos / Ori questions is their first image.
        let current_view = match (grounding.camera, camera) {
            (Some(slam_from_camera), Some(camera)) => {
                Some(CurrentView { slam_from_camera, camera, image: images.first() })
            }
            _ => None,
        };
        // ED / EDist in 3D: the answer given points from the located camera to the target it used; the true
        // answer is the same point turned to the true direction (ED) or moved to the true distance (EDist).
        let (predicted_3d, truth_3d) = match (grounding.camera, grounding.target) {
            (Some(camera), Some(target)) if egocentric_task(q.task) => {
                (Some(target), true_egocentric_point(&camera, target, q.answer))
            }
            _ => (None, None),
        };
        let log = QuestionLog {
            uid: &q.uid,
            task: q.task.as_str(),
            texts: &q.texts,
            prediction: &prediction,
            ground_truth: &truth_text,
            images: images.iter().zip(&names).map(|(image, name)| NamedImage { name, image }).collect(),
            current_view,
            target: grounding.target,
            predicted: predicted_3d,
            truth: truth_3d,
            topdown,
        };
        recorder.log_question(index, &log)?;
    }
    Ok(())
}

fn egocentric_task(task: TaskId) -> bool {
    matches!(
        task,
        TaskId::EgocentricDirectionVisual
            | TaskId::EgocentricDirectionSemantic
            | TaskId::EgocentricDistanceVisual
            | TaskId::EgocentricDistanceSemantic
    )
}

/// Where the true ED / EDist answer puts the target, seen from the located camera: `target` (the answerer's)
/// turned about the camera's vertical axis to the true direction (left positive, `atan2(-x, z)` in the
/// camera frame), or scaled to the true distance.
fn true_egocentric_point(world_from_camera: &Pose3, target: [f64; 3], truth: Answer) -> Option<[f64; 3]> {
    let p = world_from_camera.inverse().transform_point(&nalgebra::Point3::from(target));
    let local = match truth {
        Answer::Degrees(degrees) => {
            let r = p.x.hypot(p.z);
            let a = f64::from(degrees).to_radians();
            nalgebra::Point3::new(-r * a.sin(), p.y, r * a.cos())
        }
        Answer::Metres(metres) => {
            let d = p.coords.norm();
            if d < 1e-9 {
                return None;
            }
            nalgebra::Point3::from(p.coords * (metres / d))
        }
        _ => return None,
    };
    let w = world_from_camera.transform_point(&local);
    Some([w.x, w.y, w.z])
}

/// The camera of a scene's exploration (its TUM export's calibration), which the current views share.
fn scene_camera(bench: &Path, scene: &str) -> Option<gst_core::PinholeCamera> {
    let sequence = gst_io::TumSequence::open(&tum_dir(bench, scene), None).ok()?;
    sequence.calibration().map(|c| c.camera)
}

/// `gt_world_from_est_world` of an SE(3) alignment as a pose.
fn alignment_pose(alignment: &gst_slam::metrics::Alignment) -> Pose3 {
    alignment.transform_pose(&Pose3::identity())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn true_answers_turn_or_stretch_the_answerers_target() {
        // A camera at (1, 2, 0) looking along world +x (camera z), camera y pointing down (world -z).
        let rotation = nalgebra::Matrix3::new(0.0, 0.0, 1.0, -1.0, 0.0, 0.0, 0.0, -1.0, 0.0);
        let camera = Pose3::from_rotation_matrix(nalgebra::Vector3::new(1.0, 2.0, 0.0), &rotation);
        let ahead = [4.0, 2.0, 0.0];
        // 90 degrees left of the optical axis: world +y (camera -x) at the same range.
        let left = true_egocentric_point(&camera, ahead, Answer::Degrees(90)).unwrap();
        assert!(
            (left[0] - 1.0).abs() < 1e-9 && (left[1] - 5.0).abs() < 1e-9 && left[2].abs() < 1e-9,
            "{left:?}"
        );
        let near = true_egocentric_point(&camera, ahead, Answer::Metres(1.5)).unwrap();
        assert!((near[0] - 2.5).abs() < 1e-9 && (near[1] - 2.0).abs() < 1e-9, "{near:?}");
        assert!(true_egocentric_point(&camera, ahead, Answer::Choice('A')).is_none());
    }
}
