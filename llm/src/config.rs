//! A model's hyperparameters, read from GGUF metadata as llama.cpp reads them for `llama` and
//! `qwen2` (`{arch}.context_length`, `{arch}.attention.head_count`, …, with llama.cpp's defaults
//! for the optional keys).

use std::fmt;

use ggml_dawn::gguf::Metadata;

use crate::error::{LlmError, Result};
use crate::meta;

/// The architectures this crate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Architecture {
    /// Llama 2 and 3, SmolLM, Mistral-style models: no biases on the projections.
    Llama,
    /// Qwen 2: biases on the q, k and v projections.
    Qwen2,
}

impl Architecture {
    /// The name in `general.architecture`.
    pub fn name(self) -> &'static str {
        match self {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
        }
    }

    /// The architecture named `name`, or an error naming it.
    pub fn from_name(name: &str) -> Result<Architecture> {
        match name {
            "llama" => Ok(Architecture::Llama),
            "qwen2" => Ok(Architecture::Qwen2),
            other => Err(LlmError::UnsupportedArchitecture(other.to_owned())),
        }
    }
}

impl fmt::Display for Architecture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How positions are scaled before rotation (`{arch}.rope.scaling.type`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RopeScaling {
    /// No scaling (`none`, or `linear` with factor 1).
    None,
    /// Positions divided by `factor`.
    Linear { factor: f32 },
    /// YaRN over `original_context` positions.
    Yarn {
        factor: f32,
        original_context: u32,
        attn_factor: f32,
    },
}

/// The hyperparameters a decoder needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub architecture: Architecture,
    /// `general.name`, when the file has one.
    pub name: Option<String>,
    /// Rows of the token embedding: `{arch}.vocab_size`, else the tokenizer's token count.
    pub n_vocab: usize,
    /// The context length the model was trained with.
    pub n_ctx_train: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_ff: usize,
    pub n_head: usize,
    /// Key-value heads; fewer than `n_head` for grouped-query attention.
    pub n_head_kv: usize,
    /// Size of one attention head (keys and values alike).
    pub head_dim: usize,
    /// Rotated dimensions per head (`{arch}.rope.dimension_count`).
    pub n_rot: usize,
    pub rms_norm_eps: f32,
    /// `{arch}.rope.freq_base`, 10000 when absent.
    pub rope_freq_base: f32,
    pub rope_scaling: RopeScaling,
}

impl ModelConfig {
    /// Reads the hyperparameters; refuses a file whose architecture is not supported or whose
    /// values do not describe a decoder this crate can run.
    pub fn from_metadata(meta: &Metadata) -> Result<ModelConfig> {
        let arch_name = meta::get_str(meta, "general.architecture")?
            .ok_or_else(|| LlmError::MissingKey("general.architecture".into()))?;
        let architecture = Architecture::from_name(arch_name)?;
        let key = |suffix: &str| format!("{arch_name}.{suffix}");
        let required = |suffix: &str| -> Result<usize> {
            let k = key(suffix);
            match meta::get_u32(meta, &k)? {
                Some(v) if v > 0 => Ok(v as usize),
                Some(_) => Err(LlmError::Metadata {
                    key: k,
                    reason: "must be positive".into(),
                }),
                None => Err(LlmError::MissingKey(k)),
            }
        };

        if meta::get_u32(meta, &key("expert_count"))?.unwrap_or(0) > 0 {
            return Err(LlmError::Metadata {
                key: key("expert_count"),
                reason: "mixture-of-experts models are not supported".into(),
            });
        }
        let n_ctx_train = required("context_length")?;
        let n_embd = required("embedding_length")?;
        let n_layer = required("block_count")?;
        let n_ff = required("feed_forward_length")?;
        let n_head = required("attention.head_count")?;
        let n_head_kv = match meta::get_u32(meta, &key("attention.head_count_kv"))? {
            None => n_head,
            Some(v) => v as usize,
        };
        if n_head_kv == 0 || !n_head.is_multiple_of(n_head_kv) {
            return Err(LlmError::Metadata {
                key: key("attention.head_count_kv"),
                reason: format!("{n_head_kv} key-value heads do not divide {n_head} query heads"),
            });
        }
        let head_k = meta::get_u32(meta, &key("attention.key_length"))?.map_or(n_embd / n_head, |v| v as usize);
        let head_v = meta::get_u32(meta, &key("attention.value_length"))?.map_or(n_embd / n_head, |v| v as usize);
        if head_k != head_v || head_k == 0 {
            return Err(LlmError::Metadata {
                key: key("attention.key_length"),
                reason: format!("key heads of {head_k} and value heads of {head_v}: they must be equal and positive"),
            });
        }
        let n_rot = meta::get_u32(meta, &key("rope.dimension_count"))?.map_or(head_k, |v| v as usize);
        if n_rot != head_k {
            return Err(LlmError::Metadata {
                key: key("rope.dimension_count"),
                reason: format!("{n_rot} rotated dimensions for heads of {head_k} (llama.cpp requires them equal)"),
            });
        }
        let rms_norm_eps = meta::get_f32(meta, &key("attention.layer_norm_rms_epsilon"))?
            .ok_or_else(|| LlmError::MissingKey(key("attention.layer_norm_rms_epsilon")))?;
        let rope_freq_base = meta::get_f32(meta, &key("rope.freq_base"))?.unwrap_or(10000.0);

        let factor = match meta::get_f32(meta, &key("rope.scaling.factor"))? {
            Some(f) => Some(f),
            None => meta::get_f32(meta, &key("rope.scale_linear"))?,
        }
        .filter(|&f| f != 0.0);
        let scaling_type = meta::get_str(meta, &key("rope.scaling.type"))?.unwrap_or("linear");
        let rope_scaling = match (scaling_type, factor) {
            ("none", _) | ("linear", None) => RopeScaling::None,
            ("linear", Some(1.0)) => RopeScaling::None,
            ("linear", Some(factor)) => RopeScaling::Linear { factor },
            ("yarn", f) => RopeScaling::Yarn {
                factor: f.unwrap_or(1.0),
                original_context: meta::get_u32(meta, &key("rope.scaling.original_context_length"))?
                    .unwrap_or(n_ctx_train as u32),
                attn_factor: meta::get_f32(meta, &key("rope.scaling.attn_factor"))?.unwrap_or(1.0),
            },
            (other, _) => {
                return Err(LlmError::Metadata {
                    key: key("rope.scaling.type"),
                    reason: format!("rope scaling `{other}` is not supported (none, linear and yarn are)"),
                });
            }
        };

        let n_vocab = match meta::get_u32(meta, &key("vocab_size"))? {
            Some(v) => v as usize,
            None => meta::array_len(meta, "tokenizer.ggml.tokens")
                .ok_or_else(|| LlmError::MissingKey("tokenizer.ggml.tokens".into()))?,
        };
        Ok(ModelConfig {
            architecture,
            name: meta::get_str(meta, "general.name")?.map(str::to_owned),
            n_vocab,
            n_ctx_train,
            n_embd,
            n_layer,
            n_ff,
            n_head,
            n_head_kv,
            head_dim: head_k,
            n_rot,
            rms_norm_eps,
            rope_freq_base,
            rope_scaling,
        })
    }

    /// Query heads per key-value head.
    pub fn n_gqa(&self) -> usize {
        self.n_head / self.n_head_kv
    }

    /// Width of the query projection's output.
    pub fn n_embd_q(&self) -> usize {
        self.n_head * self.head_dim
    }

    /// Width of the key (and value) projection's output.
    pub fn n_embd_kv(&self) -> usize {
        self.n_head_kv * self.head_dim
    }
}
