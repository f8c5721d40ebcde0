//! How many workgroups share a KV sequence (the split-KV scheme both fast kernels use): enough
//! splits to fill the device, few enough that each reads several times the partial results it
//! writes, and a scratch that fits one binding.

use super::{DeviceFacts, FlashAttnTuning, Problem};
use crate::ggml_type::GgmlType;
use crate::ops::flash_attn::MAX_SPLIT;

/// K/V bytes a split reads per byte of partial results it writes, at least (unless that leaves
/// too few workgroups).
const PARTIAL_RATIO: u64 = 8;

/// Bytes of a row of `n` elements of `ty`.
fn row_bytes(ty: GgmlType, n: usize) -> u64 {
    (n.div_ceil(ty.block_size()) * ty.type_size()) as u64
}

/// The split count and keys per split.
#[allow(clippy::too_many_arguments)]
pub(super) fn splits(
    shape: &Problem,
    device: &DeviceFacts,
    tuning: &FlashAttnTuning,
    mma: bool,
    rows: u32,
    row_blocks: u32,
    kv_tile: u32,
) -> (u32, u32) {
    let kv = shape.kv as u32;
    let tiles = kv.div_ceil(kv_tile);
    let base = row_blocks as u64 * shape.kv_heads as u64 * shape.n_seq as u64;
    let target = if mma {
        tuning.mma_target_workgroups
    } else {
        tuning.target_workgroups
    };
    let min_tiles = tuning.min_split_tiles.max(1);
    // A split should read several times more K/V bytes than it writes partial results.
    let kv_bytes = row_bytes(shape.k_type, shape.hsk) + row_bytes(shape.v_type, shape.hsv);
    let partial = rows as u64 * (shape.hsv as u64 + 2) * 4;
    let min_keys = (partial * PARTIAL_RATIO).div_ceil(kv_bytes.max(1)) as u32;
    let min_tiles = min_tiles.max(min_keys.div_ceil(kv_tile));
    let mut n = match tuning.split {
        Some(n) => n.max(1),
        None if base >= target as u64 => 1,
        None => (target as u64).div_ceil(base).min(tiles.div_ceil(min_tiles) as u64) as u32,
    };
    n = n.clamp(1, tiles.min(MAX_SPLIT));
    // The scratch must fit one binding.
    let per_split = shape.out_rows() as u64 * (shape.hsv as u64 + 2) * 4 + 256;
    if let Some(most) = device.max_storage_binding.checked_div(per_split) {
        n = n.min(most.clamp(1, u32::MAX as u64) as u32);
    }
    let split_len = tiles.div_ceil(n) * kv_tile;
    (kv.div_ceil(split_len), split_len)
}
