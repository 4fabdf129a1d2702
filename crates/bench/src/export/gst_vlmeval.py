"""VLMEvalKit dataset for a GST benchmark exported by `gst export --format vlmevalkit`.

The folder holds GST_Bench.tsv (the global setting) and GST_Bench_Local.tsv (GST-Bench-Local's settings),
one row per question: VLMEvalKit's video columns `index`, `question`, `video` (the path under this folder
without `.mp4`), and ours: `uid`, `texts` and `images` (JSON lists: the released prompt pieces and the
option/current-view images, interleaved as the release orders them), `task`, `column`, `setting`, `kind`,
`metric`, `answer` (the ground truth as text), `scene`.

`GSTBench` is a `VideoBaseDataset` (vlmeval.dataset.video_base): `build_prompt` gives the interleaved
message (the video as one `video` part for video LLMs, else `nframe` frames), `evaluate` scores a
prediction table (xlsx, tsv, csv or json) exactly as `gst score` does (gst_score.py, beside this file) and
returns the paper's columns and Avg.

VLMEvalKit only builds datasets it knows, so `register()` adds `GSTBench` to `vlmeval.dataset`. Run this
file instead of VLMEvalKit's run.py, with run.py's arguments:

    python gst_vlmeval.py --data GST_Bench --model MODEL --base-url http://localhost:8000/v1 --key none

or `--config` naming `"class": "GSTBench"` (with `dataset` and `nframe`) under `data`. Frames per video
for models without video input: GST_NFRAME (default 32), or `nframe`/`fps` in the config. The datasets
are those of the folder this file is in (GST_VLMEVAL_DIR names another export).
"""

import json
import math
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import gst_score  # noqa: E402  (the scorer next to this file)
from vlmeval.dataset.video_base import VideoBaseDataset  # noqa: E402

DATASETS = ("GST_Bench", "GST_Bench_Local")
# The paper's column order (crates/core's TaskId::ALL), for the tables.
COLUMNS = ("ED_v", "EDist_v", "GP_v", "ED_s", "EDist_s", "GP_s", "Pos", "Ori", "TDS_E", "TDS_M", "TDS_H", "Traj")
SETTINGS = ("global", "local_video", "local_image")
DEFAULT_NFRAME = int(os.environ.get("GST_NFRAME", "32"))


def _root():
    return os.path.abspath(os.environ.get("GST_VLMEVAL_DIR", _HERE))


def _read_table(path):
    """Every cell as text (pandas), so that answers and predictions keep the text they were written with."""
    import pandas as pd

    suffix = path.rsplit(".", 1)[-1].lower()
    if suffix == "xlsx":
        table = pd.read_excel(path, dtype=str, keep_default_na=False)
    elif suffix == "tsv":
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    elif suffix == "csv":
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    elif suffix == "json":
        table = pd.read_json(path, dtype=False)
    else:
        raise ValueError("%s: unknown prediction table format (xlsx, tsv, csv or json)" % path)
    return table.fillna("")


class GSTBench(VideoBaseDataset):
    MODALITY = "VIDEO"
    TYPE = "Video-VQA"

    def __init__(self, dataset="GST_Bench", pack=False, nframe=DEFAULT_NFRAME, fps=-1):
        if dataset not in DATASETS:
            raise ValueError("GSTBench serves %s, not %r" % (", ".join(DATASETS), dataset))
        if fps > 0:
            nframe = 0
        super().__init__(dataset=dataset, pack=pack, nframe=nframe, fps=fps)

    @classmethod
    def supported_datasets(cls):
        return [name for name in DATASETS if os.path.isfile(os.path.join(_root(), name + ".tsv"))]

    def prepare_dataset(self, dataset):
        data_file = os.path.join(_root(), dataset + ".tsv")
        if not os.path.isfile(data_file):
            raise FileNotFoundError("%s: not in this export (it has no questions in that setting)" % data_file)
        return dict(root=_root(), data_file=data_file)

    def _row(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        return line

    def build_prompt(self, line, video_llm=False):
        """The message in the release's order: text 0, the video, then text i followed by image i."""
        line = self._row(line)
        root = self.data_root
        texts = json.loads(line["texts"])
        images = [os.path.join(root, image) for image in json.loads(line["images"])]
        video = os.path.join(root, line["video_path"])
        message = []
        for kind, value in gst_score.prompt_parts(texts, video, images):
            if kind != "video":
                message.append(dict(type=kind, value=value))
            elif video_llm:
                message.append(dict(type="video", value=value))
            else:
                frames = self.save_video_frames(line["video"])
                message.extend(dict(type="image", value=frame) for frame in frames)
        return message

    def _truth(self):
        """uid -> (column, setting, kind, answer) from this dataset's TSV, read as text."""
        table = _read_table(self.data_file)
        return {
            row["uid"]: (row["column"], row["setting"], row["kind"], row["answer"])
            for row in table.to_dict("records")
        }

    def score_predictions(self, eval_file):
        """Scores of a prediction table: {(column, setting): [score, ...]}. The table must answer every
        question of the dataset exactly once (by `uid`, else by `index`)."""
        truth = self._truth()
        uid_of_index = {str(index): uid for index, uid in zip(self.data["index"], self._uids())}
        table = _read_table(eval_file)
        if "prediction" not in table:
            raise ValueError("%s: no prediction column" % eval_file)
        seen = {}
        scores = {}
        for row_number, row in enumerate(table.to_dict("records"), start=2):
            uid = str(row.get("uid", "")).strip() or uid_of_index.get(str(row.get("index", "")).strip())
            if not uid:
                raise ValueError("%s, row %d: neither a uid nor a known index" % (eval_file, row_number))
            if uid not in truth:
                raise ValueError("%s, row %d: no question of %s has uid %r" % (eval_file, row_number,
                                                                               self.dataset_name, uid))
            if uid in seen:
                raise ValueError("%s, row %d: question %r was already predicted in row %d" % (
                    eval_file, row_number, uid, seen[uid]))
            seen[uid] = row_number
            column, setting, kind, answer = truth[uid]
            prediction = row["prediction"]
            if not isinstance(prediction, str):
                prediction = "" if prediction is None or (isinstance(prediction, float) and math.isnan(prediction)) \
                    else str(prediction)
            scores.setdefault((column, setting), []).append(gst_score.score_prediction(kind, answer, prediction))
        missing = [uid for uid in truth if uid not in seen]
        if missing:
            raise ValueError("%s: question %r has no prediction (%d questions have none)" % (
                eval_file, missing[0], len(missing)))
        return scores

    def _uids(self):
        return [str(uid) for uid in self.data["uid"]]

    def evaluate(self, eval_file, **judge_kwargs):
        """The paper's table as `gst score` prints it: per column and setting the mean score in percent,
        and for the global setting the Avg (an unweighted mean of the columns). Also written beside
        `eval_file` as `<stem>_gst_score.json`."""
        import pandas as pd

        scores = self.score_predictions(eval_file)
        def order(key):
            column, setting = key
            return (SETTINGS.index(setting) if setting in SETTINGS else len(SETTINGS),
                    COLUMNS.index(column) if column in COLUMNS else len(COLUMNS), column)

        rows = []
        for column, setting in sorted(scores, key=order):
            values = scores[(column, setting)]
            rows.append(dict(column=column, setting=setting, questions=len(values),
                             score=100.0 * sum(values) / len(values)))
        global_rows = [row for row in rows if row["setting"] == "global"]
        if global_rows:
            rows.append(dict(column="Avg", setting="global", questions=sum(r["questions"] for r in global_rows),
                             score=sum(r["score"] for r in global_rows) / len(global_rows)))
        stem = eval_file.rsplit(".", 1)[0]
        with open(stem + "_gst_score.json", "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
        return pd.DataFrame(rows)


def register():
    """Makes `GSTBench` and its dataset names known to VLMEvalKit (build_dataset and --config)."""
    import vlmeval.dataset as datasets

    datasets.GSTBench = GSTBench
    for name in ("DATASET_CLASSES", "VIDEO_DATASET"):
        classes = getattr(datasets, name, None)
        if isinstance(classes, list) and GSTBench not in classes:
            classes.append(GSTBench)
    supported = getattr(datasets, "SUPPORTED_DATASETS", None)
    if isinstance(supported, list):
        supported.extend(name for name in GSTBench.supported_datasets() if name not in supported)
    return GSTBench


def _run_main():
    """VLMEvalKit's run.py: `vlmeval.run` (the PyPI package ms-vlmeval) or run.py of the checkout that
    the imported vlmeval comes from (VLMEVALKIT_RUN overrides it)."""
    import runpy

    explicit = os.environ.get("VLMEVALKIT_RUN")
    if not explicit:
        try:
            import vlmeval.run as run

            if hasattr(run, "load_env"):
                run.load_env()
            return run.main()
        except ImportError:
            pass
    import vlmeval

    path = explicit or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(vlmeval.__file__))), "run.py")
    if not os.path.isfile(path):
        raise SystemExit("cannot find VLMEvalKit's run.py (set VLMEVALKIT_RUN to its path)")
    sys.argv[0] = path
    runpy.run_path(path, run_name="__main__")


if __name__ == "__main__":
    register()
    _run_main()
