#!/usr/bin/env bash
# A tuning sweep: the same perf cases under each setting of a tuning variable, one program run
# per setting, so settings can be compared without rebuilding. Prints one line per case: the
# case, then us/run under each setting (the first column is the defaults).
#
# Usage (on the GPU machine, from the repository root):
#   KNOBS="vec_int_prefetch=1 vec_int_groups_k=4,vec_int_prefetch=1" \
#     bash bench/knob-sweep.sh BUNDLE_DIR -o MUL_MAT -p 'type_a=q4_K,.*n=1,'
# KNOBS: space-separated settings; VAR: the variable (GGML_DAWN_MUL_MAT, or GGML_DAWN_FA);
# MIN_TIME: seconds per case (default 0.1); results also go to $OUT/sweep.txt when OUT is set.
set -uo pipefail
bundle=$1
shift
var=${VAR:-GGML_DAWN_MUL_MAT}
min_time=${MIN_TIME:-0.1}
times() { sed -E 's/\x1b\[[0-9;]*m//g' | grep -E 'us/run' | sed -E 's/^ *([A-Z_]+\([^)]*\)): +[0-9]+ runs - +([0-9.]+) us\/run.*/\1 \2/'; }
raw=$(mktemp)
for knobs in defaults ${KNOBS:-}; do
    if [ "$knobs" = defaults ]; then
        env -u "$var" "$bundle/run" perf --min-time "$min_time" "$@" 2>&1 | times | sed "s/^/$knobs /"
    else
        env "$var=$knobs" "$bundle/run" perf --min-time "$min_time" "$@" 2>&1 | times | sed "s/^/$knobs /"
    fi
done >"$raw"
{ printf 'case'; for knobs in defaults ${KNOBS:-}; do printf ' | %s' "$knobs"; done; echo; } | tee ${OUT:+"$OUT/sweep.txt"}
awk '{ c = $2; gsub(/,bs=\[1,1\],nr=\[1,1\],per=\[0,1,2,3\],k_v=0,o=1,src_overlap=0/, "", c);
       if (!(c in seen)) { seen[c] = 1; order[++n] = c }
       if (!($1 in kseen)) { kseen[$1] = 1; korder[++nk] = $1 }
       t[c, $1] = $3 }
     END { for (i = 1; i <= n; i++) { line = order[i];
             for (j = 1; j <= nk; j++) line = line " | " ((order[i], korder[j]) in t ? t[order[i], korder[j]] : "-");
             print line } }' "$raw" | tee ${OUT:+-a "$OUT/sweep.txt"}
rm -f "$raw"
