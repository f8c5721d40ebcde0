//! The simple kernel (`flash_attn_simple.wgsl`): one workgroup per query row over f32 copies
//! of K and V, the last resort.

use super::{Choice, FlashAttnPlan, Problem};

/// The simple kernel (over f32 copies of K and V), for `why`.
pub fn simple(shape: &Problem, why: String) -> FlashAttnPlan {
    FlashAttnPlan {
        problem: *shape,
        choice: Choice::Simple(why),
        rows: 0,
        row_blocks: 0,
        n_split: 1,
        split_len: shape.kv as u32,
        kv_tile: 0,
        tau: 0.0,
        mask_skip: false,
        k_vec: false,
        v_vec: false,
    }
}
