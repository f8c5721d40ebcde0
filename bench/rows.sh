#!/usr/bin/env bash
# The decoder ops beside upstream on the GPU machine: for each op, upstream's WebGPU perf cases
# timed by upstream's program, then the same case strings by ours (the programs alternate op by
# op), compared with `backend-ops compare`; then the `rows` suite in GB/s, by the wall clock and
# by the GPU's own clock.
#
# Usage (on the GPU machine, from the repository root, with an unpacked bundle of backend-ops, or
# a dawn-llm bundle made with --with-backend-ops, and upstream's test-backend-ops built against
# the same Dawn with its `run-upstream` launcher):
#   BUNDLE=gpu-bundle UPSTREAM_RUN=.bench/upstream/run-upstream OUT=/tmp/rows-out bash bench/rows.sh
# OPS narrows the ops (default: every decoder op upstream's perf list may hold); SUITE=0 leaves
# out the rows suite.
set -u
B=${BUNDLE:-gpu-bundle}
# backend-ops: the bundle's `run`, or its `run-ops` in a dawn-llm bundle made with --with-backend-ops.
TOOL=$B/run
[ -x "$B/run-ops" ] && TOOL=$B/run-ops
O=${OUT:-/tmp/rows-out}
UP=${UPSTREAM_RUN:-.bench/upstream/run-upstream}
OPS=${OPS:-"ADD MUL SWIGLU RMS_NORM SOFT_MAX ARGMAX SCALE GET_ROWS SET_ROWS CPY ROPE"}
mkdir -p "$O"
: >"$O/upstream.txt"
: >"$O/ours.jsonl"
for op in $OPS; do
    # Upstream's lines for this op (its perf list; nothing where it has no case or no kernel).
    timeout 200 "$UP" "$B" perf -b WebGPU -o "$op" >"$O/upstream-$op.txt" 2>&1
    cat "$O/upstream-$op.txt" >>"$O/upstream.txt"
    sed -E 's/\x1b\[[0-9;]*m//g' "$O/upstream-$op.txt" | grep -E '^\s+[A-Z_]+\(' |
        sed -E 's/^\s+//; s/\):.*/)/' >"$O/cases-$op.txt"
    if [ -s "$O/cases-$op.txt" ]; then
        "$TOOL" --output json perf --cases-file "$O/cases-$op.txt" >>"$O/ours.jsonl" 2>"$O/ours-$op.err"
    fi
    echo "$op: $(grep -c . "$O/cases-$op.txt") upstream perf cases"
done
"$TOOL" compare --upstream "$O/upstream.txt" --ours "$O/ours.jsonl" | tee "$O/compare.md"
[ "${SUITE:-1}" = 0 ] && exit 0
# The rows suite by the wall clock and by the GPU's timestamps (a small op's wall-clock time
# is the host's recording of its one dispatch; the GPU's own time is the kernel's).
"$TOOL" --output json perf --suite rows --gpu-time >"$O/rows.jsonl"
python3 - "$O/rows.jsonl" <<'PY' | tee "$O/rows.md"
import json, sys
print("| case | us/run | GB/s | GPU us/run | GPU GB/s |")
print("|---|---:|---:|---:|---:|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("mode") == "perf" and "us_per_run" in r:
        g = r.get("gpu_us_per_run")
        print(f"| {r['case']} | {r['us_per_run']:.2f} | {r['gbps']:.0f} | "
              + (f"{g:.2f} | {r['gpu_gbps']:.0f} |" if g else "— | — |"))
PY
