//! The GLU family on the GPU (REGLU, GEGLU, SWIGLU, SWIGLU_OAI, GEGLU_ERF, GEGLU_QUICK): ggml's
//! fused form (the halves of one tensor's rows, `swapped` or not) and split form (two tensors).
//! GEGLU and GEGLU_QUICK round through f16 as ggml's CPU tables do.

pub mod encode;
pub mod plan;

use crate::error::{BackendError, Result};
use crate::exec::Stream;
use crate::ggml_type::GgmlType;
use crate::memory::{DeviceTensor, check_output_disjoint};
use crate::ops::Env;
use crate::ops::elementwise::float_type;
pub use crate::reference::{GluOp, GluParams};
use crate::tensor::Layout;
pub use plan::{GluPlan, Problem};

/// dst's extents for `a` (and `b` in the split form).
pub fn dst_ne(a: &Layout, split: bool) -> [usize; 4] {
    let n = if split { a.ne[0] } else { a.ne[0] / 2 };
    [n, a.ne[1], a.ne[2], a.ne[3]]
}

/// Checks the operands of a GLU without a device: the errors name the op, the operand and the
/// rule.
pub fn check(a: &Layout, b: Option<&Layout>, dst: &Layout, params: &GluParams) -> Result<()> {
    let op = params.op.name();
    let invalid = |why: String| Err(BackendError::InvalidOperands(format!("{op}: {why}")));
    float_type(op, "a", a.ty)?;
    if let Some(b) = b {
        if b.ty != a.ty || b.ne != a.ne {
            return invalid(format!("b {} {:?} must be like a {} {:?}", b.ty, b.ne, a.ty, a.ne));
        }
        if params.swapped {
            return invalid("swapped applies to the fused form only".into());
        }
    }
    let want = dst_ne(a, b.is_some());
    if dst.ty != a.ty || dst.ne != want {
        return invalid(format!("dst {} {:?} must be {} {want:?}", dst.ty, dst.ne, a.ty));
    }
    for (name, l) in [("a", Some(a)), ("b", b), ("dst", Some(dst))] {
        if let Some(l) = l
            && l.ne[0] > 1
            && !l.has_contiguous_rows()
        {
            return invalid(format!("{name}'s rows must be contiguous (nb0 = {})", l.nb[0]));
        }
    }
    if params.op == GluOp::SwigluOai {
        for (name, v) in [("alpha", params.alpha), ("limit", params.limit)] {
            if !v.is_finite() {
                return invalid(format!("{name} = {v} is not a finite number"));
            }
        }
        if params.limit < 0.0 {
            return invalid(format!("limit = {} is negative", params.limit));
        }
    }
    Ok(())
}

/// Records a GLU on `stream`: `a` f32 or f16 with contiguous rows; fused (`b` `None`): each
/// row's first `ne0/2` elements are the activation's input and the next `ne0/2` the gate (the
/// other way round when `swapped`); split: `b`, like `a`, is the gate. `dst` of `a`'s type,
/// `[n, ne1, ne2, ne3]`, disjoint from the inputs. Returns the plan.
pub fn glu(
    env: &Env,
    stream: &mut Stream,
    a: &DeviceTensor,
    b: Option<&DeviceTensor>,
    dst: &DeviceTensor,
    params: &GluParams,
) -> Result<GluPlan> {
    check(a.layout(), b.map(|b| b.layout()), dst.layout(), params)?;
    let mut operands = vec![a, dst];
    operands.extend(b);
    env.check_operands(&operands)?;
    env.check_stream(stream)?;
    let mut inputs = vec![("a", a)];
    inputs.extend(b.map(|b| ("b", b)));
    check_output_disjoint(params.op.name(), dst, &inputs)?;
    let problem = Problem {
        op: params.op,
        ty: a.layout().ty,
        dst_ne: dst.layout().ne,
        split: b.is_some(),
        swapped: params.swapped,
    };
    debug_assert!(matches!(problem.ty, GgmlType::F32 | GgmlType::F16));
    let plan = plan::plan(&problem, &env.facts())?;
    encode::encode(env, stream, &plan, a, b, dst, params)?;
    Ok(plan)
}
