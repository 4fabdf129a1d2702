#!/usr/bin/env bash
# `make test-harness`: lmms-eval 0.7.3, installed for real in $HARNESS_VENV, runs the task `gst export`
# writes against a local OpenAI-compatible stub server (scripts/harness_stub_server.py) on 3 of the
# release's sample questions; its printed/aggregated gst_score must equal `gst score` on the samples it
# logged, on every column (scripts/harness_compare.py).
#
# The samples come without media: the images are stand-in PNGs drawn here, the videos stand-in files sent
# by path (`pass_video_url=True`, so lmms-eval does not decode them). Needs: GST (the gst binary),
# HARNESS_VENV with lmms-eval installed. Work folder: ${HARNESS_OUT:-out/test-harness} (rewritten).
set -euo pipefail

GST=${GST:?set GST to the gst binary}
VENV=${HARNESS_VENV:-.venv-harness}
OUT=${HARNESS_OUT:-out/test-harness}
PORT=${HARNESS_PORT:-18431}
PY="$VENV/bin/python"

rm -rf "$OUT"
mkdir -p "$OUT/bench"
# Three questions of three answer kinds: an option choice (TDS_E), a direction (ED_v), a distance (EDist_v).
for name in 01_Global_Structure_Understanding_Topdown_Selection_Easy 04_Object_Localization_Egocentric_Direction_visual \
            05_Object_Localization_Egocentric_Distance_visual; do
  cp "tests/data/gst-samples/$name.json" "$OUT/bench/"
done
"$PY" - "$OUT/bench" <<'PYEOF'
import json, os, sys
from PIL import Image
bench = sys.argv[1]
for name in sorted(os.listdir(bench)):
    if not name.endswith(".json"):
        continue
    question = json.load(open(os.path.join(bench, name)))
    with open(os.path.join(bench, question["copied_video_path"]), "wb") as f:
        f.write(b"stand-in video: sent by path, not decoded")
    for k, image in enumerate(question.get("images", [])):
        Image.new("RGB", (64, 48), (40 * k % 256, 90, 160)).save(os.path.join(bench, image["copied_path"]))
PYEOF

"$GST" export --format lmms-eval "$OUT/bench" "$OUT/task"

"$PY" scripts/harness_stub_server.py "$PORT" > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q listening "$OUT/server.log" && break; sleep 0.1; done

export OPENAI_API_BASE="http://127.0.0.1:$PORT/v1" OPENAI_API_KEY=none
"$PY" -m lmms_eval --model openai \
  --model_args "model_version=gst-stub,pass_video_url=True,max_retries=2,num_concurrent=1" \
  --include_path "$OUT/task" --tasks gst_bench --batch_size 1 \
  --log_samples --output_path "$OUT/lmms-run" 2>&1 | tee "$OUT/lmms-eval.log"

"$GST" score --bench "$OUT/bench" --predictions "$OUT/lmms-run" --model lmms-eval-stub --json > "$OUT/gst-score.json"
"$GST" score --bench "$OUT/bench" --predictions "$OUT/lmms-run" --model lmms-eval-stub
"$PY" scripts/harness_compare.py "$OUT/task" "$OUT/lmms-run" "$OUT/gst-score.json"
