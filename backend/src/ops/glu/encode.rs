//! Binds and dispatches what a [`GluPlan`] says.
//!
//! Bytes touched: x and g are read at start + i0 + Σ i_k·nb_k (elements), i0 < n and i_k within
//! dst's extents: in the fused form both inside a's rows (x in one half, g in the other, n =
//! ne0/2), in the split form inside a's and b's; dst is written at the same positions of its
//! own layout. Each binding is its tensor's span (`DeviceTensor::binding`), and `glu::check`
//! proved the rows contiguous; the starts and strides are checked whole elements here.

use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream};
use crate::kernel::Access;
use crate::memory::DeviceTensor;
use crate::ops::Env;
use crate::ops::SinglePlan;
use crate::ops::elementwise::units;
use crate::ops::row_plan::word;
use crate::params::GluUniforms;

use super::GluParams;
use super::plan::{GluPlan, WG_SIZE};

pub(crate) fn encode(
    env: &Env,
    stream: &mut Stream,
    plan: &GluPlan,
    a: &DeviceTensor,
    b: Option<&DeviceTensor>,
    dst: &DeviceTensor,
    params: &GluParams,
) -> Result<()> {
    let p = &plan.problem;
    let name = p.op.name();
    let limits = env.limits();
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let max = limits.max_storage_buffer_binding_size;
    let g_tensor = b.unwrap_or(a);
    let (ab, gb, db) = (
        a.binding(align, max)?,
        g_tensor.binding(align, max)?,
        dst.binding(align, max)?,
    );
    let elements = |t: &DeviceTensor, bind| {
        units(t, bind, 1).ok_or_else(|| {
            BackendError::InvalidOperands(format!(
                "{name}: a start or stride is not whole {} elements",
                t.layout().ty
            ))
        })
    };
    let (ua, ug, ud) = (elements(a, &ab)?, elements(g_tensor, &gb)?, elements(dst, &db)?);
    let n = word(name, "n", p.dst_ne[0])?;
    let (x_start, g_start) = match (p.split, p.swapped) {
        (true, _) => (ua.start, ug.start),
        (false, false) => (ua.start, ua.start + n),
        (false, true) => (ua.start + n, ua.start),
    };
    let uniforms = GluUniforms {
        x_start,
        g_start,
        dst_start: ud.start,
        count: plan.threads,
        row_stride: plan.workgroups[0] * WG_SIZE,
        n,
        ne1: word(name, "ne1", p.dst_ne[1])?,
        ne2: word(name, "ne2", p.dst_ne[2])?,
        x_nb1: ua.nb[1],
        x_nb2: ua.nb[2],
        x_nb3: ua.nb[3],
        g_nb1: ug.nb[1],
        g_nb2: ug.nb[2],
        g_nb3: ug.nb[3],
        dst_nb1: ud.nb[1],
        dst_nb2: ud.nb[2],
        dst_nb3: ud.nb[3],
        alpha: params.alpha,
        limit: params.limit,
    };
    let kernel = env.plan_kernel(
        SinglePlan::Glu(*plan),
        &[Access::Read, Access::Read, Access::ReadWrite],
        || crate::variants::glu_variant(plan),
    )?;
    stream.dispatch(
        &kernel,
        &[
            BufferRange::new(a.buffer(), ab),
            BufferRange::new(g_tensor.buffer(), gb),
            BufferRange::new(dst.buffer(), db),
        ],
        &uniforms,
        plan.workgroups,
    )
}
