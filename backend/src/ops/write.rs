//! Host data written into an existing device tensor or view, in order with the ops recorded on
//! a stream: a dispatch recorded before the write reads the old bytes, one recorded after it the
//! new ones, with no wait in between (a KV cache or an input updated between ops).
//!
//! Two ways, by layout: a contiguous tensor whose bytes start and end on 4-byte boundaries is
//! written by the queue after the stream submits what it recorded (the queue orders writes
//! against submits only); any other view (strided, permuted, unaligned edges) gets its bytes
//! staged in an upload buffer and copied by a dispatch recorded on the stream (`write.wgsl`).

use dawn::BufferUsage;

use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream, WRITE_WG_SIZE, grid_2d};
use crate::kernel::Access;
use crate::memory::{Binding, DeviceTensor};
use crate::ops::Env;
use crate::params::WriteUniforms;
use crate::tensor::HostTensor;

/// How a write goes to the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePath {
    /// The queue writes the tensor's bytes after the recorded work is submitted.
    QueueWrite,
    /// The bytes are staged and a copy dispatch is recorded on the stream.
    StagedCopy,
}

/// `host`'s units (elements, or blocks of a block format) packed in their logical order: the
/// bytes a contiguous tensor of its layout holds.
fn packed_bytes(host: &HostTensor) -> Result<Vec<u8>> {
    let l = &host.layout;
    host.layout.check_fits(host.data.len())?;
    if l.is_contiguous() {
        return Ok(host.data[l.offset..l.end_bytes()?].to_vec());
    }
    let size = l.ty.type_size();
    let units0 = l.ne[0] / l.ty.block_size();
    let mut out = Vec::with_capacity(l.elements() / l.ty.block_size() * size);
    for i3 in 0..l.ne[3] {
        for i2 in 0..l.ne[2] {
            for i1 in 0..l.ne[1] {
                for u0 in 0..units0 {
                    let at = l.offset + u0 * l.nb[0] + i1 * l.nb[1] + i2 * l.nb[2] + i3 * l.nb[3];
                    out.extend_from_slice(&host.data[at..at + size]);
                }
            }
        }
    }
    Ok(out)
}

/// Records the write of `host` into `dst` on `stream` (see the module): `host` of `dst`'s type
/// and extents, any layout over its bytes; `dst` any view of a device tensor. Work recorded
/// before sees the old bytes, work recorded after the new. Returns the path taken.
pub fn write(env: &Env, stream: &mut Stream, dst: &DeviceTensor, host: &HostTensor) -> Result<WritePath> {
    let (l, hl) = (dst.layout(), &host.layout);
    if hl.ty != l.ty || hl.ne != l.ne {
        return Err(BackendError::InvalidOperands(format!(
            "write: host {} {:?} must be like dst {} {:?}",
            hl.ty, hl.ne, l.ty, l.ne
        )));
    }
    env.check_operands(&[dst])?;
    env.check_stream(stream)?;
    let bytes = packed_bytes(host)?;
    if bytes.is_empty() {
        return Ok(WritePath::QueueWrite);
    }
    let span = dst.byte_span()?;
    if l.is_contiguous() && span.start.is_multiple_of(4) && span.end.is_multiple_of(4) {
        stream.write_after_recorded(dst.buffer(), span.start, &bytes)?;
        return Ok(WritePath::QueueWrite);
    }
    let limits = env.limits();
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let binding: Binding = dst.binding(align, limits.max_storage_buffer_binding_size)?;
    let unit_bytes = l.ty.type_size();
    let units = bytes.len() / unit_bytes;
    let word = |what: &str, v: u64| {
        u32::try_from(v).map_err(|_| BackendError::Unsupported(format!("write: {what} = {v} passes 2^32")))
    };
    // Every byte address the kernel forms (< binding.size) fits its u32 arithmetic.
    word("the binding's bytes", binding.size)?;
    let count = word("units", units as u64)?;
    let mut staged = bytes;
    staged.resize(staged.len().next_multiple_of(4), 0);
    let staging = env
        .device
        .create_buffer_init(Some("write staging"), BufferUsage::STORAGE, &staged)?;
    let staging_binding = Binding {
        offset: 0,
        size: staged.len() as u64,
        start_byte: 0,
    };
    let grid = grid_2d(
        count.div_ceil(WRITE_WG_SIZE),
        limits.max_compute_workgroups_per_dimension,
    );
    let params = WriteUniforms {
        dst_start: word("dst's start", binding.start_byte)?,
        count,
        row_stride: grid[0] * WRITE_WG_SIZE,
        unit_bytes: word("unit bytes", unit_bytes as u64)?,
        ne0: word("ne0", (l.ne[0] / l.ty.block_size()) as u64)?,
        ne1: word("ne1", l.ne[1] as u64)?,
        ne2: word("ne2", l.ne[2] as u64)?,
        nb0: word("nb0", l.nb[0] as u64)?,
        nb1: word("nb1", l.nb[1] as u64)?,
        nb2: word("nb2", l.nb[2] as u64)?,
        nb3: word("nb3", l.nb[3] as u64)?,
    };
    let kernel = env.kernel(&crate::variants::write_variant(), &[Access::Read, Access::ReadWrite])?;
    stream.dispatch(
        &kernel,
        &[
            BufferRange::new(&staging, staging_binding),
            BufferRange::new(dst.buffer(), binding),
        ],
        &params,
        grid,
    )?;
    Ok(WritePath::StagedCopy)
}
