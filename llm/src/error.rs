//! Why a model, a vocabulary or an argument was refused.

use ggml_dawn::gguf::GgufError;

/// Everything this crate can refuse; each message fits on one line and names what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("architecture `{0}` is not supported (llama and qwen2 are)")]
    UnsupportedArchitecture(String),
    #[error("metadata `{key}`: {reason}")]
    Metadata { key: String, reason: String },
    #[error("metadata `{0}` is missing")]
    MissingKey(String),
    #[error("tensor `{name}` is missing (a {arch} model needs it)")]
    MissingTensor { name: String, arch: &'static str },
    #[error("tensor `{name}`: {reason}")]
    Tensor { name: String, reason: String },
    #[error("vocabulary: {0}")]
    Vocab(String),
    #[error("cannot tokenize: {0}")]
    Tokenize(String),
    #[error("{0}")]
    Format(#[from] ggml_dawn::format::FormatError),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("the context of {n_ctx} tokens is full ({needed} needed); raise -c")]
    ContextFull { needed: usize, n_ctx: usize },
    #[error("backend: {0}")]
    Backend(String),
    #[error("{0}")]
    Layout(#[from] ggml_dawn::tensor::LayoutError),
    #[error("interrupted")]
    Interrupted,
}

/// This crate's result type.
pub type Result<T, E = LlmError> = std::result::Result<T, E>;
