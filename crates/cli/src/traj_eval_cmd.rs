//! `gst traj-eval`: ATE and RPE of an estimated trajectory against ground truth, both TUM trajectory
//! files, with evo's definitions and defaults (see `gst_slam::metrics`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use gst_io::read_trajectory_tum;
use gst_slam::metrics::{
    AlignmentKind, DEFAULT_MAX_DIFFERENCE_S, ErrorStatistics, EvaluationOptions, TrajectoryEvaluation,
    evaluate,
};

#[derive(Debug, clap::Args)]
pub struct TrajEvalArgs {
    /// Ground-truth trajectory, TUM format: `timestamp tx ty tz qx qy qz qw` (camera-to-world) per line.
    pub groundtruth: PathBuf,
    /// Estimated trajectory, TUM format.
    pub estimate: PathBuf,
    /// Align with scale, Sim(3) (`evo_ape -as`): for monocular estimates.
    #[arg(long, conflicts_with = "no_align")]
    pub sim3: bool,
    /// Align the estimate onto the ground truth before measuring, SE(3) (`evo_ape -a`). The default.
    #[arg(long, overrides_with = "no_align")]
    pub align: bool,
    /// Measure the estimate as given: both files are in the same world frame.
    #[arg(long, overrides_with = "align")]
    pub no_align: bool,
    /// Largest time difference of associated poses, seconds.
    #[arg(long, value_name = "S", default_value_t = DEFAULT_MAX_DIFFERENCE_S)]
    pub max_diff: f64,
    /// RPE step, in associated poses.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub delta: usize,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl TrajEvalArgs {
    /// The evaluation options the arguments ask for, validated (no file is touched).
    fn options(&self) -> Result<EvaluationOptions> {
        let alignment = if self.no_align {
            AlignmentKind::None
        } else if self.sim3 {
            AlignmentKind::Sim3
        } else {
            AlignmentKind::Se3
        };
        let options =
            EvaluationOptions { max_difference_s: self.max_diff, alignment, rpe_delta_frames: self.delta };
        options.validate()?;
        Ok(options)
    }
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    groundtruth: &'a Path,
    estimate: &'a Path,
    #[serde(flatten)]
    evaluation: &'a TrajectoryEvaluation,
}

pub fn run(args: &TrajEvalArgs) -> Result<()> {
    let options = args.options()?;
    let groundtruth = read_trajectory_tum(&args.groundtruth).context("reading the ground truth")?;
    let estimate = read_trajectory_tum(&args.estimate).context("reading the estimate")?;
    let evaluation = evaluate(&groundtruth, &estimate, &options).with_context(|| {
        format!("evaluating {} against {}", args.estimate.display(), args.groundtruth.display())
    })?;
    let text = if args.json {
        let report =
            Report { groundtruth: &args.groundtruth, estimate: &args.estimate, evaluation: &evaluation };
        let mut json = serde_json::to_string_pretty(&report).context("serialising the results")?;
        json.push('\n');
        json
    } else {
        table(args, &evaluation)
    };
    #[allow(clippy::print_stdout)] // the command's report
    {
        print!("{text}");
    }
    Ok(())
}

fn table(args: &TrajEvalArgs, evaluation: &TrajectoryEvaluation) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "ground truth  {} ({} poses)", args.groundtruth.display(), evaluation.gt_poses);
    let _ = writeln!(out, "estimate      {} ({} poses)", args.estimate.display(), evaluation.est_poses);
    let _ = writeln!(
        out,
        "associated    {} poses (max time difference {} s)",
        evaluation.associated_poses, evaluation.options.max_difference_s
    );
    let alignment = match (evaluation.options.alignment, &evaluation.alignment) {
        (AlignmentKind::Sim3, Some(alignment)) => format!("Sim(3), scale {:.6}", alignment.scale),
        (AlignmentKind::Se3, _) => "SE(3)".to_string(),
        _ => "none".to_string(),
    };
    let _ = writeln!(out, "alignment     {alignment}");
    let _ =
        writeln!(out, "RPE delta     {} (associated poses, consecutive pairs)", evaluation.rpe.delta_frames);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<14} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "", "pairs", "rmse", "mean", "median", "std", "min", "max"
    );
    let rows: [(&str, usize, &ErrorStatistics); 3] = [
        ("ATE (m)", evaluation.ate.pairs, &evaluation.ate.translation_m),
        ("RPE trans (m)", evaluation.rpe.pairs, &evaluation.rpe.translation_m),
        ("RPE rot (deg)", evaluation.rpe.pairs, &evaluation.rpe.rotation_deg),
    ];
    for (name, pairs, s) in rows {
        let _ = writeln!(
            out,
            "{name:<14} {pairs:>6} {:>10.6} {:>10.6} {:>10.6} {:>10.6} {:>10.6} {:>10.6}",
            s.rmse, s.mean, s.median, s.std, s.min, s.max
        );
    }
    out
}
