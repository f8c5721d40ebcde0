// MUL_MAT, the simplest correct way: one thread per output element, any src0 type that
// formats.wgsl reads, f32 or f16 src1, any strides and broadcasting. The fallback and the
// baseline of the fast paths.
//
// dst[i0, i1, i2, i3] = sum_k a[k, i0, i2 / r2, i3 / r3] * b[k, i1, i2, i3]
// Defines: A_TYPE (ggml type id of src0), B_F16 (src1 is f16), WG_SIZE.
//
// Bytes touched (bindings from `Bindings::new` in ops/mul_mat/encode.rs, each
// `DeviceTensor::binding` of memory.rs, the operand's word-rounded span; shapes by
// `mul_mat::check`): a's k elements of row i0 of matrix (i2 / r2, i3 / r3), b's k elements of
// column i1 (any strides), and dst element `index` only for index < m·n·batches (the others
// return). Tested by tests/tests/guards.rs.
#include "common.wgsl"

#define WG_SIZE 64u
#define FMT_BUF a
#define FMT_TYPE A_TYPE

@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

struct Params {
    a_start: u32,   // bytes from the binding to a's first element
    b_start: u32,   // bytes, likewise
    dst_start: u32, // elements
    m: u32,
    n: u32,
    k: u32,
    a_nb1: u32,     // a's byte strides
    a_nb2: u32,
    a_nb3: u32,
    b_nb0: u32,     // b's byte strides
    b_nb1: u32,
    b_nb2: u32,
    b_nb3: u32,
    a_ne2: u32,
    a_ne3: u32,
    b_ne2: u32,
    b_ne3: u32,
    row_stride: u32, // threads per grid row (the grid may be split in 2-D)
}
@group(0) @binding(3) var<uniform> params: Params;

#include "formats.wgsl"

// The element of b at `byte`, which may lie at any byte (a view may start anywhere): an element
// that crosses a word takes its high bytes from the next word, which is then inside the
// word-rounded binding (it holds the element's last byte).
fn b_value(byte: u32) -> f32 {
    let w = byte >> 2u;
    let s = (byte & 3u) * 8u;
    var bits = b[w];
    if (s != 0u) {
        bits = bits >> s;
#ifdef B_F16
        if (s > 16u) {
            bits = bits | (b[w + 1u] << (32u - s));
        }
#else
        bits = bits | (b[w + 1u] << (32u - s));
#endif
    }
#ifdef B_F16
    return unpack2x16float(bits & 0xffffu).x;
#else
    return bitcast<f32>(bits);
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = params;
    let index = gid.y * p.row_stride + gid.x;
    let total = p.m * p.n * p.b_ne2 * p.b_ne3;
    if (index >= total) {
        return;
    }
    let i0 = index % p.m;
    let i1 = (index / p.m) % p.n;
    let i2 = (index / (p.m * p.n)) % p.b_ne2;
    let i3 = index / (p.m * p.n * p.b_ne2);
    let a_row = p.a_start + i0 * p.a_nb1 + (i2 / (p.b_ne2 / p.a_ne2)) * p.a_nb2 + (i3 / (p.b_ne3 / p.a_ne3)) * p.a_nb3;
    let b_row = p.b_start + i1 * p.b_nb1 + i2 * p.b_nb2 + i3 * p.b_nb3;
    var sum = 0.0;
    for (var blk = 0u; blk < p.k / fmt_block; blk += 1u) {
        let block_byte = a_row + blk * fmt_block_bytes;
        for (var i = 0u; i < fmt_block; i += 1u) {
            sum += fmt_value(block_byte, i) * b_value(b_row + (blk * fmt_block + i) * p.b_nb0);
        }
    }
    dst[p.dst_start + index] = sum;
}
