#!/bin/sh
# Greedy continuations by llama.cpp's llama-simple (CPU backend) of SmolLM2-135M-Instruct Q4_1, one
# JSON line per prompt: {"prompt": …, "n": …, "output": …} (output: prompt and generated text as
# llama-simple prints them). Usage: make-simple-fixtures.sh LLAMA_BIN_DIR MODEL > smollm2-simple.jsonl
set -eu
bin=$1
model=$2
n=24
for prompt in "The capital of France is" "Once upon a time, there was a little" "def fibonacci(n):" \
    "The three primary colors are" "<|im_start|>user
What is the largest planet in the solar system?<|im_end|>
<|im_start|>assistant
"; do
    out=$(LD_LIBRARY_PATH=$bin nice -n 15 "$bin/llama-simple" -m "$model" -n $n "$prompt" 2>/dev/null; echo x)
    python3 -c 'import json, sys; print(json.dumps({"prompt": sys.argv[1], "n": int(sys.argv[2]), "output": sys.argv[3][:-1]}))' \
        "$prompt" "$n" "$out"
done
