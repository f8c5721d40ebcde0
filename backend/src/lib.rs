//! ggml's tensor operations on Dawn: the compute backend of this workspace.
//!
//! - [`ggml_type`], [`tensor`], [`format`]: ggml's types, layouts and block formats, on the CPU.
//! - [`context`]: device setup as ggml's WebGPU backend does it, and the capability probe.

pub mod context;
pub mod error;
pub mod exec;
pub mod facts;
pub mod format;
pub mod ggml_type;
pub mod gguf;
pub mod kernel;
pub mod memory;
pub mod ops;
pub mod params;
pub mod reference;
pub mod scratch;
pub mod shader_lib;
pub mod tensor;
pub mod tuning;

pub use context::{Capabilities, ContextError, ContextOptions, GpuContext};
pub use facts::DeviceFacts;
pub use ggml_type::GgmlType;
pub use memory::DeviceTensor;
pub use tensor::{HostTensor, Layout};
pub use tuning::Tuning;
