// MUL_MAT for few columns (n small): matrix times a handful of vectors, memory-bound.
//
// A workgroup computes GROUPS * ROWS rows of dst for all N_COLS columns of one batch. Its threads
// form GROUPS groups of GROUP_SIZE; a group owns ROWS rows and its threads stride over k
// together. Each step a thread takes one unit of every row of its group and the matching b
// elements of every column, which it reuses for all ROWS rows: so every byte of a is read once.
// Groups share b through the cache, so more rows per workgroup cost fewer b reads without more
// registers per thread. The partial sums are reduced with subgroupAdd and a small workgroup
// array (or a workgroup-memory tree where the device has no subgroups).
//
// Units: with VEC_KERNEL 1, q4_0, q8_0, q4_K and q6_K rows (2-byte aligned) go in 64-element
// units read as whole words, all loads of a step issued before use (see "Whole-word units").
// Everything else, and VEC_KERNEL 0, takes one 8-element unit of a quantized block (a_vec8), or a
// pair of f32/f16/bf16 elements, per step.
//
// With B_Q8 (the integer kernel), b arrives as 8-bit blocks (mul_mat_quantize_b.wgsl) and a
// step takes one 32-element unit of each row and multiplies with packed 4x8-bit dot products
// (mul_mat_vec_q8.wgsl). With B_Q8K as well (K-quants), b's bytes are interleaved so that a
// lane reads 16 elements of a block from one or two words of a row (mul_mat_vec_kq.wgsl).
//
// Defines: the operand defines of mul_mat_operands.wgsl; WG_SIZE, ROWS, GROUPS, N_COLS (= n);
// VEC_KERNEL; B_Q8, B_Q8K, B_Q8_WG and B_WG_BLOCKS (b quantized by the workgroup itself into
// workgroup memory, k/32 <= B_WG_BLOCKS), VEC_PREFETCH and W_LUT (with B_Q8; W_LUT the 4-bit levels from a
// workgroup table),
// PROBE_LOADS (measuring only: the loads without the arithmetic) and PROBE_ALU (measuring only:
// the float kernel's arithmetic without a's loads); USE_SUBGROUPS and MAX_SUBGROUPS (WG_SIZE / the smallest subgroup size). A group
// holds a whole number of subgroups (the planner sees to it). DST_ROPE (with ROPE_FF,
// CACHE_F16): the ROPE and KV-cache write of a q/k/v projection applied to the rows the
// workgroup stored (`rope_kv_epilogue`; ROWS · GROUPS and m even, one batch).
//
// Bytes touched: a, b and dst only as mul_mat_operands.wgsl states (a's rows past m, b's
// columns past n and elements past k are not read); tested by tests/tests/guards.rs. With
// DST_ROPE, rope_pos and kv_ids elements pos_start + c and ids_start + c for columns c < n,
// rope_ff elements ff_start + [0, rope_n_dims / 2), and kv_cache words cache_start + id ·
// cache_nb1 + [0, row words) for ids below cache_rows (`mul_mat::check_rope_set_rows`).
#ifdef USE_SUBGROUPS
enable subgroups;
#endif

#define WG_SIZE 256u
#define ROWS 4u
#define GROUPS 1u
#define N_COLS 1u
#define MAX_SUBGROUPS 32u
#define VEC_KERNEL 1

#include "mul_mat_operands.wgsl"
#ifdef B_Q8
#include "mul_mat_vec_q8.wgsl"
#endif
#ifdef B_Q8K
#include "mul_mat_vec_kq.wgsl"
#endif

const RN: u32 = ROWS * N_COLS;
#if defined(A_FLOAT) && defined(A_VEC4)
// Elements of a float row in one 16-byte word.
#if A_TYPE == TYPE_F32
#define A_QUAD 4u
#else
#define A_QUAD 8u
#endif
#endif
const GROUP_SIZE: u32 = WG_SIZE / GROUPS;

#ifdef USE_SUBGROUPS
var<workgroup> partial: array<f32, MAX_SUBGROUPS * RN>;
#else
var<workgroup> partial: array<f32, WG_SIZE>;
#endif

#ifdef B_RMS_NORM
#include "mul_mat_norm.wgsl"
var<workgroup> norm_scales: array<f32, N_COLS>;

// Every column's 1/sqrt(mean(x²) + eps) into norm_scales (every thread calls it); the
// workgroup of tile 0 stores the residual sum.
fn norm_prologue(tile: Tile, lid: u32, cols: u32, sg_lane: u32, sg_size: u32) {
    for (var c = 0u; c < cols; c += 1u) {
        norm_col = c;
        let scale = norm_column_scale(tile.b_base + c * params.b_nb1, lid, tile.tm == 0u, sg_lane, sg_size);
        if (lid == 0u) {
            norm_scales[c] = scale;
        }
        workgroupBarrier();
    }
}
#endif

#if defined(B_Q8) && defined(B_Q8_WG)
// This workgroup's columns of b as 8-bit blocks, in mul_mat_quantize_b.wgsl's layout (three
// words a block: the bytes, then d and the halves' sums), column c's blocks from c·k/32: made by
// the workgroup itself instead of a quantize pass (B_WG_BLOCKS: k/32 at most, the planner's
// bound).
var<workgroup> xq_wg: array<vec4<u32>, 3u * N_COLS * B_WG_BLOCKS>;
fn xq_word(i: u32) -> vec4<u32> {
    return xq_wg[i];
}
#elif defined(B_Q8)
fn xq_word(i: u32) -> vec4<u32> {
    return b[i];
}
#endif

#if VEC_KERNEL == 1 && defined(A_ALIGN2)
#if A_TYPE == TYPE_Q4_0 || A_TYPE == TYPE_Q8_0 || A_TYPE == TYPE_Q4_K || A_TYPE == TYPE_Q6_K
#define VEC_UNITS 1
#endif
#endif

#ifdef VEC_UNITS
// ---------------------------------------------------------------------------------------------
// Whole-word units. A unit is 64 elements of one row: vu_load reads its words (aligned u32 loads;
// a span that starts 2 bytes into a word is rebuilt from halves of neighbouring words),
// vu_sub(raw, s) gives sub-step s of VU_SUBS: two runs of 4 elements at row positions
// vu_pos(u, s), with their scales (VU_SCALE 0: already applied; 1: one, sx; 2: sx and sy).

const VU: u32 = 64u;
#define VU_SUBS 8u

struct VuSub {
    x: vec4<f32>,
    y: vec4<f32>,
    sx: f32,
    sy: f32,
}

// The word 2 bytes into `lo` when `odd`.
fn vu_fun(lo: u32, hi: u32, odd: bool) -> u32 {
    return select(lo, (lo >> 16u) | (hi << 16u), odd);
}

// Words [i, i + 4) of a span starting at word i (odd: 2 bytes into it); `next` is word i + 4.
fn vu_fun4(w: vec4<u32>, next: u32, odd: bool) -> vec4<u32> {
    return select(w, half_word_down(w, next), odd);
}

// Four words at byte `byte` (even): aligned loads, plus one when the span is not aligned. The
// fifth word overlaps the span when it is read for an unaligned one; otherwise it must lie in
// the binding, which the callers guarantee (or clamp).
fn vu_words4(byte: u32) -> vec4<u32> {
    let i = byte >> 2u;
    let w = vec4<u32>(a[i], a[i + 1u], a[i + 2u], a[i + 3u]);
    return vu_fun4(w, a[i + 4u], (byte & 2u) != 0u);
}

#if A_TYPE == TYPE_Q4_0 || A_TYPE == TYPE_Q8_0
// A unit is two blocks: d0, qs0, d1, qs1, with VU_QW words of quants a block (q4_0: 36 bytes,
// nine words; q8_0: 68 bytes, 17 words), aligned when the row is.
#define VU_SCALE 1
#if A_TYPE == TYPE_Q4_0
#define VU_QW 4
#else
#define VU_QW 8
#endif

struct VuRaw {
    q: array<u32, 2 * VU_QW>,
    d: vec2<f32>,
}

fn vu_load(row: u32, u: u32) -> VuRaw {
    let byte = row + u * (8u * VU_QW + 4u);
    let i = byte >> 2u;
    var w: array<u32, 2 * VU_QW + 1>;
#for C in 0..2 * VU_QW + 1
    w[C##u] = a[i + C##u];
#endfor
#ifndef A_ALIGN4
    let odd = (byte & 2u) != 0u;
    let next = a[min(i + 2u * VU_QW + 1u, a_last())];
#for C in 0..2 * VU_QW
    w[C##u] = vu_fun(w[C##u], w[C##u + 1u], odd);
#endfor
    w[2 * VU_QW] = vu_fun(w[2 * VU_QW], next, odd);
#endif
    var r: VuRaw;
    r.d = vec2<f32>(unpack2x16float(w[0]).x, unpack2x16float(w[VU_QW]).y);
    // Block 0's quants start 2 bytes into word 0; block 1's are whole words from VU_QW + 1.
#for C in 0..VU_QW
    r.q[C##u] = (w[C##u] >> 16u) | (w[C##u + 1u] << 16u);
    r.q[C##u + VU_QW] = w[C##u + VU_QW + 1u];
#endfor
    return r;
}
#endif

#if A_TYPE == TYPE_Q4_0
// Word s % 4 of block s / 4: low nibbles are elements 4(s % 4).., high ones 16 further.
fn vu_pos(u: u32, s: u32) -> vec2<u32> {
    let e = u * 64u + (s / 4u) * 32u + (s % 4u) * 4u;
    return vec2<u32>(e, e + 16u);
}

fn vu_sub(r: VuRaw, s: u32) -> VuSub {
    let q = r.q[s];
    let d = select(r.d.x, r.d.y, s >= 4u);
    return VuSub(u8x4_f32(q & 0x0f0f0f0fu, 8.0), u8x4_f32((q >> 4u) & 0x0f0f0f0fu, 8.0), d, d);
}
#elif A_TYPE == TYPE_Q8_0
fn vu_pos(u: u32, s: u32) -> vec2<u32> {
    let e = u * 64u + s * 8u;
    return vec2<u32>(e, e + 4u);
}

fn vu_sub(r: VuRaw, s: u32) -> VuSub {
    let d = select(r.d.x, r.d.y, s >= 4u);
    // Signed bytes: flipping the sign bit makes them q + 128.
    return VuSub(u8x4_f32(r.q[2u * s] ^ 0x80808080u, 128.0), u8x4_f32(r.q[2u * s + 1u] ^ 0x80808080u, 128.0), d, d);
}
#elif A_TYPE == TYPE_Q4_K
// A unit is group g (of 4) of a 144-byte block: the header (d, dmin, 12 bytes of 6-bit scales
// and mins, 4 words) and qs[32g, 32g + 32) (8 words), whose low nibbles are sub-block 2g and
// high nibbles sub-block 2g + 1. Scales and mins are applied while dequantizing.
#define VU_SCALE 0

struct VuRaw {
    q: array<u32, 8>,
    // d·scale and dmin·min of sub-blocks 2g and 2g + 1.
    dm: vec4<f32>,
}

fn vu_load(row: u32, u: u32) -> VuRaw {
    let g = u % 4u;
    let bb = row + (u / 4u) * 144u;
    let iq = (bb >> 2u) + 4u + 8u * g;
#ifdef A_ALIGN4
    let ih = bb >> 2u;
    let h = vec4<u32>(a[ih], a[ih + 1u], a[ih + 2u], a[ih + 3u]);
#else
    // The header's fifth word is qs[0..4): inside the block.
    let h = vu_words4(bb);
#endif
    var w: array<u32, 8>;
#for C in 0..8
    w[C##u] = a[iq + C##u];
#endfor
#ifndef A_ALIGN4
    let odd = (bb & 2u) != 0u;
    let next = a[min(iq + 8u, a_last())];
#for C in 0..7
    w[C##u] = vu_fun(w[C##u], w[C##u + 1u], odd);
#endfor
    w[7] = vu_fun(w[7], next, odd);
#endif
    // The 6-bit scales (sc) and mins (m) of sub-blocks 0-3 and 4-7, a byte each.
    let hi = g >= 2u;
    let sc = select(h.y & 0x3f3f3f3fu, (h.w & 0x0f0f0f0fu) | ((h.y >> 2u) & 0x30303030u), hi);
    let m = select(h.z & 0x3f3f3f3fu, ((h.w >> 4u) & 0x0f0f0f0fu) | ((h.z >> 2u) & 0x30303030u), hi);
    let sh = 16u * (g & 1u);
    let dd = unpack2x16float(h.x);
    var r: VuRaw;
    r.q = w;
    r.dm = vec4<f32>(dd.x, dd.y, dd.x, dd.y) * vec4<f32>(
        f32((sc >> sh) & 0xffu), f32((m >> sh) & 0xffu), f32((sc >> (sh + 8u)) & 0xffu), f32((m >> (sh + 8u)) & 0xffu));
    return r;
}

fn vu_pos(u: u32, s: u32) -> vec2<u32> {
    let e = u * 64u + s * 4u;
    return vec2<u32>(e, e + 32u);
}

fn vu_sub(r: VuRaw, s: u32) -> VuSub {
    let q = r.q[s];
    let x = u8x4_f32(q & 0x0f0f0f0fu, 0.0) * r.dm.x - r.dm.y;
    let y = u8x4_f32((q >> 4u) & 0x0f0f0f0fu, 0.0) * r.dm.z - r.dm.w;
    return VuSub(x, y, 1.0, 1.0);
}
#elif A_TYPE == TYPE_Q6_K
// ql[128], qh[64], scales[16] (int8), d; 210 bytes, so every other block starts 2 bytes into a
// word. Element 128n + 32j + l (half n, quarter j, l < 32) is nibble j / 2 of ql[64n + 32(j % 2)
// + l] with bits 2j, 2j + 1 of qh[32n + l] above it, scaled by scales[8n + l / 16 + 2j]. A unit
// is half n and l in [16t, 16t + 16) for the four quarters: 4 words of each of the two ql runs
// and of qh, two words of scales.
#define VU_SCALE 2

struct VuRaw {
    ql: array<u32, 8>,
    qh: vec4<u32>,
    // d·scale of quarters 0-3.
    sc: vec4<f32>,
}

fn vu_load(row: u32, u: u32) -> VuRaw {
    let hq = u % 4u;
    let n = hq / 2u;
    let t = hq % 2u;
    let bb = row + (u / 4u) * 210u;
    // Every fifth word read (vu_words4) lies inside the block or overlaps its last bytes.
    let qa = vu_words4(bb + 64u * n + 16u * t);
    let qb = vu_words4(bb + 64u * n + 32u + 16u * t);
    let qh = vu_words4(bb + 128u + 32u * n + 16u * t);
    let i = (bb + 192u + 8u * n) >> 2u;
    let odd = (bb & 2u) != 0u;
    let w2 = a[i + 2u];
    let s0 = vu_fun(a[i], a[i + 1u], odd);
    let s1 = vu_fun(a[i + 1u], w2, odd);
    let d = a_f16(bb + 208u);
    let sh = 24u - 8u * t;
    var r: VuRaw;
    r.ql = array<u32, 8>(qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w);
    r.qh = qh;
    r.sc = d * vec4<f32>(vec4<i32>(bitcast<i32>(s0 << sh), bitcast<i32>(s0 << (sh - 16u)),
                                   bitcast<i32>(s1 << sh), bitcast<i32>(s1 << (sh - 16u))) >> vec4<u32>(24u));
    return r;
}

// Sub-step s: word s % 4 of the run; quarters 0 and 2 (s < 4) or 1 and 3.
fn vu_pos(u: u32, s: u32) -> vec2<u32> {
    let hq = u % 4u;
    let e = (u / 4u) * 256u + (hq / 2u) * 128u + (hq % 2u) * 16u + (s / 4u) * 32u + (s % 4u) * 4u;
    return vec2<u32>(e, e + 64u);
}

fn vu_sub(r: VuRaw, s: u32) -> VuSub {
    let h = r.qh[s % 4u];
    let q = r.ql[s];
    var x: u32;
    var y: u32;
    if (s < 4u) {
        x = (q & 0x0f0f0f0fu) | ((h & 0x03030303u) << 4u);
        y = ((q >> 4u) & 0x0f0f0f0fu) | (h & 0x30303030u);
    } else {
        x = (q & 0x0f0f0f0fu) | ((h & 0x0c0c0c0cu) << 2u);
        y = ((q >> 4u) & 0x0f0f0f0fu) | ((h >> 2u) & 0x30303030u);
    }
    let j = s / 4u;
    return VuSub(u8x4_f32(x, 32.0), u8x4_f32(y, 32.0), r.sc[j], r.sc[j + 2u]);
}
#endif

fn vu_dot(x: vec4<f32>, b: vec4<f32>, c: f32) -> f32 {
    return fma(x.w, b.w, fma(x.z, b.z, fma(x.y, b.y, fma(x.x, b.x, c))));
}

fn vu_dot0(x: vec4<f32>, b: vec4<f32>) -> f32 {
    return fma(x.w, b.w, fma(x.z, b.z, fma(x.y, b.y, x.x * b.x)));
}

fn vu_acc(h: VuSub, b0: vec4<f32>, b1: vec4<f32>, c: f32) -> f32 {
#if VU_SCALE == 0
    return vu_dot(h.y, b1, vu_dot(h.x, b0, c));
#elif VU_SCALE == 1
    return fma(vu_dot(h.y, b1, vu_dot0(h.x, b0)), h.sx, c);
#else
    return fma(vu_dot0(h.x, b0), h.sx, fma(vu_dot0(h.y, b1), h.sy, c));
#endif
}
#endif

#ifdef DST_ROPE
#include "rope_yarn.wgsl"

// cos and sin of pair k's angle at column c's position: rope.wgsl's angle in the normal mode.
fn epi_angle(k: u32, c: u32) -> vec2<f32> {
    let p = params;
    let theta = rope_theta(f32(bitcast<i32>(rope_pos[p.pos_start + c])), k, p.theta_scale);
#ifdef ROPE_FF
    let extrap = theta / rope_ff[p.ff_start + k];
#else
    let extrap = theta;
#endif
    return rope_yarn(extrap, k, p.freq_scale, p.ext_factor, p.attn_factor, p.corr0, p.corr1, p.mscale_ext);
}

// After the workgroup has stored its rows (an even number from an even row: the planner's
// condition), each pair of them roped in place where it is a head's rotated pair (ROPE's
// arithmetic), then stored to the KV cache where it lies in the window [kv_start, kv_end), as
// SET_ROWS would (f32, or f16 with CACHE_F16: the pair is one word).
fn rope_kv_epilogue(tile: Tile, lid: u32) {
    let p = params;
    let pairs = (ROWS * GROUPS) / 2u;
    let row0 = tile.tm * (ROWS * GROUPS);
    for (var u = lid; u < pairs * N_COLS; u += WG_SIZE) {
        let c = u / pairs;
        let r = row0 + 2u * (u % pairs);
        if (c >= p.n || r >= p.m) {
            continue;
        }
        let at = tile.dst_base + c * p.m + r;
        var v0 = dst[at];
        var v1 = dst[at + 1u];
        if (r < p.rope_rows && r % p.rope_d < p.rope_n_dims) {
            let cs = epi_angle((r % p.rope_d) / 2u, c);
            let x0 = v0;
            let x1 = v1;
            v0 = x0 * cs.x - x1 * cs.y;
            v1 = x0 * cs.y + x1 * cs.x;
            dst[at] = v0;
            dst[at + 1u] = v1;
        }
        if (r >= p.kv_start && r < p.kv_end) {
            let id = kv_ids[p.ids_start + c];
            if (id < p.cache_rows) {
#ifdef CACHE_F16
                kv_cache[p.cache_start + id * p.cache_nb1 + (r - p.kv_start) / 2u] = f16_bits(v0) | (f16_bits(v1) << 16u);
#else
                let w = p.cache_start + id * p.cache_nb1 + (r - p.kv_start);
                kv_cache[w] = bitcast<u32>(v0);
                kv_cache[w + 1u] = bitcast<u32>(v1);
#endif
            }
        }
    }
}
#endif

fn write_out(tile: Tile, row0: u32, i: u32, value: f32) {
    let row = row0 + i / N_COLS;
    let col = i % N_COLS;
    if (row < params.m && col < params.n) {
        dst[tile.dst_base + col * params.m + row] = value;
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
#ifdef USE_SUBGROUPS
        @builtin(subgroup_invocation_id) sg_lane: u32,
        @builtin(subgroup_size) sg_size: u32,
#endif
) {
    let tile = tile_of(wid);
    if (!tile.valid) {
        return;
    }
    let p = params;
    let group = lid / GROUP_SIZE;
    let lane = lid % GROUP_SIZE;
    let tile_row0 = tile.tm * (ROWS * GROUPS);
    let row0 = tile_row0 + group * ROWS;
    // Rows, columns and accumulators are unrolled (#for) into plain registers.
#for R in 0..ROWS
    let row_##R = tile.a_base + min(row0 + R##u, p.m - 1u) * p.a_nb1;
#endfor
#ifndef B_Q8
#for J in 0..N_COLS
    let col_##J = tile.b_base + min(J##u, p.n - 1u) * p.b_nb1;
#endfor
#endif
#for R in 0..ROWS
#for J in 0..N_COLS
    var acc_##R##_##J = 0.0;
#endfor
#endfor

#if defined(B_Q8K)
    // K-quant slots (mul_mat_vec_kq.wgsl): 16 elements of a row each, eight to a 128-element
    // half; b holds nine 16-byte words per half of each column (eight of bytes, one of scales).
    let slots = p.k / 16u;
#for J in 0..N_COLS
    let x_base_##J = (tile.batch * p.n + min(J##u, p.n - 1u)) * (p.k / 128u) * 9u;
#endfor
#ifdef VEC_PREFETCH
    // Each step issues the next slot's loads of a before its own arithmetic. A lane past the
    // end reloads the last slot (in bounds: the planner takes this path only for k > 0).
    let last = slots - 1u;
#for R in 0..ROWS
    var next_##R = kq_load(row_##R, min(lane, last) / 8u, min(lane, last) % 8u);
#endfor
#endif
    for (var u = lane; u < slots; u += GROUP_SIZE) {
        let h = u / 8u;
        let i = u % 8u;
#ifdef VEC_PREFETCH
        let following = min(u + GROUP_SIZE, last);
#for R in 0..ROWS
        let w_##R = next_##R;
        next_##R = kq_load(row_##R, following / 8u, following % 8u);
#endfor
#endif
#for J in 0..N_COLS
        let xq_##J = b[x_base_##J + 9u * h + i];
        let xd_##J = bitcast<vec4<f32>>(b[x_base_##J + 9u * h + 8u]);
#ifdef KQ_MINS
        let xs_##J = xd_##J * vec4<f32>(kq_sums(xq_##J));
#endif
#endfor
#for R in 0..ROWS
        {
#ifdef VEC_PREFETCH
            let w = w_##R;
#else
            let w = kq_load(row_##R, h, i);
#endif
#for J in 0..N_COLS
#ifdef PROBE_LOADS
            // Measurement only: the loaded words folded, no dot products.
            let fold_##J = w.v ^ xq_##J ^ bitcast<vec4<u32>>(w.f * xd_##J);
            acc_##R##_##J += bitcast<f32>((fold_##J.x ^ fold_##J.y ^ fold_##J.z ^ fold_##J.w) & 0x3fffffffu);
#else
#ifdef KQ_MINS
            acc_##R##_##J += kq_dot(w, xq_##J, xd_##J, xs_##J);
#else
            acc_##R##_##J += kq_dot(w, xq_##J, xd_##J);
#endif
#endif
#endfor
        }
#endfor
    }
#elif defined(B_Q8)
    // Integer units: W_SUBS 32-element blocks of b (this batch's columns) per unit of a.
#ifdef W_PAIRED
    let units = 2u * (p.k / (64u * W_SUBS));
#else
    let units = p.k / (32u * W_SUBS);
#endif
#ifdef W_LUT
    w_lut_fill(lid);
    workgroupBarrier();
#endif
#ifdef B_Q8_WG
    {
        // The batch's columns (at most N_COLS) quantized, a block a thread in turn; reads b's
        // elements [0, k) of each column, as the quantize pass would.
        let blocks = p.k / 32u;
        let cols = min(N_COLS, p.n);
#ifdef B_RMS_NORM
#ifdef USE_SUBGROUPS
        norm_prologue(tile, lid, cols, sg_lane, sg_size);
#else
        norm_prologue(tile, lid, cols, 0u, 1u);
#endif
#endif
        for (var i = lid; i < cols * blocks; i += WG_SIZE) {
#ifdef B_RMS_NORM
            norm_col = i / blocks;
            norm_scale = norm_scales[norm_col];
#endif
            let blk = b_q8_block(tile.b_base + (i / blocks) * p.b_nb1, (i % blocks) * 32u);
            xq_wg[3u * i] = vec4<u32>(pack4xI8(blk.q[0]), pack4xI8(blk.q[1]), pack4xI8(blk.q[2]), pack4xI8(blk.q[3]));
            xq_wg[3u * i + 1u] = vec4<u32>(pack4xI8(blk.q[4]), pack4xI8(blk.q[5]), pack4xI8(blk.q[6]), pack4xI8(blk.q[7]));
            xq_wg[3u * i + 2u] = vec4<u32>(bitcast<u32>(blk.d), bitcast<u32>(blk.lo), bitcast<u32>(blk.hi), 0u);
        }
        workgroupBarrier();
    }
#for J in 0..N_COLS
    let x_base_##J = min(J##u, p.n - 1u) * (p.k / 32u);
#endfor
#else
#for J in 0..N_COLS
    let x_base_##J = (tile.batch * p.n + min(J##u, p.n - 1u)) * (p.k / 32u);
#endfor
#endif
#ifdef VEC_PREFETCH
    // Each step issues the next unit's loads of a before its own arithmetic. A lane past the
    // end reloads the last unit (in bounds: the planner takes this path only for k > 0).
    let last = units - 1u;
#for R in 0..ROWS
    var next_##R = w_raw(row_##R, min(lane, last));
#endfor
#endif
    for (var u = lane; u < units; u += GROUP_SIZE) {
#ifdef VEC_PREFETCH
        let following = min(u + GROUP_SIZE, last);
#for R in 0..ROWS
        let raw_##R = next_##R;
        next_##R = w_raw(row_##R, following);
#endfor
#else
#for R in 0..ROWS
        let raw_##R = w_raw(row_##R, u);
#endfor
#endif
#for S in 0..W_SUBS
        {
#for J in 0..N_COLS
            let xi_##J = 3u * (x_base_##J + u * W_SUBS + S##u);
            let x_##J = Xq(xq_word(xi_##J), xq_word(xi_##J + 1u), bitcast<vec4<f32>>(xq_word(xi_##J + 2u)));
#endfor
#for R in 0..ROWS
            {
                let w = w_sub(raw_##R, S##u);
#for J in 0..N_COLS
#ifdef PROBE_LOADS
                // Measurement only: the unit's words folded, no dot products.
                let fold_##J = w.v0 ^ w.v1 ^ x_##J.q0 ^ x_##J.q1 ^ bitcast<vec4<u32>>(vec4<f32>(w.f, w.o) * x_##J.s);
                acc_##R##_##J += bitcast<f32>((fold_##J.x ^ fold_##J.y ^ fold_##J.z ^ fold_##J.w) & 0x3fffffffu);
#else
                acc_##R##_##J += w_dot(w, x_##J);
#endif
#endfor
            }
#endfor
        }
#endfor
    }
#ifdef W_WIDE
    // Blocks past the last whole unit (or pair of units), one a step.
    for (var blk = units * W_SUBS + lane; blk < p.k / 32u; blk += GROUP_SIZE) {
#for J in 0..N_COLS
        let xi_##J = 3u * (x_base_##J + blk);
        let x_##J = Xq(xq_word(xi_##J), xq_word(xi_##J + 1u), bitcast<vec4<f32>>(xq_word(xi_##J + 2u)));
#endfor
#for R in 0..ROWS
        {
            let w = w_load(row_##R, blk);
#for J in 0..N_COLS
            acc_##R##_##J += w_dot(w, x_##J);
#endfor
        }
#endfor
    }
#endif
#elif defined(A_FLOAT) && defined(A_VEC4)
    // 16-byte words: each step a lane takes one word of every row (8 halves or 4 floats) and
    // the matching elements of every column, as 16-byte words of b where b's layout allows
    // (b_vec4): a quarter of the pair loop's load instructions.
    let quads = p.k / A_QUAD;
    for (var s = lane; s < quads; s += GROUP_SIZE) {
        let e = s * A_QUAD;
#for J in 0..N_COLS
#if A_TYPE != TYPE_F32 && defined(B_VEC4) && defined(B_F16)
        // An f16 b (or b's f16 copy): the step's 8 elements of each column in one word.
        let bw_##J = b_word8(col_##J, e);
        let b0_##J = vec4<f32>(unpack2x16float(bw_##J.x), unpack2x16float(bw_##J.y));
        let b1_##J = vec4<f32>(unpack2x16float(bw_##J.z), unpack2x16float(bw_##J.w));
#else
        let b0_##J = b_vec4(col_##J, e);
#if A_TYPE != TYPE_F32
        let b1_##J = b_vec4(col_##J, e + 4u);
#endif
#endif
#endfor
#for R in 0..ROWS
        {
#ifdef PROBE_ALU
            // Measurement only: a word made from the step and row instead of loaded.
            let w = vec4<u32>(s, s + 1u, s + 2u, s + 3u) ^ vec4<u32>(row_##R);
#else
            let w = a4[(row_##R >> 4u) + s];
#endif
#if A_TYPE == TYPE_F32
            let a0 = bitcast<vec4<f32>>(w);
#else
            let a0 = vec4<f32>(a_word2(w.x), a_word2(w.y));
            let a1 = vec4<f32>(a_word2(w.z), a_word2(w.w));
#endif
#for J in 0..N_COLS
#ifdef PROBE_LOADS
            // Measurement only: the loaded words folded, no products.
#if A_TYPE != TYPE_F32
            let fold_##J = w ^ bitcast<vec4<u32>>(b0_##J) ^ bitcast<vec4<u32>>(b1_##J);
#else
            let fold_##J = w ^ bitcast<vec4<u32>>(b0_##J);
#endif
            acc_##R##_##J += bitcast<f32>((fold_##J.x ^ fold_##J.y ^ fold_##J.z ^ fold_##J.w) & 0x3fffffffu);
#else
#if A_TYPE != TYPE_F32
            acc_##R##_##J += dot(a0, b0_##J) + dot(a1, b1_##J);
#else
            acc_##R##_##J += dot(a0, b0_##J);
#endif
#endif
#endfor
        }
#endfor
    }
    // The last k % A_QUAD elements.
    for (var e = quads * A_QUAD + lane; e < p.k; e += GROUP_SIZE) {
#for R in 0..ROWS
        {
            let av = a_elem(row_##R, e);
#for J in 0..N_COLS
            acc_##R##_##J += av * b_elem(col_##J, e);
#endfor
        }
#endfor
    }
#elif defined(A_FLOAT)
    let pairs = p.k / 2u;
    for (var q = lane; q < pairs; q += GROUP_SIZE) {
#for J in 0..N_COLS
        let b_##J = b_pair(col_##J, 2u * q);
#endfor
        let e = 2u * q;
#for R in 0..ROWS
        {
#ifdef PROBE_ALU
            // Measurement only: a pair made from the step and row instead of loaded.
#if A_TYPE == TYPE_F32
            let av = bitcast<vec2<f32>>(vec2<u32>(q, q + 1u) ^ vec2<u32>(row_##R));
#else
            let av = a_word2(q ^ row_##R);
#endif
#else
            let av = a_pair(row_##R, e);
#endif
#for J in 0..N_COLS
#ifdef PROBE_LOADS
            // Measurement only: the loaded words folded, no products.
            let fold_##J = bitcast<vec2<u32>>(av) ^ bitcast<vec2<u32>>(b_##J);
            acc_##R##_##J += bitcast<f32>((fold_##J.x ^ fold_##J.y) & 0x3fffffffu);
#else
            acc_##R##_##J += dot(av, b_##J);
#endif
#endfor
        }
#endfor
    }
    // An odd k leaves one element.
    if (lane == 0u && (p.k & 1u) != 0u) {
        let e = p.k - 1u;
#for R in 0..ROWS
        {
            let av = a_elem(row_##R, e);
#for J in 0..N_COLS
            acc_##R##_##J += av * b_elem(col_##J, e);
#endfor
        }
#endfor
    }
#else
#ifdef VEC_UNITS
    let units = p.k / VU;
    for (var u = lane; u < units; u += GROUP_SIZE) {
#for R in 0..ROWS
        let raw_##R = vu_load(row_##R, u);
#endfor
#for S in 0..VU_SUBS
        {
            let e = vu_pos(u, S##u);
#for R in 0..ROWS
            let h_##R = vu_sub(raw_##R, S##u);
#endfor
#for J in 0..N_COLS
            {
                let b0 = b_vec4(col_##J, e.x);
                let b1 = b_vec4(col_##J, e.y);
#for R in 0..ROWS
                acc_##R##_##J = vu_acc(h_##R, b0, b1, acc_##R##_##J);
#endfor
            }
#endfor
        }
#endfor
    }
    // A k that is not a whole number of units (an odd number of q4_0/q8_0 blocks) leaves a block.
    let first = units * (VU / 8u);
#else
    let first = 0u;
#endif
    let per_block = a_block / 8u;
    let eights = p.k / 8u;
    for (var q = first + lane; q < eights; q += GROUP_SIZE) {
        let blk = q / per_block;
        let t = q % per_block;
        let e = blk * a_block + a_vec_pos(t);
#for J in 0..N_COLS
        let b0_##J = b_vec4(col_##J, e.x);
        let b1_##J = b_vec4(col_##J, e.y);
#endfor
#for R in 0..ROWS
        {
            let w = a_vec8(row_##R + blk * a_block_bytes, t);
#for J in 0..N_COLS
            acc_##R##_##J += dot(w[0], b0_##J) + dot(w[1], b1_##J);
#endfor
        }
#endfor
    }
#endif

#ifdef USE_SUBGROUPS
    // Subgroups are taken to be consecutive runs of invocations, as on every Vulkan driver; a
    // group is a whole number of them.
    let sg = lid / sg_size;
#for R in 0..ROWS
#for J in 0..N_COLS
    {
        let s = subgroupAdd(acc_##R##_##J);
        if (sg_lane == 0u) {
            partial[sg * RN + R##u * N_COLS + J##u] = s;
        }
    }
#endfor
#endfor
    workgroupBarrier();
    // Every output of the workgroup, however many there are per thread.
    let per_group = max(GROUP_SIZE / sg_size, 1u);
    for (var o = lid; o < GROUPS * RN; o += WG_SIZE) {
        let g = o / RN;
        let i = o % RN;
        var s = 0.0;
        for (var c = 0u; c < per_group; c += 1u) {
            s += partial[(g * per_group + c) * RN + i];
        }
        write_out(tile, tile_row0 + g * ROWS, i, s);
    }
#else
#for R in 0..ROWS
#for J in 0..N_COLS
    partial[lid] = acc_##R##_##J;
    workgroupBarrier();
    for (var stride = GROUP_SIZE / 2u; stride > 0u; stride /= 2u) {
        if (lane < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    if (lane == 0u) {
        write_out(tile, row0, R##u * N_COLS + J##u, partial[lid]);
    }
    workgroupBarrier();
#endfor
#endfor
#endif
#ifdef DST_ROPE
    // The rows this workgroup stored, visible to all its threads.
    storageBarrier();
    rope_kv_epilogue(tile, lid);
#endif
}
