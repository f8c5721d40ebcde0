//! Conversion of a tensor of any supported type to f32 on the GPU (ggml's dequantization).

pub(crate) mod kernel;

use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream, grid_2d};
use crate::ggml_type::GgmlType;
use crate::kernel::Access;
use crate::memory::DeviceTensor;
use crate::ops::Env;
use crate::params::DequantizeUniforms;

pub(crate) use kernel::WG_SIZE;
pub use kernel::supports;

/// Records `dst = f32(src)`: `src` any view whose rows are contiguous, `dst` a contiguous f32
/// tensor with the same number of elements (in `src`'s logical order).
pub fn dequantize(env: &Env, stream: &mut Stream, src: &DeviceTensor, dst: &DeviceTensor) -> Result<()> {
    let ty = src.layout().ty;
    if !supports(ty) {
        return Err(BackendError::Unsupported(format!("dequantizing {ty} on the GPU")));
    }
    if !src.layout().has_contiguous_rows() || !dst.layout().is_contiguous() || dst.layout().ty != GgmlType::F32 {
        return Err(BackendError::InvalidOperands(
            "dequantize needs a source with contiguous rows and a contiguous f32 destination".into(),
        ));
    }
    let count = src.layout().elements();
    if dst.layout().elements() != count {
        return Err(BackendError::InvalidOperands(format!(
            "dequantize: {count} source elements, {} destination elements",
            dst.layout().elements()
        )));
    }
    let count = u32::try_from(count).map_err(|_| BackendError::Unsupported("more than 2^32 elements".into()))?;
    env.check_operands(&[src, dst])?;
    env.check_stream(stream)?;
    let limits = env.limits();
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let max = limits.max_storage_buffer_binding_size;
    let (s, d) = (src.binding(align, max)?, dst.binding(align, max)?);
    let variant = crate::variants::dequantize_variant(ty);
    let kernel = env.kernel(&variant, &[Access::Read, Access::ReadWrite])?;
    let grid = grid_2d(count.div_ceil(WG_SIZE), limits.max_compute_workgroups_per_dimension);
    let l = &src.layout();
    let word = |v: usize| u32::try_from(v).map_err(|_| BackendError::Unsupported(format!("a stride of {v} bytes")));
    let params = DequantizeUniforms {
        src_start: word(s.start_byte as usize)?,
        dst_start: word(d.start_byte as usize / 4)?,
        count,
        row_stride: grid[0]
            .checked_mul(WG_SIZE)
            .ok_or_else(|| BackendError::Unsupported("a grid row of more than 2^32 threads".into()))?,
        ne0: word(l.ne[0])?,
        ne1: word(l.ne[1])?,
        ne2: word(l.ne[2])?,
        nb1: word(l.nb[1])?,
        nb2: word(l.nb[2])?,
        nb3: word(l.nb[3])?,
    };
    stream.dispatch(
        &kernel,
        &[BufferRange::new(src.buffer(), s), BufferRange::new(dst.buffer(), d)],
        &params,
        grid,
    )
}
