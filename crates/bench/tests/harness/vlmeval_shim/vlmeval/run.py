"""vlmeval.run's main for `--data NAME... --model NAME --work-dir DIR`, with a stub model in place of a VLM:
it answers each question from GST_SHIM_PREDICTIONS (JSON lines of uid and prediction; '' when absent).
Inference as inference_video.py does it (build_prompt(index, video_llm) per row, then
meta['prediction'] = [str(response) ...] and dump), then dataset.evaluate(result_file), printed as JSON.
The result table is written as PRED_FORMAT says (xlsx, VLMEvalKit's default, or tsv)."""

import argparse
import json
import os

from vlmeval.dataset import build_dataset
from vlmeval.smp import dump


class StubModel:
    VIDEO_LLM = True

    def __init__(self, path):
        self.answers = {}
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    entry = json.loads(line)
                    self.answers[entry["uid"]] = entry["prediction"]
        self.current = None

    def generate(self, message, dataset=None):
        for part in message:
            assert part["type"] in ("text", "image", "video"), part
            if part["type"] != "text":
                assert os.path.isfile(part["value"]), "%s: media %s missing" % (self.current, part["value"])
        assert message[0]["type"] == "text" and any(p["type"] == "video" for p in message)
        return self.answers.get(self.current, "")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", nargs="+", required=True)
    parser.add_argument("--model", nargs="+", required=True)
    parser.add_argument("--work-dir", default="./outputs")
    args = parser.parse_args()
    model = StubModel(os.environ["GST_SHIM_PREDICTIONS"])
    model_name = args.model[0]
    results = {}
    for dataset_name in args.data:
        dataset = build_dataset(dataset_name)
        assert dataset is not None, "dataset %s is not registered" % dataset_name
        responses = {}
        for i in range(len(dataset.data)):
            row = dataset.data.iloc[i]
            model.current = row["uid"]
            struct = dataset.build_prompt(i, video_llm=getattr(model, "VIDEO_LLM", False))
            responses[row["index"]] = model.generate(message=struct, dataset=dataset_name)
        meta = dataset.data
        meta["prediction"] = [str(responses[x]) for x in meta["index"]]
        os.makedirs(args.work_dir, exist_ok=True)
        suffix = os.environ.get("PRED_FORMAT", "xlsx")
        result_file = os.path.join(args.work_dir, "%s_%s.%s" % (model_name, dataset_name, suffix))
        dump(meta, result_file)
        evaluation = dataset.evaluate(result_file)
        results[dataset_name] = {"result_file": result_file, "table": evaluation.to_dict("records")}
    print(json.dumps(results))


def load_env():
    pass
