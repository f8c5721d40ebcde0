//! Rows converted to a destination type as ggml's CPU backend converts them in SET_ROWS and CPY
//! (its `from_float` of each type). That is the [`format`] module's quantization for every type
//! but iq4_nl: there ggml's CPU runs `quantize_row_iq4_nl_ref`, one pass without the scale
//! search that `ggml_quantize_chunk` (and so [`format::quantize`]) does.

use crate::format::{self, FormatError};
use crate::ggml_type::GgmlType;

/// iq4_nl's 16 levels (ggml's `kvalues_iq4nl`).
const LEVELS: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/// The index of the level nearest to `x` (ggml's `best_index_int8`: the upper one on a midpoint).
fn nearest_level(x: f32) -> usize {
    let x2 = x + x;
    let (mut idx, mut step) = (0, LEVELS.len() >> 1);
    while step > 0 {
        let j = idx + step;
        if x2 >= f32::from(i16::from(LEVELS[j - 1]) + i16::from(LEVELS[j])) {
            idx = j;
        }
        step >>= 1;
    }
    idx
}

/// One iq4_nl block as `quantize_row_iq4_nl_ref` writes it: levels from the scale `max/−127`,
/// then the least-squares scale for those levels (weights x²), stored as f16.
fn iq4_nl_block(x: &[f32], out: &mut [u8]) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    let mut levels = [0u8; 32];
    let mut d = 0.0f32;
    if amax >= 1e-15 {
        let id = 1.0 / (max / f32::from(LEVELS[0]));
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for (l, &v) in levels.iter_mut().zip(x) {
            let i = nearest_level(id * v);
            *l = i as u8;
            let (q, w) = (f32::from(LEVELS[i]), v * v);
            sumqx += w * q * v;
            sumq2 += w * q * q;
        }
        d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    }
    out[..2].copy_from_slice(&half::f16::from_f32(d).to_le_bytes());
    for j in 0..16 {
        out[2 + j] = levels[j] | (levels[j + 16] << 4);
    }
}

/// `values` converted to `ty` as ggml's CPU `from_float` does.
pub(crate) fn from_float(ty: GgmlType, values: &[f32]) -> Result<Vec<u8>, FormatError> {
    if ty != GgmlType::IQ4_NL {
        return format::quantize(ty, values);
    }
    let bytes = ty
        .row_bytes(values.len())
        .ok_or(FormatError::Layout(format!("{} elements of {ty}", values.len())))?;
    let mut out = vec![0u8; bytes];
    for (x, b) in values.chunks_exact(32).zip(out.chunks_exact_mut(ty.type_size())) {
        iq4_nl_block(x, b);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iq4_nl_takes_one_pass() {
        // A block whose largest magnitude is −1 and the rest 0.5: the levels come from the scale
        // −1/−127, so −1 → level −127 (index 0) and 0.5 → 63.5 → 69 (index 13, past the
        // midpoint 61 of 53 and 69); the scale is then Σw·q·x / Σw·q² (w = x²) over those levels.
        let mut x = [0.5f32; 32];
        x[0] = -1.0;
        let b = from_float(GgmlType::IQ4_NL, &x).unwrap();
        assert_eq!(b[2] & 0xf, 0);
        assert_eq!(b[3] & 0xf, 13);
        let (qx, q2) = (
            127.0 + 31.0 * 0.25 * 69.0 * 0.5,
            127.0f64 * 127.0 + 31.0 * 0.25 * 69.0 * 69.0,
        );
        let d = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
        assert_eq!(d, half::f16::from_f64(qx / q2).to_f32());
        // Other types are the format module's.
        let y: Vec<f32> = (0..32).map(|i| i as f32 / 7.0).collect();
        assert_eq!(
            from_float(GgmlType::Q4_0, &y).unwrap(),
            format::quantize(GgmlType::Q4_0, &y).unwrap()
        );
        assert_eq!(from_float(GgmlType::IQ4_NL, &[0.0; 32]).unwrap(), vec![0; 18]);
        assert!(from_float(GgmlType::IQ4_NL, &[0.0; 31]).is_err());
    }
}
