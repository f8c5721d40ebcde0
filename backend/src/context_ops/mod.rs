//! [`crate::GpuContext`]'s methods for its tensors and its ops: each op records on the context's
//! own stream through [`crate::ops`] (which take an [`crate::ops::Env`], not the context), one
//! file a family of ops.

mod argmax;
mod binary;
pub(crate) mod custom;
mod flash_attn;
mod glu;
mod memory;
mod mul_mat;
mod norm;
mod rope;
mod rows;
mod scale;
mod soft_max;
mod warm_up;
mod write;

pub use warm_up::WarmUp;
