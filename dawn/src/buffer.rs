//! Buffers, and mapping them into typed slices whose lifetimes end before the unmap.

use std::ffi::c_void;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use dawn_sys as sys;

use crate::device::{Device, DeviceShared};
use crate::error::{Error, Result};
use crate::future::{self, GpuFuture};
use crate::handle::handle;
use crate::instance::Instance;
use crate::strings;
use crate::types::{BufferUsage, MapMode};

handle!(
    /// The raw buffer reference held by [`Buffer`].
    RawBuffer,
    sys::WGPUBuffer,
    sys::wgpuBufferAddRef,
    sys::wgpuBufferRelease
);

/// What to create a buffer with.
#[derive(Debug, Clone, Default)]
pub struct BufferDescriptor<'a> {
    /// A name for debugging and error messages.
    pub label: Option<&'a str>,
    /// Size in bytes; a multiple of 4 for buffers that are mapped or copied.
    pub size: u64,
    /// Every way the buffer will be used; other uses are errors.
    pub usage: BufferUsage,
}

/// A GPU buffer. Cheap to clone; clones share the buffer.
#[derive(Debug, Clone)]
pub struct Buffer {
    raw: RawBuffer,
    state: Arc<BufferState>,
}

#[derive(Debug)]
struct BufferState {
    size: u64,
    usage: BufferUsage,
    /// Set from the start of a map request until the mapping is dropped.
    mapped: AtomicBool,
    device: Arc<DeviceShared>,
    instance: Instance,
}

impl Device {
    /// Creates a buffer. A size over `max_buffer_size`, or a usage WebGPU forbids, is an error.
    pub fn create_buffer(&self, desc: &BufferDescriptor<'_>) -> Result<Buffer> {
        self.create_buffer_impl(desc, false)
    }

    /// Creates a buffer holding `data`, with `usage` (plus nothing else).
    pub fn create_buffer_init<T: bytemuck::NoUninit>(
        &self,
        label: Option<&str>,
        usage: BufferUsage,
        data: &[T],
    ) -> Result<Buffer> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let size = (bytes.len() as u64).next_multiple_of(4).max(4);
        let buffer = self.create_buffer_impl(&BufferDescriptor { label, size, usage }, true)?;
        // SAFETY: the buffer was created mapped at creation over its whole size; we write
        // `bytes.len() <= size` bytes and unmap before anyone else can see the buffer.
        unsafe {
            let ptr = sys::wgpuBufferGetMappedRange(buffer.as_raw(), 0, size as usize);
            if ptr.is_null() {
                return Err(Error::Map("the buffer could not be mapped at creation".into()));
            }
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.cast::<u8>(), bytes.len());
            sys::wgpuBufferUnmap(buffer.as_raw());
        }
        Ok(buffer)
    }

    fn create_buffer_impl(&self, desc: &BufferDescriptor<'_>, mapped_at_creation: bool) -> Result<Buffer> {
        let max = self.limits().max_buffer_size;
        if desc.size > max {
            return Err(Error::InvalidArgument(format!(
                "buffer of {} bytes exceeds the device's max_buffer_size of {max} bytes",
                desc.size
            )));
        }
        if mapped_at_creation && !desc.size.is_multiple_of(4) {
            return Err(Error::InvalidArgument(
                "a buffer mapped at creation needs a size multiple of 4".into(),
            ));
        }
        let raw_desc = sys::WGPUBufferDescriptor {
            nextInChain: std::ptr::null_mut(),
            label: strings::to_view(desc.label),
            usage: desc.usage.0,
            size: desc.size,
            mappedAtCreation: u32::from(mapped_at_creation),
        };
        let raw = self.scoped_frequent(|| {
            // SAFETY: a valid device; the descriptor lives during the call.
            RawBuffer::wrap(unsafe { sys::wgpuDeviceCreateBuffer(self.as_raw(), &raw_desc) })
        })?;
        Ok(Buffer {
            raw,
            state: Arc::new(BufferState {
                size: desc.size,
                usage: desc.usage,
                mapped: AtomicBool::new(false),
                device: Arc::clone(self.shared()),
                instance: self.instance().clone(),
            }),
        })
    }

    /// Copies `size` bytes of `buffer` from `offset` back to the host and returns them as `T`s
    /// (through a staging buffer; `buffer` needs `COPY_SRC`). Blocks until the copy is done.
    pub fn read_buffer<T: bytemuck::AnyBitPattern>(&self, buffer: &Buffer, offset: u64, size: u64) -> Result<Vec<T>> {
        if !buffer.usage().contains(BufferUsage::COPY_SRC) {
            return Err(Error::InvalidArgument(
                "read_buffer needs a buffer with COPY_SRC usage".into(),
            ));
        }
        let staging = self.create_buffer(&BufferDescriptor {
            label: Some("readback"),
            size,
            usage: BufferUsage::MAP_READ | BufferUsage::COPY_DST,
        })?;
        let mut encoder = self.create_command_encoder(Some("readback"))?;
        encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, size)?;
        self.submit([encoder.finish()?])?;
        let mapping = staging.map(MapMode::Read, 0, size).wait()?;
        mapping.to_vec()
    }
}

impl Buffer {
    /// The raw handle, owned by `self`.
    pub fn as_raw(&self) -> sys::WGPUBuffer {
        self.raw.as_raw()
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.state.size
    }

    /// The usages the buffer was created with.
    pub fn usage(&self) -> BufferUsage {
        self.state.usage
    }

    /// Whether the buffer is mapped, or a map request is in flight.
    pub fn is_mapped(&self) -> bool {
        self.state.mapped.load(Ordering::Acquire)
    }

    /// Maps `size` bytes from `offset` for reading or writing. Resolves to a [`BufferMapping`]
    /// that borrows the buffer; the buffer is unmapped when the mapping is dropped, so no slice
    /// of it can outlive the unmap. `offset` must be a multiple of 8 and `size` of 4.
    pub fn map(&self, mode: MapMode, offset: u64, size: u64) -> MapFuture<'_> {
        let instance = self.state.instance.clone();
        let start = || -> Result<GpuFuture<()>> {
            let needed = match mode {
                MapMode::Read => BufferUsage::MAP_READ,
                MapMode::Write => BufferUsage::MAP_WRITE,
            };
            if !self.usage().contains(needed) {
                return Err(Error::InvalidArgument(format!(
                    "mapping for {mode:?} needs a buffer created with {needed:?}"
                )));
            }
            if !offset.is_multiple_of(8) || !size.is_multiple_of(4) {
                return Err(Error::InvalidArgument(format!(
                    "map: offset {offset} must be a multiple of 8 and size {size} a multiple of 4"
                )));
            }
            if offset.checked_add(size).is_none_or(|end| end > self.size()) {
                return Err(Error::InvalidArgument(format!(
                    "map: {size} bytes at offset {offset} overrun a buffer of {} bytes",
                    self.size()
                )));
            }
            if self.state.mapped.swap(true, Ordering::AcqRel) {
                return Err(Error::Map(
                    "the buffer is already mapped (or a map is in flight)".into(),
                ));
            }
            let (slot, userdata) = future::slot::<()>();
            let callback = sys::WGPUBufferMapCallbackInfo {
                nextInChain: std::ptr::null_mut(),
                mode: sys::WGPUCallbackMode::AllowSpontaneous,
                callback: Some(on_map),
                userdata1: userdata,
                userdata2: std::ptr::null_mut(),
            };
            // SAFETY: a valid buffer; the callback gets `userdata` back exactly once.
            let id = unsafe {
                sys::wgpuBufferMapAsync(self.as_raw(), mode.to_raw(), offset as usize, size as usize, callback)
            };
            Ok(GpuFuture::new(&instance, id, slot))
        };
        match start() {
            Ok(inner) => MapFuture {
                buffer: self,
                mode,
                offset,
                size,
                inner: Some(inner),
                claimed: true,
            },
            Err(error) => MapFuture {
                buffer: self,
                mode,
                offset,
                size,
                inner: Some(GpuFuture::ready(&instance, Err(error))),
                claimed: false,
            },
        }
    }

    /// Frees the buffer's memory now; later GPU use of it is an error. Refused while mapped.
    pub fn destroy(&self) -> Result<()> {
        if self.is_mapped() {
            return Err(Error::InvalidArgument(
                "cannot destroy a mapped buffer; drop its mapping first".into(),
            ));
        }
        // SAFETY: a valid buffer, not mapped (so no slice into it exists).
        unsafe { sys::wgpuBufferDestroy(self.as_raw()) };
        Ok(())
    }
}

unsafe extern "C" fn on_map(
    status: sys::WGPUMapAsyncStatus,
    message: sys::WGPUStringView,
    userdata1: *mut c_void,
    _: *mut c_void,
) {
    future::guard(|| {
        let message = strings::from_view(message);
        let result = match status {
            sys::WGPUMapAsyncStatus::Success => Ok(()),
            sys::WGPUMapAsyncStatus::CallbackCancelled => Err(Error::Cancelled(message)),
            _ => Err(Error::Map(message)),
        };
        // SAFETY: `userdata1` came from `future::slot::<()>()`; called once.
        unsafe { future::complete(userdata1, result) };
    });
}

/// A map request in flight; resolves to a [`BufferMapping`]. Dropping it before it resolves
/// cancels the request.
#[must_use = "a MapFuture does nothing unless waited for or awaited"]
#[derive(Debug)]
pub struct MapFuture<'a> {
    buffer: &'a Buffer,
    mode: MapMode,
    offset: u64,
    size: u64,
    inner: Option<GpuFuture<()>>,
    /// Whether this request set the buffer's `mapped` flag (and so must clear it on failure).
    claimed: bool,
}

impl<'a> MapFuture<'a> {
    /// Blocks until the buffer is mapped.
    pub fn wait(self) -> Result<BufferMapping<'a>> {
        self.wait_timeout(Duration::MAX)
    }

    /// Blocks until the buffer is mapped or `timeout` passes.
    pub fn wait_timeout(mut self, timeout: Duration) -> Result<BufferMapping<'a>> {
        let inner = self.inner.take().expect("a MapFuture resolves once");
        let result = inner.wait_timeout(timeout);
        self.finish(result)
    }

    fn finish(&mut self, result: Result<()>) -> Result<BufferMapping<'a>> {
        result?;
        let ptr = match self.mode {
            // SAFETY: the buffer is mapped over exactly this range.
            MapMode::Read => unsafe {
                sys::wgpuBufferGetConstMappedRange(self.buffer.as_raw(), self.offset as usize, self.size as usize)
            }
            .cast_mut(),
            // SAFETY: as above.
            MapMode::Write => unsafe {
                sys::wgpuBufferGetMappedRange(self.buffer.as_raw(), self.offset as usize, self.size as usize)
            },
        };
        if ptr.is_null() && self.size > 0 {
            return Err(Error::Map("Dawn returned no mapped range".into()));
        }
        self.claimed = false;
        self.buffer.state.device.mapped_buffers.fetch_add(1, Ordering::AcqRel);
        Ok(BufferMapping {
            buffer: self.buffer,
            mode: self.mode,
            ptr: ptr.cast(),
            len: self.size as usize,
        })
    }
}

impl<'a> Future for MapFuture<'a> {
    type Output = Result<BufferMapping<'a>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(Err(Error::Map("the map future was already resolved".into())));
        };
        match Pin::new(inner).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(result) => {
                self.inner = None;
                Poll::Ready(self.finish(result))
            }
        }
    }
}

impl Drop for MapFuture<'_> {
    fn drop(&mut self) {
        if self.claimed {
            // Not turned into a mapping: cancel a pending request (or undo a finished one) and
            // release the claim.
            // SAFETY: a valid buffer; no slice into it exists.
            unsafe { sys::wgpuBufferUnmap(self.buffer.as_raw()) };
            self.buffer.state.mapped.store(false, Ordering::Release);
        }
    }
}

/// A mapped range of a buffer. Slices borrow the mapping, and the buffer is unmapped when the
/// mapping is dropped, so no slice can be used after the unmap.
#[derive(Debug)]
pub struct BufferMapping<'a> {
    buffer: &'a Buffer,
    mode: MapMode,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is an exclusive view of host memory Dawn keeps valid until unmap; moving
// it to another thread moves that exclusivity with it.
unsafe impl Send for BufferMapping<'_> {}
// SAFETY: `&BufferMapping` only gives shared (read) access to the bytes.
unsafe impl Sync for BufferMapping<'_> {}

impl BufferMapping<'_> {
    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: Dawn keeps `len` bytes at `ptr` valid while mapped, i.e. while `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The mapped bytes, writable. Only for mappings made with [`MapMode::Write`].
    pub fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        if self.mode != MapMode::Write {
            return Err(Error::InvalidArgument("a mapping for reading cannot be written".into()));
        }
        if self.len == 0 {
            return Ok(&mut []);
        }
        // SAFETY: as in `bytes`, and `&mut self` makes this the only access.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    /// The mapped range as a slice of `T` (size and alignment must fit).
    pub fn as_slice<T: bytemuck::AnyBitPattern>(&self) -> Result<&[T]> {
        bytemuck::try_cast_slice(self.bytes())
            .map_err(|e| Error::InvalidArgument(format!("mapped range as slice: {e}")))
    }

    /// The mapped range as a mutable slice of `T`. Only for [`MapMode::Write`] mappings.
    pub fn as_mut_slice<T: bytemuck::AnyBitPattern + bytemuck::NoUninit>(&mut self) -> Result<&mut [T]> {
        bytemuck::try_cast_slice_mut(self.bytes_mut()?)
            .map_err(|e| Error::InvalidArgument(format!("mapped range as slice: {e}")))
    }

    /// A copy of the mapped range as `T`s (any alignment).
    pub fn to_vec<T: bytemuck::AnyBitPattern>(&self) -> Result<Vec<T>> {
        let size = std::mem::size_of::<T>().max(1);
        if !self.len.is_multiple_of(size) {
            return Err(Error::InvalidArgument(format!(
                "{} mapped bytes are not a whole number of {size}-byte values",
                self.len
            )));
        }
        Ok(self
            .bytes()
            .chunks_exact(size)
            .map(bytemuck::pod_read_unaligned)
            .collect())
    }

    /// Unmaps the buffer (the same as dropping the mapping).
    pub fn unmap(self) {}
}

impl Drop for BufferMapping<'_> {
    fn drop(&mut self) {
        // SAFETY: a valid, mapped buffer; every slice into it borrowed `self` and is gone.
        unsafe { sys::wgpuBufferUnmap(self.buffer.as_raw()) };
        self.buffer.state.device.mapped_buffers.fetch_sub(1, Ordering::AcqRel);
        self.buffer.state.mapped.store(false, Ordering::Release);
    }
}
