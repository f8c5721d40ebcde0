// Converts a contiguous tensor of any supported type to f32: one thread per element.
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
    src_offset: u32,  // bytes
    dst_offset: u32,  // elements
    count: u32,       // elements
    row_stride: u32,  // elements per dispatch row (x extent)
}
@group(0) @binding(2) var<uniform> params: Params;

#include "formats.wgsl"

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * params.row_stride + gid.x;
    if (i >= params.count) {
        return;
    }
    let block = i / FMT_BLOCK;
    dst[params.dst_offset + i] = fmt_value(params.src_offset + block * FMT_BLOCK_BYTES, i % FMT_BLOCK);
}
