#!/usr/bin/env bash
# The decode defaults checked in one GPU run (at most 580 s: every part has its limit), each
# part's output in its own file under $OUT, a summary on stdout:
#   correct.txt   every MUL_MAT and FLASH_ATTN_EXT list in the three modes (defaults,
#                 `--no-subgroup-matrix`, `--config 16x8x16`): FAIL lines and each verdict
#   levels.txt    the 4-bit-level formats on the integer mat-vec: `vec_int_fp4=1` (nvfp4 at n=1
#                 too), `vec_int_iq4xs=2` and the levels' workgroup table (`vec_int_lut=2`)
#                 checked; iq4_nl / iq4_xs / mxfp4 / nvfp4 at n = 1-8 on the defaults beside the
#                 fp4 knob off, the table, iq4_xs's knob, and both
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
    list 90 test -o FLASH_ATTN_EXT
    list 40 --no-subgroup-matrix test -o FLASH_ATTN_EXT -p 'nb=[1-4],'
    list 60 --config 16x8x16 test -o FLASH_ATTN_EXT -p 'nb=[1-4],'
} >"$out/correct.txt" 2>&1
cat "$out/correct.txt"
{
    GGML_DAWN_MUL_MAT=vec_int_fp4=1,vec_int_iq4xs=2,vec_int_lut=2 list 30 \
        test -o MUL_MAT -p 'type_a=(iq4_nl|iq4_xs|mxfp4|nvfp4),'
    KNOBS="vec_int_fp4=0 vec_int_lut=2 vec_int_iq4xs=2 vec_int_iq4xs=2,vec_int_lut=2" MIN_TIME=0.2 timeout 100 \
        bash "$here/knob-sweep.sh" "$bundle" -o MUL_MAT -p 'type_a=(iq4_nl|iq4_xs|mxfp4|nvfp4),type_b=f32,m=4096,n=[1-58],k=14336,'
} >"$out/levels.txt" 2>&1
cat "$out/levels.txt"
WITH_FA=1 UPSTREAM_TIMEOUT=60 MIN_TIME=0.1 OUT="$out/dc" timeout 130 bash "$here/decode-compare.sh" "$bundle" \
    "$upstream" "${TYPES:-iq4_nl mxfp4 nvfp4 iq4_xs q8_0}" >"$out/dc.log" 2>&1
cat "$out/dc/table.md"
