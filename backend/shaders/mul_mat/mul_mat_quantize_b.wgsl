// b quantized to 8 bits in blocks of 32 for the integer mat-vec (mul_mat_vec.wgsl with B_Q8),
// once per MUL_MAT instead of once per workgroup. Block (batch, column, i) is three 16-byte
// words at word 12 · ((batch · n + column) · k / 32 + i) of dst: the 32 values as signed bytes
// (round(x / d), d = max|x| / 127), then d, d·Σq over the first 16 and over the last 16 (f32
// bits) and a zero. With B_Q8K (the K-quant mat-vec), the blocks of each 128 elements are
// interleaved instead (see below) and only d is kept; k is then a multiple of 128. One thread
// per block; k is a multiple of 32.
//
// Defines: the operand defines of mul_mat_operands.wgsl (b's), WG_SIZE.
//
// Bytes touched: b as mul_mat_operands.wgsl states (k a multiple of 32: the planner's
// condition); dst is the context's scratch, batches·n·k/32 blocks of 48 bytes
// (`QuantizeB::scratch_bytes`); threads past the last block return.
#define WG_SIZE 64u
#define DST_U32 1

#include "mul_mat_operands.wgsl"

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
    let col = (id % per_batch) / blocks;
    let e0 = (id % blocks) * 32u;
    let row = p.b_start + (batch % p.b_ne2) * p.b_nb2 + (batch / p.b_ne2) * p.b_nb3 + col * p.b_nb1;
    let blk = b_q8_block(row, e0);
#if defined(B_Q8K)
    // Interleaved for the K-quant mat-vec: per 128 elements of a column, nine 16-byte words;
    // word c holds bytes [4c, 4c + 4) of its four blocks, word 8 their scales.
    let o = p.dst_start + ((id / blocks) * (blocks / 4u) + (id % blocks) / 4u) * 36u + (id % 4u);
#for C in 0..8
    dst[o + 4u * C##u] = pack4xI8(blk.q[C##u]);
#endfor
    dst[o + 32u] = bitcast<u32>(blk.d);
#else
    let o = p.dst_start + 12u * id;
#for C in 0..8
    dst[o + C##u] = pack4xI8(blk.q[C##u]);
#endfor
    dst[o + 8u] = bitcast<u32>(blk.d);
    dst[o + 9u] = bitcast<u32>(blk.lo);
    dst[o + 10u] = bitcast<u32>(blk.hi);
    dst[o + 11u] = 0u;
#endif
}
