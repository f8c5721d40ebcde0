//! The measured defaults, per class of device: plain values, each measured one with a pointer
//! to its evidence in `bench/results/`, and the classes never measured marked `unmeasured:`
//! with values reasoned from upstream's choices (ggml-webgpu, ggml-vulkan). One module per op.

mod flash_attn;
mod mul_mat;

pub use flash_attn::flash_attn;
pub use mul_mat::mul_mat;
