//! GST-Bench question files: read the release's files (and ours, which use the same schema), a directory
//! of them, and write one atomically.
//!
//! Reading separates three kinds of failure so that a user can fix the file: JSON that does not parse or
//! lacks a field (with line and column), a well-formed file with a wrong value (unknown task id, an answer
//! that does not fit its task), and, when asked, a video or image that is not where the file says. The
//! `copied_*` paths are relative to the question file's directory, as in the release.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gst_core::{Question, QuestionError, RawQuestion};

use crate::{IoError, write_json};

/// A question file that cannot be used. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum QuestionFileError {
    #[error("cannot read question file {path}: {error}")]
    Read { path: PathBuf, error: std::io::Error },

    #[error("malformed question file {path}, line {line}, column {column}: {message}")]
    Malformed { path: PathBuf, line: usize, column: usize, message: String },

    #[error("invalid question file {path}: {error}")]
    Invalid { path: PathBuf, error: QuestionError },

    #[error("question file {path}: its {what} {missing} does not exist")]
    MissingMedia { path: PathBuf, what: String, missing: PathBuf },

    /// A media path that is absolute, or climbs (`..`, a symlink) out of the question's folder.
    #[error("question file {path}: its {what} path {media:?} {problem}")]
    OutsideFolder { path: PathBuf, what: String, media: String, problem: String },

    #[error("cannot list question directory {dir}: {error}")]
    ListDir { dir: PathBuf, error: std::io::Error },

    #[error("no question files (*.json) in {dir}")]
    NoQuestions { dir: PathBuf },

    #[error("question uid {uid:?} appears twice: in {first} and in {second}")]
    DuplicateUid { uid: String, first: PathBuf, second: PathBuf },
}

/// What a reader checks beyond the file itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuestionReadOptions {
    /// Check that the video and every image exist (relative to the question file's directory). Off by
    /// default: scoring needs only the answers, and the release's samples come without their media.
    pub check_files: bool,
}

/// A question together with the file it was read from, which its media paths are relative to.
#[derive(Clone, Debug, PartialEq)]
pub struct QuestionFile {
    pub path: PathBuf,
    pub question: Question,
}

impl QuestionFile {
    /// The directory the question's `copied_*` paths are relative to.
    pub fn dir(&self) -> &Path {
        question_dir(&self.path)
    }

    pub fn video_path(&self) -> PathBuf {
        self.question.video_path(self.dir())
    }

    pub fn image_paths(&self) -> Vec<PathBuf> {
        self.question.image_paths(self.dir())
    }
}

fn question_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Reads and checks one question file.
pub fn read_question(path: &Path, options: QuestionReadOptions) -> Result<Question, QuestionFileError> {
    let bytes = std::fs::read(path).map_err(|error| QuestionFileError::Read { path: path.into(), error })?;
    let raw: RawQuestion = serde_json::from_slice(&bytes).map_err(|error| malformed(path, &error))?;
    let question =
        Question::try_from(raw).map_err(|error| QuestionFileError::Invalid { path: path.into(), error })?;
    check_media_paths(path, &question)?;
    if options.check_files {
        check_media(path, &question)?;
    }
    Ok(question)
}

/// serde_json's message carries its own " at line L column C" suffix; the error states the position once.
fn malformed(path: &Path, error: &serde_json::Error) -> QuestionFileError {
    let text = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    let message = text.strip_suffix(&suffix).unwrap_or(&text).to_owned();
    QuestionFileError::Malformed { path: path.into(), line: error.line(), column: error.column(), message }
}

/// The folder a question's media must stay inside: the question file's directory, or its parent where the
/// file lies in a `questions/` folder (what `gst generate` writes: `scene/questions/q.json` refers to
/// `../video.mp4`).
fn media_root(path: &Path) -> PathBuf {
    let dir = question_dir(path);
    if dir.file_name().is_some_and(|name| name == "questions") {
        return match dir.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.into(),
            _ => PathBuf::from("."),
        };
    }
    dir.into()
}

/// Refuses media paths that are absolute or lead out of [`media_root`]: by `..` components, or, where the
/// file exists, through a symlink.
fn check_media_paths(path: &Path, question: &Question) -> Result<(), QuestionFileError> {
    use std::path::Component;
    let dir = question_dir(path);
    let root = media_root(path);
    // How deep the question's directory is below the root (0 or 1).
    let base_depth = usize::from(root.as_path() != dir);
    let media = std::iter::once(("video".to_string(), question.copied_video_path.as_str())).chain(
        question.images.iter().map(|image| (format!("image {}", image.index), image.copied_path.as_str())),
    );
    for (what, relative) in media {
        let refuse = |problem: &str| QuestionFileError::OutsideFolder {
            path: path.into(),
            what: what.clone(),
            media: relative.to_string(),
            problem: problem.to_string(),
        };
        let mut depth = base_depth as isize;
        for component in Path::new(relative).components() {
            match component {
                Component::Prefix(_) | Component::RootDir => {
                    return Err(refuse("is absolute: media paths are relative to the question's folder"));
                }
                Component::ParentDir => depth -= 1,
                Component::CurDir => {}
                Component::Normal(_) => depth += 1,
            }
            if depth < 0 {
                return Err(refuse(&format!("leads out of the question's folder {}", root.display())));
            }
        }
        let target = dir.join(relative);
        if let (Ok(real), Ok(real_root)) = (target.canonicalize(), root.canonicalize())
            && !real.starts_with(&real_root)
        {
            return Err(refuse(&format!(
                "is a link to {}, outside the question's folder {}",
                real.display(),
                root.display()
            )));
        }
    }
    Ok(())
}

fn check_media(path: &Path, question: &Question) -> Result<(), QuestionFileError> {
    let dir = question_dir(path);
    let video = question.video_path(dir);
    if !video.is_file() {
        return Err(QuestionFileError::MissingMedia {
            path: path.into(),
            what: "video".into(),
            missing: video,
        });
    }
    for (image, image_path) in question.images.iter().zip(question.image_paths(dir)) {
        if !image_path.is_file() {
            return Err(QuestionFileError::MissingMedia {
                path: path.into(),
                what: format!("image {}", image.index),
                missing: image_path,
            });
        }
    }
    Ok(())
}

/// Reads every `*.json` file directly in `dir` (hidden files skipped), in file-name order so that the
/// result does not depend on the file system. Fails on the first bad file, on an empty directory and on a
/// uid that appears in two files.
pub fn read_question_dir(
    dir: &Path,
    options: QuestionReadOptions,
) -> Result<Vec<QuestionFile>, QuestionFileError> {
    let list_error = |error| QuestionFileError::ListDir { dir: dir.into(), error };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(list_error)? {
        let path = entry.map_err(list_error)?.path();
        let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        if !name.starts_with('.') && name.ends_with(".json") && path.is_file() {
            paths.push(path);
        }
    }
    if paths.is_empty() {
        return Err(QuestionFileError::NoQuestions { dir: dir.into() });
    }
    paths.sort();
    let mut first_file_of_uid: HashMap<String, PathBuf> = HashMap::with_capacity(paths.len());
    let mut questions = Vec::with_capacity(paths.len());
    for path in paths {
        let question = read_question(&path, options)?;
        if let Some(first) = first_file_of_uid.insert(question.uid.clone(), path.clone()) {
            return Err(QuestionFileError::DuplicateUid { uid: question.uid, first, second: path });
        }
        questions.push(QuestionFile { path, question });
    }
    Ok(questions)
}

/// Reads a benchmark split: `dir/questions/*.json` when `dir/questions` exists (the layout `gst generate`
/// writes), else `dir/*.json`.
pub fn read_bench_questions(
    dir: &Path,
    options: QuestionReadOptions,
) -> Result<Vec<QuestionFile>, QuestionFileError> {
    let nested = dir.join("questions");
    read_question_dir(if nested.is_dir() { &nested } else { dir }, options)
}

/// Writes a question in the release's layout (two-space indented JSON, the release's field order),
/// atomically. Refuses a question that a reader would reject.
pub fn write_question(path: &Path, question: &Question) -> Result<(), IoError> {
    question
        .validate()
        .map_err(|error| IoError::Serialize { path: path.into(), message: error.to_string() })?;
    write_json(path, question)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use gst_core::{Answer, Setting, TaskId};

    fn repo_dir(relative: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
    }

    fn samples() -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(repo_dir("tests/data/gst-samples"))
            .expect("tests/data/gst-samples")
            .map(|entry| entry.expect("entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        paths.sort();
        paths
    }

    /// A sample question file rewritten with `video` as its video path, written to `dir/name`.
    fn sample_with_video(dir: &Path, name: &str, video: &str) -> PathBuf {
        let text = std::fs::read_to_string(&samples()[0]).expect("sample");
        let mut json: serde_json::Value = serde_json::from_str(&text).expect("sample json");
        json["copied_video_path"] = serde_json::Value::String(video.into());
        let path = dir.join(name);
        std::fs::create_dir_all(dir).expect("dir");
        std::fs::write(&path, json.to_string()).expect("write");
        path
    }

    #[test]
    fn media_paths_out_of_the_question_folder_are_refused() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let scene = tmp.path().join("scene");
        let options = QuestionReadOptions::default();
        for bad in ["../secret.mp4", "/etc/passwd", "a/../../b.mp4"] {
            let path = sample_with_video(&scene, "q.json", bad);
            let error = read_question(&path, options).expect_err(bad).to_string();
            assert!(error.contains("q.json") && error.contains(bad), "{error}");
        }
        // gst generate's layout: scene/questions/q.json refers to ../video.mp4 (inside the scene), but not
        // to ../../video.mp4.
        let ours = sample_with_video(&scene.join("questions"), "q.json", "../video.mp4");
        read_question(&ours, options)?;
        let out = sample_with_video(&scene.join("questions"), "q.json", "../../video.mp4");
        assert!(read_question(&out, options).is_err());
        // A symlink inside the folder pointing out of it.
        std::fs::write(tmp.path().join("outside.mp4"), b"x")?;
        std::os::unix::fs::symlink(tmp.path().join("outside.mp4"), scene.join("link.mp4"))?;
        let linked = sample_with_video(&scene, "q.json", "link.mp4");
        let error = read_question(&linked, options).expect_err("symlink out").to_string();
        assert!(error.contains("link") && error.contains("outside"), "{error}");
        Ok(())
    }

    #[test]
    fn deeply_nested_json_fails_fast_with_the_file_named() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let path = tmp.path().join("deep.json");
        std::fs::write(&path, format!("{{\"unknown\": {}{}}}", "[".repeat(10_000), "]".repeat(10_000)))?;
        let start = std::time::Instant::now();
        let error = read_question(&path, QuestionReadOptions::default()).expect_err("deep").to_string();
        // serde_json skips unknown values without recursing, and stops typed values at 128 levels.
        assert!(error.contains("deep.json"), "{error}");
        std::fs::write(&path, format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)))?;
        let error = read_question(&path, QuestionReadOptions::default()).expect_err("deep").to_string();
        assert!(error.contains("deep.json"), "{error}");
        let value: Result<serde_json::Value, _> = serde_json::from_str(&"[".repeat(10_000));
        assert!(value.expect_err("deep value").to_string().contains("recursion limit"));
        assert!(start.elapsed() < std::time::Duration::from_secs(2), "bounded time: {:?}", start.elapsed());
        Ok(())
    }

    #[test]
    fn every_real_sample_parses_with_its_answer() {
        let questions =
            read_question_dir(&repo_dir("tests/data/gst-samples"), QuestionReadOptions::default())
                .expect("the release's samples parse");
        assert_eq!(questions.len(), 6);
        let by_task: Vec<(TaskId, Answer)> =
            questions.iter().map(|q| (q.question.task, q.question.answer)).collect();
        assert_eq!(
            by_task,
            [
                (TaskId::TopdownSelectionEasy, Answer::Choice('C')),
                (TaskId::TopdownSelectionMedium, Answer::Choice('C')),
                (TaskId::TrajectorySelection, Answer::Choice('B')),
                (TaskId::EgocentricDirectionVisual, Answer::Degrees(-134)),
                (TaskId::EgocentricDistanceVisual, Answer::Metres(13.2)),
                (TaskId::SelfPosition, Answer::Point([391, 698])),
            ]
        );
        for file in &questions {
            assert_eq!(file.question.setting, Setting::Global);
            assert!(file.question.uid.starts_with("scene"));
            assert_eq!(file.question.images.first().map(|image| image.index), Some(1));
        }
        let position = &questions[5];
        assert_eq!(
            position.image_paths()[1],
            repo_dir("tests/data/gst-samples").join("image_02_topdown_2.png")
        );
    }

    #[test]
    fn writing_a_sample_reproduces_its_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        for sample in samples() {
            let question = read_question(&sample, QuestionReadOptions::default()).expect("sample");
            let out = dir.path().join("q.json");
            write_question(&out, &question).expect("write");
            let original = std::fs::read_to_string(&sample).expect("sample text");
            let written = std::fs::read_to_string(&out).expect("written text");
            assert_eq!(written.trim_end(), original.trim_end(), "{}", sample.display());
            assert_eq!(read_question(&out, QuestionReadOptions::default()).expect("reread"), question);
        }
    }

    fn read_bad(name: &str) -> String {
        let path = repo_dir("tests/bad/questions").join(name);
        match read_question(&path, QuestionReadOptions::default()) {
            Ok(question) => panic!("{name} must not parse, got {question:?}"),
            Err(error) => {
                let text = error.to_string();
                assert!(text.contains(name), "the error must name the file: {text}");
                text
            }
        }
    }

    #[test]
    fn bad_files_get_clear_errors_naming_the_file() {
        let truncated = read_bad("truncated.json");
        assert!(truncated.contains("malformed") && truncated.contains("line 9"), "{truncated}");
        assert!(read_bad("empty.json").contains("malformed"));
        let missing = read_bad("missing_uid.json");
        assert!(missing.contains("missing field `uid`") && missing.contains("line "), "{missing}");
        let null = read_bad("distance_answer_null.json");
        assert!(null.contains("string or a number"), "{null}");
        let unknown = read_bad("unknown_task.json");
        assert!(
            unknown.contains("unknown task id \"Object_Localization_Egocentric_Heading_visual\""),
            "{unknown}"
        );
        let direction = read_bad("direction_answer_not_a_number.json");
        assert!(direction.contains("\"left\"") && direction.contains("integer degrees"), "{direction}");
        let point = read_bad("position_answer_not_a_point.json");
        assert!(point.contains("(391, 698)") && point.contains("<point>x y</point>"), "{point}");
        let setting = read_bad("local_setting_on_topdown_selection.json");
        assert!(setting.contains("Local-Video") && setting.contains("ED and EDist"), "{setting}");
        let absent = read_bad("no_such_file.json");
        assert!(absent.contains("cannot read"), "{absent}");
    }

    #[test]
    fn missing_media_are_reported_when_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sample = repo_dir("tests/data/gst-samples/06_Self_Localization_Global_Position.json");
        let path = dir.path().join("pos.json");
        std::fs::copy(&sample, &path).expect("copy");
        let check = QuestionReadOptions { check_files: true };
        assert!(read_question(&path, QuestionReadOptions::default()).is_ok());

        let error = read_question(&path, check).expect_err("no video yet").to_string();
        assert!(
            error.contains("pos.json") && error.contains("video") && error.contains("video4.mp4"),
            "{error}"
        );
        std::fs::write(dir.path().join("video4.mp4"), b"").expect("video");
        std::fs::write(dir.path().join("image_01_position_25_orientation_11.png"), b"").expect("image");
        let error = read_question(&path, check).expect_err("no top-down yet").to_string();
        assert!(error.contains("image 2") && error.contains("image_02_topdown_2.png"), "{error}");
        std::fs::write(dir.path().join("image_02_topdown_2.png"), b"").expect("image");
        assert!(read_question(&path, check).is_ok());
    }

    #[test]
    fn directories_read_sorted_and_reject_duplicates_and_emptiness() {
        let dir = tempfile::tempdir().expect("tempdir");
        let error = read_question_dir(dir.path(), QuestionReadOptions::default()).expect_err("empty");
        assert!(error.to_string().contains("no question files"), "{error}");

        let questions = dir.path().join("questions");
        std::fs::create_dir_all(&questions).expect("mkdir");
        for (i, sample) in samples().iter().rev().enumerate() {
            std::fs::copy(sample, questions.join(format!("{i}.json"))).expect("copy");
        }
        std::fs::write(questions.join("notes.txt"), "not a question").expect("notes");
        let read = read_bench_questions(dir.path(), QuestionReadOptions::default()).expect("bench dir");
        let names: Vec<String> =
            read.iter().map(|q| q.path.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["0.json", "1.json", "2.json", "3.json", "4.json", "5.json"]);
        assert_eq!(read[0].question.task, TaskId::SelfPosition);

        std::fs::copy(&read[0].path, questions.join("6.json")).expect("copy");
        let error = read_bench_questions(dir.path(), QuestionReadOptions::default()).expect_err("duplicate");
        let text = error.to_string();
        assert!(
            text.contains("appears twice") && text.contains("0.json") && text.contains("6.json"),
            "{text}"
        );
    }

    #[test]
    fn writing_refuses_an_answer_that_does_not_fit_the_task() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sample =
            repo_dir("tests/data/gst-samples/04_Object_Localization_Egocentric_Direction_visual.json");
        let mut question = read_question(&sample, QuestionReadOptions::default()).expect("sample");
        question.answer = Answer::Choice('A');
        let path = dir.path().join("bad.json");
        let error = write_question(&path, &question).expect_err("inconsistent").to_string();
        assert!(error.contains("bad.json") && error.contains("integer degrees"), "{error}");
        assert!(!path.exists());
    }
}
