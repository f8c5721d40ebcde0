//! The GLU family on the CPU: `act(x) · g` with the two halves of one tensor (fused) or two
//! tensors (split): REGLU, GEGLU, SWIGLU, SWIGLU_OAI, GEGLU_ERF, GEGLU_QUICK.

use std::fmt;

use super::elements::{finite, round_to, rows};
use super::{Result, row, shape_error};
use crate::ggml_type::GgmlType;
use crate::tensor::HostTensor;

/// One of ggml's gated linear units (`enum ggml_glu_op`, in its order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GluOp {
    /// `max(x, 0)·g`.
    Reglu,
    /// `gelu(x)·g`, GELU's tanh approximation.
    Geglu,
    /// `silu(x)·g`.
    Swiglu,
    /// gpt-oss's clamped SwiGLU: `x' · σ(α·x') · (g' + 1)`, `x' = min(x, limit)`,
    /// `g' = clamp(g, −limit, limit)`.
    SwigluOai,
    /// `gelu(x)·g` with the exact erf GELU.
    GegluErf,
    /// `x·σ(1.702·x)·g`.
    GegluQuick,
}

impl GluOp {
    /// Every GLU op, in ggml's order.
    pub const ALL: [GluOp; 6] = [
        GluOp::Reglu,
        GluOp::Geglu,
        GluOp::Swiglu,
        GluOp::SwigluOai,
        GluOp::GegluErf,
        GluOp::GegluQuick,
    ];

    /// ggml's name (`SWIGLU`, …), as it starts a case string.
    pub fn name(self) -> &'static str {
        match self {
            GluOp::Reglu => "REGLU",
            GluOp::Geglu => "GEGLU",
            GluOp::Swiglu => "SWIGLU",
            GluOp::SwigluOai => "SWIGLU_OAI",
            GluOp::GegluErf => "GEGLU_ERF",
            GluOp::GegluQuick => "GEGLU_QUICK",
        }
    }
}

impl fmt::Display for GluOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The parameters of a GLU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GluParams {
    pub op: GluOp,
    /// Fused form only: the activation takes the second half and the gate the first (ggml's
    /// `ggml_glu_split` ignores it, as here).
    pub swapped: bool,
    /// SWIGLU_OAI's sigmoid slope (ignored by the others).
    pub alpha: f32,
    /// SWIGLU_OAI's clamp (ignored by the others).
    pub limit: f32,
}

impl GluParams {
    /// `op` unswapped, with gpt-oss's `alpha = 1.702`, `limit = 7`.
    pub fn new(op: GluOp) -> GluParams {
        GluParams {
            op,
            swapped: false,
            alpha: 1.702,
            limit: 7.0,
        }
    }
}

const SQRT_2_OVER_PI: f32 = 0.797_884_560_802_865_4_f64 as f32;
const SQRT_2_INV: f32 = std::f32::consts::FRAC_1_SQRT_2;
const GELU_COEF_A: f32 = 0.044_715;
const GELU_QUICK_COEF: f32 = -1.702;

fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)).tanh())
}

fn gelu_quick(x: f32) -> f32 {
    x * (1.0 / (1.0 + (GELU_QUICK_COEF * x).exp()))
}

/// `f` looked up as ggml's CPU tables hold it: at `x` rounded to f16, the result rounded to f16.
fn f16_table(f: fn(f32) -> f32, x: f32) -> f32 {
    let at = half::f16::from_f32(x).to_f32();
    half::f16::from_f32(f(at)).to_f32()
}

/// One output of `op` for activation input `x` and gate `g`, as ggml's CPU computes it for
/// tensors of type `ty` (before the rounding to `ty`). GEGLU and GEGLU_QUICK read ggml's f16
/// tables (`GGML_GELU_FP16`, `GGML_GELU_QUICK_FP16`, on by default): the f32 GEGLU uses the table
/// only for −10 < x < 10 (0 below, `x·g` above).
fn unit(p: &GluParams, ty: GgmlType, x: f32, g: f32) -> f32 {
    match p.op {
        GluOp::Reglu => {
            if x > 0.0 {
                x * g
            } else {
                0.0
            }
        }
        GluOp::Geglu => match ty {
            GgmlType::F32 if x <= -10.0 => 0.0,
            GgmlType::F32 if x >= 10.0 => x * g,
            _ => f16_table(gelu, x) * g,
        },
        GluOp::Swiglu => x / (1.0 + (-x).exp()) * g,
        GluOp::SwigluOai => {
            let x = x.min(p.limit);
            let g = g.clamp(-p.limit, p.limit);
            x / (1.0 + (p.alpha * -x).exp()) * (g + 1.0)
        }
        GluOp::GegluErf => 0.5 * x * (1.0 + libm::erff(x * SQRT_2_INV)) * g,
        GluOp::GegluQuick => f16_table(gelu_quick, x) * g,
    }
}

/// ggml's GLU ops.
///
/// - Fused (`b` is `None`): each row of `a` (`[2n (+1), …]`) holds the activation input in
///   elements `0..n` and the gate in `n..2n` (the other way round when `swapped`), `n = ne0/2`
///   (an odd last element is unused, as in ggml); the result is `[n, ne1, ne2, ne3]`.
/// - Split: `a` is the activation input and `b` the gate, both `[n, ne1, ne2, ne3]` of one type.
///
/// `a` and `b` are f32 or f16 of any layout. Values are computed in f32 as ggml's CPU does (see
/// [`GluOp`]; GEGLU and GEGLU_QUICK through ggml's f16 tables) and rounded to the input type.
/// The result is contiguous.
pub fn glu(a: &HostTensor, b: Option<&HostTensor>, params: &GluParams) -> Result<Vec<f32>> {
    let op = params.op.name();
    let ty = a.layout.ty;
    if !matches!(ty, GgmlType::F32 | GgmlType::F16) {
        return shape_error(op, format!("a must be f32 or f16, not {ty}"));
    }
    if params.op == GluOp::SwigluOai {
        finite(op, "alpha", params.alpha)?;
        finite(op, "limit", params.limit)?;
        if params.limit < 0.0 {
            return shape_error(op, format!("limit = {} is negative", params.limit));
        }
    }
    let ne = a.layout.ne;
    let n = match b {
        None => ne[0] / 2,
        Some(b) => {
            if b.layout.ne != ne || b.layout.ty != ty {
                return shape_error(
                    op,
                    format!("b {} {:?} is not like a {ty} {ne:?}", b.layout.ty, b.layout.ne),
                );
            }
            ne[0]
        }
    };
    let mut out = Vec::with_capacity(n * a.layout.rows());
    for (i1, i2, i3) in rows(ne) {
        let ra = row(op, "a", a, i1, i2, i3)?;
        let (x, g) = match b {
            Some(b) => (ra, row(op, "b", b, i1, i2, i3)?),
            None if params.swapped => (ra[n..2 * n].to_vec(), ra[..n].to_vec()),
            None => (ra[..n].to_vec(), ra[n..2 * n].to_vec()),
        };
        out.extend(x.iter().zip(&g).map(|(&x, &g)| round_to(ty, unit(params, ty, x, g))));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::ReferenceError;

    fn t(ty: GgmlType, ne: [usize; 4], values: &[f32]) -> HostTensor {
        HostTensor::from_f32(ty, ne, values).unwrap()
    }

    fn close(got: &[f32], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!(
                (f64::from(*g) - w).abs() <= tol * w.abs().max(1.0),
                "got {got:?}, want {want:?}"
            );
        }
    }

    fn silu(x: f64) -> f64 {
        x / (1.0 + (-x).exp())
    }

    #[test]
    fn fused_halves_and_swapped() {
        // Row [x0, x1 | g0, g1] = [1, -2 | 3, 4].
        let a = t(GgmlType::F32, [4, 1, 1, 1], &[1.0, -2.0, 3.0, 4.0]);
        let p = GluParams::new(GluOp::Swiglu);
        close(&glu(&a, None, &p).unwrap(), &[silu(1.0) * 3.0, silu(-2.0) * 4.0], 1e-6);
        let swapped = GluParams { swapped: true, ..p };
        close(&glu(&a, None, &swapped).unwrap(), &[silu(3.0), silu(4.0) * -2.0], 1e-6);
        let relu = GluParams::new(GluOp::Reglu);
        assert_eq!(glu(&a, None, &relu).unwrap(), vec![3.0, 0.0]);
        // An odd row: n = 5/2 = 2 and the last element is unused.
        let odd = t(GgmlType::F32, [5, 1, 1, 1], &[1.0, 2.0, 3.0, 4.0, 99.0]);
        assert_eq!(glu(&odd, None, &relu).unwrap(), vec![3.0, 8.0]);
    }

    #[test]
    fn split_form_and_views() {
        let a = t(GgmlType::F32, [2, 1, 1, 1], &[0.5, -0.5]);
        let b = t(GgmlType::F32, [2, 1, 1, 1], &[2.0, 2.0]);
        let erf = glu(&a, Some(&b), &GluParams::new(GluOp::GegluErf)).unwrap();
        // 0.5·x·(1 + erf(x/√2))·g: erf(0.5/√2) = 0.3829249225480262.
        let e = 0.382_924_922_548_026_2;
        close(&erf, &[0.5 * 0.5 * (1.0 + e) * 2.0, 0.5 * -0.5 * (1.0 - e) * 2.0], 1e-6);
        // A view of the first 2 of 6 elements per row (upstream's v=1), split form.
        let mut va = t(GgmlType::F32, [6, 1, 1, 1], &[2.0, 3.0, 9.0, 9.0, 9.0, 9.0]);
        va.layout.ne = [2, 1, 1, 1];
        let out = glu(&va, Some(&b), &GluParams::new(GluOp::Reglu)).unwrap();
        assert_eq!(out, vec![4.0, 6.0]);
        let c = t(GgmlType::F32, [3, 1, 1, 1], &[0.0; 3]);
        assert!(matches!(
            glu(&a, Some(&c), &GluParams::new(GluOp::Reglu)),
            Err(ReferenceError::Shape { .. })
        ));
    }

    #[test]
    fn gelu_variants_use_ggml_tables() {
        // x = 0.3 is not an f16 value: the table reads gelu at f16(0.3) and rounds the result.
        let a = t(GgmlType::F32, [1, 1, 1, 1], &[0.3]);
        let g = t(GgmlType::F32, [1, 1, 1, 1], &[1.0]);
        let x = f64::from(half::f16::from_f32(0.3).to_f32());
        let tanh_gelu = 0.5 * x * (1.0 + (0.797_884_560_802_865_4 * x * (1.0 + 0.044_715 * x * x)).tanh());
        let want = f64::from(half::f16::from_f64(tanh_gelu).to_f32());
        close(
            &glu(&a, Some(&g), &GluParams::new(GluOp::Geglu)).unwrap(),
            &[want],
            1e-7,
        );
        let quick = x / (1.0 + (-1.702 * x).exp());
        let want = f64::from(half::f16::from_f64(quick).to_f32());
        close(
            &glu(&a, Some(&g), &GluParams::new(GluOp::GegluQuick)).unwrap(),
            &[want],
            1e-7,
        );
        // Beyond ±10 the f32 GEGLU skips the table: x·g and 0.
        let big = t(GgmlType::F32, [2, 1, 1, 1], &[10.3, -10.3]);
        let g2 = t(GgmlType::F32, [2, 1, 1, 1], &[2.0, 2.0]);
        close(
            &glu(&big, Some(&g2), &GluParams::new(GluOp::Geglu)).unwrap(),
            &[20.6, 0.0],
            1e-6,
        );
    }

    #[test]
    fn swiglu_oai_clamps() {
        // x = 9 is clamped to limit 7, g = -9 to -7: 7·σ(1.702·7)·(−6).
        let a = t(GgmlType::F32, [1, 1, 1, 1], &[9.0]);
        let b = t(GgmlType::F32, [1, 1, 1, 1], &[-9.0]);
        let p = GluParams::new(GluOp::SwigluOai);
        let want = 7.0 / (1.0 + (-1.702f64 * 7.0).exp()) * -6.0;
        close(&glu(&a, Some(&b), &p).unwrap(), &[want], 1e-6);
        for limit in [f32::NAN, -1.0] {
            assert!(glu(&a, Some(&b), &GluParams { limit, ..p }).is_err());
        }
    }

    #[test]
    fn f16_inputs_give_f16_results() {
        let a = t(GgmlType::F16, [2, 1, 1, 1], &[1.0, 1.0 / 3.0]);
        let out = glu(&a, None, &GluParams::new(GluOp::Reglu)).unwrap();
        assert_eq!(out, vec![half::f16::from_f32(1.0 / 3.0).to_f32()]);
        let q = HostTensor::from_f32(GgmlType::Q8_0, [32, 1, 1, 1], &[0.0; 32]).unwrap();
        assert!(glu(&q, None, &GluParams::new(GluOp::Reglu)).is_err());
    }
}
