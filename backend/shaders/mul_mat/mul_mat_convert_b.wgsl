// An f32 b converted to a contiguous f16 copy, once per MUL_MAT, for the subgroup-matrix
// kernel: every workgroup along m stages the same columns of b, and from the copy it reads half
// the bytes as 16-byte words of halves it stores as they are, instead of converting them each
// time. Column c of b's matrix i (i = i2 + b_ne2 · i3) goes to halves [(i · n + c) · k, … + k)
// of dst. One thread per 8-element unit (four words); k is a multiple of 8; b any strides.
//
// Defines: the operand defines of mul_mat_operands.wgsl (b's), WG_SIZE.
//
// Bytes touched: b's columns below n of every matrix, as mul_mat_operands.wgsl states; dst is
// the context's scratch of `F16Copy::scratch_bytes` (n·k halves a matrix); threads past the
// last unit return.
#define WG_SIZE 256u
#define DST_U32 1

#include "mul_mat_operands.wgsl"

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let p = params;
    let units = p.k / 8u;
    let id = (wid.y * p.grid_x + wid.x) * WG_SIZE + lid;
    let col_id = id / units;
    if (col_id >= p.n * p.batches) {
        return;
    }
    let batch = col_id / p.n;
    let row = p.b_start + (batch % p.b_ne2) * p.b_nb2 + (batch / p.b_ne2) * p.b_nb3 + (col_id % p.n) * p.b_nb1;
    let e = (id % units) * 8u;
    let lo = b_vec4(row, e);
    let hi = b_vec4(row, e + 4u);
    let o = p.dst_start + 4u * id;
    dst[o] = pack2x16float(lo.xy);
    dst[o + 1u] = pack2x16float(lo.zw);
    dst[o + 2u] = pack2x16float(hi.xy);
    dst[o + 3u] = pack2x16float(hi.zw);
}
