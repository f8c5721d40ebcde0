//! Recording a [`FlashAttnPlan`]: shader variants, bindings, parameter blocks and dispatches,
//! as the plan says.

use std::sync::Arc;

use super::plan::{Choice, FlashAttnPlan, Placement};
use super::{FlashAttnOperands, FlashAttnParams};
use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream, grid_2d};
use crate::ggml_type::GgmlType;
use crate::kernel::{Access, Pipeline};
use crate::memory::{Binding, DeviceTensor};
use crate::ops::Env;
use crate::ops::dequantize;
use crate::params::{FlashAttnReduceUniforms, FlashAttnSimpleUniforms, FlashAttnUniforms, alibi_slopes};
use crate::tensor::Layout;

/// The compiled kernels of a fast plan (see `variants::flash_attn`).
#[derive(Debug)]
pub struct PlanKernels {
    pub kernel: Arc<Pipeline>,
    /// The pass that combines the KV splits.
    pub reduce: Option<Arc<Pipeline>>,
}

/// `plan`'s kernels, from the context's memo of recent plans or compiled now.
fn plan_kernels(env: &Env, plan: &FlashAttnPlan) -> Result<Arc<PlanKernels>> {
    env.plan_kernels().flash_attn.get_or_try_insert(plan, || {
        let variants = crate::variants::flash_attn(plan);
        let reduce = [Access::Read, Access::Read, Access::Read, Access::ReadWrite];
        Ok(Arc::new(PlanKernels {
            kernel: env.kernel(&variants.kernel, &STORAGE)?,
            reduce: variants.reduce.map(|v| env.kernel(&v, &reduce)).transpose()?,
        }))
    })
}

/// The bindings of the operands: K and V both plain and, where possible, as whole 16-byte
/// vectors (the plan picks).
pub(super) struct Bound {
    q: Binding,
    k: Binding,
    v: Binding,
    k_vec: Option<Binding>,
    v_vec: Option<Binding>,
    dst: Binding,
    mask: Option<Binding>,
    sinks: Option<Binding>,
}

impl Bound {
    pub(super) fn new(env: &Env, ops: &FlashAttnOperands<'_>) -> Result<Bound> {
        let limits = env.limits();
        let align = u64::from(limits.min_storage_buffer_offset_alignment);
        let max = limits.max_storage_buffer_binding_size;
        let (k, k_vec) = kv_binding(ops.k, align, max)?;
        let (v, v_vec) = kv_binding(ops.v, align, max)?;
        Ok(Bound {
            q: ops.q.binding(align, max)?,
            k,
            v,
            k_vec,
            v_vec,
            dst: ops.dst.binding(align, max)?,
            mask: ops.mask.map(|m| m.binding(align, max)).transpose()?,
            sinks: ops.sinks.map(|s| s.binding(align, max)).transpose()?,
        })
    }

    /// What the bindings allow the kernels.
    pub(super) fn placement(&self) -> Placement {
        Placement {
            aligned: self.q.start_byte.is_multiple_of(4)
                && self.dst.start_byte.is_multiple_of(4)
                && self.k.start_byte.is_multiple_of(2)
                && self.v.start_byte.is_multiple_of(2),
            k_vec: self.k_vec.is_some(),
            v_vec: self.v_vec.is_some(),
        }
    }
}

/// Records the plan's dispatches.
pub(super) fn record(
    env: &Env,
    stream: &mut Stream,
    ops: &FlashAttnOperands<'_>,
    p: FlashAttnParams,
    bound: &Bound,
    plan: &FlashAttnPlan,
) -> Result<()> {
    match &plan.choice {
        Choice::Simple(_) => simple(env, stream, ops, p, bound, plan),
        Choice::Tile(_) | Choice::Mma(_) | Choice::Vec(_) => fast(env, stream, ops, p, bound, plan),
    }
}

fn word(v: usize) -> Result<u32> {
    crate::ops::arith::word("FLASH_ATTN_EXT", v)
}

/// Whether a K or V layout can be read as 16-byte vectors: a float type whose rows are all
/// 16-byte aligned (its start is the binding's matter).
pub(super) fn vec_layout(l: &Layout) -> bool {
    let float = matches!(l.ty, GgmlType::F16 | GgmlType::BF16 | GgmlType::F32);
    float && (1..4).all(|i| l.ne[i] <= 1 || l.nb[i].is_multiple_of(16))
}

/// A K or V binding (to the end of its storage: a cache's growing view keeps its bind group), and
/// the same rounded up to whole 16-byte vectors when the layout and its start allow it and the
/// rounded binding stays inside the buffer and the limit.
fn kv_binding(t: &DeviceTensor, align: u64, max: u64) -> Result<(Binding, Option<Binding>)> {
    let b = t.binding_to_storage_end(align, max)?;
    if vec_layout(t.layout()) && b.start_byte.is_multiple_of(16) {
        let size = b.size.next_multiple_of(16);
        if b.offset + size <= t.buffer().size() && size <= max {
            return Ok((b, Some(Binding { size, ..b })));
        }
    }
    Ok((b, None))
}

fn fast(
    env: &Env,
    stream: &mut Stream,
    ops: &FlashAttnOperands<'_>,
    p: FlashAttnParams,
    bound: &Bound,
    plan: &FlashAttnPlan,
) -> Result<()> {
    let shape = &plan.problem;
    let limits = env.limits();
    let (q, k, v) = (ops.q.layout(), ops.k.layout(), ops.v.layout());
    let vector = |on: bool, plain: Binding, vec: Option<Binding>| match (on, vec) {
        (false, _) => Ok(plain),
        (true, Some(b)) => Ok(b),
        (true, None) => Err(BackendError::InvalidOperands(
            "the plan reads K or V as vectors, which their binding does not allow".into(),
        )),
    };
    let (bq, bd, bm, bs) = (bound.q, bound.dst, bound.mask, bound.sinks);
    let bk = vector(plan.k_vec, bound.k, bound.k_vec)?;
    let bv = vector(plan.v_vec, bound.v, bound.v_vec)?;
    let n_heads = q.ne[2];
    let n_rows = shape.out_rows();
    let split = plan.n_split > 1;
    let scratch_bytes = plan.scratch_bytes(shape);
    let scratch = if split {
        Some(env.scratch_buffer("flash attention split scratch", scratch_bytes)?)
    } else {
        None
    };
    let stats_offset = plan.stats_offset(shape);
    let stats_start = (stats_offset / 4) as usize;
    let workgroups = word(plan.workgroups(shape) as usize)?;
    let grid = grid_2d(workgroups, limits.max_compute_workgroups_per_dimension);
    let (scale, n_head_log2, m0, m1) = score_params(p, n_heads)?;
    let mask = ops.mask.map(|m| *m.layout());
    let params = FlashAttnUniforms {
        q_start: word(bq.start_byte as usize / 4)?,
        q_nb1: word(q.nb[1] / 4)?,
        q_nb2: word(q.nb[2] / 4)?,
        q_nb3: word(q.nb[3] / 4)?,
        k_start: word(bk.start_byte as usize)?,
        k_nb1: word(k.nb[1])?,
        k_nb2: word(k.nb[2])?,
        k_nb3: word(k.nb[3])?,
        v_start: word(bv.start_byte as usize)?,
        v_nb1: word(v.nb[1])?,
        v_nb2: word(v.nb[2])?,
        v_nb3: word(v.nb[3])?,
        mask_start: bm.map_or(Ok(0), |b| word(b.start_byte as usize))?,
        mask_nb1: mask.map_or(Ok(0), |m| word(m.nb[1]))?,
        mask_nb3: mask.map_or(Ok(0), |m| word(m.nb[3]))?,
        mask_ne3: mask.map_or(Ok(0), |m| word(m.ne[3]))?,
        sinks_start: bs.map_or(Ok(0), |b| word(b.start_byte as usize / 4))?,
        has_sinks: u32::from(ops.sinks.is_some()),
        out_start: if split { 0 } else { word(bd.start_byte as usize / 4)? },
        stats_start: word(stats_start)?,
        n_q: word(q.ne[1])?,
        n_heads: word(n_heads)?,
        kv_heads: word(k.ne[2])?,
        n_seq: word(q.ne[3])?,
        kv: word(k.ne[1])?,
        r2: word(n_heads / k.ne[2])?,
        row_blocks: plan.row_blocks,
        n_split: plan.n_split,
        split_len: plan.split_len,
        scale,
        softcap: p.logit_softcap,
        max_bias: p.max_bias,
        n_head_log2,
        m0,
        m1,
        groups_x: grid[0],
        n_rows: word(n_rows)?,
        tau: plan.tau,
    };
    let kernels = plan_kernels(env, plan)?;
    let kernel = &kernels.kernel;
    let q_range = BufferRange::new(ops.q.buffer(), bq);
    let out = match &scratch {
        Some(buffer) => BufferRange {
            buffer: buffer.clone(),
            offset: 0,
            size: scratch_bytes.next_multiple_of(4),
        },
        None => BufferRange::new(ops.dst.buffer(), bd),
    };
    let sinks_range = ops
        .sinks
        .zip(bs)
        .map_or_else(|| q_range.clone(), |(s, b)| BufferRange::new(s.buffer(), b));
    let buffers = [
        q_range.clone(),
        BufferRange::new(ops.k.buffer(), bk),
        BufferRange::new(ops.v.buffer(), bv),
        ops.mask
            .zip(bm)
            .map_or_else(|| q_range.clone(), |(m, b)| BufferRange::new(m.buffer(), b)),
        sinks_range.clone(),
        out.clone(),
    ];
    if split {
        // The split partials pass through the context's scratch to the reduce: one submit.
        stream.reserve(2)?;
    }
    stream.dispatch(kernel, &buffers, &params, grid)?;
    if !plan.reduces() {
        return Ok(());
    }
    let kernel = kernels
        .reduce
        .as_ref()
        .ok_or_else(|| BackendError::InvalidOperands("a split plan without the reduce kernel".into()))?;
    let rgrid = grid_2d(word(n_rows)?, limits.max_compute_workgroups_per_dimension);
    let rparams = FlashAttnReduceUniforms {
        n_rows: word(n_rows)?,
        n_heads: word(n_heads)?,
        n_split: plan.n_split,
        dst_start: word(bd.start_byte as usize / 4)?,
        sinks_start: bs.map_or(Ok(0), |b| word(b.start_byte as usize / 4))?,
        has_sinks: u32::from(ops.sinks.is_some()),
        groups_x: rgrid[0],
    };
    // `split` made the scratch above; a plan that splits without it is refused, not unwrapped.
    let Some(scratch) = scratch else {
        return Err(BackendError::InvalidOperands(
            "a split plan without its scratch buffer".into(),
        ));
    };
    let part = BufferRange {
        buffer: scratch.clone(),
        offset: 0,
        size: stats_offset,
    };
    let stats = BufferRange {
        buffer: scratch,
        offset: stats_offset,
        size: scratch_bytes - stats_offset,
    };
    stream.dispatch(
        kernel,
        &[part, stats, sinks_range, BufferRange::new(ops.dst.buffer(), bd)],
        &rparams,
        rgrid,
    )
}

/// The storage bindings of the attention kernels: Q, K, V, mask, sinks, then the output.
const STORAGE: [Access; 6] = [
    Access::Read,
    Access::Read,
    Access::Read,
    Access::Read,
    Access::Read,
    Access::ReadWrite,
];

/// The score parameters every kernel takes: the scale (divided by the softcap, which the
/// kernels apply as cap·tanh(s) to s = q·k·scale) and ALiBi's slopes.
fn score_params(p: FlashAttnParams, n_heads: usize) -> Result<(f32, u32, f32, f32)> {
    let (n_head_log2, m0, m1) = alibi_slopes(word(n_heads)?, p.max_bias);
    let scale = if p.logit_softcap != 0.0 {
        p.scale / p.logit_softcap
    } else {
        p.scale
    };
    Ok((scale, n_head_log2, m0, m1))
}

/// K and V converted to contiguous f32, then the simple kernel.
fn simple(
    env: &Env,
    stream: &mut Stream,
    ops: &FlashAttnOperands<'_>,
    p: FlashAttnParams,
    bound: &Bound,
    plan: &FlashAttnPlan,
) -> Result<()> {
    let limits = env.limits();
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let max = limits.max_storage_buffer_binding_size;
    let f32_copy = |t: &DeviceTensor, stream: &mut Stream| -> Result<DeviceTensor> {
        let layout = Layout::contiguous(GgmlType::F32, t.layout().ne)?;
        let bytes = layout.span_bytes()? as u64;
        // Scratch of the context, not a buffer per call: the bind-group cache would keep every
        // call's copies alive.
        let label = if std::ptr::eq(t, ops.k) {
            "FLASH_ATTN_EXT f32 K"
        } else {
            "FLASH_ATTN_EXT f32 V"
        };
        let buffer = env.scratch_buffer(label, bytes)?;
        let out = DeviceTensor::new(layout, buffer, 0, bytes)?;
        dequantize::dequantize(env, stream, t, &out)?;
        Ok(out)
    };
    // The f32 copies live in the context's scratch until the kernel reads them: one submit.
    stream.reserve(3)?;
    let k = f32_copy(ops.k, stream)?;
    let v = f32_copy(ops.v, stream)?;
    let (q, dst) = (ops.q.layout(), ops.dst.layout());
    let n_heads = q.ne[2];
    let (bq, bk, bv, bd) = (bound.q, k.binding(align, max)?, v.binding(align, max)?, bound.dst);
    // Absent operands are bound to Q's buffer and never read.
    let (bm, bs) = (bound.mask, bound.sinks);
    let (scale, n_head_log2, m0, m1) = score_params(p, n_heads)?;
    let items = word(q.ne[1] * n_heads * q.ne[3])?;
    let grid = grid_2d(items, limits.max_compute_workgroups_per_dimension);
    let mask_layout = ops.mask.map(|m| *m.layout());
    let params = FlashAttnSimpleUniforms {
        q_start: word(bq.start_byte as usize / 4)?,
        q_nb1: word(q.nb[1] / 4)?,
        q_nb2: word(q.nb[2] / 4)?,
        q_nb3: word(q.nb[3] / 4)?,
        k_start: 0,
        v_start: 0,
        mask_start: bm.map_or(Ok(0), |b| word(b.start_byte as usize))?,
        mask_nb1: mask_layout.map_or(Ok(0), |m| word(m.nb[1]))?,
        mask_nb3: mask_layout.map_or(Ok(0), |m| word(m.nb[3]))?,
        mask_ne3: mask_layout.map_or(Ok(0), |m| word(m.ne[3]))?,
        sinks_start: bs.map_or(Ok(0), |b| word(b.start_byte as usize / 4))?,
        has_sinks: u32::from(ops.sinks.is_some()),
        dst_start: word(bd.start_byte as usize / 4)?,
        hsk: word(q.ne[0])?,
        hsv: word(dst.ne[0])?,
        kv: word(ops.k.layout().ne[1])?,
        n_queries: word(q.ne[1])?,
        n_heads: word(n_heads)?,
        kv_heads: word(ops.k.layout().ne[2])?,
        n_seq: word(q.ne[3])?,
        scale,
        softcap: p.logit_softcap,
        max_bias: p.max_bias,
        n_head_log2,
        m0,
        m1,
        groups_x: grid[0],
    };
    let variant = crate::variants::flash_attn(plan).kernel;
    let kernel = env.kernel(&variant, &STORAGE)?;
    let buffers = [
        BufferRange::new(ops.q.buffer(), bq),
        BufferRange::new(k.buffer(), bk),
        BufferRange::new(v.buffer(), bv),
        ops.mask.zip(bm).map_or_else(
            || BufferRange::new(ops.q.buffer(), bq),
            |(m, b)| BufferRange::new(m.buffer(), b),
        ),
        ops.sinks.zip(bs).map_or_else(
            || BufferRange::new(ops.q.buffer(), bq),
            |(s, b)| BufferRange::new(s.buffer(), b),
        ),
        BufferRange::new(ops.dst.buffer(), bd),
    ];
    stream.dispatch(&kernel, &buffers, &params, grid)
}
