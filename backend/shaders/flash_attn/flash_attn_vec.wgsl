// FLASH_ATTN_EXT for decode (few query rows per KV head), without workgroup-memory staging and
// without a barrier per KV tile. A group of LK lanes owns every NG-th key of the split (NG =
// NT / LK groups): it reads the keys' K and V rows straight from storage into registers, B keys'
// loads issued before any is used, and keeps its own running max, sum and output for all ROWS
// rows of the workgroup (the query heads sharing the KV head, so each K/V byte is read once per
// split). Lane l of a group holds dimensions [8(l + c·LK), +8) of Q, K, V and O. The groups
// merge once at the end: shuffles inside a team of SGT lanes (a subgroup or an aligned part of
// one), then workgroup memory across the teams. Scores are in the log2 domain (exp2, log2(e)
// folded into the Q scale, or applied after the softcap).
//
// Host defines (see plan/vec.rs, VecPlan): NT, ROWS, KV_TILE (= NG·B), VEC_LK, VEC_SGT, VEC_B,
// VEC_CK, VEC_CV (chunks of 8 K/V dimensions per lane), VEC_ONE_Q (all rows share one query, so
// one mask row), VEC_PROBE (measuring only: 1 K/V decoded as f16 whatever their type, 2 the
// loads alone, 3 the kernel itself, its reduce pass left out by the host), VEC_QINT (q8_0 / q4_0 K: Q rounded to 8 bits
// per chunk, scale apart, and each chunk's score two packed 4x8-bit dot products instead of
// eight byte-to-float conversions), plus those of flash_attn_common.wgsl.
//
// Bytes touched: q, k, v, mask, sinks and dst (or the split scratch) only as
// flash_attn_common.wgsl states; tested by tests/tests/guards.rs.
enable subgroups;
diagnostic(off, subgroup_uniformity);

#include "common.wgsl"
#define K_CHUNKS (HSK / 8u)
#define V_CHUNKS (HSV / 8u)
#include "flash_attn_common.wgsl"

const HSK8: u32 = HSK / 8;
const HSV8: u32 = HSV / 8;
const LK: u32 = VEC_LK;
const NB: u32 = VEC_B;
const CK: u32 = VEC_CK;
const CV: u32 = VEC_CV;
const NG: u32 = NT / LK;
const NTEAM: u32 = NT / VEC_SGT;
#if VEC_ONE_Q
const MR: u32 = 1u;
#else
const MR: u32 = ROWS;
#endif
const LOG2E: f32 = 1.4426950408889634;
const LN2: f32 = 0.6931471805599453;

var<workgroup> tm_sh: array<f32, NTEAM * ROWS>;
var<workgroup> tl_sh: array<f32, NTEAM * ROWS>;
var<workgroup> o_sh: array<vec4<f32>, ROWS * HSV / 4>;

// K/V chunks decoded; with VEC_PROBE (measuring only) as if they were f16 whatever their type:
// the same loads without the dequantization.
fn k_dec_probed(r: vec4<u32>) -> Dec8 {
#if VEC_PROBE == 1
    return fa_f16_dec8(r);
#else
    return k_dec(r);
#endif
}

fn v_dec_probed(r: vec4<u32>) -> Dec8 {
#if VEC_PROBE == 1
    return fa_f16_dec8(r);
#else
    return v_dec(r);
#endif
}

// The raw K/V chunks (and mask values) of this lane's NB keys j0 + i·NG, all loads issued
// before any is used; keys from kv1 on read key kv1 - 1 (they are masked later).
fn load_keys(kr: ptr<function, array<vec4<u32>, NB * CK>>, vr: ptr<function, array<vec4<u32>, NB * CV>>,
    mk: ptr<function, array<f32, NB * MR>>, j0: u32, kv1: u32, ln: u32, kbase: u32, vbase: u32,
    mrow: ptr<function, array<u32, MR>>) {
    let p = params;
    for (var i = 0u; i < NB; i += 1u) {
        let j = min(j0 + i * NG, kv1 - 1u);
        for (var c = 0u; c < CK; c += 1u) {
            let ch = ln + c * LK;
            var r = vec4<u32>(0u);
            if (ch < HSK8) {
                r = k_raw(kbase + j * p.k_nb1, ch * 8u);
            }
            (*kr)[i * CK + c] = r;
        }
        for (var c = 0u; c < CV; c += 1u) {
            let ch = ln + c * LK;
            var r = vec4<u32>(0u);
            if (ch < HSV8) {
                r = v_raw(vbase + j * p.v_nb1, ch * 8u);
            }
            (*vr)[i * CV + c] = r;
        }
#if HAS_MASK
        for (var r = 0u; r < MR; r += 1u) {
            (*mk)[i * MR + r] = fa_mask_at((*mrow)[r], j);
        }
#endif
    }
}

// The workgroup's (max, sum) of row g from the teams' (after their write and a barrier).
fn merged(g: u32) -> vec2<f32> {
    var mm = MASKED;
    for (var r = 0u; r < NTEAM; r += 1u) {
        mm = max(mm, tm_sh[r * ROWS + g]);
    }
    var ll = 0.0;
    for (var r = 0u; r < NTEAM; r += 1u) {
        ll += tl_sh[r * ROWS + g] * exp2(tm_sh[r * ROWS + g] - mm);
    }
    return vec2<f32>(mm, ll);
}

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let w = fa_work(wg);
    if (!w.ok) {
        return;
    }
    let p = params;
    let ln = tid % LK;
    let kg = tid / LK;
    let team = tid / VEC_SGT;
    let soft = p.softcap != 0.0;
    let qscale = select(p.scale * LOG2E, p.scale, soft);

    // This lane's Q dimensions of every row (zeros past the rows and head size), scaled; the
    // ALiBi slopes and mask rows. With VEC_QINT, each chunk as 8 signed bytes times qd (and, for
    // q4_0's zero point, 8 times their sum).
#if VEC_QINT
    var qi: array<vec2<u32>, ROWS * CK>;
    var qd: array<f32, ROWS * CK>;
#if K_TYPE == TYPE_Q4_0
    var qz: array<i32, ROWS * CK>;
#endif
#else
    var qr: array<array<vec4<f32>, 2>, ROWS * CK>;
#endif
    var slope: array<f32, ROWS>;
    var mrow: array<u32, MR>;
    let last = max(w.n_rows, 1u) - 1u;
    for (var g = 0u; g < ROWS; g += 1u) {
        let gv = min(g, last);
        slope[g] = fa_slope(fa_head(w, gv)) * LOG2E;
        if (g < MR) {
            mrow[g] = fa_mask_row(fa_query(w, gv), w.i3);
        }
        let qb = p.q_start + fa_query(w, gv) * p.q_nb1 + fa_head(w, gv) * p.q_nb2 + w.i3 * p.q_nb3;
        for (var c = 0u; c < CK; c += 1u) {
            let ch = ln + c * LK;
            var a = vec4<f32>(0.0);
            var b = vec4<f32>(0.0);
            if (g < w.n_rows && ch < HSK8) {
                let at = qb + ch * 8u;
                a = vec4<f32>(q[at], q[at + 1u], q[at + 2u], q[at + 3u]);
                b = vec4<f32>(q[at + 4u], q[at + 5u], q[at + 6u], q[at + 7u]);
            }
#if VEC_QINT
            let qa = a * qscale;
            let qb8 = b * qscale;
            let amax = max(max(max(abs(qa.x), abs(qa.y)), max(abs(qa.z), abs(qa.w))),
                max(max(abs(qb8.x), abs(qb8.y)), max(abs(qb8.z), abs(qb8.w))));
            let inv = select(0.0, 127.0 / amax, amax > 0.0);
            let ia = vec4<i32>(round(qa * inv));
            let ib = vec4<i32>(round(qb8 * inv));
            qi[g * CK + c] = vec2<u32>(pack4xI8(ia), pack4xI8(ib));
            qd[g * CK + c] = amax / 127.0;
#if K_TYPE == TYPE_Q4_0
            qz[g * CK + c] = 8 * (ia.x + ia.y + ia.z + ia.w + ib.x + ib.y + ib.z + ib.w);
#endif
#else
            qr[g * CK + c] = array<vec4<f32>, 2>(a * qscale, b * qscale);
#endif
        }
    }

    var m: array<f32, ROWS>;
    var l: array<f32, ROWS>;
    var acc: array<array<vec4<f32>, 2>, ROWS * CV>;
    for (var g = 0u; g < ROWS; g += 1u) {
        m[g] = MASKED;
        l[g] = 0.0;
    }
    for (var a = 0u; a < ROWS * CV; a += 1u) {
        acc[a] = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0));
    }

    let kbase = p.k_start + w.hk * p.k_nb2 + w.i3 * p.k_nb3;
    let vbase = p.v_start + w.hk * p.v_nb2 + w.i3 * p.v_nb3;
    let n_iter = (w.kv1 - w.kv0 + KV_TILE - 1u) / KV_TILE;
    var kn: array<vec4<u32>, NB * CK>;
    var vn: array<vec4<u32>, NB * CV>;
    var mn: array<f32, NB * MR>;
    for (var t = 0u; t < n_iter; t += 1u) {
        let j0 = w.kv0 + t * KV_TILE + kg;
        // Every load of the NB keys first (keys past the split read its last key, then count
        // as masked).
        load_keys(&kn, &vn, &mn, j0, w.kv1, ln, kbase, vbase, &mrow);
        let kr = kn;
        let vr = vn;
        let mk = mn;
#if VEC_PROBE == 2
        // Measuring only: the step's K, V and mask words folded into the output; no scores,
        // softmax or products.
        var fold = vec4<u32>(0u);
        for (var i = 0u; i < NB * CK; i += 1u) {
            fold ^= kr[i];
        }
        for (var i = 0u; i < NB * CV; i += 1u) {
            fold ^= vr[i];
        }
        for (var i = 0u; i < NB * MR; i += 1u) {
            fold.x ^= bitcast<u32>(mk[i]);
        }
        acc[0][0] += bitcast<vec4<f32>>(fold & vec4<u32>(0x3fffffffu));
#else
        // Partial dot products, summed over the group's lanes.
        var s: array<f32, NB * ROWS>;
        for (var i = 0u; i < NB; i += 1u) {
            for (var g = 0u; g < ROWS; g += 1u) {
                s[i * ROWS + g] = 0.0;
            }
            for (var c = 0u; c < CK; c += 1u) {
#if VEC_QINT
                // The raw chunk (k_raw): d's bits, then 8 signed bytes (q8_0) or 8 nibbles at
                // shift r.w (q4_0).
                let r = kr[i * CK + c];
                let dk = unpack2x16float(r.x).x;
#if K_TYPE == TYPE_Q4_0
                let k0 = (r.y >> r.w) & 0x0f0f0f0fu;
                let k1 = (r.z >> r.w) & 0x0f0f0f0fu;
#else
                let k0 = r.y;
                let k1 = r.z;
#endif
                for (var g = 0u; g < ROWS; g += 1u) {
                    let qq = qi[g * CK + c];
                    var dot8 = dot4I8Packed(k0, qq.x) + dot4I8Packed(k1, qq.y);
#if K_TYPE == TYPE_Q4_0
                    dot8 -= qz[g * CK + c];
#endif
                    s[i * ROWS + g] += dk * qd[g * CK + c] * f32(dot8);
                }
#else
                let kd = k_dec_probed(kr[i * CK + c]);
                for (var g = 0u; g < ROWS; g += 1u) {
                    let qv = qr[g * CK + c];
                    s[i * ROWS + g] += kd.d * (dot(qv[0], kd.lo) + dot(qv[1], kd.hi));
                }
#endif
            }
        }
        for (var o = 1u; o < LK; o <<= 1u) {
            for (var e = 0u; e < NB * ROWS; e += 1u) {
                s[e] += subgroupShuffleXor(s[e], o);
            }
        }

        // Online softmax over the NB keys; the weights replace the scores.
        for (var g = 0u; g < ROWS; g += 1u) {
            var mx = MASKED;
            for (var i = 0u; i < NB; i += 1u) {
                var x = s[i * ROWS + g];
                if (soft) {
                    x = p.softcap * tanh(clamp(x, -15.0, 15.0)) * LOG2E;
                }
#if HAS_MASK
#if VEC_ONE_Q
                x += slope[g] * mk[i];
#else
                x += slope[g] * mk[i * MR + g];
#endif
#endif
                x = select(MASKED, x, j0 + i * NG < w.kv1);
                s[i * ROWS + g] = x;
                mx = max(mx, x);
            }
            let m_new = max(m[g], mx);
            let a = exp2(m[g] - m_new);
            var sum = 0.0;
            for (var i = 0u; i < NB; i += 1u) {
                let x = s[i * ROWS + g];
                let e = select(exp2(x - m_new), 0.0, x <= MASKED);
                s[i * ROWS + g] = e;
                sum += e;
            }
            l[g] = l[g] * a + sum;
            m[g] = m_new;
            for (var c = 0u; c < CV; c += 1u) {
                acc[g * CV + c][0] *= a;
                acc[g * CV + c][1] *= a;
            }
        }

        // O += P·V.
        for (var i = 0u; i < NB; i += 1u) {
            for (var c = 0u; c < CV; c += 1u) {
                let vd = v_dec_probed(vr[i * CV + c]);
                for (var g = 0u; g < ROWS; g += 1u) {
                    let pw = s[i * ROWS + g] * vd.d;
                    acc[g * CV + c][0] += pw * vd.lo;
                    acc[g * CV + c][1] += pw * vd.hi;
                }
            }
        }
#endif
    }

    // Merge the groups of a team (lanes l, l + LK, ... hold the same dimensions).
    for (var o = LK; o < VEC_SGT; o <<= 1u) {
        for (var g = 0u; g < ROWS; g += 1u) {
            let mo = subgroupShuffleXor(m[g], o);
            let lo = subgroupShuffleXor(l[g], o);
            let mx = max(m[g], mo);
            let fa = exp2(m[g] - mx);
            let fb = exp2(mo - mx);
            l[g] = l[g] * fa + lo * fb;
            m[g] = mx;
            for (var c = 0u; c < CV; c += 1u) {
                let a0 = subgroupShuffleXor(acc[g * CV + c][0], o);
                let a1 = subgroupShuffleXor(acc[g * CV + c][1], o);
                acc[g * CV + c][0] = acc[g * CV + c][0] * fa + a0 * fb;
                acc[g * CV + c][1] = acc[g * CV + c][1] * fa + a1 * fb;
            }
        }
    }

    // Then the teams, one after the other into o_sh.
    if (tid % VEC_SGT == 0u) {
        for (var g = 0u; g < ROWS; g += 1u) {
            tm_sh[team * ROWS + g] = m[g];
            tl_sh[team * ROWS + g] = l[g];
        }
    }
    workgroupBarrier();
    var mt: array<f32, ROWS>;
    for (var g = 0u; g < ROWS; g += 1u) {
        mt[g] = merged(g).x;
    }
    let leader = tid % VEC_SGT < LK;
    for (var r = 0u; r < NTEAM; r += 1u) {
        if (leader && team == r) {
            for (var g = 0u; g < ROWS; g += 1u) {
                let f = exp2(m[g] - mt[g]);
                for (var c = 0u; c < CV; c += 1u) {
                    let ch = ln + c * LK;
                    if (ch < HSV8) {
                        let at = g * (HSV / 4u) + 2u * ch;
                        var a0 = acc[g * CV + c][0] * f;
                        var a1 = acc[g * CV + c][1] * f;
                        if (r > 0u) {
                            a0 += o_sh[at];
                            a1 += o_sh[at + 1u];
                        }
                        o_sh[at] = a0;
                        o_sh[at + 1u] = a1;
                    }
                }
            }
        }
        workgroupBarrier();
    }

    for (var e = tid; e < w.n_rows * (HSV / 4u); e += NT) {
        let g = e / (HSV / 4u);
        let c = e % (HSV / 4u);
        let ml = merged(g);
        fa_store(w, g, c * 4u, o_sh[g * (HSV / 4u) + c], ml.x * LN2, ml.y);
    }
    for (var g = tid; g < w.n_rows; g += NT) {
        let ml = merged(g);
        fa_store_stats(w, g, ml.x * LN2, ml.y);
    }
}
