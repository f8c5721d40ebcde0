//! Binding and dispatch of a [`ScalePlan`].
//!
//! What the kernel may touch: x's and dst's bindings cover their layouts' spans (rounded out to
//! whole words, or whole vectors when flat and vectorised, within their buffers); the kernel
//! addresses units below the element count, each at its layout's place (`scale.wgsl`'s header).
//! In place, only dst is bound.

use super::{OP, ScalePlan};
use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream, grid_2d};
use crate::kernel::Access;
use crate::memory::{Binding, DeviceTensor};
use crate::ops::Env;
use crate::ops::SinglePlan;
use crate::ops::row_plan::{units, vector_binding, word};
use crate::params::ScaleUniforms;

pub(super) struct Bound {
    x: (Binding, Option<Binding>),
    dst: (Binding, Option<Binding>),
}

impl Bound {
    pub(super) fn new(env: &Env, x: &DeviceTensor, dst: &DeviceTensor) -> Result<Bound> {
        Ok(Bound {
            x: vector_binding(x, env, true)?,
            dst: vector_binding(dst, env, true)?,
        })
    }

    pub(super) fn vec4_allowed(&self) -> bool {
        self.x.1.is_some() && self.dst.1.is_some()
    }
}

fn pick(b: (Binding, Option<Binding>), vector: bool) -> Result<Binding> {
    match (vector, b.1) {
        (false, _) => Ok(b.0),
        (true, Some(v)) => Ok(v),
        (true, None) => Err(BackendError::InvalidOperands(format!(
            "{OP}: the plan reads vectors an operand's binding does not allow"
        ))),
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn record(
    env: &Env,
    stream: &mut Stream,
    bound: &Bound,
    x: &DeviceTensor,
    dst: &DeviceTensor,
    scale: f32,
    bias: f32,
    plan: &ScalePlan,
) -> Result<()> {
    if plan.units == 0 {
        return Ok(());
    }
    let v = plan.vec4;
    let (lx, ld) = (x.layout(), dst.layout());
    let (bx, bd) = (pick(bound.x, v)?, pick(bound.dst, v)?);
    let (ux, ud) = (units(OP, "x", lx, &bx, v)?, units(OP, "dst", ld, &bd, v)?);
    let max = env.limits().max_compute_workgroups_per_dimension;
    let groups = u32::try_from(plan.workgroups)
        .map_err(|_| BackendError::Unsupported(format!("{OP}: {} workgroups", plan.workgroups)))?;
    let grid = grid_2d(groups, max);
    let params = ScaleUniforms {
        x_start: if plan.in_place { ud.start } else { ux.start },
        x_nb0: ux.nb[0],
        x_nb1: ux.nb[1],
        x_nb2: ux.nb[2],
        x_nb3: ux.nb[3],
        dst_start: ud.start,
        dst_nb0: ud.nb[0],
        dst_nb1: ud.nb[1],
        dst_nb2: ud.nb[2],
        dst_nb3: ud.nb[3],
        ne0: word(OP, "ne0", lx.ne[0].max(1))?,
        ne1: word(OP, "ne1", lx.ne[1].max(1))?,
        ne2: word(OP, "ne2", lx.ne[2].max(1))?,
        n: word(OP, "units", plan.units as usize)?,
        row_stride: grid[0]
            .checked_mul(plan.wg_size)
            .ok_or_else(|| BackendError::Unsupported(format!("{OP}: a grid row of more than 2^32 threads")))?,
        scale,
        bias,
    };
    let (buffers, access) = if plan.in_place {
        (vec![BufferRange::new(dst.buffer(), bd)], vec![Access::ReadWrite])
    } else {
        (
            vec![BufferRange::new(x.buffer(), bx), BufferRange::new(dst.buffer(), bd)],
            vec![Access::Read, Access::ReadWrite],
        )
    };
    let kernel = env.plan_kernel(SinglePlan::Scale(*plan), &access, || crate::variants::scale(plan))?;
    stream.dispatch(&kernel, &buffers, &params, grid)
}
