//! The operations the backend runs on the GPU. Each op checks its operands, plans its kernels
//! for them and the device (the plan decides everything), and records the plan's dispatches on
//! a [`crate::exec::Stream`]; it returns the plan it followed.
//!
//! [`crate::GpuContext`]'s methods run them on the context's own stream, batched until
//! [`crate::GpuContext::synchronize`] (or a read).

pub mod argmax;
pub mod arith;
pub mod binary;
pub mod dequantize;
pub(crate) mod elementwise;
mod env;
pub mod flash_attn;
pub mod glu;
pub mod mul_mat;
pub mod norm;
pub mod rope;
pub mod row_plan;
pub mod rows;
pub mod scale;
pub mod soft_max;
pub mod write;

pub use env::Env;
pub(crate) use env::{PlanKernelMemos, SinglePlan};
