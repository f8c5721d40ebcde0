#!/usr/bin/env bash
# The decode defaults checked in one GPU run (at most 590 s: every part has its limit), each
# part's output in its own file under $OUT, a summary on stdout:
#   correct.txt   every MUL_MAT and FLASH_ATTN_EXT list in the three modes (defaults,
#                 `--no-subgroup-matrix`, `--config 16x8x16`): FAIL lines and each verdict
#   misses.txt    the decode targets still missed and what limits each: the probes (loads
#                 without arithmetic, the quantize pass twice) for q6_K / q8_0 / f16 at n = 1
#                 and 8, the n=1 row shapes of q6_K and q8_0, f16's at n = 1 and 8,
#                 attention's fixed cost, split and shapes, its quantized caches without
#                 their dequantization
#   dc/           `bench/decode-compare.sh` with the attention decode cases, for the types whose
#                 mat-vec changed last (TYPES), beside upstream
#
# Usage (on the GPU machine, from the repository root):
#   OUT=DIR bash bench/decode-verify.sh BUNDLE_DIR UPSTREAM_DIR
set -uo pipefail
bundle=$1
upstream=$2
out=${OUT:-/tmp/decode-verify}
here=$(dirname "$0")
mkdir -p "$out"
run=$bundle/run
strip() { sed -E 's/\x1b\[[0-9;]*m//g'; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | tee "$out/gpu.txt"
# A list, its FAIL lines and its verdict (a list cut by its limit says so).
list() {
    local limit=$1
    shift
    echo "== $*"
    local log
    log=$(timeout "$limit" "$run" "$@" 2>&1 | strip)
    grep -E 'FAIL' <<<"$log"
    grep -E '^[0-9]+ passed' <<<"$log" || echo "(no verdict: cut at $limit s or crashed)"
}
{
    list 60 test -o MUL_MAT
    list 30 --no-subgroup-matrix test -o MUL_MAT
    list 30 --config 16x8x16 test -o MUL_MAT
    list 80 test -o FLASH_ATTN_EXT
    list 40 --no-subgroup-matrix test -o FLASH_ATTN_EXT -p 'nb=[1-4],'
    list 50 --config 16x8x16 test -o FLASH_ATTN_EXT -p 'nb=[1-4],'
} >"$out/correct.txt" 2>&1
cat "$out/correct.txt"
# The targets still missed: what limits each (the loads without the arithmetic, the quantize
# pass twice), the n=1 shapes around q6_K's and q8_0's defaults and f16's at n = 1 and 8,
# attention's fixed cost (kv=256 and 32768 beside 16384, its split and shapes) and its
# quantized caches without their dequantization.
fa_case() { echo "FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=$1,nb=1${2:-})"; }
{
    KNOBS="vec_int_probe=1 vec_int_probe=2" MIN_TIME=0.3 timeout 50 bash "$here/knob-sweep.sh" "$bundle" \
        -o MUL_MAT -p 'type_a=(q6_K|q8_0|f16),type_b=f32,m=4096,n=[18],k=14336,'
    KNOBS="vec_int_rows=1 vec_int_rows=4 vec_int_groups=8 vec_int_prefetch=1 vec_int_stream=1 vec_int_rows_k=1 \
vec_int_rows_k=4 vec_int_groups_q6k=4 vec_int_groups_q6k=16" MIN_TIME=0.2 timeout 40 bash "$here/knob-sweep.sh" \
        "$bundle" -o MUL_MAT -p 'type_a=(q6_K|q8_0),type_b=f32,m=4096,n=1,k=14336,'
    KNOBS="vec_acc_max_halves=16 vec_acc_max_halves=64 vec_rows=2 vec_rows=8 vec_wg=128 vec_wg=512 vec_mma=1" \
        MIN_TIME=0.2 timeout 25 bash "$here/knob-sweep.sh" "$bundle" -o MUL_MAT \
        -p 'type_a=f16,type_b=f32,m=4096,n=[18],k=14336,'
    timeout 30 "$run" perf -v --min-time 0.3 --case "$(fa_case 256)" --case "$(fa_case 16384)" \
        --case "$(fa_case 32768)" --case "$(fa_case 16384 ,type_K=q8_0,type_V=q8_0)" \
        --case "$(fa_case 16384 ,type_K=q4_0,type_V=q4_0)" 2>&1 | strip | grep -A1 'us/run'
    VAR=GGML_DAWN_FA KNOBS="split=32 split=128 vec_threads=256 vec_keys=8 vec_prefetch=1 vec_lanes=8 \
vec_keys=8,vec_prefetch=1 split=128,vec_keys=8" MIN_TIME=0.2 timeout 25 bash "$here/knob-sweep.sh" "$bundle" --case "$(fa_case 16384)"
    VAR=GGML_DAWN_FA KNOBS="vec_probe=1" MIN_TIME=0.3 timeout 25 bash "$here/knob-sweep.sh" "$bundle" \
        --case "$(fa_case 16384 ,type_K=q8_0,type_V=q8_0)" --case "$(fa_case 16384 ,type_K=q4_0,type_V=q4_0)"
} >"$out/misses.txt" 2>&1
cat "$out/misses.txt"
WITH_FA=1 UPSTREAM_TIMEOUT=60 MIN_TIME=0.1 OUT="$out/dc" timeout 105 bash "$here/decode-compare.sh" "$bundle" \
    "$upstream" "${TYPES:-iq4_nl iq4_xs mxfp4 nvfp4 q8_0 q6_K}" >"$out/dc.log" 2>&1
cat "$out/dc/table.md"
