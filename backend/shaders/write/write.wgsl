// Host data written into a tensor or view, recorded in order with the ops: the bytes were staged
// in `src` (units of `unit_bytes` — one element, or one block of a block format — packed in the
// view's logical order), and each thread copies one unit to its place in the view:
// dst_start + i0·nb0 + i1·nb1 + i2·nb2 + i3·nb3 (bytes). Units of whole aligned words are stored
// as words; others byte by byte through atomics, so neighbours sharing a word (2-byte elements,
// unaligned views) never lose each other's bytes.
// Defines: WG_SIZE.
//
// Bytes touched (proven in Rust, `exec::write`'s caller `context_ops/write.rs`): the staged
// buffer holds count·unit_bytes bytes (rounded up to a word); every unit's bytes lie within the
// view's span, inside the dst binding.
#define WG_SIZE 256u

struct Params {
    dst_start: u32,  // bytes from dst's binding to the view's element (0, 0, 0, 0)
    count: u32,      // units
    row_stride: u32, // threads per grid row (the grid may be split in 2-D)
    unit_bytes: u32,
    ne0: u32,        // units along dimension 0
    ne1: u32,
    ne2: u32,
    nb0: u32,        // byte strides of the view
    nb1: u32,
    nb2: u32,
    nb3: u32,
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<atomic<u32>>;
@group(0) @binding(2) var<uniform> params: Params;

fn src_byte(at: u32) -> u32 {
    return (src[at / 4u] >> ((at % 4u) * 8u)) & 0xffu;
}

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
    let dst_at = p.dst_start + i0 * p.nb0 + i1 * p.nb1 + i2 * p.nb2 + i3 * p.nb3;
    let src_at = i * p.unit_bytes;
    if (dst_at % 4u == 0u && src_at % 4u == 0u && p.unit_bytes % 4u == 0u) {
        for (var w = 0u; w < p.unit_bytes / 4u; w++) {
            atomicStore(&dst[dst_at / 4u + w], src[src_at / 4u + w]);
        }
        return;
    }
    for (var k = 0u; k < p.unit_bytes; k++) {
        let at = dst_at + k;
        let shift = (at % 4u) * 8u;
        atomicAnd(&dst[at / 4u], ~(0xffu << shift));
        atomicOr(&dst[at / 4u], src_byte(src_at + k) << shift);
    }
}
