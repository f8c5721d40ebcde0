//! ggml's K-quants: 256-element super-blocks q2_K, q3_K, q4_K, q5_K, q6_K and q8_K.
//!
//! Every function converts exactly one super-block (`x`/`y` hold 256 values, `b` the block's
//! bytes). The quantizers are ggml's reference quantizers (`quantize_row_*_ref`, which is also
//! what ggml's `ggml_quantize_chunk` runs when no importance matrix is given), reproduced step by
//! step in f32 so that the bytes are identical.
//!
//! Layouts (little-endian; `d`/`dmin` are f16 unless noted):
//! - q2_K (84 bytes): `scales[16]` (low nibble scale, high nibble min, per 16 elements), `qs[64]`
//!   (2-bit quants), `d`, `dmin`. Element `e` of each 128-half `n` lives in byte `n/4 + e%32` at
//!   bit `2·((e%128)/32)`; value = d·sc·q − dmin·m.
//! - q3_K (110 bytes): `hmask[32]` (bit `e/32` of byte `e%32` is the high bit of element `e`),
//!   `qs[64]` (low 2 bits, packed as q2_K), `scales[12]` (sixteen 6-bit scales: low nibbles in bytes
//!   0..8, high 2-bit pairs in bytes 8..12), `d`; value = d·(s − 32)·(q − 4).
//! - q4_K (144 bytes): `d`, `dmin`, `scales[12]` (eight 6-bit scales and mins, packed as
//!   `get_scale_min_k4` reads them), `qs[128]` (for each 64 elements: 32 bytes, low nibbles first
//!   32 elements, high nibbles next 32); value = d·sc·q − dmin·m.
//! - q5_K (176 bytes): `d`, `dmin`, `scales[12]`, `qh[32]` (bit `e/32` of byte `e%32`), `qs[128]`
//!   as q4_K; value = d·sc·q − dmin·m with 5-bit q.
//! - q6_K (210 bytes): `ql[128]`, `qh[64]`, `scales[16]` (i8), `d`; value = d·sc·(q − 32).
//! - q8_K (292 bytes): `d` (f32), `qs[256]` (i8), `bsums[16]` (i16 sums of 16 quants).

use super::{abs_max_signed, get_f16, nearest_int, put_f16};

/// Elements per super-block.
pub(super) const QK_K: usize = 256;

/// ggml's `GROUP_MAX_EPS`: groups whose largest magnitude is below it quantize to zero.
const GROUP_MAX_EPS: f32 = 1e-15;

// ---------------------------------------------------------------------------------------------
// Shared quantization helpers (ggml's make_qx_quants, make_q3_quants, make_qkx2_quants)

/// Symmetric quantization of `x` to `[-nmax, nmax)` minimizing the x²-weighted error (ggml's
/// `make_qx_quants` with `rmse_type = 1` and no importance weights). Writes `q + nmax` to `out`
/// and returns the scale.
fn make_qx_quants(nmax: i32, x: &[f32], out: &mut [i8]) -> f32 {
    let (amax, max) = abs_max_signed(x);
    if amax < GROUP_MAX_EPS {
        out.fill(0);
        return 0.0;
    }
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let sums = |iscale: f32| {
        let mut sumlx = 0.0f32;
        let mut suml2 = 0.0f32;
        for &v in x {
            let l = quant(iscale, v) as f32;
            let w = v * v;
            sumlx += w * v * l;
            suml2 += w * l * l;
        }
        (sumlx, suml2)
    };
    let mut iscale = -(nmax as f32) / max;
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (quant(iscale, v) + nmax) as i8;
    }
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1f32 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = (quant(iscale, v) + nmax) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// ggml's `make_q3_quants` with `do_rmse`: symmetric quantization to `[-nmax, nmax)` refined by
/// coordinate descent on the x²-weighted error. Writes `q + nmax` to `out`, returns the scale.
fn make_q3_quants(nmax: i32, x: &[f32], out: &mut [i8]) -> f32 {
    let (amax, max) = abs_max_signed(x);
    if amax < GROUP_MAX_EPS {
        out.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    let mut ls = [0i32; 16];
    let ls = &mut ls[..x.len()];
    for (l_out, &v) in ls.iter_mut().zip(x) {
        let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *l_out = l;
        let w = v * v;
        sumlx += w * v * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut changed = 0;
        for (li, &v) in ls.iter_mut().zip(x) {
            let w = v * v;
            let l = *li as f32;
            let mut slx = sumlx - w * v * l;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * l * l;
                let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != *li {
                    slx += w * v * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *li = new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed += 1;
                    }
                }
            }
        }
        if changed == 0 {
            break;
        }
    }
    for (o, &l) in out.iter_mut().zip(ls.iter()) {
        *o = (l + nmax) as i8;
    }
    if suml2 > 0.0 { sumlx / suml2 } else { 0.0 }
}

/// Parameters of ggml's `make_qkx2_quants` search.
struct Qkx2 {
    nmax: i32,
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
}

/// ggml's `make_qkx2_quants`: asymmetric quantization `x ≈ scale·q − min` with `q` in
/// `[0, nmax]`, searching scales around the min/max fit. Returns `(scale, min)`.
fn make_qkx2_quants(p: &Qkx2, x: &[f32], weights: &[f32], out: &mut [u8]) -> (f32, f32) {
    let n = x.len();
    let nmax = p.nmax;
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        out.fill(0);
        return (0.0, -min);
    }
    let err = |diff: f32| if p.use_mad { diff.abs() } else { diff * diff };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        out[i] = l as u8;
        let diff = scale * l as f32 + min - x[i];
        best_error += weights[i] * err(diff);
    }
    if p.nstep < 1 {
        return (scale, -min);
    }
    let mut aux = [0u8; 32];
    let aux = &mut aux[..n];
    for is in 0..=p.nstep {
        iscale = (p.rmin + p.rdelta * is as f32 + nmax as f32) / (max - min);
        let mut sum_l = 0.0f32;
        let mut sum_l2 = 0.0f32;
        let mut sum_xl = 0.0f32;
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            aux[i] = l as u8;
            let w = weights[i];
            let l = l as f32;
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * aux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * err(diff);
            }
            if cur_error < best_error {
                out.copy_from_slice(aux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// The 6-bit scale and min of sub-block `j` from q4_K/q5_K's 12 packed bytes.
fn get_scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Packs eight 6-bit scales and mins into q4_K/q5_K's 12 bytes (inverse of `get_scale_min_k4`).
fn put_scale_min_k4(j: usize, ls: u8, lm: u8, q: &mut [u8]) {
    if j < 4 {
        q[j] = ls;
        q[j + 4] = lm;
    } else {
        q[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
        q[j - 4] |= (ls >> 4) << 6;
        q[j] |= (lm >> 4) << 6;
    }
}

/// The signed 6-bit scale of sub-block `j` from q3_K's 12 packed bytes (−32..=31).
fn q3k_scale(j: usize, sb: &[u8]) -> i8 {
    let low = if j < 8 { sb[j] & 0xF } else { sb[j - 8] >> 4 };
    let high = (sb[8 + j % 4] >> (2 * (j / 4))) & 3;
    (low | (high << 4)) as i8 - 32
}

/// Packs 2-bit values `l[0..256]` into 64 bytes: for each 128-half, byte `k` holds elements `k`,
/// `k+32`, `k+64`, `k+96` at bits 0, 2, 4, 6.
fn pack_2bit(l: &[u8; QK_K], qs: &mut [u8]) {
    for j in (0..QK_K).step_by(128) {
        for k in 0..32 {
            qs[j / 4 + k] = l[j + k] | (l[j + k + 32] << 2) | (l[j + k + 64] << 4) | (l[j + k + 96] << 6);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// q2_K

pub(super) fn dequantize_q2_k(b: &[u8], y: &mut [f32]) {
    let scales = &b[0..16];
    let qs = &b[16..80];
    let d = get_f16(b, 80);
    let min = get_f16(b, 82);
    for (e, v) in y.iter_mut().enumerate() {
        let n = e / 128;
        let shift = 2 * ((e % 128) / 32);
        let q = (qs[32 * n + e % 32] >> shift) & 3;
        let sc = scales[e / 16];
        let dl = d * (sc & 0xF) as f32;
        let ml = min * (sc >> 4) as f32;
        *v = dl * q as f32 - ml;
    }
}

pub(super) fn quantize_q2_k(x: &[f32], b: &mut [u8]) {
    const Q4SCALE: f32 = 15.0;
    let params = Qkx2 {
        nmax: 3,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: true,
    };
    let mut l = [0u8; QK_K];
    let mut scales = [0f32; 16];
    let mut mins = [0f32; 16];
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for j in 0..16 {
        let xs = &x[16 * j..16 * j + 16];
        let mut weights = [0f32; 16];
        for (w, v) in weights.iter_mut().zip(xs) {
            *w = v.abs();
        }
        let (scale, min) = make_qkx2_quants(&params, xs, &weights, &mut l[16 * j..16 * j + 16]);
        scales[j] = scale;
        mins[j] = min;
        if scale > max_scale {
            max_scale = scale;
        }
        if min > max_min {
            max_min = min;
        }
    }
    let (sc, rest) = b.split_at_mut(16);
    if max_scale > 0.0 {
        let iscale = Q4SCALE / max_scale;
        for j in 0..16 {
            sc[j] = nearest_int(iscale * scales[j]) as u8;
        }
        put_f16(rest, 64, max_scale / Q4SCALE);
    } else {
        sc.fill(0);
        put_f16(rest, 64, 0.0);
    }
    if max_min > 0.0 {
        let iscale = Q4SCALE / max_min;
        for j in 0..16 {
            let lm = nearest_int(iscale * mins[j]);
            sc[j] |= (lm << 4) as u8;
        }
        put_f16(rest, 66, max_min / Q4SCALE);
    } else {
        put_f16(rest, 66, 0.0);
    }
    let dd = get_f16(rest, 64);
    let dmin = get_f16(rest, 66);
    for j in 0..16 {
        let d = dd * (sc[j] & 0xF) as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dmin * (sc[j] >> 4) as f32;
        for ii in 0..16 {
            l[16 * j + ii] = nearest_int((x[16 * j + ii] + dm) / d).clamp(0, 3) as u8;
        }
    }
    pack_2bit(&l, &mut rest[0..64]);
}

// ---------------------------------------------------------------------------------------------
// q3_K

pub(super) fn dequantize_q3_k(b: &[u8], y: &mut [f32]) {
    let hmask = &b[0..32];
    let qs = &b[32..96];
    let sb = &b[96..108];
    let d_all = get_f16(b, 108);
    let mut scales = [0i8; 16];
    for (j, s) in scales.iter_mut().enumerate() {
        *s = q3k_scale(j, sb);
    }
    for (e, v) in y.iter_mut().enumerate() {
        let n = e / 128;
        let shift = 2 * ((e % 128) / 32);
        let q = ((qs[32 * n + e % 32] >> shift) & 3) as i32;
        let high = hmask[e % 32] & (1 << (e / 32)) != 0;
        let dl = d_all * scales[e / 16] as i32 as f32;
        *v = dl * (q - if high { 0 } else { 4 }) as f32;
    }
}

pub(super) fn quantize_q3_k(x: &[f32], b: &mut [u8]) {
    let mut ls = [0i8; QK_K];
    let mut scales = [0f32; 16];
    let mut max_scale = 0.0f32;
    let mut amax = 0.0f32;
    for j in 0..16 {
        scales[j] = make_q3_quants(4, &x[16 * j..16 * j + 16], &mut ls[16 * j..16 * j + 16]);
        let scale = scales[j].abs();
        if scale > amax {
            amax = scale;
            max_scale = scales[j];
        }
    }
    let (head, tail) = b.split_at_mut(96);
    let (sb, dbytes) = tail.split_at_mut(12);
    sb.fill(0);
    if max_scale != 0.0 {
        let iscale = -32.0 / max_scale;
        for j in 0..16 {
            // C: int8_t l = nearest_int(...); l = MAX(-32, MIN(31, l)) + 32;
            let l = (nearest_int(iscale * scales[j]) as i8).clamp(-32, 31) + 32;
            let l = l as u8;
            if j < 8 {
                sb[j] = l & 0xF;
            } else {
                sb[j - 8] |= (l & 0xF) << 4;
            }
            sb[j % 4 + 8] |= (l >> 4) << (2 * (j / 4));
        }
        put_f16(dbytes, 0, 1.0 / iscale);
    } else {
        put_f16(dbytes, 0, 0.0);
    }
    let dd = get_f16(dbytes, 0);
    for j in 0..16 {
        let d = dd * q3k_scale(j, sb) as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            let l = nearest_int(x[16 * j + ii] / d).clamp(-4, 3);
            ls[16 * j + ii] = (l + 4) as i8;
        }
    }
    let (hmask, qs) = head.split_at_mut(32);
    hmask.fill(0);
    let mut l = [0u8; QK_K];
    for (j, (lo, &li)) in l.iter_mut().zip(ls.iter()).enumerate() {
        let mut v = li as u8;
        if v > 3 {
            hmask[j % 32] |= 1 << (j / 32);
            v -= 4;
        }
        *lo = v;
    }
    pack_2bit(&l, qs);
}

// ---------------------------------------------------------------------------------------------
// q4_K and q5_K (shared scale search)

/// Per-sub-block scales and mins of q4_K/q5_K's reference quantizer, packed into the 12 scale
/// bytes, with the f16 super-block scales written to `dm[0..4]`. Returns the quants `l`.
fn quantize_k4_scales(x: &[f32], params: &Qkx2, scale_bytes: &mut [u8], dm: &mut [u8]) -> [u8; QK_K] {
    let mut l = [0u8; QK_K];
    let mut scales = [0f32; 8];
    let mut mins = [0f32; 8];
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let mut weights = [0f32; 32];
        for (w, v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        let (scale, min) = make_qkx2_quants(params, xs, &weights, &mut l[32 * j..32 * j + 32]);
        scales[j] = scale;
        mins[j] = min;
        if scale > max_scale {
            max_scale = scale;
        }
        if min > max_min {
            max_min = min;
        }
    }
    let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    scale_bytes.fill(0);
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        put_scale_min_k4(j, ls, lm, scale_bytes);
    }
    put_f16(dm, 0, max_scale / 63.0);
    put_f16(dm, 2, max_min / 63.0);
    let dd = get_f16(dm, 0);
    let dmin = get_f16(dm, 2);
    let qmax = params.nmax;
    for j in 0..8 {
        let (sc, m) = get_scale_min_k4(j, scale_bytes);
        let d = dd * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dmv = dmin * m as f32;
        for ii in 0..32 {
            l[32 * j + ii] = nearest_int((x[32 * j + ii] + dmv) / d).clamp(0, qmax) as u8;
        }
    }
    l
}

pub(super) fn dequantize_q4_k(b: &[u8], y: &mut [f32]) {
    let d = get_f16(b, 0);
    let min = get_f16(b, 2);
    let scales = &b[4..16];
    let qs = &b[16..144];
    for (e, v) in y.iter_mut().enumerate() {
        let sub = e / 32;
        let (sc, m) = get_scale_min_k4(sub, scales);
        let byte = qs[32 * (e / 64) + e % 32];
        let q = if sub % 2 == 0 { byte & 0xF } else { byte >> 4 };
        let d1 = d * sc as f32;
        let m1 = min * m as f32;
        *v = d1 * q as f32 - m1;
    }
}

pub(super) fn quantize_q4_k(x: &[f32], b: &mut [u8]) {
    let params = Qkx2 {
        nmax: 15,
        rmin: -1.0,
        rdelta: 0.1,
        nstep: 20,
        use_mad: false,
    };
    let (dm, rest) = b.split_at_mut(4);
    let (scale_bytes, qs) = rest.split_at_mut(12);
    let l = quantize_k4_scales(x, &params, scale_bytes, dm);
    for j in 0..4 {
        for k in 0..32 {
            qs[32 * j + k] = l[64 * j + k] | (l[64 * j + k + 32] << 4);
        }
    }
}

pub(super) fn dequantize_q5_k(b: &[u8], y: &mut [f32]) {
    let d = get_f16(b, 0);
    let min = get_f16(b, 2);
    let scales = &b[4..16];
    let qh = &b[16..48];
    let qs = &b[48..176];
    for (e, v) in y.iter_mut().enumerate() {
        let sub = e / 32;
        let (sc, m) = get_scale_min_k4(sub, scales);
        let byte = qs[32 * (e / 64) + e % 32];
        let low = if sub % 2 == 0 { byte & 0xF } else { byte >> 4 };
        let high = if qh[e % 32] & (1 << sub) != 0 { 16 } else { 0 };
        let d1 = d * sc as f32;
        let m1 = min * m as f32;
        *v = d1 * (low as i32 + high) as f32 - m1;
    }
}

pub(super) fn quantize_q5_k(x: &[f32], b: &mut [u8]) {
    let params = Qkx2 {
        nmax: 31,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: false,
    };
    let (dm, rest) = b.split_at_mut(4);
    let (scale_bytes, rest) = rest.split_at_mut(12);
    let (qh, ql) = rest.split_at_mut(32);
    let l = quantize_k4_scales(x, &params, scale_bytes, dm);
    qh.fill(0);
    for (e, &q) in l.iter().enumerate() {
        let sub = e / 32;
        let byte = 32 * (e / 64) + e % 32;
        if q > 15 {
            qh[e % 32] |= 1 << sub;
        }
        let low = q & 0xF;
        if sub % 2 == 0 {
            ql[byte] = low;
        } else {
            ql[byte] |= low << 4;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// q6_K

pub(super) fn dequantize_q6_k(b: &[u8], y: &mut [f32]) {
    let ql = &b[0..128];
    let qh = &b[128..192];
    let sc = &b[192..208];
    let d = get_f16(b, 208);
    for (e, v) in y.iter_mut().enumerate() {
        let n = e / 128;
        let k = (e % 128) / 32; // which of the four 32-element rows of this half
        let l = e % 32;
        let lbyte = ql[64 * n + l + 32 * (k % 2)];
        let low = if k < 2 { lbyte & 0xF } else { lbyte >> 4 };
        let high = (qh[32 * n + l] >> (2 * k)) & 3;
        let q = (low | (high << 4)) as i8 - 32;
        *v = d * sc[e / 16] as i8 as f32 * q as f32;
    }
}

pub(super) fn quantize_q6_k(x: &[f32], b: &mut [u8]) {
    let mut l = [0i8; QK_K];
    let mut scales = [0f32; 16];
    let mut max_scale = 0.0f32;
    let mut max_abs_scale = 0.0f32;
    for ib in 0..16 {
        let scale = make_qx_quants(32, &x[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16]);
        scales[ib] = scale;
        if scale.abs() > max_abs_scale {
            max_abs_scale = scale.abs();
            max_scale = scale;
        }
    }
    if max_abs_scale < GROUP_MAX_EPS {
        b.fill(0);
        return;
    }
    let (qbytes, rest) = b.split_at_mut(192);
    let (sc, dbytes) = rest.split_at_mut(16);
    let iscale = -128.0 / max_scale;
    put_f16(dbytes, 0, 1.0 / iscale);
    for ib in 0..16 {
        sc[ib] = nearest_int(iscale * scales[ib]).min(127) as i8 as u8;
    }
    let dd = get_f16(dbytes, 0);
    for j in 0..16 {
        let d = dd * sc[j] as i8 as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            let q = nearest_int(x[16 * j + ii] / d).clamp(-32, 31);
            l[16 * j + ii] = (q + 32) as i8;
        }
    }
    let (ql, qh) = qbytes.split_at_mut(128);
    for n in 0..2 {
        let lb = &l[128 * n..128 * n + 128];
        for k in 0..32 {
            let q = |r: usize| lb[k + 32 * r] as u8;
            ql[64 * n + k] = (q(0) & 0xF) | ((q(2) & 0xF) << 4);
            ql[64 * n + k + 32] = (q(1) & 0xF) | ((q(3) & 0xF) << 4);
            qh[32 * n + k] = (q(0) >> 4) | ((q(1) >> 4) << 2) | ((q(2) >> 4) << 4) | ((q(3) >> 4) << 6);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// q8_K

pub(super) fn dequantize_q8_k(b: &[u8], y: &mut [f32]) {
    let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    for (v, &q) in y.iter_mut().zip(&b[4..260]) {
        *v = d * q as i8 as f32;
    }
}

pub(super) fn quantize_q8_k(x: &[f32], b: &mut [u8]) {
    let (amax, max) = abs_max_signed(x);
    b.fill(0);
    if amax == 0.0 {
        return;
    }
    let iscale = -127.0 / max;
    let (dbytes, rest) = b.split_at_mut(4);
    let (qs, bsums) = rest.split_at_mut(QK_K);
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = nearest_int(iscale * v).min(127) as i8 as u8;
    }
    for j in 0..16 {
        let sum: i32 = qs[16 * j..16 * j + 16].iter().map(|&q| q as i8 as i32).sum();
        bsums[2 * j..2 * j + 2].copy_from_slice(&(sum as i16).to_le_bytes());
    }
    dbytes.copy_from_slice(&(1.0 / iscale).to_le_bytes());
}
