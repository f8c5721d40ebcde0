//! The decoder graph of llama.cpp's `llama` and `qwen2` models, written once over [`Ops`]:
//! embedding lookup; per layer RMS norm × `attn_norm`, the q/k/v projections (with Qwen 2's
//! biases), rope (normal pairs for llama, NeoX halves for qwen2), the KV cache write, flash
//! attention over the cache with the causal mask, the output projection and the residual; RMS
//! norm × `ffn_norm`, gate and up, SwiGLU, down and the residual; then the final norm and the
//! output projection (the token embedding when tied).

use ggml_dawn::gguf::GgufFile;
use ggml_dawn::reference::{RopeMode, RopeParams};
use ggml_dawn::{GgmlType, HostTensor, Layout};

use crate::config::{Architecture, ModelConfig, RopeScaling};
use crate::error::{LlmError, Result};
use crate::model::{LayerNames, Model, OUTPUT, OUTPUT_NORM, ROPE_FREQS, TOKEN_EMBD};
use crate::ops::{Ops, QkvRope, i32_tensor};
use crate::tokenizer::TokenId;

/// The graph's constants, derived from the hyperparameters as llama.cpp derives them.
#[derive(Debug, Clone, PartialEq)]
pub struct DecoderParams {
    pub n_vocab: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f32,
    /// `1/sqrt(head_dim)`.
    pub kq_scale: f32,
    pub rope: RopeParams,
}

impl DecoderParams {
    /// llama.cpp's values for `config`: rope mode by architecture, YaRN's extrapolation on only
    /// for YaRN scaling, its `beta_fast = 32`, `beta_slow = 1`, and its attention factor
    /// `mscale(factor) / (1 + 0.1 ln factor) · attn_factor`.
    pub fn new(config: &ModelConfig) -> DecoderParams {
        let mode = match config.architecture {
            Architecture::Llama => RopeMode::Normal,
            Architecture::Qwen2 => RopeMode::Neox,
        };
        let mut rope = RopeParams::new(config.n_rot, mode);
        rope.freq_base = config.rope_freq_base;
        rope.n_ctx_orig = config.n_ctx_train as i32;
        rope.beta_fast = 32.0;
        rope.beta_slow = 1.0;
        match config.rope_scaling {
            RopeScaling::None => {}
            RopeScaling::Linear { factor } => rope.freq_scale = 1.0 / factor,
            RopeScaling::Yarn {
                factor,
                original_context,
                attn_factor,
            } => {
                let mscale = if factor <= 1.0 { 1.0 } else { 0.1 * factor.ln() + 1.0 };
                rope.freq_scale = 1.0 / factor;
                rope.ext_factor = 1.0;
                rope.n_ctx_orig = original_context as i32;
                rope.attn_factor = mscale / (1.0 + 0.1 * factor.ln()) * attn_factor;
            }
        }
        DecoderParams {
            n_vocab: config.n_vocab,
            n_embd: config.n_embd,
            n_layer: config.n_layer,
            n_head: config.n_head,
            n_head_kv: config.n_head_kv,
            head_dim: config.head_dim,
            rms_norm_eps: config.rms_norm_eps,
            kq_scale: 1.0 / (config.head_dim as f32).sqrt(),
            rope,
        }
    }

    fn n_embd_kv(&self) -> usize {
        self.n_head_kv * self.head_dim
    }
}

/// The attention's input projections: one MUL_MAT over Q, K and V's weights stacked (and their
/// biases), or three where the weights' types differ (Q4_K_M gives some layers' V more bits).
#[derive(Debug)]
enum Qkv<T> {
    Fused {
        w: T,
        b: Option<T>,
    },
    Separate {
        wq: T,
        wk: T,
        wv: T,
        bq: Option<T>,
        bk: Option<T>,
        bv: Option<T>,
    },
}

/// The feed-forward's gate and up projections: one MUL_MAT over both weights stacked (gate's
/// rows first, so SWIGLU takes each row's halves), or two where their types differ.
#[derive(Debug)]
enum GateUp<T> {
    Fused(T),
    Separate { gate: T, up: T },
}

/// One layer's weights.
#[derive(Debug)]
struct Layer<T> {
    attn_norm: T,
    qkv: Qkv<T>,
    wo: T,
    ffn_norm: T,
    gate_up: GateUp<T>,
    down: T,
}

/// `parts` (contiguous, of one type and row length) as one tensor of all their rows, in order;
/// `None` where they differ in type or row length. Stacking weights this way makes one MUL_MAT
/// of what were several over the same input: fewer dispatches a step, the same dot products.
fn stack_rows(parts: &[&HostTensor]) -> Option<HostTensor> {
    let first = parts.first()?.layout;
    let mut rows = 0;
    let mut data = Vec::new();
    for p in parts {
        let l = p.layout;
        if l.ty != first.ty || l.ne[0] != first.ne[0] || l.ne[2] != 1 || l.ne[3] != 1 || !l.is_contiguous() {
            return None;
        }
        let bytes = l.end_bytes().ok()?;
        data.extend_from_slice(p.data.get(l.offset..bytes)?);
        rows += l.ne[1];
    }
    let layout = Layout::contiguous(first.ty, [first.ne[0], rows, 1, 1]).ok()?;
    (layout.end_bytes().ok()? == data.len()).then_some(HostTensor { layout, data })
}

/// A model's weights on a backend, ready to run.
#[derive(Debug)]
pub struct Decoder<O: Ops> {
    ops: O,
    params: DecoderParams,
    token_embd: O::Tensor,
    output_norm: O::Tensor,
    output: Option<O::Tensor>,
    output_bias: Option<O::Tensor>,
    rope_freqs: Option<O::Tensor>,
    layers: Vec<Layer<O::Tensor>>,
}

/// The KV cache types llama.cpp's `--cache-type-k/v` offer here.
pub const CACHE_TYPES: [GgmlType; 4] = [GgmlType::F16, GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_0];

impl<O: Ops> Decoder<O> {
    /// Reads `model`'s tensors from its file onto `ops`' backend.
    pub fn load(model: &Model, ops: O) -> Result<Decoder<O>> {
        let file = GgufFile::open(model.path())?;
        // A tensor read from the file (kept on the host where it may be stacked with others),
        // or read and uploaded; `opt_`: one the model may lack.
        let host = |name: &str| -> Result<HostTensor> { Ok(file.tensor(name)?) };
        let opt_host = |name: &str| -> Result<Option<HostTensor>> {
            match model.tensor(name) {
                Some(_) => host(name).map(Some),
                None => Ok(None),
            }
        };
        let get = |name: &str| -> Result<O::Tensor> { ops.upload(&host(name)?) };
        let opt = |name: &str| -> Result<Option<O::Tensor>> { opt_host(name)?.map(|t| ops.upload(&t)).transpose() };
        let mut layers = Vec::with_capacity(model.config.n_layer);
        for i in 0..model.config.n_layer {
            let n = LayerNames::new(i);
            let (wq, wk, wv) = (host(&n.attn_q)?, host(&n.attn_k)?, host(&n.attn_v)?);
            let (bq, bk, bv) = (
                opt_host(&n.attn_q_bias)?,
                opt_host(&n.attn_k_bias)?,
                opt_host(&n.attn_v_bias)?,
            );
            let fused_w = stack_rows(&[&wq, &wk, &wv]);
            let fused_b = match (&bq, &bk, &bv) {
                (Some(q), Some(k), Some(v)) => stack_rows(&[q, k, v]).map(Some),
                (None, None, None) => Some(None),
                _ => None,
            };
            let qkv = match (fused_w, fused_b) {
                (Some(w), Some(b)) => Qkv::Fused {
                    w: ops.upload(&w)?,
                    b: b.map(|b| ops.upload(&b)).transpose()?,
                },
                _ => Qkv::Separate {
                    wq: ops.upload(&wq)?,
                    wk: ops.upload(&wk)?,
                    wv: ops.upload(&wv)?,
                    bq: bq.map(|b| ops.upload(&b)).transpose()?,
                    bk: bk.map(|b| ops.upload(&b)).transpose()?,
                    bv: bv.map(|b| ops.upload(&b)).transpose()?,
                },
            };
            let (gate, up) = (host(&n.ffn_gate)?, host(&n.ffn_up)?);
            let gate_up = match stack_rows(&[&gate, &up]) {
                Some(w) => GateUp::Fused(ops.upload(&w)?),
                None => GateUp::Separate {
                    gate: ops.upload(&gate)?,
                    up: ops.upload(&up)?,
                },
            };
            layers.push(Layer {
                attn_norm: get(&n.attn_norm)?,
                qkv,
                wo: get(&n.attn_output)?,
                ffn_norm: get(&n.ffn_norm)?,
                gate_up,
                down: get(&n.ffn_down)?,
            });
        }
        Ok(Decoder {
            params: DecoderParams::new(&model.config),
            token_embd: get(TOKEN_EMBD)?,
            output_norm: get(OUTPUT_NORM)?,
            output: opt(OUTPUT)?,
            output_bias: opt("output.bias")?,
            rope_freqs: opt(ROPE_FREQS)?,
            layers,
            ops,
        })
    }

    /// The backend's ops.
    pub fn ops(&self) -> &O {
        &self.ops
    }

    /// The graph's constants.
    pub fn params(&self) -> &DecoderParams {
        &self.params
    }

    /// An empty KV cache of `n_ctx` cells of `ty` per layer.
    pub fn new_cache(&self, n_ctx: usize, ty: GgmlType) -> Result<KvCache<O::Tensor>> {
        if !CACHE_TYPES.contains(&ty) {
            return Err(LlmError::InvalidArgument(format!(
                "cache type {ty} (f16, f32, q8_0 and q4_0 are supported)"
            )));
        }
        if n_ctx == 0 {
            return Err(LlmError::InvalidArgument("a context of 0 tokens".into()));
        }
        let width = self.params.n_embd_kv();
        let head = self.params.head_dim;
        if !head.is_multiple_of(ty.block_size()) {
            return Err(LlmError::InvalidArgument(format!(
                "cache type {ty}: heads of {head} values are not whole {}-value blocks",
                ty.block_size()
            )));
        }
        let kv = (0..self.params.n_layer)
            .map(|_| self.ops.zeros(ty, [2 * width, n_ctx, 1, 1]))
            .collect::<Result<_>>()?;
        Ok(KvCache { kv, n_ctx, ty })
    }

    /// Runs `tokens` at positions `n_past..`, writing their keys and values into `cache`, and
    /// returns the logits `[n_vocab, rows]` of the tokens `outputs` names (indices into `tokens`;
    /// all of them when `None`). Nothing is read back: the caller reads the result.
    pub fn forward(
        &self,
        cache: &mut KvCache<O::Tensor>,
        tokens: &[TokenId],
        n_past: usize,
        outputs: Option<&[usize]>,
    ) -> Result<O::Tensor> {
        let p = &self.params;
        let ops = &self.ops;
        let n_tokens = tokens.len();
        let n_kv = n_past + n_tokens;
        if n_tokens == 0 {
            return Err(LlmError::InvalidArgument("no tokens to evaluate".into()));
        }
        if n_kv > cache.n_ctx {
            return Err(LlmError::ContextFull {
                needed: n_kv,
                n_ctx: cache.n_ctx,
            });
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= p.n_vocab) {
            return Err(LlmError::InvalidArgument(format!(
                "token {bad} is outside the vocabulary of {}",
                p.n_vocab
            )));
        }
        let to_i32 = |v: usize| i32::try_from(v).map_err(|_| LlmError::InvalidArgument(format!("{v} is too large")));
        let ids: Vec<i32> = tokens.iter().map(|&t| to_i32(t as usize)).collect::<Result<_>>()?;
        let positions: Vec<i32> = (n_past..n_kv).map(to_i32).collect::<Result<_>>()?;
        let ids = ops.upload(&i32_tensor(&ids))?;
        // One sequence: cache cell = position.
        let pos = ops.upload(&i32_tensor(&positions))?;
        // One new token attends to every cached cell and itself: no mask to make or bind (so a
        // decode step's attention keeps its bind groups from step to step).
        let mask = if n_tokens > 1 {
            Some(ops.upload(&causal_mask(n_past, n_tokens)?)?)
        } else {
            None
        };
        // Every input goes up before the first op: a write after recorded ops submits them.
        let out_rows = match outputs {
            // Every row, in order (a single token's step): no rows to pick, so the last residual
            // ADD stays fused into the output norm.
            Some(rows) if rows.iter().copied().eq(0..n_tokens) => None,
            Some(rows) => {
                if let Some(&bad) = rows.iter().find(|&&r| r >= n_tokens) {
                    return Err(LlmError::InvalidArgument(format!(
                        "output row {bad} of a batch of {n_tokens}"
                    )));
                }
                let rows: Vec<i32> = rows.iter().map(|&r| to_i32(r)).collect::<Result<_>>()?;
                Some(ops.upload(&i32_tensor(&rows))?)
            }
            None => None,
        };

        let (d, e_kv) = (p.head_dim, p.n_embd_kv());
        // The residual stream: `x`, or `x = a + b` still to add. Each residual ADD is fused
        // into the RMS_NORM that follows it (the next layer's, or the output's).
        let mut x = Residual::Value(ops.get_rows(&self.token_embd, &ids)?);
        for (il, l) in self.layers.iter().enumerate() {
            let bias = |y: O::Tensor, b: &Option<O::Tensor>| -> Result<O::Tensor> {
                match b {
                    Some(b) => ops.add(&y, b),
                    None => Ok(y),
                }
            };
            // q [d, n_head, n_tokens] and k [d, n_head_kv, n_tokens] roped, k and v as rows
            // [e_kv, n_tokens] for the cache.
            // Each layer's cache row holds a cell's keys, then its values: q [d, n_head,
            // n_tokens] roped, and the cache's rows written.
            let cells = &mut cache.kv[il];
            let whole = ops.layout(cells);
            let (x_in, q) = match &l.qkv {
                Qkv::Fused { w, b: None } => {
                    // The norm, the projection, the rotary embedding of q's and k's heads in
                    // place and the KV-cache write of k and v side by side: one step where the
                    // backend fuses them.
                    let rope = QkvRope {
                        heads: p.n_head + p.n_head_kv,
                        head_dim: d,
                        kv_start: p.n_head * d,
                        pos: &pos,
                        freq_factors: self.rope_freqs.as_ref(),
                        params: &p.rope,
                        ids: &pos,
                    };
                    let (x_in, y) = x.norm_mul_mat_rope(ops, &l.attn_norm, p.rms_norm_eps, w, &rope, cells, whole)?;
                    let row = ops.layout(&y).nb[1];
                    (x_in, self.sub_view(&y, [d, p.n_head, n_tokens], [d * 4, row], 0)?)
                }
                Qkv::Fused { w, b } => {
                    // The norm and the projection in one step where the backend fuses them.
                    let (x_in, y) = x.norm_mul_mat(ops, &l.attn_norm, p.rms_norm_eps, w)?;
                    // Each token's row holds q's heads, then k's, then v: q and k are roped in
                    // place, in one op over their heads together, and k and v, side by side,
                    // go to the cache in one SET_ROWS (the backend may fuse the two).
                    let mut y = bias(y, b)?;
                    let row = ops.layout(&y).nb[1];
                    let qk = self.sub_layout(&y, [d, p.n_head + p.n_head_kv, n_tokens], [d * 4, row], 0);
                    let kv = self.sub_layout(&y, [2 * e_kv, n_tokens, 1], [row, row], p.n_head * d * 4);
                    ops.rope_set_rows(
                        &mut y,
                        qk,
                        &pos,
                        self.rope_freqs.as_ref(),
                        &p.rope,
                        kv,
                        cells,
                        whole,
                        &pos,
                    )?;
                    (x_in, self.sub_view(&y, [d, p.n_head, n_tokens], [d * 4, row], 0)?)
                }
                Qkv::Separate { wq, wk, wv, bq, bk, bv } => {
                    let (x_in, cur) = x.norm(ops, &l.attn_norm, p.rms_norm_eps)?;
                    let proj = |w: &O::Tensor, b: &Option<O::Tensor>| bias(ops.mul_mat(w, &cur)?, b);
                    let q = self.reshape(&proj(wq, bq)?, [d, p.n_head, n_tokens, 1])?;
                    let k = self.reshape(&proj(wk, bk)?, [d, p.n_head_kv, n_tokens, 1])?;
                    let q = ops.rope(&q, &pos, self.rope_freqs.as_ref(), &p.rope)?;
                    let k = ops.rope(&k, &pos, self.rope_freqs.as_ref(), &p.rope)?;
                    let k = self.reshape(&k, [e_kv, n_tokens, 1, 1])?;
                    ops.set_rows(cells, self.cache_half(whole, 0)?, &k, &pos)?;
                    ops.set_rows(cells, self.cache_half(whole, 1)?, &proj(wv, bv)?, &pos)?;
                    (x_in, q)
                }
            };
            let k_all = self.heads_view(cells, n_kv, 0)?;
            let v_all = self.heads_view(cells, n_kv, 1)?;
            // Q as ggml permutes it for attention: [d, n_tokens, n_head].
            let q = ops.view(&q, ops.layout(&q).permute([0, 2, 1, 3])?)?;
            let attn = ops.flash_attn(&q, &k_all, &v_all, mask.as_ref(), p.kq_scale)?;
            let attn = self.reshape(&attn, [d * p.n_head, n_tokens, 1, 1])?;
            let out = ops.mul_mat(&l.wo, &attn)?;
            let ffn_x = Residual::Sum(out, x_in);
            let (ffn_in, down) = match &l.gate_up {
                // The norm with the gate and up projection, and the SWIGLU with the down
                // projection, each in one step where the backend fuses them.
                GateUp::Fused(w) => {
                    let (ffn_in, gate_up) = ffn_x.norm_mul_mat(ops, &l.ffn_norm, p.rms_norm_eps, w)?;
                    (ffn_in, ops.mul_mat_swiglu(&l.down, &gate_up)?)
                }
                GateUp::Separate { gate, up } => {
                    let (ffn_in, cur) = ffn_x.norm(ops, &l.ffn_norm, p.rms_norm_eps)?;
                    let act = ops.swiglu(&ops.mul_mat(gate, &cur)?, Some(&ops.mul_mat(up, &cur)?))?;
                    (ffn_in, ops.mul_mat(&l.down, &act)?)
                }
            };
            x = Residual::Sum(down, ffn_in);
        }
        if let Some(rows) = &out_rows {
            // Only some rows go on: the sum first, then the rows, then their norm.
            x = Residual::Value(ops.get_rows(&x.value(ops)?, rows)?);
        }
        let output = self.output.as_ref().unwrap_or(&self.token_embd);
        let (_, logits) = x.norm_mul_mat(ops, &self.output_norm, p.rms_norm_eps, output)?;
        match &self.output_bias {
            Some(b) => ops.add(&logits, b),
            None => Ok(logits),
        }
    }

    /// A view of f32 `t` at `offset` bytes: extents `ne` (three), strides `nb[1..3]` in bytes.
    fn sub_view(&self, t: &O::Tensor, ne: [usize; 3], nb: [usize; 2], offset: usize) -> Result<O::Tensor> {
        self.ops.view(t, self.sub_layout(t, ne, nb, offset))
    }

    /// The layout [`Decoder::sub_view`] views `t` through.
    fn sub_layout(&self, t: &O::Tensor, ne: [usize; 3], nb: [usize; 2], offset: usize) -> Layout {
        let whole = self.ops.layout(t);
        Layout {
            ty: whole.ty,
            ne: [ne[0], ne[1], ne[2], 1],
            nb: [4, nb[0], nb[1], nb[1] * ne[2]],
            offset: whole.offset + offset,
        }
    }

    /// The keys (`half` 0) or the values (1) of every cell of a layer's cache `whole`
    /// (`[2 · n_embd_kv, n_ctx]`) as rows `[n_embd_kv, n_ctx]`.
    fn cache_half(&self, whole: Layout, half: usize) -> Result<Layout> {
        let e_kv = self.params.n_embd_kv();
        let half_bytes = whole
            .ty
            .row_bytes(e_kv)
            .ok_or_else(|| LlmError::Backend(format!("{}: partial block in a cache row", whole.ty)))?;
        let mut layout = whole;
        layout.ne[0] = e_kv;
        layout.offset += half * half_bytes;
        Ok(layout)
    }

    fn reshape(&self, t: &O::Tensor, ne: [usize; 4]) -> Result<O::Tensor> {
        self.ops.view(t, self.ops.layout(t).reshape(ne)?)
    }

    /// The keys (`half` 0) or values (1) of the first `n_kv` cells of a layer's cache
    /// `[2 · n_embd_kv, n_ctx]` as `[d, n_kv, n_head_kv]`.
    fn heads_view(&self, cache: &O::Tensor, n_kv: usize, half: usize) -> Result<O::Tensor> {
        let p = &self.params;
        let whole = self.ops.layout(cache);
        let row = whole.nb[1];
        let head = whole
            .ty
            .row_bytes(p.head_dim)
            .ok_or_else(|| LlmError::Backend(format!("{}: partial block in a head", whole.ty)))?;
        let layout = Layout {
            ne: [p.head_dim, n_kv, p.n_head_kv, 1],
            nb: [whole.nb[0], row, head, row * n_kv],
            ..self.cache_half(whole, half)?
        };
        self.ops.view(cache, layout)
    }
}

/// The residual stream between layers: a tensor, or the sum of two not yet added, so that the
/// ADD can run fused with the RMS_NORM that follows it.
enum Residual<T> {
    Value(T),
    Sum(T, T),
}

impl<T> Residual<T> {
    /// The stream's value, and its RMS norm times `weight`.
    fn norm<O: Ops<Tensor = T>>(self, ops: &O, weight: &T, eps: f32) -> Result<(T, T)> {
        match self {
            Residual::Value(x) => {
                let normed = ops.rms_norm_mul(&x, weight, eps)?;
                Ok((x, normed))
            }
            Residual::Sum(a, b) => ops.add_rms_norm_mul(&a, &b, weight, eps),
        }
    }

    /// The stream's value, and `a ×` its RMS norm times `weight` (one step where the backend
    /// fuses them).
    fn norm_mul_mat<O: Ops<Tensor = T>>(self, ops: &O, weight: &T, eps: f32, a: &T) -> Result<(T, T)> {
        match self {
            Residual::Value(x) => {
                let y = ops.rms_norm_mul_mat(a, &x, weight, eps)?;
                Ok((x, y))
            }
            Residual::Sum(x, r) => ops.add_rms_norm_mul_mat(a, &x, &r, weight, eps),
        }
    }

    /// The stream's value, and `a ×` its RMS norm times `weight`, roped and written to the KV
    /// cache as `rope` says ([`Ops::norm_mul_mat_rope_set_rows`]).
    #[allow(clippy::too_many_arguments)]
    fn norm_mul_mat_rope<O: Ops<Tensor = T>>(
        self,
        ops: &O,
        weight: &T,
        eps: f32,
        a: &T,
        rope: &QkvRope<'_, T>,
        cache: &mut T,
        cache_view: Layout,
    ) -> Result<(T, T)> {
        match self {
            Residual::Value(x) => {
                let (_, y) = ops.norm_mul_mat_rope_set_rows(a, &x, None, weight, eps, rope, cache, cache_view)?;
                Ok((x, y))
            }
            Residual::Sum(x, r) => {
                let (sum, y) = ops.norm_mul_mat_rope_set_rows(a, &x, Some(&r), weight, eps, rope, cache, cache_view)?;
                let sum = sum.ok_or_else(|| LlmError::Backend("a fused residual ADD returned no sum".into()))?;
                Ok((sum, y))
            }
        }
    }

    /// The stream's value.
    fn value<O: Ops<Tensor = T>>(self, ops: &O) -> Result<T> {
        match self {
            Residual::Value(x) => Ok(x),
            Residual::Sum(a, b) => ops.add(&a, &b),
        }
    }
}

/// The causal mask of `n_tokens` new tokens after `n_past` cached ones: f16
/// `[n_past + n_tokens, n_tokens]`, 0 where token `i` may attend to cell `j` (`j ≤ n_past + i`),
/// −∞ elsewhere (llama.cpp's f16 mask for flash attention).
fn causal_mask(n_past: usize, n_tokens: usize) -> Result<HostTensor> {
    let n_kv = n_past + n_tokens;
    let values: Vec<f32> = (0..n_tokens)
        .flat_map(|i| (0..n_kv).map(move |j| if j <= n_past + i { 0.0 } else { f32::NEG_INFINITY }))
        .collect();
    Ok(HostTensor::from_f32(GgmlType::F16, [n_kv, n_tokens, 1, 1], &values)?)
}

/// Each layer's cached keys and values: `[2 · n_embd_kv, n_ctx]` per layer, cell = position,
/// a cell's keys then its values in one row (so a step writes both with one SET_ROWS where the
/// projections are stacked).
#[derive(Debug)]
pub struct KvCache<T> {
    kv: Vec<T>,
    n_ctx: usize,
    ty: GgmlType,
}

impl<T> KvCache<T> {
    /// Cells per layer.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// The cells' type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }
}

#[cfg(test)]
mod stacking_tests {
    use super::*;

    #[test]
    fn rows_stack_only_within_one_type_and_row_length() {
        let a = HostTensor::from_f32(GgmlType::Q8_0, [64, 3, 1, 1], &[0.5; 192]).unwrap();
        let b = HostTensor::from_f32(GgmlType::Q8_0, [64, 2, 1, 1], &[-1.0; 128]).unwrap();
        let both = stack_rows(&[&a, &b]).unwrap();
        assert_eq!(both.layout.ne, [64, 5, 1, 1]);
        assert_eq!(both.data, [a.data.clone(), b.data.clone()].concat());
        // Another type (Q4_K_M's V in some layers) or another row length: kept apart.
        let c = HostTensor::from_f32(GgmlType::Q4_0, [64, 2, 1, 1], &[1.0; 128]).unwrap();
        assert!(stack_rows(&[&a, &c]).is_none());
        let d = HostTensor::from_f32(GgmlType::Q8_0, [32, 2, 1, 1], &[1.0; 64]).unwrap();
        assert!(stack_rows(&[&a, &d]).is_none());
    }
}
