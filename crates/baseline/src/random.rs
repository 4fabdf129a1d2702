//! Uniform random guessing in each task's answer format: the chance row of the tables.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use gst_core::question::POINT_MAX;
use gst_core::{Answer, AnswerKind};
use gst_io::gst::QuestionFile;

use crate::{AnswerContext, Answerer, BaselineError, Reply};

/// Guesses uniformly: angles in [-180, 180], distances in [0, 11] m, points in [0, 999]², letters A–D.
/// Each question's guess depends only on the seed and its uid, so it does not depend on the order or
/// the thread count questions are answered in.
#[derive(Clone, Copy, Debug)]
pub struct RandomAnswerer {
    pub seed: u64,
}

/// Largest distance guessed, metres (the scale of GST's answers).
pub const MAX_GUESS_M: f64 = 11.0;

impl RandomAnswerer {
    pub fn guess(&self, kind: AnswerKind, uid: &str) -> Answer {
        // FNV-1a of the uid, mixed with the seed.
        let hash = gst_core::stable_hash(uid);
        let mut rng = ChaCha8Rng::seed_from_u64(hash ^ self.seed.rotate_left(32));
        match kind {
            AnswerKind::Degrees => Answer::Degrees(rng.gen_range(-180..=180)),
            AnswerKind::Metres => Answer::Metres((rng.gen_range(0.0..MAX_GUESS_M) * 10.0).round() / 10.0),
            AnswerKind::Point => Answer::Point([rng.gen_range(0..=POINT_MAX), rng.gen_range(0..=POINT_MAX)]),
            AnswerKind::Choice => Answer::Choice(['A', 'B', 'C', 'D'][rng.gen_range(0..4)]),
        }
    }
}

impl Answerer for RandomAnswerer {
    fn name(&self) -> String {
        "random".into()
    }

    fn answer(&self, question: &QuestionFile, _context: &AnswerContext<'_>) -> Result<Reply, BaselineError> {
        let question = &question.question;
        Ok(Reply::new(self.guess(question.task.answer_kind(), &question.uid).to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guesses_are_valid_reproducible_and_spread() {
        let random = RandomAnswerer { seed: 3 };
        for kind in [AnswerKind::Degrees, AnswerKind::Metres, AnswerKind::Point, AnswerKind::Choice] {
            let guesses: Vec<Answer> = (0..400).map(|k| random.guess(kind, &format!("q{k}"))).collect();
            for guess in &guesses {
                assert!(guess.is_valid(), "{guess:?}");
                assert_eq!(guess.kind(), kind);
                // The text round-trips through the format's parser.
                assert_eq!(Answer::parse(kind, &guess.to_string()), Some(*guess));
            }
            assert_eq!(random.guess(kind, "q7"), guesses[7]);
            let distinct: std::collections::BTreeSet<String> =
                guesses.iter().map(|g| g.to_string()).collect();
            assert!(distinct.len() >= 4, "{kind:?}: {} distinct guesses", distinct.len());
        }
        let letters: Vec<Answer> =
            (0..400).map(|k| random.guess(AnswerKind::Choice, &format!("q{k}"))).collect();
        for letter in ['A', 'B', 'C', 'D'] {
            let share = letters.iter().filter(|a| **a == Answer::Choice(letter)).count();
            assert!((70..=130).contains(&share), "{letter}: {share} of 400");
        }
        assert_ne!(
            RandomAnswerer { seed: 4 }.guess(AnswerKind::Degrees, "q1"),
            random.guess(AnswerKind::Degrees, "q1")
        );
    }
}
