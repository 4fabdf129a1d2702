//! Per-question metrics of GST-Bench: MRA for distances, mAcc for angles and points, accuracy for options.
//!
//! # MRA
//!
//! VSI-Bench's mean relative accuracy, computed exactly as its released evaluation code
//! (`lmms_eval/tasks/vsibench/utils.py`) does: the confidence thresholds are
//! `np.linspace(0.5, 0.95, 10)` and a threshold θ counts when `|ŷ − y| / y <= 1 − θ`, both in f64 with
//! numpy's rounding. The VSI-Bench paper writes `<`; the code, which produced its numbers, writes `<=`, and
//! the difference is visible with one-decimal answers (y = 2.0, ŷ = 3.0 scores 0.1, not 0).
//!
//! # mAcc ladders
//!
//! mAcc is the mean over a fixed ladder of error thresholds of 1[error ≤ t]. GST-Bench does not publish its
//! ladders; ours are chosen so that uniform random guessing lands on the paper's "Random Guessing" row:
//!
//! - **Angles** (ED, Ori), wrap-around error in degrees: [`ANGLE_LADDER_DEG`] = 5°, 10°, …, 50°. Against
//!   any ground truth a uniform guess has an error uniform on [0°, 180°], so P(error ≤ t) = t / 180 and the
//!   expected mAcc is mean(t) / 180 = 27.5 / 180 = 15.3 % (15.5 % with integer answers, whose ties count).
//!   Paper: ED_v 14.88, ED_s 17.31, Ori 15.55.
//! - **Points** (GP, Pos), Euclidean distance in normalised [0, 999] units: [`POINT_LADDER`] = 40, 80, …,
//!   400. For two independent uniform points in the unit square P(d ≤ r) = πr² − 8r³/3 + r⁴/2 (r ≤ 1), and
//!   the mean over r = 0.04, 0.08, …, 0.40 is 14.5 % (14.51 % exactly for integer coordinates). Paper:
//!   GP_v 15.04, GP_s 14.15, Pos 16.51. The tightest step, 40 units, is 4 % of the top-down image: about
//!   half a metre in a 12 m house; the loosest, 400 units, is about 5 m.
//!
//! MRA has no ladder to choose: its random score depends only on the guesser. With ground truth uniform on
//! 1–8 m and guesses uniform on 0–11 m (one decimal) it is 22.4 % (paper: EDist_v 23.22, EDist_s 20.40).
//! Options: one of four letters, 25 % (paper: 23.15, 27.73, 24.72, 27.49). `tests/scoring.rs` measures all
//! of this through the scorer.

use gst_core::Answer;

/// Number of MRA confidence thresholds (θ = 0.50, 0.55, …, 0.95).
pub const MRA_THRESHOLD_COUNT: usize = 10;
const MRA_FIRST_THRESHOLD: f64 = 0.5;
const MRA_LAST_THRESHOLD: f64 = 0.95;

/// The error thresholds of angle mAcc, in degrees (see the module docs for the choice).
pub const ANGLE_LADDER_DEG: [f64; 10] = [5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0, 45.0, 50.0];

/// The error thresholds of point mAcc, in normalised [0, 999] units of the top-down image.
pub const POINT_LADDER: [f64; 10] = [40.0, 80.0, 120.0, 160.0, 200.0, 240.0, 280.0, 320.0, 360.0, 400.0];

/// VSI-Bench's confidence thresholds θ, as `np.linspace(0.5, 0.95, 10)` computes them: `start + i * step`
/// with the last one set to the end point.
pub fn mra_thresholds() -> [f64; MRA_THRESHOLD_COUNT] {
    let step = (MRA_LAST_THRESHOLD - MRA_FIRST_THRESHOLD) / (MRA_THRESHOLD_COUNT - 1) as f64;
    let mut thresholds = [0.0; MRA_THRESHOLD_COUNT];
    for (i, threshold) in thresholds.iter_mut().enumerate() {
        *threshold = i as f64 * step + MRA_FIRST_THRESHOLD;
    }
    thresholds[MRA_THRESHOLD_COUNT - 1] = MRA_LAST_THRESHOLD;
    thresholds
}

/// VSI-Bench's mean relative accuracy of one prediction, in [0, 1]. A ground truth of zero (which GST
/// never has) scores an exact match only; a non-finite prediction scores 0.
pub fn mean_relative_accuracy(predicted: f64, truth: f64) -> f64 {
    if !predicted.is_finite() {
        return 0.0;
    }
    if truth == 0.0 {
        return if predicted == 0.0 { 1.0 } else { 0.0 };
    }
    let relative_error = (predicted - truth).abs() / truth;
    let thresholds = mra_thresholds();
    let hits = thresholds.iter().filter(|&&theta| relative_error <= 1.0 - theta).count();
    hits as f64 / thresholds.len() as f64
}

/// The mean over `ladder` of 1[error ≤ threshold], in [0, 1]; a NaN error scores 0.
pub fn mean_accuracy(error: f64, ladder: &[f64]) -> f64 {
    if ladder.is_empty() {
        return 0.0;
    }
    let hits = ladder.iter().filter(|&&threshold| error <= threshold).count();
    hits as f64 / ladder.len() as f64
}

/// The angle between two headings in degrees, wrapped: in [0, 180].
pub fn angle_error_deg(predicted_deg: f64, truth_deg: f64) -> f64 {
    let difference = (predicted_deg - truth_deg).rem_euclid(360.0);
    difference.min(360.0 - difference)
}

/// Euclidean distance between two points in normalised top-down units.
pub fn point_error(predicted: [f64; 2], truth: [f64; 2]) -> f64 {
    (predicted[0] - truth[0]).hypot(predicted[1] - truth[1])
}

/// The score in [0, 1] of a prediction against the ground truth, with the task's metric (chosen by the
/// answer kind). No prediction, or one of another kind, scores 0.
pub fn score_answer(truth: &Answer, predicted: Option<&Answer>) -> f64 {
    let Some(predicted) = predicted else { return 0.0 };
    match (*truth, *predicted) {
        (Answer::Degrees(truth), Answer::Degrees(predicted)) => {
            mean_accuracy(angle_error_deg(f64::from(predicted), f64::from(truth)), &ANGLE_LADDER_DEG)
        }
        (Answer::Metres(truth), Answer::Metres(predicted)) => mean_relative_accuracy(predicted, truth),
        (Answer::Point(truth), Answer::Point(predicted)) => {
            let as_f64 = |[x, y]: [u32; 2]| [f64::from(x), f64::from(y)];
            mean_accuracy(point_error(as_f64(predicted), as_f64(truth)), &POINT_LADDER)
        }
        (Answer::Choice(truth), Answer::Choice(predicted)) if truth == predicted => 1.0,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mra_thresholds_match_numpy_linspace_bit_for_bit() {
        // repr() of np.linspace(.5, .95, 10) and of 1 - it, from numpy 2.4.
        let expected = [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.8999999999999999, 0.95];
        assert_eq!(mra_thresholds(), expected);
        let complements: Vec<f64> = mra_thresholds().iter().map(|theta| 1.0 - theta).collect();
        assert_eq!(
            complements,
            [
                0.5,
                0.44999999999999996,
                0.4,
                0.35,
                0.30000000000000004,
                0.25,
                0.19999999999999996,
                0.15000000000000002,
                0.10000000000000009,
                0.050000000000000044
            ]
        );
    }

    #[test]
    fn mra_matches_vsi_bench_reference_values() {
        // (prediction, truth, VSI-Bench's mean_relative_accuracy) computed with its released code.
        let reference = [
            (3.0, 2.0, 0.1),
            (1.5, 1.0, 0.1),
            (0.3, 0.2, 0.1),
            (2.2, 2.0, 0.9),
            (13.2, 13.2, 1.0),
            (1.1, 1.0, 0.9),
            (0.9, 1.0, 0.9),
            (4.5, 3.0, 0.1),
            (1.3, 1.0, 0.5),
            (3.9, 3.0, 0.5),
            (1.15, 1.0, 0.8),
            (8.7, 5.8, 0.1),
        ];
        for (predicted, truth, expected) in reference {
            let mra = mean_relative_accuracy(predicted, truth);
            assert!(
                (mra - expected).abs() < 1e-12,
                "MRA({predicted}, {truth}) = {mra}, VSI-Bench {expected}"
            );
        }
        assert_eq!(mean_relative_accuracy(100.0, 2.0), 0.0);
        assert_eq!(mean_relative_accuracy(f64::NAN, 2.0), 0.0);
        assert_eq!(mean_relative_accuracy(0.0, 0.0), 1.0);
    }

    #[test]
    fn angle_errors_wrap_around() {
        assert_eq!(angle_error_deg(170.0, -170.0), 20.0);
        assert_eq!(angle_error_deg(-134.0, -134.0), 0.0);
        assert_eq!(angle_error_deg(0.0, 180.0), 180.0);
        assert_eq!(angle_error_deg(-180.0, 180.0), 0.0);
        assert_eq!(angle_error_deg(90.0, -45.0), 135.0);
    }

    #[test]
    fn mean_accuracy_counts_thresholds_inclusively() {
        assert_eq!(mean_accuracy(0.0, &ANGLE_LADDER_DEG), 1.0);
        assert_eq!(mean_accuracy(5.0, &ANGLE_LADDER_DEG), 1.0);
        assert_eq!(mean_accuracy(5.5, &ANGLE_LADDER_DEG), 0.9);
        assert_eq!(mean_accuracy(50.0, &ANGLE_LADDER_DEG), 0.1);
        assert_eq!(mean_accuracy(51.0, &ANGLE_LADDER_DEG), 0.0);
        assert_eq!(mean_accuracy(f64::NAN, &POINT_LADDER), 0.0);
        assert_eq!(mean_accuracy(1.0, &[]), 0.0);
    }

    #[test]
    fn answers_score_by_their_kind() {
        assert_eq!(score_answer(&Answer::Choice('B'), Some(&Answer::Choice('B'))), 1.0);
        assert_eq!(score_answer(&Answer::Choice('B'), Some(&Answer::Choice('C'))), 0.0);
        assert_eq!(score_answer(&Answer::Degrees(170), Some(&Answer::Degrees(-170))), 0.7);
        assert_eq!(score_answer(&Answer::Point([100, 100]), Some(&Answer::Point([130, 140]))), 0.9);
        assert_eq!(score_answer(&Answer::Metres(2.0), Some(&Answer::Metres(2.0))), 1.0);
        assert_eq!(score_answer(&Answer::Metres(2.0), None), 0.0);
        assert_eq!(score_answer(&Answer::Metres(2.0), Some(&Answer::Degrees(2))), 0.0);
    }
}
