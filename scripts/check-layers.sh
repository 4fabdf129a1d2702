#!/usr/bin/env bash
# Keeps heavy dependencies out of the layers that must not have them (DESIGN.md, "Layering").
# Each line: crate, then the packages that must not appear in its normal dependency tree.
set -euo pipefail
status=0
check() {
  local crate=$1; shift
  local tree
  tree=$(cargo tree -p "$crate" -e normal --prefix none --format '{p}' 2>/dev/null | awk '{print $1}' | sort -u)
  for banned in "$@"; do
    if grep -qx "$banned" <<<"$tree"; then
      echo "layering: $crate must not depend on $banned" >&2
      status=1
    fi
  done
}
check gst-core opencv rerun ort reqwest ureq gst-sim gst-io gst-vlm
check gst-sim opencv rerun ort reqwest ureq gst-io gst-vlm
check gst-io rerun ort reqwest ureq gst-sim gst-vlm
check gst-bench rerun ort reqwest ureq gst-vlm
check gst-slam rerun ort reqwest ureq gst-sim gst-bench gst-vlm
# Robot recordings: containers and messages only, under gst-io's FrameSource.
check gst-bag rerun ort reqwest ureq gst-sim gst-bench gst-slam gst-map gst-vlm
check gst-baseline rerun gst-sim gst-bench
check gst-map rerun ort reqwest ureq gst-sim gst-bench gst-slam gst-vlm
# gst-vlm is a leaf (ort, HTTP, tokenizers): only gst-baseline and gst-cli use it, and it sees questions and
# frames like any model: no simulator, benchmark builder or scorer.
check gst-vlm rerun gst-sim gst-bench gst-slam gst-baseline
# gst-viz is the one crate that may pull rerun; it is a leaf: it logs what the stages produce and is used
# only by gst-cli, so it never sees answerers, VLMs or the benchmark builder.
check gst-viz gst-baseline gst-vlm gst-bench gst-cli
# Every other library crate, present and future, stays free of rerun and of gst-viz.
for manifest in crates/*/Cargo.toml; do
  crate=$(sed -n 's/^name = "\(.*\)"/\1/p' "$manifest" | head -n 1)
  case "$crate" in
    gst-viz | gst-cli | "") ;;
    *) check "$crate" rerun gst-viz ;;
  esac
done
[ $status -eq 0 ] && echo "layering: ok"
exit $status
