#!/usr/bin/env bash
# Logging overhead of `gst slam --rrd` on a 3-minute generated episode (release build): wall time without a
# recording, with the default compact images, and with `--rrd-downscale 2`, each run twice (the faster run
# counts), and the size of each recording. The episode is generated once into out/bench-viz/data.
#   scripts/bench-viz.sh [GST_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
gst=${1:-${CARGO_TARGET_DIR:-$HOME/.cache/gst/target}/release/gst}
out=out/bench-viz
data=$out/data
[ -d "$data/bench/tum/scene_000" ] || "$gst" generate --scenes 1 --seed 180 --out "$data" \
	--config scripts/bench-viz-generate.json -q
episode=$data/bench/tum/scene_000
frames=$(grep -vc '^#' "$episode/rgb.txt")
best() { # best wall seconds of two runs of "$@"
	local best=
	for _ in 1 2; do
		local start end
		start=$(date +%s.%N)
		"$@" >/dev/null 2>&1
		end=$(date +%s.%N)
		best=$(python3 -c "a=$end-$start; b='$best'; print(a if not b else min(a, float(b)))")
	done
	echo "$best"
}
off=$(best "$gst" slam --input "$episode" --out "$out/off" -q)
compact=$(best "$gst" slam --input "$episode" --out "$out/compact" -q --rrd "$out/compact.rrd")
half=$(best "$gst" slam --input "$episode" --out "$out/half" -q --rrd "$out/half.rrd" --rrd-downscale 2)
python3 - "$frames" "$off" "$compact" "$half" "$out/compact.rrd" "$out/half.rrd" <<'PY'
import os, sys
frames, off, compact, half = int(sys.argv[1]), *map(float, sys.argv[2:5])
print(f"episode: {frames} frames (3 minutes)")
print("| gst slam | wall s | vs off | recording |")
print("|---|---|---|---|")
print(f"| no recording | {off:.1f} | 1.00 | |")
for name, t, path in (("--rrd (compact)", compact, sys.argv[5]), ("--rrd --rrd-downscale 2", half, sys.argv[6])):
    size = os.path.getsize(path) / 1e6
    print(f"| {name} | {t:.1f} | {t / off:.2f} | {size:.0f} MB ({size * 1e3 / frames:.0f} kB/frame) |")
PY
