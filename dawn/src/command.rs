//! Recording GPU work: command encoders, compute passes, command buffers.

use dawn_sys as sys;

use crate::binding::BindGroup;
use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::handle::{device_child_is_thread_safe, handle};
use crate::pipeline::ComputePipeline;
use crate::query::QuerySet;
use crate::strings;
use crate::types::{BufferUsage, Limits};

handle!(
    /// Recorded work, ready to submit.
    CommandBuffer,
    sys::WGPUCommandBuffer,
    sys::wgpuCommandBufferAddRef,
    sys::wgpuCommandBufferRelease
);
// Immutable once finished; only handed to `Queue::submit` (device-locked).
device_child_is_thread_safe!(CommandBuffer);
handle!(
    /// The raw encoder reference held by [`CommandEncoder`].
    RawCommandEncoder,
    sys::WGPUCommandEncoder,
    sys::wgpuCommandEncoderAddRef,
    sys::wgpuCommandEncoderRelease
);
handle!(
    /// The raw pass reference held by [`ComputePass`].
    RawComputePass,
    sys::WGPUComputePassEncoder,
    sys::wgpuComputePassEncoderAddRef,
    sys::wgpuComputePassEncoderRelease
);

// Encoding is the one thing `ImplicitDeviceSynchronization` leaves unsynchronised, so the raw
// encoders are `Send` only: no thread affinity, but no sharing either.
// SAFETY: Dawn's encoders may be used from any thread, one at a time; moving the only handle
// moves that right with it. (`RawCommandEncoder` is cloned nowhere in this crate.)
unsafe impl Send for RawCommandEncoder {}
// SAFETY: as above.
unsafe impl Send for RawComputePass {}

/// Records commands. Checks what it can before Dawn does (ranges, usages, dispatch sizes) and
/// returns the result of Dawn's own validation from [`CommandEncoder::finish`].
#[derive(Debug)]
pub struct CommandEncoder {
    raw: RawCommandEncoder,
    device: Device,
}

// SAFETY: no `&self` method of `CommandEncoder` calls Dawn (recording and `finish` take `&mut
// self` or `self`; `Debug` prints the pointer), so sharing `&CommandEncoder` between threads
// shares nothing Dawn would need to synchronise.
unsafe impl Sync for CommandEncoder {}

/// Where a pass writes its begin and end timestamps.
#[derive(Debug, Clone, Copy)]
pub struct PassTimestamps<'a> {
    /// The timestamp query set to write into.
    pub query_set: &'a QuerySet,
    /// The query written when the pass begins; `None`: no timestamp there.
    pub beginning_index: Option<u32>,
    /// The query written when the pass ends; `None`: no timestamp there.
    pub end_index: Option<u32>,
}

impl Device {
    /// Starts recording commands.
    pub fn create_command_encoder(&self, label: Option<&str>) -> Result<CommandEncoder> {
        let desc = sys::WGPUCommandEncoderDescriptor {
            nextInChain: std::ptr::null_mut(),
            label: strings::to_view(label),
        };
        self.check_lost()?;
        // SAFETY: a valid device; the descriptor lives during the call. Encoder errors surface
        // at `finish`, which is scoped.
        let raw = unsafe { sys::wgpuDeviceCreateCommandEncoder(self.as_raw(), &desc) };
        let raw = RawCommandEncoder::wrap(raw)?;
        Ok(CommandEncoder {
            raw,
            device: self.clone(),
        })
    }
}

fn check_range(what: &str, buffer: &Buffer, offset: u64, size: u64) -> Result<()> {
    if offset.checked_add(size).is_none_or(|end| end > buffer.size()) {
        return Err(Error::InvalidArgument(format!(
            "{what}: {size} bytes at offset {offset} overrun a buffer of {} bytes",
            buffer.size()
        )));
    }
    if !offset.is_multiple_of(4) || !size.is_multiple_of(4) {
        return Err(Error::InvalidArgument(format!(
            "{what}: offset {offset} and size {size} must be multiples of 4"
        )));
    }
    Ok(())
}

impl CommandEncoder {
    /// Copies `size` bytes between buffers (`COPY_SRC` to `COPY_DST`).
    pub fn copy_buffer_to_buffer(
        &mut self,
        src: &Buffer,
        src_offset: u64,
        dst: &Buffer,
        dst_offset: u64,
        size: u64,
    ) -> Result<()> {
        check_range("copy source", src, src_offset, size)?;
        check_range("copy destination", dst, dst_offset, size)?;
        if !src.usage().contains(BufferUsage::COPY_SRC) || !dst.usage().contains(BufferUsage::COPY_DST) {
            return Err(Error::InvalidArgument(
                "a copy needs COPY_SRC on the source and COPY_DST on the destination".into(),
            ));
        }
        // SAFETY: valid handles.
        unsafe {
            sys::wgpuCommandEncoderCopyBufferToBuffer(
                self.raw.as_raw(),
                src.as_raw(),
                src_offset,
                dst.as_raw(),
                dst_offset,
                size,
            )
        };
        Ok(())
    }

    /// Fills `size` bytes (`None`: to the end) of a `COPY_DST` buffer with zeros.
    pub fn clear_buffer(&mut self, buffer: &Buffer, offset: u64, size: Option<u64>) -> Result<()> {
        let size = size.unwrap_or_else(|| buffer.size().saturating_sub(offset));
        check_range("clear", buffer, offset, size)?;
        if !buffer.usage().contains(BufferUsage::COPY_DST) {
            return Err(Error::InvalidArgument("clear_buffer needs COPY_DST usage".into()));
        }
        // SAFETY: a valid encoder and buffer.
        unsafe { sys::wgpuCommandEncoderClearBuffer(self.raw.as_raw(), buffer.as_raw(), offset, size) };
        Ok(())
    }

    /// Begins a compute pass, optionally writing timestamps at its start and end.
    pub fn begin_compute_pass(
        &mut self,
        label: Option<&str>,
        timestamps: Option<PassTimestamps<'_>>,
    ) -> ComputePass<'_> {
        let writes = timestamps.map(|t| sys::WGPUPassTimestampWrites {
            nextInChain: std::ptr::null_mut(),
            querySet: t.query_set.as_raw(),
            beginningOfPassWriteIndex: t.beginning_index.unwrap_or(sys::WGPU_QUERY_SET_INDEX_UNDEFINED),
            endOfPassWriteIndex: t.end_index.unwrap_or(sys::WGPU_QUERY_SET_INDEX_UNDEFINED),
        });
        let desc = sys::WGPUComputePassDescriptor {
            nextInChain: std::ptr::null_mut(),
            label: strings::to_view(label),
            timestampWrites: writes.as_ref().map_or(std::ptr::null(), |w| w as *const _),
        };
        // SAFETY: a valid encoder; the descriptor lives during the call.
        let raw = unsafe { sys::wgpuCommandEncoderBeginComputePass(self.raw.as_raw(), &desc) };
        // Dawn returns an error pass rather than null; errors surface at `finish`.
        let raw = RawComputePass::from_raw(raw);
        let limits = *self.device.limits();
        ComputePass {
            raw,
            _encoder: self,
            limits,
            ended: false,
        }
    }

    /// Writes the resolved values of queries `first..first + count` into `destination` at
    /// `offset` (a multiple of 256), 8 bytes each.
    pub fn resolve_query_set(
        &mut self,
        query_set: &QuerySet,
        first: u32,
        count: u32,
        destination: &Buffer,
        offset: u64,
    ) -> Result<()> {
        if first.checked_add(count).is_none_or(|end| end > query_set.count()) {
            return Err(Error::InvalidArgument(format!(
                "queries {first}..{} exceed the set of {}",
                u64::from(first) + u64::from(count),
                query_set.count()
            )));
        }
        if !offset.is_multiple_of(256) || !destination.usage().contains(BufferUsage::QUERY_RESOLVE) {
            return Err(Error::InvalidArgument(
                "query resolve needs QUERY_RESOLVE usage and an offset multiple of 256".into(),
            ));
        }
        check_range("query resolve", destination, offset, u64::from(count) * 8)?;
        // SAFETY: valid handles.
        unsafe {
            sys::wgpuCommandEncoderResolveQuerySet(
                self.raw.as_raw(),
                query_set.as_raw(),
                first,
                count,
                destination.as_raw(),
                offset,
            )
        };
        Ok(())
    }

    /// Ends recording. Errors Dawn found in the recorded commands are returned here.
    pub fn finish(self) -> Result<CommandBuffer> {
        let desc = sys::WGPUCommandBufferDescriptor {
            nextInChain: std::ptr::null_mut(),
            label: sys::WGPUStringView::null(),
        };
        self.device.scoped_frequent(|| {
            // SAFETY: a valid encoder; the descriptor lives during the call.
            CommandBuffer::wrap(unsafe { sys::wgpuCommandEncoderFinish(self.raw.as_raw(), &desc) })
        })
    }
}

/// A compute pass. It borrows its encoder, so the encoder cannot be used (or finished) until the
/// pass ends; dropping the pass ends it.
#[derive(Debug)]
pub struct ComputePass<'e> {
    raw: RawComputePass,
    _encoder: &'e mut CommandEncoder,
    limits: Limits,
    ended: bool,
}

// SAFETY: as for `CommandEncoder`: every method that calls Dawn takes `&mut self` or `self`.
unsafe impl Sync for ComputePass<'_> {}

impl ComputePass<'_> {
    /// Sets the pipeline of the following dispatches.
    pub fn set_pipeline(&mut self, pipeline: &ComputePipeline) {
        // SAFETY: valid handles.
        unsafe { sys::wgpuComputePassEncoderSetPipeline(self.raw.as_raw(), pipeline.as_raw()) };
    }

    /// Binds a bind group at `index`, with dynamic offsets if its layout has any.
    pub fn set_bind_group(&mut self, index: u32, group: &BindGroup, dynamic_offsets: &[u32]) {
        // SAFETY: valid handles; the offsets live during the call.
        unsafe {
            sys::wgpuComputePassEncoderSetBindGroup(
                self.raw.as_raw(),
                index,
                group.as_raw(),
                dynamic_offsets.len(),
                dynamic_offsets.as_ptr(),
            )
        };
    }

    /// Dispatches `x * y * z` workgroups. Counts over `max_compute_workgroups_per_dimension`
    /// are an error (nothing is recorded).
    pub fn dispatch(&mut self, x: u32, y: u32, z: u32) -> Result<()> {
        let max = self.limits.max_compute_workgroups_per_dimension;
        if x > max || y > max || z > max {
            return Err(Error::InvalidArgument(format!(
                "dispatch of ({x}, {y}, {z}) workgroups exceeds max_compute_workgroups_per_dimension ({max})"
            )));
        }
        // SAFETY: a valid pass.
        unsafe { sys::wgpuComputePassEncoderDispatchWorkgroups(self.raw.as_raw(), x, y, z) };
        Ok(())
    }

    /// Dispatches with the three `u32` counts stored in `buffer` at `offset` (`INDIRECT` usage).
    pub fn dispatch_indirect(&mut self, buffer: &Buffer, offset: u64) -> Result<()> {
        check_range("indirect dispatch", buffer, offset, 12)?;
        if !buffer.usage().contains(BufferUsage::INDIRECT) {
            return Err(Error::InvalidArgument(
                "dispatch_indirect needs a buffer with INDIRECT usage".into(),
            ));
        }
        // SAFETY: valid handles.
        unsafe { sys::wgpuComputePassEncoderDispatchWorkgroupsIndirect(self.raw.as_raw(), buffer.as_raw(), offset) };
        Ok(())
    }

    /// Ends the pass (also done on drop).
    pub fn end(mut self) {
        self.finish_pass();
    }

    fn finish_pass(&mut self) {
        if !self.ended {
            self.ended = true;
            // SAFETY: a valid pass, ended once.
            unsafe { sys::wgpuComputePassEncoderEnd(self.raw.as_raw()) };
        }
    }
}

impl Drop for ComputePass<'_> {
    fn drop(&mut self) {
        self.finish_pass();
    }
}
