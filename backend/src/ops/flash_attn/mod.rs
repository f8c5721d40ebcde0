//! FLASH_ATTN_EXT as ggml defines it (see `reference::flash_attn` for the exact semantics).
//!
//! [`plan`] picks a kernel and its tiles from the shapes, types and device (a pure function,
//! unit-tested without a GPU); `encode` records it:
//! - decode and few query rows: `flash_attn_vec.wgsl` (or `flash_attn_tile.wgsl` when they do
//!   not fit it), all query heads of a KV head sharing each K/V row, the KV sequence split over
//!   workgroups, then `flash_attn_reduce.wgsl`;
//! - prefill: `flash_attn_mma.wgsl` with subgroup matrices (of the config's shape with f32
//!   results), or the tile kernel without them;
//! - `flash_attn_simple.wgsl` over f32 copies of K and V, the last resort.
//!
//! The plan decides everything, the fallback included; its knobs ([`FlashAttnTuning`], from
//! the device's profile with any overrides) are held by the context.

mod encode;
pub mod plan;
#[cfg(test)]
mod plan_grid;
pub mod tuning;

use crate::context::GpuContext;
use crate::error::{BackendError, Result};
use crate::exec::Stream;
use crate::facts::DeviceFacts;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::dequantize;
use crate::tensor::Layout;

pub(crate) use encode::PlanKernels;
pub use plan::{Choice, FlashAttnPlan, Placement};
pub use tuning::{FlashAttnTuning, Force};

/// The scalar parameters of FLASH_ATTN_EXT.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlashAttnParams {
    pub scale: f32,
    pub max_bias: f32,
    pub logit_softcap: f32,
}

impl FlashAttnParams {
    /// Plain softmax attention: scores times `scale` (usually 1/sqrt(head size)), no ALiBi slopes,
    /// no soft cap.
    pub const fn scaled(scale: f32) -> Self {
        Self {
            scale,
            max_bias: 0.0,
            logit_softcap: 0.0,
        }
    }
}

/// The operands: q f32 `[hsk, n_q, n_heads, n_seq]`; k `[hsk, kv, kv_heads, n_seq]`; v
/// `[hsv, kv, kv_heads, n_seq]`; mask f16 `[kv, ≥ n_q, 1, mask_seq]`; sinks f32 `[n_heads]`;
/// dst contiguous f32 `[hsv, n_heads, n_q, n_seq]`.
#[derive(Debug, Clone, Copy)]
pub struct FlashAttnOperands<'a> {
    pub q: &'a DeviceTensor,
    pub k: &'a DeviceTensor,
    pub v: &'a DeviceTensor,
    pub mask: Option<&'a DeviceTensor>,
    pub sinks: Option<&'a DeviceTensor>,
    pub dst: &'a DeviceTensor,
}

/// Workgroup size of the simple kernel and the value dimensions each thread holds.
pub(crate) const SIMPLE_WG: usize = 64;
pub(crate) const SIMPLE_DV_PER_THREAD: usize = 16;

/// Most KV splits (partials beyond this cost more to write and reduce than they gain): the
/// planner's limit and the `split` knob's range.
pub const MAX_SPLIT: u32 = 512;

/// The layouts of FLASH_ATTN_EXT's operands, for checking them without device memory.
#[derive(Debug, Clone, Copy)]
pub struct FlashAttnLayouts {
    pub q: Layout,
    pub k: Layout,
    pub v: Layout,
    pub mask: Option<Layout>,
    pub sinks: Option<Layout>,
    pub dst: Layout,
}

impl FlashAttnOperands<'_> {
    /// The operands' layouts.
    pub fn layouts(&self) -> FlashAttnLayouts {
        FlashAttnLayouts {
            q: *self.q.layout(),
            k: *self.k.layout(),
            v: *self.v.layout(),
            mask: self.mask.map(|m| *m.layout()),
            sinks: self.sinks.map(|s| *s.layout()),
            dst: *self.dst.layout(),
        }
    }
}

/// Why these operands cannot run here, if they cannot (from the layouts alone).
pub fn check(ops: &FlashAttnLayouts) -> Result<()> {
    let (q, k, v, d) = (&ops.q, &ops.k, &ops.v, &ops.dst);
    let bad = |m: String| Err(BackendError::InvalidOperands(format!("FLASH_ATTN_EXT: {m}")));
    for (name, t) in [("K", k), ("V", v)] {
        if !dequantize::supports(t.ty) {
            return Err(BackendError::Unsupported(format!(
                "FLASH_ATTN_EXT with {name} of type {}",
                t.ty
            )));
        }
    }
    if [q, k, v].iter().any(|t| t.ne.contains(&0)) {
        return bad(format!(
            "degenerate shapes (a zero extent): q {:?}, k {:?}, v {:?}",
            q.ne, k.ne, v.ne
        ));
    }
    if [q, k, v, d].iter().any(|t| t.ne.iter().any(|&n| n > i32::MAX as usize)) {
        return Err(BackendError::Unsupported(format!(
            "FLASH_ATTN_EXT with an extent past 2^31: q {:?}, k {:?}, v {:?}",
            q.ne, k.ne, v.ne
        )));
    }
    if q.ty != GgmlType::F32 || !q.has_contiguous_rows() {
        return bad(format!("Q must be f32 with contiguous rows, is {q:?}"));
    }
    if k.ne[0] != q.ne[0] || k.ne[1] != v.ne[1] || k.ne[2] != v.ne[2] || k.ne[3] != q.ne[3] || v.ne[3] != q.ne[3] {
        return bad(format!("shapes do not fit: q {:?}, k {:?}, v {:?}", q.ne, k.ne, v.ne));
    }
    if k.ne[2] == 0 || q.ne[2] % k.ne[2] != 0 {
        let hint = if q.ne[1] % k.ne[2] == 0 {
            " (Q's heads must be its third dimension: a projection's [head_dim, heads, tokens] \
             needs permute([0, 2, 1, 3]) first, see the `shapes` page)"
        } else {
            ""
        };
        return bad(format!(
            "{} query heads are not a multiple of {} KV heads{hint}",
            q.ne[2], k.ne[2]
        ));
    }
    if v.ne[0] > SIMPLE_WG * SIMPLE_DV_PER_THREAD {
        return Err(BackendError::Unsupported(format!(
            "V head size {} over {}",
            v.ne[0],
            SIMPLE_WG * SIMPLE_DV_PER_THREAD
        )));
    }
    // The kernels read K and V rows as packed elements or blocks: `nb[0]` is not passed to them.
    for (name, t) in [("K", k), ("V", v)] {
        if !t.has_contiguous_rows() {
            return bad(format!(
                "{name}'s rows must be contiguous (nb[0] = {}, the size of its type), is {t:?}",
                t.ty.type_size()
            ));
        }
    }
    // The kernels read the mask's row of query i in sequence i3 at `i3 % ne[3]`: every sequence
    // needs one (ne[3] >= 1) and the sequences must repeat whole (n_seq % ne[3] == 0).
    if let Some(m) = &ops.mask
        && (m.ty != GgmlType::F16
            || m.ne[0] != k.ne[1]
            || m.ne[1] < q.ne[1]
            || m.ne[2] != 1
            || m.ne[3] == 0
            || !q.ne[3].is_multiple_of(m.ne[3])
            || m.nb[0] != 2)
    {
        return bad(format!(
            "mask must be f16 [kv, >= n_queries, 1, a divisor of {}] with contiguous rows, is {m:?}",
            q.ne[3]
        ));
    }
    if let Some(s) = &ops.sinks
        && (s.ty != GgmlType::F32 || s.elements() != q.ne[2] || !s.is_contiguous())
    {
        return bad(format!("sinks must be f32 [{}], are {s:?}", q.ne[2]));
    }
    let want = [v.ne[0], q.ne[2], q.ne[1], q.ne[3]];
    if d.ty != GgmlType::F32 || !d.is_contiguous() || d.ne != want {
        return bad(format!("dst must be contiguous f32 {want:?}, is {d:?}"));
    }
    Ok(())
}

/// Why these parameters make no sense, if they do not: every one finite, the ALiBi bias and the
/// soft cap not negative (a NaN scale would turn every output into NaN without a word).
pub fn check_params(p: &FlashAttnParams) -> Result<()> {
    let finite = [
        ("scale", p.scale),
        ("max_bias", p.max_bias),
        ("logit_softcap", p.logit_softcap),
    ];
    for (name, value) in finite {
        if !value.is_finite() || (name != "scale" && value < 0.0) {
            return Err(BackendError::InvalidOperands(format!(
                "FLASH_ATTN_EXT: {name} = {value} must be a finite number{}",
                if name == "scale" { "" } else { ", at least 0" }
            )));
        }
    }
    Ok(())
}

/// Records FLASH_ATTN_EXT with the context's knobs; returns the plan it followed.
pub fn flash_attn_ext(
    ctx: &GpuContext,
    stream: &mut Stream,
    ops: &FlashAttnOperands<'_>,
    p: FlashAttnParams,
) -> Result<FlashAttnPlan> {
    // The context checked its knobs when it was made, and its facts are the device's own.
    record(ctx, stream, ops, p, &ctx.facts(), &ctx.tuning().flash_attn)
}

/// [`flash_attn_ext`] planned for other device facts or tuning than `ctx`'s own. Facts that claim
/// more than the device has are refused ([`DeviceFacts::check_within`]); the knobs are checked.
pub fn flash_attn_ext_with(
    ctx: &GpuContext,
    stream: &mut Stream,
    ops: &FlashAttnOperands<'_>,
    p: FlashAttnParams,
    facts: &DeviceFacts,
    tuning: &FlashAttnTuning,
) -> Result<FlashAttnPlan> {
    tuning.validate().map_err(|message| BackendError::Config {
        name: "FLASH_ATTN_EXT knobs",
        message,
    })?;
    facts
        .check_within(&ctx.facts())
        .map_err(|message| BackendError::Config {
            name: "FLASH_ATTN_EXT device facts",
            message,
        })?;
    record(ctx, stream, ops, p, facts, tuning)
}

/// Checks the operands, plans and records, with knobs and facts already checked.
fn record(
    ctx: &GpuContext,
    stream: &mut Stream,
    ops: &FlashAttnOperands<'_>,
    p: FlashAttnParams,
    facts: &DeviceFacts,
    tuning: &FlashAttnTuning,
) -> Result<FlashAttnPlan> {
    let layouts = ops.layouts();
    check(&layouts)?;
    check_params(&p)?;
    let mut tensors = vec![ops.q, ops.k, ops.v, ops.dst];
    tensors.extend(ops.mask);
    tensors.extend(ops.sinks);
    ctx.check_operands(&tensors)?;
    let mut inputs = vec![("Q", ops.q), ("K", ops.k), ("V", ops.v)];
    inputs.extend(ops.mask.map(|m| ("the mask", m)));
    inputs.extend(ops.sinks.map(|s| ("the sinks", s)));
    crate::memory::check_output_disjoint("FLASH_ATTN_EXT", ops.dst, &inputs)?;
    ctx.check_stream(stream)?;
    let bound = encode::Bound::new(ctx, ops)?;
    let plan = plan::plan_placed(&problem(&layouts), facts, tuning, bound.placement());
    encode::record(ctx, stream, ops, p, &bound, &plan)?;
    Ok(plan)
}

/// The plan FLASH_ATTN_EXT follows for operands of these layouts on `ctx`'s device (views
/// placed at their layout's offset from a binding-aligned base, as the context places tensors).
pub fn plan_for(ctx: &GpuContext, layouts: &FlashAttnLayouts) -> FlashAttnPlan {
    let align = ctx.capabilities().limits.min_storage_buffer_offset_alignment.max(1) as usize;
    let start = |l: &Layout| l.offset % align;
    let vec = |l: &Layout| encode::vec_layout(l) && start(l).is_multiple_of(16);
    let placement = Placement {
        aligned: start(&layouts.q).is_multiple_of(4)
            && start(&layouts.dst).is_multiple_of(4)
            && start(&layouts.k).is_multiple_of(2)
            && start(&layouts.v).is_multiple_of(2),
        k_vec: vec(&layouts.k),
        v_vec: vec(&layouts.v),
    };
    plan::plan_placed(&problem(layouts), &ctx.facts(), &ctx.tuning().flash_attn, placement)
}

/// The plan FLASH_ATTN_EXT follows for these operands, in words (`backend-ops -v` prints the
/// plan an op returned; this serves when it did not run).
pub fn describe(ctx: &GpuContext, layouts: &FlashAttnLayouts) -> String {
    match check(layouts) {
        Err(e) => format!("not run: {e}"),
        Ok(()) => plan_for(ctx, layouts).to_string(),
    }
}

/// The problem the plan is made for, from the (checked) layouts.
pub fn problem(l: &FlashAttnLayouts) -> plan::Problem {
    plan::Problem {
        hsk: l.q.ne[0],
        hsv: l.v.ne[0],
        n_q: l.q.ne[1],
        n_heads: l.q.ne[2],
        kv_heads: l.k.ne[2],
        kv: l.k.ne[1],
        n_seq: l.q.ne[3],
        k_type: l.k.ty,
        v_type: l.v.ty,
        has_mask: l.mask.is_some(),
    }
}
