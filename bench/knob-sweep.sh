#!/usr/bin/env bash
# A tuning sweep: the same perf cases under each setting of a tuning variable, one program run
# per setting, so settings can be compared without rebuilding. Each run's `--output json` goes to
# $OUT/sweep-N.jsonl (0: the defaults); then, for each setting, `backend-ops compare` of the
# defaults (before) and the setting (after): ratio = defaults' time / the setting's, above 1 the
# setting is faster.
#
# Usage (on the GPU machine, from the repository root):
#   KNOBS="setting_a=1 setting_b=4,setting_c=1" bash bench/knob-sweep.sh BUNDLE_DIR --suite decode-targets
#   KNOBS="…" bash bench/knob-sweep.sh BUNDLE_DIR -o MUL_MAT -p 'type_a=q4_K,.*n=1,'
# KNOBS: space-separated settings (names in the library's plan files); VAR: the variable
# (GGML_DAWN_MUL_MAT, or GGML_DAWN_FA); the other arguments are `perf`'s (a suite sets its own
# --min-time; MIN_TIME overrides it); OUT: where the runs and tables go (default /tmp/knob-sweep).
set -uo pipefail
bundle=$1
shift
var=${VAR:-GGML_DAWN_MUL_MAT}
out=${OUT:-/tmp/knob-sweep}
mkdir -p "$out"
perf_args=("$@")
[ -z "${MIN_TIME:-}" ] || perf_args+=(--min-time "$MIN_TIME")
i=0
for knobs in defaults ${KNOBS:-}; do
    if [ "$knobs" = defaults ]; then
        env -u "$var" "$bundle/run" --output json perf "${perf_args[@]}" >"$out/sweep-$i.jsonl"
    else
        env "$var=$knobs" "$bundle/run" --output json perf "${perf_args[@]}" >"$out/sweep-$i.jsonl"
    fi
    i=$((i + 1))
done
i=0
: >"$out/sweep.md"
for knobs in ${KNOBS:-}; do
    i=$((i + 1))
    { echo "## $var=$knobs against the defaults"; echo; "$bundle/run" compare --base "$out/sweep-0.jsonl" --ours "$out/sweep-$i.jsonl"; echo; } |
        tee -a "$out/sweep.md"
done
