//! RMS_NORM, and the fused `rms_norm(x)·weight + bias` of decoders (upstream's RMS_NORM_MUL_ADD,
//! and the common `rms_norm(x)·weight`), in one dispatch. [`crate::reference::norm`] is the
//! definition: the kernel sums squares in f32 over a tree (the CPU in f64), which stays far
//! under upstream's 1e-7 NMSE at the lengths decoders use (checked at 16384).
//!
//! One workgroup per row, or several short rows per workgroup ([`crate::ops::row_plan`]);
//! `encode` binds what the plan says.

mod encode;
pub mod plan;

use crate::error::{BackendError, Result};
use crate::exec::Stream;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::Env;
use crate::ops::row_plan::{self, RowPlan};
use crate::tensor::Layout;

pub use plan::NormPlan;

const OP: &str = "RMS_NORM";

fn invalid<T>(what: impl std::fmt::Display) -> Result<T> {
    Err(BackendError::InvalidOperands(format!("{OP}: {what}")))
}

/// Why RMS_NORM of `x` (times `weight`, plus `bias`) into `dst` cannot run, if it cannot: `x` and
/// `dst` f32 of the same extents (any strides that are whole elements), `weight` and `bias` f32
/// with packed rows whose every extent divides x's (ggml's MUL and ADD broadcasting), `eps`
/// finite and at least 0.
pub fn check(x: &Layout, weight: Option<&Layout>, bias: Option<&Layout>, dst: &Layout, eps: f32) -> Result<()> {
    if !eps.is_finite() || eps < 0.0 {
        return invalid(format!("eps = {eps} must be a finite number, at least 0"));
    }
    for (name, l) in [("x", Some(x)), ("weight", weight), ("bias", bias), ("dst", Some(dst))] {
        if let Some(l) = l
            && l.ty != GgmlType::F32
        {
            return Err(BackendError::Unsupported(format!("{OP} with {name} of type {}", l.ty)));
        }
    }
    if dst.ne != x.ne {
        return invalid(format!("dst {:?} must have x's extents {:?}", dst.ne, x.ne));
    }
    for (name, l) in [("weight", weight), ("bias", bias)] {
        if let Some(l) = l {
            if !l.ne.iter().zip(&x.ne).all(|(&s, &b)| s > 0 && b.is_multiple_of(s)) {
                return invalid(format!("{name} {:?} does not repeat over x {:?}", l.ne, x.ne));
            }
            if !l.has_contiguous_rows() {
                return invalid(format!("{name}'s rows must be packed (nb[0] = 4), is {l:?}"));
            }
        }
    }
    if x.checked_elements().is_none_or(|n| n > u32::MAX as usize) || x.ne[0] > u32::MAX as usize {
        return Err(BackendError::Unsupported(format!(
            "{OP} of {:?}: past 32-bit indexing",
            x.ne
        )));
    }
    Ok(())
}

/// Records `dst = rms_norm(x, eps) · weight + bias` (each optional; see [`check`]). `dst` may be
/// `x` itself (the same bytes and layout: ggml's in-place form); otherwise it must share no
/// byte with an input. Returns the plan it followed.
pub fn rms_norm_mul_add(
    env: &Env,
    stream: &mut Stream,
    x: &DeviceTensor,
    weight: Option<&DeviceTensor>,
    bias: Option<&DeviceTensor>,
    dst: &DeviceTensor,
    eps: f32,
) -> Result<NormPlan> {
    record_norm(env, stream, x, None, weight, bias, dst, eps)
}

/// A decoder's residual ADD fused before its RMS_NORM: `sum = x + residual`, then
/// `dst = rms_norm(sum, eps) · weight + bias`, in one dispatch. `residual` and `sum` are f32 of
/// x's extents (any strides that are whole elements); `sum` and `dst` share no byte with each
/// other or with an input (no in-place form). Returns the plan it followed.
#[allow(clippy::too_many_arguments)]
pub fn add_rms_norm_mul_add(
    env: &Env,
    stream: &mut Stream,
    x: &DeviceTensor,
    residual: &DeviceTensor,
    sum: &DeviceTensor,
    weight: Option<&DeviceTensor>,
    bias: Option<&DeviceTensor>,
    dst: &DeviceTensor,
    eps: f32,
) -> Result<NormPlan> {
    record_norm(env, stream, x, Some((residual, sum)), weight, bias, dst, eps)
}

/// Why the residual operands cannot go with `x`, if they cannot (see [`add_rms_norm_mul_add`]).
pub fn check_residual(x: &Layout, residual: &Layout, sum: &Layout) -> Result<()> {
    for (name, l) in [("residual", residual), ("sum", sum)] {
        if l.ty != GgmlType::F32 {
            return Err(BackendError::Unsupported(format!("{OP} with {name} of type {}", l.ty)));
        }
        if l.ne != x.ne {
            return invalid(format!("{name} {:?} must have x's extents {:?}", l.ne, x.ne));
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn record_norm(
    env: &Env,
    stream: &mut Stream,
    x: &DeviceTensor,
    residual: Option<(&DeviceTensor, &DeviceTensor)>,
    weight: Option<&DeviceTensor>,
    bias: Option<&DeviceTensor>,
    dst: &DeviceTensor,
    eps: f32,
) -> Result<NormPlan> {
    check(
        x.layout(),
        weight.map(|w| w.layout()),
        bias.map(|b| b.layout()),
        dst.layout(),
        eps,
    )?;
    if let Some((r, s)) = residual {
        check_residual(x.layout(), r.layout(), s.layout())?;
    }
    let mut all = vec![x, dst];
    all.extend(residual.iter().flat_map(|&(r, s)| [r, s]));
    all.extend(weight);
    all.extend(bias);
    env.check_operands(&all)?;
    env.check_stream(stream)?;
    let in_place = residual.is_none() && x.is_same_view(dst);
    let mut inputs = Vec::new();
    if !in_place {
        inputs.push(("x", x));
    }
    if let Some((r, _)) = residual {
        inputs.push(("residual", r));
    }
    inputs.extend(weight.map(|w| ("weight", w)));
    inputs.extend(bias.map(|b| ("bias", b)));
    crate::memory::check_output_disjoint(OP, dst, &inputs)?;
    if let Some((_, s)) = residual {
        // The sum is a second output: apart from the inputs and from dst.
        inputs.push(("dst", dst));
        crate::memory::check_output_disjoint(OP, s, &inputs)?;
    }
    let bound = encode::Bound::new(env, x, residual, weight, bias, dst)?;
    let l = x.layout();
    let rows = plan(l.ne[0], l.rows(), bound.vec4_allowed(), &env.facts());
    let plan = NormPlan {
        rows,
        weight: weight.is_some(),
        bias: bias.is_some(),
        residual: residual.is_some(),
        in_place,
    };
    encode::record(env, stream, &bound, x, residual, weight, bias, dst, eps, &plan)?;
    Ok(plan)
}

/// The row plan RMS_NORM follows for `x` (with these operands) into a new contiguous tensor of
/// x's extents (which binds as 16-byte vectors wherever x's rows are whole vectors): what a
/// kernel that fuses the norm repeats, so that its result is RMS_NORM's to the bit.
pub(crate) fn plan_into_new(
    env: &Env,
    x: &DeviceTensor,
    residual: Option<(&DeviceTensor, &DeviceTensor)>,
    weight: Option<&DeviceTensor>,
) -> Result<RowPlan> {
    // x stands in for the new tensor's binding; the new tensor's rows decide the rest.
    let bound = encode::Bound::new(env, x, residual, weight, None, x)?;
    let l = x.layout();
    let vec4 = bound.vec4_allowed() && l.ne[0].is_multiple_of(4);
    Ok(plan(l.ne[0], l.rows(), vec4, &env.facts()))
}

/// The row plan of RMS_NORM: rows of `row_len` elements, 16-byte loads when every operand
/// allows them.
pub fn plan(row_len: usize, rows: usize, vec4: bool, facts: &crate::facts::DeviceFacts) -> RowPlan {
    row_plan::plan(row_len, rows, vec4, facts)
}
