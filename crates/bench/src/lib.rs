//! GST-Bench scoring: the answer a model's raw output gives, the paper's metrics, and its tables.
//!
//! Scoring mirrors how GST-Bench scores a VLM: each question's prediction is the model's raw text, from
//! which [`extract`] takes an answer of the task's kind (tolerating verbose output); [`metrics`] scores it
//! against the ground truth (MRA exactly as VSI-Bench's evaluation code, mAcc over ladders documented
//! there, accuracy for options); [`score`] averages per paper column and setting; [`table`] puts our row
//! beside the paper's human, random and best-VLM rows. The mAcc ladders are ours (the release does not
//! publish its own): they are chosen so that uniform random guessing lands on the paper's random row, and
//! `tests/scoring.rs` checks that it does.

pub mod draw;
pub mod error;
pub mod export;
pub mod extract;
pub mod generate;
pub mod import;
pub mod metrics;
pub mod overlap;
pub mod score;
pub mod table;
pub mod texts;

pub use error::BenchError;
pub use extract::extract;
pub use score::{Cell, Outcome, Prediction, Predictions, QuestionScore, ScoreReport, score};
pub use table::{PaperTable, ScoreTables, Summary, Table, TableRow};
