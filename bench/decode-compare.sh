#!/usr/bin/env bash
# Decode side by side: every MUL_MAT perf case with n = 1, 2, 3, 4, 5, 8 and every FLASH_ATTN_EXT
# perf case with nb <= 4, ours (`backend-ops perf`) and upstream's `test-backend-ops perf -b
# WebGPU` alternating type by type, so that the machine's noise hits both alike. Prints one
# table: case, ours, upstream (us/run), upstream/ours (> 1: ours is faster).
#
# Usage (on the GPU machine, from the repository root):
#   bash bench/decode-compare.sh BUNDLE_DIR UPSTREAM_DIR [TYPES]
# BUNDLE_DIR: an unpacked `cargo xtask bundle`; UPSTREAM_DIR: a folder holding a
# ggml-<rev>-webgpu-test-backend-ops.tar.xz that `cargo xtask upstream` packed, or that tarball
# (see bench/run-upstream.sh). Results also go under $OUT (on a remote runner, a folder that comes
# back: the table there is rewritten after every type, so a run cut short keeps what it measured).
# UPSTREAM_N (a regex, default [1-58]) narrows upstream's n, whose n = 5 and 8 cases take its
# slow matrix path (over 1 ms each) and most of the run's time.
# Prefill instead of decode: MM_N=512 FA_NB='([5-9]|[0-9][0-9]+)' (the n and nb regexes; the
# defaults are decode's [1-58] and [1-4]).
set -uo pipefail
bundle=$1
upstream=$2
types=${3:-"f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m iq4_nl iq4_xs mxfp4 nvfp4 q1_0"}
out=${OUT:-/tmp/decode-compare}
mkdir -p "$out"
min_time=${MIN_TIME:-0.3}
mm_n=${MM_N:-[1-58]}
fa_nb=${FA_NB:-[1-4]}
ours() { "$bundle/run" perf --min-time "$min_time" "$@"; }
# UPSTREAM_TIMEOUT: seconds for each run of upstream's program (default 0: none); a run cut
# short leaves its cases without an upstream figure.
theirs() { timeout "${UPSTREAM_TIMEOUT:-0}" sh "$(dirname "$0")/run-upstream.sh" "$bundle" "$upstream" perf -b WebGPU "$@"; }
# "CASE us" per line from either program's perf output (colour codes and spacing removed).
times() { sed -E 's/\x1b\[[0-9;]*m//g' | grep -E 'us/run' | sed -E 's/^ *([A-Z_]+\([^)]*\)): +[0-9]+ runs - +([0-9.]+) us\/run.*/\1 \2/'; }
: >"$out/ours.txt"
: >"$out/upstream.txt"
# Join on the case string (ours prints upstream's full case string) into $out/table.md; redone
# after every type, so that a run cut short keeps the table of what it measured.
table() {
awk 'NR == FNR { up[$1] = $2; next }
     { u = ($1 in up) ? up[$1] : "-"; r = (u == "-") ? "-" : sprintf("%.2f", u / $2);
       c = $1; gsub(/,bs=\[1,1\],nr=\[1,1\],per=\[0,1,2,3\],k_v=0,o=1,src_overlap=0/, "", c);
       gsub(/,mask=1,sinks=0,max_bias=0.000000,logit_softcap=0.000000,prec=f32/, "", c);
       gsub(/,permute=\[0,1,2,3\],kv_view=1,v_is_view_of_k=0/, "", c);
       printf "| %s | %s | %s | %s |%s\n", c, $2, u, r, (r != "-" && r + 0 < 1) ? " slower" : "" }' \
    "$out/upstream.txt" "$out/ours.txt" >"$out/table.md"
}
for t in $types; do
    theirs -o MUL_MAT -p "type_a=$t,type_b=f32,m=4096,n=${UPSTREAM_N:-$mm_n},k=14336," 2>&1 | times >>"$out/upstream.txt"
    ours -o MUL_MAT -p "type_a=$t,type_b=f32,m=4096,n=$mm_n,k=14336," 2>&1 | times >>"$out/ours.txt"
    table
done
if [ -z "${3:-}" ] || [ -n "${WITH_FA:-}" ]; then
    theirs -o FLASH_ATTN_EXT -p "nb=$fa_nb," 2>&1 | times >>"$out/upstream.txt"
    ours -o FLASH_ATTN_EXT -p "nb=$fa_nb," 2>&1 | times >>"$out/ours.txt"
    table
fi
cat "$out/table.md"
echo "slower than upstream: $(grep -c ' slower$' "$out/table.md") of $(wc -l <"$out/table.md")"
