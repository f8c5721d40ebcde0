//! [`crate::GpuContext`]'s methods for the decoder's ops: each records its op on the context's own
//! stream through [`crate::ops`] (which take an [`crate::ops::Env`], not the context), one file a
//! family of ops.

mod argmax;
mod binary;
pub(crate) mod custom;
mod glu;
mod norm;
mod rope;
mod rows;
mod scale;
mod soft_max;
mod write;
