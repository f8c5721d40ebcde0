#!/usr/bin/env bash
# The decode targets in one short GPU run (about 160 s; each part has its limit), for when device
# time is scarce: each part's output in its own file under $OUT, and on stdout.
#   targets.txt   the target cases: MUL_MAT f16 / q4_0 / q8_0 / q4_K / q6_K at n = 1 and 8, the
#                 attention decode cases (hsk=128, kv=16384 nr23=[4,1] with f16, q8_0 and q4_0
#                 caches; kv=4096 nr23=[1,1])
#   misses.txt    q8_0 and q6_K at n=1: the old q8_0 shape, the loads alone, the quantize pass
#                 twice, 4-row groups, one-row workgroups of 256 and 128 lanes; attention's loads alone and its kernel without the reduce
#                 pass at kv = 256, 16384, 32768
#   correct.txt   upstream's q8_0 MUL_MAT cases (q8_0's n=1 shape is the newest kernel)
#
# Usage (on the GPU machine, from the repository root):
#   OUT=DIR bash bench/decode-targets.sh BUNDLE_DIR
# REQUIRE_GPU=NAME stops at once (exit 3) unless the GPU's name contains NAME (the targets are
# one machine's figures: a run on another kind spends the time for nothing).
set -uo pipefail
bundle=$1
out=${OUT:-/tmp/decode-targets}
here=$(dirname "$0")
mkdir -p "$out"
run=$bundle/run
strip() { sed -E 's/\x1b\[[0-9;]*m//g'; }
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)
echo "$gpu" | tee "$out/gpu.txt"
if [ -n "${REQUIRE_GPU:-}" ] && [[ $gpu != *"$REQUIRE_GPU"* ]]; then
    echo "not a $REQUIRE_GPU: stopping"
    exit 3
fi
fa() { echo "FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[$2,1],kv=$1,nb=1${3:-})"; }
{
    timeout 35 "$run" perf --min-time 0.4 -o MUL_MAT \
        -p 'type_a=(f16|q4_0|q8_0|q4_K|q6_K),type_b=f32,m=4096,n=[18],k=14336,' 2>&1 | strip | grep us/run
    timeout 20 "$run" perf --min-time 0.4 --case "$(fa 16384 4)" --case "$(fa 4096 1)" \
        --case "$(fa 16384 4 ,type_K=q8_0,type_V=q8_0)" --case "$(fa 16384 4 ,type_K=q4_0,type_V=q4_0)" \
        2>&1 | strip | grep us/run
} >"$out/targets.txt" 2>&1
cat "$out/targets.txt"
{
    KNOBS="vec_int_q8_0_n1=0 vec_int_probe=1 vec_int_probe=2 vec_int_rows_k=4 \
vec_int_q8_0_n1=0,vec_int_rows=1,vec_int_groups=1 vec_int_q8_0_n1=0,vec_int_rows=1,vec_int_groups=1,vec_wg=128" \
        MIN_TIME=0.3 timeout 40 bash "$here/knob-sweep.sh" "$bundle" -o MUL_MAT \
        -p 'type_a=(q6_K|q8_0),type_b=f32,m=4096,n=1,k=14336,'
    VAR=GGML_DAWN_FA KNOBS="vec_probe=2 vec_probe=3" MIN_TIME=0.3 timeout 25 bash "$here/knob-sweep.sh" \
        "$bundle" --case "$(fa 256 4)" --case "$(fa 16384 4)" --case "$(fa 32768 4)"
} >"$out/misses.txt" 2>&1
cat "$out/misses.txt"
{
    timeout 25 "$run" test -o MUL_MAT -p 'type_a=q8_0,' 2>&1 | strip | grep -E 'FAIL|^[0-9]+ passed' ||
        echo "(no verdict: cut at 25 s or crashed)"
} >"$out/correct.txt" 2>&1
cat "$out/correct.txt"
