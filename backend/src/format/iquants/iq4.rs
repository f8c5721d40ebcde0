//! iq4_nl and iq4_xs: 4-bit indices into ggml's 16 non-linear levels, with ggml's quantizers
//! (no importance matrix).

use super::u16_at;
use crate::format::{get_f16, nearest_int, put_f16};

/// ggml's `kvalues_iq4nl`: the 16 levels of iq4_nl and iq4_xs.
pub(in crate::format) const KVALUES_IQ4NL: [i8; 16] =
    [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

pub(in crate::format) fn dequantize_iq4_nl(b: &[u8], y: &mut [f32]) {
    let d = get_f16(b, 0);
    for j in 0..16 {
        let q = b[2 + j];
        y[j] = d * KVALUES_IQ4NL[(q & 0xF) as usize] as f32;
        y[j + 16] = d * KVALUES_IQ4NL[(q >> 4) as usize] as f32;
    }
}

pub(in crate::format) fn dequantize_iq4_xs(b: &[u8], y: &mut [f32]) {
    let d = get_f16(b, 0);
    let scales_h = u16_at(b, 2);
    let scales_l = &b[4..8];
    let qs = &b[8..136];
    for ib in 0..8 {
        let ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) as i32 | ((((scales_h >> (2 * ib)) & 3) as i32) << 4);
        let dl = d * (ls - 32) as f32;
        for j in 0..16 {
            let q = qs[16 * ib + j];
            y[32 * ib + j] = dl * KVALUES_IQ4NL[(q & 0xF) as usize] as f32;
            y[32 * ib + j + 16] = dl * KVALUES_IQ4NL[(q >> 4) as usize] as f32;
        }
    }
}

/// ggml's `best_index_int8`: the index of the level of the sorted `values` nearest to `x`
/// (upper level on exact midpoints), found by a branch-free binary search on doubled values.
fn best_index_int8(values: &[i8], x: f32) -> usize {
    let x2 = x + x;
    let mut idx = 0;
    let mut step = values.len() >> 1;
    while step > 0 {
        let j = idx + step;
        if x2 >= (values[j - 1] as i32 + values[j] as i32) as f32 {
            idx = j;
        }
        step >>= 1;
    }
    idx
}

/// The per-32-element scale search of ggml's `quantize_row_iq4_nl_impl` (no importance
/// weights, so each value is weighted by x², and `ntry = 7` as `ggml_quantize_chunk` uses).
/// Returns the scale and writes the level indices to `l`.
fn iq4_block_scale(xb: &[f32], l: &mut [u8]) -> f32 {
    const NTRY: i32 = 7;
    let values = &KVALUES_IQ4NL;
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in xb {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < 1e-15 {
        l.fill(0);
        return 0.0;
    }
    let sums = |id: f32, mut l_out: Option<&mut [u8]>| {
        let mut sumqx = 0.0f32;
        let mut sumq2 = 0.0f32;
        for (j, &v) in xb.iter().enumerate() {
            let idx = best_index_int8(values, id * v);
            if let Some(l_out) = l_out.as_deref_mut() {
                l_out[j] = idx as u8;
            }
            let q = values[idx] as f32;
            let w = v * v;
            sumqx += w * q * v;
            sumq2 += w * q * q;
        }
        (sumqx, sumq2)
    };
    let d = -max / values[0] as f32;
    let (sumqx, sumq2) = sums(1.0 / d, Some(l));
    let mut d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for itry in -NTRY..=NTRY {
        let id = (itry + values[0] as i32) as f32 / max;
        let (sumqx, sumq2) = sums(id, None);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

/// Packs 32 level indices per 16 bytes: element `j` low nibble of byte `j`, `j+16` high.
fn pack_nibbles(l: &[u8], qs: &mut [u8]) {
    for (i, chunk) in l.chunks_exact(32).enumerate() {
        for j in 0..16 {
            qs[16 * i + j] = chunk[j] | (chunk[j + 16] << 4);
        }
    }
}

pub(in crate::format) fn quantize_iq4_nl(x: &[f32], b: &mut [u8]) {
    let mut l = [0u8; 32];
    let scale = iq4_block_scale(x, &mut l);
    put_f16(b, 0, scale);
    let id = if scale != 0.0 { 1.0 / scale } else { 0.0 };
    for (lj, &v) in l.iter_mut().zip(x) {
        *lj = best_index_int8(&KVALUES_IQ4NL, id * v) as u8;
    }
    pack_nibbles(&l, &mut b[2..18]);
}

pub(in crate::format) fn quantize_iq4_xs(x: &[f32], b: &mut [u8]) {
    let mut l = [0u8; 256];
    let mut scales = [0f32; 8];
    let mut max_scale = 0.0f32;
    let mut amax_scale = 0.0f32;
    for ib in 0..8 {
        let d = iq4_block_scale(&x[32 * ib..32 * ib + 32], &mut l[32 * ib..32 * ib + 32]);
        scales[ib] = d;
        if d.abs() > amax_scale {
            amax_scale = d.abs();
            max_scale = d;
        }
    }
    let d = -max_scale / 32.0;
    put_f16(b, 0, d);
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut scales_h = 0u16;
    for ib in 0..8 {
        let ls = nearest_int(id * scales[ib]).clamp(-32, 31);
        let dl = d * ls as f32;
        let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
        for j in 0..32 {
            l[32 * ib + j] = best_index_int8(&KVALUES_IQ4NL, idl * x[32 * ib + j]) as u8;
        }
        let ls = (ls + 32) as u8;
        if ib % 2 == 0 {
            b[4 + ib / 2] = ls & 0xF;
        } else {
            b[4 + ib / 2] |= (ls & 0xF) << 4;
        }
        scales_h |= ((ls >> 4) as u16) << (2 * ib);
    }
    b[2..4].copy_from_slice(&scales_h.to_le_bytes());
    pack_nibbles(&l, &mut b[8..136]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_index_picks_the_nearest_level() {
        for (i, &v) in KVALUES_IQ4NL.iter().enumerate() {
            assert_eq!(best_index_int8(&KVALUES_IQ4NL, v as f32), i);
        }
        assert_eq!(best_index_int8(&KVALUES_IQ4NL, -1000.0), 0);
        assert_eq!(best_index_int8(&KVALUES_IQ4NL, 1000.0), 15);
        // Exact midpoints go up: (-10 + 1) / 2.
        assert_eq!(best_index_int8(&KVALUES_IQ4NL, -4.5), 8);
        assert_eq!(best_index_int8(&KVALUES_IQ4NL, -4.6), 7);
    }
}
