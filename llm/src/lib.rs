//! llama-family GGUF models on [`ggml_dawn`]: what a model runner needs besides the GPU ops.
//!
//! - [`Model`]: a model file's hyperparameters ([`ModelConfig`]) and tensor map, checked against
//!   what its architecture needs (`llama`: Llama 2 and 3, SmolLM, Mistral-style grouped KV heads,
//!   rope scaling and frequency factors; `qwen2`: q/k/v biases). Anything else is refused with an
//!   error naming the architecture or tensor.
//! - [`Tokenizer`]: the file's vocabulary with llama.cpp's tokenization (BPE with the named
//!   pre-tokenizer, SentencePiece with byte fallback, special tokens, BOS/EOS as the file says).
//! - [`Sampler`]: llama.cpp's default sampler chain (top-k, top-p, min-p, temperature, seeded
//!   draw; greedy at temperature 0).
//! - [`synth`]: seeded random-weight models in real models' shapes, as GGUF files llama.cpp loads.
//!
//! - [`Decoder`]: the model's weights on a backend and llama.cpp's `llama` graph over them, written
//!   once over the [`Ops`] trait; [`CpuOps`] runs it on `ggml_dawn::reference`'s ops, [`GpuOps`] on
//!   a GPU context (MUL_MAT and attention there; the other ops on the host until their kernels land).
//! - [`Session`]: a KV cache and position; [`Session::eval`] (prompts in micro-batches) and
//!   [`Session::generate`], an iterator of tokens.
//! - [`perplexity`]: llama-perplexity's chunks, its KL-divergence base file and statistics.
//!
//! A tiny synthetic model, written, loaded and run:
//!
//! ```
//! use ggml_dawn::GgmlType;
//! use ggml_dawn_llm::synth::{self, ModelShape, WeightType};
//! use ggml_dawn_llm::{Architecture, CpuOps, Decoder, Model, Sampler, SamplerParams, Session, Tokenizer};
//!
//! # fn main() -> Result<(), ggml_dawn_llm::LlmError> {
//! let shape = ModelShape {
//!     name: "tiny".into(),
//!     architecture: Architecture::Llama,
//!     n_vocab: 300,
//!     n_ctx_train: 256,
//!     n_embd: 64,
//!     n_layer: 2,
//!     n_ff: 96,
//!     n_head: 4,
//!     n_head_kv: 2,
//!     rope_freq_base: 10000.0,
//!     rms_norm_eps: 1e-5,
//!     tied_output: true,
//! };
//! let path = std::env::temp_dir().join(format!("dawn-llm-doc-{}.gguf", std::process::id()));
//! synth::write_model(&shape, WeightType::Q8_0, 42, std::fs::File::create(&path)?, |_, _| {})?;
//!
//! let model = Model::open(&path)?;
//! let tokenizer = Tokenizer::from_metadata(model.metadata())?;
//! let decoder = Decoder::load(&model, CpuOps)?;
//! let mut session = Session::new(&decoder, 64, GgmlType::F16)?;
//! let prompt = tokenizer.encode("hello world", true, true)?;
//! let logits = session.eval(&prompt)?; // what follows the prompt
//! assert_eq!(logits.len(), model.config.n_vocab);
//!
//! session.clear();
//! let greedy = Sampler::new(SamplerParams::greedy())?;
//! let mut text = Vec::new();
//! for id in session.generate(&prompt, greedy, 8) {
//!     let id = id?;
//!     if tokenizer.is_end_of_generation(id) {
//!         break;
//!     }
//!     text.extend(tokenizer.token_to_piece(id, true));
//! }
//! assert!(session.n_past() > prompt.len());
//! std::fs::remove_file(&path)?;
//! # Ok(())
//! # }
//! ```

pub mod bench;
pub mod config;
pub mod cpu;
pub mod decoder;
pub mod error;
pub mod gpu;
pub mod meta;
pub mod model;
pub mod ops;
pub mod perplexity;
pub mod sampling;
pub mod session;
pub mod synth;
pub mod tokenizer;

pub use config::{Architecture, ModelConfig, RopeScaling};
pub use cpu::CpuOps;
pub use decoder::{Decoder, DecoderParams, KvCache};
pub use error::{LlmError, Result};
pub use gpu::GpuOps;
pub use model::Model;
pub use ops::Ops;
pub use sampling::{Sampler, SamplerParams};
pub use session::{Generation, Session};
pub use tokenizer::{TokenId, Tokenizer};
