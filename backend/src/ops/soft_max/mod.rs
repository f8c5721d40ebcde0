//! SOFT_MAX as ggml's `soft_max_ext`: `x·scale + slope·mask`, with attention sinks and ALiBi
//! slopes, normalised per row with the row's max subtracted ([`crate::reference::soft_max()`] is
//! the definition). The mask may be f32 or f16 and repeats over heads and sequences as ggml's
//! CPU repeats it (`h mod mask.ne[2]`, `i3 mod mask.ne[3]`).
//!
//! One pass per row keeps a running max and sum per thread, merged over the row's group, and a
//! second writes ([`crate::ops::row_plan`] lays the threads); `encode` binds what the plan says.

mod encode;
pub mod plan;

use crate::error::{BackendError, Result};
use crate::exec::Stream;
use crate::facts::DeviceFacts;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::Env;
use crate::ops::row_plan::{self, RowPlan};
use crate::tensor::Layout;

pub use plan::SoftMaxPlan;

const OP: &str = "SOFT_MAX";

/// The scalar parameters of SOFT_MAX (ggml's `ggml_soft_max_ext`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoftMaxParams {
    /// Multiplies x before the mask is added.
    pub scale: f32,
    /// ALiBi: 0 for none, else the slopes of FLASH_ATTN_EXT's over the heads (x's dim 2).
    pub max_bias: f32,
}

fn invalid<T>(what: impl std::fmt::Display) -> Result<T> {
    Err(BackendError::InvalidOperands(format!("{OP}: {what}")))
}

/// Why SOFT_MAX cannot run on these operands, if it cannot: `x` and `dst` f32 `[n, rows, heads,
/// seqs]` of the same extents (strides whole elements); `mask` f32 or f16 `[≥ n, ≥ rows, m2, m3]`
/// with packed rows, `m2 | heads`, `m3 | seqs`; `sinks` packed f32 `[≥ heads]`; `scale` finite,
/// `max_bias` finite and at least 0.
pub fn check(x: &Layout, mask: Option<&Layout>, sinks: Option<&Layout>, dst: &Layout, p: &SoftMaxParams) -> Result<()> {
    if !p.scale.is_finite() {
        return invalid(format!("scale = {} must be a finite number", p.scale));
    }
    if !p.max_bias.is_finite() || p.max_bias < 0.0 {
        return invalid(format!("max_bias = {} must be a finite number, at least 0", p.max_bias));
    }
    for (name, l) in [("x", x), ("dst", dst)] {
        if l.ty != GgmlType::F32 {
            return Err(BackendError::Unsupported(format!("{OP} with {name} of type {}", l.ty)));
        }
    }
    if dst.ne != x.ne {
        return invalid(format!("dst {:?} must have x's extents {:?}", dst.ne, x.ne));
    }
    let [n, rows, heads, seqs] = x.ne;
    if let Some(m) = mask {
        if !matches!(m.ty, GgmlType::F32 | GgmlType::F16) {
            return Err(BackendError::Unsupported(format!("{OP} with a mask of type {}", m.ty)));
        }
        let divides = |part: usize, whole: usize| part > 0 && whole.is_multiple_of(part);
        if m.ne[0] < n || m.ne[1] < rows || !divides(m.ne[2], heads) || !divides(m.ne[3], seqs) {
            return invalid(format!(
                "mask {:?} must cover x {:?} (≥ n, ≥ rows) and repeat over its heads and sequences",
                m.ne, x.ne
            ));
        }
        if !m.has_contiguous_rows() {
            return invalid(format!("the mask's rows must be packed, is {m:?}"));
        }
    }
    if let Some(s) = sinks
        && (s.ty != GgmlType::F32 || s.ne[0] < heads || s.ne[1..] != [1, 1, 1] || !s.has_contiguous_rows())
    {
        return invalid(format!("sinks must be packed f32 [≥ {heads}], are {s:?}"));
    }
    if x.checked_elements().is_none_or(|e| e > u32::MAX as usize) {
        return Err(BackendError::Unsupported(format!(
            "{OP} of {:?}: past 32-bit indexing",
            x.ne
        )));
    }
    Ok(())
}

/// Records SOFT_MAX of `x` into `dst` (see [`check`]); `dst` may be `x` itself (ggml's in-place
/// form), otherwise it shares no byte with an input. Returns the plan it followed.
pub fn soft_max(
    env: &Env,
    stream: &mut Stream,
    x: &DeviceTensor,
    mask: Option<&DeviceTensor>,
    sinks: Option<&DeviceTensor>,
    dst: &DeviceTensor,
    params: SoftMaxParams,
) -> Result<SoftMaxPlan> {
    check(
        x.layout(),
        mask.map(|m| m.layout()),
        sinks.map(|s| s.layout()),
        dst.layout(),
        &params,
    )?;
    let mut all = vec![x, dst];
    all.extend(mask);
    all.extend(sinks);
    env.check_operands(&all)?;
    env.check_stream(stream)?;
    let in_place = x.is_same_view(dst);
    let mut inputs = Vec::new();
    if !in_place {
        inputs.push(("x", x));
    }
    inputs.extend(mask.map(|m| ("the mask", m)));
    inputs.extend(sinks.map(|s| ("the sinks", s)));
    crate::memory::check_output_disjoint(OP, dst, &inputs)?;
    let bound = encode::Bound::new(env, x, mask, sinks, dst)?;
    let l = x.layout();
    let rows = plan(l.ne[0], l.rows(), bound.vec4_allowed(), &env.facts());
    let plan = SoftMaxPlan {
        rows,
        mask: mask.map(|m| m.layout().ty),
        sinks: sinks.is_some(),
        in_place,
        cached: plan::fits_cached(&rows),
    };
    encode::record(env, stream, &bound, x, mask, sinks, dst, params, &plan)?;
    Ok(plan)
}

/// The row plan of SOFT_MAX.
pub fn plan(row_len: usize, rows: usize, vec4: bool, facts: &DeviceFacts) -> RowPlan {
    row_plan::plan(row_len, rows, vec4, facts)
}
