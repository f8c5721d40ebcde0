//! A model file: its hyperparameters and the map of its tensors, checked against what the
//! architecture needs (names, shapes, types MUL_MAT takes). Only the header is read; tensor `t`'s
//! bytes lie at [`Model::data_offset`] + `t.offset` of the file.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use ggml_dawn::GgmlType;
use ggml_dawn::gguf::{GgufHeader, Metadata, TensorInfo};
use ggml_dawn::ops::dequantize;

use crate::config::{Architecture, ModelConfig};
use crate::error::{LlmError, Result};

/// What a tensor is used for, which decides the types it may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// A matrix for MUL_MAT (or GET_ROWS for the embedding): any type the backend dequantizes.
    Matrix,
    /// A norm weight, bias or frequency factor: f32, as llama.cpp's converter writes them.
    Vector,
}

/// One tensor the architecture expects.
#[derive(Debug, Clone)]
struct Expected {
    name: String,
    ne: Vec<usize>,
    role: Role,
    required: bool,
}

/// The names of one layer's tensors (`blk.{i}.…`), as llama.cpp's converter writes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerNames {
    pub attn_norm: String,
    pub attn_q: String,
    pub attn_k: String,
    pub attn_v: String,
    pub attn_q_bias: String,
    pub attn_k_bias: String,
    pub attn_v_bias: String,
    pub attn_output: String,
    pub ffn_norm: String,
    pub ffn_gate: String,
    pub ffn_up: String,
    pub ffn_down: String,
}

impl LayerNames {
    /// The names for layer `i`.
    pub fn new(i: usize) -> LayerNames {
        let n = |s: &str| format!("blk.{i}.{s}");
        LayerNames {
            attn_norm: n("attn_norm.weight"),
            attn_q: n("attn_q.weight"),
            attn_k: n("attn_k.weight"),
            attn_v: n("attn_v.weight"),
            attn_q_bias: n("attn_q.bias"),
            attn_k_bias: n("attn_k.bias"),
            attn_v_bias: n("attn_v.bias"),
            attn_output: n("attn_output.weight"),
            ffn_norm: n("ffn_norm.weight"),
            ffn_gate: n("ffn_gate.weight"),
            ffn_up: n("ffn_up.weight"),
            ffn_down: n("ffn_down.weight"),
        }
    }
}

/// The token embedding.
pub const TOKEN_EMBD: &str = "token_embd.weight";
/// The final norm's weight.
pub const OUTPUT_NORM: &str = "output_norm.weight";
/// The output projection; absent when tied to the token embedding.
pub const OUTPUT: &str = "output.weight";
/// Llama 3's rope frequency factors.
pub const ROPE_FREQS: &str = "rope_freqs.weight";

/// Every tensor a model of `config` may hold.
fn expected_tensors(config: &ModelConfig) -> Vec<Expected> {
    let (e, v, q, kv, ff) = (
        config.n_embd,
        config.n_vocab,
        config.n_embd_q(),
        config.n_embd_kv(),
        config.n_ff,
    );
    let t = |name: &str, ne: &[usize], role: Role, required: bool| Expected {
        name: name.to_owned(),
        ne: ne.to_vec(),
        role,
        required,
    };
    let mut out = vec![
        t(TOKEN_EMBD, &[e, v], Role::Matrix, true),
        t(OUTPUT_NORM, &[e], Role::Vector, true),
        t(OUTPUT, &[e, v], Role::Matrix, false),
        t(ROPE_FREQS, &[config.n_rot / 2], Role::Vector, false),
    ];
    if config.architecture == Architecture::Qwen2 {
        out.push(t("output.bias", &[v], Role::Vector, false));
    }
    for i in 0..config.n_layer {
        let l = LayerNames::new(i);
        out.extend([
            t(&l.attn_norm, &[e], Role::Vector, true),
            t(&l.attn_q, &[e, q], Role::Matrix, true),
            t(&l.attn_k, &[e, kv], Role::Matrix, true),
            t(&l.attn_v, &[e, kv], Role::Matrix, true),
            t(&l.attn_q_bias, &[q], Role::Vector, false),
            t(&l.attn_k_bias, &[kv], Role::Vector, false),
            t(&l.attn_v_bias, &[kv], Role::Vector, false),
            t(&l.attn_output, &[q, e], Role::Matrix, true),
            t(&l.ffn_norm, &[e], Role::Vector, true),
            t(&l.ffn_gate, &[e, ff], Role::Matrix, true),
            t(&l.ffn_up, &[e, ff], Role::Matrix, true),
            t(&l.ffn_down, &[ff, e], Role::Matrix, true),
        ]);
    }
    out
}

/// A llama-family model file: hyperparameters and tensor map, checked.
#[derive(Debug, Clone)]
pub struct Model {
    pub config: ModelConfig,
    path: PathBuf,
    header: GgufHeader,
    tensors: BTreeMap<String, usize>,
}

impl Model {
    /// Reads the header of the GGUF file at `path` and checks it describes a model this crate
    /// runs: the architecture, hyperparameters, and every tensor's presence, shape and type.
    pub fn open(path: impl AsRef<Path>) -> Result<Model> {
        let path = path.as_ref();
        let file = File::open(path)
            .map_err(|e| LlmError::Io(std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))))?;
        let header = GgufHeader::read(BufReader::new(file))?;
        Model::from_header(path, header)
    }

    /// As [`Model::open`], from a header already read.
    pub fn from_header(path: impl Into<PathBuf>, header: GgufHeader) -> Result<Model> {
        let config = ModelConfig::from_metadata(&header.metadata)?;
        let tensors: BTreeMap<String, usize> = header
            .tensors()
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        let model = Model {
            config,
            path: path.into(),
            header,
            tensors,
        };
        model.check_tensors()?;
        Ok(model)
    }

    fn check_tensors(&self) -> Result<()> {
        let arch = self.config.architecture.name();
        let expected = expected_tensors(&self.config);
        let known: HashSet<&str> = expected.iter().map(|e| e.name.as_str()).collect();
        if let Some(extra) = self.header.tensors().iter().find(|t| !known.contains(t.name.as_str())) {
            return Err(LlmError::Tensor {
                name: extra.name.clone(),
                reason: format!("not part of a {arch} model of this shape; this crate cannot run it"),
            });
        }
        for want in &expected {
            let Some(info) = self.tensor(&want.name) else {
                if want.required {
                    return Err(LlmError::MissingTensor {
                        name: want.name.clone(),
                        arch,
                    });
                }
                continue;
            };
            let bad = |reason: String| LlmError::Tensor {
                name: want.name.clone(),
                reason,
            };
            let mut ne = [1usize; 4];
            ne[..want.ne.len()].copy_from_slice(&want.ne);
            if info.ne != ne {
                return Err(bad(format!("shape {:?}, expected {:?}", info.ne, ne)));
            }
            let ty = info
                .ggml_type()
                .ok_or_else(|| bad(format!("ggml type id {} is unknown", info.ty)))?;
            let ok = match want.role {
                Role::Matrix => dequantize::supports(ty),
                Role::Vector => ty == GgmlType::F32,
            };
            if !ok {
                let what = match want.role {
                    Role::Matrix => "a matrix type MUL_MAT supports",
                    Role::Vector => "f32",
                };
                return Err(bad(format!("type {ty}, expected {what}")));
            }
        }
        Ok(())
    }

    /// The file this model was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// All metadata (the tokenizer reads its vocabulary from here).
    pub fn metadata(&self) -> &Metadata {
        &self.header.metadata
    }

    /// The header as read.
    pub fn header(&self) -> &GgufHeader {
        &self.header
    }

    /// Where the data section starts in the file.
    pub fn data_offset(&self) -> usize {
        self.header.data_offset
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.get(name).map(|&i| &self.header.tensors()[i])
    }

    /// All tensors, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        self.header.tensors()
    }

    /// Whether the output projection is the token embedding (no `output.weight`).
    pub fn tied_output(&self) -> bool {
        self.tensor(OUTPUT).is_none()
    }

    /// The name of the output projection's weight: `output.weight`, or the embedding when tied.
    pub fn output_name(&self) -> &'static str {
        if self.tied_output() { TOKEN_EMBD } else { OUTPUT }
    }

    /// Whether the q, k and v projections of every layer have biases (Qwen 2).
    pub fn has_qkv_bias(&self) -> bool {
        (0..self.config.n_layer).all(|i| {
            let l = LayerNames::new(i);
            [l.attn_q_bias, l.attn_k_bias, l.attn_v_bias]
                .iter()
                .all(|n| self.tensor(n).is_some())
        })
    }

    /// Whether the file holds Llama 3's rope frequency factors.
    pub fn has_rope_freqs(&self) -> bool {
        self.tensor(ROPE_FREQS).is_some()
    }

    /// Bytes of all tensor data.
    pub fn weight_bytes(&self) -> usize {
        self.tensors().iter().filter_map(TensorInfo::nbytes).sum()
    }

    /// The file's weight type as llama.cpp names it (`general.file_type`): `Q4_1`,
    /// `Q4_K - Medium`; the token embedding's type where the file does not say.
    pub fn file_type_name(&self) -> String {
        let named = match crate::meta::get_u32(self.metadata(), "general.file_type") {
            Ok(Some(ft)) => FILE_TYPES
                .iter()
                .find(|(id, _)| *id == ft)
                .map(|(_, name)| (*name).to_owned()),
            _ => None,
        };
        named.unwrap_or_else(|| match self.tensor(TOKEN_EMBD).and_then(TensorInfo::ggml_type) {
            Some(ty) => ty.to_string().to_uppercase(),
            None => "?".to_owned(),
        })
    }
}

/// llama.cpp's `llama_ftype` values and names (`llama_model_ftype_name`).
const FILE_TYPES: &[(u32, &str)] = &[
    (0, "all F32"),
    (1, "F16"),
    (2, "Q4_0"),
    (3, "Q4_1"),
    (7, "Q8_0"),
    (8, "Q5_0"),
    (9, "Q5_1"),
    (10, "Q2_K - Medium"),
    (11, "Q3_K - Small"),
    (12, "Q3_K - Medium"),
    (13, "Q3_K - Large"),
    (14, "Q4_K - Small"),
    (15, "Q4_K - Medium"),
    (16, "Q5_K - Small"),
    (17, "Q5_K - Medium"),
    (18, "Q6_K"),
    (32, "BF16"),
];
