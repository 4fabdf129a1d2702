//! `gst train-objects`: the map baseline's object classifier, learned on GST-Train scenes.
//!
//! Each training scene's exploration (its TUM export, with the ground-truth poses the generator wrote) is
//! mapped like the baseline maps a bench scene; the map's class-agnostic object candidates are labelled by
//! the scene's `annotations.json` (the candidate's centre inside an annotated box) or kept as background,
//! and a k-nearest-neighbour classifier over their features is written as JSON. Ground truth is read here,
//! on the train split, and never while answering: the bench's candidates come from its own frames and SLAM
//! poses. A leave-one-scene-out accuracy is printed so that the classifier's quality is measured, not
//! assumed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rayon::prelude::*;

use gst_core::ObjectClass;
use gst_io::TumSequence;
use gst_map::{
    MapConfig, NoPerception, ObjectClassifier, TrainingSample, label_candidates, map_sequence,
    poses_per_frame, read_annotation_boxes,
};

/// Where `gst eval`, `gst demo` and `gst baselines` look for the classifier unless told otherwise.
pub const DEFAULT_OBJECTS_MODEL: &str = "models/objects.json";

#[derive(Debug, clap::Args)]
pub struct TrainObjectsArgs {
    /// Training split of `gst generate --train-scenes N` (for example data/gst/train): `tum/<scene>/` and
    /// `scenes/<scene>/annotations.json`.
    #[arg(long)]
    pub split: PathBuf,
    /// Where to write the classifier (JSON).
    #[arg(long, default_value = DEFAULT_OBJECTS_MODEL)]
    pub out: PathBuf,
    /// Map every n-th frame of each exploration.
    #[arg(long, default_value_t = 2)]
    pub frame_stride: usize,
}

pub fn run(args: &TrainObjectsArgs) -> Result<()> {
    if args.frame_stride == 0 {
        bail!("--frame-stride must be at least 1");
    }
    let tum_root = args.split.join("tum");
    let mut scenes: Vec<String> = std::fs::read_dir(&tum_root)
        .with_context(|| format!("{}: not a generated split (no tum/ directory)", args.split.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    scenes.sort();
    if scenes.is_empty() {
        bail!("{}: no scenes", tum_root.display());
    }
    let bar = crate::progress::bar(scenes.len() as u64, "mapping training scenes");
    let per_scene: Vec<Vec<TrainingSample>> = scenes
        .par_iter()
        .map(|scene| {
            let samples = scene_samples(&args.split, scene, args.frame_stride);
            bar.inc(1);
            samples
        })
        .collect::<Result<_>>()?;
    bar.finish_and_clear();

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for s in per_scene.iter().flatten() {
        *counts.entry(s.class.map_or("(background)".into(), |c| c.text().to_string())).or_default() += 1;
    }
    let held_out = leave_one_scene_out(&per_scene)?;
    let samples: Vec<TrainingSample> = per_scene.into_iter().flatten().collect();
    let total = samples.len();
    let model = ObjectClassifier::train(samples)?;
    model.save(&args.out)?;
    let mut report = format!("{} candidates from {} scenes:", total, scenes.len());
    for (class, n) in &counts {
        report.push_str(&format!(" {class} {n},"));
    }
    report.pop();
    report.push('\n');
    if let Some((correct, labelled)) = held_out {
        report.push_str(&format!(
            "leave-one-scene-out: {correct}/{labelled} labelled candidates classified right ({:.1}%)\n",
            100.0 * correct as f64 / labelled.max(1) as f64
        ));
    }
    report.push_str(&format!("wrote {}\n", args.out.display()));
    #[allow(clippy::print_stdout)] // the command's report
    {
        print!("{report}");
    }
    Ok(())
}

/// The labelled candidates of one training scene.
fn scene_samples(split: &Path, scene: &str, frame_stride: usize) -> Result<Vec<TrainingSample>> {
    let tum = split.join("tum").join(scene);
    let sequence = TumSequence::open(&tum, None)?;
    let truth = sequence.groundtruth().with_context(|| {
        format!("{}: no groundtruth.txt (training needs the generator's poses)", tum.display())
    })?;
    let poses = poses_per_frame(&sequence, truth);
    let config = MapConfig { frame_stride, ..MapConfig::default() };
    let map = map_sequence(&sequence, &poses, config, &mut NoPerception)?;
    let boxes = read_annotation_boxes(&split.join("scenes").join(scene).join("annotations.json"))?;
    Ok(label_candidates(&map.candidates, &boxes, &map.map_from_world, scene))
}

/// Accuracy on each scene's labelled candidates of a classifier trained on the other scenes: (right,
/// labelled). `None` with fewer than two scenes.
fn leave_one_scene_out(per_scene: &[Vec<TrainingSample>]) -> Result<Option<(usize, usize)>> {
    if per_scene.len() < 2 {
        return Ok(None);
    }
    let (mut correct, mut labelled) = (0, 0);
    for (k, held) in per_scene.iter().enumerate() {
        let rest: Vec<TrainingSample> = per_scene
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != k)
            .flat_map(|(_, s)| s.iter().cloned())
            .collect();
        let Ok(model) = ObjectClassifier::train(rest) else { continue };
        for sample in held.iter().filter(|s| s.class.is_some()) {
            labelled += 1;
            let predicted: Option<Option<ObjectClass>> = model.classify(&sample.features).map(|c| c.0);
            if predicted == Some(sample.class) {
                correct += 1;
            }
        }
    }
    Ok(Some((correct, labelled)))
}

/// The classifier at `path`, or at [`DEFAULT_OBJECTS_MODEL`] when `path` is `None` and that file exists
/// (`None` with a warning when it does not: semantic targets then fall back).
pub fn load_classifier(path: Option<&Path>) -> Result<Option<std::sync::Arc<ObjectClassifier>>> {
    let (path, explicit) = match path {
        Some(p) => (p.to_path_buf(), true),
        None => (PathBuf::from(DEFAULT_OBJECTS_MODEL), false),
    };
    if !explicit && !path.is_file() {
        tracing::warn!(
            "no object classifier at {} (gst train-objects): semantic targets take the fallback",
            path.display()
        );
        return Ok(None);
    }
    let model = ObjectClassifier::load(&path)
        .with_context(|| format!("loading the object classifier {}", path.display()))?;
    Ok(Some(std::sync::Arc::new(model)))
}
