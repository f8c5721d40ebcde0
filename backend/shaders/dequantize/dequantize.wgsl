// Converts a tensor of any supported type to a contiguous f32 tensor: one thread per element.
// The source may be a view: rows anywhere (byte strides nb1..nb3), each row contiguous.
// Defines: SRC_TYPE (ggml type id), WG_SIZE.
#include "common.wgsl"

#ifndef SRC_TYPE
#define SRC_TYPE TYPE_F32
#endif
#define WG_SIZE 256u
#define FMT_BUF src
#define FMT_TYPE SRC_TYPE

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;

struct Params {
    src_start: u32,  // bytes from the binding to the first element
    dst_start: u32,  // elements
    count: u32,      // elements
    row_stride: u32, // threads per grid row (the grid may be split in 2-D)
    ne0: u32,
    ne1: u32,
    ne2: u32,
    nb1: u32,        // source byte strides
    nb2: u32,
    nb3: u32,
}
@group(0) @binding(2) var<uniform> params: Params;

#include "formats.wgsl"

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = params;
    let i = gid.y * p.row_stride + gid.x;
    if (i >= p.count) {
        return;
    }
    let i0 = i % p.ne0;
    let row = i / p.ne0;
    let i1 = row % p.ne1;
    let i2 = (row / p.ne1) % p.ne2;
    let i3 = row / (p.ne1 * p.ne2);
    let row_byte = p.src_start + i1 * p.nb1 + i2 * p.nb2 + i3 * p.nb3;
    dst[p.dst_start + i] = fmt_value(row_byte + (i0 / fmt_block) * fmt_block_bytes, i0 % fmt_block);
}
