// ROPE (forward) as ggml's CPU computes it: one thread per rotated pair of a row, or per element
// of the row that is copied (before n_offs and past the rotated dims). The angle of pair k is
// ggml's running product `theta *= theta_scale` repeated k times in f32 (so it matches the CPU's
// bits), divided by the pair's frequency factor, through YaRN's ramp; cos and sin after a
// two-constant reduction to [-pi, pi].
//
// With ROWS_OUT (SHARED, f32 in place, one token a workgroup), the workgroup then stores its
// token's row of dst (rows_n f32 from rows_start + token·rows_nb1: roped and unroped elements of
// the same token) as cache row ids[token] (i32, or IDS_I64), f32 or (CACHE_F16) f16: SET_ROWS after ROPE in one
// dispatch, as a decoder writes its KV cache.
//
// Defines: SRC_TYPE, DST_TYPE (TYPE_F32 or TYPE_F16), MODE (ggml's mode number: 0, 2, 8, 24,
// 40), FF (frequency factors bound), INPLACE (no src binding: the row is read from dst, which
// has src's layout), DST_ATOMIC (dst as atomic words: 16-bit elements of different threads share
// words), SHARED and SHARED_PAIRS (a workgroup a token: its angles once into workgroup memory,
// then its ne1 rows' units; the grid counts tokens), WORDS (an f16 dst of whole words: a thread rotates pairs 2t and 2t+1, or copies two
// consecutive elements, and stores whole words that no other thread touches), SRC_WORDS (with
// WORDS: an f16 src whose element pairs a thread reads are whole words, read as such; copied
// words go over unconverted), WG_SIZE.
//
// Bytes touched: the elements src's and dst's layouts address (rows i1, i2, i3 below their
// extents, elements below ne0); pos element i2 + section·ne2 (the host checks pos holds
// ne2·sections of them); ff elements below the rotated pairs (checked likewise).
#include "common.wgsl"
#include "rope_yarn.wgsl"

#if INPLACE && DST_ATOMIC
@group(0) @binding(0) var<storage, read> pos: array<u32>;
#define NEXT 1
#elif INPLACE
@group(0) @binding(0) var<storage, read> pos: array<u32>;
#define NEXT 1
#else
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read> pos: array<u32>;
#define NEXT 2
#endif
#if FF
@group(0) @binding(NEXT) var<storage, read> ff: array<f32>;
#define DST_BINDING (NEXT + 1)
#else
#define DST_BINDING NEXT
#endif
#if DST_ATOMIC
@group(0) @binding(DST_BINDING) var<storage, read_write> dst: array<atomic<u32>>;
#else
@group(0) @binding(DST_BINDING) var<storage, read_write> dst: array<u32>;
#endif
#if ROWS_OUT
@group(0) @binding(DST_BINDING + 1) var<storage, read> ids: array<u32>;
@group(0) @binding(DST_BINDING + 2) var<storage, read_write> cache: array<u32>;
#define PARAMS_BINDING (DST_BINDING + 3)
#else
#define PARAMS_BINDING (DST_BINDING + 1)
#endif

struct Params {
    src_start: u32,   // bytes
    dst_start: u32,   // bytes
    pos_start: u32,   // elements
    ff_start: u32,    // elements
    units: u32,       // threads with work
    row_stride: u32,  // threads per grid row
    ne0: u32,
    ne1: u32,
    ne2: u32,
    row_units: u32,   // pairs + copied elements per row
    pairs: u32,       // rotated pairs per row
    n_dims: u32,
    n_offs: u32,
    src_nb0: u32,
    src_nb1: u32,
    src_nb2: u32,
    src_nb3: u32,
    dst_nb0: u32,
    dst_nb1: u32,
    dst_nb2: u32,
    dst_nb3: u32,
    s0: u32,          // sections (multi-section modes)
    s1: u32,
    s2: u32,
    s3: u32,
    theta_scale: f32, // freq_base^(-2/n_dims), as the CPU rounds it
    freq_scale: f32,
    ext_factor: f32,
    attn_factor: f32,
    corr0: f32,       // YaRN's correction range
    corr1: f32,
    mscale_ext: f32,  // 1 + 0.1·ln(1/freq_scale), as the CPU rounds it
    tokens: u32,      // rows / ne1 (SHARED: one workgroup each)
    rows_start: u32,  // ROWS_OUT: bytes from dst's binding to the first row to store
    rows_nb1: u32,    // bytes from a token's row to the next
    rows_n: u32,      // f32 elements a row
    ids_start: u32,   // elements
    cache_start: u32, // bytes
    cache_nb1: u32,   // bytes a cache row
    cache_rows: u32,  // rows of the cache (an id past them writes nothing)
}
@group(0) @binding(PARAMS_BINDING) var<uniform> params: Params;

fn load_word(i: u32) -> u32 {
#if INPLACE && DST_ATOMIC
    return atomicLoad(&dst[i]);
#elif INPLACE
    return dst[i];
#else
    return src[i];
#endif
}

fn load_elem(at: u32) -> f32 {
    let w = load_word(at >> 2u);
#if SRC_TYPE == TYPE_F16
    return unpack2x16float(w >> ((at & 2u) * 8u)).x;
#else
    return bitcast<f32>(w);
#endif
}

fn store_elem(at: u32, v: f32) {
#if DST_TYPE == TYPE_F16
    let shift = (at & 2u) * 8u;
    let bits = f16_bits(v) << shift;
    let mask = 0xffffu << shift;
#if DST_ATOMIC
    var old = atomicLoad(&dst[at >> 2u]);
    loop {
        let r = atomicCompareExchangeWeak(&dst[at >> 2u], old, (old & ~mask) | bits);
        if (r.exchanged) {
            break;
        }
        old = r.old_value;
    }
#else
    dst[at >> 2u] = (dst[at >> 2u] & ~mask) | bits;
#endif
#else
#if DST_ATOMIC
    atomicStore(&dst[at >> 2u], bitcast<u32>(v));
#else
    dst[at >> 2u] = bitcast<u32>(v);
#endif
#endif
}

// The position section of pair k's sector (ggml's chains).
#if WORDS
// Two f16 values into the word at byte `at` (a multiple of 4), lo first.
fn store_word(at: u32, lo: f32, hi: f32) {
    dst[at >> 2u] = f16_bits(lo) | (f16_bits(hi) << 16u);
}

// Elements e and e + 1 (e even) of the src row at byte `row`.
fn load_two(row: u32, e: u32) -> vec2<f32> {
#if SRC_WORDS
    return unpack2x16float(load_word((row + e * 2u) >> 2u));
#else
    return vec2<f32>(load_elem(row + e * params.src_nb0), load_elem(row + (e + 1u) * params.src_nb0));
#endif
}
#endif

fn section_of(sector: u32) -> u32 {
    let p = params;
#if MODE == 40
    if (sector % 3u == 1u && sector < 3u * p.s1) {
        return 1u;
    } else if (sector % 3u == 2u && sector < 3u * p.s2) {
        return 2u;
    } else if (sector % 3u == 0u && sector < 3u * p.s0) {
        return 0u;
    }
    return 3u;
#else
    let sec_w = p.s0 + p.s1;
    if (sector >= p.s0 && sector < sec_w) {
        return 1u;
    } else if (sector >= sec_w && sector < sec_w + p.s2) {
        return 2u;
    } else if (sector >= sec_w + p.s2) {
        return 3u;
    }
    return 0u;
#endif
}

// Vision: the section whose angle restarts at `sector` (the first whose start it is), or 4.
fn restart_of(sector: u32) -> u32 {
    let p = params;
    if (sector == 0u) {
        return 0u;
    } else if (sector == p.s0) {
        return 1u;
    } else if (sector == p.s0 + p.s1) {
        return 2u;
    } else if (sector == p.s0 + p.s1 + p.s2) {
        return 3u;
    }
    return 4u;
}

fn position(i2: u32, section: u32) -> f32 {
    return f32(bitcast<i32>(pos[params.pos_start + i2 + section * params.ne2]));
}

// cos and sin of pair k's angle, times the magnitude (ggml's rope_yarn).
fn angle(k: u32, i2: u32) -> vec2<f32> {
    let p = params;
#if MODE == 8 || MODE == 24 || MODE == 40
    let sect_dims = p.s0 + p.s1 + p.s2 + p.s3;
    let section = section_of(k % sect_dims);
    var theta = position(i2, section);
#if MODE == 24
    // The CPU's chain, restarting at each start of this section (j % sect_dims kept as it goes).
    var sector = 0u;
    for (var j = 0u; j <= k; j++) {
        if (restart_of(sector) == section) {
            theta = position(i2, section);
        }
        if (j < k) {
            theta *= p.theta_scale;
        }
        sector += 1u;
        if (sector == sect_dims) {
            sector = 0u;
        }
    }
#else
    theta = rope_theta(theta, k, p.theta_scale);
#endif
#else
    let theta = rope_theta(position(i2, 0u), k, p.theta_scale);
#endif
#if FF
    let extrap = theta / ff[p.ff_start + k];
#else
    let extrap = theta;
#endif
    return rope_yarn(extrap, k, p.freq_scale, p.ext_factor, p.attn_factor, p.corr0, p.corr1, p.mscale_ext);
}

#if SHARED
// A token's angles, computed once by its workgroup and read by all its heads.
var<workgroup> angles: array<vec2<f32>, SHARED_PAIRS>;

fn angle_of(k: u32, i2: u32) -> vec2<f32> {
    return angles[k];
}
#else
fn angle_of(k: u32, i2: u32) -> vec2<f32> {
    return angle(k, i2);
}
#endif

// The row positions of rotated pair k's two elements: adjacent (normal), n_dims apart (vision)
// or n_dims / 2 apart (NeoX and the multi-section modes).
fn pair_elements(k: u32) -> vec2<u32> {
    let p = params;
#if MODE == 0
    let ic = p.n_offs + 2u * k;
    return vec2<u32>(ic, ic + 1u);
#elif MODE == 24
    return vec2<u32>(k, k + p.n_dims);
#else
    let ic = p.n_offs + k;
    return vec2<u32>(ic, ic + p.n_dims / 2u);
#endif
}

// Unit t of row (i1, i2, i3): a rotated pair (two with WORDS), or copied elements.
fn rope_unit(i1: u32, i2: u32, i3: u32, t: u32) {
    let p = params;
    let src_row = p.src_start + i1 * p.src_nb1 + i2 * p.src_nb2 + i3 * p.src_nb3;
    let dst_row = p.dst_start + i1 * p.dst_nb1 + i2 * p.dst_nb2 + i3 * p.dst_nb3;
#if WORDS
    let half_pairs = p.pairs / 2u;
    if (t >= half_pairs) {
        // Two elements outside the rotated dims (n_offs and n_dims even: one side of them).
        let c = 2u * (t - half_pairs);
        let e = select(c + p.n_dims, c, c < p.n_offs);
#if SRC_WORDS
        dst[(dst_row + e * 2u) >> 2u] = load_word((src_row + e * 2u) >> 2u);
#else
        let ab = load_two(src_row, e);
        store_word(dst_row + e * 2u, ab.x, ab.y);
#endif
        return;
    }
    let k = 2u * t;
    let c0 = angle_of(k, i2);
    let c1 = angle_of(k + 1u, i2);
#if MODE == 0
    // Pairs k and k+1 are elements ic..ic+3: two words.
    let ic = p.n_offs + 2u * k;
    let ab0 = load_two(src_row, ic);
    let ab1 = load_two(src_row, ic + 2u);
    let a0 = ab0.x;
    let b0 = ab0.y;
    let a1 = ab1.x;
    let b1 = ab1.y;
    store_word(dst_row + ic * 2u, a0 * c0.x - b0 * c0.y, a0 * c0.y + b0 * c0.x);
    store_word(dst_row + (ic + 2u) * 2u, a1 * c1.x - b1 * c1.y, a1 * c1.y + b1 * c1.x);
#else
    let ip = pair_elements(k);
    let ic = ip.x;
    let partner = ip.y;
    // Pairs k and k+1: the word at ic and the word at partner.
    let a = load_two(src_row, ic);
    let b = load_two(src_row, partner);
    let a0 = a.x;
    let a1 = a.y;
    let b0 = b.x;
    let b1 = b.y;
    store_word(dst_row + ic * 2u, a0 * c0.x - b0 * c0.y, a1 * c1.x - b1 * c1.y);
    store_word(dst_row + partner * 2u, a0 * c0.y + b0 * c0.x, a1 * c1.y + b1 * c1.x);
#endif
#else
    if (t >= p.pairs) {
        // An element outside the rotated dims: copied.
        let c = t - p.pairs;
        let e = select(c + p.n_dims, c, c < p.n_offs);
        store_elem(dst_row + e * p.dst_nb0, load_elem(src_row + e * p.src_nb0));
        return;
    }
    let ip = pair_elements(t);
    let ic = ip.x;
    let partner = ip.y;
    let cs = angle_of(t, i2);
    let x0 = load_elem(src_row + ic * p.src_nb0);
    let x1 = load_elem(src_row + partner * p.src_nb0);
    store_elem(dst_row + ic * p.dst_nb0, x0 * cs.x - x1 * cs.y);
    store_elem(dst_row + partner * p.dst_nb0, x0 * cs.y + x1 * cs.x);
#endif
}

#if SHARED
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let p = params;
    // The workgroup's token (uniform across it, so the return keeps the barrier uniform).
    let token = wid.y * p.row_stride + wid.x;
    if (token >= p.tokens) {
        return;
    }
    let i2 = token % p.ne2;
    let i3 = token / p.ne2;
    for (var k = lid; k < p.pairs; k += WG_SIZE) {
        angles[k] = angle(k, i2);
    }
    workgroupBarrier();
    let units = p.ne1 * p.row_units;
    for (var u = lid; u < units; u += WG_SIZE) {
        rope_unit(u / p.row_units, i2, i3, u % p.row_units);
    }
#if ROWS_OUT
    // The token's row, roped above by this workgroup (its window of dst holds no other
    // token's elements), into the cache row its id names.
    storageBarrier();
#if IDS_I64
    // An i64 id: its low word where the high word is 0, else past every row.
    let id = select(0xffffffffu, ids[p.ids_start + 2u * token], ids[p.ids_start + 2u * token + 1u] == 0u);
#else
    let id = ids[p.ids_start + token];
#endif
    if (id < p.cache_rows) {
        let first = (p.rows_start + token * p.rows_nb1) >> 2u;
        let to = (p.cache_start + id * p.cache_nb1) >> 2u;
#if CACHE_F16
        for (var w = lid; w < p.rows_n / 2u; w += WG_SIZE) {
            let lo = bitcast<f32>(dst[first + 2u * w]);
            let hi = bitcast<f32>(dst[first + 2u * w + 1u]);
            cache[to + w] = f16_bits(lo) | (f16_bits(hi) << 16u);
        }
#else
        for (var e = lid; e < p.rows_n; e += WG_SIZE) {
            cache[to + e] = dst[first + e];
        }
#endif
    }
#endif
}
#else
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = params;
    let u = gid.y * p.row_stride + gid.x;
    if (u >= p.units) {
        return;
    }
    let row = u / p.row_units;
    rope_unit(row % p.ne1, (row / p.ne1) % p.ne2, row / (p.ne1 * p.ne2), u % p.row_units);
}
#endif
