#!/usr/bin/env bash
# The decode sweeps, one device run (first measured on an H100 on 2026-12-05, BENCHMARKS.md):
# the float mat-vec with b staged in workgroup memory (vec_b_shared), the attention decode
# kernel's splits and threads (its fixed cost), and the n=1 integer mat-vec's alternatives for
# q4_0, q8_0, q4_K and q6_K.
# Each line: the case, then us/run with the defaults and under each setting (bench/knob-sweep.sh).
#
# Usage (on the GPU machine, from the repository root): bash bench/decode-sweeps.sh BUNDLE_DIR
# (an unpacked `cargo xtask bundle`). MIN_TIME as in knob-sweep.sh (default here 0.2).
set -uo pipefail
bundle=$1
here=$(dirname "$0")
export MIN_TIME=${MIN_TIME:-0.2}
echo "== float mat-vec: b staged in workgroup memory"
KNOBS="vec_b_shared=128 vec_b_shared=256 vec_b_shared=512 vec_b_shared=256,vec_groups_wide=2 vec_b_shared=512,vec_wg=512 vec_b_shared=256,vec_acc_max=128" \
    timeout 150 bash "$here/knob-sweep.sh" "$bundle" -o MUL_MAT -p 'type_a=(f16|f32|bf16),type_b=f32,m=4096,n=[2458],k=14336,'
echo "== attention decode: splits (split=1: one dispatch, no reduce), threads, keys in flight"
VAR=GGML_DAWN_FA KNOBS="split=1 split=8 split=16 split=32 split=128 target_wg=1024 vec_threads=64 vec_threads=256 vec_keys=8 vec_prefetch=1" \
    timeout 150 bash "$here/knob-sweep.sh" "$bundle" -o FLASH_ATTN_EXT -p 'hsk=128,hsv=128,nh=8,nr23=\[[14],1\],kv=(256|4096|16384),nb=1,.*type_K=f16'
echo "== attention decode of a quantized cache: the same loads decoded as f16 (vec_probe=1), its dequantization's cost"
VAR=GGML_DAWN_FA KNOBS="vec_probe=1" \
    timeout 90 bash "$here/knob-sweep.sh" "$bundle" -o FLASH_ATTN_EXT \
    --case 'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=f16,type_V=f16)' \
    --case 'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q8_0,type_V=q8_0)' \
    --case 'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q4_0,type_V=q4_0)'
echo "== integer mat-vec at n=1 (vec_int_probe=2: b's quantize pass twice, its cost by difference)"
KNOBS="vec_int_slots_min_n=1 vec_int_prefetch=1 vec_int_groups_k=8,vec_int_groups=8 vec_wg=128 vec_int_probe=2" \
    timeout 120 bash "$here/knob-sweep.sh" "$bundle" -o MUL_MAT -p 'type_a=(q4_0|q8_0|q4_K|q6_K),type_b=f32,m=4096,n=1,k=14336,'
echo "== correctness with b staged"
GGML_DAWN_MUL_MAT=vec_b_shared=256 timeout 60 "$bundle/run" test -o MUL_MAT -p 'type_a=(f32|f16|bf16),.*n=[2-8],' 2>&1 | tail -1
