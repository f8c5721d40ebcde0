//! ARGMAX of f32 rows into i32, with ggml's CPU tie rule ([`crate::reference::argmax()`]): the
//! last of equal maxima; a NaN restarts the running max at the value after it. The kernel
//! compares values as ordered integer keys, so the rule holds exactly whatever a compiler
//! assumes of float comparisons. One workgroup per row or several short rows a workgroup
//! ([`crate::ops::row_plan`]).

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

pub use plan::ArgmaxPlan;

const OP: &str = "ARGMAX";

fn invalid<T>(what: impl std::fmt::Display) -> Result<T> {
    Err(BackendError::InvalidOperands(format!("{OP}: {what}")))
}

/// Why ARGMAX of `x` into `dst` cannot run, if it cannot: `x` an f32 matrix `[n, rows, 1, 1]`
/// (strides whole elements) with `n` at least 1 and below 2³¹, `dst` packed i32 `[rows]`.
pub fn check(x: &Layout, dst: &Layout) -> Result<()> {
    if x.ty != GgmlType::F32 {
        return Err(BackendError::Unsupported(format!("{OP} of {}", x.ty)));
    }
    if x.ne[2] != 1 || x.ne[3] != 1 {
        return invalid(format!("x {:?} must be a matrix [n, rows, 1, 1]", x.ne));
    }
    if x.ne[0] == 0 || x.ne[0] >= i32::MAX as usize {
        return invalid(format!("rows of {} elements (at least 1, below 2^31)", x.ne[0]));
    }
    if dst.ty != GgmlType::I32 || dst.ne != [x.ne[1], 1, 1, 1] || !dst.is_contiguous() {
        return invalid(format!("dst must be packed i32 [{}], is {dst:?}", x.ne[1]));
    }
    if x.checked_elements().is_none_or(|e| e > u32::MAX as usize) {
        return Err(BackendError::Unsupported(format!(
            "{OP} of {:?}: past 32-bit indexing",
            x.ne
        )));
    }
    Ok(())
}

/// Records ARGMAX of `x` into `dst` (see [`check`]; `dst` shares no byte with `x`). Returns the
/// plan it followed.
pub fn argmax(env: &Env, stream: &mut Stream, x: &DeviceTensor, dst: &DeviceTensor) -> Result<ArgmaxPlan> {
    check(x.layout(), dst.layout())?;
    env.check_operands(&[x, dst])?;
    env.check_stream(stream)?;
    crate::memory::check_output_disjoint(OP, dst, &[("x", x)])?;
    let bound = encode::Bound::new(env, x, dst)?;
    let l = x.layout();
    let plan = ArgmaxPlan {
        rows: plan(l.ne[0], l.ne[1], bound.vec4_allowed(), &env.facts()),
    };
    encode::record(env, stream, &bound, x, dst, &plan)?;
    Ok(plan)
}

/// The row plan of ARGMAX.
pub fn plan(row_len: usize, rows: usize, vec4: bool, facts: &DeviceFacts) -> RowPlan {
    row_plan::plan(row_len, rows, vec4, facts)
}
