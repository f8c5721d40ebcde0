#!/usr/bin/env python3
"""Makes the tokenizer fixtures that llama.cpp's llama-tokenize decides:

- spm-vocab.gguf: a SentencePiece (`llama`) vocabulary grown from tokenizer-text.txt (pieces up
  to 6 characters, scored by frequency and length, byte tokens for the rest, one control token),
  and spm-vocab-ids.txt, llama-tokenize's ids for tokenizer-text.txt with it;
- smollm2-vocab-<pre>-ids.txt: llama-tokenize's ids for tokenizer-text.txt with SmolLM2's
  vocabulary under other pre-tokenizers (`tokenizer.ggml.pre` rewritten), to check the other
  pre-tokenizer patterns on a real vocabulary.

  LLAMA_TOKENIZE=.../llama-tokenize MODEL=.../SmolLM2-135M-Instruct.Q4_1.gguf python3 make-vocab-fixtures.py

Only the header of a GGUF file is read or written (vocabulary-only files have no tensors).
"""
import collections, math, os, struct, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PRES = ["llama-bpe", "qwen2", "gpt-2", "default", "falcon"]

FMT = {0: '<B', 1: '<b', 2: '<H', 3: '<h', 4: '<I', 5: '<i', 6: '<f', 7: '<?', 10: '<Q', 11: '<q', 12: '<d'}

def read_meta(path):
    f = open(path, 'rb')
    def u32(): return struct.unpack('<I', f.read(4))[0]
    def u64(): return struct.unpack('<Q', f.read(8))[0]
    def s(): return f.read(u64()).decode('utf-8')
    def val(t):
        if t == 8: return s()
        if t == 9:
            et = u32(); n = u64(); return (et, [val(et) for _ in range(n)])
        return struct.unpack(FMT[t], f.read(struct.calcsize(FMT[t])))[0]
    assert f.read(4) == b'GGUF'
    u32(); u64(); nkv = u64()
    meta = []
    for _ in range(nkv):
        k = s(); t = u32(); meta.append((k, t, val(t)))
    return meta

def write_meta(path, meta):
    out = bytearray(b'GGUF') + struct.pack('<IQQ', 3, 0, len(meta))
    def s(x):
        b = x.encode('utf-8'); return struct.pack('<Q', len(b)) + b
    def val(t, v):
        if t == 8: return s(v)
        if t == 9:
            et, items = v
            return struct.pack('<IQ', et, len(items)) + b''.join(val(et, i) for i in items)
        return struct.pack(FMT[t], v)
    for k, t, v in meta:
        out += s(k) + struct.pack('<I', t) + val(t, v)
    out += b'\0' * (-len(out) % 32)
    open(path, 'wb').write(out)

def tokenize(model, text_path):
    out = subprocess.run([os.environ['LLAMA_TOKENIZE'], '-m', model, '-f', text_path, '--ids',
                          '--no-escape', '--log-disable'], check=True, capture_output=True, text=True)
    return out.stdout

def spm_vocab(text):
    escaped = ('▁' + text).replace(' ', '▁')
    counts = collections.Counter()
    for n in range(2, 7):
        for i in range(len(escaped) - n + 1):
            piece = escaped[i:i + n]
            if '\n' not in piece and '\r' not in piece:
                counts[piece] += 1
    singles = sorted({c for c in escaped if c not in '\n\r'})
    # Frequent longer pieces first; a piece seen once is kept only when it is short.
    pieces = [p for p, c in counts.most_common() if c > 1 or len(p) <= 2][:2500]
    tokens = ['<unk>', '<s>', '</s>'] + ['<0x%02X>' % b for b in range(256)] + ['<|im_start|>']
    types = [2, 3, 3] + [6] * 256 + [3]
    scores = [0.0] * len(tokens)
    for c in singles:
        tokens.append(c); types.append(1); scores.append(-10.0 - len(tokens) * 1e-3)
    for p in pieces:
        if p in tokens: continue
        tokens.append(p); types.append(1)
        scores.append(round(math.log(counts[p]) + 0.5 * len(p) - 10.0, 3))
    return [
        ('general.architecture', 8, 'llama'),
        ('tokenizer.ggml.model', 8, 'llama'),
        ('tokenizer.ggml.tokens', 9, (8, tokens)),
        ('tokenizer.ggml.scores', 9, (6, scores)),
        ('tokenizer.ggml.token_type', 9, (5, types)),
        ('tokenizer.ggml.bos_token_id', 4, 1),
        ('tokenizer.ggml.eos_token_id', 4, 2),
        ('tokenizer.ggml.unknown_token_id', 4, 0),
    ]

def main():
    text_path = os.path.join(HERE, 'tokenizer-text.txt')
    text = open(text_path, encoding='utf-8', newline='').read()
    spm = os.path.join(HERE, 'spm-vocab.gguf')
    write_meta(spm, spm_vocab(text))
    open(os.path.join(HERE, 'spm-vocab-ids.txt'), 'w').write(tokenize(spm, text_path))
    meta = read_meta(os.environ['MODEL'])
    keep = [m for m in meta if m[0].startswith('tokenizer.') or m[0] == 'general.architecture']
    with tempfile.TemporaryDirectory() as tmp:
        for pre in PRES:
            path = os.path.join(tmp, pre + '.gguf')
            write_meta(path, [(k, t, pre if k == 'tokenizer.ggml.pre' else v) for k, t, v in keep])
            open(os.path.join(HERE, 'smollm2-vocab-%s-ids.txt' % pre), 'w').write(tokenize(path, text_path))

if __name__ == '__main__':
    main()
