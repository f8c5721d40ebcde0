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
//! ```no_run
//! use ggml_dawn_llm::{Model, Sampler, SamplerParams, Tokenizer};
//!
//! # fn main() -> Result<(), ggml_dawn_llm::LlmError> {
//! let model = Model::open("SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! println!("{} layers, width {}", model.config.n_layer, model.config.n_embd);
//! let tokenizer = Tokenizer::from_metadata(model.metadata())?;
//! let ids = tokenizer.encode("Hello, world!", true, true)?;
//! let mut sampler = Sampler::new(SamplerParams { seed: 42, ..SamplerParams::default() })?;
//! let logits = vec![0.0f32; model.config.n_vocab];
//! let next = sampler.sample(&logits)?;
//! # let _ = (ids, next);
//! # Ok(())
//! # }
//! ```

pub mod config;
pub mod error;
pub mod meta;
pub mod model;
pub mod sampling;
pub mod synth;
pub mod tokenizer;

pub use config::{Architecture, ModelConfig, RopeScaling};
pub use error::{LlmError, Result};
pub use model::Model;
pub use sampling::{Sampler, SamplerParams};
pub use tokenizer::{TokenId, Tokenizer};
