#!/usr/bin/env bash
# Tokens per second of `dawn-llm bench` beside llama.cpp's `llama-bench` on its WebGPU, Vulkan
# (and, when built, CUDA) backends: the same GGUF files, the same tests, the programs alternating
# test by test in one run. Device memory is sampled (nvidia-smi) while each program runs.
#
# Usage (on the GPU machine, from the repository root), one command:
#   LLM=DIR OUT=DIR bash bench/llm-compare.sh [MODEL...]
# MODEL: a GGUF file, or LIKE:TYPE for a synthetic one `dawn-llm synth` makes there (default:
# smollm2-135m:q4_1 llama-3-8b:q4_0 llama-3-8b:q4_K_M, the issue's three; files under $MODELS_DIR,
# default /tmp/models, made once).
# LLM: a bundle of dawn-llm (`cargo xtask bundle --package ggml-dawn-llm --bin dawn-llm`), which
# carries llama.cpp's tools (`run-llama`, from `cargo xtask upstream --llama`) and llama.cpp's
# source for a CUDA build; BUNDLE: another bundle with `run-llama` (default: LLM).
# CUDA=1 builds llama.cpp's CUDA backend first (bench/llama-cuda.sh, about 5 minutes on 16 cores)
# and adds it as a program; CUDA_BENCH names an llama-bench already built for CUDA.
# Environment: TESTS (default "pp512 tg128"), DEPTHS (default "0 4096"), REPS (default 3),
# PROGRAMS (default "dawn webgpu vulkan", plus cuda when CUDA_BENCH is set), DAWN_ARGS (more
# flags for `dawn-llm bench`, e.g. `--submit-dispatches 8,64`), DAWN_ALT (`LABEL:VAR=VALUE …`: one
# more program, dawn-LABEL, dawn-llm run with those variables, e.g.
# `DAWN_ALT="pass:GGML_DAWN_MUL_MAT=vec_int_b_wg_max_k=0"` to set a knob beside the default;
# several, separated by `;`, make one program each).
# Results: $OUT/llm.jsonl (one line per program and test, llama-bench's fields plus "program"),
# $OUT/memory.csv (time, MiB used) and $OUT/runs.txt (what ran when). Summarise with
# `python3 bench/llm-table.py $OUT`.
set -uo pipefail
llm=${LLM:?LLM: the dawn-llm bundle}
bundle=${BUNDLE:-$llm}
models_dir=${MODELS_DIR:-/tmp/models}
if [ "${CUDA:-0}" = 1 ] && [ -z "${CUDA_BENCH:-}" ]; then
    src=$(ls "$llm"/llama-*-source.tar.xz 2>/dev/null | head -n 1)
    [ -n "$src" ] || { echo "llm-compare: CUDA=1 but $llm carries no llama-*-source.tar.xz" >&2; exit 2; }
    here=$(cd "$(dirname "$0")" && pwd)
    TARGETS=llama-bench bash "$here/llama-cuda.sh" "$src" || exit 2
    CUDA_BENCH=${LLAMA_CUDA_DIR:-/tmp/llama-cuda}/build-cuda/bin/llama-bench
fi
out=${OUT:-/tmp/llm-out}
reps=${REPS:-3}
tests=${TESTS:-pp512 tg128}
depths=${DEPTHS:-0 4096}
# The alternatives: label → variables.
declare -A alt_env=()
alt=
IFS=';' read -r -a alts <<<"${DAWN_ALT:-}"
for a in "${alts[@]}"; do
    [ -n "$a" ] || continue
    alt_env[${a%%:*}]=${a#*:}
    alt="$alt dawn-${a%%:*}"
done
programs=${PROGRAMS:-dawn$alt webgpu vulkan${CUDA_BENCH:+ cuda}}
mkdir -p "$out"
: >"$out/llm.jsonl"
: >"$out/runs.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt" 2>/dev/null || true
# Device memory every 100 ms, beside the run log's times, for each program's peak.
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 100 >"$out/memory.csv" 2>/dev/null &
sampler=$!
trap 'kill $sampler 2>/dev/null' EXIT
trap 'exit 143' TERM INT

# One program, one test: its JSON line(s) tagged with the program's name.
run() {
    local program=$1 model=$2 test=$3 depth=$4
    local p=0 n=0
    case $test in
    pp*) p=${test#pp} ;;
    tg*) n=${test#tg} ;;
    esac
    local args=(-m "$model" -p "$p" -n "$n" -d "$depth" -r "$reps")
    local lines
    echo "$(date +%s.%N) start $program $(basename "$model") $test d$depth" >>"$out/runs.txt"
    case $program in
    dawn) lines=$("$llm/run" bench "${args[@]}" ${DAWN_ARGS:-} -o jsonl -v 2>>"$out/dawn-stderr.txt") ;;
    # shellcheck disable=SC2086 # DAWN_ALT's variables are words on purpose.
    dawn-*) lines=$(env ${alt_env[${program#dawn-}]:-} "$llm/run" bench "${args[@]}" ${DAWN_ARGS:-} -o jsonl -v 2>>"$out/dawn-stderr.txt") ;;
    webgpu) lines=$("$bundle/run-llama" llama-bench "${args[@]}" -dev WebGPU -fa on -o jsonl 2>>"$out/llama-stderr.txt") ;;
    vulkan) lines=$("$bundle/run-llama" llama-bench "${args[@]}" -dev Vulkan0 -fa on -o jsonl 2>>"$out/llama-stderr.txt") ;;
    cuda) lines=$("$CUDA_BENCH" "${args[@]}" -dev CUDA0 -fa on -o jsonl 2>>"$out/llama-stderr.txt") ;;
    esac
    local rc=$?
    echo "$(date +%s.%N) end $program rc=$rc" >>"$out/runs.txt"
    if [ $rc -ne 0 ] || [ -z "$lines" ]; then
        printf '{"program":"%s","model_filename":"%s","test":"%s","n_depth":%s,"error":%s}\n' \
            "$program" "$model" "$test" "$depth" "$rc" >>"$out/llm.jsonl"
        return
    fi
    printf '%s\n' "$lines" | sed "s/^{/{\"program\":\"$program\",/" >>"$out/llm.jsonl"
}

# The models: files as given, LIKE:TYPE made by synth (once).
[ $# -gt 0 ] || set -- smollm2-135m:q4_1 llama-3-8b:q4_0 llama-3-8b:q4_K_M
files=()
for m in "$@"; do
    if [ -f "$m" ]; then
        files+=("$m")
        continue
    fi
    case $m in
    *:*) ;;
    *) echo "llm-compare: $m is neither a file nor LIKE:TYPE" >&2; exit 2 ;;
    esac
    f=$models_dir/${m%%:*}-${m#*:}.gguf
    mkdir -p "$models_dir"
    [ -f "$f" ] || "$llm/run" synth --like "${m%%:*}" --type "${m#*:}" -o "$f" >&2 || exit 2
    files+=("$f")
done
# The programs' order turns by one from test to test, so that no program always follows the
# same one (a program started right after another backend's exit may find the GPU slower).
read -r -a order <<<"$programs"
turn=0
for model in "${files[@]}"; do
    for depth in $depths; do
        for test in $tests; do
            for ((i = 0; i < ${#order[@]}; i++)); do
                run "${order[(i + turn) % ${#order[@]}]}" "$model" "$test" "$depth"
            done
            turn=$((turn + 1))
        done
    done
done
echo "llm-compare: $(wc -l <"$out/llm.jsonl") results in $out/llm.jsonl"
