//! `gst map-eval`: a map against the generated scene's ground truth (evaluation only): occupancy IoU after
//! alignment, room segmentation MCC and matched-room F1, room-graph edge F1, object centroid error, and the
//! registration of the map to the scene's binary top-down.
//!
//! Alignment: the map's trajectory (`trajectory.tum`, the poses it was built from) is aligned to the
//! recording's ground truth (`groundtruth.tum`, copied by `gst map`) by SE(3) Umeyama; that carries map
//! points into the scene's world. Ground truth comes from the files `gst generate` wrote: `scene.json`
//! (rooms, doors), `topdown.json` and `images/<scene>/topdown_binary.png` (free floor), `annotations.json`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nalgebra::{Point3, Vector3};
use serde::{Deserialize, Serialize};

use gst_core::RgbImage;
use gst_io::read_trajectory_tum;
use gst_map::{CellState, SemanticMap, register};
use gst_sim::scene::Scene;
use gst_sim::topdown::TopdownMapping;
use gst_slam::metrics::{Alignment, AlignmentKind, align, associate};

#[derive(Debug, clap::Args)]
pub struct MapEvalArgs {
    /// A `gst map` output directory.
    #[arg(long)]
    pub map: PathBuf,
    /// The scene's `scene.json` (`DIR/<split>/scenes/<scene>/scene.json`).
    #[arg(long)]
    pub scene: PathBuf,
    /// The ground-truth trajectory; default: `MAP/groundtruth.tum`.
    #[arg(long)]
    pub groundtruth: Option<PathBuf>,
    /// The scene's binary top-down; default: `<split>/images/<scene>/topdown_binary.png`.
    #[arg(long)]
    pub topdown: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write where our free floor and the true one differ, on the top-down's pixels: white both free,
    /// blue true free left unknown, red true free called occupied, green ours free where the truth is not.
    #[arg(long)]
    pub diff_png: Option<PathBuf>,
}

/// The figures of one evaluation.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MapEvaluation {
    /// IoU of free floor: ours (aligned) against the binary top-down, on its pixels.
    pub occupancy_iou: f64,
    /// Where the IoU loses, as fractions of the true free floor: true free pixels our map leaves unknown,
    /// true free pixels our map calls occupied, and pixels our map calls free that are not free floor.
    #[serde(default)]
    pub free_missed_unknown: f64,
    #[serde(default)]
    pub free_missed_occupied: f64,
    #[serde(default)]
    pub free_extra: f64,
    /// Pair-counting Matthews correlation of room labels over pixels free in both and labelled by both.
    pub room_mcc: f64,
    /// Rooms matched one-to-one at IoU ≥ 0.5: F1 of matched over predicted and true rooms.
    pub room_f1: f64,
    pub rooms_predicted: usize,
    pub rooms_true: usize,
    pub rooms_matched: usize,
    /// Room-graph edges (doors between distinct room pairs) through the room matching: F1.
    pub edge_f1: f64,
    pub edges_predicted: usize,
    pub edges_true: usize,
    /// Object centroid error, metres, over true objects with a matching landmark (oracle label, else the
    /// nearest landmark of the same class within 1 m).
    pub object_median_error_m: Option<f64>,
    pub object_mean_error_m: Option<f64>,
    pub objects_matched: usize,
    pub objects_true: usize,
    /// Registration to the true binary top-down: score and pixel error of our free cells against the
    /// ground-truth mapping (mean and 95th percentile).
    pub registration_score: f64,
    pub registration_error_px_mean: f64,
    pub registration_error_px_p95: f64,
}

pub fn run(args: &MapEvalArgs) -> Result<()> {
    let (evaluation, diff) = evaluate_map_with_diff(
        &args.map,
        &args.scene,
        args.groundtruth.as_deref(),
        args.topdown.as_deref(),
        args.diff_png.is_some(),
    )?;
    if let (Some(path), Some(image)) = (&args.diff_png, diff) {
        gst_io::write_rgb_png(path, &image)?;
    }
    #[allow(clippy::print_stdout)] // the command's report
    if args.json {
        println!("{}", serde_json::to_string_pretty(&evaluation)?);
    } else {
        print_table(&evaluation);
    }
    Ok(())
}

#[allow(clippy::print_stdout)] // the command's report
fn print_table(e: &MapEvaluation) {
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    println!("| metric | value |");
    println!("|---|---|");
    println!("| occupancy IoU | {:.3} |", e.occupancy_iou);
    println!(
        "| true free floor: unknown / occupied in ours; ours free elsewhere | {:.3} / {:.3}; {:.3} |",
        e.free_missed_unknown, e.free_missed_occupied, e.free_extra
    );
    println!("| room MCC | {:.3} |", e.room_mcc);
    println!(
        "| room F1 ({} predicted, {} true, {} matched) | {:.3} |",
        e.rooms_predicted, e.rooms_true, e.rooms_matched, e.room_f1
    );
    println!(
        "| room-graph edge F1 ({} predicted, {} true) | {:.3} |",
        e.edges_predicted, e.edges_true, e.edge_f1
    );
    println!(
        "| object centroid error median / mean, m ({} of {} objects) | {} / {} |",
        e.objects_matched,
        e.objects_true,
        opt(e.object_median_error_m),
        opt(e.object_mean_error_m)
    );
    println!(
        "| registration score; error px mean / p95 | {:.3}; {:.2} / {:.2} |",
        e.registration_score, e.registration_error_px_mean, e.registration_error_px_p95
    );
}

#[derive(Deserialize)]
struct AnnotationRecord {
    id: u32,
    class: gst_core::ObjectClass,
    bbox3d: BboxRecord,
    appear_frames: Vec<usize>,
}

#[derive(Deserialize)]
struct BboxRecord {
    translation: [f64; 3],
}

/// `<split>/scenes/<scene>/scene.json` → `<split>/images/<scene>/topdown_binary.png`.
fn default_topdown(scene_json: &Path) -> Option<PathBuf> {
    let scene_dir = scene_json.parent()?;
    let scene = scene_dir.file_name()?;
    Some(scene_dir.parent()?.parent()?.join("images").join(scene).join("topdown_binary.png"))
}

/// Evaluates a map directory against a generated scene.
pub fn evaluate_map(
    map_dir: &Path,
    scene_json: &Path,
    groundtruth: Option<&Path>,
    topdown: Option<&Path>,
) -> Result<MapEvaluation> {
    Ok(evaluate_map_with_diff(map_dir, scene_json, groundtruth, topdown, false)?.0)
}

/// [`evaluate_map`], and with `want_diff` an image of the top-down's size: white where both are free, blue
/// where the true free floor is unknown in ours, red where ours calls it occupied, green where ours is free
/// and the truth is not, black elsewhere.
pub fn evaluate_map_with_diff(
    map_dir: &Path,
    scene_json: &Path,
    groundtruth: Option<&Path>,
    topdown: Option<&Path>,
    want_diff: bool,
) -> Result<(MapEvaluation, Option<RgbImage>)> {
    let map = SemanticMap::load(map_dir)?;
    let scene = Scene::load(scene_json).with_context(|| format!("reading {}", scene_json.display()))?;
    let scene_dir = scene_json.parent().unwrap_or(Path::new("."));
    let mapping: TopdownMapping = {
        let path = scene_dir.join("topdown.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{}: not a top-down mapping", path.display()))?
    };
    let topdown_path =
        topdown.map(Path::to_path_buf).or_else(|| default_topdown(scene_json)).context("no top-down path")?;
    let binary = gst_io::read_gray(&topdown_path)?;
    let gt_path = groundtruth.map(Path::to_path_buf).unwrap_or_else(|| map_dir.join("groundtruth.tum"));
    let truth = read_trajectory_tum(&gt_path)?;
    let estimate = read_trajectory_tum(&map_dir.join("trajectory.tum"))?;
    let pairs = associate(&truth, &estimate, 0.01)?;
    let alignment = align(&pairs, AlignmentKind::Se3)?.unwrap_or_else(Alignment::identity);
    let world_from_map = map.map_from_world.inverse();
    let scene_from_map = |xyz: [f64; 3]| -> [f64; 3] {
        let w = world_from_map.transform_point(&Point3::from(xyz));
        let s = alignment.transform_point(&Vector3::new(w.x, w.y, w.z));
        [s.x, s.y, s.z]
    };
    // Map frame from scene world, for sampling our grid at truth pixels.
    let map_from_scene = |xy: [f64; 2], z: f64| -> [f64; 2] {
        let v = alignment.rotation.transpose() * (Vector3::new(xy[0], xy[1], z) - alignment.translation)
            / alignment.scale;
        let m = map.map_from_world.transform_point(&Point3::new(v.x, v.y, v.z));
        [m.x, m.y]
    };
    let floor_scene_z = 0.0;

    let (w, h) = (binary.width(), binary.height());
    let mut evaluation = MapEvaluation::default();
    // Per truth pixel: truth free, ours free, true room, our room.
    let (mut inter, mut union) = (0usize, 0usize);
    let (mut truth_free_total, mut missed_unknown, mut missed_occupied, mut extra) = (0usize, 0, 0, 0);
    let mut diff = want_diff.then(|| RgbImage::filled(w, h, [0, 0, 0]));
    let mut pairs_of_labels: Vec<(usize, usize)> = Vec::new();
    let mut ours_by_room: BTreeMap<usize, usize> = BTreeMap::new();
    let mut truth_by_room: BTreeMap<usize, usize> = BTreeMap::new();
    let mut overlap: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    let grid = &map.occupancy.frame;
    for v in 0..h {
        for u in 0..w {
            let truth_free = binary.get(u, v).is_some_and(|p| *p > 127);
            let world = mapping.world_from_pixel([f64::from(u) + 0.5, f64::from(v) + 0.5]);
            let [mx, my] = map_from_scene(world, floor_scene_z);
            let cell = grid.cell_from_world(mx, my).map(|(c, r)| grid.index(c, r));
            let ours = cell.map_or(CellState::Unknown, |i| map.occupancy.cells[i]);
            let ours_free = ours == CellState::Free;
            truth_free_total += usize::from(truth_free);
            missed_unknown += usize::from(truth_free && ours == CellState::Unknown);
            missed_occupied += usize::from(truth_free && ours == CellState::Occupied);
            extra += usize::from(!truth_free && ours_free);
            if let Some(pixel) = diff.as_mut().and_then(|d| d.get_mut(u, v)) {
                *pixel = match (truth_free, ours) {
                    (true, CellState::Free) => [255, 255, 255],
                    (true, CellState::Unknown) => [40, 90, 255],
                    (true, CellState::Occupied) => [255, 40, 40],
                    (false, CellState::Free) => [40, 200, 40],
                    (false, _) => [0, 0, 0],
                };
            }
            inter += usize::from(truth_free && ours_free);
            union += usize::from(truth_free || ours_free);
            let true_room =
                if truth_free { scene.plan.rooms.iter().position(|r| r.contains(world)) } else { None };
            let our_room =
                cell.and_then(|i| map.room_labels.get(i)).filter(|l| **l > 0).map(|l| *l as usize - 1);
            if let Some(t) = true_room {
                *truth_by_room.entry(t).or_default() += 1;
            }
            if let Some(o) = our_room {
                *ours_by_room.entry(o).or_default() += 1;
            }
            if let (Some(t), Some(o)) = (true_room, our_room) {
                pairs_of_labels.push((t, o));
                *overlap.entry((t, o)).or_default() += 1;
            }
        }
    }
    evaluation.occupancy_iou = if union == 0 { 0.0 } else { inter as f64 / union as f64 };
    let of_truth = |n: usize| if truth_free_total == 0 { 0.0 } else { n as f64 / truth_free_total as f64 };
    evaluation.free_missed_unknown = of_truth(missed_unknown);
    evaluation.free_missed_occupied = of_truth(missed_occupied);
    evaluation.free_extra = of_truth(extra);
    evaluation.room_mcc = pair_counting_mcc(&overlap);
    // Matched rooms: greedy by IoU (pixels), one-to-one, IoU ≥ 0.5.
    let mut candidates: Vec<(f64, usize, usize)> = overlap
        .iter()
        .map(|(&(t, o), &n)| {
            let u =
                truth_by_room.get(&t).copied().unwrap_or(0) + ours_by_room.get(&o).copied().unwrap_or(0) - n;
            (n as f64 / u.max(1) as f64, t, o)
        })
        .collect();
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    for (iou, t, o) in &candidates {
        tracing::debug!(true_room = t, our_room = o, iou, "room overlap");
    }
    let mut truth_of_ours: BTreeMap<usize, usize> = BTreeMap::new();
    let mut used_truth = BTreeSet::new();
    for (iou, t, o) in candidates {
        if iou >= 0.5 && !used_truth.contains(&t) && !truth_of_ours.contains_key(&o) {
            used_truth.insert(t);
            truth_of_ours.insert(o, t);
        }
    }
    evaluation.rooms_predicted = map.rooms.len();
    evaluation.rooms_true = scene.plan.rooms.len();
    evaluation.rooms_matched = truth_of_ours.len();
    evaluation.room_f1 = f1(evaluation.rooms_matched, evaluation.rooms_predicted, evaluation.rooms_true);
    let true_edges: BTreeSet<(usize, usize)> =
        scene.plan.doors.iter().map(|d| (d.rooms[0].min(d.rooms[1]), d.rooms[0].max(d.rooms[1]))).collect();
    let our_edges: BTreeSet<(usize, usize)> =
        map.doors.iter().map(|d| (d.rooms[0].min(d.rooms[1]), d.rooms[0].max(d.rooms[1]))).collect();
    let correct = our_edges
        .iter()
        .filter(|(a, b)| match (truth_of_ours.get(a), truth_of_ours.get(b)) {
            (Some(x), Some(y)) => true_edges.contains(&((*x).min(*y), (*x).max(*y))),
            _ => false,
        })
        .count();
    evaluation.edges_predicted = our_edges.len();
    evaluation.edges_true = true_edges.len();
    evaluation.edge_f1 = f1(correct, our_edges.len(), true_edges.len());

    // Objects.
    let annotations_path = scene_dir.join("annotations.json");
    let text = std::fs::read_to_string(&annotations_path)
        .with_context(|| format!("reading {}", annotations_path.display()))?;
    let annotations: Vec<AnnotationRecord> = serde_json::from_str(&text)
        .with_context(|| format!("{}: not annotations", annotations_path.display()))?;
    let seen: Vec<&AnnotationRecord> = annotations.iter().filter(|a| !a.appear_frames.is_empty()).collect();
    evaluation.objects_true = seen.len();
    let landmarks: Vec<(Option<u32>, Option<gst_core::ObjectClass>, [f64; 3])> =
        map.objects.iter().map(|o| (o.label, o.class, scene_from_map(o.centroid_m))).collect();
    let mut errors: Vec<f64> = seen
        .iter()
        .filter_map(|a| {
            let dist = |p: &[f64; 3]| {
                ((p[0] - a.bbox3d.translation[0]).powi(2)
                    + (p[1] - a.bbox3d.translation[1]).powi(2)
                    + (p[2] - a.bbox3d.translation[2]).powi(2))
                .sqrt()
            };
            let by_label =
                landmarks.iter().filter(|l| l.0 == Some(a.id)).map(|l| dist(&l.2)).reduce(f64::min);
            by_label.or_else(|| {
                landmarks
                    .iter()
                    .filter(|l| l.0.is_none() && l.1 == Some(a.class))
                    .map(|l| dist(&l.2))
                    .filter(|d| *d <= 1.0)
                    .reduce(f64::min)
            })
        })
        .collect();
    errors.sort_by(f64::total_cmp);
    evaluation.objects_matched = errors.len();
    if !errors.is_empty() {
        evaluation.object_median_error_m = Some(median(&errors));
        evaluation.object_mean_error_m = Some(errors.iter().sum::<f64>() / errors.len() as f64);
    }

    // Registration against the truth's pixel mapping.
    if let Ok(registration) = register(&map, &binary) {
        evaluation.registration_score = registration.score;
        let mut px_errors: Vec<f64> = Vec::new();
        for (i, c) in map.occupancy.cells.iter().enumerate().step_by(7) {
            if *c != CellState::Free {
                continue;
            }
            let p = grid.world_from_cell((i % grid.width as usize) as u32, (i / grid.width as usize) as u32);
            let ours = registration.pixel_from_map(p);
            let s = scene_from_map([p[0], p[1], map.occupancy.floor_z_m]);
            let truth_px = mapping.pixel_from_world([s[0], s[1]]);
            px_errors.push(((ours[0] - truth_px[0]).powi(2) + (ours[1] - truth_px[1]).powi(2)).sqrt());
        }
        px_errors.sort_by(f64::total_cmp);
        if !px_errors.is_empty() {
            evaluation.registration_error_px_mean = px_errors.iter().sum::<f64>() / px_errors.len() as f64;
            evaluation.registration_error_px_p95 =
                px_errors[(px_errors.len() * 95 / 100).min(px_errors.len() - 1)];
        }
    }
    Ok((evaluation, diff))
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 }
}

fn f1(correct: usize, predicted: usize, truth: usize) -> f64 {
    if predicted + truth == 0 {
        return 1.0;
    }
    2.0 * correct as f64 / (predicted + truth) as f64
}

/// Matthews correlation of "same room" over all pairs of pixels (pair counting on the contingency table).
pub fn pair_counting_mcc(overlap: &BTreeMap<(usize, usize), usize>) -> f64 {
    let pairs = |n: f64| n * (n - 1.0) / 2.0;
    let total: f64 = overlap.values().map(|&n| n as f64).sum();
    let mut rows: BTreeMap<usize, f64> = BTreeMap::new();
    let mut cols: BTreeMap<usize, f64> = BTreeMap::new();
    for (&(t, o), &n) in overlap {
        *rows.entry(t).or_default() += n as f64;
        *cols.entry(o).or_default() += n as f64;
    }
    let tp: f64 = overlap.values().map(|&n| pairs(n as f64)).sum();
    let same_true: f64 = rows.values().map(|&n| pairs(n)).sum();
    let same_ours: f64 = cols.values().map(|&n| pairs(n)).sum();
    let all = pairs(total);
    let fp = same_ours - tp;
    let fn_ = same_true - tp;
    let tn = all - tp - fp - fn_;
    let denominator = ((tp + fp) * (tp + fn_) * (tn + fp) * (tn + fn_)).sqrt();
    if denominator == 0.0 {
        // One room on both sides and all agree: perfect; otherwise undefined, reported as 0.
        return if fp == 0.0 && fn_ == 0.0 { 1.0 } else { 0.0 };
    }
    (tp * tn - fp * fn_) / denominator
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcc_is_one_for_identical_partitions_and_low_for_a_merge() {
        let same: BTreeMap<(usize, usize), usize> = [((0, 5), 100), ((1, 6), 80)].into_iter().collect();
        assert!((pair_counting_mcc(&same) - 1.0).abs() < 1e-12);
        let merged: BTreeMap<(usize, usize), usize> = [((0, 5), 100), ((1, 5), 80)].into_iter().collect();
        assert!(pair_counting_mcc(&merged) < 0.01);
    }
}
