#!/usr/bin/env bash
# The decode defaults checked in one GPU run (at most 590 s: every part has its limit), each
# part's output in its own file under $OUT, a summary on stdout:
#   correct.txt   every MUL_MAT and FLASH_ATTN_EXT list in the three modes (defaults,
#                 `--no-subgroup-matrix`, `--config 16x8x16`): FAIL lines and each verdict
#   misses.txt    the decode targets still missed and what limits each: the probes (loads
#                 without arithmetic, the quantize pass twice, f16's arithmetic without a's
#                 loads) for q6_K / q8_0 / f16 at n = 1 and 8, the n=1 row shapes of q6_K and
#                 q8_0, attention's loads alone and without its reduce pass at three KV
#                 lengths, its quantized caches without their dequantization
#   dc/           `bench/decode-compare.sh` with the attention decode cases, for the types whose
#                 mat-vec changed last (TYPES), beside upstream
#
# Usage (on the GPU machine, from the repository root):
#   OUT=DIR bash bench/decode-verify.sh BUNDLE_DIR UPSTREAM_DIR
# FA_LISTS=0 leaves out the attention lists (250 s of the 590) when only mat-vec kernels changed.
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
    if [ "${FA_LISTS:-1}" != 0 ]; then
        list 130 test -o FLASH_ATTN_EXT
        list 70 --no-subgroup-matrix test -o FLASH_ATTN_EXT -p 'nb=[1-4],'
        list 50 --config 16x8x16 test -o FLASH_ATTN_EXT -p 'nb=[1-4],'
    fi
} >"$out/correct.txt" 2>&1
cat "$out/correct.txt"
# The targets still missed: what limits each (the loads without the arithmetic, the quantize
# pass twice; for f16 the arithmetic without a's loads), the n=1 shapes around q6_K's and
# q8_0's defaults, attention's loads alone and its kernel without the reduce pass at kv = 256,
# 16384, 32768 (its fixed part, its second dispatch and its stream) and its quantized caches
# without their dequantization.
fa_case() { echo "FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=$1,nb=1${2:-})"; }
{
    KNOBS="vec_int_probe=1 vec_int_probe=2" MIN_TIME=0.3 timeout 50 bash "$here/knob-sweep.sh" "$bundle" \
        -o MUL_MAT -p 'type_a=(q6_K|q8_0|f16),type_b=f32,m=4096,n=[18],k=14336,'
    KNOBS="vec_int_q8_0_n1=0 vec_int_groups=8,vec_int_q8_0_n1=0 vec_int_rows=1,vec_int_q8_0_n1=0 \
vec_int_rows_k=4 vec_int_rows_k=4,vec_int_groups_q6k=16" MIN_TIME=0.3 timeout 30 bash "$here/knob-sweep.sh" \
        "$bundle" -o MUL_MAT -p 'type_a=(q6_K|q8_0),type_b=f32,m=4096,n=1,k=14336,'
    timeout 30 "$run" perf -v --min-time 0.3 --case "$(fa_case 256)" --case "$(fa_case 16384)" \
        --case "$(fa_case 32768)" --case "$(fa_case 16384 ,type_K=q8_0,type_V=q8_0)" \
        --case "$(fa_case 16384 ,type_K=q4_0,type_V=q4_0)" 2>&1 | strip | grep -A1 'us/run'
    VAR=GGML_DAWN_FA KNOBS="vec_probe=2 vec_probe=3" MIN_TIME=0.3 timeout 30 bash "$here/knob-sweep.sh" "$bundle" \
        --case "$(fa_case 256)" --case "$(fa_case 16384)" --case "$(fa_case 32768)"
    VAR=GGML_DAWN_FA KNOBS="vec_probe=1" MIN_TIME=0.3 timeout 25 bash "$here/knob-sweep.sh" "$bundle" \
        --case "$(fa_case 16384 ,type_K=q8_0,type_V=q8_0)" --case "$(fa_case 16384 ,type_K=q4_0,type_V=q4_0)"
} >"$out/misses.txt" 2>&1
cat "$out/misses.txt"
WITH_FA=1 UPSTREAM_TIMEOUT=55 MIN_TIME=0.1 OUT="$out/dc" timeout 55 bash "$here/decode-compare.sh" "$bundle" \
    "$upstream" "${TYPES:-q8_0}" >"$out/dc.log" 2>&1
cat "$out/dc/table.md"
