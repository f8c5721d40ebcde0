//! RMS_NORM on the CPU, and the fused RMS_NORM × weight + bias that decoders run after it.

use super::elements::{can_repeat, finite, rows};
use super::{Result, row, shape_error};
use crate::ggml_type::GgmlType;
use crate::tensor::HostTensor;

const OP: &str = "RMS_NORM";
const FUSED: &str = "RMS_NORM_MUL_ADD";

/// The parameter of RMS_NORM.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmsNormParams {
    /// Added to the mean square before the square root; finite and ≥ 0 (ggml asserts `eps ≥ 0`).
    pub eps: f32,
}

impl RmsNormParams {
    fn check(&self, op: &'static str) -> Result<()> {
        finite(op, "eps", self.eps)?;
        if self.eps < 0.0 {
            return shape_error(op, format!("eps = {} is negative", self.eps));
        }
        Ok(())
    }
}

/// The scale ggml's CPU gives a row: squares in f32, summed in f64, the mean rounded to f32,
/// then `1/sqrt(mean + eps)` in f32.
fn row_scale(x: &[f32], eps: f32) -> f32 {
    let sum: f64 = x.iter().map(|&v| f64::from(v * v)).sum();
    let mean = (sum / x.len() as f64) as f32;
    1.0 / (mean + eps).sqrt()
}

fn check_input(op: &'static str, x: &HostTensor) -> Result<()> {
    if x.layout.ty != GgmlType::F32 {
        return shape_error(op, format!("x must be f32, not {}", x.layout.ty));
    }
    Ok(())
}

/// ggml's RMS_NORM over each row: `y = x / sqrt(mean(x²) + eps)`, computed as ggml's CPU does
/// (see `row_scale`). `x` is f32 of any layout (views of longer rows, permutations). The result
/// is contiguous f32 of `x`'s extents.
pub fn rms_norm(x: &HostTensor, params: RmsNormParams) -> Result<Vec<f32>> {
    params.check(OP)?;
    check_input(OP, x)?;
    let mut out = Vec::with_capacity(x.layout.elements());
    for (i1, i2, i3) in rows(x.layout.ne) {
        let r = row(OP, "x", x, i1, i2, i3)?;
        let s = row_scale(&r, params.eps);
        out.extend(r.iter().map(|&v| v * s));
    }
    Ok(out)
}

/// The fused `rms_norm(x) · weight + bias` (upstream's RMS_NORM_MUL_ADD): `weight` and `bias`
/// repeat over `x` as ggml's MUL and ADD broadcast (each extent of theirs divides `x`'s); either
/// may be left out. Rounded as the unfused ops are: the norm's f32 value, times the weight in
/// f32, plus the bias in f32, so it equals RMS_NORM then MUL then ADD exactly.
pub fn rms_norm_mul_add(
    x: &HostTensor,
    weight: Option<&HostTensor>,
    bias: Option<&HostTensor>,
    params: RmsNormParams,
) -> Result<Vec<f32>> {
    params.check(FUSED)?;
    check_input(FUSED, x)?;
    let ne = x.layout.ne;
    for (name, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t
            && !can_repeat(t.layout.ne, ne)
        {
            return shape_error(FUSED, format!("{name} {:?} does not repeat over x {ne:?}", t.layout.ne));
        }
    }
    // Rows of a broadcast operand, read once each.
    let operand_row = |name: &'static str, t: &HostTensor, i1: usize, i2: usize, i3: usize| {
        let [_, n1, n2, n3] = t.layout.ne;
        row(FUSED, name, t, i1 % n1, i2 % n2, i3 % n3)
    };
    let mut out = Vec::with_capacity(x.layout.elements());
    for (i1, i2, i3) in rows(ne) {
        let r = row(FUSED, "x", x, i1, i2, i3)?;
        let s = row_scale(&r, params.eps);
        let w = weight.map(|w| operand_row("weight", w, i1, i2, i3)).transpose()?;
        let b = bias.map(|b| operand_row("bias", b, i1, i2, i3)).transpose()?;
        out.extend(r.iter().enumerate().map(|(i0, &v)| {
            let mut y = v * s;
            if let Some(w) = &w {
                y *= w[i0 % w.len()];
            }
            if let Some(b) = &b {
                y += b[i0 % b.len()];
            }
            y
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::ReferenceError;
    use crate::reference::binary::{BinaryOp, binary};
    use crate::tensor::Layout;

    fn f32_tensor(ne: [usize; 4], values: &[f32]) -> HostTensor {
        HostTensor::from_f32(GgmlType::F32, ne, values).unwrap()
    }

    const EPS0: RmsNormParams = RmsNormParams { eps: 0.0 };

    #[test]
    fn normalises_each_row() {
        // [3, 4]: mean square 12.5, so y = x / sqrt(12.5). [1, 1]: y = x.
        let x = f32_tensor([2, 2, 1, 1], &[3.0, 4.0, 1.0, 1.0]);
        let y = rms_norm(&x, EPS0).unwrap();
        let s = 1.0 / 12.5f64.sqrt();
        for (got, want) in y.iter().zip([3.0 * s, 4.0 * s, 1.0, 1.0]) {
            assert!((f64::from(*got) - want).abs() < 1e-6, "{y:?}");
        }
        // eps joins the mean square: [2, 2] with eps 4 gives 2 / sqrt(8).
        let x = f32_tensor([2, 1, 1, 1], &[2.0, 2.0]);
        let y = rms_norm(&x, RmsNormParams { eps: 4.0 }).unwrap();
        assert!((f64::from(y[0]) - 2.0 / 8f64.sqrt()).abs() < 1e-6);
        // A zero row with eps 0 divides by zero: NaN, as ggml's CPU gives (0 · inf).
        let zero = f32_tensor([2, 1, 1, 1], &[0.0, 0.0]);
        assert!(rms_norm(&zero, EPS0).unwrap()[0].is_nan());
        assert_eq!(rms_norm(&zero, RmsNormParams { eps: 1e-6 }).unwrap(), vec![0.0, 0.0]);
    }

    #[test]
    fn views_read_only_their_elements() {
        // A [2, 2] view of a [4, 2] tensor: rows [3, 4] and [6, 8]; the others must not count.
        let x = HostTensor {
            layout: Layout {
                ne: [2, 2, 1, 1],
                ..Layout::contiguous(GgmlType::F32, [4, 2, 1, 1]).unwrap()
            },
            data: f32_tensor([4, 2, 1, 1], &[3.0, 4.0, 100.0, 100.0, 6.0, 8.0, 100.0, 100.0]).data,
        };
        let y = rms_norm(&x, EPS0).unwrap();
        let s = 12.5f64.sqrt();
        // [6, 8] = 2·[3, 4]: the norm does not change with the scale.
        let want = [3.0 / s, 4.0 / s, 6.0 / (2.0 * s), 8.0 / (2.0 * s)];
        for (got, want) in y.iter().zip(want) {
            assert!((f64::from(*got) - want).abs() < 1e-6, "{y:?}");
        }
    }

    #[test]
    fn bad_parameters_and_types_are_refused() {
        let x = f32_tensor([2, 1, 1, 1], &[1.0, 2.0]);
        for eps in [f32::NAN, f32::INFINITY, -1e-6] {
            assert!(matches!(
                rms_norm(&x, RmsNormParams { eps }),
                Err(ReferenceError::Shape { .. })
            ));
        }
        let h = HostTensor::from_f32(GgmlType::F16, [2, 1, 1, 1], &[1.0, 2.0]).unwrap();
        assert!(rms_norm(&h, EPS0).is_err());
        let w = f32_tensor([3, 1, 1, 1], &[1.0; 3]);
        assert!(rms_norm_mul_add(&x, Some(&w), None, EPS0).is_err());
    }

    #[test]
    fn fused_equals_the_unfused_ops() {
        // x [4, 3, 2, 1], weight [4, 1, 2, 1] and bias [2, 3, 1, 1] broadcast over it.
        let xv: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin() * 5.0).collect();
        let x = f32_tensor([4, 3, 2, 1], &xv);
        let w = f32_tensor([4, 1, 2, 1], &(0..8).map(|i| 0.5 + i as f32 * 0.25).collect::<Vec<_>>());
        let b = f32_tensor([2, 3, 1, 1], &(0..6).map(|i| i as f32 - 2.5).collect::<Vec<_>>());
        let p = RmsNormParams { eps: 1e-5 };
        let fused = rms_norm_mul_add(&x, Some(&w), Some(&b), p).unwrap();
        let normed = f32_tensor([4, 3, 2, 1], &rms_norm(&x, p).unwrap());
        let scaled = f32_tensor([4, 3, 2, 1], &binary(BinaryOp::Mul, &normed, &w).unwrap());
        let unfused = binary(BinaryOp::Add, &scaled, &b).unwrap();
        assert_eq!(fused, unfused);
        // And by hand for one element: row (1, 1, 0) is x[16..20], weight row 1, bias row 1.
        let r = &xv[16..20];
        let s = 1.0 / (r.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>() / 4.0 + 1e-5).sqrt();
        let want = f64::from(r[3]) * s * (0.5 + 7.0 * 0.25) + (3.0 - 2.5);
        assert!((f64::from(fused[19]) - want).abs() < 1e-5, "{} vs {want}", fused[19]);
        // Without weight and bias it is the norm.
        assert_eq!(rms_norm_mul_add(&x, None, None, p).unwrap(), rms_norm(&x, p).unwrap());
    }
}
