#!/usr/bin/env bash
# `make export-timing`: how long `gst export` takes per scene. Generates a bench of $SCENES scenes (seed 1,
# cached in ${TIMING_OUT:-out/export-timing}/gen; `gst generate` resumes), exports it in every format
# (media hard-linked, never re-encoded) and prints the seconds, per format and per scene, and the
# extrapolation to 20 scenes (the target: <= 10 s for a 20-scene bench).
set -euo pipefail
GST=${GST:?set GST to the gst binary}
SCENES=${SCENES:-2}
OUT=${TIMING_OUT:-out/export-timing}
mkdir -p "$OUT"
"$GST" generate --scenes "$SCENES" --seed 1 --out "$OUT/gen" >/dev/null
questions=$(ls "$OUT/gen/bench/questions" | wc -l)
media=$(du -sh "$OUT/gen/bench" | cut -f1)
echo "bench: $SCENES scenes, $questions questions, $media on disk"
for format in lmms-eval vlmevalkit hf; do
  rm -rf "$OUT/$format"
  start=$(date +%s.%N)
  "$GST" export --format "$format" "$OUT/gen/bench" "$OUT/$format" >/dev/null
  end=$(date +%s.%N)
  awk -v f="$format" -v s="$start" -v e="$end" -v n="$SCENES" \
    'BEGIN { t = e - s; printf "%-11s %.3f s  (%.3f s per scene; 20 scenes extrapolated: %.2f s)\n", f, t, t / n, 20 * t / n }'
done
