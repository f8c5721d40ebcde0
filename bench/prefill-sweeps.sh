#!/usr/bin/env bash
# The prefill measurements for a GPU, one device run: the subgroup-matrix GEMM's probes, and the
# attention mma kernel's probes (mma_probe=1: the K/V staging alone; 2: the math alone) beside
# its defaults and its subgroups (8, then 16, at every head size), keys per tile, prefetch and O
# budget.
# Each line: the case, then us/run with the defaults and under each setting (bench/knob-sweep.sh).
#
# Usage (on the GPU machine, from the repository root): bash bench/prefill-sweeps.sh BUNDLE_DIR
# (an unpacked `cargo xtask bundle`). MIN_TIME as in knob-sweep.sh (default here 0.2).
set -uo pipefail
bundle=$1
here=$(dirname "$0")
export MIN_TIME=${MIN_TIME:-0.2}
# (The tile shapes were measured on 2026-12-05, BENCHMARKS.md: 128x64 and 64x128 on 256
# invocations, 256x128, one 32-deep stage and no prefetch were all slower than the defaults.)
echo "== GEMM: the probes (1: staging alone, 2: the multiplies alone) and the f16 copies off, beside the defaults"
KNOBS="sg_probe=1 sg_probe=2 sg_a_f16_min_n=1048576 sg_b_f16_min_n=1048576" \
    timeout 200 bash "$here/knob-sweep.sh" "$bundle" -o MUL_MAT -p 'type_a=(f16|q4_0|q8_0|q4_K|q6_K),type_b=f32,m=4096,n=512,k=14336,'
echo "== attention mma kernel: probes, subgroups, keys per tile, prefetch, O budget"
VAR=GGML_DAWN_FA KNOBS="mma_probe=1 mma_probe=2 mma_small_head=0 mma_subgroups=16,mma_small_head=0 mma_kv=32 mma_kv=128 mma_prefetch=1 mma_o_budget=64" \
    timeout 200 bash "$here/knob-sweep.sh" "$bundle" -o FLASH_ATTN_EXT -p 'nb=(512|5776),'
