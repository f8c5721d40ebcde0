#!/bin/sh
# Regenerates smollm2-tokenizer-ids.txt: what llama.cpp's llama-tokenize prints for the text.
#   LLAMA_TOKENIZE=path/to/llama-tokenize MODEL=path/to/SmolLM2-135M-Instruct.Q4_1.gguf sh make-expected-ids.sh
# (llama.cpp as vendored in llama-cpp-python 0.3.36; the model from `cargo xtask model smollm2`).
set -eu
here=$(dirname "$0")
"${LLAMA_TOKENIZE:?set LLAMA_TOKENIZE}" -m "${MODEL:?set MODEL}" -f "$here/tokenizer-text.txt" \
    --ids --no-escape --log-disable > "$here/smollm2-tokenizer-ids.txt"
