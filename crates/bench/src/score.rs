//! Scoring a model's predictions against GST questions.
//!
//! Predictions are JSON lines, `{"uid": "...", "prediction": "..."}`, the prediction being the model's raw
//! output (a number is taken as its text; `null` as no answer; other fields are ignored). Each question
//! scores in [0, 1] with its task's metric after [`extract`]ion; a question without a prediction, or whose
//! prediction has no parseable answer, scores 0. A prediction for a uid that no question has is an error:
//! it means the predictions belong to another benchmark or split.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use gst_core::{Answer, Question, Setting, TaskId};
use serde::Deserialize;

use crate::BenchError;
use crate::extract::extract;
use crate::metrics::score_answer;

/// One prediction of a predictions file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prediction {
    /// 1-based line in the predictions file.
    pub line: usize,
    pub uid: String,
    /// The model's raw output.
    pub text: String,
}

/// The predictions of one file, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Predictions {
    /// The file the predictions came from, for error messages.
    pub source: PathBuf,
    pub entries: Vec<Prediction>,
}

#[derive(Deserialize)]
struct PredictionLine {
    uid: String,
    prediction: serde_json::Value,
}

impl Predictions {
    /// Parses JSON lines; blank lines are skipped. `source` names the file in errors.
    pub fn parse(source: &Path, text: &str) -> Result<Predictions, BenchError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut entries: Vec<Prediction> = Vec::new();
        let mut line_of_uid: HashMap<String, usize> = HashMap::new();
        for (index, line_text) in text.lines().enumerate() {
            let line = index + 1;
            if line_text.trim().is_empty() {
                continue;
            }
            let parsed: PredictionLine = serde_json::from_str(line_text).map_err(|error| {
                BenchError::MalformedPrediction { path: source.into(), line, message: error.to_string() }
            })?;
            let prediction = match parsed.prediction {
                serde_json::Value::String(text) => text,
                serde_json::Value::Null => String::new(),
                other => other.to_string(),
            };
            if let Some(&first_line) = line_of_uid.get(&parsed.uid) {
                return Err(BenchError::DuplicatePrediction {
                    path: source.into(),
                    line,
                    first_line,
                    uid: parsed.uid,
                });
            }
            line_of_uid.insert(parsed.uid.clone(), line);
            entries.push(Prediction { line, uid: parsed.uid, text: prediction });
        }
        Ok(Predictions { source: source.into(), entries })
    }

    /// Reads and parses a predictions file.
    pub fn read(path: &Path) -> Result<Predictions, BenchError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| BenchError::ReadPredictions { path: path.into(), error })?;
        Predictions::parse(path, &text)
    }

    /// Predictions built in memory, numbered as lines 1, 2, …
    pub fn from_texts<U: Into<String>, T: Into<String>>(
        source: &Path,
        texts: impl IntoIterator<Item = (U, T)>,
    ) -> Predictions {
        let entries = texts
            .into_iter()
            .enumerate()
            .map(|(index, (uid, text))| Prediction { line: index + 1, uid: uid.into(), text: text.into() })
            .collect();
        Predictions { source: source.into(), entries }
    }
}

/// What became of a question's prediction.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// No prediction for the question.
    Missing,
    /// A prediction without an answer of the question's kind.
    Unparseable,
    /// The answer extracted from the prediction.
    Extracted(Answer),
}

/// The score of one question.
#[derive(Clone, Debug, PartialEq)]
pub struct QuestionScore {
    pub uid: String,
    pub task: TaskId,
    pub setting: Setting,
    pub outcome: Outcome,
    /// In [0, 1].
    pub score: f64,
}

/// The questions of one task in one setting and their summed score.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cell {
    pub questions: usize,
    pub total: f64,
}

impl Cell {
    /// The mean score in percent; `None` without questions.
    pub fn mean_pct(&self) -> Option<f64> {
        (self.questions > 0).then(|| 100.0 * self.total / self.questions as f64)
    }
}

/// Scores of a predictions file against a set of questions.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoreReport {
    /// One entry per question, in the order the questions were given.
    pub per_question: Vec<QuestionScore>,
    /// Per task and setting, for those that have questions (sorted: paper column order, then setting).
    pub cells: BTreeMap<(TaskId, Setting), Cell>,
    /// Entries of the predictions file.
    pub predictions: usize,
}

impl ScoreReport {
    pub fn cell(&self, task: TaskId, setting: Setting) -> Cell {
        self.cells.get(&(task, setting)).copied().unwrap_or_default()
    }

    /// Mean score of a task in a setting, in percent; `None` when it has no questions.
    pub fn score_pct(&self, task: TaskId, setting: Setting) -> Option<f64> {
        self.cell(task, setting).mean_pct()
    }

    /// The paper's Avg: the mean of the global-setting columns that have questions.
    pub fn average_pct(&self) -> Option<f64> {
        let columns: Vec<f64> =
            TaskId::ALL.iter().filter_map(|&task| self.score_pct(task, Setting::Global)).collect();
        (!columns.is_empty()).then(|| columns.iter().sum::<f64>() / columns.len() as f64)
    }

    /// Whether any question is in a GST-Bench-Local setting.
    pub fn has_local_settings(&self) -> bool {
        self.cells.keys().any(|(_, setting)| !setting.is_global())
    }

    pub fn missing(&self) -> usize {
        self.per_question.iter().filter(|score| score.outcome == Outcome::Missing).count()
    }

    pub fn unparseable(&self) -> usize {
        self.per_question.iter().filter(|score| score.outcome == Outcome::Unparseable).count()
    }
}

/// Scores `predictions` against `questions`. Fails on a prediction whose uid no question has (naming its
/// line) and on two questions with one uid.
pub fn score(questions: &[Question], predictions: &Predictions) -> Result<ScoreReport, BenchError> {
    let mut question_of_uid: HashMap<&str, &Question> = HashMap::with_capacity(questions.len());
    for question in questions {
        if question_of_uid.insert(question.uid.as_str(), question).is_some() {
            return Err(BenchError::DuplicateQuestion { uid: question.uid.clone() });
        }
    }
    let mut prediction_of_uid: HashMap<&str, &Prediction> = HashMap::with_capacity(predictions.entries.len());
    for prediction in &predictions.entries {
        if !question_of_uid.contains_key(prediction.uid.as_str()) {
            return Err(BenchError::UnknownUid {
                path: predictions.source.clone(),
                line: prediction.line,
                uid: prediction.uid.clone(),
            });
        }
        if let Some(first) = prediction_of_uid.insert(prediction.uid.as_str(), prediction) {
            return Err(BenchError::DuplicatePrediction {
                path: predictions.source.clone(),
                line: prediction.line,
                first_line: first.line,
                uid: prediction.uid.clone(),
            });
        }
    }

    let mut per_question = Vec::with_capacity(questions.len());
    let mut cells: BTreeMap<(TaskId, Setting), Cell> = BTreeMap::new();
    for question in questions {
        let outcome = match prediction_of_uid.get(question.uid.as_str()) {
            None => Outcome::Missing,
            Some(prediction) => match extract(question.task.answer_kind(), &prediction.text) {
                Some(answer) => Outcome::Extracted(answer),
                None => Outcome::Unparseable,
            },
        };
        let extracted = match &outcome {
            Outcome::Extracted(answer) => Some(answer),
            Outcome::Missing | Outcome::Unparseable => None,
        };
        let score = score_answer(&question.answer, extracted);
        let cell = cells.entry((question.task, question.setting)).or_default();
        cell.questions += 1;
        cell.total += score;
        per_question.push(QuestionScore {
            uid: question.uid.clone(),
            task: question.task,
            setting: question.setting,
            outcome,
            score,
        });
    }
    Ok(ScoreReport { per_question, cells, predictions: predictions.entries.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(uid: &str, task: TaskId, answer: Answer, setting: Setting) -> Question {
        Question {
            task,
            uid: uid.into(),
            scene: "scene_1".into(),
            answer,
            texts: Vec::new(),
            source_video_path: String::new(),
            copied_video_path: "video.mp4".into(),
            images: Vec::new(),
            setting,
        }
    }

    fn source() -> &'static Path {
        Path::new("predictions.jsonl")
    }

    #[test]
    fn predictions_parse_with_line_numbers_and_reject_bad_lines() -> Result<(), BenchError> {
        let text = "{\"uid\": \"a\", \"prediction\": \"B\"}\n\n{\"uid\": \"b\", \"prediction\": 3.5, \"model\": \"x\"}\n\
                    {\"uid\": \"c\", \"prediction\": null}\n";
        let predictions = Predictions::parse(source(), text)?;
        let lines: Vec<(usize, &str, &str)> =
            predictions.entries.iter().map(|p| (p.line, p.uid.as_str(), p.text.as_str())).collect();
        assert_eq!(lines, [(1, "a", "B"), (3, "b", "3.5"), (4, "c", "")]);

        let error =
            Predictions::parse(source(), "{\"uid\": \"a\", \"prediction\": \"B\"}\n{\"uid\": \"a\"\n")
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
        assert!(error.contains("predictions.jsonl, line 2"), "{error}");
        let error = Predictions::parse(
            source(),
            "{\"uid\": \"a\", \"prediction\": \"B\"}\n{\"uid\": \"a\", \"prediction\": \"C\"}",
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(error.contains("line 2") && error.contains("already predicted on line 1"), "{error}");
        Ok(())
    }

    #[test]
    fn unknown_uids_are_errors_naming_the_line() {
        let questions = [question("q1", TaskId::TrajectorySelection, Answer::Choice('A'), Setting::Global)];
        let predictions = Predictions::from_texts(source(), [("q1", "A"), ("q9", "B")]);
        let error = score(&questions, &predictions).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("predictions.jsonl, line 2") && error.contains("\"q9\""), "{error}");
    }

    #[test]
    fn missing_and_unparseable_predictions_score_zero() -> Result<(), BenchError> {
        let questions = [
            question("a", TaskId::TopdownSelectionEasy, Answer::Choice('A'), Setting::Global),
            question("b", TaskId::TopdownSelectionEasy, Answer::Choice('B'), Setting::Global),
            question("c", TaskId::TopdownSelectionEasy, Answer::Choice('C'), Setting::Global),
            question("d", TaskId::TopdownSelectionEasy, Answer::Choice('D'), Setting::Global),
            question("e", TaskId::EgocentricDistanceSemantic, Answer::Metres(2.0), Setting::LocalImage),
        ];
        let predictions = Predictions::from_texts(
            source(),
            [("a", "The answer is A."), ("b", "I cannot tell"), ("e", "2.0 m")],
        );
        let report = score(&questions, &predictions)?;
        assert_eq!(report.score_pct(TaskId::TopdownSelectionEasy, Setting::Global), Some(25.0));
        assert_eq!(report.score_pct(TaskId::EgocentricDistanceSemantic, Setting::LocalImage), Some(100.0));
        assert_eq!(report.score_pct(TaskId::EgocentricDistanceSemantic, Setting::Global), None);
        assert_eq!(report.average_pct(), Some(25.0), "Avg covers the global columns only");
        assert!(report.has_local_settings());
        assert_eq!((report.missing(), report.unparseable(), report.predictions), (2, 1, 3));
        assert_eq!(report.per_question[1].outcome, Outcome::Unparseable);
        Ok(())
    }
}
