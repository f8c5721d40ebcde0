//! Binding and dispatch of a [`RowsPlan`]: every choice comes from the plan.
//!
//! What the kernel may touch: src's, ids' and dst's bindings cover exactly their layouts' byte
//! spans (rounded out to words, [`DeviceTensor::binding`]); the kernel addresses only elements
//! inside those layouts (the checks in [`super`] hold every extent and stride against them), and
//! reads or writes a row named by an id only when the id is below the row count it indexes.
//! A transposed CPY's tiles (`transpose.wgsl`) address only elements below the extents too.

use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream};
use crate::ggml_type::GgmlType;
use crate::kernel::Access;
use crate::memory::DeviceTensor;
use crate::ops::Env;
use crate::ops::SinglePlan;
use crate::params::{RowsUniforms, TransposeUniforms};

use super::plan::{self, RowsOp, RowsPlan};

fn word(v: u64) -> Result<u32> {
    crate::ops::arith::word("GET_ROWS/SET_ROWS/CPY", v)
}

/// The operands of one dispatch: the iteration is `src`'s for SET_ROWS, `dst`'s otherwise.
#[derive(Debug)]
pub struct Operands<'a> {
    pub src: &'a DeviceTensor,
    pub ids: Option<&'a DeviceTensor>,
    pub dst: &'a DeviceTensor,
}

/// Records the planned dispatch.
pub fn encode(env: &Env, stream: &mut Stream, ops: &Operands<'_>, plan: &RowsPlan) -> Result<()> {
    if plan.units == 0 {
        return Ok(());
    }
    let limits = env.limits();
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let max = limits.max_storage_buffer_binding_size;
    let s = ops.src.binding(align, max)?;
    let d = ops.dst.binding(align, max)?;
    // Every byte position the kernel computes lies below its binding's size.
    word(s.size)?;
    word(d.size)?;
    if plan.tiled {
        return encode_tiled(env, stream, ops, plan, s, d);
    }
    let (ls, ld) = (ops.src.layout(), ops.dst.layout());
    // The kernel reads f32 and i32 sources as words; anything else, and dst, byte by byte.
    if matches!(ls.ty, GgmlType::F32 | GgmlType::I32)
        && (!s.start_byte.is_multiple_of(4) || ls.nb.iter().any(|&nb| !nb.is_multiple_of(4)))
    {
        return Err(BackendError::InvalidOperands(format!(
            "{}: a {} src's start and strides must be multiples of 4 bytes",
            plan.problem.op, ls.ty
        )));
    }
    let iter = if plan.problem.op == RowsOp::SetRows { ls } else { ld };
    let mut buffers = vec![BufferRange::new(ops.src.buffer(), s)];
    let mut access = vec![Access::Read];
    let mut params = RowsUniforms {
        src_start: word(s.start_byte)?,
        dst_start: word(d.start_byte)?,
        units: word(plan.units)?,
        row_stride: plan.grid[0]
            .checked_mul(plan.wg_size)
            .ok_or_else(|| BackendError::Unsupported("a grid row of more than 2^32 threads".into()))?,
        ne0: word(iter.ne[0] as u64)?,
        ne1: word(iter.ne[1] as u64)?,
        ne2: word(iter.ne[2] as u64)?,
        src_ne0: word(ls.ne[0] as u64)?,
        src_ne1: word(ls.ne[1] as u64)?,
        src_ne2: word(ls.ne[2] as u64)?,
        src_nb0: word(ls.nb[0] as u64)?,
        src_nb1: word(ls.nb[1] as u64)?,
        src_nb2: word(ls.nb[2] as u64)?,
        src_nb3: word(ls.nb[3] as u64)?,
        dst_nb0: word(ld.nb[0] as u64)?,
        dst_nb1: word(ld.nb[1] as u64)?,
        dst_nb2: word(ld.nb[2] as u64)?,
        dst_nb3: word(ld.nb[3] as u64)?,
        ..Default::default()
    };
    if let Some(ids) = ops.ids {
        let b = ids.binding(align, max)?;
        word(b.size)?;
        let li = ids.layout();
        if !b.start_byte.is_multiple_of(4) || li.nb.iter().any(|&nb| !nb.is_multiple_of(4)) {
            return Err(BackendError::InvalidOperands(format!(
                "{}: ids' start and strides must be multiples of 4 bytes",
                plan.problem.op
            )));
        }
        params.ids_start = word(b.start_byte)?;
        params.ids_nb0 = word(li.nb[0] as u64)?;
        params.ids_nb1 = word(li.nb[1] as u64)?;
        params.ids_nb2 = word(li.nb[2] as u64)?;
        params.ids_ne1 = word(li.ne[1] as u64)?;
        params.ids_ne2 = word(li.ne[2] as u64)?;
        params.rows = word(if plan.problem.op == RowsOp::GetRows {
            ls.ne[1]
        } else {
            ld.ne[1]
        } as u64)?;
        buffers.push(BufferRange::new(ids.buffer(), b));
        access.push(Access::Read);
    }
    buffers.push(BufferRange::new(ops.dst.buffer(), d));
    access.push(Access::ReadWrite);
    let kernel = env.plan_kernel(SinglePlan::Rows(*plan), &access, || crate::variants::rows(plan))?;
    stream.dispatch(&kernel, &buffers, &params, plan.grid)
}

/// Records `transpose.wgsl` over the plan's tiles (see `plan::RowsPlan::tiled`): src is dst
/// transposed in dims 0 and 1, both of one 32- or 16-bit float type.
fn encode_tiled(
    env: &Env,
    stream: &mut Stream,
    ops: &Operands<'_>,
    plan: &RowsPlan,
    s: crate::memory::Binding,
    d: crate::memory::Binding,
) -> Result<()> {
    let (ls, ld) = (ops.src.layout(), ops.dst.layout());
    let elem = ls.ty.type_size();
    // The kernel's word stores and loads: whole words where the element is (a 16-bit dst's
    // pairs start at even elements of rows that begin on words).
    let misaligned = |start: u64, nb: &[usize]| {
        !start.is_multiple_of(elem.min(4) as u64) || nb.iter().any(|&n| !n.is_multiple_of(elem.min(4)))
    };
    if misaligned(s.start_byte, &ls.nb)
        || !d.start_byte.is_multiple_of(4)
        || ld.nb[1..].iter().any(|&n| !n.is_multiple_of(4))
    {
        return Err(BackendError::InvalidOperands(format!(
            "CPY: a transposed copy's operands must start and step on whole {elem}-byte elements and dst's rows on words"
        )));
    }
    let tile = plan::TILE as usize;
    let params = TransposeUniforms {
        src_start: word(s.start_byte)?,
        src_nb0: word(ls.nb[0] as u64)?,
        src_nb2: word(ls.nb[2] as u64)?,
        src_nb3: word(ls.nb[3] as u64)?,
        dst_start: word(d.start_byte)?,
        dst_nb1: word(ld.nb[1] as u64)?,
        dst_nb2: word(ld.nb[2] as u64)?,
        dst_nb3: word(ld.nb[3] as u64)?,
        ne0: word(ld.ne[0] as u64)?,
        ne1: word(ld.ne[1] as u64)?,
        ne2: word(ld.ne[2] as u64)?,
        n_batches: word((ld.ne[2] * ld.ne[3]) as u64)?,
        tiles0: word(ld.ne[0].div_ceil(tile) as u64)?,
        tiles1: word(ld.ne[1].div_ceil(tile) as u64)?,
        groups_x: plan.grid[0],
    };
    let buffers = [
        BufferRange::new(ops.src.buffer(), s),
        BufferRange::new(ops.dst.buffer(), d),
    ];
    let kernel = env.plan_kernel(SinglePlan::Rows(*plan), &[Access::Read, Access::ReadWrite], || {
        crate::variants::rows(plan)
    })?;
    stream.dispatch(&kernel, &buffers, &params, plan.grid)
}
