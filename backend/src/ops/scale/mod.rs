//! SCALE: `x·scale + bias` elementwise ([`crate::reference::scale()`]; one fused multiply-add, as
//! ggml's CPU), in 16-byte units where x and dst are packed and aligned.

mod encode;
pub mod plan;

use crate::error::{BackendError, Result};
use crate::exec::Stream;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::Env;
use crate::tensor::Layout;

pub use plan::ScalePlan;

const OP: &str = "SCALE";

/// Why SCALE of `x` into `dst` cannot run, if it cannot: both f32 of the same extents (any
/// strides that are whole elements), `scale` and `bias` finite.
pub fn check(x: &Layout, dst: &Layout, scale: f32, bias: f32) -> Result<()> {
    for (name, v) in [("scale", scale), ("bias", bias)] {
        if !v.is_finite() {
            return Err(BackendError::InvalidOperands(format!(
                "{OP}: {name} = {v} must be a finite number"
            )));
        }
    }
    for (name, l) in [("x", x), ("dst", dst)] {
        if l.ty != GgmlType::F32 {
            return Err(BackendError::Unsupported(format!("{OP} with {name} of type {}", l.ty)));
        }
    }
    if dst.ne != x.ne {
        return Err(BackendError::InvalidOperands(format!(
            "{OP}: dst {:?} must have x's extents {:?}",
            dst.ne, x.ne
        )));
    }
    if x.checked_elements().is_none_or(|e| e > u32::MAX as usize) {
        return Err(BackendError::Unsupported(format!(
            "{OP} of {:?}: past 32-bit indexing",
            x.ne
        )));
    }
    Ok(())
}

/// Records `dst = x·scale + bias` (see [`check`]); `dst` may be `x` itself (ggml's in-place
/// form), otherwise it shares no byte with `x`. Returns the plan it followed.
pub fn scale(
    env: &Env,
    stream: &mut Stream,
    x: &DeviceTensor,
    dst: &DeviceTensor,
    scale: f32,
    bias: f32,
) -> Result<ScalePlan> {
    check(x.layout(), dst.layout(), scale, bias)?;
    env.check_operands(&[x, dst])?;
    env.check_stream(stream)?;
    let in_place = x.is_same_view(dst);
    if !in_place {
        crate::memory::check_output_disjoint(OP, dst, &[("x", x)])?;
    }
    let bound = encode::Bound::new(env, x, dst)?;
    let flat = x.layout().is_contiguous() && dst.layout().is_contiguous();
    let plan = plan::plan(x.layout().elements(), flat, bound.vec4_allowed(), in_place);
    encode::record(env, stream, &bound, x, dst, scale, bias, &plan)?;
    Ok(plan)
}
