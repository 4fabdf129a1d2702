//! Object classes for [`ObjectCandidate`]s: a k-nearest-neighbour classifier over their features, trained on
//! the candidates of GST-Train scenes labelled by those scenes' annotations (`gst train-objects`).
//!
//! Training is the only place ground truth enters (the train split's `annotations.json` labels the
//! candidates of its maps); at answer time the classifier sees only a candidate's features, computed from
//! the bench's own frames. Candidates that match no annotated object are kept as background samples, so
//! that wall fragments and clutter vote against every class.
//!
//! A candidate can hold several objects (a sink cabinet beside a stove and a kitchen cabinet is one cluster
//! of voxels): it is labelled with the object its centre lies in, plus every other annotated object whose
//! centre lies inside its box, and a neighbour votes for each of its labels. Asked for a kitchen cabinet,
//! the map then answers with the counter that holds it instead of with nothing.

use std::collections::BTreeMap;
use std::path::Path;

use nalgebra::{Matrix3, Point3, Vector3};
use serde::{Deserialize, Serialize};

use gst_core::{ObjectClass, Pose3};

use crate::MapError;
use crate::candidates::{FEATURE_COUNT, ObjectCandidate};

/// The `format` field of a classifier file.
pub const CLASSIFIER_FORMAT: &str = "gst-object-knn/1";
/// Neighbours that vote.
const DEFAULT_K: usize = 9;
/// A candidate's centre may lie this far outside an annotated box and still be that object, metres.
const LABEL_MARGIN_M: f64 = 0.15;

/// One labelled candidate: its features and the annotated class it matched (`None`: background).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingSample {
    /// The class of the object its centre lies in (`None`: background)...
    pub class: Option<ObjectClass>,
    /// ...and of the other objects inside its box (files without this field hold none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<ObjectClass>,
    pub features: Vec<f64>,
    /// Where it came from (`scene_003#12`), for inspection.
    pub source: String,
}

/// The trained classifier (a JSON file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectClassifier {
    pub format: String,
    pub k: usize,
    /// Per-feature mean and standard deviation of the training set (features are standardised).
    pub mean: Vec<f64>,
    pub scale: Vec<f64>,
    pub samples: Vec<TrainingSample>,
}

impl ObjectClassifier {
    /// Standardises the samples' features and keeps them. Errors on an empty set or on vectors of the
    /// wrong length.
    pub fn train(samples: Vec<TrainingSample>) -> Result<Self, MapError> {
        if samples.iter().all(|s| s.class.is_none()) {
            return Err(MapError::Invalid("no labelled object among the training samples".into()));
        }
        if let Some(bad) = samples.iter().find(|s| s.features.len() != FEATURE_COUNT) {
            return Err(MapError::Invalid(format!(
                "sample {} has {} features, expected {FEATURE_COUNT}",
                bad.source,
                bad.features.len()
            )));
        }
        let n = samples.len() as f64;
        let mean: Vec<f64> =
            (0..FEATURE_COUNT).map(|i| samples.iter().map(|s| s.features[i]).sum::<f64>() / n).collect();
        let scale: Vec<f64> = (0..FEATURE_COUNT)
            .map(|i| {
                let var = samples.iter().map(|s| (s.features[i] - mean[i]).powi(2)).sum::<f64>() / n;
                var.sqrt().max(1e-6)
            })
            .collect();
        Ok(Self { format: CLASSIFIER_FORMAT.into(), k: DEFAULT_K, mean, scale, samples })
    }

    /// The `k` nearest training samples of one feature vector with their inverse-distance weights,
    /// normalised to sum to one (empty for a vector of the wrong length).
    fn neighbours(&self, features: &[f64]) -> Vec<(f64, &TrainingSample)> {
        if features.len() != self.mean.len() || self.samples.is_empty() {
            return Vec::new();
        }
        let query: Vec<f64> =
            features.iter().zip(&self.mean).zip(&self.scale).map(|((f, m), s)| (f - m) / s).collect();
        let mut distances: Vec<(f64, &TrainingSample)> = self
            .samples
            .iter()
            .map(|s| {
                let d2: f64 = s
                    .features
                    .iter()
                    .zip(&self.mean)
                    .zip(&self.scale)
                    .zip(&query)
                    .map(|(((f, m), sc), q)| ((f - m) / sc - q).powi(2))
                    .sum();
                (d2.sqrt(), s)
            })
            .collect();
        distances.sort_by(|a, b| a.0.total_cmp(&b.0));
        distances.truncate(self.k.max(1));
        let mut weighted: Vec<(f64, &TrainingSample)> =
            distances.into_iter().map(|(d, s)| (1.0 / (d + 0.1), s)).collect();
        let total: f64 = weighted.iter().map(|w| w.0).sum();
        for w in &mut weighted {
            w.0 /= total;
        }
        weighted
    }

    /// Class scores of one feature vector: the inverse-distance-weighted votes of the `k` nearest training
    /// samples for the object their centre lies in, normalised to sum to one (background under `None`).
    pub fn scores(&self, features: &[f64]) -> BTreeMap<Option<ObjectClass>, f64> {
        let mut scores = BTreeMap::new();
        for (w, sample) in self.neighbours(features) {
            *scores.entry(sample.class).or_insert(0.0) += w;
        }
        scores
    }

    /// How strongly a feature vector's neighbourhood holds an object of `class`: the weight of the nearest
    /// samples labelled with it, whether as the object their centre lies in or as another object inside
    /// their box (in [0, 1]).
    pub fn holds_score(&self, features: &[f64], class: ObjectClass) -> f64 {
        self.neighbours(features)
            .into_iter()
            .filter(|(_, s)| s.class == Some(class) || s.also.contains(&class))
            .map(|(w, _)| w)
            .sum()
    }

    /// The most likely class (background included), with its score.
    pub fn classify(&self, features: &[f64]) -> Option<(Option<ObjectClass>, f64)> {
        self.scores(features).into_iter().max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The candidate most likely to hold an object of `class` ([`Self::holds_score`]), with its score (none
    /// when no candidate has a vote for it).
    pub fn best_candidate<'a>(
        &self,
        candidates: &'a [ObjectCandidate],
        class: ObjectClass,
    ) -> Option<(&'a ObjectCandidate, f64)> {
        candidates
            .iter()
            .filter_map(|c| {
                let score = self.holds_score(&c.features, class);
                (score > 0.0).then_some((c, score))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1).then(a.0.voxels.cmp(&b.0.voxels)))
    }

    pub fn save(&self, path: &Path) -> Result<(), MapError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| MapError::Io { path: dir.into(), source })?;
        }
        gst_io::write_json(path, self)?;
        Ok(())
    }

    pub fn load(path: &Path) -> Result<Self, MapError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| MapError::Io { path: path.into(), source })?;
        Self::from_json(&text, path)
    }

    /// A classifier from the JSON text of a model file; `origin` names it in errors (a path, or a label
    /// such as the built-in model's).
    pub fn from_json(text: &str, origin: &Path) -> Result<Self, MapError> {
        let path = origin;
        let model: Self =
            serde_json::from_str(text).map_err(|source| MapError::Json { path: path.into(), source })?;
        let invalid = |message: String| MapError::InvalidInput { path: path.into(), message };
        if model.format != CLASSIFIER_FORMAT {
            return Err(invalid(format!("format is {:?}, expected {CLASSIFIER_FORMAT:?}", model.format)));
        }
        if model.mean.len() != FEATURE_COUNT || model.scale.len() != FEATURE_COUNT {
            return Err(invalid(format!(
                "the model has {} features, expected {FEATURE_COUNT}",
                model.mean.len()
            )));
        }
        if let Some(bad) = model.samples.iter().find(|s| s.features.len() != FEATURE_COUNT) {
            return Err(invalid(format!("sample {} has {} features", bad.source, bad.features.len())));
        }
        if model.scale.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(invalid("a feature scale is not positive".into()));
        }
        Ok(model)
    }
}

/// An annotated object of a generated scene (`annotations.json`'s `class` and `bbox3d`), world frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnnotatedBox {
    pub class: ObjectClass,
    pub center: [f64; 3],
    pub size: [f64; 3],
    /// `world_from_box` rotation, rows.
    pub rotation: [[f64; 3]; 3],
}

impl AnnotatedBox {
    /// Whether a world point lies inside the box grown by `margin` metres on every side.
    pub fn contains(&self, p: [f64; 3], margin: f64) -> bool {
        let r = Matrix3::from_row_slice(&self.rotation.concat());
        let local = r.transpose() * (Vector3::from(p) - Vector3::from(self.center));
        (0..3).all(|a| local[a].abs() <= self.size[a] / 2.0 + margin)
    }
}

#[derive(Deserialize)]
struct BoxRecord {
    translation: [f64; 3],
    size: [f64; 3],
    rotation: [[f64; 3]; 3],
}

#[derive(Deserialize)]
struct AnnotationBoxRecord {
    class: ObjectClass,
    bbox3d: BoxRecord,
}

/// Reads the annotated boxes of a generated scene's `annotations.json` (training labels only).
pub fn read_annotation_boxes(path: &Path) -> Result<Vec<AnnotatedBox>, MapError> {
    let text = std::fs::read_to_string(path).map_err(|source| MapError::Io { path: path.into(), source })?;
    let records: Vec<AnnotationBoxRecord> =
        serde_json::from_str(&text).map_err(|source| MapError::Json { path: path.into(), source })?;
    Ok(records
        .into_iter()
        .map(|r| AnnotatedBox {
            class: r.class,
            center: r.bbox3d.translation,
            size: r.bbox3d.size,
            rotation: r.bbox3d.rotation,
        })
        .collect())
}

/// Labels a map's candidates with the annotated objects (ground truth, training only): a candidate whose
/// centre lies in an annotated box (grown by 15 cm) is that box's class — the smallest such box when
/// several hold it —, else background; the classes of the other boxes whose centres lie in the candidate's
/// box (grown by 15 cm) are its `also` labels. `map_from_world` is the map's gravity alignment (the annotations are
/// in the world of the poses, which must be the scene's: ground-truth poses).
pub fn label_candidates(
    candidates: &[ObjectCandidate],
    boxes: &[AnnotatedBox],
    map_from_world: &Pose3,
    source: &str,
) -> Vec<TrainingSample> {
    let world_from_map = map_from_world.inverse();
    candidates
        .iter()
        .map(|c| {
            let p = world_from_map.transform_point(&Point3::from(c.centroid_m));
            let class = boxes
                .iter()
                .filter(|b| b.contains([p.x, p.y, p.z], LABEL_MARGIN_M))
                .min_by(|a, b| {
                    let volume = |b: &AnnotatedBox| b.size.iter().product::<f64>();
                    volume(a).total_cmp(&volume(b))
                })
                .map(|b| b.class);
            let mut also: Vec<ObjectClass> = boxes
                .iter()
                .filter(|b| Some(b.class) != class)
                .filter(|b| {
                    let centre = map_from_world.transform_point(&Point3::from(b.center));
                    c.bbox.contains([centre.x, centre.y, centre.z], LABEL_MARGIN_M)
                })
                .map(|b| b.class)
                .collect();
            also.sort();
            also.dedup();
            TrainingSample { class, also, features: c.features.clone(), source: format!("{source}#{}", c.id) }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::YawBox;

    fn candidate(id: usize, centre: [f64; 3], features: Vec<f64>) -> ObjectCandidate {
        ObjectCandidate {
            id,
            centroid_m: centre,
            bbox: YawBox { center_m: centre, size_m: [1.0, 1.0, 1.0], yaw_rad: 0.0 },
            voxels: 100,
            color: [0, 0, 0],
            features,
        }
    }

    fn features(long: f64, top: f64) -> Vec<f64> {
        let mut f = vec![0.5; FEATURE_COUNT];
        f[0] = long;
        f[2] = top;
        f
    }

    #[test]
    fn nearest_neighbours_separate_classes_by_their_features() {
        let mut samples = Vec::new();
        for k in 0..10 {
            let jitter = f64::from(k) * 0.01;
            samples.push(TrainingSample {
                also: Vec::new(),
                class: Some(ObjectClass::Bed),
                features: features(2.0 + jitter, 0.6),
                source: "a".into(),
            });
            samples.push(TrainingSample {
                also: Vec::new(),
                class: Some(ObjectClass::Chair),
                features: features(0.5 + jitter, 0.9),
                source: "b".into(),
            });
            samples.push(TrainingSample {
                also: Vec::new(),
                class: None,
                features: features(0.2 + jitter, 2.1),
                source: "c".into(),
            });
        }
        let model = ObjectClassifier::train(samples).unwrap();
        assert_eq!(model.classify(&features(2.02, 0.62)).map(|c| c.0), Some(Some(ObjectClass::Bed)));
        assert_eq!(model.classify(&features(0.52, 0.88)).map(|c| c.0), Some(Some(ObjectClass::Chair)));
        let total: f64 = model.scores(&features(1.0, 0.8)).values().sum();
        assert!((total - 1.0).abs() < 1e-9);
        let candidates =
            [candidate(0, [0.0; 3], features(0.5, 0.9)), candidate(1, [3.0, 0.0, 0.3], features(1.98, 0.6))];
        let (best, score) = model.best_candidate(&candidates, ObjectClass::Bed).unwrap();
        assert_eq!(best.id, 1);
        assert!(score > 0.5);
        assert!(model.best_candidate(&candidates, ObjectClass::Piano).is_none());

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m/objects.json");
        model.save(&path).unwrap();
        // The JSON writer keeps 15 significant digits: equal up to that.
        let loaded = ObjectClassifier::load(&path).unwrap();
        assert_eq!((loaded.k, loaded.samples.len()), (model.k, model.samples.len()));
        let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9);
        assert!(close(&loaded.mean, &model.mean) && close(&loaded.scale, &model.scale));
        assert!(
            loaded
                .samples
                .iter()
                .zip(&model.samples)
                .all(|(a, b)| a.class == b.class && close(&a.features, &b.features))
        );
        std::fs::write(&path, "{\"format\": \"other\"}").unwrap();
        let error = ObjectClassifier::load(&path).unwrap_err().to_string();
        assert!(error.contains("objects.json"), "{error}");
    }

    #[test]
    fn training_needs_labelled_samples_of_the_right_length() {
        let background = vec![TrainingSample {
            also: Vec::new(),
            class: None,
            features: features(1.0, 1.0),
            source: "x".into(),
        }];
        assert!(ObjectClassifier::train(background).is_err());
        let short = vec![TrainingSample {
            also: Vec::new(),
            class: Some(ObjectClass::Bed),
            features: vec![1.0],
            source: "y".into(),
        }];
        assert!(ObjectClassifier::train(short).unwrap_err().to_string().contains("features"));
    }

    #[test]
    fn candidates_take_the_class_of_the_annotated_box_they_lie_in() {
        // A sofa box turned by 90 degrees: 2 m along world y.
        let sofa = AnnotatedBox {
            class: ObjectClass::Sofa,
            center: [5.0, 3.0, 0.4],
            size: [2.0, 0.9, 0.8],
            rotation: [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
        };
        assert!(sofa.contains([5.0, 3.9, 0.4], 0.0));
        assert!(!sofa.contains([5.9, 3.0, 0.4], 0.0));
        let candidates = [
            candidate(0, [5.1, 3.8, 0.3], features(2.0, 0.8)),
            candidate(1, [1.0, 1.0, 0.3], features(1.0, 1.0)),
        ];
        let samples = label_candidates(&candidates, &[sofa], &Pose3::identity(), "scene_000");
        assert_eq!(samples[0].class, Some(ObjectClass::Sofa));
        assert_eq!(samples[1].class, None);
        assert_eq!(samples[1].source, "scene_000#1");
        assert!(samples[0].also.is_empty());
    }

    #[test]
    fn a_cluster_holding_several_objects_answers_for_each() {
        // A kitchen counter: a stove between a kitchen cabinet and a sink cabinet, one 1.8 m cluster whose
        // centre lies in the stove.
        let unit = |class, x: f64| AnnotatedBox {
            class,
            center: [x, 1.0, 0.45],
            size: [0.6, 0.6, 0.9],
            rotation: [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        };
        let boxes = [
            unit(ObjectClass::KitchenCabinet, 2.4),
            unit(ObjectClass::Stove, 3.0),
            unit(ObjectClass::Sink, 3.6),
            unit(ObjectClass::Bed, 8.0),
        ];
        let mut counter = candidate(0, [3.0, 1.0, 0.45], features(1.8, 0.9));
        counter.bbox.size_m = [1.8, 0.6, 0.9];
        let samples = label_candidates(&[counter.clone()], &boxes, &Pose3::identity(), "scene_000");
        assert_eq!(samples[0].class, Some(ObjectClass::Stove));
        assert_eq!(samples[0].also, vec![ObjectClass::KitchenCabinet, ObjectClass::Sink]);

        let mut training = samples;
        training.push(TrainingSample {
            also: Vec::new(),
            class: Some(ObjectClass::Bed),
            features: features(2.0, 0.5),
            source: "b".into(),
        });
        let model = ObjectClassifier { k: 1, ..ObjectClassifier::train(training).unwrap() };
        let bed = candidate(1, [8.0, 1.0, 0.3], features(2.0, 0.5));
        let candidates = [bed, counter];
        let (found, score) = model.best_candidate(&candidates, ObjectClass::KitchenCabinet).unwrap();
        assert_eq!((found.id, score), (0, 1.0));
        assert_eq!(model.best_candidate(&candidates, ObjectClass::Sink).map(|c| c.0.id), Some(0));
        assert_eq!(model.classify(&features(1.8, 0.9)).and_then(|c| c.0), Some(ObjectClass::Stove));
    }
}
