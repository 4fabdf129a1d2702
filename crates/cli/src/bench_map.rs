//! `gst bench map`: the semantic map on generated scenes with SLAM poses and noisy depth, against the
//! issue's targets: occupancy IoU, room MCC and F1, room-graph edge F1, object centroid error (oracle
//! perception), red-box target error (real perception on the marked videos), registration to the true
//! binary top-down (pixel error, and whether the true plan outscores the TDS distractors), and mapping time
//! per frame against SLAM's.
//!
//! Layout of `--out`: `noisy/<scene>/` (the TUM export with depth through `DepthNoise::default()`, colour and
//! instance images hard-linked; reused), `maps/<scene>/` (`gst map` output), `bench.json`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use gst_bench::generate::scene_seed;
use gst_io::{TumSequence, read_depth_png, read_trajectory_tum};
use gst_map::{SemanticMap, locate_marked_target, register};
use gst_sim::noise::DepthNoise;
use gst_slam::metrics::{Alignment, AlignmentKind, align, associate};

use crate::map_cmd::{MapRun, PerceptionKind, PoseSource, build_map};
use crate::map_eval_cmd::{MapEvaluation, evaluate_map};
use crate::progress;

#[derive(Debug, clap::Args)]
pub struct MapBenchArgs {
    /// A generated split (`gst generate --out DIR` → `DIR/bench`).
    #[arg(long)]
    pub split: PathBuf,
    /// Output directory (noisy copies are cached there and reused).
    #[arg(long, default_value = "out/bench-map")]
    pub out: PathBuf,
    /// Only the first N scenes.
    #[arg(long)]
    pub scenes: Option<usize>,
    /// Seed of the depth noise.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Exact rendered depth instead of the noise model.
    #[arg(long)]
    pub clean: bool,
    /// Where poses come from.
    #[arg(long, value_enum, default_value = "slam")]
    pub poses: PoseSource,
    /// Reuse the maps of an earlier run (`maps/<scene>/run.json`) instead of running SLAM and mapping again.
    #[arg(long)]
    pub reuse_maps: bool,
    /// Rebuild the maps from an earlier run's poses (`maps/<scene>/trajectory.tum`, SLAM's timings from its
    /// `run.json`) instead of running SLAM again: for trying map settings.
    #[arg(long, conflicts_with = "reuse_maps")]
    pub reuse_slam: bool,
    /// Map settings as JSON (a `MapConfig`; missing fields take their defaults).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One scene's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SceneResult {
    pub scene: String,
    pub frames: usize,
    pub evaluation: MapEvaluation,
    /// Marked targets: error of each located target's centre, metres (`None`: not located).
    pub target_errors_m: Vec<Option<f64>>,
    /// Registration trials: the true plan's score and each distinct TDS option's score.
    pub true_score: f64,
    pub distractor_scores: Vec<f64>,
    pub map_ms_per_frame: f64,
    pub slam_ms_per_frame: f64,
    pub slam_wall_ms_per_frame: f64,
}

#[derive(Serialize, Deserialize, PartialEq)]
struct NoiseRecord {
    seed: u64,
    noise: DepthNoise,
}

/// The TUM export with depth through the noise model (frame k seeded by `scene_seed(seed, k)`); colour and
/// instance images hard-linked (copied where links fail).
fn write_noisy_copy(clean: &Path, noisy: &Path, seed: u64) -> Result<()> {
    let record = NoiseRecord { seed, noise: DepthNoise::default() };
    let record_path = noisy.join("noise.json");
    if noisy.join("rgb.txt").is_file()
        && let Ok(text) = std::fs::read_to_string(&record_path)
        && serde_json::from_str::<NoiseRecord>(&text).is_ok_and(|cached| cached == record)
    {
        return Ok(());
    }
    if noisy.exists() {
        std::fs::remove_dir_all(noisy).with_context(|| format!("cannot clear {}", noisy.display()))?;
    }
    let sequence = TumSequence::open(clean, None)?;
    let scale = sequence.depth_scale();
    for sub in ["rgb", "depth", "instances"] {
        let from = clean.join(sub);
        let to = noisy.join(sub);
        std::fs::create_dir_all(&to).with_context(|| format!("cannot create {}", to.display()))?;
        if sub == "depth" || !from.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(&from).with_context(|| format!("reading {}", from.display()))? {
            let path = entry?.path();
            let target = to.join(path.file_name().context("file name")?);
            if std::fs::hard_link(&path, &target).is_err() {
                std::fs::copy(&path, &target).with_context(|| format!("cannot copy {}", path.display()))?;
            }
        }
    }
    let bar = progress::bar(sequence.len() as u64, "noisy depth");
    sequence.entries().par_iter().enumerate().try_for_each(|(k, entry)| -> Result<()> {
        let relative = entry.depth_path.strip_prefix(clean).context("depth outside the sequence")?;
        let depth = read_depth_png(&entry.depth_path, scale)?;
        let mut rng = ChaCha8Rng::seed_from_u64(scene_seed(seed, k));
        gst_io::write_depth_png(&noisy.join(relative), &record.noise.apply(&depth, &mut rng), scale)?;
        bar.inc(1);
        Ok(())
    })?;
    bar.finish_and_clear();
    for name in ["calibration.yaml", "groundtruth.txt", "instances.txt", "depth.txt", "rgb.txt"] {
        if let Ok(bytes) = std::fs::read(clean.join(name)) {
            gst_io::atomic_write(&noisy.join(name), &bytes)?;
        }
    }
    gst_io::write_json(&record_path, &record)?;
    Ok(())
}

#[derive(Deserialize)]
struct AnnotationCentre {
    id: u32,
    bbox3d: BboxCentre,
}

#[derive(Deserialize)]
struct BboxCentre {
    translation: [f64; 3],
}

pub fn run(args: &MapBenchArgs) -> Result<()> {
    let tum_root = args.split.join("tum");
    let mut scenes: Vec<String> = std::fs::read_dir(&tum_root)
        .with_context(|| format!("{}: not a generated split (no tum/)", args.split.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    scenes.sort();
    if let Some(n) = args.scenes {
        scenes.truncate(n);
    }
    if scenes.is_empty() {
        bail!("{}: no scenes", tum_root.display());
    }
    let config = crate::map_cmd::read_config(args.config.as_deref())?;
    let mut results = Vec::new();
    for scene in &scenes {
        eprintln!("{scene}");
        let clean = tum_root.join(scene);
        let input = if args.clean {
            clean.clone()
        } else {
            let noisy = args.out.join("noisy").join(scene);
            write_noisy_copy(&clean, &noisy, scene_seed(args.seed, 0))?;
            noisy
        };
        let scene_dir = args.split.join("scenes").join(scene);
        let map_dir = args.out.join("maps").join(scene);
        let cached = map_dir.join("run.json");
        let read_run = || -> Result<MapRun> {
            serde_json::from_str(&std::fs::read_to_string(&cached)?)
                .with_context(|| cached.display().to_string())
        };
        let run: MapRun = if args.reuse_maps && cached.is_file() {
            read_run()?
        } else if args.reuse_slam && cached.is_file() {
            let earlier = read_run()?;
            // The trajectory is read before `build_map` rewrites the directory.
            let poses = args.out.join("poses").join(format!("{scene}.tum"));
            std::fs::create_dir_all(poses.parent().context("poses dir")?)?;
            std::fs::copy(map_dir.join("trajectory.tum"), &poses)
                .with_context(|| format!("{}: no trajectory.tum to reuse", map_dir.display()))?;
            let run = build_map(
                &input,
                &map_dir,
                earlier.poses,
                Some(&poses),
                PerceptionKind::Oracle,
                Some(&scene_dir.join("annotations.json")),
                &config,
                true,
            )?;
            let run = MapRun {
                slam_ms_per_frame: earlier.slam_ms_per_frame,
                slam_wall_ms_per_frame: earlier.slam_wall_ms_per_frame,
                slam_frames: earlier.slam_frames,
                ..run
            };
            gst_io::write_json(&cached, &run)?;
            run
        } else {
            build_map(
                &input,
                &map_dir,
                args.poses,
                None,
                PerceptionKind::Oracle,
                Some(&scene_dir.join("annotations.json")),
                &config,
                true,
            )?
        };
        let images = args.split.join("images").join(scene);
        let truth_image = images.join("topdown_binary.png");
        let evaluation = evaluate_map(&map_dir, &scene_dir.join("scene.json"), None, Some(&truth_image))?;
        let map = SemanticMap::load(&map_dir)?;
        let truth_binary = gst_io::read_gray(&truth_image)?;
        let true_score = register(&map, &truth_binary)?.score;
        let mut options: Vec<PathBuf> = std::fs::read_dir(&images)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("TDS_")))
            .collect();
        options.sort();
        let mut distractor_scores = Vec::new();
        for option in options {
            let image = gst_io::read_gray(&option)?;
            if image.data() != truth_binary.data() {
                distractor_scores.push(register(&map, &image)?.score);
            }
        }
        let target_errors_m = locate_targets(&args.split, scene, &input, &map_dir, &scene_dir)?;
        results.push(SceneResult {
            scene: scene.clone(),
            frames: run.frames,
            evaluation,
            target_errors_m,
            true_score,
            distractor_scores,
            map_ms_per_frame: run.map_ms_per_frame,
            slam_ms_per_frame: run.slam_ms_per_frame,
            slam_wall_ms_per_frame: run.slam_wall_ms_per_frame,
        });
    }
    gst_io::write_json(&args.out.join("bench.json"), &results)?;
    #[allow(clippy::print_stdout)] // the command's report
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print_table(&results);
    }
    Ok(())
}

/// Locates every marked target of a scene with SLAM's poses and reports the error of each (aligned to
/// ground truth like the map).
fn locate_targets(
    split: &Path,
    scene: &str,
    input: &Path,
    map_dir: &Path,
    scene_dir: &Path,
) -> Result<Vec<Option<f64>>> {
    let videos = split.join("videos").join(scene);
    let mut marked: Vec<(u32, PathBuf)> = std::fs::read_dir(&videos)
        .with_context(|| format!("reading {}", videos.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let name = p.file_stem()?.to_str()?.to_string();
            name.strip_prefix("obj_")?.parse::<u32>().ok().map(|id| (id, p.clone()))
        })
        .collect();
    marked.sort();
    let sequence = TumSequence::open(input, None)?;
    let camera = match sequence.calibration() {
        Some(c) => c.camera,
        None => bail!("{}: no calibration.yaml", input.display()),
    };
    let estimate = read_trajectory_tum(&map_dir.join("trajectory.tum"))?;
    let truth = read_trajectory_tum(&map_dir.join("groundtruth.tum"))?;
    let alignment =
        align(&associate(&truth, &estimate, 0.01)?, AlignmentKind::Se3)?.unwrap_or_else(Alignment::identity);
    let stamps: Vec<f64> = estimate.poses().iter().map(|p| p.timestamp_s).collect();
    let poses: Vec<Option<gst_core::Pose3>> = sequence
        .entries()
        .iter()
        .map(|e| {
            let k = stamps.partition_point(|t| *t < e.timestamp_s - 1e-4);
            estimate
                .poses()
                .get(k)
                .filter(|p| (p.timestamp_s - e.timestamp_s).abs() < 1e-3)
                .map(|p| p.world_from_camera)
        })
        .collect();
    let text = std::fs::read_to_string(scene_dir.join("annotations.json"))?;
    let annotations: Vec<AnnotationCentre> = serde_json::from_str(&text)?;
    let mut errors = Vec::new();
    for (id, video) in marked {
        let Some(centre) = annotations.iter().find(|a| a.id == id).map(|a| a.bbox3d.translation) else {
            continue;
        };
        let located = locate_marked_target(&video, &sequence, &camera, &poses)?;
        errors.push(located.map(|t| {
            let p = alignment.transform_point(&nalgebra::Vector3::from(t.centroid_world_m));
            ((p.x - centre[0]).powi(2) + (p.y - centre[1]).powi(2) + (p.z - centre[2]).powi(2)).sqrt()
        }));
    }
    Ok(errors)
}

#[allow(clippy::print_stdout)] // the command's report
fn print_table(results: &[SceneResult]) {
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    println!(
        "| scene | frames | occupancy IoU | true free unknown / occupied; extra | room MCC | room F1 | edge F1 | object err m (median) | red-box target err m | registration err px (mean) | true plan wins | map ms/frame | SLAM ms/frame | added |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in results {
        let e = &r.evaluation;
        let wins = r.distractor_scores.iter().filter(|s| r.true_score > **s).count();
        let targets: Vec<String> = r.target_errors_m.iter().map(|t| opt(*t)).collect();
        println!(
            "| {} | {} | {:.3} | {:.3} / {:.3}; {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {:.2} | {}/{} | {:.2} | {:.2} | {:.0}% |",
            r.scene,
            r.frames,
            e.occupancy_iou,
            e.free_missed_unknown,
            e.free_missed_occupied,
            e.free_extra,
            e.room_mcc,
            e.room_f1,
            e.edge_f1,
            opt(e.object_median_error_m),
            targets.join(", "),
            e.registration_error_px_mean,
            wins,
            r.distractor_scores.len(),
            r.map_ms_per_frame,
            r.slam_ms_per_frame,
            if r.slam_ms_per_frame > 0.0 { 100.0 * r.map_ms_per_frame / r.slam_ms_per_frame } else { 0.0 },
        );
    }
}
