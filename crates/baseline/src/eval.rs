//! The evaluation runner: answers every question of a split with one [`Answerer`], scene by scene, and
//! writes `predictions.jsonl` (`{"uid": ..., "prediction": ...}` per line, what `gst score` reads).
//!
//! Resumable: predictions already in the file are kept and their questions skipped, so an interrupted run
//! continues where it stopped (a line cut off by the interruption is dropped and its question answered
//! again). Each answer is appended and flushed as it is made; when every question has been tried the file
//! is rewritten sorted by uid, so its bytes do not depend on the order answers arrived in. Questions an
//! answerer fails on are listed in `errors.jsonl` with the error and tried again on the next run.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use gst_io::gst::QuestionFile;

#[cfg(test)]
use crate::Reply;
use crate::{AnswerContext, Answerer, BaselineError};

/// File names inside the output directory.
pub const PREDICTIONS: &str = "predictions.jsonl";
pub const ERRORS: &str = "errors.jsonl";

/// One line of `predictions.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PredictionLine {
    pub uid: String,
    pub prediction: String,
    /// Why the prediction is a fallback answer ([`crate::Reply::fallback`]); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// The located camera and target ([`crate::Reply::grounding`]); absent when the answerer has none.
    #[serde(default, skip_serializing_if = "crate::Grounding::is_empty")]
    pub grounding: crate::Grounding,
}

/// One line of `errors.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorLine {
    pub uid: String,
    pub error: String,
}

/// Where an evaluation writes.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// Output directory: `predictions.jsonl`, `errors.jsonl`.
    pub out_dir: PathBuf,
    /// Per-video work the answerer keeps (maps and the like); `out_dir/cache` when `None`.
    pub cache_dir: Option<PathBuf>,
}

/// What happened, for progress reporting.
#[derive(Clone, Debug)]
pub enum EvalEvent<'a> {
    /// Questions to answer in this run (after skipping those already answered).
    Started { pending: usize, reused: usize },
    /// A scene's shared work begins (`prepare`; while the scene before it is being answered).
    Preparing { scene: &'a str, questions: usize },
    /// A scene's questions start being answered (its `prepare` has finished).
    Answering { scene: &'a str, questions: usize },
    /// One question was answered (or failed).
    Answered { uid: &'a str, ok: bool },
}

/// Counts of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EvalSummary {
    pub questions: usize,
    /// Answered in earlier runs and kept.
    pub reused: usize,
    pub answered: usize,
    pub failed: usize,
    pub seconds: f64,
}

/// Reads a predictions file, tolerating a cut-off last line (dropped, as an interrupted run leaves it).
pub fn read_predictions(path: &Path) -> Result<Vec<PredictionLine>, BaselineError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(BaselineError::io(path, error)),
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut predictions = Vec::with_capacity(lines.len());
    for (k, line) in lines.iter().enumerate() {
        match serde_json::from_str::<PredictionLine>(line) {
            Ok(prediction) => predictions.push(prediction),
            Err(_) if k + 1 == lines.len() && !text.ends_with('\n') => {
                tracing::warn!("{}: dropping a cut-off last line", path.display());
            }
            Err(error) => return Err(BaselineError::file(path, format!("line {}: {error}", k + 1))),
        }
    }
    Ok(predictions)
}

/// Fallback answers per task column (paper column names, e.g. "Pos"), from a predictions file's lines.
pub fn fallback_counts(
    questions: &[gst_core::Question],
    predictions: &[PredictionLine],
) -> BTreeMap<&'static str, usize> {
    let task_of: BTreeMap<&str, gst_core::TaskId> =
        questions.iter().map(|q| (q.uid.as_str(), q.task)).collect();
    let mut counts = BTreeMap::new();
    for line in predictions.iter().filter(|p| p.fallback.is_some()) {
        if let Some(task) = task_of.get(line.uid.as_str()) {
            *counts.entry(task.column()).or_insert(0) += 1;
        }
    }
    counts
}

fn write_lines<T: Serialize>(path: &Path, lines: &[T]) -> Result<(), BaselineError> {
    let mut text = String::new();
    for line in lines {
        let json = serde_json::to_string(line).map_err(|e| BaselineError::file(path, e.to_string()))?;
        text.push_str(&json);
        text.push('\n');
    }
    gst_io::atomic_write(path, text.as_bytes())?;
    Ok(())
}

/// What the workers of [`run_eval`] share: the questions of prepared scenes not yet taken (per scene, in
/// uid order), the questions per scene not yet answered, and whether every scene has been prepared.
struct Schedule<'q> {
    ready: std::collections::VecDeque<(usize, std::collections::VecDeque<&'q QuestionFile>)>,
    remaining: Vec<usize>,
    /// Scenes prepared and not yet finished: preparation waits while [`SCENES_AHEAD`] are.
    unfinished: usize,
    all_prepared: bool,
}

/// Prepared scenes whose questions are not all answered, at most, before another is prepared (so at most
/// four scenes' memory at once, counting the one being prepared). With two, the workers finished the next
/// scene before the one after it was prepared and waited (one core busy for 10–25 s per scene, measured).
const SCENES_AHEAD: usize = 3;

impl<'q> Schedule<'q> {
    /// The next question for `worker`, from the oldest prepared scene: even workers take from the front of
    /// its list, odd ones from the back (the questions on one view are neighbours in uid order, and two
    /// workers on one view would wait on each other).
    fn next(&mut self, worker: usize) -> Option<(usize, &'q QuestionFile)> {
        while let Some((k, questions)) = self.ready.front_mut() {
            let question =
                if worker.is_multiple_of(2) { questions.pop_front() } else { questions.pop_back() };
            match question {
                Some(question) => return Some((*k, question)),
                None => {
                    self.ready.pop_front();
                }
            }
        }
        None
    }
}

/// Answers every question in `questions` not yet in `out_dir/predictions.jsonl`. Scenes are taken one at
/// a time in name order (so per-scene work such as a map is built once and shared) and answered in parallel
/// (one worker per rayon thread); the next scenes' `prepare` runs on its own thread meanwhile, so building a
/// map (partly sequential work) fills the cores the answers leave idle.
pub fn run_eval(
    questions: &[QuestionFile],
    split_dir: &Path,
    answerer: &dyn Answerer,
    options: &EvalOptions,
    progress: &(dyn Fn(EvalEvent<'_>) + Sync),
) -> Result<EvalSummary, BaselineError> {
    let started = std::time::Instant::now();
    let out = &options.out_dir;
    std::fs::create_dir_all(out).map_err(|e| BaselineError::io(out, e))?;
    let cache_dir = options.cache_dir.clone().unwrap_or_else(|| out.join("cache"));
    std::fs::create_dir_all(&cache_dir).map_err(|e| BaselineError::io(&cache_dir, e))?;
    let context = AnswerContext { split_dir, cache_dir: &cache_dir };

    let mut uids = BTreeSet::new();
    for question in questions {
        if !uids.insert(question.question.uid.as_str()) {
            return Err(BaselineError::file(
                &question.path,
                format!("uid {} appears twice in the split", question.question.uid),
            ));
        }
    }
    // Earlier predictions of questions still in the split are kept (rewritten whole, so a cut-off
    // line is gone before anything is appended).
    let predictions_path = out.join(PREDICTIONS);
    let kept: Vec<PredictionLine> =
        read_predictions(&predictions_path)?.into_iter().filter(|p| uids.contains(p.uid.as_str())).collect();
    write_lines(&predictions_path, &kept)?;
    let done: BTreeSet<String> = kept.iter().map(|p| p.uid.clone()).collect();

    let mut by_scene: BTreeMap<&str, Vec<&QuestionFile>> = BTreeMap::new();
    for question in questions.iter().filter(|q| !done.contains(&q.question.uid)) {
        by_scene.entry(question.question.scene.as_str()).or_default().push(question);
    }
    let pending: usize = by_scene.values().map(Vec::len).sum();
    progress(EvalEvent::Started { pending, reused: kept.len() });

    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(&predictions_path)
        .map_err(|e| BaselineError::io(&predictions_path, e))?;
    let file = Mutex::new(file);
    let errors: Mutex<Vec<ErrorLine>> = Mutex::new(Vec::new());
    let answered = std::sync::atomic::AtomicUsize::new(0);
    let record_error = |uid: &str, error: &BaselineError| {
        tracing::warn!("{uid}: {error}");
        if let Ok(mut errors) = errors.lock() {
            errors.push(ErrorLine { uid: uid.to_string(), error: error.to_string() });
        }
    };

    let scenes: Vec<(&str, Vec<&QuestionFile>)> = by_scene
        .into_iter()
        .map(|(scene, mut scene_questions)| {
            scene_questions.sort_by(|a, b| a.question.uid.cmp(&b.question.uid));
            (scene, scene_questions)
        })
        .collect();
    let answer_one = |question: &QuestionFile| -> Result<(), BaselineError> {
        let uid = &question.question.uid;
        match answerer.answer(question, &context) {
            Ok(reply) => {
                let line = PredictionLine {
                    uid: uid.clone(),
                    prediction: reply.text,
                    fallback: reply.fallback,
                    grounding: reply.grounding,
                };
                let mut json = serde_json::to_string(&line)
                    .map_err(|e| BaselineError::file(&predictions_path, e.to_string()))?;
                json.push('\n');
                let mut file =
                    file.lock().map_err(|_| BaselineError::Other("predictions file lock poisoned".into()))?;
                file.write_all(json.as_bytes())
                    .and_then(|()| file.flush())
                    .map_err(|e| BaselineError::io(&predictions_path, e))?;
                answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                progress(EvalEvent::Answered { uid, ok: true });
            }
            Err(error) => {
                record_error(uid, &error);
                progress(EvalEvent::Answered { uid, ok: false });
            }
        }
        Ok(())
    };
    // One thread prepares the scenes in order; as each is ready its questions join the queue that the
    // workers answer from (oldest scene first), so preparing a scene (partly sequential work) overlaps the
    // answers of the scenes before it, and a scene's last long questions overlap the next scene's first.
    // Workers are threads of our own rather than rayon's: answers share per-file results (`Memo` in the map
    // answerer) and wait for one another's, and a rayon worker waiting inside a parallel loop could pick up
    // another question and wait on itself. A scene is finished (its memory released) after its last answer.
    let schedule = Mutex::new(Schedule {
        ready: std::collections::VecDeque::new(),
        remaining: scenes.iter().map(|(_, q)| q.len()).collect(),
        unfinished: 0,
        all_prepared: false,
    });
    let wake = std::sync::Condvar::new();
    let poisoned = || BaselineError::Other("evaluation schedule lock poisoned".into());
    let workers = rayon::current_num_threads().max(1);
    std::thread::scope(|threads| -> Result<(), BaselineError> {
        let (scenes, schedule, wake) = (&scenes, &schedule, &wake);
        let preparing = threads.spawn(move || -> Result<(), BaselineError> {
            for (k, (scene, scene_questions)) in scenes.iter().enumerate() {
                {
                    let mut schedule = schedule.lock().map_err(|_| poisoned())?;
                    while schedule.unfinished >= SCENES_AHEAD {
                        schedule = wake.wait(schedule).map_err(|_| poisoned())?;
                    }
                }
                progress(EvalEvent::Preparing { scene, questions: scene_questions.len() });
                match answerer.prepare(scene, scene_questions, &context) {
                    Ok(()) => {
                        progress(EvalEvent::Answering { scene, questions: scene_questions.len() });
                        let mut schedule = schedule.lock().map_err(|_| poisoned())?;
                        schedule.ready.push_back((k, scene_questions.iter().copied().collect()));
                        schedule.unfinished += 1;
                        wake.notify_all();
                    }
                    Err(error) => {
                        for question in scene_questions {
                            record_error(&question.question.uid, &error);
                            progress(EvalEvent::Answered { uid: &question.question.uid, ok: false });
                        }
                        answerer.finish(scene);
                    }
                }
            }
            let mut schedule = schedule.lock().map_err(|_| poisoned())?;
            schedule.all_prepared = true;
            wake.notify_all();
            Ok(())
        });
        let answering: Vec<_> = (0..workers)
            .map(|worker| {
                let answer_one = &answer_one;
                threads.spawn(move || -> Result<(), BaselineError> {
                    loop {
                        let (k, question) = {
                            let mut schedule = schedule.lock().map_err(|_| poisoned())?;
                            loop {
                                if let Some(next) = schedule.next(worker) {
                                    break next;
                                }
                                if schedule.all_prepared {
                                    return Ok(());
                                }
                                schedule = wake.wait(schedule).map_err(|_| poisoned())?;
                            }
                        };
                        answer_one(question)?;
                        let last = {
                            let mut state = schedule.lock().map_err(|_| poisoned())?;
                            state.remaining[k] -= 1;
                            state.remaining[k] == 0
                        };
                        if last {
                            answerer.finish(scenes[k].0);
                            schedule.lock().map_err(|_| poisoned())?.unfinished -= 1;
                            wake.notify_all();
                        }
                    }
                })
            })
            .collect();
        let joined = |handle: std::thread::ScopedJoinHandle<'_, Result<(), BaselineError>>, what: &str| {
            handle.join().unwrap_or_else(|_| Err(BaselineError::Other(format!("{what} panicked"))))
        };
        let mut outcome = joined(preparing, "preparing a scene");
        for handle in answering {
            outcome = outcome.and(joined(handle, "answering a question"));
        }
        outcome
    })?;
    drop(file);

    // Sorted by uid: the file's bytes do not depend on the order answers arrived in.
    let mut all = read_predictions(&predictions_path)?;
    all.sort_by(|a, b| a.uid.cmp(&b.uid));
    write_lines(&predictions_path, &all)?;
    let mut errors =
        errors.into_inner().map_err(|_| BaselineError::Other("error list lock poisoned".into()))?;
    errors.sort_by(|a, b| a.uid.cmp(&b.uid));
    let errors_path = out.join(ERRORS);
    if errors.is_empty() {
        if errors_path.exists() {
            std::fs::remove_file(&errors_path).map_err(|e| BaselineError::io(&errors_path, e))?;
        }
    } else {
        write_lines(&errors_path, &errors)?;
    }
    Ok(EvalSummary {
        questions: questions.len(),
        reused: kept.len(),
        answered: answered.into_inner(),
        failed: errors.len(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gst_core::{Answer, Question, Setting, TaskId};

    fn question(uid: &str, scene: &str, task: TaskId) -> QuestionFile {
        let answer = match task.answer_kind() {
            gst_core::AnswerKind::Degrees => Answer::Degrees(10),
            gst_core::AnswerKind::Metres => Answer::Metres(2.5),
            gst_core::AnswerKind::Point => Answer::Point([100, 200]),
            gst_core::AnswerKind::Choice => Answer::Choice('B'),
        };
        QuestionFile {
            path: PathBuf::from(format!("questions/{uid}.json")),
            question: Question {
                task,
                uid: uid.into(),
                scene: scene.into(),
                answer,
                texts: vec!["q".into()],
                source_video_path: "v.mp4".into(),
                copied_video_path: "../v.mp4".into(),
                images: Vec::new(),
                setting: Setting::Global,
            },
        }
    }

    /// Answers with the uid, fails on uids containing "bad", counts `prepare` calls per scene.
    struct Echo {
        prepared: Mutex<Vec<String>>,
    }

    impl Answerer for Echo {
        fn name(&self) -> String {
            "echo".into()
        }
        fn prepare(
            &self,
            scene: &str,
            _: &[&QuestionFile],
            _: &AnswerContext<'_>,
        ) -> Result<(), BaselineError> {
            self.prepared.lock().map_err(|_| BaselineError::Other("lock".into()))?.push(scene.into());
            Ok(())
        }
        fn answer(&self, question: &QuestionFile, _: &AnswerContext<'_>) -> Result<Reply, BaselineError> {
            let uid = &question.question.uid;
            if uid.contains("bad") {
                return Err(BaselineError::Question { uid: uid.clone(), message: "cannot".into() });
            }
            if uid.ends_with("q3") {
                let grounding = crate::Grounding {
                    camera: Some(gst_core::Pose3::from_parts(
                        nalgebra::Vector3::new(1.0, 2.0, 0.5),
                        nalgebra::UnitQuaternion::identity(),
                    )),
                    target: Some([3.0, -1.0, 0.25]),
                };
                return Ok(Reply::fallback("A", "guessed").with_grounding(grounding));
            }
            Ok(Reply::new(format!("answer of {uid}")))
        }
    }

    #[test]
    fn answers_scene_by_scene_resumes_and_sorts() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let options = EvalOptions { out_dir: dir.path().join("out"), cache_dir: None };
        let questions: Vec<QuestionFile> = (0..7)
            .map(|k| question(&format!("s{}_q{k}", k % 2), &format!("scene_{}", k % 2), TaskId::ALL[k]))
            .chain([question("s1_bad", "scene_1", TaskId::TopdownSelectionHard)])
            .collect();
        let echo = Echo { prepared: Mutex::new(Vec::new()) };
        let summary = run_eval(&questions, dir.path(), &echo, &options, &|_| {})?;
        assert_eq!((summary.questions, summary.reused, summary.answered, summary.failed), (8, 0, 7, 1));
        assert_eq!(*echo.prepared.lock().map_err(|_| "lock")?, ["scene_0", "scene_1"]);
        let predictions = read_predictions(&options.out_dir.join(PREDICTIONS))?;
        let uids: Vec<&str> = predictions.iter().map(|p| p.uid.as_str()).collect();
        let mut sorted = uids.clone();
        sorted.sort_unstable();
        assert_eq!(uids, sorted);
        assert_eq!(predictions[0].prediction, "answer of s0_q0");
        let fallbacks: Vec<&str> =
            predictions.iter().filter(|p| p.fallback.is_some()).map(|p| p.uid.as_str()).collect();
        assert_eq!(fallbacks, ["s1_q3"]);
        // The grounding travels in the same line; answers without one write none.
        let grounded: Vec<&PredictionLine> = predictions.iter().filter(|p| !p.grounding.is_empty()).collect();
        assert_eq!(grounded.len(), 1);
        assert_eq!(grounded[0].grounding.target, Some([3.0, -1.0, 0.25]));
        let camera = grounded[0].grounding.camera.ok_or("camera lost")?;
        assert!((camera.translation() - nalgebra::Vector3::new(1.0, 2.0, 0.5)).norm() < 1e-12);
        let text = std::fs::read_to_string(options.out_dir.join(PREDICTIONS))?;
        assert_eq!(text.matches("grounding").count(), 1, "{text}");
        let plain: Vec<Question> = questions.iter().map(|q| q.question.clone()).collect();
        let counts = fallback_counts(&plain, &predictions);
        assert_eq!(counts.into_iter().collect::<Vec<_>>(), [(TaskId::ALL[3].column(), 1)]);
        let errors = std::fs::read_to_string(options.out_dir.join(ERRORS))?;
        assert!(errors.contains("s1_bad") && errors.contains("cannot"), "{errors}");

        // An interrupted file: one prediction lost, the last line cut off. The rerun answers only the
        // missing questions (and the one that failed) and leaves the others as they were.
        let path = options.out_dir.join(PREDICTIONS);
        let text = std::fs::read_to_string(&path)?;
        let mut lines: Vec<&str> = text.lines().collect();
        lines.remove(2);
        let cut = format!("{}\n{}", lines[..lines.len() - 1].join("\n"), &lines[lines.len() - 1][..10]);
        std::fs::write(&path, cut)?;
        let echo = Echo { prepared: Mutex::new(Vec::new()) };
        let summary = run_eval(&questions, dir.path(), &echo, &options, &|_| {})?;
        assert_eq!((summary.reused, summary.answered, summary.failed), (5, 2, 1));
        assert_eq!(std::fs::read_to_string(&path)?, text);
        Ok(())
    }

    /// Fails to prepare scene_1; scene_0's answers wait (up to 10 s) for scene_1's preparation to start.
    struct Overlapping {
        started: Mutex<Vec<String>>,
        wake: std::sync::Condvar,
        overlapped: std::sync::atomic::AtomicBool,
    }

    impl Answerer for Overlapping {
        fn name(&self) -> String {
            "overlapping".into()
        }
        fn prepare(
            &self,
            scene: &str,
            _: &[&QuestionFile],
            _: &AnswerContext<'_>,
        ) -> Result<(), BaselineError> {
            let mut started = self.started.lock().map_err(|_| BaselineError::Other("lock".into()))?;
            started.push(scene.into());
            self.wake.notify_all();
            if scene == "scene_1" {
                return Err(BaselineError::Other("no map for scene_1".into()));
            }
            Ok(())
        }
        fn answer(&self, question: &QuestionFile, _: &AnswerContext<'_>) -> Result<Reply, BaselineError> {
            if question.question.scene == "scene_0" {
                let started = self.started.lock().map_err(|_| BaselineError::Other("lock".into()))?;
                let (started, _) = self
                    .wake
                    .wait_timeout_while(started, std::time::Duration::from_secs(10), |s| {
                        !s.iter().any(|s| s == "scene_1")
                    })
                    .map_err(|_| BaselineError::Other("lock".into()))?;
                if started.iter().any(|s| s == "scene_1") {
                    self.overlapped.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
            Ok(Reply::new("A"))
        }
    }

    #[test]
    fn the_next_scene_is_prepared_while_one_is_answered() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let options = EvalOptions { out_dir: dir.path().join("out"), cache_dir: None };
        let questions: Vec<QuestionFile> = (0..6)
            .map(|k| question(&format!("s{}_q{k}", k % 3), &format!("scene_{}", k % 3), TaskId::ALL[k]))
            .collect();
        let answerer = Overlapping {
            started: Mutex::new(Vec::new()),
            wake: std::sync::Condvar::new(),
            overlapped: std::sync::atomic::AtomicBool::new(false),
        };
        let events = Mutex::new(Vec::new());
        let summary = run_eval(&questions, dir.path(), &answerer, &options, &|event| {
            if let (EvalEvent::Answering { scene, .. }, Ok(mut events)) = (event, events.lock()) {
                events.push(scene.to_string());
            }
        })?;
        assert!(
            answerer.overlapped.load(std::sync::atomic::Ordering::SeqCst),
            "scene_1 prepared during scene_0"
        );
        assert_eq!(*answerer.started.lock().map_err(|_| "lock")?, ["scene_0", "scene_1", "scene_2"]);
        // scene_1's questions fail with its preparation's error; the scenes around it are answered.
        assert_eq!((summary.answered, summary.failed), (4, 2));
        assert_eq!(*events.lock().map_err(|_| "lock")?, ["scene_0", "scene_2"]);
        let errors = std::fs::read_to_string(options.out_dir.join(ERRORS))?;
        assert_eq!(errors.matches("no map for scene_1").count(), 2, "{errors}");
        Ok(())
    }

    #[test]
    fn duplicate_uids_and_corrupt_predictions_are_errors() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let options = EvalOptions { out_dir: dir.path().join("out"), cache_dir: None };
        let echo = Echo { prepared: Mutex::new(Vec::new()) };
        let twice = [question("a", "s", TaskId::ALL[0]), question("a", "s", TaskId::ALL[1])];
        let error =
            run_eval(&twice, dir.path(), &echo, &options, &|_| {}).err().ok_or("duplicate accepted")?;
        assert!(error.to_string().contains("uid a appears twice"), "{error}");
        std::fs::create_dir_all(&options.out_dir)?;
        std::fs::write(
            options.out_dir.join(PREDICTIONS),
            "{\"uid\": 1}\n{\"uid\":\"b\",\"prediction\":\"A\"}\n",
        )?;
        let error =
            run_eval(&twice[..1], dir.path(), &echo, &options, &|_| {}).err().ok_or("corrupt accepted")?;
        assert!(error.to_string().contains("predictions.jsonl: line 1"), "{error}");
        Ok(())
    }
}
