"""GST-Bench scoring, exactly as `gst score` scores (crates/core/src/extract.rs, crates/bench/src/metrics.rs).

Written by `gst export`; pure standard library, so that the harnesses (lmms-eval, VLMEvalKit) can import it
without extra packages. Every rule below mirrors the Rust code it names; the export's tests check that the
two give the same scores on the same predictions.
"""

import math

# ------------------------------------------------------------------------------------------------------
# The prompt (crates/vlm's e2e mode, the release's order).

def prompt_parts(texts, video, images):
    """The GST-Bench prompt as gst-vlm's e2e mode builds it: [(kind, value)] with kind "text", "video" or
    "image": text 0, the video, then text i followed by image i, then any remaining images; adjacent texts
    merged with a newline unless one has whitespace at the joint."""
    texts = list(texts or [])
    images = list(images or [])
    parts = []
    if texts:
        parts.append(("text", texts[0]))
    parts.append(("video", video))
    for i, text in enumerate(texts[1:], start=1):
        parts.append(("text", text))
        if i - 1 < len(images):
            parts.append(("image", images[i - 1]))
    for path in images[max(len(texts) - 1, 0):]:
        parts.append(("image", path))
    merged = []
    for kind, value in parts:
        if kind == "text" and merged and merged[-1][0] == "text":
            previous = merged[-1][1]
            glue = "" if (previous[-1:].isspace() or value[:1].isspace()) else "\n"
            merged[-1] = ("text", previous + glue + value)
        else:
            merged.append((kind, value))
    return merged


# ------------------------------------------------------------------------------------------------------
# Metrics (crates/bench/src/metrics.rs).

ANGLE_LADDER_DEG = [5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0, 45.0, 50.0]
POINT_LADDER = [40.0, 80.0, 120.0, 160.0, 200.0, 240.0, 280.0, 320.0, 360.0, 400.0]
POINT_MAX = 999


def mra_thresholds():
    """np.linspace(0.5, 0.95, 10), computed the way numpy computes it."""
    step = (0.95 - 0.5) / 9
    thresholds = [i * step + 0.5 for i in range(10)]
    thresholds[-1] = 0.95
    return thresholds


def mean_relative_accuracy(predicted, truth):
    if not math.isfinite(predicted):
        return 0.0
    if truth == 0.0:
        return 1.0 if predicted == 0.0 else 0.0
    relative_error = abs(predicted - truth) / truth
    thresholds = mra_thresholds()
    return sum(1 for theta in thresholds if relative_error <= 1.0 - theta) / len(thresholds)


def mean_accuracy(error, ladder):
    if not ladder:
        return 0.0
    return sum(1 for t in ladder if error <= t) / len(ladder)


def angle_error_deg(predicted, truth):
    difference = math.fmod(predicted - truth, 360.0)
    if difference < 0:
        difference += 360.0
    return min(difference, 360.0 - difference)


def parse_truth(kind, text):
    """The ground truth as the export writes it (GST's answer text)."""
    text = text.strip()
    if kind == "degrees":
        return int(text)
    if kind == "metres":
        return float(text)
    if kind == "point":
        inner = text[len("<point>"):-len("</point>")]
        x, y = inner.split()
        return (int(x), int(y))
    return text


def score_answer(kind, truth, predicted):
    """The score in [0, 1] of an extracted answer (None: nothing extracted) against the ground truth."""
    if predicted is None:
        return 0.0
    if kind == "degrees":
        return mean_accuracy(angle_error_deg(float(predicted), float(truth)), ANGLE_LADDER_DEG)
    if kind == "metres":
        return mean_relative_accuracy(predicted, truth)
    if kind == "point":
        error = math.hypot(predicted[0] - truth[0], predicted[1] - truth[1])
        return mean_accuracy(error, POINT_LADDER)
    return 1.0 if predicted == truth else 0.0


def score_prediction(kind, truth_text, prediction):
    """Extracts the answer of `kind` from the raw prediction and scores it."""
    return score_answer(kind, parse_truth(kind, truth_text), extract(kind, prediction or ""))


# ------------------------------------------------------------------------------------------------------
# Answer extraction (crates/core/src/extract.rs). Positions are character indices; the Rust code uses byte
# indices, which select the same substrings.

def _ascii_lower(text):
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def _find_ci(text, needle):
    at = _ascii_lower(text).find(needle)
    return None if at < 0 else at


def _rfind_ci(text, needle):
    at = _ascii_lower(text).rfind(needle)
    return None if at < 0 else at


def _focus(text):
    while True:
        start = _find_ci(text, "<think>")
        if start is None:
            break
        length = _find_ci(text[start:], "</think>")
        if length is None:
            text = text[:start]
        else:
            text = text[:start] + " " + text[start + length + len("</think>"):]
    opened = _rfind_ci(text, "<answer>")
    if opened is not None:
        inner = text[opened + len("<answer>"):]
        end = _find_ci(inner, "</answer>")
        return inner if end is None else inner[:end]
    return text


def _after_answer_keyword(text):
    at = _rfind_ci(text, "answer")
    return None if at is None else text[at + len("answer"):]


def _words(text):
    words = []
    start = None
    for i, c in enumerate(text + " "):
        alnum = c.isalnum() if i < len(text) else False
        if alnum and start is None:
            start = i
        elif not alnum and start is not None:
            words.append((text[start:i], start, i))
            start = None
    return words


def _option_letter(word, any_case):
    if len(word) != 1:
        return None
    c = word
    upper = c.upper() if c.isascii() else c
    if any_case:
        return upper if "A" <= upper <= "D" else None
    return upper if "A" <= c <= "D" else None


def _is_article(text, word):
    w, start, end = word
    before = text[:start].rstrip()
    starts_sentence = before == "" or before[-1] in ".!?:"
    rest = text[end:]
    stripped = rest.lstrip()
    followed_by_word = rest.startswith(" ") and stripped != "" and stripped[0].islower()
    return w == "A" and starts_sentence and followed_by_word


_FILLER_WORDS = ["is", "the", "correct", "final", "would", "be", "option", "choice", "my"]


def _single_distinct(letters):
    if not letters:
        return None
    first = letters[0]
    return first if all(letter == first for letter in letters) else None


def _extract_choice(text):
    words = _words(text)
    if len(words) == 1:
        letter = _option_letter(words[0][0], True)
        if letter is not None:
            return letter
    for keywords in (["answer"], ["option", "choice"]):
        at = None
        for k in range(len(words) - 1, -1, -1):
            if _ascii_lower(words[k][0]) in keywords:
                at = k
                break
        if at is not None:
            following = [w for w in words[at + 1:]]
            k = 0
            while k < len(following) and _ascii_lower(following[k][0]) in _FILLER_WORDS:
                k += 1
            if k < len(following):
                letter = _option_letter(following[k][0], True)
                if letter is not None:
                    return letter
    if words:
        first = words[0]
        prefix = text[:first[1]]
        if all(not c.isalnum() for c in prefix) and not _is_article(text, first):
            letter = _option_letter(first[0], False)
            if letter is not None:
                return letter
    parenthesised = [
        _option_letter(w[0], False)
        for w in words
        if text[:w[1]].endswith("(") and text[w[2]:].startswith(")")
    ]
    letter = _single_distinct([p for p in parenthesised if p is not None])
    if letter is not None:
        return letter
    standalone = [_option_letter(w[0], False) for w in words if not _is_article(text, w)]
    return _single_distinct([s for s in standalone if s is not None])


_MINUS_SIGNS = ["-", "\u2212", "\u2013"]
_LENGTH_UNITS = {
    "m": 1.0, "meter": 1.0, "meters": 1.0, "metre": 1.0, "metres": 1.0,
    "cm": 0.01, "centimeter": 0.01, "centimeters": 0.01, "centimetre": 0.01, "centimetres": 0.01,
    "mm": 0.001, "millimeter": 0.001, "millimeters": 0.001, "millimetre": 0.001, "millimetres": 0.001,
    "ft": 0.3048, "foot": 0.3048, "feet": 0.3048,
}


def _unit_after(rest):
    """'deg', a metres-per-unit factor, or None."""
    if rest[:1] in ("\u00b0", "\u00ba"):
        return "deg"
    rest = rest.lstrip()
    word = ""
    for c in rest:
        if not c.isalpha():
            break
        word += c
    word = word.lower()
    if word in ("deg", "degree", "degrees"):
        return "deg"
    return _LENGTH_UNITS.get(word)


def _is_digit(c):
    return "0" <= c <= "9"


def _numbers(text):
    """(value, start, end, unit) of every number in text, identifiers skipped."""
    numbers = []
    i = 0
    n = len(text)
    while i < n:
        if not _is_digit(text[i]):
            i += 1
            continue
        digits_start = i
        while i < n and _is_digit(text[i]):
            i += 1
        if i + 1 < n and text[i] == "." and _is_digit(text[i + 1]):
            i += 1
            while i < n and _is_digit(text[i]):
                i += 1
        end = i
        before = text[digits_start - 1] if digits_start > 0 else None
        if before is not None and (before.isalpha() or before in "_."):
            continue
        magnitude = float(text[digits_start:end])
        value, start = magnitude, digits_start
        if before is not None and (before in _MINUS_SIGNS or before == "+"):
            sign_start = digits_start - 1
            before_sign = text[sign_start - 1] if sign_start > 0 else None
            if before_sign is not None and before_sign.isalnum():
                value, start = magnitude, digits_start
            elif before == "+":
                value, start = magnitude, sign_start
            else:
                value, start = -magnitude, sign_start
        numbers.append((value, start, end, _unit_after(text[end:])))
    return numbers


def _pick_number(text, unit_fits):
    after = _after_answer_keyword(text)
    if after is not None:
        found = _numbers(after)
        if found:
            return found[0]
    found = _numbers(text)
    for number in reversed(found):
        if number[3] is not None and unit_fits(number[3]):
            return number
    return found[-1] if found else None


def _round_half_away(value):
    return math.floor(value + 0.5) if value >= 0 else -math.floor(-value + 0.5)


def _extract_degrees(text):
    number = _pick_number(text, lambda unit: unit == "deg")
    if number is None or not math.isfinite(number[0]):
        return None
    value = number[0]
    if not (-180.0 <= value <= 180.0):
        shifted = math.fmod(value + 180.0, 360.0)
        if shifted < 0:
            shifted += 360.0
        value = shifted - 180.0
    return int(_round_half_away(value))


def _extract_metres(text):
    number = _pick_number(text, lambda unit: unit != "deg")
    if number is None:
        return None
    unit = number[3]
    metres = number[0] * unit if unit is not None and unit != "deg" else number[0]
    return metres if math.isfinite(metres) and metres >= 0.0 else None


def _pairs(text):
    values = _numbers(text)
    pairs = []
    for a, b in zip(values, values[1:]):
        between = text[a[2]:b[1]]
        if all(c.isspace() or c in ",;yY=:" for c in between):
            pairs.append((a[0], b[0]))
    return pairs


def _point_from(x, y):
    def coordinate(value):
        rounded = _round_half_away(value)
        if 0.0 <= rounded <= POINT_MAX + 1.0:
            return min(int(rounded), POINT_MAX)
        return None

    cx, cy = coordinate(x), coordinate(y)
    return None if cx is None or cy is None else (cx, cy)


def _extract_point(text):
    opened = _rfind_ci(text, "<point>")
    if opened is not None:
        inner = text[opened + len("<point>"):]
        end = _find_ci(inner, "</point>")
        inner = inner if end is None else inner[:end]
        values = _numbers(inner)
        return _point_from(values[0][0], values[1][0]) if len(values) >= 2 else None
    after = _after_answer_keyword(text)
    if after is not None:
        found = _pairs(after)
        if found:
            return _point_from(*found[0])
    found = _pairs(text)
    return _point_from(*found[-1]) if found else None


def extract(kind, text):
    """The answer of `kind` ('choice', 'degrees', 'metres', 'point') in a model's raw output, or None."""
    text = _focus(text)
    if kind == "choice":
        return _extract_choice(text)
    if kind == "degrees":
        return _extract_degrees(text)
    if kind == "metres":
        return _extract_metres(text)
    if kind == "point":
        return _extract_point(text)
    raise ValueError("unknown answer kind %r" % (kind,))
