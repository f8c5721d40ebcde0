// CPY of a source that is the destination transposed in dims 0 and 1 (the source packed along
// dim 1, the destination along dim 0), same type, copied as bytes: a 32×32 tile is read along
// the source's packed dimension into workgroup memory, then written along the destination's,
// so both sides' accesses are coalesced (element by element, the reads would stride).
//
// Defines: ELEM_BYTES (4: f32; 2: f16, bf16), WG_SIZE (256).
//
// Bytes touched: src element (i0, i1, i2, i3) at src_start + i0·src_nb0 + i1·ELEM_BYTES +
// i2·src_nb2 + i3·src_nb3, dst element at dst_start + i0·ELEM_BYTES + i1·dst_nb1 + i2·dst_nb2 +
// i3·dst_nb3, for i0 < ne0, i1 < ne1, i2 < ne2, i3 < n_batches / ne2: exactly each layout's
// elements, which the encoder binds (`ops::rows` checks the layouts). With ELEM_BYTES 2 a thread
// stores the word of elements i0 and i0 + 1 (i0 even): the encoder admits only an even ne0 and a
// destination whose start and strides are whole words, so those words hold dst's elements only.

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

struct Params {
    src_start: u32,
    src_nb0: u32,
    src_nb2: u32,
    src_nb3: u32,
    dst_start: u32,
    dst_nb1: u32,
    dst_nb2: u32,
    dst_nb3: u32,
    ne0: u32,
    ne1: u32,
    ne2: u32,
    n_batches: u32,
    tiles0: u32,
    tiles1: u32,
    groups_x: u32,
}
@group(0) @binding(2) var<uniform> params: Params;

const TILE: u32 = 32u;
// One column of padding: a column of the tile falls in 32 different banks.
const PITCH: u32 = 33u;
var<workgroup> tile: array<u32, 1056>;

fn load(byte: u32) -> u32 {
#if ELEM_BYTES == 4
    return src[byte / 4u];
#else
    return (src[byte / 4u] >> ((byte & 2u) * 8u)) & 0xffffu;
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let p = params;
    let g = wid.x + wid.y * p.groups_x;
    let tiles = p.tiles0 * p.tiles1;
    let batch = g / tiles;
    // Uniform across the workgroup: the whole group leaves, before any barrier.
    if (batch >= p.n_batches) {
        return;
    }
    let t = g % tiles;
    let t0 = (t % p.tiles0) * TILE;
    let t1 = (t / p.tiles0) * TILE;
    let i2 = batch % p.ne2;
    let i3 = batch / p.ne2;
    let src_base = p.src_start + i2 * p.src_nb2 + i3 * p.src_nb3;
    let dst_base = p.dst_start + i2 * p.dst_nb2 + i3 * p.dst_nb3;
    let tx = lid % TILE;
    let ty = lid / TILE;
    // Read: consecutive lanes take consecutive i1, the source's packed dimension.
    for (var k = 0u; k < TILE; k += 8u) {
        let i0 = t0 + ty + k;
        let i1 = t1 + tx;
        if (i0 < p.ne0 && i1 < p.ne1) {
            tile[(ty + k) * PITCH + tx] = load(src_base + i0 * p.src_nb0 + i1 * u32(ELEM_BYTES));
        }
    }
    workgroupBarrier();
    // Write: consecutive lanes take consecutive i0, the destination's packed dimension.
#if ELEM_BYTES == 4
    for (var k = 0u; k < TILE; k += 8u) {
        let i0 = t0 + tx;
        let i1 = t1 + ty + k;
        if (i0 < p.ne0 && i1 < p.ne1) {
            dst[(dst_base + i0 * 4u + i1 * p.dst_nb1) / 4u] = tile[tx * PITCH + ty + k];
        }
    }
#else
    // 16 pairs of i0 a row of the tile, 16 rows at a time.
    let px = lid % 16u;
    let py = lid / 16u;
    for (var k = 0u; k < TILE; k += 16u) {
        let i0 = t0 + 2u * px;
        let i1 = t1 + py + k;
        if (i0 < p.ne0 && i1 < p.ne1) {
            let lo = tile[(2u * px) * PITCH + py + k];
            let hi = tile[(2u * px + 1u) * PITCH + py + k];
            dst[(dst_base + i0 * 2u + i1 * p.dst_nb1) / 4u] = lo | (hi << 16u);
        }
    }
#endif
}
