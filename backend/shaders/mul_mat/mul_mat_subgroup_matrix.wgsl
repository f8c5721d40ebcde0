// MUL_MAT on subgroup matrices (tensor cores): a workgroup of SG_COUNT_M x SG_COUNT_N
// subgroups computes a TILE_M x TILE_N tile of dst; each subgroup FRAG_M x FRAG_N result
// matrices of the config's SG_M x SG_N. Per K step of TK elements, the tiles of a (any type,
// dequantized) and b (f32 or f16) are converted to f16 in workgroup memory, row-major with k
// innermost (a as left matrices, b as column-major right matrices), padded by PAD halves per
// row. With STAGES = 2 the next step is fetched into registers (as packed halves) while this
// one computes, then stored into the other buffer: one barrier per step. Results accumulate in
// AccT (f32 where the adapter has an f16 -> f32 config). Full tiles with f32 results are stored
// straight to dst; the others go through a small per-subgroup buffer and a bounds-checked copy.
//
// Every loop over registers (accumulators, fragments, prefetched units) is unrolled with #for:
// drivers leave such loops rolled and then keep the arrays in memory, which measured 4x slower.
//
// Staging units: 8 elements of a (a unit of every quantized block) or of b, as 16 bytes of f16.
// Consecutive invocations take consecutive units of a row, then the next row.
//
// The workgroup has WG_SIZE = SG_COUNT_M * SG_COUNT_N * (the largest subgroup size)
// invocations (Dawn wants a multiple of it). Where subgroups come out smaller, the extra ones
// only help staging.
//
// Defines: the operand defines of mul_mat_operands.wgsl; SG_M, SG_N, SG_K (the config),
// SG_COUNT_M, SG_COUNT_N, FRAG_M, FRAG_N, TK (a multiple of 8 and of SG_K), PAD (halves, a
// multiple of 8), STAGES, PREFETCH (with one stage: the next step fetched into registers before
// the multiplies, stored after a barrier), DEEP_PREFETCH (with PREFETCH: two register sets,
// two steps' loads in flight), PROBE_STAGING / PROBE_MMA (measuring only: the
// staging without the multiplies, or the multiplies on never-refilled workgroup memory),
// RAW_UNITS (f32 units held as f32 until stored, so their loads are waited on after the
// multiplies),
// WG_SIZE, SCRATCH_SGS (result matrices the edge scratch holds), ACC_F32, A_VEC4 (a's rows are
// 16-byte units, also bound as `a4`), DIRECT_STORE (dst's binding holds at least one result matrix, as Dawn
// requires of a subgroupMatrixStore target; smaller dsts have no whole tile anyway).
//
// Bytes touched: a, b and dst only as mul_mat_operands.wgsl states (a's rows past m, b's
// columns past n and elements past k are not read); tested by tests/tests/guards.rs.
diagnostic(off, chromium.subgroup_matrix_uniformity);
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;

#define SG_M 8u
#define SG_N 8u
#define SG_K 8u
#define SG_COUNT_M 2u
#define SG_COUNT_N 4u
#define FRAG_M 4u
#define FRAG_N 2u
#define TK 32u
#define PAD 8u
#define STAGES 2u
#define WG_SIZE 64u
#define SCRATCH_SGS 8u

#include "mul_mat_operands.wgsl"

#ifdef ACC_F32
alias AccT = f32;
#else
alias AccT = f16;
#endif

#define TILE_M (SG_COUNT_M * FRAG_M * SG_M)
#define TILE_N (SG_COUNT_N * FRAG_N * SG_N)
#define A_UNITS_PER_ROW (TK / 8u)
#define B_UNITS_PER_ROW (TK / 8u)
#define A_UNITS (TILE_M * A_UNITS_PER_ROW)
#define B_UNITS (TILE_N * B_UNITS_PER_ROW)
#define A_PER_THREAD ((A_UNITS + WG_SIZE - 1u) / WG_SIZE)
#define B_PER_THREAD ((B_UNITS + WG_SIZE - 1u) / WG_SIZE)

const SG_COUNT: u32 = SG_COUNT_M * SG_COUNT_N;
// Workgroup memory is in 16-byte chunks of 8 halves (one staging unit: a single store), read
// by the subgroupMatrixLoad forms whose offsets and strides count chunks.
const LDS: u32 = (TK + PAD) / 8u;
const A_STAGE: u32 = TILE_M * LDS;
const B_STAGE: u32 = TILE_N * LDS;
const FRAG_ELEMS: u32 = SG_M * SG_N;

alias Left = subgroup_matrix_left<f16, SG_K, SG_M>;
alias Right = subgroup_matrix_right<f16, SG_N, SG_K>;
alias Result = subgroup_matrix_result<AccT, SG_N, SG_M>;

var<workgroup> sa: array<vec4<u32>, STAGES * A_STAGE>;
var<workgroup> sb: array<vec4<u32>, STAGES * B_STAGE>;
var<workgroup> scratch: array<AccT, SCRATCH_SGS * FRAG_ELEMS>;

// A staging unit as fetched. With RAW_UNITS, f32 elements stay f32 in registers until they are
// stored, so a prefetched unit's loads are waited on at the store, after the step's multiplies,
// not at the fetch; otherwise (and for every other type) a unit is packed halves when fetched.
struct F32x8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

fn pack_f32x8(v: F32x8) -> vec4<u32> {
    return vec4<u32>(pack2x16float(v.lo.xy), pack2x16float(v.lo.zw), pack2x16float(v.hi.xy), pack2x16float(v.hi.zw));
}

#if defined(RAW_UNITS) && A_TYPE == TYPE_F32
alias AUnit = F32x8;
fn a_unit(lo: vec4<f32>, hi: vec4<f32>) -> AUnit {
    return F32x8(lo, hi);
}
fn a_packed(v: AUnit) -> vec4<u32> {
    return pack_f32x8(v);
}
#else
alias AUnit = vec4<u32>;
fn a_unit(lo: vec4<f32>, hi: vec4<f32>) -> AUnit {
    return pack_f32x8(F32x8(lo, hi));
}
fn a_packed(v: AUnit) -> vec4<u32> {
    return v;
}
#endif

#if defined(RAW_UNITS) && !defined(B_F16)
alias BUnit = F32x8;
fn b_unit(lo: vec4<f32>, hi: vec4<f32>) -> BUnit {
    return F32x8(lo, hi);
}
fn b_packed(v: BUnit) -> vec4<u32> {
    return pack_f32x8(v);
}
#else
alias BUnit = vec4<u32>;
fn b_unit(lo: vec4<f32>, hi: vec4<f32>) -> BUnit {
    return pack_f32x8(F32x8(lo, hi));
}
fn b_packed(v: BUnit) -> vec4<u32> {
    return v;
}
#endif

// Staging unit u of a for the K step at k0: 8 elements, zero past m and k.
fn fetch_a(tile: Tile, m0: u32, k0: u32, u: u32) -> AUnit {
    let p = params;
    let gm = m0 + u / A_UNITS_PER_ROW;
    let e = k0 + (u % A_UNITS_PER_ROW) * 8u;
    if (u >= A_UNITS || gm >= p.m || e >= p.k) {
        return AUnit();
    }
    let row = tile.a_base + gm * p.a_nb1;
    if (e + 8u > p.k) {
        // The tail of a float row (quantized rows hold whole blocks of 8 or more).
        var lo = vec4<f32>();
        var hi = vec4<f32>();
#for I in 0..4
        if (e + I##u < p.k) {
            lo[I] = a_elem(row, e + I##u);
        }
        if (e + 4u + I##u < p.k) {
            hi[I] = a_elem(row, e + 4u + I##u);
        }
#endfor
        return a_unit(lo, hi);
    }
#if defined(A_VEC4) && A_TYPE == TYPE_F16
    return a4[(row >> 4u) + (e >> 3u)];
#elif defined(A_VEC4) && A_TYPE == TYPE_BF16
    let w = a4[(row >> 4u) + (e >> 3u)];
    return vec4<u32>(pack2x16float(a_word2(w.x)), pack2x16float(a_word2(w.y)),
                     pack2x16float(a_word2(w.z)), pack2x16float(a_word2(w.w)));
#elif defined(A_VEC4) && A_TYPE == TYPE_F32
    let i = (row >> 4u) + (e >> 2u);
    return a_unit(bitcast<vec4<f32>>(a4[i]), bitcast<vec4<f32>>(a4[i + 1u]));
#elif A_TYPE == TYPE_F16 && defined(A_ALIGN4)
    let i = (row >> 2u) + (e >> 1u);
    return vec4<u32>(a[i], a[i + 1u], a[i + 2u], a[i + 3u]);
#else
    let v = a_unit8(row, e);
    return a_unit(v[0], v[1]);
#endif
}

// Staging unit u of b: 8 elements, zero past n and k.
fn fetch_b(tile: Tile, n0: u32, k0: u32, u: u32) -> BUnit {
    let p = params;
    let gn = n0 + u / B_UNITS_PER_ROW;
    let e = k0 + (u % B_UNITS_PER_ROW) * 8u;
    if (u >= B_UNITS || gn >= p.n || e >= p.k) {
        return BUnit();
    }
    let row = tile.b_base + gn * p.b_nb1;
    if (e + 8u > p.k) {
        var lo = vec4<f32>();
        var hi = vec4<f32>();
#for I in 0..4
        if (e + I##u < p.k) {
            lo[I] = b_elem(row, e + I##u);
        }
        if (e + 4u + I##u < p.k) {
            hi[I] = b_elem(row, e + 4u + I##u);
        }
#endfor
        return b_unit(lo, hi);
    }
#if defined(B_VEC4) && defined(B_F16)
    return b[(row >> 4u) + (e >> 3u)];
#elif defined(B_CONTIG) && defined(B_F16) && defined(B_ALIGN4)
    let i = (row >> 2u) + (e >> 1u);
    return vec4<u32>(b_word(i), b_word(i + 1u), b_word(i + 2u), b_word(i + 3u));
#else
    return b_unit(b_vec4(row, e), b_vec4(row, e + 4u));
#endif
}

fn put_a(buf: u32, u: u32, v: AUnit) {
#if A_UNITS % WG_SIZE != 0
    if (u >= A_UNITS) {
        return;
    }
#endif
    sa[buf * A_STAGE + (u / A_UNITS_PER_ROW) * LDS + u % A_UNITS_PER_ROW] = a_packed(v);
}

fn put_b(buf: u32, u: u32, v: BUnit) {
#if B_UNITS % WG_SIZE != 0
    if (u >= B_UNITS) {
        return;
    }
#endif
    sb[buf * B_STAGE + (u / B_UNITS_PER_ROW) * LDS + u % B_UNITS_PER_ROW] = b_packed(v);
}

// Copies the scratch matrix at `slot` to dst at (row0, col0), inside m x n only.
fn copy_out(dst_base: u32, slot: u32, lane: u32, sg_size: u32, row0: u32, col0: u32) {
    let p = params;
    for (var i = lane; i < FRAG_ELEMS; i += sg_size) {
        let row = row0 + i % SG_M;
        let col = col0 + i / SG_M;
        if (row < p.m && col < p.n) {
            dst[dst_base + col * p.m + row] = f32(scratch[slot + i]);
        }
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_invocation_id) sg_lane: u32,
        @builtin(subgroup_size) sg_size: u32) {
    let tile = tile_of(wid);
    if (!tile.valid) {
        return;
    }
    let p = params;
    let m0 = tile.tm * TILE_M;
    let n0 = tile.tn * TILE_N;
    // Subgroups are taken to be consecutive runs of invocations, as on every Vulkan driver.
    let sg = lid / sg_size;
    let computes = sg < SG_COUNT;
    let sg_m = sg % SG_COUNT_M;
    let sg_n = (sg / SG_COUNT_M) % SG_COUNT_N;
#for I in 0..FRAG_M
#for J in 0..FRAG_N
    var acc_##I##_##J: Result;
#endfor
#endfor

    let steps = (p.k + TK - 1u) / TK;
#for T in 0..A_PER_THREAD
    put_a(0u, lid + T##u * WG_SIZE, fetch_a(tile, m0, 0u, lid + T##u * WG_SIZE));
#endfor
#for T in 0..B_PER_THREAD
    put_b(0u, lid + T##u * WG_SIZE, fetch_b(tile, n0, 0u, lid + T##u * WG_SIZE));
#endfor
    workgroupBarrier();
#ifdef DEEP_PREFETCH
    // Two register sets, each a step ahead of the other: set 1 holds step 1 now; the loop runs
    // two steps (phases) an iteration, phase PH fetching step s + 2 into set PH while it
    // multiplies step s, then storing the other set (step s + 1) after the barrier.
#for S in 0..2
#for T in 0..A_PER_THREAD
    var ra_##S##_##T = AUnit();
#endfor
#for T in 0..B_PER_THREAD
    var rb_##S##_##T = BUnit();
#endfor
#endfor
    if (steps > 1u) {
#for T in 0..A_PER_THREAD
        ra_1_##T = fetch_a(tile, m0, TK, lid + T##u * WG_SIZE);
#endfor
#for T in 0..B_PER_THREAD
        rb_1_##T = fetch_b(tile, n0, TK, lid + T##u * WG_SIZE);
#endfor
    }
#define PHASES 2
#define AHEAD 2u
#else
#define PHASES 1
#define AHEAD 1u
#endif
    for (var s0 = 0u; s0 < steps; s0 += AHEAD) {
#for PH in 0..PHASES
    {
        let s = s0 + PH##u;
#if PHASES == 2
        if (s >= steps) {
            break;
        }
#endif
        let cur = select(0u, s & 1u, STAGES == 2u);
        let more = s + 1u < steps;
        let k_next = (s + AHEAD) * TK;
#if STAGES == 2 || defined(PREFETCH)
#if PHASES == 1
#for T in 0..A_PER_THREAD
        var ra_0_##T = AUnit();
#endfor
#for T in 0..B_PER_THREAD
        var rb_0_##T = BUnit();
#endfor
#endif
        if (s + AHEAD < steps) {
#for T in 0..A_PER_THREAD
            ra_##PH##_##T = fetch_a(tile, m0, k_next, lid + T##u * WG_SIZE);
#endfor
#for T in 0..B_PER_THREAD
            rb_##PH##_##T = fetch_b(tile, n0, k_next, lid + T##u * WG_SIZE);
#endfor
        }
#endif
#ifndef PROBE_STAGING
        if (computes) {
            let a_off = cur * A_STAGE + sg_m * FRAG_M * SG_M * LDS;
            let b_off = cur * B_STAGE + sg_n * FRAG_N * SG_N * LDS;
#for KK in 0..TK / SG_K
            {
#for I in 0..FRAG_M
                let left_##I = subgroupMatrixLoad<Left, row_major>(&sa, a_off + I##u * SG_M * LDS + KK##u * (SG_K / 8u), LDS);
#endfor
#for J in 0..FRAG_N
                {
                    let right = subgroupMatrixLoad<Right, col_major>(&sb, b_off + J##u * SG_N * LDS + KK##u * (SG_K / 8u), LDS);
#for I in 0..FRAG_M
                    acc_##I##_##J = subgroupMatrixMultiplyAccumulate(left_##I, right, acc_##I##_##J);
#endfor
                }
#endfor
            }
#endfor
        }
#endif
#if STAGES == 2 || defined(PREFETCH)
#if STAGES == 1
        // One buffer: every subgroup is done reading it before it is refilled.
        workgroupBarrier();
#endif
#ifndef PROBE_MMA
        if (more) {
            // With two stages the other buffer was last read before the previous step's barrier.
            // The step stored is s + 1: with two sets, the one the other phase fetched.
#if PHASES == 2 && PH == 0
#for T in 0..A_PER_THREAD
            put_a(0u, lid + T##u * WG_SIZE, ra_1_##T);
#endfor
#for T in 0..B_PER_THREAD
            put_b(0u, lid + T##u * WG_SIZE, rb_1_##T);
#endfor
#else
#for T in 0..A_PER_THREAD
            put_a(select(0u, cur ^ 1u, STAGES == 2u), lid + T##u * WG_SIZE, ra_0_##T);
#endfor
#for T in 0..B_PER_THREAD
            put_b(select(0u, cur ^ 1u, STAGES == 2u), lid + T##u * WG_SIZE, rb_0_##T);
#endfor
#endif
        }
#endif
        workgroupBarrier();
#else
        workgroupBarrier();
#ifndef PROBE_MMA
        if (more) {
#for T in 0..A_PER_THREAD
            put_a(0u, lid + T##u * WG_SIZE, fetch_a(tile, m0, k_next, lid + T##u * WG_SIZE));
#endfor
#for T in 0..B_PER_THREAD
            put_b(0u, lid + T##u * WG_SIZE, fetch_b(tile, n0, k_next, lid + T##u * WG_SIZE));
#endfor
        }
#endif
        workgroupBarrier();
#endif
    }
#endfor
    }

    let m_sub = m0 + sg_m * FRAG_M * SG_M;
    let n_sub = n0 + sg_n * FRAG_N * SG_N;
#if defined(ACC_F32) && defined(DIRECT_STORE)
    if (m0 + TILE_M <= p.m && n0 + TILE_N <= p.n) {
        // A whole tile: straight to dst, column-major (dst is m-fastest).
        if (computes) {
#for I in 0..FRAG_M
#for J in 0..FRAG_N
            subgroupMatrixStore<col_major>(&dst, tile.dst_base + (n_sub + J##u * SG_N) * p.m + m_sub + I##u * SG_M,
                                           acc_##I##_##J, p.m);
#endfor
#endfor
        }
        return;
    }
#endif
    // An edge tile: fragments wholly inside m x n go straight to dst (as above); the others
    // through scratch, which holds SCRATCH_SGS matrices, so subgroups take turns in rounds.
    let rounds = (SG_COUNT + SCRATCH_SGS - 1u) / SCRATCH_SGS;
    for (var round = 0u; round < rounds; round += 1u) {
        let mine = computes && sg / SCRATCH_SGS == round;
        let slot = (sg % SCRATCH_SGS) * FRAG_ELEMS;
#for I in 0..FRAG_M
#for J in 0..FRAG_N
        {
            let row0 = m_sub + I##u * SG_M;
            let col0 = n_sub + J##u * SG_N;
            let inside = row0 + SG_M <= p.m && col0 + SG_N <= p.n;
#if defined(ACC_F32) && defined(DIRECT_STORE)
            if (mine && inside) {
                subgroupMatrixStore<col_major>(&dst, tile.dst_base + col0 * p.m + row0, acc_##I##_##J, p.m);
            }
            let via_scratch = mine && !inside;
#else
            let via_scratch = mine;
#endif
            if (via_scratch) {
                subgroupMatrixStore<col_major>(&scratch, slot, acc_##I##_##J, SG_M);
            }
            workgroupBarrier();
            if (via_scratch) {
                copy_out(tile.dst_base, slot, sg_lane, sg_size, row0, col0);
            }
            workgroupBarrier();
        }
#endfor
#endfor
    }
}
