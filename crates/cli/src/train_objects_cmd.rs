//! `gst train-objects`: the map baseline's object classifier, learned on GST-Train scenes.
//!
//! Each training scene's exploration (its TUM export, with the ground-truth poses the generator wrote) is
//! mapped like the baseline maps a bench scene; the map's class-agnostic object candidates are labelled by
//! the scene's `annotations.json` (the object the candidate's centre lies in, plus the other objects whose
//! centres lie in its box) or kept as background, and a k-nearest-neighbour classifier over their features
//! is written as JSON. Ground truth is read here, on the train split, and never while answering: the bench's
//! candidates come from its own frames and SLAM poses. Two leave-one-scene-out figures are printed so that
//! the classifier's quality is measured, not assumed: labelled candidates classified right, and — what the
//! map answerer needs — for each class a scene has one object of, whether the candidate chosen for it holds
//! that object.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rayon::prelude::*;

use gst_core::ObjectClass;
use gst_io::TumSequence;
use gst_map::{
    MapConfig, NoPerception, ObjectCandidate, ObjectClassifier, TrainingSample, label_candidates,
    map_sequence, poses_per_frame, read_annotation_boxes,
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
    let per_scene: Vec<SceneSamples> = scenes
        .par_iter()
        .map(|scene| {
            let samples = scene_samples(&args.split, scene, args.frame_stride);
            bar.inc(1);
            samples
        })
        .collect::<Result<_>>()?;
    bar.finish_and_clear();

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for s in per_scene.iter().flat_map(|s| &s.samples) {
        *counts.entry(s.class.map_or("(background)".into(), |c| c.text().to_string())).or_default() += 1;
    }
    let held_out = leave_one_scene_out(&per_scene)?;
    let samples: Vec<TrainingSample> = per_scene.into_iter().flat_map(|s| s.samples).collect();
    let total = samples.len();
    let model = ObjectClassifier::train(samples)?;
    model.save(&args.out)?;
    let mut report = format!("{} candidates from {} scenes:", total, scenes.len());
    for (class, n) in &counts {
        report.push_str(&format!(" {class} {n},"));
    }
    report.pop();
    report.push('\n');
    if let Some(held) = held_out {
        let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
        report.push_str(&format!(
            "leave-one-scene-out: {}/{} labelled candidates classified right ({:.1}%); asked for each object \
             class present once in a scene, the best candidate holds it for {}/{} ({:.1}%)\n",
            held.correct,
            held.labelled,
            pct(held.correct, held.labelled),
            held.found,
            held.asked,
            pct(held.found, held.asked)
        ));
    }
    report.push_str(&format!("wrote {}\n", args.out.display()));
    #[allow(clippy::print_stdout)] // the command's report
    {
        print!("{report}");
    }
    Ok(())
}

/// One training scene's candidates and their labels (`samples[k]` labels `candidates[k]`), and the classes
/// it has exactly one object of (those a semantic question can name).
struct SceneSamples {
    candidates: Vec<ObjectCandidate>,
    samples: Vec<TrainingSample>,
    unique_classes: Vec<ObjectClass>,
}

/// The labelled candidates of one training scene.
fn scene_samples(split: &Path, scene: &str, frame_stride: usize) -> Result<SceneSamples> {
    let tum = split.join("tum").join(scene);
    let sequence = TumSequence::open(&tum, None)?;
    let truth = sequence.groundtruth().with_context(|| {
        format!("{}: no groundtruth.txt (training needs the generator's poses)", tum.display())
    })?;
    let poses = poses_per_frame(&sequence, truth);
    let config = MapConfig { frame_stride, ..MapConfig::default() };
    let map = map_sequence(&sequence, &poses, config, &mut NoPerception)?;
    let boxes = read_annotation_boxes(&split.join("scenes").join(scene).join("annotations.json"))?;
    let mut per_class: BTreeMap<ObjectClass, usize> = BTreeMap::new();
    for b in &boxes {
        *per_class.entry(b.class).or_default() += 1;
    }
    Ok(SceneSamples {
        samples: label_candidates(&map.candidates, &boxes, &map.map_from_world, scene),
        candidates: map.candidates,
        unique_classes: per_class.into_iter().filter(|(_, n)| *n == 1).map(|(c, _)| c).collect(),
    })
}

/// Held-out figures of [`leave_one_scene_out`].
struct HeldOut {
    /// Labelled candidates whose most likely class is their label.
    correct: usize,
    labelled: usize,
    /// Classes present once in a scene for which the best candidate ([`ObjectClassifier::best_candidate`])
    /// holds such an object, as the map answerer's semantic targets need.
    found: usize,
    asked: usize,
}

/// Each scene judged by a classifier trained on the other scenes. `None` with fewer than two scenes.
fn leave_one_scene_out(per_scene: &[SceneSamples]) -> Result<Option<HeldOut>> {
    if per_scene.len() < 2 {
        return Ok(None);
    }
    let mut held_out = HeldOut { correct: 0, labelled: 0, found: 0, asked: 0 };
    for (k, held) in per_scene.iter().enumerate() {
        let rest: Vec<TrainingSample> = per_scene
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != k)
            .flat_map(|(_, s)| s.samples.iter().cloned())
            .collect();
        let Ok(model) = ObjectClassifier::train(rest) else { continue };
        for sample in held.samples.iter().filter(|s| s.class.is_some()) {
            held_out.labelled += 1;
            let predicted: Option<Option<ObjectClass>> = model.classify(&sample.features).map(|c| c.0);
            if predicted == Some(sample.class) {
                held_out.correct += 1;
            }
        }
        // Chosen as the answerer chooses, judged by the labels of the chosen candidate.
        for &class in &held.unique_classes {
            held_out.asked += 1;
            if let Some((best, _)) = model.best_candidate(&held.candidates, class) {
                let position = held.candidates.iter().position(|c| std::ptr::eq(c, best));
                let Some(sample) = position.map(|k| &held.samples[k]) else { continue };
                if sample.class == Some(class) || sample.also.contains(&class) {
                    held_out.found += 1;
                }
            }
        }
    }
    Ok(Some(held_out))
}

/// The classifier `models/objects.json` as it was when this binary was built, so that the default does not
/// depend on the working directory or on where the binary was installed.
const BUILTIN_OBJECTS_MODEL: &str = include_str!("../../../models/objects.json");

/// The classifier at `path`, or the built-in one (the repository's `models/objects.json` at build time) when
/// `path` is `None`.
pub fn load_classifier(path: Option<&Path>) -> Result<Option<std::sync::Arc<ObjectClassifier>>> {
    let model = match path {
        Some(path) => ObjectClassifier::load(path)
            .with_context(|| format!("loading the object classifier {}", path.display()))?,
        None => {
            ObjectClassifier::from_json(BUILTIN_OBJECTS_MODEL, Path::new("<built-in models/objects.json>"))
                .context("the built-in object classifier")?
        }
    };
    Ok(Some(std::sync::Arc::new(model)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gst_map::FEATURE_COUNT;

    fn sample(class: Option<ObjectClass>, also: &[ObjectClass], x: f64, source: &str) -> TrainingSample {
        let mut features = vec![0.5; FEATURE_COUNT];
        features[0] = x;
        TrainingSample { class, also: also.to_vec(), features, source: source.into() }
    }

    #[test]
    fn held_out_scenes_count_the_objects_their_chosen_candidates_hold() -> Result<()> {
        use ObjectClass::{Bed, KitchenCabinet, Sofa, Stove};
        // Per scene: a kitchen counter (centre in the stove, the cabinet beside it), a bed, a wall fragment.
        let scene = |name: &str, jitter: f64| {
            let samples = vec![
                sample(Some(Stove), &[KitchenCabinet], 1.8 + jitter, name),
                sample(Some(Bed), &[], 2.0 + jitter, name),
                sample(None, &[], 0.2 + jitter, name),
            ];
            let candidates = samples
                .iter()
                .enumerate()
                .map(|(id, s)| ObjectCandidate {
                    id,
                    centroid_m: [id as f64, 0.0, 0.4],
                    bbox: gst_map::YawBox { center_m: [id as f64, 0.0, 0.4], size_m: [0.8; 3], yaw_rad: 0.0 },
                    voxels: 100,
                    color: [128; 3],
                    features: s.features.clone(),
                })
                .collect();
            // A sofa is annotated but no candidate holds one: asked, never found.
            SceneSamples { candidates, samples, unique_classes: vec![Bed, KitchenCabinet, Sofa, Stove] }
        };
        let scenes = [scene("a", 0.0), scene("b", 0.01), scene("c", 0.02)];
        let held = leave_one_scene_out(&scenes)?.expect("three scenes");
        assert_eq!((held.asked, held.found), (12, 9));
        assert_eq!((held.labelled, held.correct), (6, 6));
        assert!(leave_one_scene_out(&scenes[..1])?.is_none());
        Ok(())
    }
}
