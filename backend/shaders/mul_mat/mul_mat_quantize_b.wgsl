// b quantized to 8 bits in blocks of 32 for the integer mat-vec (mul_mat_vec.wgsl with B_Q8),
// once per MUL_MAT instead of once per workgroup. Block (batch, column, i) is three 16-byte
// words at word 12 · ((batch · n + column) · k / 32 + i) of dst: the 32 values as signed bytes
// (round(x / d), d = max|x| / 127), then d, d·Σq over the first 16 and over the last 16 (f32
// bits) and a zero. With B_Q8K (the K-quant mat-vec), the blocks of each 128 elements are
// interleaved instead (see below) and only d is kept; k is then a multiple of 128. One thread
// per block; k is a multiple of 32.
//
// Defines: the operand defines of mul_mat_operands.wgsl (b's), WG_SIZE.
#define WG_SIZE 64u
#define DST_U32 1

#include "mul_mat_operands.wgsl"

fn sum4(q: vec4<i32>) -> i32 {
    return q.x + q.y + q.z + q.w;
}

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
    var x: array<vec4<f32>, 8>;
    var amax = vec4<f32>(0.0);
#for C in 0..8
    x[C##u] = b_vec4(row, e0 + 4u * C##u);
    amax = max(amax, abs(x[C##u]));
#endfor
    let d = max(max(amax.x, amax.y), max(amax.z, amax.w)) / 127.0;
    let inv = select(0.0, 1.0 / d, d > 0.0);
    var q: array<vec4<i32>, 8>;
#for C in 0..8
    q[C##u] = vec4<i32>(round(x[C##u] * inv));
#endfor
    let lo = sum4(q[0] + q[1] + q[2] + q[3]);
    let hi = sum4(q[4] + q[5] + q[6] + q[7]);
#ifdef B_Q8K
    // Interleaved for the K-quant mat-vec: per 128 elements of a column, nine 16-byte words;
    // word c holds bytes [4c, 4c + 4) of its four blocks, word 8 their scales.
    let o = p.dst_start + ((id / blocks) * (blocks / 4u) + (id % blocks) / 4u) * 36u + (id % 4u);
#for C in 0..8
    dst[o + 4u * C##u] = pack4xI8(q[C##u]);
#endfor
    dst[o + 32u] = bitcast<u32>(d);
#else
    let o = p.dst_start + 12u * id;
#for C in 0..8
    dst[o + C##u] = pack4xI8(q[C##u]);
#endfor
    dst[o + 8u] = bitcast<u32>(d);
    dst[o + 9u] = bitcast<u32>(d * f32(lo));
    dst[o + 10u] = bitcast<u32>(d * f32(hi));
    dst[o + 11u] = 0u;
#endif
}
