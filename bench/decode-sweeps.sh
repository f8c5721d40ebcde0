#!/usr/bin/env bash
# The decode measurements for a GPU, one device run: what an op costs beside its memory stream
# (tiny cases: the fixed cost of one and of two dispatches, and the host's part of every time),
# the attention decode of a quantized cache without its dequantization, and the n=1 integer
# mat-vec's alternatives for q4_0, q8_0, q4_K and q6_K.
# (Measured on 2026-12-05, BENCHMARKS.md, and no longer run here: the float mat-vec with b staged
# in workgroup memory, `vec_b_shared`, slower in every setting; the attention decode's splits,
# threads and keys in flight, where the defaults were best or within noise.)
#
# Usage (on the GPU machine, from the repository root): bash bench/decode-sweeps.sh BUNDLE_DIR
# (an unpacked `cargo xtask bundle`). MIN_TIME as in knob-sweep.sh (default here 0.2).
# SECTIONS: which parts to run (default "fixed probe int").
set -uo pipefail
sections=" ${SECTIONS:-fixed probe int} "
on() { case "$sections" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
bundle=$1
here=$(dirname "$0")
export MIN_TIME=${MIN_TIME:-0.2}
if on fixed; then
echo "== fixed costs: tiny ops (one dispatch: f16, q4_0 with vec_int_fused=1; two: q4_0, q4_K, attention) beside the decode cases; 'host' is the host's part of us/run"
fixed=(
    --case 'MUL_MAT(type_a=f16,type_b=f32,m=64,n=1,k=256)'
    --case 'MUL_MAT(type_a=q4_0,type_b=f32,m=64,n=1,k=256)'
    --case 'MUL_MAT(type_a=q4_K,type_b=f32,m=64,n=1,k=256)'
    --case 'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[1,1],kv=256,nb=1,type_K=f16,type_V=f16)'
    --case 'MUL_MAT(type_a=f16,type_b=f32,m=4096,n=1,k=14336)'
    --case 'MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336)'
    --case 'MUL_MAT(type_a=q8_0,type_b=f32,m=4096,n=1,k=14336)'
    --case 'MUL_MAT(type_a=q4_K,type_b=f32,m=4096,n=1,k=14336)'
    --case 'MUL_MAT(type_a=q6_K,type_b=f32,m=4096,n=1,k=14336)'
    --case 'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[1,1],kv=4096,nb=1,type_K=f16,type_V=f16)'
    --case 'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=f16,type_V=f16)'
)
timeout 90 "$bundle/run" perf -v --min-time "$MIN_TIME" "${fixed[@]}" 2>&1 |
    sed -E 's/\x1b\[[0-9;]*m//g' | grep -E 'us/run|host' | sed -E 's/ +[0-9.]+ [kMG]?FLOP\/run.*//; s/; .*//'
echo "-- the same tiny q4_0 case in one dispatch (vec_int_fused=1)"
GGML_DAWN_MUL_MAT=vec_int_fused=1 timeout 30 "$bundle/run" perf -v --min-time "$MIN_TIME" \
    --case 'MUL_MAT(type_a=q4_0,type_b=f32,m=64,n=1,k=256)' 2>&1 |
    sed -E 's/\x1b\[[0-9;]*m//g' | grep -E 'us/run|host' | sed -E 's/ +[0-9.]+ [kMG]?FLOP\/run.*//; s/; .*//'
fi
if on probe; then
echo "== attention decode of a quantized cache: the same loads decoded as f16 (vec_probe=1), its dequantization's cost"
VAR=GGML_DAWN_FA KNOBS="vec_probe=1" \
    timeout 90 bash "$here/knob-sweep.sh" "$bundle" -o FLASH_ATTN_EXT \
    --case 'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=f16,type_V=f16)' \
    --case 'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q8_0,type_V=q8_0)' \
    --case 'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q4_0,type_V=q4_0)'
fi
if on int; then
echo "== integer mat-vec at n=1 (vec_int_probe=1: loads without the products; 2: b's quantize pass twice, its cost by difference)"
KNOBS="vec_int_probe=1 vec_int_probe=2 vec_int_slots_min_n=1 vec_int_prefetch=1" \
    timeout 120 bash "$here/knob-sweep.sh" "$bundle" -o MUL_MAT -p 'type_a=(q4_0|q8_0|q4_K|q6_K),type_b=f32,m=4096,n=1,k=14336,'
fi
