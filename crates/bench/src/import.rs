//! Predictions written by the harnesses, read for `gst score` and `gst eval --answerer import`: lmms-eval's
//! samples JSONL (`--log_samples`, one `*_samples_<task>.jsonl` per task, or a folder of them) and
//! VLMEvalKit's prediction table, as xlsx (its default) or TSV.
//!
//! - lmms-eval: each line is a logged sample, `{"doc_id", "doc": {...}, "filtered_resps": [...], "resps":
//!   [[...]], "gst_score": {...}}`. The uid is the document's `uid` (our export's field); the prediction is
//!   the raw response, `filtered_resps[0]` (generate_until's "none" filter keeps it as the model wrote it).
//! - VLMEvalKit: a tab-separated table with a header; the uid is the `uid` column (our export's), else
//!   `index`; the prediction is the `prediction` column. Fields may be double-quoted as pandas writes them
//!   (quotes doubled inside; tabs and newlines allowed inside quotes). The xlsx form (the first sheet, the
//!   same columns) is read with `calamine`, a pure-Rust spreadsheet reader; numbers in it are read as text
//!   (`3.0` as `3`), as pandas would print them for an integer column.
//!
//! A harness run is expected to cover the whole split: [`check_complete`] names the first question
//! without a prediction.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gst_core::Question;

use crate::BenchError;
use crate::score::{Prediction, Predictions};

/// Where a predictions file came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PredictionFormat {
    /// Ours: `{"uid", "prediction"}` lines (`gst eval`'s predictions.jsonl).
    Gst,
    /// lmms-eval's `--log_samples` output.
    LmmsEvalSamples,
    /// VLMEvalKit's prediction table, as TSV.
    VlmEvalKitTsv,
    /// VLMEvalKit's prediction table, as xlsx.
    VlmEvalKitXlsx,
}

impl PredictionFormat {
    /// Whether the file comes from a harness run, which must answer every question.
    pub fn is_harness(self) -> bool {
        self != PredictionFormat::Gst
    }
}

fn malformed(path: &Path, line: usize, message: impl Into<String>) -> BenchError {
    BenchError::MalformedPrediction { path: path.into(), line, message: message.into() }
}

fn read_text(path: &Path) -> Result<String, BenchError> {
    std::fs::read_to_string(path).map_err(|error| BenchError::ReadPredictions { path: path.into(), error })
}

/// Reads predictions in any of the formats: a folder is read as lmms-eval's output folder (every
/// `*samples_*.jsonl` under it, in name order); a `.tsv` or `.xlsx` file as VLMEvalKit's table; a JSONL file as
/// lmms-eval's samples when its first line has `doc_id`, else as ours.
pub fn read_predictions(path: &Path) -> Result<(Predictions, PredictionFormat), BenchError> {
    if path.is_dir() {
        let mut files = Vec::new();
        collect_samples(path, &mut files)?;
        if files.is_empty() {
            return Err(malformed(path, 0, "no lmms-eval samples files (*samples_*.jsonl) in this folder"));
        }
        files.sort();
        let mut entries: Vec<Prediction> = Vec::new();
        let mut file_of_uid: HashMap<String, (PathBuf, usize)> = HashMap::new();
        for file in files {
            let predictions = parse_lmms_samples(&file, &read_text(&file)?)?;
            for entry in predictions.entries {
                if let Some((first, first_line)) = file_of_uid.get(&entry.uid) {
                    return Err(malformed(
                        &file,
                        entry.line,
                        format!(
                            "uid {:?} was already predicted in {}, line {first_line}",
                            entry.uid,
                            first.display()
                        ),
                    ));
                }
                file_of_uid.insert(entry.uid.clone(), (file.clone(), entry.line));
                entries.push(entry);
            }
        }
        return Ok((Predictions { source: path.into(), entries }, PredictionFormat::LmmsEvalSamples));
    }
    if path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("xlsx")) {
        return Ok((read_vlmevalkit_xlsx(path)?, PredictionFormat::VlmEvalKitXlsx));
    }
    let text = read_text(path)?;
    if path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("tsv")) {
        return Ok((parse_vlmevalkit_tsv(path, &text)?, PredictionFormat::VlmEvalKitTsv));
    }
    let first = text.lines().find(|line| !line.trim().is_empty()).unwrap_or_default();
    let is_lmms = serde_json::from_str::<serde_json::Value>(first.trim_start_matches('\u{feff}'))
        .ok()
        .is_some_and(|value| value.get("doc_id").is_some());
    if is_lmms {
        Ok((parse_lmms_samples(path, &text)?, PredictionFormat::LmmsEvalSamples))
    } else {
        Ok((Predictions::parse(path, &text)?, PredictionFormat::Gst))
    }
}

fn collect_samples(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), BenchError> {
    let list_error = |error| BenchError::ReadPredictions { path: dir.into(), error };
    for entry in std::fs::read_dir(dir).map_err(list_error)? {
        let path = entry.map_err(list_error)?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if path.is_dir() {
            collect_samples(&path, files)?;
        } else if name.contains("samples_") && name.ends_with(".jsonl") {
            files.push(path);
        }
    }
    Ok(())
}

/// The first string in a response value: `"B"`, `["B"]`, `[["B"]]`.
fn first_string(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(text) => Some(text.clone()),
        serde_json::Value::Array(items) => items.first().and_then(first_string),
        serde_json::Value::Null => Some(String::new()),
        _ => None,
    }
}

/// Parses lmms-eval's samples JSONL.
pub fn parse_lmms_samples(path: &Path, text: &str) -> Result<Predictions, BenchError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut entries = Vec::new();
    let mut line_of_uid: HashMap<String, usize> = HashMap::new();
    for (index, line_text) in text.lines().enumerate() {
        let line = index + 1;
        if line_text.trim().is_empty() {
            continue;
        }
        let sample: serde_json::Value =
            serde_json::from_str(line_text).map_err(|e| malformed(path, line, e.to_string()))?;
        let uid = sample
            .pointer("/doc/uid")
            .or_else(|| sample.pointer("/gst_score/uid"))
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| {
                malformed(path, line, "sample has no doc.uid (was the task exported by `gst export`?)")
            })?
            .to_string();
        let prediction = sample
            .get("filtered_resps")
            .and_then(first_string)
            .or_else(|| sample.get("resps").and_then(first_string))
            .ok_or_else(|| malformed(path, line, format!("sample {uid:?} has no filtered_resps or resps")))?;
        if let Some(&first_line) = line_of_uid.get(&uid) {
            return Err(BenchError::DuplicatePrediction { path: path.into(), line, first_line, uid });
        }
        line_of_uid.insert(uid.clone(), line);
        entries.push(Prediction { line, uid, text: prediction });
    }
    Ok(Predictions { source: path.into(), entries })
}

/// Splits TSV into records of fields, with pandas' quoting: a field that starts with `"` runs to the next
/// lone `"`, `""` inside standing for one quote. Returns each record with its 1-based starting line.
fn tsv_records(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut records = Vec::new();
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut line = 1;
    let mut record_line = 1;
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut at_field_start = true;
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    field.push('"');
                } else {
                    quoted = false;
                }
            } else {
                if c == '\n' {
                    line += 1;
                }
                field.push(c);
            }
            continue;
        }
        match c {
            '"' if at_field_start => {
                quoted = true;
                at_field_start = false;
            }
            '\t' => {
                fields.push(std::mem::take(&mut field));
                at_field_start = true;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                fields.push(std::mem::take(&mut field));
                if fields.iter().any(|f| !f.is_empty()) {
                    records.push((record_line, std::mem::take(&mut fields)));
                } else {
                    fields.clear();
                }
                line += 1;
                record_line = line;
                at_field_start = true;
            }
            other => {
                field.push(other);
                at_field_start = false;
            }
        }
    }
    fields.push(field);
    if fields.iter().any(|f| !f.is_empty()) {
        records.push((record_line, fields));
    }
    records
}

/// Parses VLMEvalKit's prediction table (TSV with a header: `uid` or `index`, and `prediction`).
pub fn parse_vlmevalkit_tsv(path: &Path, text: &str) -> Result<Predictions, BenchError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    vlmevalkit_table(path, tsv_records(text))
}

/// A spreadsheet cell as text: numbers as pandas prints them (an integral float without `.0`).
fn cell_text(cell: &calamine::Data) -> String {
    match cell {
        calamine::Data::Empty => String::new(),
        calamine::Data::String(text) => text.clone(),
        calamine::Data::Float(value) if value.fract() == 0.0 && value.abs() < 1e15 => {
            format!("{}", *value as i64)
        }
        other => other.to_string(),
    }
}

/// Reads VLMEvalKit's prediction table as xlsx (its default `PRED_FORMAT`): the first sheet.
pub fn read_vlmevalkit_xlsx(path: &Path) -> Result<Predictions, BenchError> {
    use calamine::Reader;
    let mut workbook: calamine::Xlsx<_> = calamine::open_workbook(path)
        .map_err(|e: calamine::XlsxError| malformed(path, 0, format!("not a readable xlsx file: {e}")))?;
    let range = workbook
        .worksheet_range_at(0)
        .ok_or_else(|| malformed(path, 0, "the workbook has no sheet"))?
        .map_err(|e| malformed(path, 0, format!("cannot read the first sheet: {e}")))?;
    let first_row = range.start().map_or(0, |(row, _)| row as usize);
    let records = range
        .rows()
        .enumerate()
        .map(|(k, row)| (first_row + k + 1, row.iter().map(cell_text).collect::<Vec<_>>()))
        .filter(|(_, fields)| fields.iter().any(|f| !f.is_empty()))
        .collect();
    vlmevalkit_table(path, records)
}

/// The predictions of a VLMEvalKit table given as records (1-based line or row number, fields).
fn vlmevalkit_table(path: &Path, records: Vec<(usize, Vec<String>)>) -> Result<Predictions, BenchError> {
    let mut records = records.into_iter();
    let (header_line, header) = records.next().ok_or_else(|| malformed(path, 1, "empty table"))?;
    let column = |name: &str| header.iter().position(|h| h.trim() == name);
    let uid_column = column("uid")
        .or_else(|| column("index"))
        .ok_or_else(|| malformed(path, header_line, "the header has neither a uid nor an index column"))?;
    let prediction_column = column("prediction")
        .ok_or_else(|| malformed(path, header_line, "the header has no prediction column"))?;
    let mut entries = Vec::new();
    let mut line_of_uid: HashMap<String, usize> = HashMap::new();
    for (line, fields) in records {
        let uid = fields
            .get(uid_column)
            .map(|f| f.trim().to_string())
            .filter(|uid| !uid.is_empty())
            .ok_or_else(|| malformed(path, line, "row without an id"))?;
        let prediction = fields.get(prediction_column).cloned().unwrap_or_default();
        if let Some(&first_line) = line_of_uid.get(&uid) {
            return Err(BenchError::DuplicatePrediction { path: path.into(), line, first_line, uid });
        }
        line_of_uid.insert(uid.clone(), line);
        entries.push(Prediction { line, uid, text: prediction });
    }
    Ok(Predictions { source: path.into(), entries })
}

/// Fails on the first question (in the given order) that has no prediction.
pub fn check_complete(questions: &[Question], predictions: &Predictions) -> Result<(), BenchError> {
    let predicted: std::collections::HashSet<&str> =
        predictions.entries.iter().map(|entry| entry.uid.as_str()).collect();
    let missing: Vec<&Question> =
        questions.iter().filter(|question| !predicted.contains(question.uid.as_str())).collect();
    match missing.first() {
        None => Ok(()),
        Some(first) => Err(BenchError::MissingPrediction {
            path: predictions.source.clone(),
            uid: first.uid.clone(),
            missing: missing.len(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lmms_samples_give_uid_and_raw_response() -> Result<(), BenchError> {
        let text = r#"{"doc_id": 0, "doc": {"uid": "q1"}, "target": "B", "resps": [["The answer is B"]], "filtered_resps": ["The answer is B"], "gst_score": {"uid": "q1", "score": 1.0}}
{"doc_id": 1, "doc": {"uid": "q2"}, "resps": [["3.5 m"]]}
"#;
        let predictions = parse_lmms_samples(Path::new("s.jsonl"), text)?;
        let got: Vec<(&str, &str)> =
            predictions.entries.iter().map(|e| (e.uid.as_str(), e.text.as_str())).collect();
        assert_eq!(got, [("q1", "The answer is B"), ("q2", "3.5 m")]);
        let duplicate = format!("{text}{}", text.lines().next().unwrap_or_default());
        let error = parse_lmms_samples(Path::new("s.jsonl"), &duplicate).err().map(|e| e.to_string());
        assert!(error.as_deref().is_some_and(|e| e.contains("\"q1\"") && e.contains("line 3")), "{error:?}");
        let error = parse_lmms_samples(Path::new("s.jsonl"), r#"{"doc_id": 0, "doc": {}}"#).err();
        assert!(error.map(|e| e.to_string()).is_some_and(|e| e.contains("line 1") && e.contains("doc.uid")));
        Ok(())
    }

    #[test]
    fn vlmevalkit_tsv_reads_quoted_fields() -> Result<(), BenchError> {
        let text = "index\tuid\tquestion\tanswer\tprediction\n0\tq1\t\"two\nlines\"\tB\t\"He said \"\"B\"\"\tok\"\n1\tq2\tx\t3.5\t4.0\n";
        let predictions = parse_vlmevalkit_tsv(Path::new("p.tsv"), text)?;
        let got: Vec<(usize, &str, &str)> =
            predictions.entries.iter().map(|e| (e.line, e.uid.as_str(), e.text.as_str())).collect();
        assert_eq!(got, [(2, "q1", "He said \"B\"\tok"), (4, "q2", "4.0")]);
        let error = parse_vlmevalkit_tsv(Path::new("p.tsv"), "uid\tprediction\nq1\tA\nq1\tB\n").err();
        assert!(error.map(|e| e.to_string()).is_some_and(|e| e.contains("\"q1\"") && e.contains("line 3")));
        let error = parse_vlmevalkit_tsv(Path::new("p.tsv"), "uid\tanswer\nq1\tA\n").err();
        assert!(error.map(|e| e.to_string()).is_some_and(|e| e.contains("no prediction column")));
        Ok(())
    }
}
