#!/usr/bin/env bash
# The GPU machine's check of the memory-bound decoder ops (RMS_NORM and its fused form, SOFT_MAX,
# ARGMAX, SCALE, GET_ROWS, SET_ROWS, CPY, ROPE):
# their upstream lists, then upstream's WebGPU perf cases of these ops timed by upstream's program
# and by ours (same case strings, same machine, one run), then the `rows` suite in GB/s.
#
# Usage (on the GPU machine, from the repository root, with an unpacked bundle and upstream's
# package copied to .bench/upstream/ as /work/shared/upstream/README.md says):
#   BUNDLE=gpu-bundle OUT=/tmp/rows-out bash bench/rows.sh
set -u
B=${BUNDLE:-gpu-bundle}
O=${OUT:-/tmp/rows-out}
UP=${UPSTREAM_RUN:-.bench/upstream/run-upstream}
OPS="RMS_NORM RMS_NORM_MUL_ADD SOFT_MAX ARGMAX SCALE GET_ROWS SET_ROWS CPY ROPE"
mkdir -p "$O"
for op in $OPS; do
  echo "== $op"; "$B/run" test -o "$op" 2>&1 | grep -v ': OK$' | tail -5
done > "$O/lists.txt" 2>&1
for op in $OPS; do
  timeout 100 "$UP" "$B" perf -b WebGPU -o "$op" 2>&1 | grep -E '^\s+[A-Z_]+\('
done > "$O/upstream.txt"
sed -E 's/^\s+//; s/\):.*/)/' "$O/upstream.txt" > "$O/cases.txt"
"$B/run" perf --cases-file "$O/cases.txt" -v > "$O/ours-upstream-cases.txt" 2>&1
"$B/run" perf --suite rows -v > "$O/ours-rows.txt" 2>&1
cat "$O/lists.txt"; echo "== upstream"; cat "$O/upstream.txt"
echo "== ours, upstream's cases"; cat "$O/ours-upstream-cases.txt"; echo "== ours, suite rows"; cat "$O/ours-rows.txt"
