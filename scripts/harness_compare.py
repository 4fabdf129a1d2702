"""`make test-harness`: compares lmms-eval's own aggregation (its results JSON, the numbers it prints) with
`gst score --json` on the samples the same run logged. Exits non-zero on any column that differs by 0.01
or more, or on a column one of them lacks.

Usage: harness_compare.py TASK_FOLDER LMMS_OUTPUT_DIR GST_SCORE_JSON
"""

import glob
import json
import os
import sys


def main():
    task_folder, output_dir, gst_json = sys.argv[1:4]
    results_files = sorted(glob.glob(os.path.join(output_dir, "**", "*results*.json"), recursive=True))
    if not results_files:
        sys.exit("no lmms-eval results JSON under %s" % output_dir)
    with open(results_files[-1], encoding="utf-8") as f:
        results = json.load(f)["results"]
    column_of_task = {}
    for path in glob.glob(os.path.join(task_folder, "data", "*.jsonl")):
        with open(path, encoding="utf-8") as f:
            doc = json.loads(f.readline())
        if doc["setting"] == "global":
            column_of_task[os.path.basename(path)[: -len(".jsonl")]] = doc["column"]
    harness = {}
    for task, metrics in results.items():
        value = metrics.get("gst_score,none")
        if task in column_of_task and value is not None:
            harness[column_of_task[task]] = float(value)
        elif task == "gst_bench" and value is not None:
            harness["Avg"] = float(value)
    with open(gst_json, encoding="utf-8") as f:
        tables = json.load(f)
    ours_row = tables["main"]["rows"][0]
    ours = {column: score for column, score in zip(tables["main"]["columns"], ours_row["scores"]) if score is not None}
    failures = []
    print("%-8s %10s %10s" % ("column", "lmms-eval", "gst score"))
    for column in sorted(set(harness) | set(ours), key=lambda c: (c == "Avg", c)):
        theirs, mine = harness.get(column), ours.get(column)
        print("%-8s %10s %10s" % (column, "-" if theirs is None else "%.4f" % theirs, "-" if mine is None else "%.4f" % mine))
        if theirs is None or mine is None or abs(theirs - mine) >= 0.01:
            failures.append(column)
    if failures:
        sys.exit("lmms-eval and gst score differ on: %s" % ", ".join(failures))
    print("lmms-eval's aggregation equals gst score on %d columns" % len(ours))


if __name__ == "__main__":
    main()
