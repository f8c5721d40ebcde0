//! Binding and dispatch of a [`RopePlan`].
//!
//! What the kernel may touch: x's, pos', ff's and dst's bindings cover exactly their layouts'
//! spans (rounded out to words); it addresses rows below x's extents and elements below ne0
//! through each one's strides, positions `i2 + section·ne2` below pos' checked length, and
//! factors below the rotated pairs ([`super::check`]). In place, only dst is bound.

use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream};
use crate::kernel::Access;
use crate::memory::{Binding, DeviceTensor};
use crate::ops::Env;
use crate::ops::SinglePlan;
use crate::params::RopeUniforms;
use crate::reference::{RopeParams, rope_angles};
use crate::tensor::Layout;

use super::plan::RopePlan;

fn word(v: u64) -> Result<u32> {
    crate::ops::arith::word("ROPE", v)
}

/// Records the planned dispatch.
#[allow(clippy::too_many_arguments)]
pub fn encode(
    env: &Env,
    stream: &mut Stream,
    x: &DeviceTensor,
    pos: &DeviceTensor,
    ff: Option<&DeviceTensor>,
    dst: &DeviceTensor,
    params: &RopeParams,
    plan: &RopePlan,
) -> Result<()> {
    if plan.units == 0 {
        return Ok(());
    }
    let limits = env.limits();
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let max = limits.max_storage_buffer_binding_size;
    let (s, pb, d) = (
        x.binding(align, max)?,
        pos.binding(align, max)?,
        dst.binding(align, max)?,
    );
    for b in [s.size, pb.size, d.size] {
        word(b)?;
    }
    let (lx, ld) = (x.layout(), dst.layout());
    // The kernel reads and writes whole elements at their natural alignment, positions and
    // factors as words.
    for (name, l, start) in [("x", lx, s.start_byte), ("dst", ld, d.start_byte)] {
        let size = l.ty.type_size() as u64;
        if !start.is_multiple_of(size) || l.nb.iter().any(|&nb| !(nb as u64).is_multiple_of(size)) {
            return Err(BackendError::InvalidOperands(format!(
                "ROPE: {name}'s start and strides must be multiples of its {size}-byte elements"
            )));
        }
    }
    if !pb.start_byte.is_multiple_of(4) {
        return Err(BackendError::InvalidOperands(
            "ROPE: pos must start at a multiple of 4 bytes".into(),
        ));
    }
    let mut u = uniforms(lx, ld, params, plan, s.start_byte, d.start_byte, pb.start_byte)?;
    if plan.problem.in_place {
        // Read from dst: src's start is dst's.
        u.src_start = u.dst_start;
    }
    let mut buffers = Vec::new();
    let mut access = Vec::new();
    if !plan.problem.in_place {
        buffers.push(BufferRange::new(x.buffer(), s));
        access.push(Access::Read);
    }
    buffers.push(BufferRange::new(pos.buffer(), pb));
    access.push(Access::Read);
    bind_freq_factors(ff, align, max, &mut u, &mut buffers, &mut access)?;
    buffers.push(BufferRange::new(dst.buffer(), d));
    access.push(Access::ReadWrite);
    let kernel = env.plan_kernel(SinglePlan::Rope(*plan), &access, || crate::variants::rope(plan))?;
    stream.dispatch(&kernel, &buffers, &u, plan.grid)
}

/// Binds the frequency factors, where there are any, after the bindings so far (read as words
/// from `ff_start`).
fn bind_freq_factors(
    ff: Option<&DeviceTensor>,
    align: u64,
    max: u64,
    u: &mut RopeUniforms,
    buffers: &mut Vec<BufferRange>,
    access: &mut Vec<Access>,
) -> Result<()> {
    let Some(f) = ff else { return Ok(()) };
    let fb = f.binding(align, max)?;
    if !fb.start_byte.is_multiple_of(4) {
        return Err(BackendError::InvalidOperands(
            "ROPE: freq_factors must start at a multiple of 4 bytes".into(),
        ));
    }
    u.ff_start = word(fb.start_byte / 4)?;
    buffers.push(BufferRange::new(f.buffer(), fb));
    access.push(Access::Read);
    Ok(())
}

/// The parameter block of `plan` with the elements' starts (bytes from their bindings), the
/// fused SET_ROWS' fields zero.
#[allow(clippy::too_many_arguments)]
fn uniforms(
    lx: &Layout,
    ld: &Layout,
    params: &RopeParams,
    plan: &RopePlan,
    src_start: u64,
    dst_start: u64,
    pos_start: u64,
) -> Result<RopeUniforms> {
    let angles = rope_angles(params);
    Ok(RopeUniforms {
        src_start: word(src_start)?,
        dst_start: word(dst_start)?,
        pos_start: word(pos_start / 4)?,
        ff_start: 0,
        units: word(plan.units)?,
        // Threads a grid row, or on the shared path workgroups (tokens) a grid row.
        row_stride: if plan.shared {
            plan.grid[0]
        } else {
            plan.grid[0]
                .checked_mul(plan.wg_size)
                .ok_or_else(|| BackendError::Unsupported("ROPE: a grid row of more than 2^32 threads".into()))?
        },
        ne0: word(lx.ne[0] as u64)?,
        ne1: word(lx.ne[1] as u64)?,
        ne2: word(lx.ne[2] as u64)?,
        row_units: word(plan.row_units)?,
        pairs: word(plan.problem.pairs)?,
        n_dims: word(params.n_dims as u64)?,
        n_offs: word(params.n_offs as u64)?,
        src_nb0: word(lx.nb[0] as u64)?,
        src_nb1: word(lx.nb[1] as u64)?,
        src_nb2: word(lx.nb[2] as u64)?,
        src_nb3: word(lx.nb[3] as u64)?,
        dst_nb0: word(ld.nb[0] as u64)?,
        dst_nb1: word(ld.nb[1] as u64)?,
        dst_nb2: word(ld.nb[2] as u64)?,
        dst_nb3: word(ld.nb[3] as u64)?,
        s0: word(params.sections[0] as u64)?,
        s1: word(params.sections[1] as u64)?,
        s2: word(params.sections[2] as u64)?,
        s3: word(params.sections[3] as u64)?,
        theta_scale: angles.theta_scale,
        freq_scale: params.freq_scale,
        ext_factor: params.ext_factor,
        attn_factor: params.attn_factor,
        corr0: angles.corr[0],
        corr1: angles.corr[1],
        mscale_ext: angles.mscale_ext,
        tokens: word(plan.problem.rows / plan.problem.heads.max(1))?,
        rows_start: 0,
        rows_nb1: 0,
        rows_n: 0,
        ids_start: 0,
        cache_start: 0,
        cache_nb1: 0,
        cache_rows: 0,
    })
}

/// One binding over the bytes of `x` and of `rows`, two views of the same storage (the fused
/// kernel reads a token's row through the binding it ropes): where it fits the binding limit.
pub(super) fn hull_binding(x: &DeviceTensor, rows: &DeviceTensor, align: u64, max: u64) -> Result<Option<Binding>> {
    let (bx, br) = (x.binding(align, max)?, rows.binding(align, max)?);
    let start = bx.offset.min(br.offset);
    let end = (bx.offset + bx.size).max(br.offset + br.size);
    if end - start > max {
        return Ok(None);
    }
    Ok(Some(Binding {
        offset: start,
        size: end - start,
        start_byte: bx.offset + bx.start_byte - start,
    }))
}

/// Records the fused ROPE of `x` in place and SET_ROWS of `rows` into `dst` at `ids`
/// (`plan.problem.rows_out`; the operands as [`super::rope_set_rows`] checked them, `hull` their
/// [`hull_binding`]).
///
/// What the kernel may touch: one binding over x's and rows' bytes (`hull_binding`), in which it
/// addresses x's elements as ROPE does and rows' elements (`rows_n` of each of the `tokens`
/// rows, from `rows_start` by `rows_nb1`); ids' first `tokens` elements (ids holds as many:
/// `check_set_rows`); rows `id < cache_rows` of dst, `rows_n` elements each (dst's extents).
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_set_rows(
    env: &Env,
    stream: &mut Stream,
    hull: Binding,
    x: &DeviceTensor,
    pos: &DeviceTensor,
    ff: Option<&DeviceTensor>,
    params: &RopeParams,
    rows: &DeviceTensor,
    dst: &DeviceTensor,
    ids: &DeviceTensor,
    plan: &RopePlan,
) -> Result<()> {
    if plan.units == 0 {
        return Ok(());
    }
    let limits = env.limits();
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let max = limits.max_storage_buffer_binding_size;
    let base = hull.offset;
    let rows_binding = rows.binding(align, max)?;
    let rows_start = rows_binding.offset + rows_binding.start_byte - base;
    let (pb, ib, cb) = (
        pos.binding(align, max)?,
        ids.binding(align, max)?,
        dst.binding(align, max)?,
    );
    for b in [hull.size, pb.size, ib.size, cb.size] {
        word(b)?;
    }
    let (lx, lr, ld) = (x.layout(), rows.layout(), dst.layout());
    let cache_size = ld.ty.type_size() as u64;
    if !hull.start_byte.is_multiple_of(4)
        || !rows_start.is_multiple_of(4)
        || lx.nb.iter().any(|&nb| !nb.is_multiple_of(4))
        || !pb.start_byte.is_multiple_of(4)
        || !ib.start_byte.is_multiple_of(4)
        || !cb.start_byte.is_multiple_of(4.max(cache_size))
        || !ld.nb[1].is_multiple_of(4)
    {
        return Err(BackendError::InvalidOperands(
            "ROPE + SET_ROWS: x, rows, pos, ids and the cache rows must start and step at word boundaries".into(),
        ));
    }
    let mut u = uniforms(lx, lx, params, plan, hull.start_byte, hull.start_byte, pb.start_byte)?;
    u.rows_start = word(rows_start)?;
    u.rows_nb1 = word(lr.nb[1] as u64)?;
    u.rows_n = word(lr.ne[0] as u64)?;
    u.ids_start = word(ib.start_byte / 4)?;
    u.cache_start = word(cb.start_byte)?;
    u.cache_nb1 = word(ld.nb[1] as u64)?;
    u.cache_rows = word(ld.ne[1] as u64)?;
    let mut buffers = vec![BufferRange::new(pos.buffer(), pb)];
    let mut access = vec![Access::Read];
    bind_freq_factors(ff, align, max, &mut u, &mut buffers, &mut access)?;
    buffers.push(BufferRange::new(x.buffer(), hull));
    access.push(Access::ReadWrite);
    buffers.push(BufferRange::new(ids.buffer(), ib));
    access.push(Access::Read);
    buffers.push(BufferRange::new(dst.buffer(), cb));
    access.push(Access::ReadWrite);
    let kernel = env.plan_kernel(SinglePlan::Rope(*plan), &access, || crate::variants::rope(plan))?;
    stream.dispatch(&kernel, &buffers, &u, plan.grid)
}
