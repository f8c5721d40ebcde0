// MUL_MAT, register-tiled, for devices without subgroup matrices: a workgroup of WG_M x WG_N
// threads computes a TM x TN tile of dst (TM = WG_M * THREAD_M, TN = WG_N * THREAD_N), each
// thread THREAD_M x THREAD_N outputs strided by WG_M and WG_N (so that neighbouring threads
// read neighbouring workgroup words). Per K step of TK elements the tiles of a (dequantized) and
// b are staged in f32 in workgroup memory, k-major; two buffers, so the next step's reads are in
// flight while this one computes, with one barrier per step. Products and sums in f32.
//
// Defines: the operand defines of mul_mat_operands.wgsl; WG_M, WG_N, THREAD_M, THREAD_N, TK, PAD.
//
// Bytes touched: a, b and dst only as mul_mat_operands.wgsl states (a's rows past m, b's
// columns past n and elements past k are not read); tested by tests/tests/guards.rs.

#define WG_M 16u
#define WG_N 16u
#define THREAD_M 4u
#define THREAD_N 4u
#define TK 16u
#define PAD 4u

#include "mul_mat_operands.wgsl"

const WG_SIZE: u32 = WG_M * WG_N;
const TM: u32 = WG_M * THREAD_M;
const TN: u32 = WG_N * THREAD_N;
const LDA: u32 = TM + PAD;
const LDB: u32 = TN + PAD;
const A_STAGE: u32 = TK * LDA;
const B_STAGE: u32 = TK * LDB;

var<workgroup> sa: array<f32, 2u * A_STAGE>;
var<workgroup> sb: array<f32, 2u * B_STAGE>;

fn store_a(buf: u32, row: u32, kk: u32, v: f32) {
    sa[buf * A_STAGE + kk * LDA + row] = v;
}

fn store_b(buf: u32, col: u32, kk: u32, v: f32) {
    sb[buf * B_STAGE + kk * LDB + col] = v;
}

#include "mul_mat_stage.wgsl"

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let tile = tile_of(wid);
    if (!tile.valid) {
        return;
    }
    let p = params;
    let m0 = tile.tm * TM;
    let n0 = tile.tn * TN;
    let tx = lid % WG_M;
    let ty = lid / WG_M;
    var acc: array<f32, THREAD_M * THREAD_N>;

    let steps = (p.k + TK - 1u) / TK;
    put_a(fetch_a(tile, m0, 0u, lid), lid, 0u);
    put_b(fetch_b(tile, n0, 0u, lid), lid, 0u);
    workgroupBarrier();
    for (var s = 0u; s < steps; s += 1u) {
        let cur = s & 1u;
        let more = s + 1u < steps;
        var fa: AFetch;
        var fb: BFetch;
        if (more) {
            fa = fetch_a(tile, m0, (s + 1u) * TK, lid);
            fb = fetch_b(tile, n0, (s + 1u) * TK, lid);
        }
        for (var kk = 0u; kk < TK; kk += 1u) {
            var av: array<f32, THREAD_M>;
            var bv: array<f32, THREAD_N>;
            for (var i = 0u; i < THREAD_M; i += 1u) {
                av[i] = sa[cur * A_STAGE + kk * LDA + tx + WG_M * i];
            }
            for (var j = 0u; j < THREAD_N; j += 1u) {
                bv[j] = sb[cur * B_STAGE + kk * LDB + ty + WG_N * j];
            }
            for (var i = 0u; i < THREAD_M; i += 1u) {
                for (var j = 0u; j < THREAD_N; j += 1u) {
                    acc[i * THREAD_N + j] = fma(av[i], bv[j], acc[i * THREAD_N + j]);
                }
            }
        }
        if (more) {
            // The other buffer was last read before the previous step's barrier.
            put_a(fa, lid, cur ^ 1u);
            put_b(fb, lid, cur ^ 1u);
        }
        workgroupBarrier();
    }

    for (var i = 0u; i < THREAD_M; i += 1u) {
        let row = m0 + tx + WG_M * i;
        for (var j = 0u; j < THREAD_N; j += 1u) {
            let col = n0 + ty + WG_N * j;
            if (row < p.m && col < p.n) {
                dst[tile.dst_base + col * p.m + row] = acc[i * THREAD_N + j];
            }
        }
    }
}
