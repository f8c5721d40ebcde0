//! ADD, SUB, MUL and DIV on the GPU, with ggml's broadcasting (`b` repeats over `a` in every
//! dimension), sources of any layout whose strides are whole elements, and ggml's in-place form
//! (dst the very tensor `a`).

pub mod encode;
pub mod plan;

use crate::error::{BackendError, Result};
use crate::exec::Stream;
use crate::memory::{DeviceTensor, check_output_disjoint};
use crate::ops::Env;
use crate::ops::elementwise::{float_type, units};
pub use crate::reference::BinaryOp;
pub use plan::{BinaryPlan, Problem};

/// Checks the operands of `dst = a op b` (types, ggml's broadcasting, dst like a) without a
/// device: the errors name the op, the operand and the rule.
pub fn check(op: BinaryOp, a: &crate::Layout, b: &crate::Layout, dst: &crate::Layout) -> Result<()> {
    float_type(op.name(), "a", a.ty)?;
    float_type(op.name(), "b", b.ty)?;
    if dst.ty != a.ty || dst.ne != a.ne {
        return Err(BackendError::InvalidOperands(format!(
            "{op}: dst {} {:?} must be like a {} {:?} (ggml's dst of a binary op)",
            dst.ty, dst.ne, a.ty, a.ne
        )));
    }
    if !b.ne.iter().zip(&a.ne).all(|(&s, &n)| s > 0 && n.is_multiple_of(s)) {
        return Err(BackendError::InvalidOperands(format!(
            "{op}: b {:?} does not repeat over a {:?} (each of b's extents must divide a's)",
            b.ne, a.ne
        )));
    }
    Ok(())
}

/// Records `dst = a op b` on `stream`: `a` and `b` f32 or f16 of any layout (strides whole
/// elements), `b`'s extents each dividing `a`'s (it repeats), `dst` of `a`'s type and extents,
/// disjoint from both, or `a` itself (in place; `b` then disjoint from it). Returns the plan.
pub fn binary(
    env: &Env,
    stream: &mut Stream,
    op: BinaryOp,
    a: &DeviceTensor,
    b: &DeviceTensor,
    dst: &DeviceTensor,
) -> Result<BinaryPlan> {
    check(op, a.layout(), b.layout(), dst.layout())?;
    env.check_operands(&[a, b, dst])?;
    env.check_stream(stream)?;
    let in_place = a.is_same_view(dst);
    if in_place {
        check_output_disjoint(op.name(), dst, &[("b", b)])?;
    } else {
        check_output_disjoint(op.name(), dst, &[("a", a), ("b", b)])?;
    }
    let limits = env.limits();
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let max = limits.max_storage_buffer_binding_size;
    let bindings = [a.binding(align, max)?, b.binding(align, max)?, dst.binding(align, max)?];
    let tensors = [a, b, dst];
    let names = ["a", "b", "dst"];
    for ((t, bind), name) in tensors.iter().zip(&bindings).zip(names) {
        if units(t, bind, 1).is_none() {
            return Err(BackendError::InvalidOperands(format!(
                "{op}: {name}'s start or strides are not whole {} elements",
                t.layout().ty
            )));
        }
    }
    let vec4_layout = b.layout().ne[0].is_multiple_of(4)
        && tensors
            .iter()
            .zip(&bindings)
            .all(|(t, bind)| units(t, bind, 4).is_some());
    let problem = Problem {
        op,
        a_type: a.layout().ty,
        b_type: b.layout().ty,
        dst_type: dst.layout().ty,
        ne: a.layout().ne,
        b_ne: b.layout().ne,
        in_place,
        vec4_layout,
    };
    let plan = plan::plan(&problem, &env.facts())?;
    encode::encode(env, stream, &plan, [a, b, dst], bindings)?;
    Ok(plan)
}
