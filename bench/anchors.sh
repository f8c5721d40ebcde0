#!/usr/bin/env bash
# The per-op anchors of the tokens/s comparison: upstream's MUL_MAT and FLASH_ATTN_EXT perf cases
# (the `upstream-perf` suite) timed by ours and by llama.cpp's own test-backend-ops on its Vulkan
# and (when built) CUDA backends on the same card, alternating case by case
# (`backend-ops compare perf`, one table per backend).
#
# Usage (on the GPU machine, from the repository root):
#   BUNDLE=DIR OUT=DIR bash bench/anchors.sh [SUITE]
# BUNDLE: a dawn-llm bundle made with backend-ops beside it (`cargo xtask bundle --package
# ggml-dawn-llm --bin dawn-llm --with-backend-ops`): its `run-ops` runs ours, its `run-llama
# test-backend-ops` llama.cpp's Vulkan build. CUDA_TBO: llama.cpp's test-backend-ops built for
# CUDA (`bash bench/llama-cuda.sh` leaves it in /tmp/llama-cuda/build-cuda/bin; used when there).
# Environment: BACKENDS (default "Vulkan0 CUDA0"), MIN_TIME (our time per case, seconds).
# Results: $OUT/anchors-BACKEND.md (the table) and .jsonl (each case, both sides).
set -uo pipefail
bundle=${BUNDLE:?BUNDLE: a dawn-llm bundle with run-ops and run-llama}
out=${OUT:-/tmp/anchors-out}
suite=${1:-upstream-perf}
cuda_tbo=${CUDA_TBO:-/tmp/llama-cuda/build-cuda/bin/test-backend-ops}
[ -x "$bundle/run-ops" ] || { echo "anchors: $bundle has no run-ops (bundle with --with-backend-ops)" >&2; exit 2; }
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt" 2>/dev/null || true
time_args=()
[ -z "${MIN_TIME:-}" ] || time_args+=(--min-time "$MIN_TIME")
for backend in ${BACKENDS:-Vulkan0 CUDA0}; do
    case $backend in
    CUDA*)
        [ -x "$cuda_tbo" ] || { echo "anchors: no CUDA test-backend-ops at $cuda_tbo; $backend skipped" >&2; continue; }
        upstream=(--upstream-bin "$cuda_tbo")
        ;;
    *)
        [ -x "$bundle/run-llama" ] || { echo "anchors: $bundle has no run-llama; $backend skipped" >&2; continue; }
        upstream=(--upstream-bin "$bundle/run-llama" --upstream-arg test-backend-ops)
        ;;
    esac
    "$bundle/run-ops" compare perf "${upstream[@]}" -b "$backend" --suite "$suite" "${time_args[@]}" \
        --save-json "$out/anchors-$backend.jsonl" | tee "$out/anchors-$backend.md"
done
