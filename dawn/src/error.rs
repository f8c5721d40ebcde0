//! Errors as values: everything Dawn reports, and what this crate checks before calling Dawn.

use std::fmt;
use std::time::Duration;

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, as a value. Nothing in this crate panics on a Dawn error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No adapter matched the request.
    #[error("no adapter available: {0}")]
    NoAdapter(String),
    /// The adapter refused to create a device.
    #[error("device request failed: {0}")]
    RequestDevice(String),
    /// The device is lost (destroyed, driver reset, …); it cannot be used any more.
    #[error("device lost ({reason}): {message}")]
    DeviceLost {
        /// Why the device was lost.
        reason: DeviceLostReason,
        /// Dawn's message.
        message: String,
    },
    /// Dawn's validation rejected a call.
    #[error("validation error: {0}")]
    Validation(String),
    /// An allocation failed on the device.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// Dawn or the driver failed internally.
    #[error("internal error: {0}")]
    Internal(String),
    /// A WGSL module did not compile; each message has its line and column.
    #[error("shader `{label}` failed to compile:\n{}", display_messages(.messages))]
    ShaderCompilation {
        /// The shader module's label.
        label: String,
        /// The compiler's messages.
        messages: Vec<CompilationMessage>,
    },
    /// Mapping a buffer failed.
    #[error("buffer mapping failed: {0}")]
    Map(String),
    /// An asynchronous operation was cancelled (its instance or device went away first).
    #[error("operation cancelled: {0}")]
    Cancelled(String),
    /// A wait ran past its timeout; the operation may still complete later.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// `WaitAny` itself failed (for example: a timeout without the `TimedWaitAny` feature).
    #[error("waiting failed: {0}")]
    Wait(String),
    /// A request that this crate can tell is wrong before Dawn sees it: a size over a limit, a
    /// buffer without the usage an operation needs, a misaligned offset, …
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The adapter lacks a feature the request needs.
    #[error("missing feature: {0}")]
    MissingFeature(String),
    /// A toggle that removes one of WebGPU's safety guarantees was given through the safe
    /// [`crate::Toggles::enable`] / [`crate::Toggles::disable`] rather than their `unsafe`
    /// counterparts.
    #[error("unsafe toggle: {0}")]
    UnsafeToggle(String),
}

impl Error {
    /// Whether the error means the device can no longer be used.
    pub fn is_device_lost(&self) -> bool {
        matches!(self, Error::DeviceLost { .. })
    }
}

/// Why a device was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceLostReason {
    /// `Device::destroy` was called.
    Destroyed,
    /// The device was lost for a reason Dawn does not know (often a driver reset or a hang).
    Unknown,
    /// Device creation failed.
    FailedCreation,
    /// The instance went away before the device was lost.
    CallbackCancelled,
}

impl fmt::Display for DeviceLostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceLostReason::Destroyed => "destroyed",
            DeviceLostReason::Unknown => "unknown reason",
            DeviceLostReason::FailedCreation => "creation failed",
            DeviceLostReason::CallbackCancelled => "instance dropped",
        })
    }
}

/// How serious a compilation message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// The module did not compile.
    Error,
    /// A problem that does not stop compilation.
    Warning,
    /// Information only.
    Info,
}

/// One message of the WGSL compiler, located in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompilationMessage {
    /// How serious the message is.
    pub kind: MessageKind,
    /// 1-based line (0 when the message has no location).
    pub line: u64,
    /// 1-based column, in UTF-16 code units as WebGPU counts them.
    pub column: u64,
    /// The message's text.
    pub message: String,
}

impl fmt::Display for CompilationMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            MessageKind::Error => "error",
            MessageKind::Warning => "warning",
            MessageKind::Info => "info",
        };
        write!(f, "{}:{}: {kind}: {}", self.line, self.column, self.message)
    }
}

fn display_messages(messages: &[CompilationMessage]) -> String {
    messages.iter().map(|m| format!("  {m}")).collect::<Vec<_>>().join("\n")
}
