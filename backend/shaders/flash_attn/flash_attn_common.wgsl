// What flash_attn_tile.wgsl and flash_attn_mma.wgsl share: bindings, parameters, the
// K/V chunk readers, the work decomposition, scores (scale, softcap, ALiBi mask), the mask scan
// that skips fully masked KV tiles, and the output (normalized, or partial for the split reduce).
//
// Host defines: K_TYPE, V_TYPE, K_VEC, V_VEC (see flash_attn_kv.wgsl), HAS_MASK, NT (threads),
// ROWS (query rows per workgroup), KV_TILE (keys per tile), HSK, HSV.
//
// A workgroup owns ROWS consecutive rows of the query rows sharing one KV head: row
// rho = iq·r2 + hh is query iq of head hk·r2 + hh (head-minor, so adjacent rows share a mask row),
// and keys [split·split_len, min(kv, (split + 1)·split_len)).
// Defaults for rendering a kernel without the host's defines (which take precedence); the
// #for loops over register arrays take their bounds from these names.
//
// Bytes touched (bindings from `Bound::new` in ops/flash_attn/encode.rs, each
// `DeviceTensor::binding` of memory.rs: the operand's span from its first element, rounded out
// to whole words, an error past the buffer or the limit; `flash_attn::check` in
// ops/flash_attn/mod.rs holds the shapes):
// - q (binding 0): rows of hsk f32 (contiguous rows) for queries < n_q of the workgroup's heads;
// - k, v (1, 2): rows of keys < kv of KV head h / r2, hsk or hsv elements (whole blocks, rows
//   contiguous: `check`); as vec4 (K_VEC, V_VEC) only where `kv_binding` rounded the binding up
//   to whole 16-byte words still inside the buffer, for float rows with 16-byte aligned start
//   and strides (`vec_layout`), so a row's vectors end where the row ends;
// - mask (3): f16 row iq < n_q (≤ mask ne1: `check`) of sequence i3 % mask ne3, kv elements;
// - sinks (4): n_heads f32 (`check`);
// - dst (5): the contiguous f32 [hsv, n_heads, n_q, n_seq] (`check`), or with a KV split the
//   context's scratch of `FlashAttnPlan::scratch_bytes` (partials, then the (max, sum) pairs at
//   `stats_offset`).
// Rows past the workgroup's last query and keys past kv in the last tile are neither read nor
// written. Tested with 0xFF guards after every operand (113 keys, no whole tile): tests/tests/guards.rs.
#ifndef NT
#define NT 128u
#endif
#ifndef ROWS
#define ROWS 1u
#endif
#ifndef KV_TILE
#define KV_TILE 32u
#endif
#ifndef HSK
#define HSK 64u
#endif
#ifndef HSV
#define HSV 64u
#endif
#ifndef HSKP
#define HSKP 64u
#endif
#ifndef HSVP
#define HSVP 64u
#endif
#ifndef K_CHUNKS
#define K_CHUNKS 8u
#endif
#ifndef V_CHUNKS
#define V_CHUNKS 8u
#endif
#ifndef RQ
#define RQ 1u
#endif
#ifndef CH
#define CH 1u
#endif
#ifndef RO
#define RO 1u
#endif
#ifndef KS
#define KS 1u
#endif
#ifndef TPR
#define TPR 1u
#endif
#ifndef SG_M
#define SG_M 8u
#endif
#ifndef SG_N
#define SG_N 8u
#endif
#ifndef SG_K
#define SG_K 8u
#endif
#ifndef CG
#define CG 1u
#endif
#ifndef SB
#define SB 1u
#endif

@group(0) @binding(0) var<storage, read> q: array<f32>;
#if K_VEC
@group(0) @binding(1) var<storage, read> k_buf: array<vec4<u32>>;
#else
@group(0) @binding(1) var<storage, read> k_buf: array<u32>;
#endif
#if V_VEC
@group(0) @binding(2) var<storage, read> v_buf: array<vec4<u32>>;
#else
@group(0) @binding(2) var<storage, read> v_buf: array<u32>;
#endif
@group(0) @binding(3) var<storage, read> mask: array<u32>;
@group(0) @binding(4) var<storage, read> sinks: array<f32>;
// dst (one split) or the split scratch: partial outputs [split][row][HSV], then (max, sum) pairs.
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

struct Params {
    q_start: u32,     // elements
    q_nb1: u32,       // element strides
    q_nb2: u32,
    q_nb3: u32,
    k_start: u32,     // bytes
    k_nb1: u32,
    k_nb2: u32,
    k_nb3: u32,
    v_start: u32,     // bytes
    v_nb1: u32,
    v_nb2: u32,
    v_nb3: u32,
    mask_start: u32,  // bytes
    mask_nb1: u32,
    mask_nb3: u32,
    mask_ne3: u32,
    sinks_start: u32, // elements
    has_sinks: u32,
    out_start: u32,   // elements: dst's start (one split) or 0
    stats_start: u32, // elements: the (max, sum) pairs in the scratch
    n_q: u32,
    n_heads: u32,
    kv_heads: u32,
    n_seq: u32,
    kv: u32,
    r2: u32,          // query heads per KV head
    row_blocks: u32,  // workgroups per KV head and sequence and split
    n_split: u32,
    split_len: u32,
    scale: f32,       // divided by the softcap when there is one
    softcap: f32,
    max_bias: f32,
    n_head_log2: u32,
    m0: f32,
    m1: f32,
    groups_x: u32,
    n_rows: u32,      // output rows n_q·n_heads·n_seq
    tau: f32,         // lazy-rescale threshold (mma)
}
@group(0) @binding(6) var<uniform> params: Params;

// K/V chunks (16 bytes) a thread stages per tile. The including kernel defines K_CHUNKS and
// V_CHUNKS (#define, before including), the chunks of a staged K/V row (head sizes padded as the
// kernel needs).
#define KC ((KV_TILE * K_CHUNKS + NT - 1u) / NT)
#define VC ((KV_TILE * V_CHUNKS + NT - 1u) / NT)

// Two f16 -inf.
const NEG_INF2: u32 = 0xfc00fc00u;

// Scores at or below this are masked out (a -inf mask, or keys past the end).
const MASKED: f32 = -3.4028234663852886e38;

// Two bf16 (a u32) as two f16.
fn fa_bf16x2(w: u32) -> u32 {
    return pack2x16float(vec2<f32>(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u)));
}

// The int8 at bits [shift, shift + 8) and the next one, times d, as two f16.
fn fa_i8x2(w: u32, shift: u32, d: f32) -> u32 {
    let a = f32(bitcast<i32>(w << (24u - shift)) >> 24u);
    let b = f32(bitcast<i32>(w << (16u - shift)) >> 24u);
    return pack2x16float(vec2<f32>(a, b) * d);
}

// The nibbles at bits shift and shift + 8, as q·d + m in two f16.
fn fa_q4x2(w: u32, shift: u32, d: f32, m: f32) -> u32 {
    let a = f32((w >> shift) & 15u);
    let b = f32((w >> (shift + 8u)) & 15u);
    return pack2x16float(vec2<f32>(a, b) * d + m);
}

// 8 K/V values as f32 before their scale d (the vec kernel folds d into its dot products and
// weights): value e is lo/hi[e] · d.
struct Dec8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
    d: f32,
}

// Eight f16 values packed two per u32, as a Dec8 with scale 1.
fn fa_f16_dec8(r: vec4<u32>) -> Dec8 {
    return Dec8(vec4<f32>(unpack2x16float(r.x), unpack2x16float(r.y)),
        vec4<f32>(unpack2x16float(r.z), unpack2x16float(r.w)), 1.0);
}

// The 4 int8 of a u32, as f32.
fn fa_i8x4(w: u32) -> vec4<f32> {
    // Each byte biased to unsigned (x ^ 0x80 = x + 128), converted without int-to-float
    // conversions (u8x4_f32).
    return u8x4_f32(w ^ 0x80808080u, 128.0);
}

#define FMT k
#define FMT_BUF k_buf
#define FMT_TYPE K_TYPE
#define FMT_VEC K_VEC
#include "flash_attn_kv.wgsl"
#undef FMT
#undef FMT_BUF
#undef FMT_TYPE
#undef FMT_VEC
#define FMT v
#define FMT_BUF v_buf
#define FMT_TYPE V_TYPE
#define FMT_VEC V_VEC
#include "flash_attn_kv.wgsl"
#undef FMT
#undef FMT_BUF
#undef FMT_TYPE
#undef FMT_VEC

// This thread's share of the K rows [j0, j0 + nk) of the tile (zeros past them and in the
// padding), into registers; the kernel's store_k puts them in workgroup memory.
fn load_k(r: ptr<function, array<vec4<u32>, KC>>, w: Work, tid: u32, j0: u32, nk: u32) {
    let p = params;
    let base = p.k_start + w.hk * p.k_nb2 + w.i3 * p.k_nb3;
#for I_ in 0..KC
    {
        let i = I_##u;
        let e = tid + i * NT;
        let j = e / K_CHUNKS;
        let c = e % K_CHUNKS;
        var v = vec4<u32>(0u);
        if (j < nk && c < HSK / 8u) {
            v = k_chunk(base + (j0 + j) * p.k_nb1, c * 8u);
        }
        (*r)[i] = v;
    }
#endfor
}

fn load_v(r: ptr<function, array<vec4<u32>, VC>>, w: Work, tid: u32, j0: u32, nk: u32) {
    let p = params;
    let base = p.v_start + w.hk * p.v_nb2 + w.i3 * p.v_nb3;
#for I_ in 0..VC
    {
        let i = I_##u;
        let e = tid + i * NT;
        let j = e / V_CHUNKS;
        let c = e % V_CHUNKS;
        var v = vec4<u32>(0u);
        if (j < nk && c < HSV / 8u) {
            v = v_chunk(base + (j0 + j) * p.v_nb1, c * 8u);
        }
        (*r)[i] = v;
    }
#endfor
}

// The workgroup's share of the work.
struct Work {
    ok: bool,
    rb: u32,     // row block
    split: u32,
    hk: u32,     // KV head
    i3: u32,     // sequence
    rho0: u32,   // first row
    n_rows: u32, // rows (at most ROWS)
    iq_lo: u32,  // first and last query of the rows
    iq_hi: u32,
    kv0: u32,    // keys [kv0, kv1)
    kv1: u32,
}

fn fa_work(wg: vec3<u32>) -> Work {
    let p = params;
    var w: Work;
    let lin = wg.y * p.groups_x + wg.x;
    w.ok = lin < p.row_blocks * p.n_split * p.kv_heads * p.n_seq;
    w.rb = lin % p.row_blocks;
    var r = lin / p.row_blocks;
    w.split = r % p.n_split;
    r = r / p.n_split;
    w.hk = r % p.kv_heads;
    w.i3 = r / p.kv_heads;
    let total = p.r2 * p.n_q;
    w.rho0 = w.rb * ROWS;
    w.n_rows = min(ROWS, total - min(total, w.rho0));
    w.iq_lo = w.rho0 / p.r2;
    w.iq_hi = (w.rho0 + max(w.n_rows, 1u) - 1u) / p.r2;
    w.kv0 = w.split * p.split_len;
    w.kv1 = min(p.kv, w.kv0 + p.split_len);
    return w;
}

// Query and head of row g of the workgroup.
fn fa_query(w: Work, g: u32) -> u32 {
    return (w.rho0 + g) / params.r2;
}

fn fa_head(w: Work, g: u32) -> u32 {
    return w.hk * params.r2 + (w.rho0 + g) % params.r2;
}

// ALiBi slope of head h (1 without max_bias).
fn fa_slope(h: u32) -> f32 {
    let p = params;
    if (p.max_bias <= 0.0) {
        return 1.0;
    }
    if (h < p.n_head_log2) {
        return pow(p.m0, f32(h + 1u));
    }
    return pow(p.m1, f32(2u * (h - p.n_head_log2) + 1u));
}

// Byte offset of query iq's mask row.
fn fa_mask_row(iq: u32, i3: u32) -> u32 {
    let p = params;
    return p.mask_start + iq * p.mask_nb1 + (i3 % max(p.mask_ne3, 1u)) * p.mask_nb3;
}

// The mask value of key j in the row at byte `row` (f16).
fn fa_mask_at(row: u32, j: u32) -> f32 {
    let byte = row + j * 2u;
    return unpack2x16float(mask[byte >> 2u] >> ((byte & 2u) * 8u)).x;
}

// q·k·scale, squashed by the softcap.
fn fa_logit(dot: f32) -> f32 {
    let p = params;
    var s = dot * p.scale;
    if (p.softcap != 0.0) {
        s = p.softcap * tanh(clamp(s, -15.0, 15.0));
    }
    return s;
}

// Whether some mask value of the workgroup's queries and keys [j0, j1) is above -inf: this
// thread's share of the scan (used once, for the first tile; later tiles are scanned with
// fa_scan_load / fa_scan_live while the previous tile computes).
fn fa_scan(w: Work, tid: u32, j0: u32, j1: u32) -> bool {
    var live = false;
    for (var iq = w.iq_lo; iq <= w.iq_hi; iq += 1u) {
        let row = fa_mask_row(iq, w.i3);
        for (var j = j0 + tid; j < j1; j += NT) {
            live = live || fa_mask_at(row, j) > MASKED;
        }
    }
    return live;
}

// The u32 at an even byte address of the mask.
fn fa_mask_w(byte: u32) -> u32 {
    let i = byte >> 2u;
    if ((byte & 2u) == 0u) {
        return mask[i];
    }
    return (mask[i] >> 16u) | (mask[i + 1u] << 16u);
}

// Mask values of keys j..j+7 of the row at byte `row`, as 8 packed f16; keys from j_end on
// read as -inf.
fn fa_mask8(row: u32, j: u32, j_end: u32) -> vec4<u32> {
    let b = row + j * 2u;
    if (j + 8u <= j_end) {
        return vec4<u32>(fa_mask_w(b), fa_mask_w(b + 4u), fa_mask_w(b + 8u), fa_mask_w(b + 12u));
    }
    var out = array<u32, 4>(NEG_INF2, NEG_INF2, NEG_INF2, NEG_INF2);
#for E_ in 0..8u
    {
        let e = E_##u;
        if (j + e < j_end) {
            let byte = b + 2u * e;
            let h = (mask[byte >> 2u] >> ((byte & 2u) * 8u)) & 0xffffu;
            let sh = (e % 2u) * 16u;
            out[e / 2u] = (out[e / 2u] & ~(0xffffu << sh)) | (h << sh);
        }
    }
#endfor
    return vec4<u32>(out[0], out[1], out[2], out[3]);
}

// Whether some of 8 packed f16 mask values is not -inf.
fn fa_live8(m: vec4<u32>) -> bool {
    return any(m != vec4<u32>(NEG_INF2));
}

// Mask chunks (8 keys) a thread scans per tile: the workgroup's queries × KV_TILE / 8.
#define MSC ((ROWS * (KV_TILE / 8u) + NT - 1u) / NT)

// Loads this thread's share of the mask of keys [j0, j0 + nk) (all queries of the workgroup).
fn fa_scan_load(r: ptr<function, array<vec4<u32>, MSC>>, w: Work, tid: u32, j0: u32, nk: u32) {
    let nq = w.iq_hi - w.iq_lo + 1u;
#for I_ in 0..MSC
    {
        let i = I_##u;
        let e = tid + i * NT;
        let q = e / (KV_TILE / 8u);
        let c = e % (KV_TILE / 8u);
        var v = vec4<u32>(NEG_INF2);
        if (q < nq && c * 8u < nk) {
            v = fa_mask8(fa_mask_row(w.iq_lo + q, w.i3), j0 + c * 8u, j0 + nk);
        }
        (*r)[i] = v;
    }
#endfor
}

fn fa_scan_live(r: ptr<function, array<vec4<u32>, MSC>>) -> bool {
    var live = false;
#for I_ in 0..MSC
    {
        let i = I_##u;
        live = live || fa_live8((*r)[i]);
    }
#endfor
    return live;
}

#ifdef FA_STAGED
// The KV-tile walk of the staged kernels (tile and mma), which define store_k, store_v (registers
// to their workgroup layout), flags (3 words at least, zeroed before a barrier) and PREFETCH /
// KV_ALIAS. Per workgroup: live = fa_tile_first(...), then per tile t: fa_tile_stage(...), the
// math when live, live = fa_tile_end(...).

// Whether the first tile has an unmasked key (a scan of its mask), and with PREFETCH its K/V
// loads.
fn fa_tile_first(kreg: ptr<function, array<vec4<u32>, KC>>, vreg: ptr<function, array<vec4<u32>, VC>>, w: Work,
    tid: u32) -> bool {
#if HAS_MASK && MASK_SKIP
    if (fa_scan(w, tid, w.kv0, min(w.kv1, w.kv0 + KV_TILE))) {
        flags[0] = 1u;
    }
    let live = workgroupUniformLoad(&flags[0]) != 0u;
#else
    let live = true;
#endif
#if PREFETCH
    if (live) {
        load_k(kreg, w, tid, w.kv0, min(KV_TILE, w.kv1 - w.kv0));
        load_v(vreg, w, tid, w.kv0, min(KV_TILE, w.kv1 - w.kv0));
    }
#endif
    return live;
}

// Tile [j0, j0 + nk) into workgroup memory (V later with KV_ALIAS), the barrier, then the loads
// for the next tile [n0, n0 + nk_next) (K/V with PREFETCH; its mask, for skipping it), in flight
// during this tile's math.
fn fa_tile_stage(kreg: ptr<function, array<vec4<u32>, KC>>, vreg: ptr<function, array<vec4<u32>, VC>>,
    mscan: ptr<function, array<vec4<u32>, MSC>>, w: Work, tid: u32, live: bool, j0: u32, nk: u32, has_next: bool,
    n0: u32, nk_next: u32) {
    if (live) {
#if !PREFETCH
        load_k(kreg, w, tid, j0, nk);
#if !KV_ALIAS
        load_v(vreg, w, tid, j0, nk);
#endif
#endif
        store_k(kreg, tid);
#if !KV_ALIAS
        store_v(vreg, tid);
#endif
    }
    workgroupBarrier();
#if PREFETCH
    if (has_next) {
        load_k(kreg, w, tid, n0, nk_next);
#if !KV_ALIAS
        load_v(vreg, w, tid, n0, nk_next);
#else
        if (!live) {
            load_v(vreg, w, tid, n0, nk_next);
        }
#endif
    }
#endif
#if HAS_MASK && MASK_SKIP
    if (has_next) {
        fa_scan_load(mscan, w, tid, n0, nk_next);
    }
#endif
}

// Whether tile t + 1 is to be computed (it exists and, with MASK_SKIP, has an unmasked key; the
// flags rotate so that no reset races a read); also the barrier closing tile t.
fn fa_tile_end(mscan: ptr<function, array<vec4<u32>, MSC>>, tid: u32, t: u32, has_next: bool) -> bool {
#if HAS_MASK && MASK_SKIP
    if (has_next && fa_scan_live(mscan)) {
        flags[(t + 1u) % 3u] = 1u;
    }
    if (tid == 0u) {
        flags[(t + 2u) % 3u] = 0u;
    }
    let next_flag = workgroupUniformLoad(&flags[(t + 1u) % 3u]);
    return has_next && next_flag != 0u;
#else
    workgroupBarrier();
    return has_next;
#endif
}
#endif

// Stores the 4 output values at column d of row g: normalized into dst with one split, else
// the partial sums into the scratch (the statistics are written by fa_store_stats).
fn fa_store(w: Work, g: u32, d: u32, o: vec4<f32>, m: f32, l: f32) {
    let p = params;
    let iq = fa_query(w, g);
    let h = fa_head(w, g);
    let row = (w.i3 * p.n_q + iq) * p.n_heads + h;
    if (p.n_split == 1u) {
        var f = 0.0;
        if (p.has_sinks != 0u) {
            let sink = sinks[p.sinks_start + h];
            let mm = max(m, sink);
            let keep = exp(m - mm);
            f = keep / (l * keep + exp(sink - mm));
        } else if (l > 0.0) {
            f = 1.0 / l;
        }
        let at = p.out_start + row * HSV + d;
        out[at] = o.x * f;
        out[at + 1u] = o.y * f;
        out[at + 2u] = o.z * f;
        out[at + 3u] = o.w * f;
    } else {
        let at = (w.split * p.n_rows + row) * HSV + d;
        out[at] = o.x;
        out[at + 1u] = o.y;
        out[at + 2u] = o.z;
        out[at + 3u] = o.w;
    }
}

fn fa_store_stats(w: Work, g: u32, m: f32, l: f32) {
    let p = params;
    if (p.n_split > 1u) {
        let row = (w.i3 * p.n_q + fa_query(w, g)) * p.n_heads + fa_head(w, g);
        let at = p.stats_start + (w.split * p.n_rows + row) * 2u;
        out[at] = m;
        out[at + 1u] = l;
    }
}
