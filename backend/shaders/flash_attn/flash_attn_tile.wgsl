// FLASH_ATTN_EXT without subgroup matrices: ROWS query rows per workgroup (the query heads of
// one KV head times some queries) walk the keys of one split in tiles of KV_TILE keys staged as
// f16 in workgroup memory, so every K/V byte is read once per workgroup. Dot products and P·V
// are register-tiled over workgroup memory in f32, with an online softmax per row. For decode
// this is the split-KV kernel: flash_attn_reduce.wgsl combines the splits.
//
// Host defines (see plan/tile.rs, TilePlan): NT, ROWS, KV_TILE, HSK, HSV, DS, GQ, RQ, LV, CH, RO, RGN,
// KS, TPR, KV_ALIAS, KSTR, VSTR, QW, plus those of flash_attn_common.wgsl.
//
// Bytes touched: q, k, v, mask, sinks and dst (or the split scratch) only as
// flash_attn_common.wgsl states; tested by tests/tests/guards.rs.
enable subgroups;
diagnostic(off, subgroup_uniformity);

#include "common.wgsl"
#define FA_STAGED
#define K_CHUNKS (HSK / 8u)
#define V_CHUNKS (HSV / 8u)
#include "flash_attn_common.wgsl"

const HSK8: u32 = HSK / 8;
const HSV8: u32 = HSV / 8;
// Softmax keys per lane.
#define SPL (KV_TILE / TPR)
const QW4: u32 = QW / 4;
#define SM_PASSES ((ROWS + NT / TPR - 1u) / (NT / TPR))

// Q (f32), later the final output rows.
var<workgroup> q_sh: array<vec4<f32>, ROWS * QW4>;
#if KV_ALIAS
var<workgroup> k_sh: array<vec4<u32>, KV_TILE * max(KSTR, VSTR)>;
#define V_SH k_sh
#else
var<workgroup> k_sh: array<vec4<u32>, KV_TILE * KSTR>;
var<workgroup> v_sh: array<vec4<u32>, KV_TILE * VSTR>;
#define V_SH v_sh
#endif
// Scores, then softmax weights.
var<workgroup> s_sh: array<f32, ROWS * KV_TILE>;
var<workgroup> m_sh: array<f32, ROWS>;
var<workgroup> l_sh: array<f32, ROWS>;
var<workgroup> a_sh: array<f32, ROWS>;
var<workgroup> slope_sh: array<f32, ROWS>;
var<workgroup> mrow_sh: array<u32, ROWS>; // byte offsets of the rows' mask rows
var<workgroup> flags: array<u32, 3>;

fn unpack8(c: vec4<u32>) -> array<vec4<f32>, 2> {
    return array<vec4<f32>, 2>(vec4<f32>(unpack2x16float(c.x), unpack2x16float(c.y)),
        vec4<f32>(unpack2x16float(c.z), unpack2x16float(c.w)));
}

fn store_k(r: ptr<function, array<vec4<u32>, KC>>, tid: u32) {
#for I_ in 0..KC
    {
        let i = I_##u;
        let e = tid + i * NT;
        if (e < KV_TILE * HSK8) {
            k_sh[(e / HSK8) * KSTR + e % HSK8] = (*r)[i];
        }
    }
#endfor
}

fn store_v(r: ptr<function, array<vec4<u32>, VC>>, tid: u32) {
#for I_ in 0..VC
    {
        let i = I_##u;
        let e = tid + i * NT;
        if (e < KV_TILE * HSV8) {
            V_SH[(e / HSV8) * VSTR + e % HSV8] = (*r)[i];
        }
    }
#endfor
}

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let w = fa_work(wg);
    if (!w.ok) {
        return;
    }
    let p = params;

    // Q rows (zeros past the end), running maxima, sums and slopes.
    for (var e = tid; e < ROWS * (HSK / 4u); e += NT) {
        let g = e / (HSK / 4u);
        let c = e % (HSK / 4u);
        var v = vec4<f32>(0.0);
        if (g < w.n_rows) {
            let at = p.q_start + fa_query(w, g) * p.q_nb1 + fa_head(w, g) * p.q_nb2 + w.i3 * p.q_nb3 + c * 4u;
            v = vec4<f32>(q[at], q[at + 1u], q[at + 2u], q[at + 3u]);
        }
        q_sh[g * QW4 + c] = v;
    }
    for (var g = tid; g < ROWS; g += NT) {
        m_sh[g] = MASKED;
        l_sh[g] = 0.0;
        let gv = min(g, max(w.n_rows, 1u) - 1u);
        slope_sh[g] = fa_slope(fa_head(w, gv));
        mrow_sh[g] = fa_mask_row(fa_query(w, gv), w.i3);
    }
    if (tid < 3u) {
        flags[tid] = 0u;
    }
    workgroupBarrier();

    // Thread roles. Q·Kᵀ: DS lanes per dot product of key qk_j with rows qk_g + i·GQ.
    let qk_ds = tid % DS;
    let qk_j = (tid / DS) % KV_TILE;
    let qk_g = tid / (DS * KV_TILE);
    // P·V: rows pv_rg·RO + i, chunks pv_c + k·LV, keys pv_ks + n·KS.
    let pv_c = tid % LV;
    let pv_rg = (tid / LV) % RGN;
    let pv_ks = tid / (LV * RGN);
    let pv_on = tid < LV * RGN * KS;
    // Softmax: TPR lanes per row.
    let sm_l = tid % TPR;

    var acc: array<array<vec4<f32>, 2>, RO * CH>;
#for A_ in 0..RO * CH
    {
        let a = A_##u;
        acc[a] = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0));
    }
#endfor

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
        fa_tile_stage(&kreg, &vreg, &mscan, w, tid, live, j0, nk, has_next, n0, nk_next);
        if (live) {
#if HAS_MASK
            // This thread's mask values for its scores, loaded before the dot products.
            var mv: array<f32, RQ>;
#for I_ in 0..RQ
            {
                let i = I_##u;
                let g = min(qk_g + i * GQ, ROWS - 1u);
                mv[i] = 0.0;
                if (qk_ds == 0u && qk_j < nk) {
                    mv[i] = slope_sh[g] * fa_mask_at(mrow_sh[g], j0 + qk_j);
                }
            }
#endfor
#endif
            // Scores (two accumulators a row, for shorter dependency chains).
            var sdot: array<vec2<f32>, RQ>;
#for I_ in 0..RQ
            {
                let i = I_##u;
                sdot[i] = vec2<f32>(0.0);
            }
#endfor
            for (var c = qk_ds; c < HSK8; c += DS) {
                let kv = unpack8(k_sh[qk_j * KSTR + c]);
#for I_ in 0..RQ
                {
                    let i = I_##u;
                    let g = min(qk_g + i * GQ, ROWS - 1u);
                    sdot[i] += vec2<f32>(dot(q_sh[g * QW4 + 2u * c], kv[0]), dot(q_sh[g * QW4 + 2u * c + 1u], kv[1]));
                }
#endfor
            }
#for I_ in 0..RQ
            {
                let i = I_##u;
                var d = sdot[i].x + sdot[i].y;
                for (var o = 1u; o < DS; o <<= 1u) {
                    d += subgroupShuffleXor(d, o);
                }
                let g = qk_g + i * GQ;
                if (qk_ds == 0u && g < ROWS) {
                    var s = MASKED;
                    if (qk_j < nk && g < w.n_rows) {
                        s = fa_logit(d);
#if HAS_MASK
                        s += mv[i];
#endif
                    }
                    s_sh[g * KV_TILE + qk_j] = s;
                }
            }
#endfor
            workgroupBarrier();
#if KV_ALIAS
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

            // Online softmax: new maxima, weights in place of the scores, rescale factors.
#for PS_ in 0..SM_PASSES
            {
                let ps = PS_##u;
                let g = tid / TPR + ps * (NT / TPR);
                let gc = min(g, ROWS - 1u);
                var sv: array<f32, SPL>;
                var mx = MASKED;
#for I_ in 0..SPL
                {
                    let i = I_##u;
                    sv[i] = s_sh[gc * KV_TILE + sm_l + i * TPR];
                    mx = max(mx, sv[i]);
                }
#endfor
                for (var o = 1u; o < TPR; o <<= 1u) {
                    mx = max(mx, subgroupShuffleXor(mx, o));
                }
                let m_old = m_sh[gc];
                let m_new = max(m_old, mx);
                var sum = 0.0;
#for I_ in 0..SPL
                {
                    let i = I_##u;
                    let e = select(exp(sv[i] - m_new), 0.0, sv[i] <= MASKED);
                    sum += e;
                    if (g < ROWS) {
                        s_sh[g * KV_TILE + sm_l + i * TPR] = e;
                    }
                }
#endfor
                for (var o = 1u; o < TPR; o <<= 1u) {
                    sum += subgroupShuffleXor(sum, o);
                }
                if (g < ROWS && sm_l == 0u) {
                    let a = exp(m_old - m_new);
                    a_sh[g] = a;
                    l_sh[g] = l_sh[g] * a + sum;
                    m_sh[g] = m_new;
                }
            }
#endfor
            workgroupBarrier();

            // O = O·a + P·V.
            if (pv_on) {
#for I_ in 0..RO
                {
                    let i = I_##u;
                    let a = a_sh[min(pv_rg * RO + i, ROWS - 1u)];
                    for (var k = 0u; k < CH; k += 1u) {
                        acc[i * CH + k][0] *= a;
                        acc[i * CH + k][1] *= a;
                    }
                }
#endfor
                for (var j = pv_ks; j < nk; j += KS) {
#for K_ in 0..CH
                    {
                        let k = K_##u;
                        let c = min(pv_c + k * LV, HSV8 - 1u);
                        let vv = unpack8(V_SH[j * VSTR + c]);
#for I_ in 0..RO
                        {
                            let i = I_##u;
                            let pr = s_sh[min(pv_rg * RO + i, ROWS - 1u) * KV_TILE + j];
                            acc[i * CH + k][0] += pr * vv[0];
                            acc[i * CH + k][1] += pr * vv[1];
                        }
#endfor
                    }
#endfor
                }
            }
        }
        live = fa_tile_end(&mscan, tid, t, has_next);
    }

    // The key splits' partial outputs add up in q_sh, then each row is stored.
#for S_ in 0..KS
    {
        let s = S_##u;
        if (pv_on && pv_ks == s) {
            for (var i = 0u; i < RO; i += 1u) {
                let g = pv_rg * RO + i;
#for K_ in 0..CH
                {
                    let k = K_##u;
                    let c = pv_c + k * LV;
                    if (g < ROWS && c < HSV8) {
                        let at = g * QW4 + 2u * c;
                        if (s == 0u) {
                            q_sh[at] = acc[i * CH + k][0];
                            q_sh[at + 1u] = acc[i * CH + k][1];
                        } else {
                            q_sh[at] += acc[i * CH + k][0];
                            q_sh[at + 1u] += acc[i * CH + k][1];
                        }
                    }
                }
#endfor
            }
        }
        workgroupBarrier();
    }
#endfor
    for (var e = tid; e < w.n_rows * (HSV / 4u); e += NT) {
        let g = e / (HSV / 4u);
        let c = e % (HSV / 4u);
        fa_store(w, g, c * 4u, q_sh[g * QW4 + c], m_sh[g], l_sh[g]);
    }
    for (var g = tid; g < w.n_rows; g += NT) {
        fa_store_stats(w, g, m_sh[g], l_sh[g]);
    }
}
