//! The crate's one error type, [`Error`]: every failure is a value naming what failed, and
//! [`Error::kind`] says what kind of failure it is, for a program to match on.

use crate::format::FormatError;
use crate::shader_lib::PreprocessError;
use crate::tensor::LayoutError;

/// The result type of the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The name [`Error`] had before it was the crate's one error type.
pub type BackendError = Error;

/// What went wrong: every public function of the crate returns this (or an error that converts
/// into it with `?`: [`crate::ContextError`], [`LayoutError`], [`FormatError`],
/// [`crate::gguf::GgufError`], [`crate::input_file::InputFileError`], `dawn::Error`). The
/// message keeps the details; [`Error::kind`] classifies it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
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

    /// An operand has the wrong type for the op.
    #[error("wrong type: {0}")]
    WrongType(String),
    /// A view or binding reaches past the memory it belongs to.
    #[error("out of bounds: {0}")]
    OutOfBounds(String),
    /// An op's output shares bytes with one of its inputs.
    #[error("overlapping operands: {0}")]
    Overlap(String),
    /// A wait on this stream failed (its device was lost, Dawn reported an error); the stream
    /// takes no more work.
    #[error("the stream stopped after an earlier failure ({0}); make a new context and stream")]
    StreamFailed(String),
    /// The context could not be made (no adapter, a refused option, a driver that does not
    /// answer).
    #[error(transparent)]
    Context(Box<crate::context::ContextError>),
    /// A file named by the caller could not be read (the message names it).
    #[error("{0}")]
    File(String),
}

impl From<crate::input_file::InputFileError> for Error {
    fn from(e: crate::input_file::InputFileError) -> Self {
        Error::File(e.to_string())
    }
}

/// What kind of failure an [`Error`] is: what a program may want to react to differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Shapes or strides that do not fit together or with the op (a program's bug).
    Shape,
    /// An operand of a type the op does not take.
    Type,
    /// A view or binding past the memory it belongs to.
    OutOfBounds,
    /// An output that shares bytes with an input.
    Overlap,
    /// Over a device limit (a binding, a buffer, workgroups): smaller pieces may work.
    TooLarge,
    /// The device ran out of memory.
    OutOfMemory,
    /// The device is gone (destroyed, reset, the driver failed); make a new context.
    DeviceLost,
    /// A wait took longer than allowed; the work goes on and the context stays usable.
    Timeout,
    /// What was asked is not implemented for these types or on this device.
    Unsupported,
    /// No usable adapter: no GPU driver, or none matching the choice.
    NoDevice,
    /// A setting (tuning knobs, toggles, options) is invalid.
    Config,
    /// A file (GGUF, input) could not be read or is malformed.
    File,
    /// A shader failed to build: a bug of this crate (or of a kernel of one's own).
    Shader,
    /// Anything else Dawn reported.
    Other,
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Dawn(e) => dawn_kind(e),
            Error::Shader { .. } => ErrorKind::Shader,
            Error::Layout(e) => match e {
                LayoutError::OutOfBounds { .. } => ErrorKind::OutOfBounds,
                LayoutError::Overflow { .. } | LayoutError::SizeOverflow { .. } => ErrorKind::TooLarge,
                _ => ErrorKind::Shape,
            },
            Error::Format(FormatError::Unsupported(_)) => ErrorKind::Unsupported,
            Error::Format(_) => ErrorKind::Shape,
            Error::Unsupported(_) => ErrorKind::Unsupported,
            Error::TooLarge { .. } => ErrorKind::TooLarge,
            Error::Config { .. } => ErrorKind::Config,
            Error::Gguf(_) | Error::File(_) => ErrorKind::File,
            Error::InvalidOperands(_) => ErrorKind::Shape,
            Error::WrongType(_) => ErrorKind::Type,
            Error::OutOfBounds(_) => ErrorKind::OutOfBounds,
            Error::Overlap(_) => ErrorKind::Overlap,
            Error::StreamFailed(_) => ErrorKind::DeviceLost,
            Error::Context(e) => {
                use crate::context::ContextError as C;
                match &**e {
                    C::Dawn(e) => dawn_kind(e),
                    C::Backend(e) => e.kind(),
                    C::NoSuchConfig(..) => ErrorKind::Unsupported,
                    C::UnknownToggle { .. } => ErrorKind::Config,
                    C::Timeout { .. } => ErrorKind::Timeout,
                    C::NullBackend { .. } | C::NoSuchAdapter { .. } => ErrorKind::NoDevice,
                }
            }
        }
    }
}

fn dawn_kind(e: &dawn::Error) -> ErrorKind {
    match e {
        dawn::Error::Timeout(_) => ErrorKind::Timeout,
        dawn::Error::DeviceLost { .. } => ErrorKind::DeviceLost,
        dawn::Error::OutOfMemory(_) => ErrorKind::OutOfMemory,
        dawn::Error::NoAdapter(_) => ErrorKind::NoDevice,
        dawn::Error::ShaderCompilation { .. } => ErrorKind::Shader,
        dawn::Error::MissingFeature(_) => ErrorKind::Unsupported,
        dawn::Error::UnsafeToggle(_) => ErrorKind::Config,
        _ => ErrorKind::Other,
    }
}

impl From<crate::context::ContextError> for Error {
    fn from(e: crate::context::ContextError) -> Self {
        match e {
            // Not wrapped twice.
            crate::context::ContextError::Backend(e) => e,
            e => Error::Context(Box::new(e)),
        }
    }
}

impl From<crate::reference::ReferenceError> for Error {
    fn from(e: crate::reference::ReferenceError) -> Self {
        BackendError::InvalidOperands(format!("reference: {e}"))
    }
}

impl From<crate::gguf::GgufError> for Error {
    fn from(e: crate::gguf::GgufError) -> Self {
        BackendError::Gguf(e.to_string())
    }
}

impl From<PreprocessError> for Error {
    fn from(e: PreprocessError) -> Self {
        BackendError::Shader {
            variant: e.file.clone(),
            message: e.to_string(),
        }
    }
}
