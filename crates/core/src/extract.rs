//! Answer extraction from raw model output, shared by the scorer (`gst-bench`) and the answerers (`gst-vlm`,
//! `gst-baseline`), so that what an answerer reports and what the scorer counts are the same reading.
//!
//! Models rarely answer in the bare format GST asks for: they write "The answer is B.", "-134°",
//! "about 3.5 m", "(391, 698)", or reason first and answer last. [`extract`] finds the answer of the
//! expected kind in such text and returns `None` when there is none (the scorer counts that as wrong).
//!
//! The rules, in order, for every kind:
//! 1. `<think>…</think>` is dropped, and an `<answer>…</answer>` block, when present, is all that is read
//!    (the last one, as reasoning models write it at the end).
//! 2. An explicit answer wins: the first value after the last "answer" ("The answer is B", "Answer: -134").
//! 3. Then the kind's own marks: a lone option letter, "option B", "(B)"; a number with a degree sign or
//!    "degrees"; a number with a length unit (cm, mm and feet are converted to metres); `<point>x y</point>`
//!    or a pair of numbers separated only by a comma, a semicolon, spaces or "y =".
//! 4. Otherwise the last value of the kind in the text, as models conclude with their answer.
//!
//! Signs are read from "-", "+", "−" (U+2212) and "–" (U+2013, which the GST prompt itself uses); a number
//! glued to a letter or an underscore ("video3", "image_02") is an identifier, not a value. Angles outside
//! [-180, 180] are wrapped into it (the metric wraps anyway); points must lie in [0, 999] after rounding
//! (1000 is taken as 999); distances must not be negative.

use crate::question::POINT_MAX;
use crate::{Answer, AnswerKind};

/// Extracts an answer of `kind` from a model's raw output; `None` when nothing parseable is there.
pub fn extract(kind: AnswerKind, text: &str) -> Option<Answer> {
    let text = focus(text);
    match kind {
        AnswerKind::Choice => extract_choice(&text).map(Answer::Choice),
        AnswerKind::Degrees => extract_degrees(&text),
        AnswerKind::Metres => extract_metres(&text),
        AnswerKind::Point => extract_point(&text),
    }
}

/// Drops `<think>` blocks and narrows to the last `<answer>` block, if any.
fn focus(text: &str) -> String {
    let mut text = text.to_owned();
    while let Some(start) = find_ignore_case(&text, "<think>") {
        match find_ignore_case(&text[start..], "</think>") {
            Some(length) => text.replace_range(start..start + length + "</think>".len(), " "),
            None => text.truncate(start),
        }
    }
    if let Some(open) = rfind_ignore_case(&text, "<answer>") {
        let inner = &text[open + "<answer>".len()..];
        let inner = find_ignore_case(inner, "</answer>").map_or(inner, |end| &inner[..end]);
        return inner.to_owned();
    }
    text
}

fn find_ignore_case(text: &str, needle: &str) -> Option<usize> {
    text.to_ascii_lowercase().find(needle)
}

fn rfind_ignore_case(text: &str, needle: &str) -> Option<usize> {
    text.to_ascii_lowercase().rfind(needle)
}

/// Where to look for an explicit answer: the text after the last "answer", if there is one.
fn after_answer_keyword(text: &str) -> Option<&str> {
    rfind_ignore_case(text, "answer").map(|at| &text[at + "answer".len()..])
}

// ---------------------------------------------------------------------------------------------------------
// Option letters.

/// A word of the text: a maximal run of alphanumeric characters, with its byte span.
#[derive(Clone, Copy, Debug)]
struct Word<'a> {
    text: &'a str,
    start: usize,
    end: usize,
}

fn words(text: &str) -> Vec<Word<'_>> {
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                words.push(Word { text: &text[s..i], start: s, end: i });
                start = None;
            }
            _ => {}
        }
    }
    words
}

fn option_letter(word: &str, any_case: bool) -> Option<char> {
    let mut chars = word.chars();
    let c = chars.next()?;
    if chars.next().is_some() {
        return None;
    }
    let upper = c.to_ascii_uppercase();
    let allowed = if any_case { ('A'..='D').contains(&upper) } else { ('A'..='D').contains(&c) };
    allowed.then_some(upper)
}

/// "A" that starts a sentence and is followed by a lower-case word is the article ("A good guess is …"),
/// not option A ("Either A or B").
fn is_article(text: &str, word: &Word<'_>) -> bool {
    let before = text[..word.start].trim_end();
    let starts_sentence = before.is_empty() || before.ends_with(['.', '!', '?', ':']);
    let rest = &text[word.end..];
    let followed_by_word =
        rest.starts_with(' ') && rest.trim_start().chars().next().is_some_and(char::is_lowercase);
    word.text == "A" && starts_sentence && followed_by_word
}

/// Words that may stand between "answer"/"option" and the letter ("the answer is option (B)").
const FILLER_WORDS: [&str; 9] = ["is", "the", "correct", "final", "would", "be", "option", "choice", "my"];

fn extract_choice(text: &str) -> Option<char> {
    let words = words(text);
    // A bare letter, possibly dressed: "B", "(B)", "B.", "**B**".
    if let [word] = words.as_slice()
        && let Some(letter) = option_letter(word.text, true)
    {
        return Some(letter);
    }
    // "answer is B", "Answer: b", "option C", "choice (D)": after the last such keyword.
    for keywords in [&["answer"][..], &["option", "choice"][..]] {
        let keyword_at = words.iter().rposition(|w| keywords.contains(&w.text.to_ascii_lowercase().as_str()));
        if let Some(at) = keyword_at {
            let following = words[at + 1..]
                .iter()
                .skip_while(|w| FILLER_WORDS.contains(&w.text.to_ascii_lowercase().as_str()))
                .take(1);
            if let Some(letter) = following.filter_map(|w| option_letter(w.text, true)).next() {
                return Some(letter);
            }
        }
    }
    // Leading letter: "B. The second map", "C) …".
    if let Some(first) = words.first() {
        let prefix = &text[..first.start];
        if prefix.chars().all(|c| !c.is_alphanumeric())
            && !is_article(text, first)
            && let Some(letter) = option_letter(first.text, false)
        {
            return Some(letter);
        }
    }
    // "(B)" anywhere, then any standalone capital A–D, when only one letter is named.
    let parenthesised: Vec<char> = words
        .iter()
        .filter(|w| text[..w.start].ends_with('(') && text[w.end..].starts_with(')'))
        .filter_map(|w| option_letter(w.text, false))
        .collect();
    if let Some(letter) = single_distinct(&parenthesised) {
        return Some(letter);
    }
    let standalone: Vec<char> =
        words.iter().filter(|w| !is_article(text, w)).filter_map(|w| option_letter(w.text, false)).collect();
    single_distinct(&standalone)
}

fn single_distinct(letters: &[char]) -> Option<char> {
    let first = *letters.first()?;
    letters.iter().all(|&letter| letter == first).then_some(first)
}

// ---------------------------------------------------------------------------------------------------------
// Numbers.

/// A number in the text with its byte span and the unit written after it, if any.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Number {
    value: f64,
    start: usize,
    end: usize,
    unit: Option<Unit>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Degrees,
    /// A length; the factor converts to metres.
    Length(LengthUnit),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LengthUnit {
    Metres,
    Centimetres,
    Millimetres,
    Feet,
}

impl LengthUnit {
    fn metres_per_unit(self) -> f64 {
        match self {
            LengthUnit::Metres => 1.0,
            LengthUnit::Centimetres => 0.01,
            LengthUnit::Millimetres => 0.001,
            LengthUnit::Feet => 0.3048,
        }
    }
}

const MINUS_SIGNS: [char; 3] = ['-', '\u{2212}', '\u{2013}'];

/// Every number in `text`, in order. Identifiers ("video3", "image_02") are skipped.
fn numbers(text: &str) -> Vec<Number> {
    let bytes = text.as_bytes();
    let mut numbers = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let digits_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i + 1 < bytes.len() && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit() {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
        }
        let end = i;
        let before = text[..digits_start].chars().next_back();
        if before.is_some_and(|c| c.is_alphabetic() || c == '_' || c == '.') {
            continue;
        }
        let Ok(magnitude) = text[digits_start..end].parse::<f64>() else { continue };
        let (value, start) = match before {
            Some(sign) if MINUS_SIGNS.contains(&sign) || sign == '+' => {
                let sign_start = digits_start - sign.len_utf8();
                let before_sign = text[..sign_start].chars().next_back();
                if before_sign.is_some_and(char::is_alphanumeric) {
                    (magnitude, digits_start)
                } else if sign == '+' {
                    (magnitude, sign_start)
                } else {
                    (-magnitude, sign_start)
                }
            }
            _ => (magnitude, digits_start),
        };
        numbers.push(Number { value, start, end, unit: unit_after(&text[end..]) });
    }
    numbers
}

/// The unit written right after a number ("°", " degrees", "m", " meters", " cm", " ft").
fn unit_after(rest: &str) -> Option<Unit> {
    if rest.starts_with(['°', 'º']) {
        return Some(Unit::Degrees);
    }
    let rest = rest.trim_start();
    let word: String = rest.chars().take_while(|c| c.is_alphabetic()).collect::<String>().to_lowercase();
    let unit = match word.as_str() {
        "deg" | "degree" | "degrees" => Unit::Degrees,
        "m" | "meter" | "meters" | "metre" | "metres" => Unit::Length(LengthUnit::Metres),
        "cm" | "centimeter" | "centimeters" | "centimetre" | "centimetres" => {
            Unit::Length(LengthUnit::Centimetres)
        }
        "mm" | "millimeter" | "millimeters" | "millimetre" | "millimetres" => {
            Unit::Length(LengthUnit::Millimetres)
        }
        "ft" | "foot" | "feet" => Unit::Length(LengthUnit::Feet),
        _ => return None,
    };
    Some(unit)
}

/// The number a text gives as its answer: the first after "answer", else the last with a fitting unit,
/// else the last one.
fn pick_number(text: &str, unit_fits: impl Fn(Option<Unit>) -> bool) -> Option<Number> {
    if let Some(after) = after_answer_keyword(text)
        && let Some(first) = numbers(after).into_iter().next()
    {
        return Some(first);
    }
    let all = numbers(text);
    all.iter().rev().find(|number| number.unit.is_some() && unit_fits(number.unit)).or(all.last()).copied()
}

fn extract_degrees(text: &str) -> Option<Answer> {
    let number = pick_number(text, |unit| unit == Some(Unit::Degrees))?;
    if !number.value.is_finite() {
        return None;
    }
    // Wrap into [-180, 180]; 180 and -180 are the same heading and both stay as written.
    let wrapped = if (-180.0..=180.0).contains(&number.value) {
        number.value
    } else {
        (number.value + 180.0).rem_euclid(360.0) - 180.0
    };
    Some(Answer::Degrees(wrapped.round() as i32))
}

fn extract_metres(text: &str) -> Option<Answer> {
    let number = pick_number(text, |unit| matches!(unit, Some(Unit::Length(_))))?;
    let metres = match number.unit {
        Some(Unit::Length(unit)) => number.value * unit.metres_per_unit(),
        _ => number.value,
    };
    (metres.is_finite() && metres >= 0.0).then_some(Answer::Metres(metres))
}

// ---------------------------------------------------------------------------------------------------------
// Points.

fn extract_point(text: &str) -> Option<Answer> {
    if let Some(open) = rfind_ignore_case(text, "<point>") {
        let inner = &text[open + "<point>".len()..];
        let inner = find_ignore_case(inner, "</point>").map_or(inner, |end| &inner[..end]);
        let values = numbers(inner);
        return match values.as_slice() {
            [x, y, ..] => point_from(x.value, y.value),
            _ => None,
        };
    }
    if let Some(after) = after_answer_keyword(text)
        && let Some(&(x, y)) = pairs(after).first()
    {
        return point_from(x, y);
    }
    let &(x, y) = pairs(text).last()?;
    point_from(x, y)
}

/// Consecutive numbers separated only by spaces, a comma or semicolon, or a "y =" / "y:" label.
fn pairs(text: &str) -> Vec<(f64, f64)> {
    let values = numbers(text);
    values
        .windows(2)
        .filter(|pair| {
            let between = &text[pair[0].end..pair[1].start];
            between.chars().all(|c| c.is_whitespace() || matches!(c, ',' | ';' | 'y' | 'Y' | '=' | ':'))
        })
        .map(|pair| (pair[0].value, pair[1].value))
        .collect()
}

fn point_from(x: f64, y: f64) -> Option<Answer> {
    let coordinate = |value: f64| {
        let rounded = value.round();
        (rounded >= 0.0 && rounded <= f64::from(POINT_MAX) + 1.0).then(|| (rounded as u32).min(POINT_MAX))
    };
    Some(Answer::Point([coordinate(x)?, coordinate(y)?]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(text: &str) -> Option<char> {
        match extract(AnswerKind::Choice, text) {
            Some(Answer::Choice(letter)) => Some(letter),
            _ => None,
        }
    }

    #[test]
    fn option_letters() {
        for (text, expected) in [
            ("B", 'B'),
            ("The answer is B.", 'B'),
            ("(B)", 'B'),
            ("Option B", 'B'),
            ("b", 'B'),
            ("**C**", 'C'),
            ("D. The fourth map shows an L-shaped corridor.", 'D'),
            ("Answer: c", 'C'),
            ("The correct answer is option (A).", 'A'),
            ("A", 'A'),
            ("A.", 'A'),
            ("A good match is the third map, (C).", 'C'),
            ("After watching the video, I believe the layout matches image C best.", 'C'),
            ("<think>Maybe A or B... the rooms line up with D</think><answer>D</answer>", 'D'),
            ("Option A has too many rooms; the answer is B", 'B'),
        ] {
            assert_eq!(choice(text), Some(expected), "{text:?}");
        }
        for garbage in
            ["", "I cannot tell.", "E", "None of the above", "Either A or B.", "A video of a house"]
        {
            assert_eq!(choice(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn angles() {
        let degrees = |text: &str| extract(AnswerKind::Degrees, text);
        for (text, expected) in [
            ("-134", -134),
            ("-134°", -134),
            ("\u{2212}134 degrees", -134),
            ("\u{2013}134", -134),
            ("+45", 45),
            ("The object is at about 45° to my left.", 45),
            ("Taking 0° as my heading, the object is at -90°.", -90),
            ("The answer is -134. It is roughly 3 m behind me.", -134),
            ("270", -90),
            ("180", 180),
            ("-180", -180),
            ("12.6", 13),
            ("<answer>-30</answer>", -30),
        ] {
            assert_eq!(degrees(text), Some(Answer::Degrees(expected)), "{text:?}");
        }
        for garbage in ["", "left", "I don't know", "behind me", "video3_obj"] {
            assert_eq!(degrees(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn distances() {
        let metres = |text: &str| match extract(AnswerKind::Metres, text) {
            Some(Answer::Metres(m)) => Some(m),
            _ => None,
        };
        for (text, expected) in [
            ("3.5", 3.5),
            ("about 3.5 m", 3.5),
            ("3.5 meters", 3.5),
            ("3.5m.", 3.5),
            ("13.2", 13.2),
            ("350 cm", 3.5),
            ("10 feet", 3.048),
            ("It took 2 minutes of video; the object is 4.2 metres away.", 4.2),
            ("Answer: 6", 6.0),
        ] {
            let got = metres(text);
            assert!(got.is_some_and(|m| (m - expected).abs() < 1e-9), "{text:?} gave {got:?}");
        }
        for garbage in ["", "far away", "-3.5", "a few metres"] {
            assert_eq!(metres(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn points() {
        let point = |text: &str| extract(AnswerKind::Point, text);
        for text in [
            "<point>391 698</point>",
            "<POINT>391, 698</POINT>",
            "(391, 698)",
            "[391,698]",
            "x = 391, y = 698",
            "391 698",
            "I am near the sofa. My answer is (391, 698).",
            "The top-down image is 640x512; I am at (391.2, 697.8).",
        ] {
            assert_eq!(point(text), Some(Answer::Point([391, 698])), "{text:?}");
        }
        assert_eq!(point("(1000, 0)"), Some(Answer::Point([999, 0])));
        for garbage in
            ["", "in the kitchen", "(391)", "<point>391</point>", "(-5, 20)", "(1200, 30)", "image_02 3"]
        {
            assert_eq!(point(garbage), None, "{garbage:?}");
        }
    }
}
