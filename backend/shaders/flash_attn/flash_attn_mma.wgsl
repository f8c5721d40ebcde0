// FLASH_ATTN_EXT with subgroup matrices. A workgroup owns ROWS = RB·SG_M query rows (see
// flash_attn_common.wgsl) and walks the keys of one split in tiles of KV_TILE keys, staged as
// f16 (dequantized) in workgroup memory. NSG = RB·CG subgroups: subgroup s owns row block
// s % RB and, of it, every CG-th block of SG_N keys in S = Q·Kᵀ and every CG-th block of SG_N
// output columns of O. Scores go through workgroup memory for the online softmax
// (f32); P is stored as f16 for P·V; O accumulates in f32 result matrices. O is rescaled only
// when some row's maximum grows by more than params.tau (then P ≤ e^tau fits f16).
//
// All buffers are 16-byte chunks (8 f16) addressed by the new subgroupMatrixLoad/Store forms,
// whose offsets and strides count array elements. Layout (plan/mma.rs, MmaPlan): Q (QSTR chunks a
// row; overlapping the rest when it lives in registers), K (KSTR), V (VSTR; K's buffer when
// KV_ALIAS), P (PSTR; K's buffer when P_ALIAS); scores SSTR vec4<f32> a row.
//
// Matrix types list columns first: left<T, K, M>, right<T, N, K>, result<T, N, M>.
//
// PROBE (measuring only; the results are wrong): 1 keeps the K/V staging (loads, conversion,
// workgroup stores, barriers) and leaves out Q·Kᵀ, the softmax and P·V; 2 keeps those and
// leaves out the staging, so the math runs on workgroup memory that is never refilled.
//
// Bytes touched: q, k, v, mask, sinks and dst (or the split scratch) only as
// flash_attn_common.wgsl states; tested by tests/tests/guards.rs.
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium.subgroup_matrix_uniformity);
diagnostic(off, subgroup_uniformity);

#include "common.wgsl"
#define FA_STAGED
#define K_CHUNKS (HSKP / 8u)
#define V_CHUNKS (HSVP / 8u)
#include "flash_attn_common.wgsl"

alias LeftM = subgroup_matrix_left<f16, SG_K, SG_M>;
alias RightM = subgroup_matrix_right<f16, SG_N, SG_K>;
alias ResM = subgroup_matrix_result<f32, SG_N, SG_M>;

#define HSK8 (HSK / 8)
#define HSV8 (HSV / 8)
#define HSKP8 (HSKP / 8)
#define HSVP8 (HSVP / 8)
// k-steps of Q·Kᵀ
#define KQ (HSKP / SG_K)
// k-steps of P·V
#define KP (KV_TILE / SG_K)
// key blocks of a tile
#define NBT (KV_TILE / SG_N)
// output column blocks
#define OBT (HSVP / SG_N)
// ... per subgroup
#define OBS ((OBT + CG - 1u) / CG)
// vec4<f32> of a result block
#define BLK4 (SG_M * SG_N / 4u)
#define ROUNDS ((OBS + SB - 1u) / SB)
// 8-key chunks of a tile
#define TC (KV_TILE / 8)
// ... per softmax lane
#define CPL ((TC + TPR - 1u) / TPR)
#define SM_PASSES ((ROWS + NT / TPR - 1u) / (NT / TPR))
const LOG2E: f32 = 1.4426950408889634;
const LN2: f32 = 0.6931471805599453;

var<workgroup> smem: array<vec4<u32>, SMEM>;
var<workgroup> sf: array<vec4<f32>, SF>;
var<workgroup> m_sh: array<f32, ROWS>;
var<workgroup> l_sh: array<f32, ROWS>;
var<workgroup> a_sh: array<f32, ROWS>;
var<workgroup> slope_sh: array<f32, ROWS>;
var<workgroup> mrow_sh: array<u32, ROWS>; // byte offsets of the rows' mask rows
var<workgroup> flags: array<u32, 4>;

fn store_k(r: ptr<function, array<vec4<u32>, KC>>, tid: u32) {
#for I_ in 0..KC
    {
        let i = I_##u;
        let e = tid + i * NT;
        if (e < KV_TILE * HSKP8) {
            smem[K_OFF + (e / HSKP8) * KSTR + e % HSKP8] = (*r)[i];
        }
    }
#endfor
}

fn store_v(r: ptr<function, array<vec4<u32>, VC>>, tid: u32) {
#for I_ in 0..VC
    {
        let i = I_##u;
        let e = tid + i * NT;
        if (e < KV_TILE * HSVP8) {
            smem[V_OFF + (e / HSVP8) * VSTR + e % HSVP8] = (*r)[i];
        }
    }
#endfor
}

@compute @workgroup_size(NT)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
    @builtin(subgroup_id) sg_id: u32,
) {
    let w = fa_work(wg);
    if (!w.ok) {
        return;
    }
    let p = params;

    // Q rows as f16 (zeros past the rows and in the padding), scaled; statistics, flags. Scores
    // are in the log2 domain: log2(e) is folded into the scale, or applied after the softcap.
    let soft = p.softcap != 0.0;
    let qscale = select(p.scale * LOG2E, p.scale, soft);
    for (var e = tid; e < ROWS * HSKP8; e += NT) {
        let g = e / HSKP8;
        let c = e % HSKP8;
        var v = vec4<u32>(0u);
        if (g < w.n_rows && c < HSK8) {
            let at = p.q_start + fa_query(w, g) * p.q_nb1 + fa_head(w, g) * p.q_nb2 + w.i3 * p.q_nb3 + c * 8u;
            let a = vec4<f32>(q[at], q[at + 1u], q[at + 2u], q[at + 3u]) * qscale;
            let b = vec4<f32>(q[at + 4u], q[at + 5u], q[at + 6u], q[at + 7u]) * qscale;
            v = vec4<u32>(pack2x16float(a.xy), pack2x16float(a.zw), pack2x16float(b.xy), pack2x16float(b.zw));
        }
        smem[Q_OFF + g * QSTR + c] = v;
    }
    for (var g = tid; g < ROWS; g += NT) {
        m_sh[g] = MASKED;
        l_sh[g] = 0.0;
        a_sh[g] = 1.0;
        let gv = min(g, max(w.n_rows, 1u) - 1u);
        slope_sh[g] = fa_slope(fa_head(w, gv)) * LOG2E;
        mrow_sh[g] = fa_mask_row(fa_query(w, gv), w.i3);
    }
    if (tid < 4u) {
        flags[tid] = 0u;
    }
    workgroupBarrier();

    // Matrix roles (subgroups past NSG, if the subgroups run smaller than planned, only help
    // with staging and the softmax).
    let math = sg_id < NSG;
    let rb = sg_id % RB;
    let cg = sg_id / RB;
#if Q_REGS
    var qf: array<LeftM, KQ>;
    if (math) {
        for (var kk = 0u; kk < KQ; kk += 1u) {
            qf[kk] = subgroupMatrixLoad<LeftM, row_major>(&smem, Q_OFF + rb * SG_M * QSTR + kk * (SG_K / 8u), QSTR);
        }
    }
    workgroupBarrier();
#endif
    var o: array<ResM, OBS>;
#for B_ in 0..OBS
    {
        let b = B_##u;
        o[b] = ResM();
    }
#endfor
    // Softmax: TPR lanes per row, each over 8-key chunks.
    let sm_l = tid % TPR;

    let n_tiles = (w.kv1 - w.kv0 + KV_TILE - 1u) / KV_TILE;
    // K/V of the current tile (or, with PREFETCH, of the next one while this one is computed);
    // the next tile's mask, loaded with this tile's math and checked after it.
    var kreg: array<vec4<u32>, KC>;
    var vreg: array<vec4<u32>, VC>;
    var mscan: array<vec4<u32>, MSC>;
    var live = fa_tile_first(&kreg, &vreg, w, tid);
    for (var t = 0u; t < n_tiles; t += 1u) {
        let j0 = w.kv0 + t * KV_TILE;
        let nk = min(KV_TILE, w.kv1 - j0);
        let n0 = j0 + KV_TILE;
        let nk_next = min(KV_TILE, w.kv1 - min(w.kv1, n0));
        let has_next = t + 1u < n_tiles;
        if (tid == 0u) {
            flags[3] = 0u;
        }
#if PROBE == 2
        workgroupBarrier();
#else
        fa_tile_stage(&kreg, &vreg, &mscan, w, tid, live, j0, nk, has_next, n0, nk_next);
#endif
        if (live) {
#if PROBE != 1
#if HAS_MASK
            // This lane's softmax mask values, loaded before the matrix math.
            var mk: array<vec4<u32>, SM_PASSES * CPL>;
#for PS_ in 0..SM_PASSES
            {
                let ps = PS_##u;
                let gc = min(tid / TPR + ps * (NT / TPR), ROWS - 1u);
                for (var i = 0u; i < CPL; i += 1u) {
                    let kc = min(sm_l + i * TPR, TC - 1u);
                    mk[ps * CPL + i] = fa_mask8(mrow_sh[gc], j0 + kc * 8u, j0 + nk);
                }
            }
#endfor
#endif
            // S = Q·Kᵀ, block by block.
            if (math) {
                for (var nb = cg; nb < NBT; nb += CG) {
                    var s = ResM();
#for KK_ in 0..KQ
                    {
                        let kk = KK_##u;
                        let r = subgroupMatrixLoad<RightM, col_major>(&smem, K_OFF + nb * SG_N * KSTR + kk * (SG_K / 8u),
                            KSTR);
#if Q_REGS
                        let l = qf[kk];
#else
                        let l = subgroupMatrixLoad<LeftM, row_major>(&smem, Q_OFF + rb * SG_M * QSTR + kk * (SG_K / 8u),
                            QSTR);
#endif
                        s = subgroupMatrixMultiplyAccumulate(l, r, s);
                    }
#endfor
                    subgroupMatrixStore<row_major>(&sf, rb * SG_M * SSTR + nb * (SG_N / 4u), s, SSTR);
                }
            }
#endif
            workgroupBarrier();
#if KV_ALIAS
#if PROBE != 2
#if !PREFETCH
            load_v(&vreg, w, tid, j0, nk);
#endif
            store_v(&vreg, tid);
#if PREFETCH
            if (has_next) {
                load_v(&vreg, w, tid, n0, nk_next);
            }
#endif
#endif
#endif

#if PROBE != 1
            // Online softmax, in registers: logits, the row maxima (kept unless they grow by
            // more than tau), P as f16, sums, rescale factors.
#for PS_ in 0..SM_PASSES
            {
                let ps = PS_##u;
                let g = tid / TPR + ps * (NT / TPR);
                let gc = min(g, ROWS - 1u);
                let row_ok = g < w.n_rows;
                var sv: array<vec4<f32>, 2u * CPL>;
                var mx = MASKED;
#for I_ in 0..CPL
                {
                    let i = I_##u;
                    let kc = min(sm_l + i * TPR, TC - 1u);
                    let at = gc * SSTR + 2u * kc;
#if HAS_MASK
                    let mw = mk[ps * CPL + i];
#endif
#for H_ in 0..2u
                    {
                        let h = H_##u;
                        var x = sf[at + h];
#if HAS_MASK
                        let mm = vec4<f32>(unpack2x16float(mw[2u * h]), unpack2x16float(mw[2u * h + 1u]));
#endif
#for E_ in 0..4u
                        {
                            let e = E_##u;
                            let j = kc * 8u + h * 4u + e;
                            var y = MASKED;
                            if (row_ok && j < nk && sm_l + i * TPR < TC) {
                                y = x[e];
                                if (soft) {
                                    y = p.softcap * tanh(clamp(y, -15.0, 15.0)) * LOG2E;
                                }
#if HAS_MASK
                                y += slope_sh[gc] * mm[e];
#endif
                            }
                            x[e] = y;
                        }
#endfor
                        sv[2u * i + h] = x;
                        mx = max(mx, max(max(x.x, x.y), max(x.z, x.w)));
                    }
#endfor
                }
#endfor
                for (var bit = 1u; bit < TPR; bit <<= 1u) {
                    mx = max(mx, subgroupShuffleXor(mx, bit));
                }
                let m_old = m_sh[gc];
                var m_new = m_old;
                if (mx > m_old + p.tau * LOG2E) {
                    m_new = mx;
                }
                var sum = 0.0;
#for I_ in 0..CPL
                {
                    let i = I_##u;
                    let e0 = select(exp2(sv[2u * i] - m_new), vec4<f32>(0.0), sv[2u * i] <= vec4<f32>(MASKED));
                    let e1 = select(exp2(sv[2u * i + 1u] - m_new), vec4<f32>(0.0), sv[2u * i + 1u] <= vec4<f32>(MASKED));
                    sum += (e0.x + e0.y) + (e0.z + e0.w) + (e1.x + e1.y) + (e1.z + e1.w);
                    let kc = sm_l + i * TPR;
                    if (g < ROWS && kc < TC) {
                        smem[P_OFF + g * PSTR + kc] = vec4<u32>(pack2x16float(e0.xy), pack2x16float(e0.zw),
                            pack2x16float(e1.xy), pack2x16float(e1.zw));
                    }
                }
#endfor
                for (var bit = 1u; bit < TPR; bit <<= 1u) {
                    sum += subgroupShuffleXor(sum, bit);
                }
                if (g < ROWS && sm_l == 0u) {
                    let a = exp2(m_old - m_new);
                    let l_old = l_sh[g];
                    a_sh[g] = a;
                    l_sh[g] = l_old * a + sum;
                    m_sh[g] = m_new;
                    if (a != 1.0 && l_old > 0.0) {
                        flags[3] = 1u;
                    }
                }
            }
#endfor
            if (workgroupUniformLoad(&flags[3]) != 0u) {
                rescale(sg_id, tid, math, &o);
            }

            // O += P·V.
            if (math) {
#for KK_ in 0..KP
                {
                    let kk = KK_##u;
                    let l = subgroupMatrixLoad<LeftM, row_major>(&smem, P_OFF + rb * SG_M * PSTR + kk * (SG_K / 8u),
                        PSTR);
#for B_ in 0..OBS
                    {
                        let b = B_##u;
                        let ob = cg + b * CG;
                        if (ob < OBT) {
                            let r = subgroupMatrixLoad<RightM, row_major>(&smem, V_OFF + kk * SG_K * VSTR + ob * (SG_N / 8u),
                                VSTR);
                            o[b] = subgroupMatrixMultiplyAccumulate(l, r, o[b]);
                        }
                    }
#endfor
                }
#endfor
            }
#endif
        }
        live = fa_tile_end(&mscan, tid, t, has_next);
    }

    // O through workgroup memory, SB blocks per subgroup per round, normalized into dst or kept
    // for the reduce.
#for R0_ in 0..ROUNDS
    {
        let r0 = R0_##u;
        if (math) {
            for (var b = 0u; b < SB; b += 1u) {
                if (r0 * SB + b < OBS) {
                    subgroupMatrixStore<row_major>(&sf, (sg_id * SB + b) * BLK4, o[r0 * SB + b], SG_N / 4u);
                }
            }
        }
        workgroupBarrier();
        for (var e = tid; e < NSG * SB * BLK4; e += NT) {
            let s = e / (SB * BLK4);
            let b = (e / BLK4) % SB;
            let el = e % BLK4;
            let bi = r0 * SB + b;
            let ob = s / RB + bi * CG;
            let g = (s % RB) * SG_M + el / (SG_N / 4u);
            let d = ob * SG_N + (el % (SG_N / 4u)) * 4u;
            if (bi < OBS && ob < OBT && g < w.n_rows && d < HSV) {
                fa_store(w, g, d, sf[e], m_sh[g] * LN2, l_sh[g]);
            }
        }
        workgroupBarrier();
    }
#endfor
    for (var g = tid; g < w.n_rows; g += NT) {
        fa_store_stats(w, g, m_sh[g] * LN2, l_sh[g]);
    }
}

// O rows times their rescale factors, through workgroup memory.
fn rescale(sg_id: u32, tid: u32, math: bool, o: ptr<function, array<ResM, OBS>>) {
#for R0_ in 0..ROUNDS
    {
        let r0 = R0_##u;
        if (math) {
            for (var b = 0u; b < SB; b += 1u) {
                if (r0 * SB + b < OBS) {
                    subgroupMatrixStore<row_major>(&sf, (sg_id * SB + b) * BLK4, (*o)[r0 * SB + b], SG_N / 4u);
                }
            }
        }
        workgroupBarrier();
        for (var e = tid; e < NSG * SB * BLK4; e += NT) {
            let s = e / (SB * BLK4);
            let g = (s % RB) * SG_M + (e % BLK4) / (SG_N / 4u);
            sf[e] *= a_sh[g];
        }
        workgroupBarrier();
        if (math) {
#for B_ in 0..SB
            {
                let b = B_##u;
                if (r0 * SB + b < OBS) {
                    (*o)[r0 * SB + b] = subgroupMatrixLoad<ResM, row_major>(&sf, (sg_id * SB + b) * BLK4, SG_N / 4u);
                }
            }
#endfor
        }
        workgroupBarrier();
    }
#endfor
}
