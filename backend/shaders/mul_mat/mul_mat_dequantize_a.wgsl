// A quantized a converted to a contiguous f16 copy, once per MUL_MAT, for the subgroup-matrix
// kernel: staging then reads a's tiles as 16-byte words of halves, which it can keep in flight
// across a step's multiplies, instead of waiting on each block's bytes to decode them. Row r of
// a's matrix i (i = i2 + a_ne2 · i3) goes to halves [(i · m + r) · k, … + k) of dst. One thread
// per 8-element unit (four words); k is a multiple of 8.
//
// Defines: the operand defines of mul_mat_operands.wgsl (a's), WG_SIZE.
//
// Bytes touched: a's rows below m of every matrix, as mul_mat_operands.wgsl states; dst is the
// context's scratch of `F16Copy::scratch_bytes` (m·k halves a matrix); threads past the last
// unit return.
#define WG_SIZE 256u
#define DST_U32 1

#include "mul_mat_operands.wgsl"

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let p = params;
    let units = p.k / 8u;
    let a_ne2 = p.b_ne2 / p.r2;
    let a_mats = (p.batches / p.b_ne2) / p.r3 * a_ne2;
    let id = (wid.y * p.grid_x + wid.x) * WG_SIZE + lid;
    let row_id = id / units;
    if (row_id >= p.m * a_mats) {
        return;
    }
    let mat = row_id / p.m;
    let row = p.a_start + (row_id % p.m) * p.a_nb1 + (mat % a_ne2) * p.a_nb2 + (mat / a_ne2) * p.a_nb3;
    let v = a_unit8(row, (id % units) * 8u);
    let o = p.dst_start + 4u * id;
    dst[o] = pack2x16float(v[0].xy);
    dst[o + 1u] = pack2x16float(v[0].zw);
    dst[o + 2u] = pack2x16float(v[1].xy);
    dst[o + 3u] = pack2x16float(v[1].zw);
}
