// The operands of the fast MUL_MAT kernels (mul_mat_vec, mul_mat_tiled,
// mul_mat_subgroup_matrix): their bindings, the parameter block, the batch/tile decomposition
// of a workgroup id, and readers of src0 (`a`, any ggml type) and src1 (`b`, f32 or f16).
//
// dst[i0, i1, i2, i3] = sum_k a[k, i0, i2 / r2, i3 / r3] * b[k, i1, i2, i3]
//
// Defines (from the host):
//   A_TYPE        ggml type id of src0 (TYPE_* from common.wgsl)
//   A_ALIGN4      every row of a starts 4-byte aligned (start and nb1..nb3 multiples of 4);
//                 without it (and without B_ALIGN*), words are assembled from two aligned ones
//   B_F16         src1 is f16 (else f32)
//   B_CONTIG      src1's elements are adjacent (nb0 = element size)
//   B_ALIGN4      b's start and strides are multiples of 4 (B_ALIGN2: of 2)
//   B_VEC4        b is contiguous with start and strides multiples of 16 and rows of a multiple of
//                 16 bytes: bound as array<vec4<u32>>, read 16 bytes at a time
//   A_ALIGN2      a's start and strides are even (f16 fields are read with one load)
//   B_Q8          b is the 8-bit blocks of mul_mat_quantize_b.wgsl, bound as array<vec4<u32>>
//   B_Q8_WG       with B_Q8: b is bound as it is, and the mat-vec quantizes it itself
//   B_SWIGLU      with B_Q8_WG, or in the quantize pass: each column of b holds 2k elements, a
//                 SWIGLU's gate then its up, and b's value at e is silu(gate[e]) * up[e]
//                 (glu.wgsl's arithmetic)
//   B_RMS_NORM    likewise: b's value at e is x[e] * scale * w[e], x = b's column (plus the
//                 residual r's with B_NORM_RESIDUAL, which one workgroup a column stores to
//                 `norm_sum`), scale = 1 / sqrt(mean(x²) + eps) (rms_norm.wgsl's arithmetic;
//                 the kernel sets `norm_col` and `norm_scale` before it reads a column);
//                 NORM_GROUP, NORM_VEC4 and NORM_SUBGROUPS: RMS_NORM's reduction, which the
//                 kernel repeats (mul_mat_norm.wgsl)
//   DST_U32       dst is bound as array<u32> (the quantize pass writes b's blocks there)
//   A_VEC4        a is also bound as array<vec4<u32>> (`a4`, binding 3; params move to 4)
//
// Addresses are in bytes from the start of each binding (tensors are bound at an aligned offset
// below their first byte, so views may start anywhere); a is read as u32 words, unaligned reads
// being assembled from two words.
//
// Bytes touched (the bindings come from `Bindings::new` in ops/mul_mat/encode.rs, each
// `DeviceTensor::binding` of memory.rs: the operand's span from its first element, rounded out
// to whole words, and an error, never a shorter binding, past the buffer or the limit;
// `mul_mat::check` in ops/mul_mat/mod.rs holds the shapes):
// - a (binding 0; `a4`, binding 3, with A_VEC4): rows i1 < m of matrix (i2 / r2, i3 / r3), k
//   elements (whole blocks, rows contiguous: `check`) from a_start + i1·a_nb1 + …·a_nb2 + …·a_nb3;
//   A_VEC4 only where `plan::a_vec4` holds (16-byte aligned start and strides, rows whole 16-byte
//   words), so every vec4 lies inside a row;
// - b (binding 1): columns i1 < n, k elements from b_start + i1·b_nb1 + i2·b_nb2 + i3·b_nb3 (any
//   strides; b's batch a multiple of a's: `check`), 2k with B_SWIGLU (`check_swiglu`: b's rows
//   are 2k long); B_VEC4 only where `plan::b_vec4` holds
//   (contiguous, 16-byte aligned, rows whole 16-byte words). With a copy or quantize pass, a or b
//   is the context's scratch instead, of the plan's `scratch_bytes`;
// - dst (binding 2): the m·n·batches f32 from dst_start, contiguous (`check`); outputs past m
//   and n are not written.
// - with B_RMS_NORM (`mul_mat::check_rms_norm`: one batch, f32 norm operands with packed rows at
//   whole elements): norm_w elements [norm_w_start, + k); with B_NORM_RESIDUAL, norm_r and
//   norm_sum elements norm_*_start + c·norm_*_nb1 + [0, k) for columns c < n.
// Unaligned reads assemble a word from the two aligned words holding it, both inside the
// word-rounded binding. Tested with 0xFF guards after every operand: tests/tests/guards.rs.
#include "common.wgsl"

#define FMT_BUF a
#define FMT_TYPE A_TYPE

#if defined(B_Q8) && !defined(B_Q8_WG)
// b's binding holds 8-bit blocks (with B_Q8_WG the mat-vec makes them from b itself).
#define B_BLOCKS 1
#endif

@group(0) @binding(0) var<storage, read> a: array<u32>;
#if defined(B_VEC4) || defined(B_BLOCKS)
@group(0) @binding(1) var<storage, read> b: array<vec4<u32>>;
#else
@group(0) @binding(1) var<storage, read> b: array<u32>;
#endif
#ifdef DST_U32
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
#else
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
#endif
#ifdef A_VEC4
// a again, as 16-byte words (only for float rows in whole 16-byte units at 16-byte offsets).
@group(0) @binding(3) var<storage, read> a4: array<vec4<u32>>;
#define NORM_BINDING 4
#else
#define NORM_BINDING 3
#endif
// The norm's operands follow the storage bindings above, then the epilogue's; the parameters
// come last.
#if defined(B_RMS_NORM) && defined(B_NORM_RESIDUAL)
@group(0) @binding(NORM_BINDING) var<storage, read> norm_w: array<f32>;
@group(0) @binding(NORM_BINDING + 1) var<storage, read> norm_r: array<f32>;
@group(0) @binding(NORM_BINDING + 2) var<storage, read_write> norm_sum: array<f32>;
#define EPI_BINDING (NORM_BINDING + 3)
#elif defined(B_RMS_NORM)
@group(0) @binding(NORM_BINDING) var<storage, read> norm_w: array<f32>;
#define EPI_BINDING (NORM_BINDING + 1)
#else
#define EPI_BINDING NORM_BINDING
#endif
#if defined(DST_ROPE) && defined(ROPE_FF)
@group(0) @binding(EPI_BINDING) var<storage, read> rope_pos: array<u32>;
@group(0) @binding(EPI_BINDING + 1) var<storage, read> rope_ff: array<f32>;
@group(0) @binding(EPI_BINDING + 2) var<storage, read> kv_ids: array<u32>;
@group(0) @binding(EPI_BINDING + 3) var<storage, read_write> kv_cache: array<u32>;
#define PARAMS_BINDING (EPI_BINDING + 4)
#elif defined(DST_ROPE)
@group(0) @binding(EPI_BINDING) var<storage, read> rope_pos: array<u32>;
@group(0) @binding(EPI_BINDING + 1) var<storage, read> kv_ids: array<u32>;
@group(0) @binding(EPI_BINDING + 2) var<storage, read_write> kv_cache: array<u32>;
#define PARAMS_BINDING (EPI_BINDING + 3)
#else
#define PARAMS_BINDING EPI_BINDING
#endif

struct Params {
    a_start: u32,   // bytes from a's binding to a[0, 0, 0, 0]
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
    r2: u32,        // b_ne2 / a_ne2: b's batches per a matrix (dim 2)
    r3: u32,        // likewise, dim 3
    b_ne2: u32,
    batches: u32,   // b_ne2 * b_ne3
    tiles_m: u32,   // workgroups along m per matrix
    tiles_n: u32,   // workgroups along n per matrix
    grid_x: u32,    // workgroups per grid row (the grid may be split in 2-D)
    norm_eps: f32,  // B_RMS_NORM: eps, and elements from the norm bindings to their starts
    norm_w_start: u32,
    norm_r_start: u32,
    norm_r_nb1: u32,
    norm_sum_start: u32,
    norm_sum_nb1: u32,
    rope_rows: u32,   // DST_ROPE: rows [0, rope_rows) of each column are heads of rope_d rows,
    rope_d: u32,      // roped in place (ROPE's normal mode: pairs of adjacent rows, the first
    rope_n_dims: u32, // n_dims of each head), at position rope_pos[pos_start + column]
    pos_start: u32,   // elements
    ff_start: u32,    // elements (ROPE_FF)
    theta_scale: f32, // rope.wgsl's angle parameters
    freq_scale: f32,
    ext_factor: f32,
    attn_factor: f32,
    corr0: f32,
    corr1: f32,
    mscale_ext: f32,
    kv_start: u32,    // rows [kv_start, kv_end) of column c stored as cache row kv_ids[ids_start + c]
    kv_end: u32,
    ids_start: u32,   // elements
    cache_start: u32, // words from kv_cache's binding to the cache's row 0
    cache_nb1: u32,   // words a cache row
    cache_rows: u32,  // rows of the cache (an id past them writes nothing)
}
@group(0) @binding(PARAMS_BINDING) var<uniform> params: Params;

#include "formats.wgsl"

// Where a workgroup works: its tile along m and n, and the byte offsets of its a matrix and b
// matrix. `valid` is false for the padding workgroups of a 2-D grid.
struct Tile {
    valid: bool,
    tm: u32,
    tn: u32,
    a_base: u32,
    b_base: u32,
    dst_base: u32, // element index of dst[0, 0, i2, i3]
    batch: u32,    // i2 + b_ne2 * i3
}

fn tile_of(wid: vec3<u32>) -> Tile {
    let p = params;
    let wg = wid.y * p.grid_x + wid.x;
    let per_matrix = p.tiles_m * p.tiles_n;
    let batch = wg / per_matrix;
    let t = wg % per_matrix;
    let i2 = batch % p.b_ne2;
    let i3 = batch / p.b_ne2;
    var tile: Tile;
    tile.valid = batch < p.batches;
    tile.tm = t % p.tiles_m;
    tile.tn = t / p.tiles_m;
    tile.a_base = p.a_start + (i2 / p.r2) * p.a_nb2 + (i3 / p.r3) * p.a_nb3;
    tile.b_base = p.b_start + i2 * p.b_nb2 + i3 * p.b_nb3;
    tile.dst_base = p.dst_start + batch * p.m * p.n;
    tile.batch = batch;
    return tile;
}

// ---------------------------------------------------------------------------------------------
// Raw reads of a.

// The last word of a's binding: unaligned reads clamp their second word to it (that word only
// matters when the read is unaligned, and then it lies inside the tensor).
fn a_last() -> u32 {
    return arrayLength(&a) - 1u;
}

// Bytes [byte, byte + 4) of a, any alignment.
fn a_u32(byte: u32) -> u32 {
    let i = byte >> 2u;
    let s = (byte & 3u) * 8u;
    let lo = a[i];
    let hi = a[min(i + 1u, a_last())];
    return (lo >> s) | ((hi << (31u - s)) << 1u);
}

// Bytes [byte, byte + 8), any alignment.
fn a_u32x2(byte: u32) -> vec2<u32> {
    let i = byte >> 2u;
    let s = (byte & 3u) * 8u;
    let w0 = a[i];
    let w1 = a[i + 1u];
    let w2 = a[min(i + 2u, a_last())];
    return vec2<u32>((w0 >> s) | ((w1 << (31u - s)) << 1u), (w1 >> s) | ((w2 << (31u - s)) << 1u));
}

// Bytes [byte, byte + 8) at an offset from a block start that is a multiple of 4, in a format
// whose blocks are a multiple of 4 bytes: aligned when the rows are.
fn a_u32x2_b4(byte: u32) -> vec2<u32> {
#ifdef A_ALIGN4
    let i = byte >> 2u;
    return vec2<u32>(a[i], a[i + 1u]);
#else
    return a_u32x2(byte);
#endif
}

fn a_u8(byte: u32) -> u32 {
    return (a[byte >> 2u] >> ((byte & 3u) * 8u)) & 0xffu;
}

// An f16 field (fields with f16 sit at even offsets of even-sized blocks).
fn a_f16(byte: u32) -> f32 {
#ifdef A_ALIGN2
    return unpack2x16float(a[byte >> 2u] >> ((byte & 2u) * 8u)).x;
#else
    return unpack2x16float(a_u32(byte)).x;
#endif
}

// Four unsigned bytes as exact floats (2^23 + b as bits, minus 2^23: no integer conversion).
fn bytes_f32(x: u32) -> vec4<f32> {
    let v = vec4<u32>(x & 0xffu, (x >> 8u) & 0xffu, (x >> 16u) & 0xffu, x >> 24u);
    return bitcast<vec4<f32>>(v | vec4<u32>(0x4b000000u)) - vec4<f32>(8388608.0);
}

// The four low bits of x spread to the low bit of each byte.
fn spread_bits4(h: u32) -> u32 {
    return (h & 1u) | ((h & 2u) << 7u) | ((h & 4u) << 14u) | ((h & 8u) << 21u);
}

// ---------------------------------------------------------------------------------------------
// Eight elements of a: elements [e0, e0 + 8) of the row starting at byte `row`, e0 a multiple
// of 8, e0 + 8 <= k. Quantized blocks hold a multiple of 8 elements, so the eight never cross a
// block. Returned as two vec4 (elements e0..e0+3, e0+4..e0+7).

#if A_TYPE == TYPE_F32 || A_TYPE == TYPE_F16 || A_TYPE == TYPE_BF16
#define A_FLOAT 1
#endif

#if A_TYPE == TYPE_F32
const a_block: u32 = 1u;
const a_block_bytes: u32 = 4u;
fn a_unit8(row: u32, e0: u32) -> array<vec4<f32>, 2> {
#ifdef A_ALIGN4
    let i = (row >> 2u) + e0;
    return array<vec4<f32>, 2>(
        bitcast<vec4<f32>>(vec4<u32>(a[i], a[i + 1u], a[i + 2u], a[i + 3u])),
        bitcast<vec4<f32>>(vec4<u32>(a[i + 4u], a[i + 5u], a[i + 6u], a[i + 7u])));
#else
    let byte = row + 4u * e0;
    return array<vec4<f32>, 2>(
        bitcast<vec4<f32>>(vec4<u32>(a_u32x2(byte), a_u32x2(byte + 8u))),
        bitcast<vec4<f32>>(vec4<u32>(a_u32x2(byte + 16u), a_u32x2(byte + 24u))));
#endif
}
#elif A_TYPE == TYPE_F16 || A_TYPE == TYPE_BF16
const a_block: u32 = 1u;
const a_block_bytes: u32 = 2u;
fn a_unit8(row: u32, e0: u32) -> array<vec4<f32>, 2> {
    let byte = row + 2u * e0;
#ifdef A_ALIGN4
    let w = vec4<u32>(a[byte >> 2u], a[(byte >> 2u) + 1u], a[(byte >> 2u) + 2u], a[(byte >> 2u) + 3u]);
#else
    let w = vec4<u32>(a_u32x2(byte), a_u32x2(byte + 8u));
#endif
    return array<vec4<f32>, 2>(vec4<f32>(a_word2(w.x), a_word2(w.y)), vec4<f32>(a_word2(w.z), a_word2(w.w)));
}
#else
const a_block: u32 = fmt_block;
const a_block_bytes: u32 = fmt_block_bytes;

fn a_unit8(row: u32, e0: u32) -> array<vec4<f32>, 2> {
    let bb = row + (e0 / fmt_block) * fmt_block_bytes;
    let i = e0 % fmt_block;
    return a_block8(bb, i);
}
#endif

// Two f16 (or bf16) elements of a word.
fn a_word2(w: u32) -> vec2<f32> {
#if A_TYPE == TYPE_BF16
    return vec2<f32>(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u));
#else
    return unpack2x16float(w);
#endif
}

#ifdef A_FLOAT
// Elements e, e + 1 of a float row (e even, e + 1 < k).
fn a_pair(row: u32, e: u32) -> vec2<f32> {
#if A_TYPE == TYPE_F32 && defined(A_ALIGN4)
    let i = (row >> 2u) + e;
    return bitcast<vec2<f32>>(vec2<u32>(a[i], a[i + 1u]));
#elif A_TYPE == TYPE_F32
    return bitcast<vec2<f32>>(a_u32x2(row + 4u * e));
#elif defined(A_ALIGN4)
    return a_word2(a[(row >> 2u) + (e >> 1u)]);
#else
    return a_word2(a_u32(row + 2u * e));
#endif
}
#endif

// Element e of a row (any type, any e < k, any alignment): for tails and odd shapes.
fn a_elem(row: u32, e: u32) -> f32 {
#if A_TYPE == TYPE_F32
    return bitcast<f32>(a_u32(row + 4u * e));
#elif defined(A_FLOAT)
    return a_word2(a_u32(row + 2u * e)).x;
#else
    return fmt_value(row + (e / fmt_block) * fmt_block_bytes, e % fmt_block);
#endif
}

#if A_TYPE == TYPE_MXFP4 || A_TYPE == TYPE_NVFP4
fn a_mx(q: u32) -> vec4<f32> {
    return vec4<f32>(f32(fmt_kv(KVALUES_MXFP4, q & 15u)), f32(fmt_kv(KVALUES_MXFP4, (q >> 8u) & 15u)),
                     f32(fmt_kv(KVALUES_MXFP4, (q >> 16u) & 15u)), f32(fmt_kv(KVALUES_MXFP4, (q >> 24u) & 15u)));
}
#endif

// Elements [i, i + 8) of the block at byte bb (i a multiple of 8).
#if A_TYPE == TYPE_Q4_0
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let d = a_f16(bb);
    let q = (a_u32x2(bb + 2u + (i & 15u)) >> vec2<u32>(select(0u, 4u, i >= 16u))) & vec2<u32>(0x0f0f0f0fu);
    return array<vec4<f32>, 2>((bytes_f32(q.x) - 8.0) * d, (bytes_f32(q.y) - 8.0) * d);
}
#elif A_TYPE == TYPE_Q4_1
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let dm = unpack2x16float(a_u32(bb));
    let q = (a_u32x2(bb + 4u + (i & 15u)) >> vec2<u32>(select(0u, 4u, i >= 16u))) & vec2<u32>(0x0f0f0f0fu);
    return array<vec4<f32>, 2>(bytes_f32(q.x) * dm.x + dm.y, bytes_f32(q.y) * dm.x + dm.y);
}
#elif A_TYPE == TYPE_Q5_0
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let d = a_f16(bb);
    let qh = a_u32(bb + 2u) >> i;
    let q = (a_u32x2(bb + 6u + (i & 15u)) >> vec2<u32>(select(0u, 4u, i >= 16u))) & vec2<u32>(0x0f0f0f0fu);
    let h = vec2<u32>(spread_bits4(qh), spread_bits4(qh >> 4u)) << vec2<u32>(4u);
    return array<vec4<f32>, 2>((bytes_f32(q.x | h.x) - 16.0) * d, (bytes_f32(q.y | h.y) - 16.0) * d);
}
#elif A_TYPE == TYPE_Q5_1
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let dm = unpack2x16float(a_u32(bb));
    let qh = a_u32(bb + 4u) >> i;
    let q = (a_u32x2(bb + 8u + (i & 15u)) >> vec2<u32>(select(0u, 4u, i >= 16u))) & vec2<u32>(0x0f0f0f0fu);
    let h = vec2<u32>(spread_bits4(qh), spread_bits4(qh >> 4u)) << vec2<u32>(4u);
    return array<vec4<f32>, 2>(bytes_f32(q.x | h.x) * dm.x + dm.y, bytes_f32(q.y | h.y) * dm.x + dm.y);
}
#elif A_TYPE == TYPE_Q8_0
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let d = a_f16(bb);
    let q = a_u32x2(bb + 2u + i) ^ vec2<u32>(0x80808080u);
    return array<vec4<f32>, 2>((bytes_f32(q.x) - 128.0) * d, (bytes_f32(q.y) - 128.0) * d);
}
#elif A_TYPE == TYPE_Q2_K
// scales[16] (low nibble: scale, high: min), qs[64], d, dmin. Sixteen elements share a scale.
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let u = i / 16u;
    let sc = a_u8(bb + u);
    let dm = unpack2x16float(a_u32(bb + 80u));
    let j = (u % 8u) / 2u;
    let q = (a_u32x2(bb + 16u + (u / 8u) * 32u + (i % 32u)) >> vec2<u32>(2u * j)) & vec2<u32>(0x03030303u);
    let dl = dm.x * f32(sc & 15u);
    let ml = dm.y * f32(sc >> 4u);
    return array<vec4<f32>, 2>(bytes_f32(q.x) * dl - ml, bytes_f32(q.y) * dl - ml);
}
#elif A_TYPE == TYPE_Q3_K
// hmask[32], qs[64], scales[12] (16 packed 6-bit scales), d.
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let s = i / 16u;
    let n = i / 128u;
    let j = (i % 128u) / 32u;
    let l = i % 32u;
    let lo = select(a_u8(bb + 96u + s) & 15u, a_u8(bb + 88u + s) >> 4u, s >= 8u);
    let hi = (a_u8(bb + 104u + (s % 4u)) >> (2u * (s / 4u))) & 3u;
    let scale = f32(i32(lo | (hi << 4u)) - 32);
    let d = a_f16(bb + 108u) * scale;
    let q = (a_u32x2(bb + 32u + n * 32u + l) >> vec2<u32>(2u * j)) & vec2<u32>(0x03030303u);
    let h = (a_u32x2(bb + l) >> vec2<u32>(n * 4u + j)) & vec2<u32>(0x01010101u);
    let v = q | (h << vec2<u32>(2u));
    return array<vec4<f32>, 2>((bytes_f32(v.x) - 4.0) * d, (bytes_f32(v.y) - 4.0) * d);
}
#elif A_TYPE == TYPE_Q4_K || A_TYPE == TYPE_Q5_K
// d, dmin, scales[12] (8 packed 6-bit scale/min pairs), [q5_K: qh[32]], qs[128].
fn a_scale_min(bb: u32, j: u32) -> vec2<f32> {
    let s = bb + 4u;
    var sm: vec2<u32>;
    if (j < 4u) {
        sm = vec2<u32>(a_u8(s + j) & 63u, a_u8(s + j + 4u) & 63u);
    } else {
        let x = a_u8(s + j + 4u);
        sm = vec2<u32>((x & 15u) | ((a_u8(s + j - 4u) >> 6u) << 4u), (x >> 4u) | ((a_u8(s + j) >> 6u) << 4u));
    }
    return unpack2x16float(a_u32(bb)) * vec2<f32>(sm);
}

fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let g = i / 64u;
    let hi = (i % 64u) / 32u;
    let l = i % 32u;
    let dm = a_scale_min(bb, 2u * g + hi);
#if A_TYPE == TYPE_Q4_K
    let qs = bb + 16u;
#else
    let qs = bb + 48u;
#endif
    var q = (a_u32x2_b4(qs + g * 32u + l) >> vec2<u32>(4u * hi)) & vec2<u32>(0x0f0f0f0fu);
#if A_TYPE == TYPE_Q5_K
    q |= ((a_u32x2_b4(bb + 16u + l) >> vec2<u32>(2u * g + hi)) & vec2<u32>(0x01010101u)) << vec2<u32>(4u);
#endif
    return array<vec4<f32>, 2>(bytes_f32(q.x) * dm.x - dm.y, bytes_f32(q.y) * dm.x - dm.y);
}
#elif A_TYPE == TYPE_Q6_K
// ql[128], qh[64], scales[16] (int8), d.
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let n = i / 128u;
    let quarter = (i % 128u) / 32u;
    let l = i % 32u;
    let ql = (a_u32x2(bb + n * 64u + (quarter & 1u) * 32u + l) >> vec2<u32>(4u * (quarter >> 1u))) & vec2<u32>(0x0f0f0f0fu);
    let qh = (a_u32x2(bb + 128u + n * 32u + l) >> vec2<u32>(2u * quarter)) & vec2<u32>(0x03030303u);
    let q = ql | (qh << vec2<u32>(4u));
    let sc = f32((i32(a_u8(bb + 192u + n * 8u + l / 16u + 2u * quarter)) << 24u) >> 24u);
    let d = a_f16(bb + 208u) * sc;
    return array<vec4<f32>, 2>((bytes_f32(q.x) - 32.0) * d, (bytes_f32(q.y) - 32.0) * d);
}
#elif A_TYPE == TYPE_IQ4_NL || A_TYPE == TYPE_IQ4_XS
fn a_iq4(q: u32, d: f32) -> vec4<f32> {
    return vec4<f32>(f32(fmt_kv(KVALUES_IQ4NL, q & 15u)), f32(fmt_kv(KVALUES_IQ4NL, (q >> 8u) & 15u)),
                     f32(fmt_kv(KVALUES_IQ4NL, (q >> 16u) & 15u)), f32(fmt_kv(KVALUES_IQ4NL, (q >> 24u) & 15u))) * d;
}
#if A_TYPE == TYPE_IQ4_NL
// d, qs[16] (nibbles as q4_0's).
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let d = a_f16(bb);
    let q = a_u32x2(bb + 2u + (i & 15u)) >> vec2<u32>(select(0u, 4u, i >= 16u));
    return array<vec4<f32>, 2>(a_iq4(q.x, d), a_iq4(q.y, d));
}
#else
// d, scales_h (u16), scales_l[4], qs[128] (iq4_nl's nibbles per 32 elements).
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let ib = i / 32u;
    let j = i % 32u;
    let low = (a_u8(bb + 4u + ib / 2u) >> (4u * (ib % 2u))) & 15u;
    let ls = i32(low | (((a_u32(bb + 2u) >> (2u * ib)) & 3u) << 4u));
    let d = a_f16(bb) * f32(ls - 32);
    let q = a_u32x2_b4(bb + 8u + 16u * ib + (j & 15u)) >> vec2<u32>(select(0u, 4u, j >= 16u));
    return array<vec4<f32>, 2>(a_iq4(q.x, d), a_iq4(q.y, d));
}
#endif
#elif A_TYPE == TYPE_MXFP4
// e (E8M0), qs[16] (nibbles as q4_0's). The scale is 2^(e - 128) (ggml's half scale); for the
// two smallest exponents it is subnormal and may flush to zero, which changes nothing that
// matters to a product sum.
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let e = a_u8(bb);
    let d = select(bitcast<f32>((e + 23u) << 23u) * 0x1p-24f, bitcast<f32>((e - 1u) << 23u), e >= 2u);
    let q = a_u32x2(bb + 1u + (i & 15u)) >> vec2<u32>(select(0u, 4u, i >= 16u));
    return array<vec4<f32>, 2>(a_mx(q.x) * d, a_mx(q.y) * d);
}
#elif A_TYPE == TYPE_NVFP4
// d[4] (UE4M3 per 16 elements), qs[32]: per 16 elements 8 bytes, element j the low nibble of
// byte j, element j + 8 the high nibble.
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let s = i / 16u;
    let d = fmt_ue4m3_half(a_u8(bb + s));
    let q = a_u32x2_b4(bb + 4u + 8u * s) >> vec2<u32>(select(0u, 4u, (i & 8u) != 0u));
    return array<vec4<f32>, 2>(a_mx(q.x) * d, a_mx(q.y) * d);
}
#elif A_TYPE == TYPE_Q1_0
// d, qs[16] (bit i set: element i is +d, else -d).
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    let d = a_f16(bb);
    let bits = a_u8(bb + 2u + i / 8u);
    let lo = vec4<u32>(bits, bits >> 1u, bits >> 2u, bits >> 3u) & vec4<u32>(1u);
    let hi = vec4<u32>(bits >> 4u, bits >> 5u, bits >> 6u, bits >> 7u) & vec4<u32>(1u);
    return array<vec4<f32>, 2>((vec4<f32>(lo) * 2.0 - 1.0) * d, (vec4<f32>(hi) * 2.0 - 1.0) * d);
}
#elif A_TYPE == TYPE_IQ2_XXS || A_TYPE == TYPE_IQ2_XS || A_TYPE == TYPE_IQ2_S || A_TYPE == TYPE_IQ3_XXS || A_TYPE == TYPE_IQ3_S || A_TYPE == TYPE_IQ1_S || A_TYPE == TYPE_IQ1_M
// The grid formats: 8 elements are one grid entry (two for iq3), decoded at once.
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    return fmt_unit8(bb, i);
}
#elif !defined(A_FLOAT)
// Every other format: element by element through formats.wgsl.
fn a_block8(bb: u32, i: u32) -> array<vec4<f32>, 2> {
    return array<vec4<f32>, 2>(
        vec4<f32>(fmt_value(bb, i), fmt_value(bb, i + 1u), fmt_value(bb, i + 2u), fmt_value(bb, i + 3u)),
        vec4<f32>(fmt_value(bb, i + 4u), fmt_value(bb, i + 5u), fmt_value(bb, i + 6u), fmt_value(bb, i + 7u)));
}
#endif

// ---------------------------------------------------------------------------------------------
// Mat-vec units: unit t (t < block / 8) of a block is the 8 elements at block positions
// a_vec_pos(t).x + 0..3 and a_vec_pos(t).y + 0..3, as a_vec8 returns them. For the formats whose
// 16 nibble bytes hold elements j (low) and j + 16 (high), a unit is 4 bytes, both nibbles, so
// that the 4 threads of a block read neighbouring words of a and of b.
#ifndef A_FLOAT
#if A_TYPE == TYPE_Q4_0 || A_TYPE == TYPE_Q4_1 || A_TYPE == TYPE_Q5_0 || A_TYPE == TYPE_Q5_1 || A_TYPE == TYPE_IQ4_NL || A_TYPE == TYPE_MXFP4
fn a_vec_pos(t: u32) -> vec2<u32> {
    return vec2<u32>(4u * t, 16u + 4u * t);
}

fn a_vec8(bb: u32, t: u32) -> array<vec4<f32>, 2> {
#if A_TYPE == TYPE_Q4_0
    let d = a_f16(bb);
    let q = a_u32(bb + 2u + 4u * t);
    return array<vec4<f32>, 2>((bytes_f32(q & 0x0f0f0f0fu) - 8.0) * d, (bytes_f32((q >> 4u) & 0x0f0f0f0fu) - 8.0) * d);
#elif A_TYPE == TYPE_Q4_1
    let dm = unpack2x16float(a_u32(bb));
    let q = a_u32(bb + 4u + 4u * t);
    return array<vec4<f32>, 2>(bytes_f32(q & 0x0f0f0f0fu) * dm.x + dm.y, bytes_f32((q >> 4u) & 0x0f0f0f0fu) * dm.x + dm.y);
#elif A_TYPE == TYPE_Q5_0
    let d = a_f16(bb);
    let qh = a_u32(bb + 2u);
    let q = a_u32(bb + 6u + 4u * t);
    let lo = (q & 0x0f0f0f0fu) | (spread_bits4(qh >> (4u * t)) << 4u);
    let hi = ((q >> 4u) & 0x0f0f0f0fu) | (spread_bits4(qh >> (16u + 4u * t)) << 4u);
    return array<vec4<f32>, 2>((bytes_f32(lo) - 16.0) * d, (bytes_f32(hi) - 16.0) * d);
#elif A_TYPE == TYPE_Q5_1
    let dm = unpack2x16float(a_u32(bb));
    let qh = a_u32(bb + 4u);
    let q = a_u32(bb + 8u + 4u * t);
    let lo = (q & 0x0f0f0f0fu) | (spread_bits4(qh >> (4u * t)) << 4u);
    let hi = ((q >> 4u) & 0x0f0f0f0fu) | (spread_bits4(qh >> (16u + 4u * t)) << 4u);
    return array<vec4<f32>, 2>(bytes_f32(lo) * dm.x + dm.y, bytes_f32(hi) * dm.x + dm.y);
#elif A_TYPE == TYPE_IQ4_NL
    let d = a_f16(bb);
    let q = a_u32(bb + 2u + 4u * t);
    return array<vec4<f32>, 2>(a_iq4(q, d), a_iq4(q >> 4u, d));
#else
    let e = a_u8(bb);
    let d = select(bitcast<f32>((e + 23u) << 23u) * 0x1p-24f, bitcast<f32>((e - 1u) << 23u), e >= 2u);
    let q = a_u32(bb + 1u + 4u * t);
    return array<vec4<f32>, 2>(a_mx(q) * d, a_mx(q >> 4u) * d);
#endif
}
#else
fn a_vec_pos(t: u32) -> vec2<u32> {
    return vec2<u32>(8u * t, 8u * t + 4u);
}

fn a_vec8(bb: u32, t: u32) -> array<vec4<f32>, 2> {
    return a_block8(bb, 8u * t);
}
#endif
#endif

// ---------------------------------------------------------------------------------------------
// Reads of b (f32 or f16, any strides, any alignment). `row` is the byte offset of b's row.

// Word i of b's binding.
fn b_word(i: u32) -> u32 {
#if defined(B_VEC4) || defined(B_BLOCKS)
    return b[i >> 2u][i & 3u];
#else
    return b[i];
#endif
}

fn b_last() -> u32 {
#if defined(B_VEC4) || defined(B_BLOCKS)
    return 4u * arrayLength(&b) - 1u;
#else
    return arrayLength(&b) - 1u;
#endif
}

// Bytes [byte, byte + 4) of b, any alignment.
fn b_u32(byte: u32) -> u32 {
    let i = byte >> 2u;
    let s = (byte & 3u) * 8u;
    return (b_word(i) >> s) | ((b_word(min(i + 1u, b_last())) << (31u - s)) << 1u);
}

fn b_elem(row: u32, e: u32) -> f32 {
#ifdef B_CONTIG
#ifdef B_F16
    let byte = row + 2u * e;
#else
    let byte = row + 4u * e;
#endif
#else
    let byte = row + e * params.b_nb0;
#endif
#if defined(B_F16) && defined(B_ALIGN2)
    let word = b_word(byte >> 2u);
    return unpack2x16float(select(word, word >> 16u, (byte & 2u) != 0u)).x;
#elif defined(B_F16)
    return unpack2x16float(b_u32(byte)).x;
#elif defined(B_ALIGN4)
    return bitcast<f32>(b_word(byte >> 2u));
#else
    return bitcast<f32>(b_u32(byte));
#endif
}

// Elements e, e + 1 (e even, e + 1 < k).
fn b_pair(row: u32, e: u32) -> vec2<f32> {
#if defined(B_CONTIG) && defined(B_F16) && defined(B_ALIGN4)
    return unpack2x16float(b_word((row >> 2u) + (e >> 1u)));
#elif defined(B_CONTIG) && !defined(B_F16) && defined(B_ALIGN4)
    let i = (row >> 2u) + e;
    return bitcast<vec2<f32>>(vec2<u32>(b_word(i), b_word(i + 1u)));
#else
    return vec2<f32>(b_elem(row, e), b_elem(row, e + 1u));
#endif
}

#if defined(B_VEC4) && defined(B_F16)
// Elements [e, e + 8) of an f16 b as they are stored (e a multiple of 8, e + 8 <= k).
fn b_word8(row: u32, e: u32) -> vec4<u32> {
    return b[(row >> 4u) + (e >> 3u)];
}
#endif

// Elements [e, e + 4) (e a multiple of 4, e + 4 <= k).
fn b_vec4(row: u32, e: u32) -> vec4<f32> {
#if defined(B_VEC4) && !defined(B_F16)
    return bitcast<vec4<f32>>(b[(row >> 4u) + (e >> 2u)]);
#elif defined(B_CONTIG) && defined(B_F16) && defined(B_ALIGN4)
    let i = (row >> 2u) + (e >> 1u);
    return vec4<f32>(unpack2x16float(b_word(i)), unpack2x16float(b_word(i + 1u)));
#elif defined(B_CONTIG) && !defined(B_F16) && defined(B_ALIGN4)
    let i = (row >> 2u) + e;
    return bitcast<vec4<f32>>(vec4<u32>(b_word(i), b_word(i + 1u), b_word(i + 2u), b_word(i + 3u)));
#else
    return vec4<f32>(b_pair(row, e), b_pair(row, e + 2u));
#endif
}

// b's elements [e0, e0 + 32) of the row at byte `row` as one 8-bit block: the values as signed
// bytes round(x / d), d = max|x| / 127, four to a word; d; and d times the sum of the bytes of
// each half. mul_mat_quantize_b.wgsl stores these for the integer mat-vec.
struct Q8Block {
    q: array<vec4<i32>, 8>,
    d: f32,
    lo: f32,
    hi: f32,
}

fn q8_sum4(q: vec4<i32>) -> i32 {
    return q.x + q.y + q.z + q.w;
}

#ifdef B_RMS_NORM
// The column being read (its residual row) and its norm's scale.
var<private> norm_col: u32;
var<private> norm_scale: f32;

// The norm's input at e of the column at byte `row`: b, plus the residual's.
fn norm_x4(row: u32, e: u32) -> vec4<f32> {
#ifdef B_NORM_RESIDUAL
    let i = params.norm_r_start + norm_col * params.norm_r_nb1 + e;
    return b_vec4(row, e) + vec4<f32>(norm_r[i], norm_r[i + 1u], norm_r[i + 2u], norm_r[i + 3u]);
#else
    return b_vec4(row, e);
#endif
}

// The same for one element.
fn norm_x1(row: u32, e: u32) -> f32 {
#ifdef B_NORM_RESIDUAL
    return b_elem(row, e) + norm_r[params.norm_r_start + norm_col * params.norm_r_nb1 + e];
#else
    return b_elem(row, e);
#endif
}
#endif

// b's value at e: the element, or with B_SWIGLU silu(gate) · up of the column's two halves, or
// with B_RMS_NORM the column's norm times the weight.
fn b_value4(row: u32, e: u32) -> vec4<f32> {
#ifdef B_SWIGLU
    let g = b_vec4(row, e);
    return g / (1.0 + exp(-g)) * b_vec4(row, e + params.k);
#elif defined(B_RMS_NORM)
    let i = params.norm_w_start + e;
    return norm_x4(row, e) * norm_scale * vec4<f32>(norm_w[i], norm_w[i + 1u], norm_w[i + 2u], norm_w[i + 3u]);
#else
    return b_vec4(row, e);
#endif
}

fn b_q8_block(row: u32, e0: u32) -> Q8Block {
    var x: array<vec4<f32>, 8>;
    var amax = vec4<f32>(0.0);
#for C in 0..8
    x[C##u] = b_value4(row, e0 + 4u * C##u);
    amax = max(amax, abs(x[C##u]));
#endfor
    var r: Q8Block;
    r.d = max(max(amax.x, amax.y), max(amax.z, amax.w)) / 127.0;
    let inv = select(0.0, 1.0 / r.d, r.d > 0.0);
#for C in 0..8
    r.q[C##u] = vec4<i32>(round(x[C##u] * inv));
#endfor
    r.lo = r.d * f32(q8_sum4(r.q[0] + r.q[1] + r.q[2] + r.q[3]));
    r.hi = r.d * f32(q8_sum4(r.q[4] + r.q[5] + r.q[6] + r.q[7]));
    return r;
}
