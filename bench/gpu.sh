#!/usr/bin/env bash
# The GPU machine's runner: `backend-ops`'s named suites (`backend-ops suites` lists them), the
# correctness lists, the comparison with upstream, and two bundles before and after a change.
# Every result is `--output json` under $OUT (default /tmp/gpu-out; on a remote runner, the
# folder that comes back), with the adapter's `info` beside it; tables are `backend-ops compare`'s.
#
# Usage (on the GPU machine, from the repository root):
#   bash bench/gpu.sh suite NAME [PERF_ARGS…]        perf --suite NAME (e.g. -p 'n=1,', --min-time 1)
#   bash bench/gpu.sh lists                          test -o MUL_MAT in the three modes (defaults,
#                                                    --no-subgroup-matrix, --config 16x8x16), test -o
#                                                    FLASH_ATTN_EXT (defaults; nb <= 4 in the other two)
#   bash bench/gpu.sh decoder-lists                  test -o OP for each of the decoder ops' 20 lists
#                                                    (upstream's, the cases it does not support
#                                                    included); backend-ops is the bundle's `run`, or
#                                                    `run-ops` in a dawn-llm bundle
#   bash bench/gpu.sh vs-upstream SUITE [ARGS…]      ours and upstream's test-backend-ops alternating
#                                                    case by case (`backend-ops compare perf`)
#   bash bench/gpu.sh before-after A B SUITE…        bundle A (before) and B (after) alternating, then
#                                                    `compare --base A --ours B`
# BUNDLE: the bundle the first three use (default: ./gpu-bundle, else ./gpu-bundle.tar.xz). A, B
# and BUNDLE are each an unpacked `cargo xtask bundle` folder or its .tar.xz (unpacked once under
# /tmp/bundles/). Tuning settings go in the environment, as for any run (GGML_DAWN_MUL_MAT,
# GGML_DAWN_FA); several settings side by side: bench/knob-sweep.sh.
# vs-upstream: the bundle's `run-upstream` when `cargo xtask upstream` had packed it, else
# UPSTREAM=DIR_OR_TARBALL through bench/run-upstream.sh.
# before-after: ROUNDS (default 2) rounds, each running every suite with A then with B;
# ALTERNATE=case instead runs A then B on each case in turn (one program start per case and side:
# slower, but drift cannot favour either side). FILTER=REGEX narrows the suites (perf's -p);
# MIN_TIME=S overrides their time per case.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out"

# The folder of a bundle given as a folder or as a tarball of one.
bundle_dir() {
    local b=$1
    if [ -d "$b" ] && [ -x "$b/run" ]; then
        (cd "$b" && pwd)
        return
    fi
    if [ -f "$b" ]; then
        local dir
        dir=/tmp/bundles/$(basename "$b" .tar.xz)
        if [ ! -d "$dir" ]; then
            mkdir -p "$dir" && tar -xJf "$b" -C "$dir" || { rm -rf "$dir"; return 1; }
        fi
        local run
        run=$(find "$dir" -maxdepth 2 -name run -type f | head -n 1)
        [ -n "$run" ] && dirname "$run" && return
    fi
    echo "gpu.sh: $b is neither a bundle folder (with run) nor a tarball of one" >&2
    return 1
}

default_bundle() {
    if [ -n "${BUNDLE:-}" ]; then
        bundle_dir "$BUNDLE"
    elif [ -d gpu-bundle ]; then
        bundle_dir gpu-bundle
    else
        bundle_dir gpu-bundle.tar.xz
    fi
}

# The adapter and its driver, once per bundle, beside the results.
record_device() {
    "$1/run" --output json info >"$out/info-$(basename "$1").json" 2>&1 || true
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader >"$out/gpu.txt" 2>/dev/null || true
}

# Whether a suite name is known (its list of cases, one a line, on stdout).
suite_cases() {
    "$1/run" suites "$2"
}

mode=${1:-}
[ $# -gt 0 ] && shift
case $mode in
suite)
    [ $# -ge 1 ] || { echo "usage: bash bench/gpu.sh suite NAME [PERF_ARGS…]" >&2; exit 2; }
    name=$1
    shift
    bundle=$(default_bundle) || exit 2
    record_device "$bundle"
    "$bundle/run" --output json perf --suite "$name" "$@" | tee "$out/$name.jsonl"
    ;;
lists)
    bundle=$(default_bundle) || exit 2
    record_device "$bundle"
    status=0
    # name, then the arguments of one list
    list() {
        local name=$1
        shift
        "$bundle/run" --output json "$@" >"$out/list-$name.jsonl"
        local rc=$?
        [ $rc -eq 0 ] || status=1
        # The JSON lines' statuses, counted (serde_json writes `"status":"…"` without spaces).
        local ok fail unsupported
        ok=$(grep -c '"status":"ok"' "$out/list-$name.jsonl")
        fail=$(grep -c '"status":"fail"' "$out/list-$name.jsonl")
        unsupported=$(grep -c '"status":"unsupported"' "$out/list-$name.jsonl")
        echo "$name: exit $rc; $ok ok, $fail fail, $unsupported not supported ($*)" | tee -a "$out/lists.txt"
    }
    : >"$out/lists.txt"
    list mul_mat test -o MUL_MAT
    list mul_mat-no-sg --no-subgroup-matrix test -o MUL_MAT
    list mul_mat-16x8x16 --config 16x8x16 test -o MUL_MAT
    list flash_attn test -o FLASH_ATTN_EXT
    list flash_attn-no-sg-nb4 --no-subgroup-matrix test -o FLASH_ATTN_EXT -p 'nb=[1-4],'
    list flash_attn-16x8x16-nb4 --config 16x8x16 test -o FLASH_ATTN_EXT -p 'nb=[1-4],'
    exit $status
    ;;
decoder-lists)
    bundle=$(default_bundle) || exit 2
    ops_tool=$bundle/run
    [ -x "$bundle/run-ops" ] && ops_tool=$bundle/run-ops
    "$ops_tool" --output json info >"$out/info-$(basename "$bundle").json" 2>&1 || true
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt" 2>/dev/null || true
    status=0
    : >"$out/decoder-lists.txt"
    for op in GET_ROWS RMS_NORM RMS_NORM_MUL_ADD ADD SUB MUL DIV ROPE ROPE_SET_ROWS REGLU GEGLU SWIGLU SWIGLU_OAI GEGLU_ERF \
        GEGLU_QUICK SET_ROWS CPY SCALE SOFT_MAX ARGMAX; do
        "$ops_tool" --output json test -o "$op" >"$out/decoder-$op.jsonl"
        rc=$?
        [ $rc -eq 0 ] || status=1
        ok=$(grep -c '"status":"ok"' "$out/decoder-$op.jsonl")
        fail=$(grep -c '"status":"fail"' "$out/decoder-$op.jsonl")
        unsupported=$(grep -c '"status":"unsupported"' "$out/decoder-$op.jsonl")
        echo "$op: exit $rc; $ok ok, $fail fail, $unsupported not supported" | tee -a "$out/decoder-lists.txt"
    done
    exit $status
    ;;
vs-upstream)
    [ $# -ge 1 ] || { echo "usage: bash bench/gpu.sh vs-upstream SUITE [ARGS…]" >&2; exit 2; }
    name=$1
    shift
    bundle=$(default_bundle) || exit 2
    record_device "$bundle"
    if [ -x "$bundle/run-upstream" ]; then
        upstream=(--upstream-bin "$bundle/run-upstream")
    elif [ -n "${UPSTREAM:-}" ]; then
        upstream=(--upstream-bin /bin/sh --upstream-arg "$here/run-upstream.sh" --upstream-arg "$bundle"
            --upstream-arg "$UPSTREAM")
    else
        echo "gpu.sh: the bundle has no run-upstream; give UPSTREAM=DIR_OR_TARBALL (see bench/run-upstream.sh)" >&2
        exit 2
    fi
    "$bundle/run" compare perf "${upstream[@]}" --suite "$name" --save-json "$out/vs-upstream-$name.jsonl" "$@" |
        tee "$out/vs-upstream-$name.md"
    ;;
before-after)
    [ $# -ge 3 ] || { echo "usage: bash bench/gpu.sh before-after BUNDLE_A BUNDLE_B SUITE…" >&2; exit 2; }
    a=$(bundle_dir "$1") || exit 2
    b=$(bundle_dir "$2") || exit 2
    shift 2
    record_device "$a"
    record_device "$b"
    for name in "$@"; do
        suite_cases "$b" "$name" >/dev/null || exit 2
    done
    narrow=()
    [ -z "${FILTER:-}" ] || narrow+=(-p "$FILTER")
    [ -z "${MIN_TIME:-}" ] || narrow+=(--min-time "$MIN_TIME")
    : >"$out/before.jsonl"
    : >"$out/after.jsonl"
    if [ "${ALTERNATE:-suite}" = case ]; then
        for name in "$@"; do
            mapfile -t cases < <(suite_cases "$a" "$name" | grep -E -- "${FILTER:-.}")
            for c in "${cases[@]}"; do
                # This one case of the suite (so with the suite's time per case): its string as
                # a regular expression that matches it alone.
                only="^$(printf '%s' "$c" | sed 's/[][()*+?.^$|\\{}]/\\&/g')\$"
                "$a/run" --output json perf --suite "$name" -p "$only" ${MIN_TIME:+--min-time "$MIN_TIME"} >>"$out/before.jsonl"
                "$b/run" --output json perf --suite "$name" -p "$only" ${MIN_TIME:+--min-time "$MIN_TIME"} >>"$out/after.jsonl"
            done
        done
    else
        # The cases come from B's suite table and go to both as a cases file, so that a bundle
        # older than the suites (or than a suite) can be A. Rounds alternate which side goes
        # first, so drift over the run favours neither.
        for round in $(seq "${ROUNDS:-2}"); do
            for name in "$@"; do
                echo "round $round: $name" >&2
                cases="$out/cases-$name.txt"
                suite_cases "$b" "$name" >"$cases" || exit 2
                suite_time=$("$b/run" --output json suites "$name" | sed -E 's/.*"min_time":([0-9.]+).*/\1/')
                time_arg=(--min-time "${MIN_TIME:-$suite_time}")
                first=("$a" "$out/before.jsonl") second=("$b" "$out/after.jsonl")
                if [ $((round % 2)) -eq 0 ]; then
                    first=("$b" "$out/after.jsonl") second=("$a" "$out/before.jsonl")
                fi
                for side in first second; do
                    declare -n s=$side
                    "${s[0]}/run" --output json perf --cases-file "$cases" "${time_arg[@]}" \
                        ${FILTER:+-p "$FILTER"} >>"${s[1]}"
                done
            done
        done
    fi
    "$b/run" compare --base "$out/before.jsonl" --ours "$out/after.jsonl" | tee "$out/before-after.md"
    ;;
*)
    # The comment at the top, without its marks.
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    [ -z "$mode" ] || [ "$mode" = help ] || exit 2
    ;;
esac
