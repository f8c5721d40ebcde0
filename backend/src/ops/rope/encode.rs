//! Binding and dispatch of a [`RopePlan`].
//!
//! What the kernel may touch: x's, pos', ff's and dst's bindings cover exactly their layouts'
//! spans (rounded out to words); it addresses rows below x's extents and elements below ne0
//! through each one's strides, positions `i2 + section·ne2` below pos' checked length, and
//! factors below the rotated pairs ([`super::check`]). In place, only dst is bound.

use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream};
use crate::kernel::Access;
use crate::memory::DeviceTensor;
use crate::ops::Env;
use crate::ops::SinglePlan;
use crate::params::RopeUniforms;
use crate::reference::{RopeParams, rope_angles};

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
    let angles = rope_angles(params);
    let mut u = RopeUniforms {
        src_start: word(s.start_byte)?,
        dst_start: word(d.start_byte)?,
        pos_start: word(pb.start_byte / 4)?,
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
    };
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
    if let Some(f) = ff {
        let fb = f.binding(align, max)?;
        if !fb.start_byte.is_multiple_of(4) {
            return Err(BackendError::InvalidOperands(
                "ROPE: freq_factors must start at a multiple of 4 bytes".into(),
            ));
        }
        u.ff_start = word(fb.start_byte / 4)?;
        buffers.push(BufferRange::new(f.buffer(), fb));
        access.push(Access::Read);
    }
    buffers.push(BufferRange::new(dst.buffer(), d));
    access.push(Access::ReadWrite);
    let kernel = env.plan_kernel(SinglePlan::Rope(*plan), &access, || crate::variants::rope(plan))?;
    stream.dispatch(&kernel, &buffers, &u, plan.grid)
}
