//! `gst bench reloc`: relocalisation of current views (RGB only) on a generated split, against their true
//! poses — the target is < 0.3 m and < 10° on ≥ 90% of views.
//!
//! For each scene, SLAM runs on the TUM export once (its outputs, `map.gstslam` among them, are kept in
//! `OUT/<scene>/` and reused by later runs); the estimate's world is mapped onto the truth's by the ATE
//! alignment of the trajectory (evaluation only), then every current view of `scenes/<scene>/views.json`
//! is relocalised from its image alone.
//!
//! For every view not found, the table also gives the errors of the two unverified guesses a caller can fall
//! back on (the best pose the photometric check rejected, the best render-and-compare pose), and a summary
//! line counts those within the bounds and within 1 m and 30°.
//!
//! Diagnostics (logged at info level for every view not placed within the bounds): the render-and-compare
//! score at the true pose and the best hypotheses' errors, the photometric check at the true pose, what
//! becomes of the true pose taken as a place hypothesis ([`gst_slam::Relocalizer::trace_hypothesis`]: could a
//! hypothesis there place the view?), and whether relocalising from the true pose succeeds.
//! `GST_DEBUG_PLACES=DIR` also writes, per such view, the
//! panorama rendered at the true pose beside the image's (`*.rendered.png`, `*.query.png`) and the
//! photometric check's strip (`*.check.png`: the image, the keyframes' prediction, each keyframe's warp);
//! `GST_DEBUG_REFINED=1` logs for every view the photometrically refined place hypotheses (correlation,
//! coverage, position and heading error); `GST_DEBUG_LAYOUT=1` (with `--layout`) logs for every view what became
//! of each layout hypothesis ([`gst_slam::Relocalizer::trace_hypothesis`]). `GST_DEBUG_JUDGED=FILE` appends
//! to FILE one JSON line per hypothesis the photometric check judged (`"stage": "search"` for the view's
//! relocalisation, `"diagnostic"` for the checks above): its position and heading errors, inliers, the
//! check's correlation and coverage, its verdict, and further appearance scores
//! ([`gst_slam::thumbnail::AppearanceScores`]).
//!
//! `--overlap` (an ORACLE diagnostic: it reads the generated scene and the exploration's true poses) adds
//! per view the share of its surface the exploration saw, and saw from a similar viewpoint
//! ([`gst_bench::overlap`]), and counts the views placed among those the exploration barely faced.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use gst_bench::overlap::{ExplorationDepth, OverlapConfig, ViewOverlap, view_overlap};
use gst_core::{PinholeCamera, Pose3, Trajectory};
use gst_sim::library::FurnitureLibrary;
use gst_sim::render::{RenderOptions, RenderScene, render};
use gst_slam::metrics::{EvaluationOptions, evaluate};
use gst_slam::relocalize::JudgedRecord;
use gst_slam::{MAP_FILE, Relocalizer, SlamConfig, SlamMap, run_slam};

use crate::progress;

#[derive(Debug, clap::Args)]
pub struct RelocBenchArgs {
    /// A generated split (`gst generate` output, e.g. data/gst/bench): tum/, images/, scenes/*/views.json.
    #[arg(long)]
    pub data: PathBuf,
    /// Where SLAM outputs per scene are kept (reused when present) and reloc.json is written.
    #[arg(long, default_value = "out/bench-reloc")]
    pub out: PathBuf,
    /// Only the first N scenes.
    #[arg(long)]
    pub scenes: Option<usize>,
    /// Only views whose image path contains this (e.g. `SCENE/VIEW`: a scene folder and a view's file stem); scenes without such a view
    /// are skipped.
    #[arg(long)]
    pub view: Option<String>,
    /// Semantic maps of the same SLAM runs (`<DIR>/<scene>/map.json`, e.g. a map answerer cache's `maps/`):
    /// every view's pose as the map answerer takes it (accepted, else the best rejected, else render and
    /// compare) is also given the Manhattan compass's heading ([`gst_map::snap_heading`]), and the table
    /// adds both heading errors.
    #[arg(long)]
    pub maps: Option<PathBuf>,
    /// With `--maps`: layout place recognition ([`gst_map::layout`]) adds pose hypotheses from each view's
    /// floor boundary matched against the map's occupancy grid, as the map answerer does; the table adds
    /// the rank of the first layout hypothesis within the bounds.
    #[arg(long, requires = "maps")]
    pub layout: bool,
    /// With `--layout`: how many layout hypotheses the relocaliser is given per view (default: as the map
    /// answerer, [`gst_baseline::scene_layout::LAYOUT_HYPOTHESES`]).
    #[arg(long, requires = "layout")]
    pub layout_hypotheses: Option<usize>,
    /// With `--layout`: only rank the layout hypotheses against the true poses, without relocalising (the
    /// views count as not found): seconds per scene instead of minutes, for trying layout settings.
    #[arg(long, requires = "layout")]
    pub layout_only: bool,
    /// With `--layout`: distinct layout hypotheses are at least this far apart, metres (default: as the map
    /// answerer, [`gst_map::LayoutConfig::separation_m`]).
    #[arg(long, requires = "layout")]
    pub layout_separation: Option<f64>,
    /// ORACLE diagnostic: render each view's true depth from the generated scene (`scenes/<scene>/scene.json`)
    /// and measure the share of its surface that the exploration (every second frame of the TUM export,
    /// at its ground-truth pose) saw, and saw from a similar viewpoint ([`gst_bench::overlap`]: rays at
    /// most 40° apart, distances within a factor 1.6). Never used in relocalising.
    #[arg(long)]
    pub overlap: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--overlap` reads every this many frames of the exploration.
const OVERLAP_FRAME_STRIDE: usize = 2;
/// The summary of `--overlap` counts views by the share of their surface seen from a similar viewpoint:
/// below the first bound, between the bounds, above the second.
const OVERLAP_BOUNDS: (f64, f64) = (0.05, 0.25);

#[derive(Debug, Deserialize)]
struct ViewRecord {
    image: String,
    world_from_camera: Pose3,
}

/// One relocalised view.
#[derive(Debug, Default, Serialize)]
pub struct ViewResult {
    pub scene: String,
    pub image: String,
    pub found: bool,
    pub position_error_m: Option<f64>,
    pub heading_error_deg: Option<f64>,
    pub inliers: usize,
    pub confidence: f64,
    pub seconds: f64,
    /// Not found: the errors (metres, degrees) of the best hypothesis the photometric check rejected, and
    /// of the best render-and-compare pose (the unverified guesses a caller can fall back on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_error: Option<(f64, f64)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub appearance_error: Option<(f64, f64)>,
    /// With `--maps`: the heading (yaw) error in degrees of the pose the map answerer takes, and of it
    /// after the compass (`None`: no reading, the pose is kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_yaw_error_deg: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compass_yaw_error_deg: Option<f64>,
    /// With `--layout`: layout hypotheses given, and the rank (1 = best) of the first within 0.3 m and 10°.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout_hypotheses: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout_rank: Option<usize>,
    /// With `--overlap` (ORACLE): how much of the view's surface the exploration saw, and from a similar
    /// viewpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlap: Option<gst_bench::overlap::ViewOverlap>,
}

#[derive(Debug, Serialize)]
pub struct RelocReport {
    pub views: usize,
    pub found: usize,
    /// Within 0.3 m and 10°.
    pub correct: usize,
    pub correct_pct: f64,
    /// Found but outside the bounds (false positives at the confidence the relocaliser gave).
    pub wrong: usize,
    pub median_seconds: f64,
    pub results: Vec<ViewResult>,
}

pub fn run(args: &RelocBenchArgs) -> Result<()> {
    let mut scenes: Vec<String> = std::fs::read_dir(args.data.join("scenes"))
        .with_context(|| format!("{}: not a generated split (no scenes/)", args.data.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("views.json").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    scenes.sort();
    if let Some(n) = args.scenes {
        scenes.truncate(n);
    }
    if let Some(view) = &args.view {
        // A filter naming a scene (`SCENE/VIEW`) spares the other scenes' SLAM.
        scenes.retain(|scene| !view.contains('/') || view.contains(&format!("{scene}/")));
    }
    anyhow::ensure!(!scenes.is_empty(), "{}: no scene has views.json", args.data.display());
    let config = SlamConfig::default();
    let layout_count = args.layout_hypotheses.unwrap_or(gst_baseline::scene_layout::LAYOUT_HYPOTHESES);
    let mut results = Vec::new();
    for scene in &scenes {
        let sequence = args.data.join("tum").join(scene);
        let slam_dir = args.out.join(scene);
        let (map, trajectory) = slam_outputs(&sequence, &slam_dir, &config)?;
        let truth = gst_io::TumSequence::open(&sequence, None)?
            .groundtruth()
            .cloned()
            .with_context(|| format!("{}: no groundtruth.txt", sequence.display()))?;
        let evaluation = evaluate(&truth, &trajectory, &EvaluationOptions::default())?;
        let alignment = evaluation.alignment.context("no alignment")?;
        let views_path = args.data.join("scenes").join(scene).join("views.json");
        let text = std::fs::read_to_string(&views_path)
            .with_context(|| format!("reading {}", views_path.display()))?;
        let mut views: Vec<ViewRecord> = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a views file", views_path.display()))?;
        if let Some(wanted) = &args.view {
            views.retain(|v| v.image.contains(wanted.as_str()));
            if views.is_empty() {
                continue;
            }
        }
        // Render and compare needs the panoramas; ranking layout hypotheses alone does not.
        let started = std::time::Instant::now();
        let places = (!args.layout_only)
            .then(|| gst_baseline::scene_slam::place_index(&map, &sequence))
            .transpose()?;
        let mut relocalizer = Relocalizer::new(&map, &config)?;
        let judged_log = std::env::var_os("GST_DEBUG_JUDGED").map(PathBuf::from);
        if judged_log.is_some() {
            relocalizer = relocalizer.with_judged_log();
        }
        if let Some(places) = &places {
            tracing::info!(
                "{scene}: {} panoramas rendered in {:.2} s",
                places.positions(),
                started.elapsed().as_secs_f64()
            );
            relocalizer = relocalizer.with_places(places);
        }
        let semantic = match &args.maps {
            Some(dir) => Some(
                gst_map::SemanticMap::load(&dir.join(scene))
                    .with_context(|| format!("{}: no semantic map of {scene}", dir.display()))?,
            ),
            None => None,
        };
        let overlap =
            if args.overlap { Some(ViewSurfaces::load(&args.data, scene, &sequence, &truth)?) } else { None };
        let layout = match (&semantic, args.layout) {
            (Some(semantic), true) => {
                let started = std::time::Instant::now();
                let layout = gst_baseline::scene_layout::SceneLayout::build_with(
                    semantic,
                    &map,
                    &sequence,
                    gst_map::LayoutConfig {
                        separation_m: args
                            .layout_separation
                            .unwrap_or(gst_map::LayoutConfig::default().separation_m),
                        ..Default::default()
                    },
                )?;
                tracing::info!("{scene}: layout index in {:.2} s", started.elapsed().as_secs_f64());
                layout
            }
            _ => None,
        };
        for view in views {
            let image = gst_io::read_rgb(&args.data.join(&view.image))?;
            let started = std::time::Instant::now();
            let mut hypotheses = Vec::new();
            let outcome = if args.layout_only {
                gst_slam::RelocalizationOutcome::default()
            } else {
                relocalizer.relocalize_outcome_with_deeper(
                    &image,
                    || {
                        hypotheses =
                            layout.as_ref().map(|l| l.hypotheses(&image, layout_count)).unwrap_or_default();
                        hypotheses.clone()
                    },
                    || layout.as_ref().map(|l| l.deeper_hypotheses(&image, layout_count)).unwrap_or_default(),
                )?
            };
            let seconds = started.elapsed().as_secs_f64();
            // The rank diagnostics need the hypotheses of every view, also of those settled without them.
            if args.layout && hypotheses.is_empty() {
                hypotheses = layout.as_ref().map(|l| l.hypotheses(&image, layout_count)).unwrap_or_default();
            }
            let errors = |pose: &Pose3| {
                let estimate = alignment.transform_pose(pose);
                let truth = &view.world_from_camera;
                (
                    (estimate.translation() - truth.translation()).norm(),
                    (estimate.rotation().inverse() * truth.rotation()).angle().to_degrees(),
                )
            };
            let yaw_error = |pose: &Pose3| {
                let estimate = alignment.transform_pose(pose);
                gst_bench::metrics::angle_error_deg(
                    estimate.camera_yaw().to_degrees(),
                    view.world_from_camera.camera_yaw().to_degrees(),
                )
            };
            let layout_rank = hypotheses
                .iter()
                .position(|pose| {
                    let (position, heading) = errors(pose);
                    position < 0.3 && heading < 10.0
                })
                .map(|rank| rank + 1);
            let overlap = overlap.as_ref().and_then(|o| o.overlap(&view.world_from_camera));
            if args.layout_only {
                results.push(ViewResult {
                    scene: scene.clone(),
                    image: view.image.clone(),
                    seconds,
                    layout_hypotheses: Some(hypotheses.len()),
                    layout_rank,
                    overlap,
                    ..ViewResult::default()
                });
                continue;
            }
            let mut appearance = None;
            let (rejected_error, appearance_error) = if outcome.accepted.is_some() {
                (None, None)
            } else {
                appearance = relocalizer.appearance_guess(&image).map(|(_, pose)| pose);
                tracing::info!(
                    "{scene} {}: rejected {:?}, appearance guess {:?}",
                    view.image,
                    outcome.best_rejected.as_ref().map(|r| (r.ncc, r.coverage)),
                    appearance.as_ref().and_then(|pose| relocalizer.check_pose(&image, pose))
                );
                (
                    outcome.best_rejected.as_ref().map(|r| errors(&r.world_from_camera)),
                    appearance.as_ref().map(errors),
                )
            };
            let answer_pose = outcome
                .accepted
                .as_ref()
                .map(|a| a.world_from_camera)
                .or(outcome.best_rejected.as_ref().map(|r| r.world_from_camera))
                .or(appearance);
            let (answer_yaw_error_deg, compass_yaw_error_deg) = match (&semantic, answer_pose) {
                (Some(semantic), Some(pose)) => {
                    let snapped = gst_map::snap_heading(semantic, &map.camera, &image, &pose);
                    if let Some((_, reading)) = &snapped {
                        tracing::info!("{scene} {}: compass {reading:?}", view.image);
                    }
                    (Some(yaw_error(&pose)), snapped.map(|(p, _)| yaw_error(&p)))
                }
                _ => (None, None),
            };
            let found = outcome.accepted;
            let mut result = ViewResult {
                scene: scene.clone(),
                image: view.image.clone(),
                found: found.is_some(),
                position_error_m: None,
                heading_error_deg: None,
                inliers: 0,
                confidence: 0.0,
                seconds,
                rejected_error,
                appearance_error,
                answer_yaw_error_deg,
                compass_yaw_error_deg,
                layout_hypotheses: args.layout.then_some(hypotheses.len()),
                layout_rank,
                overlap,
            };
            if let Some(found) = found {
                let (position, heading) = errors(&found.world_from_camera);
                result.position_error_m = Some(position);
                result.heading_error_deg = Some(heading);
                result.inliers = found.inliers;
                result.confidence = found.confidence;
            }
            let correct = placed(&result);
            // Every judged hypothesis with its errors, one JSON line each (diagnostics).
            let write_judged = |stage: &str, records: Vec<JudgedRecord>| -> Result<()> {
                let Some(path) = &judged_log else { return Ok(()) };
                use std::io::Write;
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .with_context(|| format!("{}: cannot append", path.display()))?;
                for record in records {
                    let (position_error_m, heading_error_deg) = errors(&record.world_from_camera);
                    let line = serde_json::json!({
                        "scene": scene, "image": view.image, "placed": correct, "stage": stage,
                        "position_error_m": position_error_m, "heading_error_deg": heading_error_deg,
                        "record": record,
                    });
                    writeln!(file, "{line}").with_context(|| format!("{}: cannot append", path.display()))?;
                }
                Ok(())
            };
            write_judged("search", relocalizer.take_judged_log())?;
            if std::env::var_os("GST_DEBUG_REFINED").is_some() {
                let refined: Vec<String> = relocalizer
                    .refined_places(&image, 12)
                    .iter()
                    .map(|(pose, check)| {
                        let e = alignment.transform_pose(pose);
                        format!(
                            "{:.3} {:.2} {:.2} {:.0}",
                            check.ncc,
                            check.coverage,
                            (e.translation() - view.world_from_camera.translation()).norm(),
                            (e.rotation().inverse() * view.world_from_camera.rotation()).angle().to_degrees()
                        )
                    })
                    .collect();
                tracing::info!("{scene} {} refined places {correct}: {refined:?}", view.image);
            }
            if std::env::var_os("GST_DEBUG_LAYOUT").is_some()
                && let Some(layout) = &layout
            {
                // What became of each layout hypothesis: refined photometrically, matched, matched around.
                let show = |pose: &Pose3| {
                    let (m, deg) = errors(pose);
                    format!("{m:.2} m {deg:.0} deg")
                };
                let judged = |j: &Option<(gst_slam::Relocalization, bool)>| {
                    j.as_ref().map_or("-".to_string(), |(r, accepted)| {
                        format!(
                            "{} inl ncc {:.3} cov {:.2} {} {}",
                            r.inliers,
                            r.ncc,
                            r.coverage,
                            if *accepted { "ACCEPTED" } else { "rejected" },
                            show(&r.world_from_camera)
                        )
                    })
                };
                for (rank, (start, score)) in
                    layout.scored_hypotheses(&image, layout_count).iter().enumerate()
                {
                    let trace = relocalizer.trace_hypothesis(&image, start)?;
                    tracing::info!(
                        "{scene} {} layout #{} score {score:.3} start {} | refined {} | matched {} | around {} | synthesized {} | placed {correct}",
                        view.image,
                        rank + 1,
                        show(start),
                        trace.refined.as_ref().map_or("-".to_string(), |(pose, check)| format!(
                            "ncc {:.3} cov {:.2} {}",
                            check.ncc,
                            check.coverage,
                            show(pose)
                        )),
                        judged(&trace.matched),
                        judged(&trace.around),
                        judged(&trace.synthesized),
                    );
                }
            }
            if !correct && let Some(places) = &places {
                // Diagnostics: does the map explain the true pose, and does relocalising from it work?
                let truth_in_map = alignment.inverse_transform_pose(&view.world_from_camera);
                let check = relocalizer.check_pose(&image, &truth_in_map);
                let near = relocalizer.relocalize_near(&image, &truth_in_map)?;
                let at_truth = places.score_pose(&image, &truth_in_map);
                if let Ok(dir) = std::env::var("GST_DEBUG_PLACES")
                    && let Some((rendered, query)) = places.debug_images(&image, &truth_in_map)
                {
                    let stem = view.image.replace('/', "_");
                    gst_io::write_rgb_png(&Path::new(&dir).join(format!("{stem}.rendered.png")), &rendered)?;
                    gst_io::write_rgb_png(&Path::new(&dir).join(format!("{stem}.query.png")), &query)?;
                    if let Some(check) = relocalizer.check_images(&image, &truth_in_map) {
                        gst_io::write_rgb_png(&Path::new(&dir).join(format!("{stem}.check.png")), &check)?;
                    }
                }
                let hypotheses: Vec<String> = places
                    .hypotheses(&image, 8)
                    .iter()
                    .map(|h| {
                        let e = alignment.transform_pose(&h.world_from_camera);
                        format!(
                            "{:.2}: {:.2} m {:.0} deg",
                            h.score,
                            (e.translation() - view.world_from_camera.translation()).norm(),
                            (e.rotation().inverse() * view.world_from_camera.rotation()).angle().to_degrees()
                        )
                    })
                    .collect();
                tracing::info!(
                    "{scene} {}: place score at the truth {at_truth:?}; hypotheses {hypotheses:?}",
                    view.image
                );
                // The true pose as a place hypothesis would be handled (photometric refinement, matching,
                // view synthesis, the grid around it): whether a hypothesis near the truth could place it.
                let as_place = relocalizer.trace_hypothesis(&image, &truth_in_map)?;
                let traced = |j: &Option<(gst_slam::Relocalization, bool)>| {
                    j.as_ref().map_or("-".to_string(), |(r, accepted)| {
                        let (m, deg) = errors(&r.world_from_camera);
                        format!("{} inl ncc {:.3} {} {m:.2} m {deg:.1} deg", r.inliers, r.ncc, accepted)
                    })
                };
                tracing::info!(
                    "{scene} {}: the true pose as a place hypothesis: refined {} | matched {} | synthesized {} | around {}",
                    view.image,
                    as_place.refined.as_ref().map_or("-".to_string(), |(pose, check)| {
                        let (m, deg) = errors(pose);
                        format!("ncc {:.3} cov {:.2} {m:.2} m {deg:.1} deg", check.ncc, check.coverage)
                    }),
                    traced(&as_place.matched),
                    traced(&as_place.synthesized),
                    traced(&as_place.around),
                );
                tracing::info!(
                    "{scene} {}: at the true pose {check:?}; from it: {:?}",
                    view.image,
                    near.map(|n| (
                        n.inliers,
                        n.ncc,
                        (alignment.transform_pose(&n.world_from_camera).translation()
                            - view.world_from_camera.translation())
                        .norm()
                    ))
                );
            }
            write_judged("diagnostic", relocalizer.take_judged_log())?;
            tracing::info!("{scene} {}: {:?}", view.image, result);
            results.push(result);
        }
    }
    let correct = results.iter().filter(|r| placed(r)).count();
    let found = results.iter().filter(|r| r.found).count();
    let mut seconds: Vec<f64> = results.iter().map(|r| r.seconds).collect();
    seconds.sort_by(f64::total_cmp);
    let report = RelocReport {
        views: results.len(),
        found,
        correct,
        correct_pct: 100.0 * correct as f64 / results.len().max(1) as f64,
        wrong: found - correct,
        median_seconds: seconds.get(seconds.len() / 2).copied().unwrap_or(0.0),
        results,
    };
    gst_io::write_json(&args.out.join("reloc.json"), &report)?;
    #[allow(clippy::print_stdout)] // the command's report
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for r in &report.results {
            println!(
                "{:<10} {:<28} {:>6} {:>8} {:>8} {:>5} {:>5.2} {}{}{}",
                r.scene,
                r.image,
                if r.found { "found" } else { "-" },
                r.position_error_m.map_or("-".into(), |e| format!("{e:.3}")),
                r.heading_error_deg.map_or("-".into(), |e| format!("{e:.1}")),
                r.inliers,
                r.confidence,
                [("rejected", r.rejected_error), ("appearance", r.appearance_error)]
                    .iter()
                    .filter_map(|(what, e)| e.map(|(m, deg)| format!("{what} {m:.2} m {deg:.0}°")))
                    .collect::<Vec<_>>()
                    .join(", "),
                r.answer_yaw_error_deg.map_or(String::new(), |e| format!(
                    " | yaw {e:.1}° compass {}",
                    r.compass_yaw_error_deg.map_or("-".into(), |c| format!("{c:.1}°"))
                )),
                r.overlap.map_or(String::new(), |o| format!(
                    " | seen {:.0}%, similarly {:.0}%",
                    100.0 * o.seen,
                    100.0 * o.similar
                ))
            );
        }
        if args.maps.is_some() {
            for (what, found) in [("found", true), ("not found", false)] {
                let rows: Vec<&ViewResult> = report.results.iter().filter(|r| r.found == found).collect();
                let ori =
                    |e: f64| gst_bench::metrics::mean_accuracy(e, &gst_bench::metrics::ANGLE_LADDER_DEG);
                let before: f64 = rows.iter().filter_map(|r| r.answer_yaw_error_deg).map(ori).sum();
                let after: f64 = rows
                    .iter()
                    .filter_map(|r| r.compass_yaw_error_deg.or(r.answer_yaw_error_deg))
                    .map(ori)
                    .sum();
                println!(
                    "views {what} ({}): compass read {}; yaw within 5°: {} before, {} after; Ori mAcc {:.1} before, {:.1} after",
                    rows.len(),
                    rows.iter().filter(|r| r.compass_yaw_error_deg.is_some()).count(),
                    rows.iter().filter(|r| r.answer_yaw_error_deg.is_some_and(|e| e <= 5.0)).count(),
                    rows.iter()
                        .filter(|r| r
                            .compass_yaw_error_deg
                            .or(r.answer_yaw_error_deg)
                            .is_some_and(|e| e <= 5.0))
                        .count(),
                    100.0 * before / rows.len().max(1) as f64,
                    100.0 * after / rows.len().max(1) as f64
                );
            }
        }
        for (what, guesses) in [
            (
                "best rejected hypothesis",
                report.results.iter().filter_map(|r| r.rejected_error).collect::<Vec<_>>(),
            ),
            ("render-and-compare guess", report.results.iter().filter_map(|r| r.appearance_error).collect()),
        ] {
            println!(
                "views not found, {what}: {} of {} within 0.3 m and 10°, {} within 1 m and 30°",
                guesses.iter().filter(|(m, deg)| *m < 0.3 && *deg < 10.0).count(),
                guesses.len(),
                guesses.iter().filter(|(m, deg)| *m < 1.0 && *deg < 30.0).count()
            );
        }
        if args.layout {
            let ranks: Vec<Option<usize>> = report.results.iter().map(|r| r.layout_rank).collect();
            let within = |k: usize| ranks.iter().filter(|r| r.is_some_and(|r| r <= k)).count();
            let missed: Vec<Option<usize>> =
                report.results.iter().filter(|r| !placed(r)).map(|r| r.layout_rank).collect();
            println!(
                "layout hypotheses: searched {} of {} views; a correct one at rank 1: {}, within 5: {}; of the {} views not placed, {} had one",
                report.results.iter().filter(|r| r.layout_hypotheses.is_some_and(|n| n > 0)).count(),
                report.views,
                within(1),
                within(5),
                missed.len(),
                missed.iter().filter(|r| r.is_some()).count()
            );
        }
        if args.overlap {
            let (low, high) = OVERLAP_BOUNDS;
            for (what, range) in [
                (format!("below {:.0}%", 100.0 * low), f64::NEG_INFINITY..low),
                (format!("{:.0}–{:.0}%", 100.0 * low, 100.0 * high), low..high),
                (format!("{:.0}% or more", 100.0 * high), high..f64::INFINITY),
            ] {
                let rows: Vec<&ViewResult> = report
                    .results
                    .iter()
                    .filter(|r| r.overlap.is_some_and(|o| range.contains(&o.similar)))
                    .collect();
                let placed = rows.iter().filter(|r| placed(r)).count();
                println!(
                    "views whose surface the exploration saw from a similar viewpoint (ORACLE) {what}: {}, {placed} placed within 0.3 m and 10° ({:.1}%)",
                    rows.len(),
                    100.0 * placed as f64 / rows.len().max(1) as f64
                );
            }
        }
        println!(
            "{} views: {} within 0.3 m and 10° ({:.1}%), {} found but wrong, {} not found; median {:.2} s per view",
            report.views,
            report.correct,
            report.correct_pct,
            report.wrong,
            report.views - report.found,
            report.median_seconds
        );
    }
    Ok(())
}

/// Whether a view was found within the bounds (0.3 m and 10°).
fn placed(result: &ViewResult) -> bool {
    result.position_error_m.is_some_and(|e| e < 0.3) && result.heading_error_deg.is_some_and(|e| e < 10.0)
}

/// What `--overlap` measures a scene's views against (ORACLE): the generated scene's geometry and the
/// exploration's posed depth at its true poses.
struct ViewSurfaces {
    scene: RenderScene,
    camera: PinholeCamera,
    exploration: ExplorationDepth,
    config: OverlapConfig,
}

impl ViewSurfaces {
    fn load(data: &Path, scene: &str, sequence: &Path, truth: &Trajectory) -> Result<Self> {
        let started = std::time::Instant::now();
        let document = gst_sim::scene::Scene::load(&data.join("scenes").join(scene).join("scene.json"))?;
        let library = if document.furniture_source == "primitives" {
            FurnitureLibrary::primitives_only()
        } else {
            FurnitureLibrary::open(None)?
        };
        let render_scene = gst_sim::geometry::build_render_scene(&document, &library)?;
        let recording = gst_io::TumSequence::open(sequence, None)?;
        let camera = recording.calibration().map_or_else(PinholeCamera::gst_benchmark, |c| c.camera);
        let config = OverlapConfig::default();
        let mut exploration = ExplorationDepth::new(&camera, &config);
        for index in (0..recording.len()).step_by(OVERLAP_FRAME_STRIDE) {
            let frame = recording.frame(index)?;
            if let Some(pose) = truth.interpolate(frame.depth_timestamp_s) {
                exploration.add(&pose, &frame.depth);
            }
        }
        tracing::info!(
            "{scene}: {} exploration frames for the overlap diagnostic in {:.1} s",
            exploration.len(),
            started.elapsed().as_secs_f64()
        );
        Ok(Self { scene: render_scene, camera, exploration, config })
    }

    /// The overlap of the view at `world_from_camera` (its depth rendered from the scene).
    fn overlap(&self, world_from_camera: &Pose3) -> Option<ViewOverlap> {
        let frame = render(&self.scene, &self.camera, world_from_camera, &RenderOptions::default());
        view_overlap(&self.exploration, &self.camera, world_from_camera, &frame.depth, &self.config)
    }
}

/// SLAM's map and trajectory for `sequence`, from `dir` when an earlier run left them there.
fn slam_outputs(sequence: &Path, dir: &Path, config: &SlamConfig) -> Result<(SlamMap, Trajectory)> {
    let map_path = dir.join(MAP_FILE);
    let trajectory_path = dir.join("trajectory.tum");
    if map_path.is_file() && trajectory_path.is_file() {
        return Ok((SlamMap::load(&map_path)?, gst_io::read_trajectory_tum(&trajectory_path)?));
    }
    let mut source = gst_io::open_source(sequence, None)?;
    let bar = progress::bar(source.len().unwrap_or(0) as u64, "slam");
    let output = run_slam(source.as_mut(), config, &mut |_| bar.inc(1))
        .with_context(|| format!("SLAM on {}", sequence.display()))?;
    bar.finish_and_clear();
    gst_slam::output::write_outputs(dir, &output)?;
    Ok((SlamMap::from_output(&output), output.trajectory))
}
