//! The scorer on synthetic benchmarks whose answers are known by construction: ground truth scores 100,
//! noise degrades every metric monotonically, and uniform random guessing lands on the paper's random row.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;

use gst_bench::table::RANDOM_ROW;
use gst_bench::{PaperTable, Predictions, ScoreReport, ScoreTables, score};
use gst_core::{Answer, AnswerKind, Metric, Question, Setting, TaskId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Questions per subtask in the random-guessing check (the acceptance asks for at least 200).
const QUESTIONS_PER_TASK: usize = 1000;
/// Ground-truth distances are drawn uniformly from this range, in metres (in-house object distances).
const TRUTH_METRES: (f64, f64) = (1.0, 8.0);
/// A random guesser's distances are uniform on this range, in metres (see metrics.rs).
const GUESS_METRES: (f64, f64) = (0.0, 11.0);
/// How far from the paper's random row (in points) a measured random score may be.
const RANDOM_TOLERANCE: f64 = 5.0;

fn question(uid: String, task: TaskId, answer: Answer, setting: Setting) -> Question {
    Question {
        task,
        uid,
        scene: "scene_0".into(),
        answer,
        texts: Vec::new(),
        source_video_path: String::new(),
        copied_video_path: "video.mp4".into(),
        images: Vec::new(),
        setting,
    }
}

/// A ground truth with the plausible distribution of its kind: angles and points uniform, distances
/// uniform on 1–8 m with one decimal, letters uniform.
fn draw_truth(kind: AnswerKind, rng: &mut ChaCha8Rng) -> Answer {
    match kind {
        AnswerKind::Degrees => Answer::Degrees(rng.gen_range(-180..=180)),
        AnswerKind::Metres => {
            Answer::Metres((rng.gen_range(TRUTH_METRES.0..=TRUTH_METRES.1) * 10.0).round() / 10.0)
        }
        AnswerKind::Point => Answer::Point([rng.gen_range(0..=999), rng.gen_range(0..=999)]),
        AnswerKind::Choice => Answer::Choice(['A', 'B', 'C', 'D'][rng.gen_range(0..4)]),
    }
}

/// A uniform random guess, written as a model would answer in GST's format.
fn random_guess(kind: AnswerKind, rng: &mut ChaCha8Rng) -> String {
    match kind {
        AnswerKind::Metres => format!("{:.1}", rng.gen_range(GUESS_METRES.0..=GUESS_METRES.1)),
        _ => draw_truth(kind, rng).to_string(),
    }
}

fn synthetic_questions(tasks: &[TaskId], setting: Setting, per_task: usize, seed: u64) -> Vec<Question> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut questions = Vec::new();
    for &task in tasks {
        for i in 0..per_task {
            let answer = draw_truth(task.answer_kind(), &mut rng);
            questions.push(question(format!("{}_{setting:?}_{i}", task.column()), task, answer, setting));
        }
    }
    questions
}

fn score_texts(questions: &[Question], texts: impl IntoIterator<Item = (String, String)>) -> ScoreReport {
    score(questions, &Predictions::from_texts(Path::new("synthetic.jsonl"), texts)).expect("scores")
}

fn global(report: &ScoreReport, task: TaskId) -> f64 {
    report.score_pct(task, Setting::Global).expect("the task has questions")
}

#[test]
fn ground_truth_scores_100_on_every_column_and_setting_plain_or_verbose() {
    let mut questions = synthetic_questions(&TaskId::ALL, Setting::Global, 50, 1);
    let local_tasks: Vec<TaskId> = TaskId::ALL.into_iter().filter(|task| task.has_local_settings()).collect();
    questions.extend(synthetic_questions(&local_tasks, Setting::LocalVideo, 20, 2));
    questions.extend(synthetic_questions(&local_tasks, Setting::LocalImage, 20, 3));
    for verbose in [false, true] {
        let texts = questions.iter().map(|q| {
            let answer = q.answer.to_string();
            let text =
                if verbose { format!("After watching the video, the answer is {answer}.") } else { answer };
            (q.uid.clone(), text)
        });
        let report = score_texts(&questions, texts);
        for (&(task, setting), cell) in &report.cells {
            assert_eq!(cell.mean_pct(), Some(100.0), "{} {setting} (verbose: {verbose})", task.column());
        }
        assert_eq!(report.average_pct(), Some(100.0));
        assert_eq!(report.unparseable(), 0);

        let tables = ScoreTables::new(&report, &PaperTable::embedded().expect("paper"), "ground truth");
        assert!(tables.local.is_some(), "local questions give a local table");
        assert!(tables.main.rows[0].scores.iter().all(|score| *score == Some(100.0)));
    }
}

/// Per-question noise with common random numbers: the same unit draw `u` in [-1, 1] scaled by each level,
/// so every question's error grows with the level and the column score can only fall. The first non-zero
/// level of each kind exceeds the metric's tightest threshold (5°, 5 % relative, 40 units), below which
/// noise is not supposed to cost anything.
fn noisy_prediction(truth: &Answer, level: f64, u: [f64; 2]) -> String {
    match *truth {
        Answer::Degrees(deg) => format!("{}°", f64::from(deg) + (level * u[0]).round()),
        Answer::Metres(metres) => {
            format!("about {:.2} m", metres + (metres * level * u[0] * 100.0).round() / 100.0)
        }
        Answer::Point([x, y]) => {
            let noisy = |value: u32, u: f64| (f64::from(value) + (level * u).round()).clamp(0.0, 999.0);
            format!("<point>{} {}</point>", noisy(x, u[0]), noisy(y, u[1]))
        }
        Answer::Choice(letter) => letter.to_string(),
    }
}

#[test]
fn growing_noise_degrades_angles_distances_and_points_monotonically() {
    let cases: [(TaskId, &[f64]); 3] = [
        (TaskId::EgocentricDirectionSemantic, &[0.0, 10.0, 20.0, 40.0, 80.0, 160.0]),
        (TaskId::EgocentricDistanceSemantic, &[0.0, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (TaskId::SelfPosition, &[0.0, 50.0, 100.0, 200.0, 400.0, 800.0]),
    ];
    for (task, levels) in cases {
        let questions = synthetic_questions(&[task], Setting::Global, 500, 7);
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let draws: Vec<[f64; 2]> =
            questions.iter().map(|_| [rng.gen_range(-1.0..=1.0), rng.gen_range(-1.0..=1.0)]).collect();
        let scores: Vec<f64> = levels
            .iter()
            .map(|&level| {
                let texts = questions
                    .iter()
                    .zip(&draws)
                    .map(|(q, &u)| (q.uid.clone(), noisy_prediction(&q.answer, level, u)));
                global(&score_texts(&questions, texts), task)
            })
            .collect();
        eprintln!("{}: noise {levels:?} -> {scores:.1?}", task.column());
        assert_eq!(scores[0], 100.0, "{}", task.column());
        assert!(
            scores.windows(2).all(|pair| pair[1] < pair[0]),
            "{} must fall strictly: {scores:?}",
            task.column()
        );
        assert!(scores[scores.len() - 1] < 40.0, "{}: {scores:?}", task.column());
    }
}

#[test]
fn uniform_random_guessing_lands_on_the_papers_random_row() {
    let questions = synthetic_questions(&TaskId::ALL, Setting::Global, QUESTIONS_PER_TASK, 11);
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let texts: Vec<(String, String)> =
        questions.iter().map(|q| (q.uid.clone(), random_guess(q.task.answer_kind(), &mut rng))).collect();
    let report = score_texts(&questions, texts);
    let paper = PaperTable::embedded().expect("paper");
    let random = paper.row(RANDOM_ROW).expect("random row");

    eprintln!("column   ours  paper");
    // Per metric family (metric and answer kind): (ours, paper) per column.
    let mut families: BTreeMap<(Metric, AnswerKind), Vec<(f64, f64)>> = BTreeMap::new();
    for task in TaskId::ALL {
        let ours = global(&report, task);
        let theirs = random.scores[task.column()];
        eprintln!("{:<7} {ours:6.2} {theirs:6.2}", task.column());
        assert!(
            (ours - theirs).abs() <= RANDOM_TOLERANCE,
            "{}: random guessing scores {ours:.2}, the paper's random row {theirs:.2}",
            task.column()
        );
        families.entry((task.metric(), task.answer_kind())).or_default().push((ours, theirs));
    }
    for ((metric, kind), pairs) in &families {
        let mean = |pick: fn(&(f64, f64)) -> f64| pairs.iter().map(pick).sum::<f64>() / pairs.len() as f64;
        let (ours, theirs) = (mean(|p| p.0), mean(|p| p.1));
        eprintln!("family {} ({kind:?}): ours {ours:.2}, paper {theirs:.2}", metric.name());
        assert!(
            (ours - theirs).abs() <= RANDOM_TOLERANCE,
            "{} {kind:?}: {ours:.2} vs {theirs:.2}",
            metric.name()
        );
    }
    let average = report.average_pct().expect("avg");
    eprintln!("Avg     {average:6.2} {:6.2}", random.scores["Avg"]);
    assert!((average - random.scores["Avg"]).abs() <= RANDOM_TOLERANCE);
}
