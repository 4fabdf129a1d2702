"""Runs an exported VLMEvalKit dataset the way VLMEvalKit runs it, without VLMEvalKit or torch: the export's
gst_vlmeval.py as the entry point (register, then vlmeval.run.main) over the shim in vlmeval_shim/.

Usage: vlmeval_check.py EXPORT PREDICTIONS.jsonl WORK
Runs it twice, with the prediction table as xlsx (VLMEvalKit's default) and as tsv (PRED_FORMAT=tsv).
Prints JSON: {"runs": {format: {dataset: {"result_file", "table": [{column, setting, questions, score}]}}},
"errors": {"missing": message, "duplicate": message, "unknown": message}} where errors are what evaluate
raised on the first dataset's result table with a row dropped, a row repeated and a uid changed.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHIM = os.path.join(HERE, "vlmeval_shim")


def main():
    export, predictions, work = sys.argv[1:4]
    names = [n[:-4] for n in sorted(os.listdir(export)) if n.endswith(".tsv")]
    env = dict(os.environ)
    env["PYTHONPATH"] = SHIM
    env["LMUData"] = os.path.join(work, "LMUData")
    os.makedirs(env["LMUData"], exist_ok=True)
    env["GST_SHIM_PREDICTIONS"] = predictions
    runs = {}
    for suffix in ("xlsx", "tsv"):
        env["PRED_FORMAT"] = suffix
        run = subprocess.run(
            [sys.executable, os.path.join(export, "gst_vlmeval.py"), "--data", *names, "--model", "stub",
             "--work-dir", os.path.join(work, "outputs-" + suffix)],
            env=env, capture_output=True, text=True)
        if run.returncode != 0:
            sys.stderr.write(run.stderr)
            sys.exit("gst_vlmeval.py failed")
        runs[suffix] = json.loads(run.stdout.strip().splitlines()[-1])

    # Bad prediction tables, evaluated in-process through the same registration.
    sys.path.insert(0, SHIM)
    os.environ["LMUData"] = env["LMUData"]
    sys.path.insert(0, export)
    import gst_vlmeval
    import pandas as pd
    from vlmeval.dataset import build_dataset

    gst_vlmeval.register()
    first = names[0]
    dataset = build_dataset(first)
    table = pd.read_csv(runs["tsv"][first]["result_file"], sep="\t", dtype=str, keep_default_na=False)
    errors = {}
    for what, bad in (
        ("missing", table.drop(table.index[1])),
        ("duplicate", pd.concat([table, table.iloc[[2]]])),
        ("unknown", table.assign(uid=[("nope" if i == 0 else u) for i, u in enumerate(table["uid"])])),
    ):
        path = os.path.join(work, "bad_%s.tsv" % what)
        bad.to_csv(path, sep="\t", index=False)
        try:
            dataset.evaluate(path)
            errors[what] = None
        except ValueError as error:
            errors[what] = str(error)
    print(json.dumps({"runs": runs, "errors": errors, "uids": list(table["uid"][:4])}))


if __name__ == "__main__":
    main()
