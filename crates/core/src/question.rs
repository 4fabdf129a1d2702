//! GST-Bench questions: the twelve task ids, the settings of GST-Bench-Local, answers and the question
//! schema of the public release.
//!
//! A question file of the release looks like this (`../shared/reference/gst-samples/`):
//!
//! ```json
//! {
//!   "task": "Object_Localization_Egocentric_Direction_visual",
//!   "uid": "scene2_Object_Localization_Egocentric_Direction_visual_armchair_vzhxuf_0_pos_10_orient_4_video_3",
//!   "scene": "scene_2",
//!   "answer": "-134",
//!   "texts": ["This is the exploration video of you in the entire scene earlier.", "..."],
//!   "source_video_path": "/Users/.../videos/scene_2/video3_obj_armchair_vzhxuf_0.mp4",
//!   "copied_video_path": "video3_obj_armchair_vzhxuf_0.mp4",
//!   "images": [{"index": 1, "source_path": "/Users/.../19_14.jpg", "copied_path": "image_01_19_14.jpg"}]
//! }
//! ```
//!
//! The answer is a JSON string for every task except the egocentric distance, where the release writes a
//! number (`"answer": 13.2`); [`Question`] reads and writes both forms the way the release does. The
//! `copied_*` paths are relative to the directory of the question file. Our one addition is `setting`
//! (GST-Bench-Local), omitted for the global setting so that our files look exactly like the release's.
//!
//! Reading goes in two steps: [`RawQuestion`] is the file as it is (any task string, the answer as text or
//! number); [`Question::try_from`] checks the task id, the answer against the task's format and the setting,
//! so that a reader can tell malformed JSON apart from a well-formed file with a wrong value.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A question file whose values do not fit the GST schema. Names the offending value; readers of files add
/// the file name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuestionError {
    #[error("unknown task id {task:?} (known: {})", known_task_ids())]
    UnknownTask { task: String },

    #[error("answer {answer} is not valid for task {task}: expected {}", task.answer_kind().expected())]
    Answer { task: TaskId, answer: String },

    #[error("setting {setting} does not apply to task {task}: only ED and EDist have local settings")]
    Setting { task: TaskId, setting: Setting },
}

fn known_task_ids() -> String {
    TaskId::ALL.iter().map(|task| task.as_str()).collect::<Vec<_>>().join(", ")
}

/// The twelve GST-Bench subtasks, in the column order of the paper's Table 1.
///
/// Two of them have no sample in the public release, so their ids are ours, built the way the others are:
/// `Object_Localization_Global_Position_{visual,semantic}` (GP) and `Self_Localization_Global_Orientation`
/// (Ori). The trajectory task keeps the release's spelling, `Trajection_Selection`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskId {
    /// ED_v: direction of a red-boxed object relative to the current view.
    EgocentricDirectionVisual,
    /// EDist_v: distance of a red-boxed object from the current view.
    EgocentricDistanceVisual,
    /// GP_v: position of a red-boxed object on the top-down image.
    GlobalPositionVisual,
    /// ED_s: as ED_v, the object named in the text.
    EgocentricDirectionSemantic,
    /// EDist_s: as EDist_v, the object named in the text.
    EgocentricDistanceSemantic,
    /// GP_s: as GP_v, the object named in the text.
    GlobalPositionSemantic,
    /// Pos: where the current view was taken, on the top-down image.
    SelfPosition,
    /// Ori: heading of the current view on the top-down image.
    SelfOrientation,
    /// TDS_E: which of four top-downs is this scene; distractors from other scenes.
    TopdownSelectionEasy,
    /// TDS_M: distractors from scenes of similar size and room count.
    TopdownSelectionMedium,
    /// TDS_H: distractors are altered versions of this scene's plan.
    TopdownSelectionHard,
    /// Traj: which red trajectory on four top-downs matches a sub-trajectory video.
    TrajectorySelection,
}

impl TaskId {
    /// Every task, in the paper's column order.
    pub const ALL: [TaskId; 12] = [
        TaskId::EgocentricDirectionVisual,
        TaskId::EgocentricDistanceVisual,
        TaskId::GlobalPositionVisual,
        TaskId::EgocentricDirectionSemantic,
        TaskId::EgocentricDistanceSemantic,
        TaskId::GlobalPositionSemantic,
        TaskId::SelfPosition,
        TaskId::SelfOrientation,
        TaskId::TopdownSelectionEasy,
        TaskId::TopdownSelectionMedium,
        TaskId::TopdownSelectionHard,
        TaskId::TrajectorySelection,
    ];

    /// The id as written in the `task` field of a question file.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskId::EgocentricDirectionVisual => "Object_Localization_Egocentric_Direction_visual",
            TaskId::EgocentricDistanceVisual => "Object_Localization_Egocentric_Distance_visual",
            TaskId::GlobalPositionVisual => "Object_Localization_Global_Position_visual",
            TaskId::EgocentricDirectionSemantic => "Object_Localization_Egocentric_Direction_semantic",
            TaskId::EgocentricDistanceSemantic => "Object_Localization_Egocentric_Distance_semantic",
            TaskId::GlobalPositionSemantic => "Object_Localization_Global_Position_semantic",
            TaskId::SelfPosition => "Self_Localization_Global_Position",
            TaskId::SelfOrientation => "Self_Localization_Global_Orientation",
            TaskId::TopdownSelectionEasy => "Global_Structure_Understanding_Topdown_Selection_Easy",
            TaskId::TopdownSelectionMedium => "Global_Structure_Understanding_Topdown_Selection_Medium",
            TaskId::TopdownSelectionHard => "Global_Structure_Understanding_Topdown_Selection_Hard",
            TaskId::TrajectorySelection => "Global_Structure_Understanding_Trajection_Selection",
        }
    }

    /// Parses the id of a question file's `task` field (exact, case-sensitive, as the release writes it).
    pub fn parse(text: &str) -> Result<TaskId, QuestionError> {
        TaskId::ALL
            .iter()
            .copied()
            .find(|task| task.as_str() == text)
            .ok_or_else(|| QuestionError::UnknownTask { task: text.to_owned() })
    }

    /// The column of the paper's Table 1 (`ED_v`, `EDist_v`, …, `Traj`).
    pub fn column(self) -> &'static str {
        match self {
            TaskId::EgocentricDirectionVisual => "ED_v",
            TaskId::EgocentricDistanceVisual => "EDist_v",
            TaskId::GlobalPositionVisual => "GP_v",
            TaskId::EgocentricDirectionSemantic => "ED_s",
            TaskId::EgocentricDistanceSemantic => "EDist_s",
            TaskId::GlobalPositionSemantic => "GP_s",
            TaskId::SelfPosition => "Pos",
            TaskId::SelfOrientation => "Ori",
            TaskId::TopdownSelectionEasy => "TDS_E",
            TaskId::TopdownSelectionMedium => "TDS_M",
            TaskId::TopdownSelectionHard => "TDS_H",
            TaskId::TrajectorySelection => "Traj",
        }
    }

    /// The task of a Table 1 column name.
    pub fn from_column(column: &str) -> Option<TaskId> {
        TaskId::ALL.iter().copied().find(|task| task.column() == column)
    }

    /// The format of the task's answer.
    pub fn answer_kind(self) -> AnswerKind {
        match self {
            TaskId::EgocentricDirectionVisual
            | TaskId::EgocentricDirectionSemantic
            | TaskId::SelfOrientation => AnswerKind::Degrees,
            TaskId::EgocentricDistanceVisual | TaskId::EgocentricDistanceSemantic => AnswerKind::Metres,
            TaskId::GlobalPositionVisual | TaskId::GlobalPositionSemantic | TaskId::SelfPosition => {
                AnswerKind::Point
            }
            TaskId::TopdownSelectionEasy
            | TaskId::TopdownSelectionMedium
            | TaskId::TopdownSelectionHard
            | TaskId::TrajectorySelection => AnswerKind::Choice,
        }
    }

    /// The metric the paper scores the task with.
    pub fn metric(self) -> Metric {
        match self.answer_kind() {
            AnswerKind::Degrees | AnswerKind::Point => Metric::MeanAccuracy,
            AnswerKind::Metres => Metric::MeanRelativeAccuracy,
            AnswerKind::Choice => Metric::Accuracy,
        }
    }

    /// Whether GST-Bench-Local's Local-Video and Local-Image settings exist for the task (ED and EDist).
    pub fn has_local_settings(self) -> bool {
        matches!(
            self,
            TaskId::EgocentricDirectionVisual
                | TaskId::EgocentricDistanceVisual
                | TaskId::EgocentricDirectionSemantic
                | TaskId::EgocentricDistanceSemantic
        )
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TaskId {
    type Err = QuestionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        TaskId::parse(text)
    }
}

impl Serialize for TaskId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TaskId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        TaskId::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The format of an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerKind {
    /// Integer degrees in [-180, 180] (ED: 0 = current heading, left positive; Ori: 0 = up on the
    /// top-down image, counter-clockwise positive).
    Degrees,
    /// Metres, written with one decimal.
    Metres,
    /// `<point>x y</point>` on the top-down image, x right and y down, each normalised to [0, 999].
    Point,
    /// One option letter, A to D.
    Choice,
}

impl AnswerKind {
    /// What a valid answer of this kind looks like, for error messages.
    pub fn expected(self) -> &'static str {
        match self {
            AnswerKind::Degrees => "integer degrees in [-180, 180], like \"-134\"",
            AnswerKind::Metres => "a distance in metres, like 13.2",
            AnswerKind::Point => "\"<point>x y</point>\" with x and y integers in [0, 999]",
            AnswerKind::Choice => "one option letter A to D",
        }
    }
}

/// The metric of a task in the paper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Metric {
    /// mAcc: the mean over a fixed ladder of error thresholds of 1[error ≤ threshold] (ED, GP, Pos, Ori).
    #[serde(rename = "mAcc")]
    MeanAccuracy,
    /// MRA, from VSI-Bench (EDist).
    #[serde(rename = "MRA")]
    MeanRelativeAccuracy,
    /// Exact match of the option letter (TDS, Traj).
    #[serde(rename = "Acc")]
    Accuracy,
}

impl Metric {
    /// The name the paper uses.
    pub fn name(self) -> &'static str {
        match self {
            Metric::MeanAccuracy => "mAcc",
            Metric::MeanRelativeAccuracy => "MRA",
            Metric::Accuracy => "Acc",
        }
    }
}

/// GST-Bench's global setting, or one of GST-Bench-Local's two controlled settings (ED and EDist only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Setting {
    /// The whole-scene exploration video; the target is not visible in the current view.
    #[default]
    Global,
    /// A short clip in which the target is visible.
    LocalVideo,
    /// The target is visible in the current view.
    LocalImage,
}

impl Setting {
    pub const ALL: [Setting; 3] = [Setting::Global, Setting::LocalVideo, Setting::LocalImage];

    pub fn is_global(&self) -> bool {
        *self == Setting::Global
    }

    /// The name the paper uses (`Global`, `Local-Video`, `Local-Image`).
    pub fn name(self) -> &'static str {
        match self {
            Setting::Global => "Global",
            Setting::LocalVideo => "Local-Video",
            Setting::LocalImage => "Local-Image",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The largest normalised coordinate of a point on the top-down image.
pub const POINT_MAX: u32 = 999;

/// A ground-truth answer, or an answer extracted from a model's output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Answer {
    /// Integer degrees; ground truth lies in [-180, 180].
    Degrees(i32),
    /// Metres; written with one decimal.
    Metres(f64),
    /// `[x, y]` on the top-down image, each in [0, 999].
    Point([u32; 2]),
    /// An option letter, A to D.
    Choice(char),
}

impl Answer {
    pub fn kind(&self) -> AnswerKind {
        match self {
            Answer::Degrees(_) => AnswerKind::Degrees,
            Answer::Metres(_) => AnswerKind::Metres,
            Answer::Point(_) => AnswerKind::Point,
            Answer::Choice(_) => AnswerKind::Choice,
        }
    }

    /// Parses an answer in the exact format GST writes for `kind` ("-134", "13.2", "<point>391 698</point>",
    /// "B"), surrounding whitespace allowed; `None` for anything else or a value out of range. This is for
    /// ground truth; model output goes through gst-bench's tolerant extraction.
    pub fn parse(kind: AnswerKind, text: &str) -> Option<Answer> {
        let text = text.trim();
        let answer = match kind {
            AnswerKind::Degrees => Answer::Degrees(text.parse().ok()?),
            AnswerKind::Metres => Answer::Metres(text.parse().ok()?),
            AnswerKind::Point => {
                let inner = text.strip_prefix("<point>")?.strip_suffix("</point>")?;
                let mut values = inner.split_whitespace().map(str::parse::<u32>);
                let point = [values.next()?.ok()?, values.next()?.ok()?];
                if values.next().is_some() {
                    return None;
                }
                Answer::Point(point)
            }
            AnswerKind::Choice => {
                let mut chars = text.chars();
                let letter = chars.next()?;
                if chars.next().is_some() {
                    return None;
                }
                Answer::Choice(letter)
            }
        };
        answer.is_valid().then_some(answer)
    }

    /// Whether the value lies in the range GST's answers take.
    pub fn is_valid(&self) -> bool {
        match *self {
            Answer::Degrees(deg) => (-180..=180).contains(&deg),
            Answer::Metres(metres) => metres.is_finite() && metres >= 0.0,
            Answer::Point([x, y]) => x <= POINT_MAX && y <= POINT_MAX,
            Answer::Choice(letter) => ('A'..='D').contains(&letter),
        }
    }

    /// The answer as the JSON value GST writes: a number for metres (rounded to one decimal), a string
    /// for everything else.
    pub fn to_raw(&self) -> RawAnswer {
        match *self {
            Answer::Metres(metres) => RawAnswer::Number(round_to_decimetre(metres)),
            _ => RawAnswer::Text(self.to_string()),
        }
    }

    /// Reads the JSON value of a question's `answer` for `kind`. Degrees and metres may be a string or a
    /// number (integral for degrees); points and letters must be strings.
    pub fn from_raw(kind: AnswerKind, raw: &RawAnswer) -> Option<Answer> {
        match (kind, raw) {
            (_, RawAnswer::Text(text)) => Answer::parse(kind, text),
            (AnswerKind::Metres, RawAnswer::Number(metres)) => {
                let answer = Answer::Metres(*metres);
                answer.is_valid().then_some(answer)
            }
            (AnswerKind::Degrees, RawAnswer::Number(deg)) if deg.fract() == 0.0 && deg.abs() <= 180.0 => {
                Some(Answer::Degrees(*deg as i32))
            }
            _ => None,
        }
    }
}

impl fmt::Display for Answer {
    /// GST's answer text: "-134", "13.2", "<point>391 698</point>", "B".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Degrees(deg) => write!(f, "{deg}"),
            // The same rounding as the JSON number (half away from zero), so text and file agree.
            Answer::Metres(metres) => write!(f, "{:.1}", round_to_decimetre(*metres)),
            Answer::Point([x, y]) => write!(f, "<point>{x} {y}</point>"),
            Answer::Choice(letter) => write!(f, "{letter}"),
        }
    }
}

/// Metres rounded to one decimal, as GST writes distances.
fn round_to_decimetre(metres: f64) -> f64 {
    (metres * 10.0).round() / 10.0
}

/// The `answer` value of a question file as it is: a string, or a number (the release writes distances
/// as numbers).
#[derive(Clone, Debug, PartialEq)]
pub enum RawAnswer {
    Text(String),
    Number(f64),
}

impl fmt::Display for RawAnswer {
    /// As it appears in the JSON file (strings quoted).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawAnswer::Text(text) => write!(f, "{text:?}"),
            RawAnswer::Number(number) => write!(f, "{number}"),
        }
    }
}

impl Serialize for RawAnswer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            RawAnswer::Text(text) => serializer.serialize_str(text),
            RawAnswer::Number(number) => serializer.serialize_f64(*number),
        }
    }
}

impl<'de> Deserialize<'de> for RawAnswer {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl serde::de::Visitor<'_> for Visitor {
            type Value = RawAnswer;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a number as the answer")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<RawAnswer, E> {
                Ok(RawAnswer::Text(text.to_owned()))
            }

            fn visit_f64<E: serde::de::Error>(self, number: f64) -> Result<RawAnswer, E> {
                Ok(RawAnswer::Number(number))
            }

            fn visit_i64<E: serde::de::Error>(self, number: i64) -> Result<RawAnswer, E> {
                Ok(RawAnswer::Number(number as f64))
            }

            fn visit_u64<E: serde::de::Error>(self, number: u64) -> Result<RawAnswer, E> {
                Ok(RawAnswer::Number(number as f64))
            }
        }

        deserializer.deserialize_any(Visitor)
    }
}

/// One image of a question: the current view, a top-down, or an option of a multiple-choice question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionImage {
    /// 1-based position among the question's images, in the order the texts refer to them.
    pub index: u32,
    /// Where the image came from when the question was built (informational; absolute in the release).
    pub source_path: String,
    /// The image file, relative to the question file's directory.
    pub copied_path: String,
}

/// A question file as it is on disk, before its task id, answer and setting are checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RawQuestion {
    pub task: String,
    pub uid: String,
    pub scene: String,
    pub answer: RawAnswer,
    pub texts: Vec<String>,
    pub source_video_path: String,
    pub copied_video_path: String,
    pub images: Vec<QuestionImage>,
    #[serde(default, skip_serializing_if = "Setting::is_global")]
    pub setting: Setting,
}

/// A checked GST question. Serialises to exactly the release's schema (field order included), plus
/// `setting` when it is not the global one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawQuestion", into = "RawQuestion")]
pub struct Question {
    pub task: TaskId,
    /// Unique id of the question within a benchmark.
    pub uid: String,
    /// The scene the question is about (`scene_2`).
    pub scene: String,
    pub answer: Answer,
    /// The prompt pieces; the video and images go between them in the order the texts announce.
    pub texts: Vec<String>,
    /// Where the video came from when the question was built (informational).
    pub source_video_path: String,
    /// The video file, relative to the question file's directory.
    pub copied_video_path: String,
    pub images: Vec<QuestionImage>,
    /// GST-Bench-Local setting; `Global` for every task of the main benchmark.
    pub setting: Setting,
}

impl Question {
    /// Checks what a reader checks: the answer fits the task and the setting applies to it.
    pub fn validate(&self) -> Result<(), QuestionError> {
        if self.answer.kind() != self.task.answer_kind() || !self.answer.is_valid() {
            return Err(QuestionError::Answer { task: self.task, answer: self.answer.to_raw().to_string() });
        }
        if !self.setting.is_global() && !self.task.has_local_settings() {
            return Err(QuestionError::Setting { task: self.task, setting: self.setting });
        }
        Ok(())
    }

    /// The video file, given the directory of the question file.
    pub fn video_path(&self, question_dir: &Path) -> PathBuf {
        question_dir.join(&self.copied_video_path)
    }

    /// The image files in the order of the question, given the directory of the question file.
    pub fn image_paths(&self, question_dir: &Path) -> Vec<PathBuf> {
        self.images.iter().map(|image| question_dir.join(&image.copied_path)).collect()
    }
}

impl TryFrom<RawQuestion> for Question {
    type Error = QuestionError;

    fn try_from(raw: RawQuestion) -> Result<Self, Self::Error> {
        let task = TaskId::parse(&raw.task)?;
        let answer = Answer::from_raw(task.answer_kind(), &raw.answer)
            .ok_or_else(|| QuestionError::Answer { task, answer: raw.answer.to_string() })?;
        let question = Question {
            task,
            uid: raw.uid,
            scene: raw.scene,
            answer,
            texts: raw.texts,
            source_video_path: raw.source_video_path,
            copied_video_path: raw.copied_video_path,
            images: raw.images,
            setting: raw.setting,
        };
        question.validate()?;
        Ok(question)
    }
}

impl From<Question> for RawQuestion {
    fn from(question: Question) -> Self {
        RawQuestion {
            task: question.task.as_str().to_owned(),
            uid: question.uid,
            scene: question.scene,
            answer: question.answer.to_raw(),
            texts: question.texts,
            source_video_path: question.source_video_path,
            copied_video_path: question.copied_video_path,
            images: question.images,
            setting: question.setting,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_round_trip_and_columns_follow_the_paper() {
        let columns: Vec<&str> = TaskId::ALL.iter().map(|task| task.column()).collect();
        assert_eq!(
            columns,
            [
                "ED_v", "EDist_v", "GP_v", "ED_s", "EDist_s", "GP_s", "Pos", "Ori", "TDS_E", "TDS_M",
                "TDS_H", "Traj"
            ]
        );
        for task in TaskId::ALL {
            assert_eq!(TaskId::parse(task.as_str()), Ok(task));
            assert_eq!(TaskId::from_column(task.column()), Some(task));
            assert_eq!(task.as_str().parse::<TaskId>(), Ok(task));
        }
        assert!(matches!(TaskId::parse("Object_Localization"), Err(QuestionError::UnknownTask { .. })));
        assert_eq!(TaskId::SelfOrientation.answer_kind(), AnswerKind::Degrees);
        assert_eq!(TaskId::EgocentricDistanceSemantic.metric(), Metric::MeanRelativeAccuracy);
        assert_eq!(TaskId::TrajectorySelection.metric(), Metric::Accuracy);
        assert_eq!(TaskId::SelfPosition.metric().name(), "mAcc");
    }

    #[test]
    fn answers_format_exactly_as_gst_and_round_trip() {
        let cases = [
            (Answer::Point([391, 698]), "<point>391 698</point>"),
            (Answer::Choice('B'), "B"),
            (Answer::Degrees(-134), "-134"),
            (Answer::Metres(3.5), "3.5"),
            (Answer::Metres(13.2), "13.2"),
            (Answer::Metres(4.0), "4.0"),
        ];
        for (answer, text) in cases {
            assert_eq!(answer.to_string(), text);
            assert_eq!(Answer::parse(answer.kind(), text), Some(answer));
        }
        assert_eq!(Answer::parse(AnswerKind::Degrees, " 180 "), Some(Answer::Degrees(180)));
        assert_eq!(Answer::Metres(0.25).to_string(), "0.3", "text rounds like the JSON number");
        assert_eq!(Answer::Metres(0.25).to_raw(), RawAnswer::Number(0.3));
        for (kind, bad) in [
            (AnswerKind::Degrees, "181"),
            (AnswerKind::Degrees, "-12.5"),
            (AnswerKind::Metres, "-1.0"),
            (AnswerKind::Metres, "NaN"),
            (AnswerKind::Point, "<point>391 1000</point>"),
            (AnswerKind::Point, "<point>391</point>"),
            (AnswerKind::Point, "391 698"),
            (AnswerKind::Choice, "E"),
            (AnswerKind::Choice, "AB"),
        ] {
            assert_eq!(Answer::parse(kind, bad), None, "{bad:?} must not parse as {kind:?}");
        }
    }

    #[test]
    fn raw_answers_follow_the_release_numbers_for_distances_and_strings_otherwise() {
        assert_eq!(Answer::Metres(13.24).to_raw(), RawAnswer::Number(13.2));
        assert_eq!(Answer::Degrees(-134).to_raw(), RawAnswer::Text("-134".into()));
        assert_eq!(
            Answer::from_raw(AnswerKind::Degrees, &RawAnswer::Number(-134.0)),
            Some(Answer::Degrees(-134))
        );
        assert_eq!(Answer::from_raw(AnswerKind::Degrees, &RawAnswer::Number(-13.5)), None);
        assert_eq!(Answer::from_raw(AnswerKind::Choice, &RawAnswer::Number(1.0)), None);
        assert_eq!(
            Answer::from_raw(AnswerKind::Metres, &RawAnswer::Text("2.5".into())),
            Some(Answer::Metres(2.5))
        );
    }

    fn question_json(task: &str, answer: &str, extra: &str) -> String {
        format!(
            r#"{{"task": "{task}", "uid": "u", "scene": "scene_1", "answer": {answer}, "texts": ["t"],
                "source_video_path": "/v.mp4", "copied_video_path": "v.mp4", "images": []{extra}}}"#
        )
    }

    #[test]
    fn questions_check_task_answer_and_setting() -> Result<(), serde_json::Error> {
        let ed = question_json(
            "Object_Localization_Egocentric_Distance_semantic",
            "2.5",
            r#", "setting": "local_image""#,
        );
        let question: Question = serde_json::from_str(&ed)?;
        assert_eq!(question.answer, Answer::Metres(2.5));
        assert_eq!(question.setting, Setting::LocalImage);
        let text = serde_json::to_string(&question)?;
        assert!(text.contains(r#""answer":2.5"#) && text.contains(r#""setting":"local_image""#), "{text}");

        let global = question_json("Self_Localization_Global_Position", r#""<point>1 2</point>""#, "");
        let question: Question = serde_json::from_str(&global)?;
        assert!(!serde_json::to_string(&question)?.contains("setting"), "global is the default and omitted");

        let raw: RawQuestion = serde_json::from_str(&question_json("Nope", r#""A""#, ""))?;
        assert!(matches!(Question::try_from(raw), Err(QuestionError::UnknownTask { .. })));
        let raw: RawQuestion =
            serde_json::from_str(&question_json("Self_Localization_Global_Orientation", r#""north""#, ""))?;
        let error = Question::try_from(raw).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("\"north\"") && error.contains("integer degrees"), "{error}");
        let raw: RawQuestion = serde_json::from_str(&question_json(
            "Global_Structure_Understanding_Topdown_Selection_Hard",
            r#""A""#,
            r#", "setting": "local_video""#,
        ))?;
        assert!(matches!(Question::try_from(raw), Err(QuestionError::Setting { .. })));
        assert!(serde_json::from_str::<RawQuestion>(&question_json("x", "null", "")).is_err());
        Ok(())
    }
}
