#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with gpu-bundle.tar.xz (made here by
# `cargo xtask bundle && tar -cJf gpu-bundle.tar.xz gpu-bundle`) beside it. Usage:
#   bash bench/h200.sh [quick|full|perf-mm|perf-fa|test]   (results also under $OUT when set)
set -uo pipefail
out=${OUT:-/tmp/bench-out}
mkdir -p "$out" /tmp/bundle
tar -xJf gpu-bundle.tar.xz -C /tmp/bundle
B=/tmp/bundle/gpu-bundle/run
mode=${1:-quick}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null | tee "$out/gpu.txt"
$B info > "$out/info.txt" 2>&1; head -4 "$out/info.txt"; grep -A8 "subgroup-matrix configs" "$out/info.txt"
perf_cases() {
    for spec in "$@"; do $B perf --min-time "${MIN_TIME:-1}" --case "$spec"; done 2>&1 | tee -a "$out/perf.txt"
}
MM='MUL_MAT(type_a=%s,type_b=f32,m=4096,n=%s,k=14336)'
mm_set() { for t in $1; do for n in $2; do printf "$MM\n" "$t" "$n"; done; done; }
case $mode in
quick)
    $B golden tests/data/golden > "$out/golden.txt" 2>&1; tail -1 "$out/golden.txt"
    mapfile -t cases < <(mm_set "f16 q4_0" "1 512")
    perf_cases "${cases[@]}" 'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1)'
    ;;
perf-mm)
    mapfile -t cases < <(mm_set "${TYPES:-f16 q4_0 q8_0 q4_K q6_K}" "${NS:-1 8 512}")
    perf_cases "${cases[@]}"
    ;;
perf-fa)
    perf_cases \
        'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1)' \
        'FLASH_ATTN_EXT(hsk=64,hsv=64,nh=8,nr23=[4,1],kv=16384,nb=1)' \
        'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q8_0,type_V=q8_0)' \
        'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q4_0,type_V=q4_0)' \
        'FLASH_ATTN_EXT(hsk=72,hsv=72,nh=16,nr23=[1,1],kv=5776,nb=5776,mask=0)' \
        'FLASH_ATTN_EXT(hsk=64,hsv=64,nh=8,nr23=[8,1],kv=7680,nb=512,type_K=q4_0,type_V=q4_0)' \
        'FLASH_ATTN_EXT(hsk=64,hsv=64,nh=8,nr23=[8,1],kv=7680,nb=512,type_K=q8_0,type_V=q8_0)'
    ;;
test)
    $B golden tests/data/golden > "$out/golden.txt" 2>&1; tail -1 "$out/golden.txt"
    $B test -o MUL_MAT > "$out/test-mm.txt" 2>&1; tail -1 "$out/test-mm.txt"
    $B test -o FLASH_ATTN_EXT > "$out/test-fa.txt" 2>&1; tail -1 "$out/test-fa.txt"
    ;;
full)
    $B perf > "$out/perf-all.txt" 2>&1; tail -5 "$out/perf-all.txt"
    ;;
esac
