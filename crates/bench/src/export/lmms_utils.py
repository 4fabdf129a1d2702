"""lmms-eval task functions for a GST benchmark exported by `gst export --format lmms-eval`.

Each document (a line of data/*.jsonl) is one GST question: `uid`, `task`, `column` (the paper's column,
ED_v ... Traj), `setting` (global, local_video, local_image), `kind` (choice, degrees, metres, point),
`answer` (the ground truth as text), `texts` (the released prompt pieces), `video` and `images` (paths
relative to this folder). Scores are `gst score`'s: see gst_score.py, which mirrors the Rust scorer.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import gst_score  # noqa: E402  (the scorer next to this file)


def _media(relative):
    return os.path.join(_HERE, relative)


def gst_doc_to_visual(doc):
    """The exploration video, then the question's images in the release's order."""
    return [_media(doc["video"])] + [_media(image) for image in (doc.get("images") or [])]


def _parts(doc):
    """The prompt in the release's order (gst_score.prompt_parts), with paths inside this folder."""
    images = [_media(image) for image in (doc.get("images") or [])]
    return gst_score.prompt_parts(doc.get("texts"), _media(doc["video"]), images)


def gst_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    """The prompt's texts in order (for models that take the visuals first and one text after them)."""
    kwargs = lmms_eval_specific_kwargs or {}
    text = "".join(
        value if i == 0 or value[:1].isspace() else "\n" + value
        for i, value in enumerate(v for k, v in _parts(doc) if k == "text")
    )
    return kwargs.get("pre_prompt", "") + text + kwargs.get("post_prompt", "")


def gst_doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    """The interleaved chat message: texts, the video and images exactly in the release's order."""
    content = []
    for kind, value in _parts(doc):
        if kind == "text":
            content.append({"type": "text", "text": value})
        else:
            content.append({"type": kind, "url": value})
    return [{"role": "user", "content": content}]


def gst_doc_to_target(doc):
    return doc["answer"]


def gst_process_results(doc, results):
    prediction = results[0] if results else ""
    score = gst_score.score_prediction(doc["kind"], doc["answer"], prediction)
    return {
        "gst_score": {
            "uid": doc["uid"],
            "column": doc["column"],
            "setting": doc["setting"],
            "prediction": prediction,
            "score": score,
        }
    }


def gst_aggregate(results):
    """The column's score in percent, as `gst score` prints it (mean over the subtask's questions)."""
    if not results:
        return 0.0
    return 100.0 * sum(result["score"] for result in results) / len(results)
