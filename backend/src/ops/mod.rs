//! The operations the backend runs on the GPU. Each op checks its operands, picks a kernel
//! variant for them and the device, and records its dispatches on a [`crate::exec::Stream`].

pub mod dequantize;
pub mod flash_attn;
pub mod mul_mat;
