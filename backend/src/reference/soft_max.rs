//! SOFT_MAX on the CPU: ggml's `soft_max_ext`, a row softmax of `x·scale + slope·mask` with
//! attention sinks and ALiBi.

use super::elements::{finite, rows};
use super::flash_attn::alibi_slopes;
use super::{ReferenceError, Result, row, shape_error};
use crate::ggml_type::GgmlType;
use crate::tensor::HostTensor;

const OP: &str = "SOFT_MAX";

/// The parameters of SOFT_MAX (ggml's `ggml_soft_max_ext`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoftMaxParams {
    /// Multiplies `x` before the mask is added.
    pub scale: f32,
    /// ALiBi: 0 for none, else the slopes of FLASH_ATTN_EXT's over the heads (`x`'s dim 2).
    pub max_bias: f32,
}

/// ggml's SOFT_MAX over each row of `x` (f32 `[n, rows, heads, seqs]`, any layout):
///
/// `s_i = x_i·scale + slope_h·mask[i, i1, h mod m2, i3 mod m3]`, then
/// `y_i = e^(s_i−M) / (Σ_j e^(s_j−M) + e^(sink_h−M))` with `M` the max over the row and the sink.
///
/// - `mask` (optional) f32 or f16 `[≥ n, ≥ rows, m2, m3]` with `m2 | heads`, `m3 | seqs`: row
///   `i1` of head `h` reads mask row `i1` of `(h mod m2, i3 mod m3)`, as ggml broadcasts it;
/// - `sinks` (optional) f32 `[≥ heads]`: one logit per head that joins the max and the sum only;
/// - the ALiBi slope of head `h` is 1 when `max_bias` is 0, else as FLASH_ATTN_EXT's.
///
/// Sums are in f64. A row whose every score is −∞ (and no sink) gives NaN, as ggml's CPU does
/// (0/0). The result is contiguous f32 of `x`'s extents. Non-finite parameters are refused.
pub fn soft_max(
    x: &HostTensor,
    mask: Option<&HostTensor>,
    sinks: Option<&HostTensor>,
    params: SoftMaxParams,
) -> Result<Vec<f32>> {
    finite(OP, "scale", params.scale)?;
    finite(OP, "max_bias", params.max_bias)?;
    if params.max_bias < 0.0 {
        return shape_error(OP, format!("max_bias = {} is negative", params.max_bias));
    }
    if x.layout.ty != GgmlType::F32 {
        return shape_error(OP, format!("x must be f32, not {}", x.layout.ty));
    }
    let ne = x.layout.ne;
    let [n, n_rows, heads, seqs] = ne;
    if let Some(m) = mask {
        let [m0, m1, m2, m3] = m.layout.ne;
        if !matches!(m.layout.ty, GgmlType::F32 | GgmlType::F16) {
            return shape_error(OP, format!("mask must be f32 or f16, not {}", m.layout.ty));
        }
        let divides = |part: usize, whole: usize| part > 0 && whole.is_multiple_of(part);
        if m0 < n || m1 < n_rows || !divides(m2, heads) || !divides(m3, seqs) {
            return shape_error(
                OP,
                format!(
                    "mask {:?} does not cover x {ne:?} and broadcast over its heads",
                    m.layout.ne
                ),
            );
        }
    }
    let sinks = match sinks {
        Some(s) => {
            if s.layout.ty != GgmlType::F32 {
                return shape_error(OP, format!("sinks must be f32, not {}", s.layout.ty));
            }
            let values = s.to_f32().map_err(|source| ReferenceError::Format {
                op: OP,
                tensor: "sinks",
                source,
            })?;
            if values.len() < heads {
                return shape_error(OP, format!("{} sinks for {heads} heads", values.len()));
            }
            Some(values)
        }
        None => None,
    };
    let slopes = alibi_slopes(heads, params.max_bias);
    let scale = f64::from(params.scale);
    let mut out = Vec::with_capacity(x.layout.elements());
    for (i1, h, i3) in rows(ne) {
        let r = row(OP, "x", x, i1, h, i3)?;
        let m = match mask {
            Some(m) => Some(row(OP, "mask", m, i1, h % m.layout.ne[2], i3 % m.layout.ne[3])?),
            None => None,
        };
        let s: Vec<f64> = r
            .iter()
            .enumerate()
            .map(|(i, &v)| f64::from(v) * scale + m.as_ref().map_or(0.0, |m| slopes[h] * f64::from(m[i])))
            .collect();
        let sink = sinks.as_ref().map(|s| f64::from(s[h]));
        let max = s.iter().copied().chain(sink).fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|&v| (v - max).exp()).collect();
        let sum = e.iter().sum::<f64>() + sink.map_or(0.0, |k| (k - max).exp());
        out.extend(e.iter().map(|&v| (v / sum) as f32));
    }
    debug_assert_eq!(out.len(), n * n_rows * heads * seqs);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ty: GgmlType, ne: [usize; 4], values: &[f32]) -> HostTensor {
        HostTensor::from_f32(ty, ne, values).unwrap()
    }

    fn close(got: &[f32], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((f64::from(*g) - w).abs() < 1e-6, "got {got:?}, want {want:?}");
        }
    }

    fn softmax(s: &[f64]) -> Vec<f64> {
        let z: f64 = s.iter().map(|v| v.exp()).sum();
        s.iter().map(|v| v.exp() / z).collect()
    }

    const PLAIN: SoftMaxParams = SoftMaxParams {
        scale: 1.0,
        max_bias: 0.0,
    };

    #[test]
    fn rows_sum_to_one() {
        let x = t(GgmlType::F32, [3, 2, 1, 1], &[1.0, 2.0, 3.0, 0.0, 0.0, 0.0]);
        let y = soft_max(&x, None, None, PLAIN).unwrap();
        let mut want = softmax(&[1.0, 2.0, 3.0]);
        want.extend([1.0 / 3.0; 3]);
        close(&y, &want);
        // Scale multiplies before the softmax.
        let y = soft_max(
            &x,
            None,
            None,
            SoftMaxParams {
                scale: 0.5,
                max_bias: 0.0,
            },
        )
        .unwrap();
        close(&y[..3], &softmax(&[0.5, 1.0, 1.5]));
    }

    #[test]
    fn mask_broadcasts_over_heads_and_sinks_join_the_sum() {
        // x [2, 1, 2 heads, 1] all zero; an f16 mask [2, 1, 1, 1] = [0, -inf] for both heads.
        let x = t(GgmlType::F32, [2, 1, 2, 1], &[0.0; 4]);
        let mask = t(GgmlType::F16, [2, 1, 1, 1], &[0.0, f32::NEG_INFINITY]);
        let y = soft_max(&x, Some(&mask), None, PLAIN).unwrap();
        close(&y, &[1.0, 0.0, 1.0, 0.0]);
        // Sinks 0 and ln 3 per head: e^0 / (e^0 + e^sink).
        let sinks = t(GgmlType::F32, [2, 1, 1, 1], &[0.0, 3f32.ln()]);
        let y = soft_max(&x, Some(&mask), Some(&sinks), PLAIN).unwrap();
        close(&y, &[0.5, 0.0, 0.25, 0.0]);
    }

    #[test]
    fn alibi_slopes_scale_the_mask_per_head() {
        // 3 heads, max_bias 8: slopes 1/16, 1/256, 1/4 (see flash_attn). Mask [4, 0].
        let x = t(GgmlType::F32, [2, 1, 3, 1], &[0.0; 6]);
        let mask = t(GgmlType::F32, [2, 1, 1, 1], &[4.0, 0.0]);
        let y = soft_max(
            &x,
            Some(&mask),
            None,
            SoftMaxParams {
                scale: 1.0,
                max_bias: 8.0,
            },
        )
        .unwrap();
        let mut want = Vec::new();
        for slope in [1.0 / 16.0, 1.0 / 256.0, 0.25] {
            want.extend(softmax(&[4.0 * slope, 0.0]));
        }
        close(&y, &want);
    }

    #[test]
    fn bad_inputs_are_refused() {
        let x = t(GgmlType::F32, [2, 2, 2, 1], &[0.0; 8]);
        let short = t(GgmlType::F32, [2, 1, 1, 1], &[0.0; 2]);
        assert!(soft_max(&x, Some(&short), None, PLAIN).is_err());
        let three_heads = t(GgmlType::F32, [2, 2, 3, 1], &[0.0; 12]);
        assert!(soft_max(&x, Some(&three_heads), None, PLAIN).is_err());
        let one_sink = t(GgmlType::F32, [1, 1, 1, 1], &[0.0]);
        assert!(soft_max(&x, None, Some(&one_sink), PLAIN).is_err());
        for p in [
            SoftMaxParams {
                scale: f32::NAN,
                max_bias: 0.0,
            },
            SoftMaxParams {
                scale: 1.0,
                max_bias: f32::INFINITY,
            },
            SoftMaxParams {
                scale: 1.0,
                max_bias: -1.0,
            },
        ] {
            assert!(soft_max(&x, None, None, p).is_err());
        }
    }
}
