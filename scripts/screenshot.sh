#!/usr/bin/env bash
# A screenshot of the Rerun viewer on a recording, without a display: the viewer's own headless mode
# (`rerun --headless --screenshot-to`) renders through Mesa's software Vulkan driver (lavapipe), which
# this script installs when it is missing. Used for docs/viewer.png:
#   scripts/screenshot.sh out/demo/demo.rrd docs/viewer.png
set -euo pipefail
rrd=${1:?usage: scripts/screenshot.sh RECORDING.rrd OUT.png [WIDTHxHEIGHT]}
png=${2:?usage: scripts/screenshot.sh RECORDING.rrd OUT.png [WIDTHxHEIGHT]}
size=${3:-1600x900}
cd "$(dirname "$0")/.."
[ -f "$rrd" ] || { echo "scripts/screenshot.sh: $rrd: no such recording (run make demo first)" >&2; exit 1; }
[ -x .venv/bin/rerun ] || { echo "scripts/screenshot.sh: .venv/bin/rerun missing (run make setup)" >&2; exit 1; }
if ! dpkg-query -W -f='${Status}\n' mesa-vulkan-drivers 2>/dev/null | grep -q "install ok installed"; then
	sudo=$([ "$(id -u)" = 0 ] || echo sudo)
	$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mesa-vulkan-drivers
fi
raw=$(mktemp --suffix=.png)
trap 'rm -f "$raw"' EXIT
# The viewer renders at twice the logical size (HiDPI); the PNG is scaled back and palettised to stay small.
RUST_LOG=error XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)} timeout 600 .venv/bin/rerun --headless \
	--window-size "$size" --screenshot-to "$raw" "$rrd" >/dev/null 2>&1
.venv/bin/python - "$raw" "$png" "$size" <<'PY'
import sys
from PIL import Image
raw, out, size = sys.argv[1], sys.argv[2], sys.argv[3]
width, height = (int(v) for v in size.split("x"))
image = Image.open(raw).convert("RGB").resize((width, height), Image.LANCZOS)
image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
print(f"{out}: {width}x{height}")
PY
