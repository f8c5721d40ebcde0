//! Binding and dispatch of a [`SoftMaxPlan`].
//!
//! What the kernel may touch: each operand's binding covers its layout's span (rounded out to
//! whole words, or whole vectors on the vector path, within its buffer); the kernel addresses
//! the elements of each layout only, the mask's rows below x's row count and its first n
//! elements (`soft_max.wgsl`'s header; [`super::check`] holds the mask to cover x). In place,
//! only dst is bound.

use super::{OP, SoftMaxParams, SoftMaxPlan};
use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream, grid_2d};
use crate::ggml_type::GgmlType;
use crate::kernel::Access;
use crate::memory::{Binding, DeviceTensor};
use crate::ops::Env;
use crate::ops::SinglePlan;
use crate::ops::row_plan::{units, vector_binding, word};
use crate::params::{SoftMaxUniforms, alibi_slopes};

type Pair = (Binding, Option<Binding>);

/// The operands' bindings, plain and as vectors where they allow it.
pub(super) struct Bound {
    x: Pair,
    mask: Option<Pair>,
    sinks: Option<Binding>,
    dst: Pair,
}

impl Bound {
    pub(super) fn new(
        env: &Env,
        x: &DeviceTensor,
        mask: Option<&DeviceTensor>,
        sinks: Option<&DeviceTensor>,
        dst: &DeviceTensor,
    ) -> Result<Bound> {
        let limits = env.limits();
        let align = u64::from(limits.min_storage_buffer_offset_alignment);
        Ok(Bound {
            x: vector_binding(x, env, true)?,
            mask: mask.map(|m| vector_binding(m, env, true)).transpose()?,
            sinks: sinks
                .map(|s| s.binding(align, limits.max_storage_buffer_binding_size))
                .transpose()?,
            dst: vector_binding(dst, env, true)?,
        })
    }

    /// Whether x, dst and the mask may be read as vectors.
    pub(super) fn vec4_allowed(&self) -> bool {
        self.x.1.is_some() && self.dst.1.is_some() && self.mask.is_none_or(|m| m.1.is_some())
    }
}

fn pick(b: Pair, vector: bool) -> Result<Binding> {
    match (vector, b.1) {
        (false, _) => Ok(b.0),
        (true, Some(v)) => Ok(v),
        (true, None) => Err(BackendError::InvalidOperands(format!(
            "{OP}: the plan reads vectors an operand's binding does not allow"
        ))),
    }
}

/// Records the plan's one dispatch.
#[allow(clippy::too_many_arguments)]
pub(super) fn record(
    env: &Env,
    stream: &mut Stream,
    bound: &Bound,
    x: &DeviceTensor,
    mask: Option<&DeviceTensor>,
    sinks: Option<&DeviceTensor>,
    dst: &DeviceTensor,
    p: SoftMaxParams,
    plan: &SoftMaxPlan,
) -> Result<()> {
    let rows = &plan.rows;
    if rows.rows == 0 || rows.row_len == 0 {
        return Ok(());
    }
    let v = rows.vec4;
    let (lx, ld) = (x.layout(), dst.layout());
    let (bx, bd) = (pick(bound.x, v)?, pick(bound.dst, v)?);
    let (ux, ud) = (units(OP, "x", lx, &bx, v)?, units(OP, "dst", ld, &bd, v)?);
    let mask = match (mask, bound.mask) {
        (Some(m), Some(bm)) => {
            let b = pick(bm, v)?;
            Some((m, b, units(OP, "the mask", m.layout(), &b, v)?))
        }
        _ => None,
    };
    let sinks = match (sinks, bound.sinks) {
        (Some(s), Some(b)) => Some((s, b, units(OP, "the sinks", s.layout(), &b, false)?)),
        _ => None,
    };
    let per = if v { 4 } else { 1 };
    let heads = word(OP, "heads", lx.ne[2].max(1))?;
    let (n_head_log2, m0, m1) = alibi_slopes(heads, p.max_bias);
    let grid = grid_2d(rows.workgroups, env.limits().max_compute_workgroups_per_dimension);
    let m = mask.map(|(t, _, u)| (t.layout().ne, u));
    let params = SoftMaxUniforms {
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
        mask_start: m.map_or(0, |(_, u)| u.start),
        mask_nb1: m.map_or(0, |(_, u)| u.nb[1]),
        mask_nb2: m.map_or(0, |(_, u)| u.nb[2]),
        mask_nb3: m.map_or(0, |(_, u)| u.nb[3]),
        mask_ne2: m.map_or(Ok(1), |(ne, _)| word(OP, "the mask's ne2", ne[2]))?,
        mask_ne3: m.map_or(Ok(1), |(ne, _)| word(OP, "the mask's ne3", ne[3]))?,
        sinks_start: sinks.map_or(0, |(_, _, u)| u.start),
        ne0: word(OP, "a row", lx.ne[0] / per)?,
        ne1: word(OP, "ne1", lx.ne[1].max(1))?,
        ne2: heads,
        n_rows: word(OP, "rows", rows.rows)?,
        groups_x: grid[0],
        scale: p.scale,
        max_bias: p.max_bias,
        n_head_log2,
        m0,
        m1,
    };
    let mut buffers = Vec::with_capacity(4);
    let mut access = Vec::with_capacity(4);
    if !plan.in_place {
        buffers.push(BufferRange::new(x.buffer(), bx));
        access.push(Access::Read);
    }
    if let Some((t, b, _)) = mask {
        buffers.push(BufferRange::new(t.buffer(), b));
        access.push(Access::Read);
    }
    if let Some((t, b, _)) = sinks {
        buffers.push(BufferRange::new(t.buffer(), b));
        access.push(Access::Read);
    }
    buffers.push(BufferRange::new(dst.buffer(), bd));
    access.push(Access::ReadWrite);
    debug_assert!(plan.mask.is_none_or(|t| matches!(t, GgmlType::F32 | GgmlType::F16)));
    let kernel = env.plan_kernel(SinglePlan::SoftMax(*plan), &access, || crate::variants::soft_max(plan))?;
    stream.dispatch(&kernel, &buffers, &params, grid)
}
