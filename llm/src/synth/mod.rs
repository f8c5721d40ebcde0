//! Synthetic models: seeded random weights in a real model's shape, written as a GGUF v3 file
//! that this crate and llama.cpp both load (for speed measurements and for tests). The header
//! comes from `ggml_dawn`'s [`GgufWriter`]; the tensors are generated, quantized and written one
//! chunk of rows at a time, so a 16 GB model never sits in memory.

pub mod vocab;

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

use ggml_dawn::gguf::{GgufWriter, Value};
use ggml_dawn::{GgmlType, HostTensor};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use crate::config::Architecture;
use crate::error::{LlmError, Result};
use crate::model::{LayerNames, OUTPUT, OUTPUT_NORM, TOKEN_EMBD};

/// The shape of a model: everything but its weights.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelShape {
    pub name: String,
    pub architecture: Architecture,
    pub n_vocab: usize,
    pub n_ctx_train: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub rope_freq_base: f32,
    pub rms_norm_eps: f32,
    /// The output projection is the token embedding (no `output.weight`).
    pub tied_output: bool,
}

impl ModelShape {
    /// The shapes `--like` knows, by name.
    pub const KNOWN: &[&str] = &["smollm2-135m", "llama-3-8b", "qwen2-0.5b"];

    /// The shape of a known model (case-insensitive; `SmolLM2-135M`, `Llama-3-8B`, …).
    pub fn like(name: &str) -> Result<ModelShape> {
        let shape =
            |name: &str, architecture, n_vocab, n_embd, n_layer, n_ff, n_head, n_head_kv, base, tied| ModelShape {
                name: name.to_owned(),
                architecture,
                n_vocab,
                n_ctx_train: 8192,
                n_embd,
                n_layer,
                n_ff,
                n_head,
                n_head_kv,
                rope_freq_base: base,
                rms_norm_eps: 1e-5,
                tied_output: tied,
            };
        Ok(match name.to_ascii_lowercase().as_str() {
            "smollm2-135m" | "smollm2" => shape(
                "SmolLM2-135M",
                Architecture::Llama,
                49152,
                576,
                30,
                1536,
                9,
                3,
                100000.0,
                true,
            ),
            "llama-3-8b" | "llama3-8b" => shape(
                "Llama-3-8B",
                Architecture::Llama,
                128256,
                4096,
                32,
                14336,
                32,
                8,
                500000.0,
                false,
            ),
            "qwen2-0.5b" => shape(
                "Qwen2-0.5B",
                Architecture::Qwen2,
                151936,
                896,
                24,
                4864,
                14,
                2,
                1000000.0,
                true,
            ),
            other => {
                return Err(LlmError::InvalidArgument(format!(
                    "no model shape named `{other}` (known: {})",
                    ModelShape::KNOWN.join(", ")
                )));
            }
        })
    }

    fn head_dim(&self) -> usize {
        self.n_embd / self.n_head
    }
}

/// The weight types `synth` writes, with llama.cpp's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightType {
    F16,
    Q8_0,
    Q4_0,
    Q4_1,
    /// llama.cpp's Q4_K_M recipe: q4_K, with q6_K for `attn_v` and `ffn_down` in the layers its
    /// `use_more_bits` picks and for the output projection.
    Q4KM,
}

impl WeightType {
    /// llama.cpp's `general.file_type` for this type.
    fn file_type(self) -> u32 {
        match self {
            WeightType::F16 => 1,
            WeightType::Q4_0 => 2,
            WeightType::Q4_1 => 3,
            WeightType::Q8_0 => 7,
            WeightType::Q4KM => 15,
        }
    }

    fn base(self) -> GgmlType {
        match self {
            WeightType::F16 => GgmlType::F16,
            WeightType::Q8_0 => GgmlType::Q8_0,
            WeightType::Q4_0 => GgmlType::Q4_0,
            WeightType::Q4_1 => GgmlType::Q4_1,
            WeightType::Q4KM => GgmlType::Q4_K,
        }
    }
}

impl FromStr for WeightType {
    type Err = LlmError;

    fn from_str(s: &str) -> Result<WeightType> {
        match s.to_ascii_lowercase().as_str() {
            "f16" => Ok(WeightType::F16),
            "q8_0" => Ok(WeightType::Q8_0),
            "q4_0" => Ok(WeightType::Q4_0),
            "q4_1" => Ok(WeightType::Q4_1),
            "q4_k_m" => Ok(WeightType::Q4KM),
            other => Err(LlmError::InvalidArgument(format!(
                "weight type `{other}` (f16, q8_0, q4_0, q4_1 and q4_K_M are)"
            ))),
        }
    }
}

impl fmt::Display for WeightType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WeightType::F16 => "f16",
            WeightType::Q8_0 => "q8_0",
            WeightType::Q4_0 => "q4_0",
            WeightType::Q4_1 => "q4_1",
            WeightType::Q4KM => "q4_K_M",
        })
    }
}

/// llama.cpp's choice of layers that get more bits in its `_M` mixtures.
fn use_more_bits(layer: usize, n_layer: usize) -> bool {
    layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer as isize - (n_layer / 8) as isize) % 3 == 2
}

/// What a block type becomes for rows whose length it cannot cut into blocks, as llama.cpp's
/// quantizer falls back.
fn fallback(ty: GgmlType, row: usize) -> GgmlType {
    if row.is_multiple_of(ty.block_size()) {
        return ty;
    }
    match ty {
        GgmlType::Q4_K => GgmlType::Q5_0,
        GgmlType::Q6_K => GgmlType::Q8_0,
        _ => GgmlType::F16,
    }
}

/// One tensor to write.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorPlan {
    pub name: String,
    pub ty: GgmlType,
    pub ne: [usize; 4],
    /// Norm weights are ones; everything else random.
    pub ones: bool,
}

/// The tensors of `shape` at `wtype`, in the order llama.cpp's converter writes them.
pub fn tensor_plan(shape: &ModelShape, wtype: WeightType) -> Vec<TensorPlan> {
    let (e, v, ff) = (shape.n_embd, shape.n_vocab, shape.n_ff);
    let q = shape.n_head * shape.head_dim();
    let kv = shape.n_head_kv * shape.head_dim();
    let base = wtype.base();
    let output_ty = match wtype {
        WeightType::F16 | WeightType::Q8_0 => base,
        WeightType::Q4_0 | WeightType::Q4KM => GgmlType::Q6_K,
        // As the published SmolLM2-135M-Instruct Q4_1 file has it, so that a synthetic copy
        // of it runs the same kernels.
        WeightType::Q4_1 => GgmlType::Q8_0,
    };
    let matrix = |name: String, ty: GgmlType, k: usize, m: usize| TensorPlan {
        name,
        ty: fallback(ty, k),
        ne: [k, m, 1, 1],
        ones: false,
    };
    let vector = |name: String, n: usize, ones: bool| TensorPlan {
        name,
        ty: GgmlType::F32,
        ne: [n, 1, 1, 1],
        ones,
    };
    let mut out = vec![matrix(
        TOKEN_EMBD.into(),
        if shape.tied_output { output_ty } else { base },
        e,
        v,
    )];
    for i in 0..shape.n_layer {
        let l = LayerNames::new(i);
        let more = wtype == WeightType::Q4KM && use_more_bits(i, shape.n_layer);
        let bumped = if more { GgmlType::Q6_K } else { base };
        out.push(vector(l.attn_norm, e, true));
        out.push(matrix(l.attn_q, base, e, q));
        out.push(matrix(l.attn_k, base, e, kv));
        out.push(matrix(l.attn_v, bumped, e, kv));
        if shape.architecture == Architecture::Qwen2 {
            out.push(vector(l.attn_q_bias, q, false));
            out.push(vector(l.attn_k_bias, kv, false));
            out.push(vector(l.attn_v_bias, kv, false));
        }
        out.push(matrix(l.attn_output, base, q, e));
        out.push(vector(l.ffn_norm, e, true));
        out.push(matrix(l.ffn_gate, base, e, ff));
        out.push(matrix(l.ffn_up, base, e, ff));
        out.push(matrix(l.ffn_down, bumped, ff, e));
    }
    out.push(vector(OUTPUT_NORM.into(), e, true));
    if !shape.tied_output {
        out.push(matrix(OUTPUT.into(), output_ty, e, v));
    }
    out
}

/// The metadata of `shape` at `wtype`: the hyperparameters llama.cpp reads and a synthetic
/// vocabulary of `n_vocab` tokens.
pub fn metadata(shape: &ModelShape, wtype: WeightType) -> Vec<(String, Value)> {
    let a = shape.architecture.name();
    let k = |s: &str| format!("{a}.{s}");
    let mut out = vec![
        ("general.architecture".to_owned(), Value::String(a.into())),
        (
            "general.name".to_owned(),
            Value::String(format!("synthetic {} ({wtype})", shape.name)),
        ),
        ("general.file_type".to_owned(), Value::U32(wtype.file_type())),
        (k("vocab_size"), Value::U32(shape.n_vocab as u32)),
        (k("context_length"), Value::U32(shape.n_ctx_train as u32)),
        (k("embedding_length"), Value::U32(shape.n_embd as u32)),
        (k("block_count"), Value::U32(shape.n_layer as u32)),
        (k("feed_forward_length"), Value::U32(shape.n_ff as u32)),
        (k("attention.head_count"), Value::U32(shape.n_head as u32)),
        (k("attention.head_count_kv"), Value::U32(shape.n_head_kv as u32)),
        (k("rope.dimension_count"), Value::U32(shape.head_dim() as u32)),
        (k("rope.freq_base"), Value::F32(shape.rope_freq_base)),
        (k("attention.layer_norm_rms_epsilon"), Value::F32(shape.rms_norm_eps)),
    ];
    out.extend(
        vocab::metadata(shape.n_vocab)
            .into_iter()
            .map(|(key, v)| (key.to_owned(), v)),
    );
    out
}

/// Elements generated (and quantized) at once: whole rows, about a million values.
const CHUNK_ELEMENTS: usize = 1 << 20;

/// A count of bytes that a [`Write`] discards, keeping the first ones: the header
/// [`GgufWriter`] writes before the (placeholder) tensor data.
#[derive(Debug, Default)]
struct HeaderCapture {
    kept: Vec<u8>,
    total: u64,
}

/// At most this much of what the placeholder writer writes is kept (a header holding a
/// vocabulary of a few hundred thousand tokens is a few MB).
const HEADER_LIMIT: usize = 256 << 20;

impl Write for HeaderCapture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = HEADER_LIMIT.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&buf[..buf.len().min(room)]);
        self.total += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What [`write_model`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub tensors: usize,
    pub bytes: u64,
}

/// Writes a model of `shape` at `wtype` with weights from `seed` to `out`, tensor by tensor,
/// calling `progress(done, total)` after each tensor.
pub fn write_model(
    shape: &ModelShape,
    wtype: WeightType,
    seed: u64,
    mut out: impl Write,
    mut progress: impl FnMut(usize, usize),
) -> Result<Written> {
    check_shape(shape)?;
    let plan = tensor_plan(shape, wtype);
    let header = header_bytes(shape, wtype, &plan)?;
    out.write_all(&header)?;
    let alignment = ggml_dawn::gguf::DEFAULT_ALIGNMENT;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(16);
    let mut bytes = header.len() as u64;
    for (index, tensor) in plan.iter().enumerate() {
        let written = write_tensor(tensor, seed, index as u64, threads, &mut out)?;
        let pad = written.next_multiple_of(alignment) - written;
        out.write_all(&vec![0u8; pad])?;
        bytes += (written + pad) as u64;
        progress(index + 1, plan.len());
    }
    out.flush()?;
    Ok(Written {
        tensors: plan.len(),
        bytes,
    })
}

fn check_shape(shape: &ModelShape) -> Result<()> {
    let ok = shape.n_head > 0
        && shape.n_head_kv > 0
        && shape.n_head.is_multiple_of(shape.n_head_kv)
        && shape.n_embd.is_multiple_of(shape.n_head)
        && shape.head_dim().is_multiple_of(2)
        && shape.n_layer > 0
        && shape.n_ff > 0
        && shape.n_vocab >= 258;
    if ok {
        Ok(())
    } else {
        Err(LlmError::InvalidArgument(format!("not a decoder shape: {shape:?}")))
    }
}

/// The header exactly as [`GgufWriter`] lays it out. The writer takes every tensor's bytes, so
/// it is given zero-filled placeholders (pages the allocator maps lazily and nothing reads: the
/// capture discards the data) and everything after the header is dropped.
fn header_bytes(shape: &ModelShape, wtype: WeightType, plan: &[TensorPlan]) -> Result<Vec<u8>> {
    let mut writer = GgufWriter::new();
    for (key, value) in metadata(shape, wtype) {
        writer.set(key, value);
    }
    let mut data_len = 0u64;
    let alignment = ggml_dawn::gguf::DEFAULT_ALIGNMENT;
    for t in plan {
        let n = t.ty.row_bytes(t.ne[0]).unwrap_or(0) * t.ne[1] * t.ne[2] * t.ne[3];
        writer.add_tensor(&t.name, t.ty, t.ne, vec![0u8; n])?;
        data_len += n.next_multiple_of(alignment) as u64;
    }
    let mut capture = HeaderCapture::default();
    writer.write_to(&mut capture)?;
    let header_len = usize::try_from(capture.total - data_len)
        .ok()
        .filter(|&len| len <= capture.kept.len())
        .ok_or_else(|| LlmError::InvalidArgument("the GGUF header does not fit the capture".into()))?;
    capture.kept.truncate(header_len);
    Ok(capture.kept)
}

/// Generates, converts and writes one tensor, chunk by chunk (chunks in parallel, written in
/// order); returns the bytes written. Each chunk's values depend only on the seed, the tensor's
/// index and the chunk's index, so the file is the same on any number of threads.
fn write_tensor(t: &TensorPlan, seed: u64, index: u64, threads: usize, out: &mut impl Write) -> Result<usize> {
    let row = t.ne[0];
    let rows = t.ne[1] * t.ne[2] * t.ne[3];
    let rows_per_chunk = (CHUNK_ELEMENTS / row).max(1);
    let chunks: Vec<(usize, usize)> = (0..rows)
        .step_by(rows_per_chunk)
        .map(|start| (start, rows_per_chunk.min(rows - start)))
        .collect();
    // Values in ±1/sqrt(row), like an initialised layer, so activations stay finite in f16.
    let scale = 1.0 / (row as f32).sqrt();
    let make = |chunk: usize, n_rows: usize| -> Result<Vec<u8>> {
        let values: Vec<f32> = if t.ones {
            vec![1.0; row * n_rows]
        } else {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ (index << 32) ^ chunk as u64);
            (0..row * n_rows)
                .map(|_| (rng.random::<f32>() * 2.0 - 1.0) * scale)
                .collect()
        };
        Ok(HostTensor::from_f32(t.ty, [row, n_rows, 1, 1], &values)?.data)
    };
    let mut written = 0;
    for batch in chunks.chunks(threads) {
        let results: Vec<Result<Vec<u8>>> = std::thread::scope(|s| {
            let handles: Vec<_> = batch
                .iter()
                .map(|&(start, n_rows)| s.spawn(move || make(start / rows_per_chunk, n_rows)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(LlmError::InvalidArgument("a worker thread panicked".into())))
                })
                .collect()
        });
        for bytes in results {
            let bytes = bytes?;
            out.write_all(&bytes)?;
            written += bytes.len();
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4_k_m_gives_more_bits_where_llama_cpp_does() {
        // llama.cpp's use_more_bits for 32 layers: 0..4, 28..32, and every third from 6.
        let picked: Vec<usize> = (0..32).filter(|&i| use_more_bits(i, 32)).collect();
        assert_eq!(picked, [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]);
        let shape = ModelShape::like("llama-3-8b").unwrap();
        let plan = tensor_plan(&shape, WeightType::Q4KM);
        let ty = |name: &str| plan.iter().find(|t| t.name == name).unwrap().ty;
        assert_eq!(ty("blk.0.attn_v.weight"), GgmlType::Q6_K);
        assert_eq!(ty("blk.4.attn_v.weight"), GgmlType::Q4_K);
        assert_eq!(ty("blk.4.attn_q.weight"), GgmlType::Q4_K);
        assert_eq!(ty("output.weight"), GgmlType::Q6_K);
        assert_eq!(ty("token_embd.weight"), GgmlType::Q4_K);
    }

    #[test]
    fn rows_that_k_quants_cannot_cut_fall_back_as_in_llama_cpp() {
        // SmolLM2's width, 576, is not a multiple of 256.
        let shape = ModelShape::like("SmolLM2-135M").unwrap();
        let plan = tensor_plan(&shape, WeightType::Q4KM);
        let ty = |name: &str| plan.iter().find(|t| t.name == name).unwrap().ty;
        assert_eq!(ty("blk.5.attn_q.weight"), GgmlType::Q5_0);
        assert_eq!(ty("blk.4.ffn_down.weight"), GgmlType::Q4_K); // k = 1536, a multiple of 256
        assert_eq!(ty("blk.5.ffn_down.weight"), GgmlType::Q6_K); // a layer use_more_bits picks
        assert_eq!(ty("token_embd.weight"), GgmlType::Q8_0); // tied: the output's q6_K, fallen back
    }
}
