//! The measured defaults, per class of device: plain values, each measured one with a pointer
//! to its evidence in `bench/results/`, and the classes never measured marked `unmeasured:`
//! with values reasoned from upstream's choices (ggml-webgpu, ggml-vulkan). One module per op.

mod mul_mat;

pub use mul_mat::mul_mat;

use crate::facts::DeviceClass;
use crate::tuning::FlashAttnKnobs;

/// FLASH_ATTN_EXT's defaults for `class` (its planner picks by device where a knob is `None`).
pub fn flash_attn(class: DeviceClass) -> FlashAttnKnobs {
    let _ = class;
    FlashAttnKnobs::default()
}
