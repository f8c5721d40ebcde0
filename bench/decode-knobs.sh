#!/usr/bin/env bash
# The open decode questions in one GPU run, each part's output in its own file under $OUT (so
# that nothing is lost when a remote runner returns only the tail of the output), a summary on
# stdout:
#   correct.txt  MUL_MAT n <= 8 with the defaults and with both 16-byte knobs on everywhere; the
#                attention lists of q8_0 / q4_0 caches
#   int.txt      the integer mat-vec at n=1: the defaults (16-byte words for the K-quants on GPUs)
#                beside `vec_int_a_vec4` off and on for every format, other rows and groups, and
#                one dispatch (`vec_int_fused=1`)
#   float.txt    the float mat-vec at n = 1, 2, 4, 8: the defaults (16-byte words on GPUs, f16 /
#                bf16 with `vec_acc_max_halves` accumulators) beside the knob off and other caps
#   narrow.txt   (NARROW=1 only; H100 2026-12-06: 2-4x slower) f32 / f16 at n=8 through the
#                subgroup-matrix kernel's narrow tile instead of the mat-vec (`vec_max_n=4`)
#   fa.txt       attention decode of f16 / q8_0 / q4_0 caches, OLD_BUNDLE and BUNDLE alternating
#                three rounds (when OLD_BUNDLE is given), and BUNDLE with `vec_probe=1`
#   fixed.txt    `bench/decode-sweeps.sh`'s fixed costs (tiny ops, the host's part of each time)
#
# Usage (on the GPU machine, from the repository root):
#   OUT=DIR bash bench/decode-knobs.sh BUNDLE_DIR [OLD_BUNDLE_DIR]
set -uo pipefail
bundle=$1
old=${2:-}
out=${OUT:-/tmp/decode-knobs}
here=$(dirname "$0")
mkdir -p "$out"
run=$bundle/run
strip() { sed -E 's/\x1b\[[0-9;]*m//g'; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | tee "$out/gpu.txt"
{
    echo "== MUL_MAT n <= 8, defaults"
    timeout 120 "$run" test -o MUL_MAT -p 'n=[1-8],' 2>&1 | strip | grep -E 'FAIL|passed'
    echo "== MUL_MAT n <= 8, vec_float_vec4=1,vec_int_a_vec4=1"
    GGML_DAWN_MUL_MAT=vec_float_vec4=1,vec_int_a_vec4=1 timeout 120 "$run" test -o MUL_MAT -p 'n=[1-8],' 2>&1 |
        strip | grep -E 'FAIL|passed'
    echo "== FLASH_ATTN_EXT, q8_0 / q4_0 K"
    timeout 90 "$run" test -o FLASH_ATTN_EXT -p 'type_K=q(8|4)_0' 2>&1 | strip | grep -E 'FAIL|passed'
} >"$out/correct.txt" 2>&1
tail -n 4 "$out/correct.txt"
KNOBS="vec_int_a_vec4=0 vec_int_a_vec4=1 vec_int_rows_k=1,vec_int_groups_k=8 vec_int_fused=1" \
    MIN_TIME=0.2 timeout 120 bash "$here/knob-sweep.sh" "$bundle" -o MUL_MAT \
    -p 'type_a=(q4_0|q8_0|q4_K|q5_K|q6_K),type_b=f32,m=4096,n=1,k=14336,' >"$out/int.txt" 2>&1
cat "$out/int.txt"
KNOBS="vec_float_vec4=0 vec_acc_max_halves=80 vec_acc_max_halves=24 vec_acc_max=40" \
    MIN_TIME=0.2 timeout 150 bash "$here/knob-sweep.sh" "$bundle" -o MUL_MAT \
    -p 'type_a=(f32|f16|bf16),type_b=f32,m=4096,n=[1248],k=14336,' >"$out/float.txt" 2>&1
cat "$out/float.txt"
if [ -n "${NARROW:-}" ]; then
KNOBS="vec_max_n=4 vec_max_n=4,sg_b_f16_min_n=1 vec_max_n=4,sg_b_f16_min_n=1,sg_small_count_m=8 vec_max_n=4,sg_b_f16_min_n=1,sg_tk=128" \
    MIN_TIME=0.2 timeout 80 bash "$here/knob-sweep.sh" "$bundle" -o MUL_MAT \
    -p 'type_a=(f32|f16),type_b=f32,m=4096,n=8,k=14336,' >"$out/narrow.txt" 2>&1
GGML_DAWN_MUL_MAT=vec_max_n=4,sg_b_f16_min_n=1 timeout 20 "$run" perf -v --min-time 0.1 -o MUL_MAT \
    -p 'type_a=f16,type_b=f32,m=4096,n=8,k=14336,' 2>&1 | strip | tail -n 4 >>"$out/narrow.txt"
cat "$out/narrow.txt"
fi
cases=()
for t in f16 q8_0 q4_0; do
    cases+=(--case "FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=$t,type_V=$t)")
done
fa() { timeout 30 "$1/run" perf --min-time 0.2 "${cases[@]}" 2>&1 | strip | grep 'us/run' |
    sed -E 's/^ *FLASH_ATTN_EXT\(.*type_K=([a-z0-9_]+),.*: +[0-9]+ runs - +([0-9.]+) us\/run.*/\1 \2/'; }
{
    for round in 1 2 3; do
        if [ -n "$old" ]; then echo "-- round $round, old"; fa "$old"; fi
        echo "-- round $round, new"; fa "$bundle"
        echo "-- round $round, new, vec_probe=1"; GGML_DAWN_FA=vec_probe=1 fa "$bundle"
    done
} >"$out/fa.txt" 2>&1
cat "$out/fa.txt"
SECTIONS=fixed timeout 100 bash "$here/decode-sweeps.sh" "$bundle" >"$out/fixed.txt" 2>&1
cat "$out/fixed.txt"
