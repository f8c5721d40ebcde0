// MUL_MAT on subgroup matrices (tensor cores): a workgroup of SG_COUNT_M x SG_COUNT_N
// subgroups computes a TM x TN tile of dst; each subgroup FRAG_M x FRAG_N result matrices of
// the config's SG_M x SG_N. Per K step of TK elements, the tiles of a (any type, dequantized)
// and b (f32 or f16) are converted to f16 in workgroup memory, row-major with k innermost (a as
// left matrices, b as column-major right matrices), padded by PAD halves per row. With STAGES
// = 2 the next step is fetched into registers while this one computes, then stored into the
// other buffer: one barrier per step. Results accumulate in ACC_T (f32 where the adapter has
// an f16 -> f32 config). Full tiles with f32 results are stored straight to dst; the others go
// through a small per-subgroup buffer and a bounds-checked copy.
//
// The workgroup has WG_SIZE = SG_COUNT_M * SG_COUNT_N * (the largest subgroup size)
// invocations (Dawn wants a multiple of it). Where subgroups come out smaller, the extra ones
// only help staging.
//
// Defines: the operand defines of mul_mat_operands.wgsl; SG_M, SG_N, SG_K (the config),
// SG_COUNT_M, SG_COUNT_N, FRAG_M, FRAG_N, TK, PAD, STAGES, WG_SIZE, ACC_F32, DIRECT_STORE (dst's
// binding holds at least one result matrix, as Dawn requires of a subgroupMatrixStore target;
// smaller dsts have no whole tile anyway).
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

#include "mul_mat_operands.wgsl"

#ifdef ACC_F32
alias AccT = f32;
#else
alias AccT = f16;
#endif

const SG_COUNT: u32 = SG_COUNT_M * SG_COUNT_N;
const TM: u32 = SG_COUNT_M * FRAG_M * SG_M;
const TN: u32 = SG_COUNT_N * FRAG_N * SG_N;
const LDS: u32 = TK + PAD;
const A_STAGE: u32 = TM * LDS;
const B_STAGE: u32 = TN * LDS;
const FRAG_ELEMS: u32 = SG_M * SG_N;

alias Left = subgroup_matrix_left<f16, SG_K, SG_M>;
alias Right = subgroup_matrix_right<f16, SG_N, SG_K>;
alias Result = subgroup_matrix_result<AccT, SG_N, SG_M>;

var<workgroup> sa: array<f16, STAGES * A_STAGE>;
var<workgroup> sb: array<f16, STAGES * B_STAGE>;
var<workgroup> scratch: array<AccT, SG_COUNT * FRAG_ELEMS>;

fn store_a(buf: u32, row: u32, kk: u32, v: f32) {
    sa[buf * A_STAGE + row * LDS + kk] = f16(v);
}

fn store_b(buf: u32, col: u32, kk: u32, v: f32) {
    sb[buf * B_STAGE + col * LDS + kk] = f16(v);
}

#include "mul_mat_stage.wgsl"

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
    let m0 = tile.tm * TM;
    let n0 = tile.tn * TN;
    // Subgroups are taken to be consecutive runs of invocations, as on every Vulkan driver.
    let sg = lid / sg_size;
    let computes = sg < SG_COUNT;
    let sg_m = sg % SG_COUNT_M;
    let sg_n = (sg / SG_COUNT_M) % SG_COUNT_N;
    var acc: array<Result, FRAG_M * FRAG_N>;

    let steps = (p.k + TK - 1u) / TK;
    put_a(fetch_a(tile, m0, 0u, lid), lid, 0u);
    put_b(fetch_b(tile, n0, 0u, lid), lid, 0u);
    workgroupBarrier();
    for (var s = 0u; s < steps; s += 1u) {
        let cur = select(0u, s & 1u, STAGES == 2u);
        let more = s + 1u < steps;
#if STAGES == 2
        var fa: AFetch;
        var fb: BFetch;
        if (more) {
#ifdef A_FLOAT
            fa = fetch_a(tile, m0, (s + 1u) * TK, lid);
#endif
            fb = fetch_b(tile, n0, (s + 1u) * TK, lid);
        }
#endif
        if (computes) {
            let a_off = cur * A_STAGE + sg_m * FRAG_M * SG_M * LDS;
            let b_off = cur * B_STAGE + sg_n * FRAG_N * SG_N * LDS;
            for (var kk = 0u; kk < TK; kk += SG_K) {
                var left: array<Left, FRAG_M>;
                for (var i = 0u; i < FRAG_M; i += 1u) {
                    left[i] = subgroupMatrixLoad<Left>(&sa, a_off + i * SG_M * LDS + kk, false, LDS);
                }
                for (var j = 0u; j < FRAG_N; j += 1u) {
                    let right = subgroupMatrixLoad<Right>(&sb, b_off + j * SG_N * LDS + kk, true, LDS);
                    for (var i = 0u; i < FRAG_M; i += 1u) {
                        acc[i * FRAG_N + j] = subgroupMatrixMultiplyAccumulate(left[i], right, acc[i * FRAG_N + j]);
                    }
                }
            }
        }
#if STAGES == 2
        if (more) {
#ifndef A_FLOAT
            fa = fetch_a(tile, m0, (s + 1u) * TK, lid);
#endif
            // The other buffer was last read before the previous step's barrier.
            put_a(fa, lid, cur ^ 1u);
            put_b(fb, lid, cur ^ 1u);
        }
        workgroupBarrier();
#else
        workgroupBarrier();
        if (more) {
            put_a(fetch_a(tile, m0, (s + 1u) * TK, lid), lid, 0u);
            put_b(fetch_b(tile, n0, (s + 1u) * TK, lid), lid, 0u);
        }
        workgroupBarrier();
#endif
    }

    let m_sub = m0 + sg_m * FRAG_M * SG_M;
    let n_sub = n0 + sg_n * FRAG_N * SG_N;
#if defined(ACC_F32) && defined(DIRECT_STORE)
    if (m0 + TM <= p.m && n0 + TN <= p.n) {
        // A whole tile: straight to dst, column-major (dst is m-fastest).
        if (computes) {
            for (var i = 0u; i < FRAG_M; i += 1u) {
                for (var j = 0u; j < FRAG_N; j += 1u) {
                    let at = tile.dst_base + (n_sub + j * SG_N) * p.m + m_sub + i * SG_M;
                    subgroupMatrixStore(&dst, at, acc[i * FRAG_N + j], true, p.m);
                }
            }
        }
        return;
    }
#endif
    // An edge tile: each result through this subgroup's scratch, copied with bounds checks.
    for (var f = 0u; f < FRAG_M * FRAG_N; f += 1u) {
        if (computes) {
            subgroupMatrixStore(&scratch, sg * FRAG_ELEMS, acc[f], true, SG_M);
        }
        workgroupBarrier();
        if (computes) {
            let row0 = m_sub + (f / FRAG_N) * SG_M;
            let col0 = n_sub + (f % FRAG_N) * SG_N;
            for (var i = sg_lane; i < FRAG_ELEMS; i += sg_size) {
                let row = row0 + i % SG_M;
                let col = col0 + i / SG_M;
                if (row < p.m && col < p.n) {
                    dst[tile.dst_base + col * p.m + row] = f32(scratch[sg * FRAG_ELEMS + i]);
                }
            }
        }
        workgroupBarrier();
    }
}
