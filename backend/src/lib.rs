//! ggml's tensor operations on Dawn: the compute backend of this workspace.
//!
//! Device setup follows ggml's WebGPU backend ([`context`]); the ops, formats and CPU reference
//! build on it.

pub mod context;
pub mod selfcheck;

pub use context::{Capabilities, ContextError, ContextOptions, GpuContext};
