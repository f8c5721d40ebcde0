//! MUL_MAT as ggml defines it: `dst[m, n, i2, i3] = Σ_k a[k, m, i2/r2, i3/r3] · b[k, n, i2, i3]`,
//! with src0 (`a`) of any supported type broadcast over dims 2 and 3, src1 (`b`) f32 or f16,
//! and a contiguous f32 `dst`.

use crate::context::GpuContext;
use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream, grid_2d};
use crate::ggml_type::GgmlType;
use crate::kernel::Access;
use crate::memory::DeviceTensor;
use crate::ops::dequantize;
use crate::shader_lib::ShaderVariant;
use crate::tensor::Layout;

/// Threads per workgroup of the simple kernel.
const SIMPLE_WG: u32 = 64;

/// Why `a × b` cannot run here, if it cannot (from the layouts alone).
pub fn check(la: &Layout, lb: &Layout, ld: &Layout) -> Result<()> {
    if !dequantize::supports(la.ty) {
        return Err(BackendError::Unsupported(format!(
            "MUL_MAT with src0 of type {}",
            la.ty
        )));
    }
    if !matches!(lb.ty, GgmlType::F32 | GgmlType::F16) {
        return Err(BackendError::Unsupported(format!(
            "MUL_MAT with src1 of type {}",
            lb.ty
        )));
    }
    if la.ne[0] != lb.ne[0] {
        return Err(BackendError::InvalidOperands(format!(
            "MUL_MAT: src0 has k={}, src1 k={}",
            la.ne[0], lb.ne[0]
        )));
    }
    if la.ne[2] == 0 || la.ne[3] == 0 || !lb.ne[2].is_multiple_of(la.ne[2]) || !lb.ne[3].is_multiple_of(la.ne[3]) {
        return Err(BackendError::InvalidOperands(format!(
            "MUL_MAT: src1 batch {:?} is not a multiple of src0 batch {:?}",
            &lb.ne[2..],
            &la.ne[2..]
        )));
    }
    if !la.has_contiguous_rows() {
        return Err(BackendError::Unsupported(
            "MUL_MAT with src0 rows that are not contiguous".into(),
        ));
    }
    let want = [la.ne[1], lb.ne[1], lb.ne[2], lb.ne[3]];
    if ld.ty != GgmlType::F32 || !ld.is_contiguous() || ld.ne != want {
        return Err(BackendError::InvalidOperands(format!(
            "MUL_MAT: dst must be contiguous f32 {want:?}, is {ld:?}"
        )));
    }
    Ok(())
}

/// Records `dst = a × b`.
pub fn mul_mat(
    ctx: &GpuContext,
    stream: &mut Stream,
    a: &DeviceTensor,
    b: &DeviceTensor,
    dst: &DeviceTensor,
) -> Result<()> {
    check(&a.layout, &b.layout, &dst.layout)?;
    simple(ctx, stream, a, b, dst)
}

/// The simple kernel: one thread per output element.
fn simple(ctx: &GpuContext, stream: &mut Stream, a: &DeviceTensor, b: &DeviceTensor, dst: &DeviceTensor) -> Result<()> {
    let limits = ctx.device.limits();
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let max = limits.max_storage_buffer_binding_size;
    let (ba, bb, bd) = (a.binding(align, max)?, b.binding(align, max)?, dst.binding(align, max)?);
    let (la, lb) = (&a.layout, &b.layout);
    let variant = ShaderVariant::new("mul_mat_simple.wgsl")
        .define("A_TYPE", la.ty.gguf_id())
        .flag("B_F16", lb.ty == GgmlType::F16)
        .define("WG_SIZE", format!("{SIMPLE_WG}u"));
    let kernel = ctx
        .kernels
        .get(&ctx.device, &variant, &[Access::Read, Access::Read, Access::ReadWrite])?;
    let outputs = dst.layout.elements();
    let outputs = u32::try_from(outputs).map_err(|_| BackendError::Unsupported("more than 2^32 outputs".into()))?;
    let grid = grid_2d(outputs.div_ceil(SIMPLE_WG), limits.max_compute_workgroups_per_dimension);
    let w = |v: usize| u32::try_from(v).map_err(|_| BackendError::Unsupported(format!("a size or stride of {v}")));
    let params = [
        ba.start_byte as u32,
        bb.start_byte as u32,
        (bd.start_byte / 4) as u32,
        w(la.ne[1])?,
        w(lb.ne[1])?,
        w(la.ne[0])?,
        w(la.nb[1])?,
        w(la.nb[2])?,
        w(la.nb[3])?,
        w(lb.nb[0])?,
        w(lb.nb[1])?,
        w(lb.nb[2])?,
        w(lb.nb[3])?,
        w(la.ne[2])?,
        w(la.ne[3])?,
        w(lb.ne[2])?,
        w(lb.ne[3])?,
        grid[0] * SIMPLE_WG,
    ];
    let buffers = [
        BufferRange::new(&a.buffer, ba),
        BufferRange::new(&b.buffer, bb),
        BufferRange::new(&dst.buffer, bd),
    ];
    stream.dispatch(&kernel, &buffers, &params, grid)
}
