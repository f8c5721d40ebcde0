#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with gpu-bundle.tar.xz beside it: MUL_MAT
# n=512 under tuning-knob variants (GGML_DAWN_MUL_MAT), to attribute the subgroup-matrix
# kernel's time. Usage: bash bench/mm-variants.sh ["knobs" ...]   (default: the list below)
set -uo pipefail
out=${OUT:-/tmp/bench-out}
mkdir -p "$out" /tmp/bundle
[ -x /tmp/bundle/gpu-bundle/run ] || tar -xJf gpu-bundle.tar.xz -C /tmp/bundle
B=/tmp/bundle/gpu-bundle/run
MM='MUL_MAT(type_a=%s,type_b=f32,m=4096,n=%s,k=14336)'
p() { $B perf --min-time "${MIN_TIME:-0.2}" "$@" 2>&1 | grep -E "runs -|: subgroup|: mat-vec|: register|: simple|rror" | sed -E 's/,bs=\[1,1\],nr=\[1,1\],per=\[0,1,2,3\],k_v=0,o=1,src_overlap=0//; s/ +/ /g'; }
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(
    ""
    sg_acc_f16=1
    sg_stages=1
    sg_tk=64
    sg_pad=0
    sg_pad=16
    sg_count_m=4,sg_count_n=4,sg_tile_m=64,sg_tile_n=64
    sg_count_m=2,sg_count_n=2,sg_tile_m=64,sg_tile_n=64
    sg_count_m=4,sg_count_n=4,sg_tile_m=128,sg_tile_n=128
    sg_count_m=2,sg_count_n=2,sg_tile_m=128,sg_tile_n=128
)
for kv in "${variants[@]}"; do
    echo "== ${kv:-defaults}"
    GGML_DAWN_MUL_MAT=$kv p -v --case "$(printf "$MM" f16 512)" --case "$(printf "$MM" "${TYPE2:-q4_0}" 512)"
done 2>&1 | tee -a "$out/mm-variants.txt"
