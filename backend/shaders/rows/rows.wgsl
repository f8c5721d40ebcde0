// GET_ROWS, SET_ROWS and CPY: element k of the source (in the iteration's logical order) to
// element k of the destination, converted (dequantized, rounded, quantized) or copied as bytes.
// One thread per unit: UNIT consecutive destination elements along dim 0, or one block of a
// quantized destination.
//
// Defines: MODE (MODE_CPY, MODE_GET_ROWS, MODE_SET_ROWS), SRC_TYPE, DST_TYPE (ggml type ids),
// IDS_I64 (0/1), UNIT, RAW (copy bytes: SRC_TYPE == DST_TYPE), DST_ATOMIC (dst as atomic words:
// units that share a word with another unit merge into it), WG_SIZE.
//
// Bytes touched (the encoder binds each operand's exact span, rounded out to whole words, and
// the host checks every index below against the operands' extents and strides):
// - src: the bytes of the elements (or blocks) its layout addresses; GET_ROWS reads row `id`
//   only for `id < src ne1` (else writes zeros), so never outside src's span;
// - ids (row modes): element (i, j, k) at ids_start + i·nb0 + j·nb1 + k·nb2, inside its span;
// - dst: the bytes of the elements (or blocks) its layout addresses, and nothing else of the
//   words they share (merged); SET_ROWS writes row `id` only for `id < dst ne1` (else skips).
#include "common.wgsl"

#define TYPE_I32 26
#define MODE_CPY 0
#define MODE_GET_ROWS 1
#define MODE_SET_ROWS 2

#define FMT_BUF src
#define FMT_TYPE SRC_TYPE
#define ENC_TYPE DST_TYPE
#define ENC_ZERO params.zero

@group(0) @binding(0) var<storage, read> src: array<u32>;
#if MODE == MODE_CPY
#define DST_BINDING 1
#else
@group(0) @binding(1) var<storage, read> ids: array<u32>;
#define DST_BINDING 2
#endif
#if DST_ATOMIC
@group(0) @binding(DST_BINDING) var<storage, read_write> dst: array<atomic<u32>>;
#else
@group(0) @binding(DST_BINDING) var<storage, read_write> dst: array<u32>;
#endif

struct Params {
    src_start: u32,  // bytes from each binding to its tensor's first element
    ids_start: u32,
    dst_start: u32,
    units: u32,      // threads with work
    row_stride: u32, // threads per grid row (the grid may be split in 2-D)
    ne0: u32,        // the iteration's extents (dst's for CPY and GET_ROWS, src's for SET_ROWS)
    ne1: u32,
    ne2: u32,
    src_ne0: u32,    // CPY: src's own extents (its logical order may differ from dst's)
    src_ne1: u32,
    src_ne2: u32,
    src_nb0: u32,    // byte strides (nb0 steps blocks of a quantized type)
    src_nb1: u32,
    src_nb2: u32,
    src_nb3: u32,
    dst_nb0: u32,
    dst_nb1: u32,
    dst_nb2: u32,
    dst_nb3: u32,
    ids_nb0: u32,
    ids_nb1: u32,
    ids_nb2: u32,
    ids_ne1: u32,    // SET_ROWS: ids broadcast over dims 2 and 3 (i2 mod ne1, i3 mod ne2)
    ids_ne2: u32,
    rows: u32,       // the rows an id may name (src ne1 for GET_ROWS, dst ne1 for SET_ROWS)
    zero: u32,       // 0, opaque to the compiler (see encode.wgsl)
}
@group(0) @binding(DST_BINDING + 1) var<uniform> params: Params;

#include "formats.wgsl"
#include "encode.wgsl"

#if SRC_TYPE == TYPE_I32
const SRC_BLOCK: u32 = 1u;
const SRC_BLOCK_BYTES: u32 = 4u;
#else
const SRC_BLOCK: u32 = fmt_block;
const SRC_BLOCK_BYTES: u32 = fmt_block_bytes;
#endif

#if RAW
const ELEM_BYTES: u32 = SRC_BLOCK_BYTES;
#elif DST_TYPE == TYPE_F32 || DST_TYPE == TYPE_I32
const ELEM_BYTES: u32 = 4u;
#elif DST_TYPE == TYPE_F16 || DST_TYPE == TYPE_BF16
const ELEM_BYTES: u32 = 2u;
#endif

// Element i0 of the source row starting at `row`.
fn src_value(row: u32, i0: u32) -> f32 {
#if SRC_TYPE == TYPE_I32
    return f32(bitcast<i32>(src[(row + i0 * params.src_nb0) >> 2u]));
#else
    return fmt_value(row + (i0 / fmt_block) * params.src_nb0, i0 % fmt_block);
#endif
}

// Element (i, j, k) of ids if it names one of `params.rows` rows, else 0xffffffff.
fn row_id(i: u32, j: u32, k: u32) -> u32 {
#if MODE != MODE_CPY
    let word = (params.ids_start + i * params.ids_nb0 + j * params.ids_nb1 + k * params.ids_nb2) >> 2u;
    let lo = ids[word];
#if IDS_I64
    if (ids[word + 1u] != 0u) {
        return 0xffffffffu;
    }
#endif
    // A negative i32 is above every row count as u32.
    return select(0xffffffffu, lo, lo < params.rows);
#else
    return 0u;
#endif
}

// `len` bytes packed in `w` into dst from byte `at`: whole words stored, the words
// shared with bytes outside the unit merged (atomically where units share words).
#if DST_ATOMIC
fn put_bytes(at: u32, w: ptr<function, Block>, len: u32) {
    let shift = (at & 3u) * 8u;
    let first = at >> 2u;
    let words = (shift / 8u + len + 3u) / 4u;
    for (var j = 0u; j < words; j++) {
        var v = (*w).w[j] << shift;
        if (shift != 0u && j > 0u) {
            v |= (*w).w[j - 1u] >> (32u - shift);
        }
        // The unit's bytes within this word.
        let lo = select(0u, shift, j == 0u);
        let hi = min(32u, (shift + len * 8u) - 32u * j);
        var mask = 0xffffffffu;
        if (hi - lo < 32u) {
            mask = ((0xffffffffu >> (32u - (hi - lo))) << lo);
        }
        if (mask == 0xffffffffu) {
            atomicStore(&dst[first + j], v);
        } else {
            var old = atomicLoad(&dst[first + j]);
            loop {
                let r = atomicCompareExchangeWeak(&dst[first + j], old, (old & ~mask) | (v & mask));
                if (r.exchanged) {
                    break;
                }
                old = r.old_value;
            }
        }
    }
}
#else
// The plan takes this form only where every unit is whole aligned words: plain stores, a loop
// the compiler unrolls where `len` is a constant.
fn put_bytes(at: u32, w: ptr<function, Block>, len: u32) {
    let first = at >> 2u;
    for (var j = 0u; j < len / 4u; j++) {
        dst[first + j] = (*w).w[j];
    }
}
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = params;
    let u = gid.y * p.row_stride + gid.x;
    if (u >= p.units) {
        return;
    }
    // The unit's first element in the iteration's order.
    let k = u * UNIT;
    let i0 = k % p.ne0;
    let r = k / p.ne0;
    let i1 = r % p.ne1;
    let i2 = (r / p.ne1) % p.ne2;
    let i3 = r / (p.ne1 * p.ne2);
#if MODE == MODE_CPY
    let s0 = k % p.src_ne0;
    let sr = k / p.src_ne0;
    let src_row = p.src_start + (sr % p.src_ne1) * p.src_nb1 + ((sr / p.src_ne1) % p.src_ne2) * p.src_nb2
        + (sr / (p.src_ne1 * p.src_ne2)) * p.src_nb3;
    let dst_row = p.dst_start + i1 * p.dst_nb1 + i2 * p.dst_nb2 + i3 * p.dst_nb3;
#elif MODE == MODE_GET_ROWS
    let s0 = i0;
    let id = row_id(i1, i2, i3);
    let src_row = p.src_start + id * p.src_nb1 + i2 * p.src_nb2 + i3 * p.src_nb3;
    let dst_row = p.dst_start + i1 * p.dst_nb1 + i2 * p.dst_nb2 + i3 * p.dst_nb3;
#else
    let s0 = i0;
    let id = row_id(i1, i2 % p.ids_ne1, i3 % p.ids_ne2);
    if (id == 0xffffffffu) {
        return; // an id outside dst's rows: nothing is written
    }
    let src_row = p.src_start + i1 * p.src_nb1 + i2 * p.src_nb2 + i3 * p.src_nb3;
    let dst_row = p.dst_start + id * p.dst_nb1 + i2 * p.dst_nb2 + i3 * p.dst_nb3;
#endif
    var b: Block;
#if RAW
    // Bytes as they are: UNIT elements (or one block) at the source's place, 32 bytes at a time.
    let at = src_row + (s0 / SRC_BLOCK) * p.src_nb0;
    let len = UNIT / SRC_BLOCK * ELEM_BYTES;
    let dst_at = dst_row + (i0 / SRC_BLOCK) * p.dst_nb0;
    for (var c = 0u; c < len; c += 32u) {
        let n = min(32u, len - c);
        var chunk: Block;
#if MODE == MODE_GET_ROWS
        if (id != 0xffffffffu) {
#else
        {
#endif
            let word = (at + c) >> 2u;
            for (var j = 0u; j < (n + 3u) / 4u; j++) {
                let shift = (at & 3u) * 8u;
                if (shift == 0u) {
                    chunk.w[j] = src[word + j];
                } else {
                    // Bytes past a word boundary: the top of one word, the bottom of the next
                    // (read only where the unit has bytes there).
                    var v = src[word + j] >> shift;
                    if (4u * j + (4u - shift / 8u) < n) {
                        v |= src[word + j + 1u] << (32u - shift);
                    }
                    chunk.w[j] = v;
                }
            }
        }
        put_bytes(dst_at + c, &chunk, n);
    }
#elif defined(ENC_QUANT)
    var x: array<f32, ENC_QK>;
    for (var j = 0u; j < ENC_QK; j++) {
        x[j] = src_value(src_row, s0 + j);
    }
    b = quantize_block(&x);
    put_bytes(dst_row + (i0 / ENC_QK) * p.dst_nb0, &b, ENC_BLOCK_BYTES);
#else
    for (var j = 0u; j < UNIT; j++) {
#if MODE == MODE_GET_ROWS
        // An id outside src's rows reads nothing and writes zeros.
        var v = 0.0;
        if (id != 0xffffffffu) {
            v = src_value(src_row, s0 + j);
        }
#else
        let v = src_value(src_row, s0 + j);
#endif
#if DST_TYPE == TYPE_F32
        b.w[j] = bitcast<u32>(v);
#elif DST_TYPE == TYPE_I32
        b.w[j] = bitcast<u32>(i32(v));
#elif DST_TYPE == TYPE_F16
        b.w[j / 2u] |= f16_bits(v) << ((j & 1u) * 16u);
#else
        b.w[j / 2u] |= bf16_bits(v) << ((j & 1u) * 16u);
#endif
    }
    put_bytes(dst_row + i0 * p.dst_nb0, &b, UNIT * ELEM_BYTES);
#endif
}
