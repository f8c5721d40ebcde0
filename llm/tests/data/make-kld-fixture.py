#!/usr/bin/env python3
"""Condenses llama-perplexity's --kl-divergence-base file (SmolLM2-135M-Instruct Q4_1, CPU backend) of
ppl-text.txt at -c 128 into a small text fixture: the evaluated tokens, and per scored row the token
that follows and llama.cpp's 32 most likely tokens with their log-probabilities.

    llama-perplexity -m MODEL -f ppl-text.txt -c 128 -t 2 --kl-divergence-base base.kld
    make-kld-fixture.py base.kld PPL > smollm2-kld-c128.txt   (PPL: its "Final estimate")
"""
import struct
import sys

TOP = 32
path, ppl = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
assert data[:8] == b"_logits_"
n_ctx, n_vocab, n_chunk = struct.unpack_from("<3i", data, 8)
off = 20
tokens = struct.unpack_from(f"<{n_ctx * n_chunk}i", data, off)
off += 4 * n_ctx * n_chunk
nv = 2 * ((n_vocab + 1) // 2) + 4
first = n_ctx // 2
print(f"n_ctx {n_ctx} n_vocab {n_vocab} n_chunk {n_chunk} ppl {ppl}")
print(" ".join(map(str, tokens)))
for c in range(n_chunk):
    for r in range(n_ctx - 1 - first):
        row = struct.unpack_from(f"<{nv}H", data, off)
        off += 2 * nv
        scale, min_lp = struct.unpack("<2f", struct.pack("<4H", *row[:4]))
        q = row[4:4 + n_vocab]
        top = sorted(range(n_vocab), key=lambda i: (-q[i], i))[:TOP]
        nxt = tokens[c * n_ctx + first + r + 1]
        pairs = " ".join(f"{i}:{scale * q[i] + min_lp:.5f}" for i in top)
        print(f"{nxt} {scale * q[nxt] + min_lp:.5f} {pairs}")
assert off == len(data)
