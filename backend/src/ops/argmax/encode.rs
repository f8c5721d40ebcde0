//! Binding and dispatch of an [`ArgmaxPlan`].
//!
//! What the kernel may touch: x's binding covers its layout's span (rounded out to whole words,
//! or whole vectors on the vector path, within its buffer), read at the elements of the layout
//! only; dst's, one i32 a row (`argmax.wgsl`'s header).

use super::{ArgmaxPlan, OP};
use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream, grid_2d};
use crate::kernel::Access;
use crate::memory::{Binding, DeviceTensor};
use crate::ops::Env;
use crate::ops::SinglePlan;
use crate::ops::row_plan::{units, vector_binding, word};
use crate::params::ArgmaxUniforms;

pub(super) struct Bound {
    x: (Binding, Option<Binding>),
    dst: Binding,
}

impl Bound {
    pub(super) fn new(env: &Env, x: &DeviceTensor, dst: &DeviceTensor) -> Result<Bound> {
        let limits = env.limits();
        let align = u64::from(limits.min_storage_buffer_offset_alignment);
        Ok(Bound {
            x: vector_binding(x, env, true)?,
            dst: dst.binding(align, limits.max_storage_buffer_binding_size)?,
        })
    }

    pub(super) fn vec4_allowed(&self) -> bool {
        self.x.1.is_some()
    }
}

pub(super) fn record(
    env: &Env,
    stream: &mut Stream,
    bound: &Bound,
    x: &DeviceTensor,
    dst: &DeviceTensor,
    plan: &ArgmaxPlan,
) -> Result<()> {
    let rows = &plan.rows;
    if rows.rows == 0 {
        return Ok(());
    }
    let v = rows.vec4;
    let bx = match (v, bound.x.1) {
        (false, _) => bound.x.0,
        (true, Some(b)) => b,
        (true, None) => {
            return Err(BackendError::InvalidOperands(format!(
                "{OP}: the plan reads vectors x's binding does not allow"
            )));
        }
    };
    let l = x.layout();
    let ux = units(OP, "x", l, &bx, v)?;
    let ud = units(OP, "dst", dst.layout(), &bound.dst, false)?;
    let grid = grid_2d(rows.workgroups, env.limits().max_compute_workgroups_per_dimension);
    let params = ArgmaxUniforms {
        x_start: ux.start,
        x_nb0: ux.nb[0],
        x_nb1: ux.nb[1],
        dst_start: ud.start,
        ne0: word(OP, "a row", if v { l.ne[0] / 4 } else { l.ne[0] })?,
        n: word(OP, "a row", l.ne[0])?,
        n_rows: word(OP, "rows", rows.rows)?,
        groups_x: grid[0],
    };
    let kernel = env.plan_kernel(SinglePlan::Argmax(*plan), &[Access::Read, Access::ReadWrite], || {
        crate::variants::argmax(plan)
    })?;
    stream.dispatch(
        &kernel,
        &[
            BufferRange::new(x.buffer(), bx),
            BufferRange::new(dst.buffer(), bound.dst),
        ],
        &params,
        grid,
    )
}
