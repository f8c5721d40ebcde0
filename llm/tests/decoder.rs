//! The decoder graph on the CPU reference ops, against a plain f64 transformer written here from
//! the architecture's definition (rope pairs, grouped heads, causal softmax, SwiGLU), on tiny
//! synthetic llama and qwen2 models; and the session's bookkeeping: micro-batches, the KV cache
//! across calls, greedy reads, a full context.

mod common;

use ggml_dawn::GgmlType;
use ggml_dawn::gguf::GgufFile;
use ggml_dawn_llm::model::LayerNames;
use ggml_dawn_llm::{Architecture, CpuOps, Decoder, LlmError, Model, Session};

use common::{TempDir, WTYPE, synth_bytes, tiny_shape};

/// A tiny model of `arch` written to `dir`, opened, with its whole file.
fn tiny(dir: &TempDir, arch: Architecture, tied: bool) -> (Model, GgufFile) {
    let path = dir.path().join(format!("{arch}-{tied}.gguf"));
    let bytes = synth_bytes(&tiny_shape(arch, tied), WTYPE, 3);
    std::fs::write(&path, &bytes).unwrap();
    (Model::open(&path).unwrap(), GgufFile::from_bytes(&bytes).unwrap())
}

fn weights(file: &GgufFile, name: &str) -> Vec<f64> {
    file.tensor(name)
        .unwrap()
        .to_f32()
        .unwrap()
        .into_iter()
        .map(f64::from)
        .collect()
}

/// `W·x` for a ggml weight `[n_in, n_out]` (row `j` of the file is output `j`).
fn matvec(w: &[f64], x: &[f64]) -> Vec<f64> {
    w.chunks_exact(x.len())
        .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
        .collect()
}

fn rms_norm(x: &[f64], w: &[f64], eps: f64) -> Vec<f64> {
    let s = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64 + eps).sqrt();
    x.iter().zip(w).map(|(v, w)| v * s * w).collect()
}

fn add_bias(x: &mut [f64], file: &GgufFile, name: &str) {
    if file.tensor_data(name).is_ok() {
        for (v, b) in x.iter_mut().zip(weights(file, name)) {
            *v += b;
        }
    }
}

/// Rotates each `d`-wide head of `x` to position `pos`: pairs `(2i, 2i+1)` for llama,
/// `(i, i + d/2)` for qwen2 (NeoX), angle `pos · base^(−2i/d)`.
fn rope(x: &mut [f64], d: usize, pos: usize, base: f64, neox: bool) {
    for head in x.chunks_exact_mut(d) {
        for i in 0..d / 2 {
            let theta = pos as f64 * base.powf(-2.0 * i as f64 / d as f64);
            let (a, b) = if neox { (i, i + d / 2) } else { (2 * i, 2 * i + 1) };
            let (x0, x1) = (head[a], head[b]);
            head[a] = x0 * theta.cos() - x1 * theta.sin();
            head[b] = x0 * theta.sin() + x1 * theta.cos();
        }
    }
}

/// The logits after every token of `tokens`, from the definition.
fn plain_forward(model: &Model, file: &GgufFile, tokens: &[u32]) -> Vec<Vec<f64>> {
    let c = &model.config;
    let (d, eps) = (c.head_dim, f64::from(c.rms_norm_eps));
    let neox = c.architecture == Architecture::Qwen2;
    let embd = weights(file, "token_embd.weight");
    let mut xs: Vec<Vec<f64>> = tokens
        .iter()
        .map(|&t| embd[t as usize * c.n_embd..(t as usize + 1) * c.n_embd].to_vec())
        .collect();
    for il in 0..c.n_layer {
        let n = LayerNames::new(il);
        let (wq, wk, wv, wo) = (
            weights(file, &n.attn_q),
            weights(file, &n.attn_k),
            weights(file, &n.attn_v),
            weights(file, &n.attn_output),
        );
        let (an, fnw) = (weights(file, &n.attn_norm), weights(file, &n.ffn_norm));
        let (wg, wu, wd) = (
            weights(file, &n.ffn_gate),
            weights(file, &n.ffn_up),
            weights(file, &n.ffn_down),
        );
        let mut keys = Vec::new();
        let mut values = Vec::new();
        for (pos, x) in xs.iter_mut().enumerate() {
            let h = rms_norm(x, &an, eps);
            let (mut q, mut k, mut v) = (matvec(&wq, &h), matvec(&wk, &h), matvec(&wv, &h));
            add_bias(&mut q, file, &n.attn_q_bias);
            add_bias(&mut k, file, &n.attn_k_bias);
            add_bias(&mut v, file, &n.attn_v_bias);
            rope(&mut q, d, pos, f64::from(c.rope_freq_base), neox);
            rope(&mut k, d, pos, f64::from(c.rope_freq_base), neox);
            keys.push(k);
            values.push(v);
            let mut attn = vec![0.0; c.n_head * d];
            for head in 0..c.n_head {
                let kv = head / c.n_gqa();
                let qh = &q[head * d..(head + 1) * d];
                let scores: Vec<f64> = keys
                    .iter()
                    .map(|k| {
                        qh.iter().zip(&k[kv * d..(kv + 1) * d]).map(|(a, b)| a * b).sum::<f64>() / (d as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = weights.iter().sum();
                for (w, v) in weights.iter().zip(&values) {
                    for (o, x) in attn[head * d..(head + 1) * d].iter_mut().zip(&v[kv * d..(kv + 1) * d]) {
                        *o += w / sum * x;
                    }
                }
            }
            for (xv, o) in x.iter_mut().zip(matvec(&wo, &attn)) {
                *xv += o;
            }
            let h = rms_norm(x, &fnw, eps);
            let act: Vec<f64> = matvec(&wg, &h)
                .iter()
                .zip(matvec(&wu, &h))
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            for (xv, o) in x.iter_mut().zip(matvec(&wd, &act)) {
                *xv += o;
            }
        }
    }
    let out = weights(file, model.output_name());
    let norm = weights(file, "output_norm.weight");
    xs.iter()
        .map(|x| {
            let mut logits = matvec(&out, &rms_norm(x, &norm, eps));
            add_bias(&mut logits, file, "output.bias");
            logits
        })
        .collect()
}

fn max_rel_err(got: &[f32], want: &[f64]) -> f64 {
    let scale = want.iter().map(|v| v.abs()).fold(0.0, f64::max);
    got.iter()
        .zip(want)
        .map(|(g, w)| (f64::from(*g) - w).abs())
        .fold(0.0, f64::max)
        / scale
}

const TOKENS: [u32; 7] = [298, 17, 101, 5, 250, 64, 17];

#[test]
fn the_graph_computes_the_architecture() {
    let dir = TempDir::new("decoder-plain");
    for (arch, tied) in [(Architecture::Llama, true), (Architecture::Qwen2, false)] {
        let (model, file) = tiny(&dir, arch, tied);
        let want = plain_forward(&model, &file, &TOKENS);
        let decoder = Decoder::load(&model, CpuOps).unwrap();
        // An f32 cache keeps the keys and values exact: only f32 rounding differs.
        let mut s = Session::new(&decoder, 16, GgmlType::F32).unwrap();
        let got = s.eval_from(&TOKENS, 0).unwrap();
        let n_vocab = model.config.n_vocab;
        assert_eq!(got.len(), TOKENS.len() * n_vocab);
        for (t, (g, w)) in got.chunks_exact(n_vocab).zip(&want).enumerate() {
            let err = max_rel_err(g, w);
            assert!(err < 1e-4, "{arch}: token {t}: relative error {err}");
        }
        // The f16 cache (llama.cpp's default) rounds keys and values: close, not exact.
        let mut s = Session::new(&decoder, 16, GgmlType::F16).unwrap();
        let last = s.eval(&TOKENS).unwrap();
        let err = max_rel_err(&last, want.last().unwrap());
        assert!(err < 1e-2, "{arch}: f16 cache: relative error {err}");
    }
}

#[test]
fn batches_and_calls_share_one_cache() {
    let dir = TempDir::new("decoder-batches");
    let (model, _) = tiny(&dir, Architecture::Llama, true);
    let decoder = Decoder::load(&model, CpuOps).unwrap();
    let mut whole = Session::new(&decoder, 16, GgmlType::F16).unwrap();
    let all = whole.eval_from(&TOKENS, 2).unwrap();
    assert_eq!(whole.n_past(), TOKENS.len());
    for batch in [1, 3] {
        let mut s = Session::new(&decoder, 16, GgmlType::F16)
            .unwrap()
            .with_batch_size(batch);
        let got = s.eval_from(&TOKENS, 2).unwrap();
        assert_eq!(got.len(), all.len());
        let err = got.iter().zip(&all).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(err < 1e-4, "batch {batch}: {err}");
    }
    // The prompt in two calls, then the greedy read of the next token: the same as one call.
    let mut s = Session::new(&decoder, 16, GgmlType::F16).unwrap();
    s.eval(&TOKENS[..4]).unwrap();
    let last = s.eval(&TOKENS[4..]).unwrap();
    let n_vocab = model.config.n_vocab;
    let want = &all[all.len() - n_vocab..];
    let err = last.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(err < 1e-4, "{err}");
    let mut s = Session::new(&decoder, 16, GgmlType::F16).unwrap();
    let id = s.eval_greedy(&TOKENS).unwrap();
    assert_eq!(Some(id), ggml_dawn_llm::sampling::argmax(want));
}

#[test]
fn a_full_context_and_bad_tokens_are_errors() {
    let dir = TempDir::new("decoder-errors");
    let (model, _) = tiny(&dir, Architecture::Llama, true);
    let decoder = Decoder::load(&model, CpuOps).unwrap();
    // Heads of 16 values do not fill q8_0's 32-value blocks.
    assert!(matches!(
        Session::new(&decoder, 8, GgmlType::Q8_0),
        Err(LlmError::InvalidArgument(m)) if m.contains("heads of 16")
    ));
    let mut s = Session::new(&decoder, 8, GgmlType::F32).unwrap();
    s.eval(&TOKENS).unwrap();
    assert!(matches!(
        s.eval(&[1, 2]),
        Err(LlmError::ContextFull { needed: 9, n_ctx: 8 })
    ));
    // The failed call left the session where it was.
    assert_eq!(s.n_past(), 7);
    s.eval(&[1]).unwrap();
    s.clear();
    assert!(matches!(s.eval(&[300]), Err(LlmError::InvalidArgument(_))));
    assert!(s.eval(&[]).is_err());
    assert!(Session::new(&decoder, 8, GgmlType::Q4_K).is_err());
    assert!(Session::new(&decoder, 0, GgmlType::F16).is_err());
    // Generation stops at the end of the context with the error.
    let mut s = Session::new(&decoder, 8, GgmlType::F16).unwrap();
    let sampler = ggml_dawn_llm::Sampler::new(ggml_dawn_llm::SamplerParams::greedy()).unwrap();
    let out: Vec<_> = s.generate(&TOKENS, sampler, 5).collect();
    assert_eq!(out.len(), 3);
    assert!(out[0].is_ok() && out[1].is_ok());
    assert!(matches!(out[2], Err(LlmError::ContextFull { .. })));
}
