// b quantized to 8 bits in blocks of 32 for the integer mat-vec (mul_mat_vec.wgsl with B_Q8),
// once per MUL_MAT instead of once per workgroup. Block (batch, column, i) is three 16-byte
// words at word 12 · ((batch · n + column) · k / 32 + i) of dst: the 32 values as signed bytes
// (round(x / d), d = max|x| / 127), then d, d·Σq over the first 16 and over the last 16 (f32
// bits) and a zero. With B_Q8K (the K-quant mat-vec), the blocks of each 128 elements are
// interleaved instead (see below) and only d is kept; k is then a multiple of 128. One thread
// per block (but with B_RMS_NORM); k is a multiple of 32.
//
// With B_SWIGLU or B_RMS_NORM (mul_mat_operands.wgsl), the blocks are of b's values after that
// op, the same values the mat-vec that quantizes b in its workgroup makes: with B_RMS_NORM one
// workgroup of NORM_GROUP threads a column first sums its squares as RMS_NORM's kernel would
// (mul_mat_norm.wgsl) and stores the residual sum with B_NORM_RESIDUAL, then quantizes it.
//
// Defines: the operand defines of mul_mat_operands.wgsl (b's), WG_SIZE (NORM_GROUP with
// B_RMS_NORM), USE_SUBGROUPS where the norm reduces with subgroup operations.
//
// Bytes touched: b as mul_mat_operands.wgsl states (k a multiple of 32: the planner's
// condition; with B_SWIGLU 2k a column, with B_RMS_NORM the norm's operands as it states);
// dst is the context's scratch, batches·n·k/32 blocks of 48 bytes (`QuantizeB::scratch_bytes`);
// threads past the last block, and workgroups past the last column, return.
#ifdef USE_SUBGROUPS
enable subgroups;
#endif
#define DST_U32 1

#include "mul_mat_operands.wgsl"
#ifdef B_RMS_NORM
#include "mul_mat_norm.wgsl"
#endif

// Byte of column `col` of batch `batch` of b.
fn b_row(batch: u32, col: u32) -> u32 {
    let p = params;
    return p.b_start + (batch % p.b_ne2) * p.b_nb2 + (batch / p.b_ne2) * p.b_nb3 + col * p.b_nb1;
}

// Stores block `id` (blocks counted over columns, then batches).
fn store_block(id: u32, blk: Q8Block) {
    let blocks = params.k / 32u;
#if defined(B_Q8K)
    // Interleaved for the K-quant mat-vec: per 128 elements of a column, nine 16-byte words;
    // word c holds bytes [4c, 4c + 4) of its four blocks, word 8 their scales.
    let o = params.dst_start + ((id / blocks) * (blocks / 4u) + (id % blocks) / 4u) * 36u + (id % 4u);
#for C in 0..8
    dst[o + 4u * C##u] = pack4xI8(blk.q[C##u]);
#endfor
    dst[o + 32u] = bitcast<u32>(blk.d);
#else
    let o = params.dst_start + 12u * id;
#for C in 0..8
    dst[o + C##u] = pack4xI8(blk.q[C##u]);
#endfor
    dst[o + 8u] = bitcast<u32>(blk.d);
    dst[o + 9u] = bitcast<u32>(blk.lo);
    dst[o + 10u] = bitcast<u32>(blk.hi);
    dst[o + 11u] = 0u;
#endif
}

#ifdef B_RMS_NORM
// One workgroup a column (one batch: the norm's condition).
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
#ifdef USE_SUBGROUPS
        @builtin(subgroup_invocation_id) sg_lane: u32,
        @builtin(subgroup_size) sg_size: u32,
#endif
) {
    let p = params;
    let blocks = p.k / 32u;
    let column = wid.y * p.grid_x + wid.x;
    if (column >= p.batches * p.n) {
        return;
    }
    let row = b_row(column / p.n, column % p.n);
    norm_col = column % p.n;
#ifdef USE_SUBGROUPS
    norm_scale = norm_column_scale(row, lid, true, sg_lane, sg_size);
#else
    norm_scale = norm_column_scale(row, lid, true, 0u, 1u);
#endif
    for (var i = lid; i < blocks; i += WG_SIZE) {
        store_block(column * blocks + i, b_q8_block(row, 32u * i));
    }
}
#else
// One thread a block.
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let p = params;
    let blocks = p.k / 32u;
    let id = (wid.y * p.grid_x + wid.x) * WG_SIZE + lid;
    let per_batch = p.n * blocks;
    let batch = id / per_batch;
    if (batch >= p.batches) {
        return;
    }
    store_block(id, b_q8_block(b_row(batch, (id % per_batch) / blocks), (id % blocks) * 32u));
}
#endif
