//! The backend's errors: every failure is a value naming what failed.

use crate::format::FormatError;
use crate::shader_lib::PreprocessError;
use crate::tensor::LayoutError;

/// The result type of the backend.
pub type Result<T, E = BackendError> = std::result::Result<T, E>;

/// What went wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BackendError {
    /// Dawn reported an error (including a lost device).
    #[error(transparent)]
    Dawn(#[from] dawn::Error),
    /// A shader variant did not preprocess or compile; `variant` is its key.
    #[error("shader variant `{variant}` failed: {message}")]
    Shader { variant: String, message: String },
    /// A tensor layout is invalid or does not fit its storage.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// A CPU format conversion failed.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The operation, type or shape is not supported (on this device).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A buffer or binding would exceed a device limit.
    #[error("{what} needs {bytes} bytes, over the device limit {limit} ({limit_name})")]
    TooLarge {
        what: String,
        bytes: u64,
        limit: u64,
        limit_name: &'static str,
    },
    /// A setting (an environment variable's knobs) is invalid; `name` is the setting.
    #[error("{name}: {message}")]
    Config { name: &'static str, message: String },
    /// A GGUF file could not be read (the message names the file or tensor).
    #[error("GGUF: {0}")]
    Gguf(String),
    /// Operands do not fit together (shapes, types, strides).
    #[error("invalid operands: {0}")]
    InvalidOperands(String),

    /// A wait on this stream failed (its device was lost, Dawn reported an error); the stream
    /// takes no more work.
    #[error("the stream stopped after an earlier failure ({0}); make a new context and stream")]
    StreamFailed(String),
}

impl From<crate::reference::ReferenceError> for BackendError {
    fn from(e: crate::reference::ReferenceError) -> Self {
        BackendError::InvalidOperands(format!("reference: {e}"))
    }
}

impl From<crate::gguf::GgufError> for BackendError {
    fn from(e: crate::gguf::GgufError) -> Self {
        BackendError::Gguf(e.to_string())
    }
}

impl From<PreprocessError> for BackendError {
    fn from(e: PreprocessError) -> Self {
        BackendError::Shader {
            variant: e.file.clone(),
            message: e.to_string(),
        }
    }
}
