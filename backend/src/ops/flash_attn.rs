//! FLASH_ATTN_EXT as ggml defines it (see `reference::flash_attn` for the exact semantics).

use crate::context::GpuContext;
use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream, grid_2d};
use crate::ggml_type::GgmlType;
use crate::kernel::Access;
use crate::memory::{self, DeviceTensor};
use crate::ops::dequantize;
use crate::shader_lib::ShaderVariant;
use crate::tensor::Layout;

/// The scalar parameters of FLASH_ATTN_EXT.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlashAttnParams {
    pub scale: f32,
    pub max_bias: f32,
    pub logit_softcap: f32,
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
const SIMPLE_WG: usize = 64;
const SIMPLE_DV_PER_THREAD: usize = 16;

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
            q: self.q.layout,
            k: self.k.layout,
            v: self.v.layout,
            mask: self.mask.map(|m| m.layout),
            sinks: self.sinks.map(|s| s.layout),
            dst: self.dst.layout,
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
    if q.ty != GgmlType::F32 || !q.has_contiguous_rows() {
        return bad(format!("Q must be f32 with contiguous rows, is {q:?}"));
    }
    if k.ne[0] != q.ne[0] || k.ne[1] != v.ne[1] || k.ne[2] != v.ne[2] || k.ne[3] != q.ne[3] || v.ne[3] != q.ne[3] {
        return bad(format!("shapes do not fit: q {:?}, k {:?}, v {:?}", q.ne, k.ne, v.ne));
    }
    if k.ne[2] == 0 || q.ne[2] % k.ne[2] != 0 {
        return bad(format!(
            "{} query heads are not a multiple of {} KV heads",
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
    if let Some(m) = &ops.mask
        && (m.ty != GgmlType::F16 || m.ne[0] != k.ne[1] || m.ne[1] < q.ne[1] || m.ne[2] != 1 || m.nb[0] != 2)
    {
        return bad(format!("mask must be f16 [kv, >= n_queries, 1, _], is {m:?}"));
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

/// Records FLASH_ATTN_EXT.
pub fn flash_attn_ext(
    ctx: &GpuContext,
    stream: &mut Stream,
    ops: &FlashAttnOperands<'_>,
    p: FlashAttnParams,
) -> Result<()> {
    check(&ops.layouts())?;
    simple(ctx, stream, ops, p)
}

/// K and V converted to contiguous f32, then the simple kernel.
fn simple(ctx: &GpuContext, stream: &mut Stream, ops: &FlashAttnOperands<'_>, p: FlashAttnParams) -> Result<()> {
    let device = &ctx.device;
    let limits = device.limits();
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let max = limits.max_storage_buffer_binding_size;
    let f32_copy = |t: &DeviceTensor, stream: &mut Stream| -> Result<DeviceTensor> {
        let layout = Layout::contiguous(GgmlType::F32, t.layout.ne)?;
        let buffer = memory::create_storage(device, "f32 copy", layout.span_bytes() as u64)?;
        let out = DeviceTensor {
            layout,
            buffer,
            base: 0,
            storage_bytes: layout.span_bytes() as u64,
        };
        dequantize::dequantize(ctx, stream, t, &out)?;
        Ok(out)
    };
    let k = f32_copy(ops.k, stream)?;
    let v = f32_copy(ops.v, stream)?;
    let (q, dst) = (&ops.q.layout, &ops.dst.layout);
    let n_heads = q.ne[2];
    let w = |v: usize| u32::try_from(v).map_err(|_| BackendError::Unsupported(format!("a size or stride of {v}")));
    let (bq, bk, bv, bd) = (
        ops.q.binding(align, max)?,
        k.binding(align, max)?,
        v.binding(align, max)?,
        ops.dst.binding(align, max)?,
    );
    // Absent operands are bound to Q's buffer and never read.
    let bm = ops.mask.map(|m| m.binding(align, max)).transpose()?;
    let bs = ops.sinks.map(|s| s.binding(align, max)).transpose()?;
    let n_head_log2 = 1u32 << (n_heads as u32).ilog2();
    let m0 = 2f32.powf(-p.max_bias / n_head_log2 as f32);
    let m1 = 2f32.powf(-p.max_bias / 2.0 / n_head_log2 as f32);
    let items = w(q.ne[1] * n_heads * q.ne[3])?;
    let grid = grid_2d(items, limits.max_compute_workgroups_per_dimension);
    let mask_layout = ops.mask.map(|m| m.layout);
    let params = [
        (bq.start_byte / 4) as u32,
        w(q.nb[1] / 4)?,
        w(q.nb[2] / 4)?,
        w(q.nb[3] / 4)?,
        0,
        0,
        bm.map_or(0, |b| b.start_byte as u32),
        mask_layout.map_or(Ok(0), |m| w(m.nb[1]))?,
        mask_layout.map_or(Ok(0), |m| w(m.nb[3]))?,
        mask_layout.map_or(Ok(0), |m| w(m.ne[3]))?,
        bs.map_or(0, |b| (b.start_byte / 4) as u32),
        u32::from(ops.sinks.is_some()),
        (bd.start_byte / 4) as u32,
        w(q.ne[0])?,
        w(dst.ne[0])?,
        w(ops.k.layout.ne[1])?,
        w(q.ne[1])?,
        w(n_heads)?,
        w(ops.k.layout.ne[2])?,
        w(q.ne[3])?,
        p.scale.to_bits(),
        p.logit_softcap.to_bits(),
        p.max_bias.to_bits(),
        n_head_log2,
        m0.to_bits(),
        m1.to_bits(),
        grid[0],
    ];
    // The kernel applies the softcap as cap·tanh(s) to s = q·k·scale, so scale is divided here.
    let mut params = params;
    if p.logit_softcap != 0.0 {
        params[20] = (p.scale / p.logit_softcap).to_bits();
    }
    let variant = ShaderVariant::new("flash_attn_simple.wgsl")
        .define("WG_SIZE", format!("{SIMPLE_WG}u"))
        .define("MAX_DV_PER_THREAD", format!("{SIMPLE_DV_PER_THREAD}u"));
    let storage = [
        Access::Read,
        Access::Read,
        Access::Read,
        Access::Read,
        Access::Read,
        Access::ReadWrite,
    ];
    let kernel = ctx.kernels.get(device, &variant, &storage)?;
    let buffers = [
        BufferRange::new(&ops.q.buffer, bq),
        BufferRange::new(&k.buffer, bk),
        BufferRange::new(&v.buffer, bv),
        ops.mask.zip(bm).map_or_else(
            || BufferRange::new(&ops.q.buffer, bq),
            |(m, b)| BufferRange::new(&m.buffer, b),
        ),
        ops.sinks.zip(bs).map_or_else(
            || BufferRange::new(&ops.q.buffer, bq),
            |(s, b)| BufferRange::new(&s.buffer, b),
        ),
        BufferRange::new(&ops.dst.buffer, bd),
    ];
    stream.dispatch(&kernel, &buffers, &params, grid)
}
