//! `gst traj-eval` end to end, cross-checked against evo (`evo_ape`, `evo_rpe` from the project
//! virtualenv) on a noisy estimate whose timestamps are a few milliseconds off the ground truth's, so that
//! association matters; and clear errors for files that cannot be evaluated.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use nalgebra::{UnitQuaternion, Vector3};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use common::{assert_clean_failure, run};
use gst_core::{Pose3, TimedPose, Trajectory};
use gst_io::write_trajectory_tum;

/// evo prints its statistics with six decimals, so agreement shows as differences up to half a unit of the
/// sixth decimal (5e-7).
const TOLERANCE: f64 = 1e-6;

/// A TUM-style start time: large timestamps test that association does not lose precision.
const START_S: f64 = 1_305_031_102.175_304;

fn venv_bin(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin").join(name)
}

/// Ground truth: 400 poses at 30 Hz of a camera walking a loop at head height while looking around.
fn groundtruth() -> Result<Trajectory> {
    let poses = (0..400)
        .map(|i| {
            let t = i as f64 / 30.0;
            let position =
                Vector3::new(2.5 * (0.4 * t).cos(), 1.5 * (0.4 * t).sin(), 1.4 + 0.05 * (2.0 * t).sin());
            TimedPose {
                timestamp_s: START_S + t,
                world_from_camera: Pose3::world_from_camera_yaw_pitch(position, 0.4 * t + 1.5, 0.1 * t.sin()),
            }
        })
        .collect();
    Ok(Trajectory::new(poses)?)
}

/// How the estimate's world frame differs from the ground truth's.
#[derive(Clone, Copy, Debug)]
enum EstimateWorld {
    /// The same frame.
    Same,
    /// Rotated and moved, and scaled by this factor.
    Moved { scale: f64 },
}

/// The estimate: the ground truth in its own world frame, with seeded noise on positions (±3 cm) and
/// orientations (±1°), timestamps 2–6 ms late, every 37th pose missing and a few extra poses before the
/// ground truth starts (so the estimate is the longer file).
fn estimate(groundtruth: &Trajectory, world: EstimateWorld, seed: u64) -> Result<Trajectory> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (est_from_gt_rotation, est_from_gt_translation, scale) = match world {
        EstimateWorld::Same => (UnitQuaternion::identity(), Vector3::zeros(), 1.0),
        EstimateWorld::Moved { scale } => (
            UnitQuaternion::from_scaled_axis(Vector3::new(0.2, -0.4, 1.9)),
            Vector3::new(-3.0, 0.7, 2.2),
            scale,
        ),
    };
    let mut noise = |amplitude: f64| {
        Vector3::new(
            rng.gen_range(-amplitude..amplitude),
            rng.gen_range(-amplitude..amplitude),
            rng.gen_range(-amplitude..amplitude),
        )
    };
    let mut poses = Vec::new();
    for k in (1..=20).rev() {
        poses.push(TimedPose {
            timestamp_s: START_S - k as f64 / 30.0 + 0.004,
            world_from_camera: Pose3::from_parts(noise(1.0), UnitQuaternion::identity()),
        });
    }
    for (i, pose) in groundtruth.poses().iter().enumerate() {
        let position_noise = noise(0.03);
        let rotation_noise = UnitQuaternion::from_scaled_axis(noise(1f64.to_radians()));
        let delay_s = 0.002 + 0.004 * noise(0.5).x.abs() * 2.0;
        if i % 37 == 36 {
            continue;
        }
        let gt = pose.world_from_camera;
        let position =
            scale * (est_from_gt_rotation * (gt.translation() + position_noise)) + est_from_gt_translation;
        let rotation = est_from_gt_rotation * gt.rotation() * rotation_noise;
        poses.push(TimedPose {
            timestamp_s: pose.timestamp_s + delay_s,
            world_from_camera: Pose3::from_parts(position, rotation),
        });
    }
    Ok(Trajectory::new(poses)?)
}

fn path_arg(path: &Path) -> &str {
    path.to_str().unwrap_or_default()
}

/// Runs an evo command and returns the statistics it prints (`rmse`, `mean`, …).
fn evo(home: &Path, program: &str, args: &[&str]) -> Result<BTreeMap<String, f64>> {
    let binary = venv_bin(program);
    ensure!(
        binary.is_file(),
        "{} is missing: evo is needed to cross-check gst traj-eval; run `make setup`",
        binary.display()
    );
    let output = Command::new(&binary)
        .args(args)
        .env("HOME", home)
        .env("MPLBACKEND", "Agg")
        .output()
        .with_context(|| format!("running {}", binary.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!("{program} {args:?} failed: {stdout}{}", String::from_utf8_lossy(&output.stderr));
    }
    let mut stats = BTreeMap::new();
    for line in stdout.lines() {
        let mut fields = line.split_whitespace();
        if let (Some(name), Some(value), None) = (fields.next(), fields.next(), fields.next())
            && ["rmse", "mean", "median", "std", "min", "max", "sse"].contains(&name)
        {
            stats.insert(name.to_string(), value.parse::<f64>()?);
        }
    }
    ensure!(stats.len() == 7, "{program} {args:?}: no statistics in its output:\n{stdout}");
    Ok(stats)
}

fn gst_json(args: &[&str]) -> Result<serde_json::Value> {
    let output = run(args);
    ensure!(output.status.success(), "gst {args:?} failed: {}", common::stderr(&output));
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// Asserts that our statistics (`ours`, a JSON object) agree with evo's within [`TOLERANCE`], and that
/// both compared the same number of pairs (evo does not print it: `sse / rmse²`).
fn assert_agree(
    what: &str,
    ours: &serde_json::Value,
    pairs: &serde_json::Value,
    evo: &BTreeMap<String, f64>,
) {
    for name in ["rmse", "mean", "median", "max", "min", "std"] {
        let our = ours[name].as_f64().unwrap_or(f64::NAN);
        let their = evo[name];
        assert!((our - their).abs() < TOLERANCE, "{what} {name}: gst {our}, evo {their}");
    }
    let evo_pairs = (evo["sse"] / (evo["rmse"] * evo["rmse"])).round();
    assert_eq!(pairs.as_f64(), Some(evo_pairs), "{what}: number of pairs");
}

#[test]
fn traj_eval_agrees_with_evo_for_se3_and_sim3_alignment() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home)?;
    let gt_path = dir.path().join("groundtruth.txt");
    let gt = groundtruth()?;
    write_trajectory_tum(&gt_path, &gt)?;
    let gt_arg = path_arg(&gt_path);

    // SE(3): ATE after alignment, RPE (translation and rotation angle) unaligned as evo_rpe's default.
    let est_path = dir.path().join("estimate.txt");
    write_trajectory_tum(&est_path, &estimate(&gt, EstimateWorld::Moved { scale: 1.0 }, 1)?)?;
    let est_arg = path_arg(&est_path);
    let ours = gst_json(&["traj-eval", gt_arg, est_arg, "--json"])?;
    assert_eq!(ours["gt_poses"], 400);
    assert_eq!(ours["est_poses"], 20 + 400 - 10);
    // Ten ground-truth poses have no estimate within 10 ms.
    assert_eq!(ours["associated_poses"], 390);
    assert_eq!(ours["alignment"]["scale"], 1.0);
    let ate = evo(&home, "evo_ape", &["tum", gt_arg, est_arg, "-a"])?;
    assert_agree("SE(3) ATE", &ours["ate"]["translation_m"], &ours["ate"]["pairs"], &ate);
    assert!(ate["rmse"] > 0.02, "the noise shows: {ate:?}");
    let rpe = evo(&home, "evo_rpe", &["tum", gt_arg, est_arg])?;
    assert_agree("RPE translation", &ours["rpe"]["translation_m"], &ours["rpe"]["pairs"], &rpe);
    let rpe_rotation = evo(&home, "evo_rpe", &["tum", gt_arg, est_arg, "-r", "angle_deg"])?;
    assert_agree("RPE rotation", &ours["rpe"]["rotation_deg"], &ours["rpe"]["pairs"], &rpe_rotation);

    // RPE over 10 associated poses.
    let ours = gst_json(&["traj-eval", gt_arg, est_arg, "--delta", "10", "--json"])?;
    let rpe = evo(&home, "evo_rpe", &["tum", gt_arg, est_arg, "--delta", "10"])?;
    assert_agree("RPE translation, delta 10", &ours["rpe"]["translation_m"], &ours["rpe"]["pairs"], &rpe);

    // Sim(3): an estimate at half scale; RPE then also sees the scale correction (evo_rpe -as).
    let half_path = dir.path().join("estimate_half_scale.txt");
    write_trajectory_tum(&half_path, &estimate(&gt, EstimateWorld::Moved { scale: 0.5 }, 2)?)?;
    let half_arg = path_arg(&half_path);
    let ours = gst_json(&["traj-eval", gt_arg, half_arg, "--sim3", "--json"])?;
    let scale = ours["alignment"]["scale"].as_f64().unwrap_or(f64::NAN);
    assert!((scale - 2.0).abs() < 0.02, "scale {scale}");
    let ate = evo(&home, "evo_ape", &["tum", gt_arg, half_arg, "-as"])?;
    assert_agree("Sim(3) ATE", &ours["ate"]["translation_m"], &ours["ate"]["pairs"], &ate);
    let rpe = evo(&home, "evo_rpe", &["tum", gt_arg, half_arg, "-as"])?;
    assert_agree("Sim(3) RPE translation", &ours["rpe"]["translation_m"], &ours["rpe"]["pairs"], &rpe);

    // No alignment: the estimate is in the ground truth's world frame.
    let same_frame_path = dir.path().join("estimate_same_frame.txt");
    write_trajectory_tum(&same_frame_path, &estimate(&gt, EstimateWorld::Same, 3)?)?;
    let ours = gst_json(&["traj-eval", gt_arg, path_arg(&same_frame_path), "--no-align", "--json"])?;
    assert!(ours["alignment"].is_null());
    let ape = evo(&home, "evo_ape", &["tum", gt_arg, path_arg(&same_frame_path)])?;
    assert_agree("unaligned ATE", &ours["ate"]["translation_m"], &ours["ate"]["pairs"], &ape);

    // The table names the files and the alignment.
    let output = run(&["traj-eval", gt_arg, half_arg, "--sim3"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let text = String::from_utf8(output.stdout)?;
    for needle in ["ATE (m)", "RPE trans (m)", "RPE rot (deg)", "Sim(3), scale 2.0", "groundtruth.txt"] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    Ok(())
}

#[test]
fn traj_eval_names_the_file_or_the_problem() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let gt_path = dir.path().join("groundtruth.txt");
    let gt = groundtruth()?;
    write_trajectory_tum(&gt_path, &gt)?;
    let gt_arg = path_arg(&gt_path);

    let bad_path = dir.path().join("broken.txt");
    std::fs::write(&bad_path, "# timestamp tx ty tz qx qy qz qw\n1.0 0 0 0 0 0 0 1\n2.0 0 0 zero 0 0 0 1\n")?;
    assert_clean_failure(
        &run(&["traj-eval", gt_arg, path_arg(&bad_path)]),
        &["estimate", "broken.txt", "line 3"],
    );
    let missing = dir.path().join("missing.txt");
    assert_clean_failure(&run(&["traj-eval", path_arg(&missing), gt_arg]), &["ground truth", "missing.txt"]);

    // Another clock: nothing associates.
    let later_path = dir.path().join("later.txt");
    let later = Trajectory::new(
        gt.poses().iter().map(|p| TimedPose { timestamp_s: p.timestamp_s + 100.0, ..*p }).collect(),
    )?;
    write_trajectory_tum(&later_path, &later)?;
    assert_clean_failure(
        &run(&["traj-eval", gt_arg, path_arg(&later_path)]),
        &["later.txt", "no timestamps match within 0.01 s"],
    );

    // Positions on a line cannot be aligned, but can be measured as given.
    let line_path = dir.path().join("line.txt");
    let line = Trajectory::new(
        gt.poses()
            .iter()
            .enumerate()
            .map(|(i, p)| TimedPose {
                timestamp_s: p.timestamp_s,
                world_from_camera: Pose3::from_parts(
                    Vector3::new(0.01 * i as f64, 0.0, 1.0),
                    p.world_from_camera.rotation(),
                ),
            })
            .collect(),
    )?;
    write_trajectory_tum(&line_path, &line)?;
    assert_clean_failure(&run(&["traj-eval", gt_arg, path_arg(&line_path)]), &["collinear"]);
    let output = run(&["traj-eval", gt_arg, path_arg(&line_path), "--no-align"]);
    assert!(output.status.success(), "{}", common::stderr(&output));

    assert_clean_failure(&run(&["traj-eval", gt_arg, gt_arg, "--delta", "0"]), &["delta"]);
    assert_clean_failure(&run(&["traj-eval", gt_arg, gt_arg, "--sim3", "--no-align"]), &["--no-align"]);
    Ok(())
}
