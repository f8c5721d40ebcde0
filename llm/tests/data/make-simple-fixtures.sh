#!/bin/sh
# Greedy continuations of SmolLM2-135M-Instruct Q4_1 by llama.cpp's CPU backend, one JSON line per
# prompt: {"prompt", "n", "output": llama-simple's text (prompt and continuation), "steps": [[id,
# lead], …]: the ids llama-simple picks and by how much each one's logit leads the second best
# (from llama-greedy-margins.c, which decodes as llama-simple does)}.
# Usage: make-simple-fixtures.sh LLAMA_SOURCE LLAMA_BIN_DIR MODEL > smollm2-simple.jsonl
set -eu
src=$1
bin=$2
model=$3
n=24
margins=$(mktemp)
gcc -O1 "$(dirname "$0")/llama-greedy-margins.c" -I "$src/include" -I "$src/ggml/include" -L "$bin" -lllama -lggml -o "$margins"
for prompt in "The capital of France is" "Once upon a time, there was a little" "def fibonacci(n):" \
    "The three primary colors are" "<|im_start|>user
What is the largest planet in the solar system?<|im_end|>
<|im_start|>assistant
"; do
    out=$(LD_LIBRARY_PATH=$bin nice -n 15 "$bin/llama-simple" -m "$model" -n $n "$prompt" 2>/dev/null; echo x)
    steps=$(LD_LIBRARY_PATH=$bin nice -n 15 "$margins" "$model" $n "$prompt" 2>/dev/null)
    python3 -c 'import json, sys
steps = [[int(l.split()[1]), float(l.split()[2])] for l in sys.argv[4].splitlines()]
print(json.dumps({"prompt": sys.argv[1], "n": int(sys.argv[2]), "output": sys.argv[3][:-1], "steps": steps}))' \
        "$prompt" "$n" "$out" "$steps"
done
rm -f "$margins"
