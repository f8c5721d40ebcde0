#!/usr/bin/env bash
# The per-op anchors of the tokens/s comparison: llama.cpp's own test-backend-ops perf lists of
# MUL_MAT and FLASH_ATTN_EXT on its Vulkan and (when built) CUDA backends, and ours on the same
# case strings, op by op on the same card (each program's whole list of one op, then the other
# program's: one start-up of llama.cpp per op and backend, where running it once per case spent
# most of 4 s a case starting up), then `backend-ops compare` (one table per backend).
#
# Usage (on the GPU machine, from the repository root):
#   BUNDLE=DIR OUT=DIR bash bench/anchors.sh
# BUNDLE: a dawn-llm bundle made with backend-ops beside it (`cargo xtask bundle --package
# ggml-dawn-llm --bin dawn-llm --with-backend-ops`): its `run-ops` runs ours, its `run-llama
# test-backend-ops` llama.cpp's Vulkan build. CUDA_TBO: llama.cpp's test-backend-ops built for
# CUDA (`bash bench/llama-cuda.sh` leaves it in /tmp/llama-cuda/build-cuda/bin; used when there).
# Environment: BACKENDS (default "Vulkan0 CUDA0"), OPS (default "MUL_MAT FLASH_ATTN_EXT"),
# FILTER (llama.cpp's -p: cases whose parameters contain it), MIN_TIME (our time per case,
# seconds; default 0.2), ROUNDS (default 1: more repeat both programs, alternating).
# Time: llama.cpp's test-backend-ops runs each perf case for at least a second of graph time
# (and compiles each type's pipelines on Vulkan): about 3.6 s a case on an H100's Vulkan0, so its
# whole MUL_MAT list takes more than one 10-minute call (137 cases in 500 s); ours takes about
# 0.3 s a case. Narrow it, e.g. the decode and prefill shapes of the common types:
#   FILTER='type_a=(f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q4_K|q6_K),type_b=f32,m=4096,n=(1|8|512),k=14336'
# and FLASH_ATTN_EXT in a call of its own (its list is about 160 cases: narrow it too), e.g.
#   OPS=FLASH_ATTN_EXT FILTER='hsk=(64|128),hsv=(64|128),nh=8,nr23=\[(1|4),1\],kv=(4096|16384),nb=(1|4096)'
# Results: $OUT/anchors-BACKEND.md (the table), $OUT/llama-BACKEND-OP-ROUND.txt (llama.cpp's
# output), $OUT/ours-BACKEND-OP-ROUND.jsonl (ours).
set -uo pipefail
bundle=${BUNDLE:?BUNDLE: a dawn-llm bundle with run-ops and run-llama}
out=${OUT:-/tmp/anchors-out}
cuda_tbo=${CUDA_TBO:-/tmp/llama-cuda/build-cuda/bin/test-backend-ops}
ops=${OPS:-MUL_MAT FLASH_ATTN_EXT}
min_time=${MIN_TIME:-0.2}
rounds=${ROUNDS:-1}
[ -x "$bundle/run-ops" ] || { echo "anchors: $bundle has no run-ops (bundle with --with-backend-ops)" >&2; exit 2; }
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt" 2>/dev/null || true
filter=()
[ -z "${FILTER:-}" ] || filter=(-p "$FILTER")
for backend in ${BACKENDS:-Vulkan0 CUDA0}; do
    case $backend in
    CUDA*)
        [ -x "$cuda_tbo" ] || { echo "anchors: no CUDA test-backend-ops at $cuda_tbo; $backend skipped" >&2; continue; }
        llama=("$cuda_tbo")
        ;;
    *)
        [ -x "$bundle/run-llama" ] || { echo "anchors: $bundle has no run-llama; $backend skipped" >&2; continue; }
        llama=("$bundle/run-llama" test-backend-ops)
        ;;
    esac
    : >"$out/llama-$backend.txt"
    : >"$out/ours-$backend.jsonl"
    for round in $(seq 1 "$rounds"); do
        for op in $ops; do
            up="$out/llama-$backend-$op-$round.txt"
            "${llama[@]}" perf -b "$backend" -o "$op" "${filter[@]}" >"$up" 2>&1
            cat "$up" >>"$out/llama-$backend.txt"
            # The case strings llama.cpp timed, as ours reads them (--cases-file).
            sed -E 's/\x1b\[[0-9;]*m//g' "$up" | grep -E '^\s+[A-Z_]+\(.*\): +[0-9]+ runs' |
                sed -E 's/^\s+//; s/\): +[0-9]+ runs.*/)/' >"$out/cases-$backend-$op.txt"
            if [ -s "$out/cases-$backend-$op.txt" ]; then
                # Ours on these strings once a round: another backend's identical list reuses it.
                key=$(md5sum <"$out/cases-$backend-$op.txt" | cut -c1-16)
                done_file="$out/ours-$key-$round.jsonl"
                if [ ! -s "$done_file" ]; then
                    "$bundle/run-ops" --output json perf --cases-file "$out/cases-$backend-$op.txt" --min-time "$min_time" \
                        >"$done_file" 2>"$out/ours-$backend-$op-$round.err"
                fi
                cp "$done_file" "$out/ours-$backend-$op-$round.jsonl"
                cat "$out/ours-$backend-$op-$round.jsonl" >>"$out/ours-$backend.jsonl"
            fi
            echo "anchors: $backend $op round $round: $(grep -c . "$out/cases-$backend-$op.txt") cases"
        done
    done
    "$bundle/run-ops" compare --upstream "$out/llama-$backend.txt" --ours "$out/ours-$backend.jsonl" \
        --title "llama.cpp $backend time / ours" --plot "$out/anchors-$backend.svg" | tee "$out/anchors-$backend.md"
done
