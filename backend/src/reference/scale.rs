//! SCALE on the CPU: `x·scale + bias`.

use super::elements::{finite, rows};
use super::{Result, row, shape_error};
use crate::ggml_type::GgmlType;
use crate::tensor::HostTensor;

const OP: &str = "SCALE";

/// The parameters of SCALE (ggml's `ggml_scale_bias`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleParams {
    pub scale: f32,
    /// Added after the product (0 for plain `ggml_scale`).
    pub bias: f32,
}

/// ggml's SCALE: `y = x·scale + bias` element by element, in f32 with one rounding (a fused
/// multiply-add, as ggml's CPU `ggml_vec_mad1_f32` does on x86; without a bias it is the
/// rounded product either way). `x` is f32 (ggml's CPU takes no other type), any layout;
/// the result is contiguous with `x`'s extents. Non-finite parameters are refused.
pub fn scale(x: &HostTensor, params: ScaleParams) -> Result<Vec<f32>> {
    finite(OP, "scale", params.scale)?;
    finite(OP, "bias", params.bias)?;
    if x.layout.ty != GgmlType::F32 {
        return shape_error(OP, format!("x must be f32, not {}", x.layout.ty));
    }
    let mut out = Vec::with_capacity(x.layout.elements());
    for (i1, i2, i3) in rows(x.layout.ne) {
        let r = row(OP, "x", x, i1, i2, i3)?;
        out.extend(r.iter().map(|&v| v.mul_add(params.scale, params.bias)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::ReferenceError;

    #[test]
    fn scales_then_adds() {
        let x = HostTensor::from_f32(GgmlType::F32, [2, 2, 1, 1], &[1.0, -2.0, 0.5, 0.0]).unwrap();
        let p = ScaleParams { scale: 2.0, bias: 0.0 };
        assert_eq!(scale(&x, p).unwrap(), vec![2.0, -4.0, 1.0, 0.0]);
        let p = ScaleParams { scale: 2.0, bias: 1.0 };
        assert_eq!(scale(&x, p).unwrap(), vec![3.0, -3.0, 2.0, 1.0]);
        // A transposed view reads by the view's order.
        let t = HostTensor {
            layout: x.layout.permute([1, 0, 2, 3]).unwrap(),
            data: x.data.clone(),
        };
        let p = ScaleParams { scale: -1.0, bias: 0.5 };
        assert_eq!(scale(&t, p).unwrap(), vec![-0.5, 0.0, 2.5, 0.5]);
    }

    #[test]
    fn non_finite_parameters_and_other_types_are_refused() {
        let x = HostTensor::from_f32(GgmlType::F32, [1, 1, 1, 1], &[1.0]).unwrap();
        for p in [
            ScaleParams {
                scale: f32::NAN,
                bias: 0.0,
            },
            ScaleParams {
                scale: 1.0,
                bias: f32::INFINITY,
            },
        ] {
            assert!(matches!(scale(&x, p), Err(ReferenceError::Shape { .. })));
        }
        let h = HostTensor::from_f32(GgmlType::F16, [1, 1, 1, 1], &[1.0]).unwrap();
        assert!(scale(&h, ScaleParams { scale: 1.0, bias: 0.0 }).is_err());
    }
}
