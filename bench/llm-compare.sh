#!/usr/bin/env bash
# Tokens per second of `dawn-llm bench` beside llama.cpp's `llama-bench` on its WebGPU, Vulkan
# (and, when built, CUDA) backends: the same GGUF files, the same tests, the programs alternating
# test by test in one run. Device memory is sampled (nvidia-smi) while each program runs.
#
# Usage (on the GPU machine, from the repository root):
#   LLM=DIR BUNDLE=DIR OUT=DIR bash bench/llm-compare.sh MODEL.gguf...
# LLM: a bundle of dawn-llm (`cargo xtask bundle --package ggml-dawn-llm --bin dawn-llm`);
# BUNDLE: a bundle carrying llama.cpp's tools (`run-llama`, from `cargo xtask upstream --llama`);
# CUDA_BENCH: llama-bench of a CUDA build (bench/llama-cuda.sh), if any.
# Environment: TESTS (default "pp512 tg128"), DEPTHS (default "0 4096"), REPS (default 3),
# PROGRAMS (default "dawn webgpu vulkan", plus cuda when CUDA_BENCH is set).
# Results: $OUT/llm.jsonl (one line per program and test, llama-bench's fields plus "program"),
# $OUT/memory.csv (time, MiB used) and $OUT/runs.txt (what ran when). Summarise with
# `python3 bench/llm-table.py $OUT`.
set -uo pipefail
llm=${LLM:?LLM: the dawn-llm bundle}
bundle=${BUNDLE:?BUNDLE: the bundle with run-llama}
out=${OUT:-/tmp/llm-out}
reps=${REPS:-3}
tests=${TESTS:-pp512 tg128}
depths=${DEPTHS:-0 4096}
programs=${PROGRAMS:-dawn webgpu vulkan${CUDA_BENCH:+ cuda}}
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
    dawn) lines=$("$llm/run" bench "${args[@]}" -o jsonl -v 2>>"$out/dawn-stderr.txt") ;;
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

for model in "$@"; do
    for depth in $depths; do
        for test in $tests; do
            for program in $programs; do
                run "$program" "$model" "$test" "$depth"
            done
        done
    done
done
echo "llm-compare: $(wc -l <"$out/llm.jsonl") results in $out/llm.jsonl"
