//! [`crate::GpuContext`]'s methods for its tensors and its ops: each op records on the context's
//! own stream through [`crate::ops`] (which take an [`crate::ops::Env`], not the context), one
//! file a family of ops.

mod flash_attn;
mod memory;
mod mul_mat;
mod rope;
mod rows;
mod warm_up;

pub use warm_up::WarmUp;
