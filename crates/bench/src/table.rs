//! The paper's tables with our scores beside its reference rows, as aligned text and as JSON.
//!
//! The reference numbers are those of GST-Bench's public release (`data/gst-bench-table1.json`, compiled
//! into the crate so that scoring works from a clean clone): Table 1 (the twelve columns and Avg) and
//! Table 2 (ED and EDist, semantic, under the Global, Local-Video and Local-Image settings).

use std::collections::BTreeMap;
use std::fmt;

use gst_core::{Setting, TaskId};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};

use crate::BenchError;
use crate::score::ScoreReport;

/// The paper's human row.
pub const HUMAN_ROW: &str = "Human Level";
/// The paper's random-guessing row.
pub const RANDOM_ROW: &str = "Random Guessing";
/// The best off-the-shelf VLM of Table 1 by Avg. The Qwen3-VL-8B fine-tuned on GST-Train scores higher,
/// but it was trained on the benchmark's own distribution.
pub const BEST_VLM_ROW: &str = "Gemini-3-Pro";
/// The paper's average column: the mean of the twelve subtask columns.
pub const AVG_COLUMN: &str = "Avg";

const PAPER_TABLE_JSON: &str = include_str!("../data/gst-bench-table1.json");

/// The local-setting columns, in Table 2's order.
const LOCAL_FAMILIES: [(&str, TaskId, TaskId); 2] = [
    ("ED", TaskId::EgocentricDirectionVisual, TaskId::EgocentricDirectionSemantic),
    ("EDist", TaskId::EgocentricDistanceVisual, TaskId::EgocentricDistanceSemantic),
];

/// The paper's reference tables.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct PaperTable {
    /// Where the numbers come from.
    pub source: String,
    /// The twelve task columns and Avg.
    pub columns: Vec<String>,
    pub rows: Vec<PaperRow>,
    #[serde(rename = "local_settings_table2")]
    pub local: PaperLocalTable,
}

/// One model of Table 1: percent per column.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct PaperRow {
    pub model: String,
    pub scores: BTreeMap<String, f64>,
}

/// Table 2: per model, the [Global, Local-Video, Local-Image] scores of ED_s and EDist_s in percent.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct PaperLocalTable {
    pub note: String,
    #[serde(rename = "ED")]
    pub direction: BTreeMap<String, [f64; 3]>,
    #[serde(rename = "EDist")]
    pub distance: BTreeMap<String, [f64; 3]>,
}

impl PaperTable {
    /// The tables compiled into the crate.
    pub fn embedded() -> Result<PaperTable, BenchError> {
        let table: PaperTable = serde_json::from_str(PAPER_TABLE_JSON)
            .map_err(|error| BenchError::PaperTable { message: error.to_string() })?;
        table.validate()?;
        Ok(table)
    }

    fn validate(&self) -> Result<(), BenchError> {
        let expected: Vec<&str> = TaskId::ALL.iter().map(|task| task.column()).chain([AVG_COLUMN]).collect();
        if self.columns != expected {
            return Err(BenchError::PaperTable {
                message: format!("columns {:?}, expected {expected:?}", self.columns),
            });
        }
        for row in &self.rows {
            if let Some(column) = expected.iter().find(|column| !row.scores.contains_key(**column)) {
                return Err(BenchError::PaperTable {
                    message: format!("row {} lacks column {column}", row.model),
                });
            }
        }
        for name in [HUMAN_ROW, RANDOM_ROW, BEST_VLM_ROW] {
            if self.row(name).is_none() {
                return Err(BenchError::PaperTable { message: format!("no row {name}") });
            }
        }
        Ok(())
    }

    pub fn row(&self, model: &str) -> Option<&PaperRow> {
        self.rows.iter().find(|row| row.model == model)
    }
}

/// Where a row's numbers come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowSource {
    Ours,
    Paper,
}

/// One row of a table: a score in percent per column (`None`: no questions, or not in the paper).
#[derive(Clone, Debug, PartialEq)]
pub struct TableRow {
    pub model: String,
    pub source: RowSource,
    pub scores: Vec<Option<f64>>,
    /// Questions behind each score (our rows only).
    pub questions: Option<Vec<usize>>,
}

/// A table of scores in percent.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<TableRow>,
}

impl Table {
    /// Table 1: our row, then the paper's human, random and best-VLM rows.
    pub fn main(report: &ScoreReport, paper: &PaperTable, model: &str) -> Table {
        let columns: Vec<String> =
            TaskId::ALL.iter().map(|task| task.column().to_owned()).chain([AVG_COLUMN.to_owned()]).collect();
        let mut scores: Vec<Option<f64>> =
            TaskId::ALL.iter().map(|&task| report.score_pct(task, Setting::Global)).collect();
        scores.push(report.average_pct());
        let mut questions: Vec<usize> =
            TaskId::ALL.iter().map(|&task| report.cell(task, Setting::Global).questions).collect();
        questions.push(questions.iter().sum());
        let mut rows = vec![TableRow {
            model: model.to_owned(),
            source: RowSource::Ours,
            scores,
            questions: Some(questions),
        }];
        for (name, label) in [
            (HUMAN_ROW, HUMAN_ROW.to_owned()),
            (RANDOM_ROW, RANDOM_ROW.to_owned()),
            (BEST_VLM_ROW, format!("{BEST_VLM_ROW} (best VLM)")),
        ] {
            if let Some(row) = paper.row(name) {
                rows.push(TableRow {
                    model: label,
                    source: RowSource::Paper,
                    scores: columns.iter().map(|column| row.scores.get(column).copied()).collect(),
                    questions: None,
                });
            }
        }
        Table {
            title: "GST-Bench, global setting (%; ED, GP, Pos, Ori: mAcc; EDist: MRA; TDS, Traj: accuracy)"
                .to_owned(),
            columns,
            rows,
        }
    }

    /// Table 2 (GST-Bench-Local): ED and EDist under each setting; `None` when no question is in a local
    /// setting. Our rows per target kind (visual, semantic) that has local questions; the paper's rows are
    /// the semantic variants.
    pub fn local(report: &ScoreReport, paper: &PaperTable, model: &str) -> Option<Table> {
        if !report.has_local_settings() {
            return None;
        }
        let columns: Vec<String> = LOCAL_FAMILIES
            .iter()
            .flat_map(|(family, _, _)| Setting::ALL.iter().map(move |setting| format!("{family} {setting}")))
            .collect();
        let mut rows = Vec::new();
        for semantic in [false, true] {
            let kind = if semantic { "semantic" } else { "visual" };
            let tasks = LOCAL_FAMILIES
                .map(|(_, visual_task, semantic_task)| if semantic { semantic_task } else { visual_task });
            let has_local = tasks.iter().any(|&task| {
                Setting::ALL.iter().any(|&s| !s.is_global() && report.cell(task, s).questions > 0)
            });
            if !has_local {
                continue;
            }
            let cells: Vec<(TaskId, Setting)> = tasks
                .iter()
                .flat_map(|&task| Setting::ALL.iter().map(move |&setting| (task, setting)))
                .collect();
            rows.push(TableRow {
                model: format!("{model} ({kind})"),
                source: RowSource::Ours,
                scores: cells.iter().map(|&(task, setting)| report.score_pct(task, setting)).collect(),
                questions: Some(
                    cells.iter().map(|&(task, setting)| report.cell(task, setting).questions).collect(),
                ),
            });
        }
        for row in &paper.rows {
            let (Some(direction), Some(distance)) =
                (paper.local.direction.get(&row.model), paper.local.distance.get(&row.model))
            else {
                continue;
            };
            rows.push(TableRow {
                model: format!("{} (semantic)", row.model),
                source: RowSource::Paper,
                scores: direction.iter().chain(distance).map(|&score| Some(score)).collect(),
                questions: None,
            });
        }
        Some(Table {
            title: "GST-Bench-Local (%; ED: mAcc, EDist: MRA; by setting)".to_owned(),
            columns,
            rows,
        })
    }
}

impl fmt::Display for Table {
    /// Aligned text: a title line, a header, one line per row and, under our rows, their question counts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const QUESTIONS_LABEL: &str = "  questions";
        const MIN_CELL_WIDTH: usize = 6; // "100.00"
        let name_width =
            self.rows.iter().map(|row| row.model.chars().count()).chain([QUESTIONS_LABEL.len(), 5]).max();
        let name_width = name_width.unwrap_or(5);
        let widths: Vec<usize> =
            self.columns.iter().map(|column| column.chars().count().max(MIN_CELL_WIDTH)).collect();
        writeln!(f, "{}", self.title)?;
        write!(f, "{:<name_width$}", "model")?;
        for (column, width) in self.columns.iter().zip(&widths) {
            write!(f, "  {column:>width$}")?;
        }
        writeln!(f)?;
        for row in &self.rows {
            write!(f, "{:<name_width$}", row.model)?;
            for (score, width) in row.scores.iter().zip(&widths) {
                match score {
                    Some(score) => write!(f, "  {score:>width$.2}")?,
                    None => write!(f, "  {:>width$}", "-")?,
                }
            }
            writeln!(f)?;
            if let Some(questions) = &row.questions {
                write!(f, "{QUESTIONS_LABEL:<name_width$}")?;
                for (count, width) in questions.iter().zip(&widths) {
                    write!(f, "  {count:>width$}")?;
                }
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

/// A row's values keyed by column, in column order (cells without a value left out).
struct ColumnMap<'a, T> {
    columns: &'a [String],
    values: Vec<Option<T>>,
}

impl<T: Serialize> Serialize for ColumnMap<'_, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (column, value) in self.columns.iter().zip(&self.values) {
            if let Some(value) = value {
                map.serialize_entry(column, value)?;
            }
        }
        map.end()
    }
}

impl Serialize for Table {
    /// `{"title", "columns", "rows": [{"model", "source", "scores": {column: %}, "questions": {column: n}}]}`,
    /// the shape of the paper's table file plus provenance and question counts.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Row<'a> {
            model: &'a str,
            source: RowSource,
            scores: ColumnMap<'a, f64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            questions: Option<ColumnMap<'a, usize>>,
        }
        #[derive(Serialize)]
        struct Shape<'a> {
            title: &'a str,
            columns: &'a [String],
            rows: Vec<Row<'a>>,
        }
        let rows = self
            .rows
            .iter()
            .map(|row| Row {
                model: &row.model,
                source: row.source,
                scores: ColumnMap { columns: &self.columns, values: row.scores.clone() },
                questions: row.questions.as_ref().map(|questions| ColumnMap {
                    columns: &self.columns,
                    values: questions.iter().copied().map(Some).collect(),
                }),
            })
            .collect();
        Shape { title: &self.title, columns: &self.columns, rows }.serialize(serializer)
    }
}

/// Counts behind a score report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub questions: usize,
    pub predictions: usize,
    /// Questions without a prediction (scored 0).
    pub missing: usize,
    /// Predictions without a parseable answer (scored 0).
    pub unparseable: usize,
}

/// Everything `gst score` reports: the main table, the local table when there are local questions, and
/// the counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScoreTables {
    pub summary: Summary,
    pub main: Table,
    pub local: Option<Table>,
}

impl ScoreTables {
    pub fn new(report: &ScoreReport, paper: &PaperTable, model: &str) -> ScoreTables {
        ScoreTables {
            summary: Summary {
                questions: report.per_question.len(),
                predictions: report.predictions,
                missing: report.missing(),
                unparseable: report.unparseable(),
            },
            main: Table::main(report, paper, model),
            local: Table::local(report, paper, model),
        }
    }
}

impl fmt::Display for ScoreTables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.main)?;
        if let Some(local) = &self.local {
            writeln!(f)?;
            write!(f, "{local}")?;
        }
        let Summary { questions, predictions, missing, unparseable } = self.summary;
        writeln!(
            f,
            "\n{questions} questions, {predictions} predictions; scored 0: {missing} without a prediction, \
             {unparseable} without a parseable answer"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_paper_table_parses_and_the_best_vlm_is_the_best_zero_shot_row() -> Result<(), BenchError>
    {
        let paper = PaperTable::embedded()?;
        let average = |row: &PaperRow| row.scores.get(AVG_COLUMN).copied().unwrap_or(f64::NAN);
        let best = paper
            .rows
            .iter()
            .filter(|row| {
                ![HUMAN_ROW, RANDOM_ROW].contains(&row.model.as_str()) && !row.model.contains("GST-Train")
            })
            .max_by(|a, b| average(a).total_cmp(&average(b)))
            .map(|row| row.model.clone());
        assert_eq!(best.as_deref(), Some(BEST_VLM_ROW));
        assert_eq!(paper.row(RANDOM_ROW).and_then(|row| row.scores.get("EDist_v").copied()), Some(23.22));
        assert_eq!(paper.local.direction.get("GPT-5"), Some(&[31.09, 60.32, 65.61]));
        Ok(())
    }
}
