#!/usr/bin/env python3
"""Uniform random guesses for every question of a benchmark split, as `gst score` reads them.

    python3 scripts/random_predictions.py DIR/bench --seed 1 > random.jsonl
    gst score --bench DIR/bench --predictions random.jsonl

Guesses follow each task's answer format: angles uniform in [-180, 180] (integers), distances uniform in
[0, 11] m (one decimal, as crates/bench/tests/scoring.rs), points uniform in [0, 999]^2, options uniform in
A-D. Standard library only; the same seed gives the same file.
"""
import argparse
import json
import pathlib
import random


def guess(task: str, rng: random.Random) -> str:
    if "Direction" in task or "Orientation" in task:
        return str(rng.randint(-180, 180))
    if "Distance" in task:
        return f"{rng.uniform(0.0, 11.0):.1f}"
    if "Position" in task:
        return f"<point>{rng.randint(0, 999)} {rng.randint(0, 999)}</point>"
    if "Selection" in task:
        return rng.choice("ABCD")
    raise SystemExit(f"unknown task {task!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("split", type=pathlib.Path, help="a split directory: DIR/bench or DIR/train")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    questions = sorted((args.split / "questions").glob("*.json"))
    if not questions:
        raise SystemExit(f"{args.split / 'questions'}: no question files")
    rng = random.Random(args.seed)
    for path in questions:
        try:
            question = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise SystemExit(f"{path}: {error}")
        print(json.dumps({"uid": question["uid"], "prediction": guess(question["task"], rng)}))


if __name__ == "__main__":
    main()
