//! Buffers, and mapping them into typed slices whose lifetimes end before the unmap.

use std::ffi::c_void;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use dawn_sys as sys;
use parking_lot::Mutex;

use crate::device::{Device, HostAccess};
use crate::error::{Error, Result};
use crate::future::{self, GpuFuture};
use crate::handle::{device_child_is_thread_safe, handle};
use crate::strings;
use crate::types::{BufferUsage, MapMode};

handle!(
    /// The raw buffer reference held by [`Buffer`].
    RawBuffer,
    sys::WGPUBuffer,
    sys::wgpuBufferAddRef,
    sys::wgpuBufferRelease
);
// MapAsync, GetMappedRange, Unmap and Destroy are "no autolock": Dawn's buffer synchronises
// them itself. This crate also orders them with the buffer's own state lock (`MapState`), so
// no mapping's memory can be unmapped or freed by another thread's call.
device_child_is_thread_safe!(RawBuffer);

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

impl<'a> BufferDescriptor<'a> {
    /// An unlabelled buffer of `size` bytes for `usage`.
    pub const fn new(size: u64, usage: BufferUsage) -> Self {
        Self {
            label: None,
            size,
            usage,
        }
    }

    /// The same, named `label` in Dawn's error messages.
    pub const fn with_label(self, label: &'a str) -> Self {
        Self {
            label: Some(label),
            ..self
        }
    }
}

/// A GPU buffer. Cheap to clone; clones share the buffer.
///
/// A buffer holds a reference to its [`Device`]: dropping every other handle of the device does
/// not destroy it while a buffer (and so any mapping of it) is alive.
#[derive(Debug, Clone)]
pub struct Buffer {
    raw: RawBuffer,
    state: Arc<BufferState>,
}

#[derive(Debug)]
struct BufferState {
    size: u64,
    usage: BufferUsage,
    map: Mutex<MapState>,
    /// Keeps the device alive: Dawn destroys a device (and unmaps all its buffers) when the last
    /// external reference to it goes, and a buffer's own reference to it is internal.
    device: Device,
}

/// Where a buffer is in its mapping life. Every transition happens under the buffer's lock, so
/// that deciding and changing are one step (no other thread acts in between).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MapState {
    /// Not mapped; a map may start.
    Unmapped,
    /// A map request is in flight (owned by one [`MapFuture`]).
    Pending,
    /// Mapped; one [`BufferMapping`] lends out the memory.
    Mapped,
    /// Destroyed; it can never be mapped again.
    Destroyed,
}

impl Device {
    /// Creates a buffer. A size over `max_buffer_size`, or a usage WebGPU forbids, is an error.
    pub fn create_buffer(&self, desc: &BufferDescriptor<'_>) -> Result<Buffer> {
        self.create_buffer_impl(desc, false)
    }

    /// Creates a buffer holding `data`, with `usage` (plus nothing else). Its size is `data`'s
    /// rounded up to whole 4-byte words (at least one); the bytes past `data` are zero.
    pub fn create_buffer_init<T: bytemuck::NoUninit>(
        &self,
        label: Option<&str>,
        usage: BufferUsage,
        data: &[T],
    ) -> Result<Buffer> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let size = (bytes.len() as u64).next_multiple_of(4).max(4);
        // Held while we write through the mapped range: `Device::destroy` (which would unmap it)
        // is refused meanwhile.
        let access = self.shared().host_access()?;
        let buffer = self.create_buffer_impl(&BufferDescriptor { label, size, usage }, true)?;
        // SAFETY: the buffer was created mapped at creation over its whole size, and no other
        // thread has it yet, so nothing can unmap or destroy it but us; `access` keeps the device
        // from being destroyed. We write all `size` bytes, the data then zeros for the padding
        // up to a whole word (with `disable_lazy_clear_for_mapped_at_creation_buffer` Dawn does
        // not clear the range, and a kernel reading the last word, or a read-back, would see
        // whatever the memory held before), then unmap.
        unsafe {
            let ptr = sys::wgpuBufferGetMappedRange(buffer.as_raw(), 0, size as usize);
            if ptr.is_null() {
                return Err(Error::Map("the buffer could not be mapped at creation".into()));
            }
            let ptr = ptr.cast::<u8>();
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len());
            std::ptr::write_bytes(ptr.add(bytes.len()), 0, size as usize - bytes.len());
            sys::wgpuBufferUnmap(buffer.as_raw());
        }
        drop(access);
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
                map: Mutex::new(MapState::Unmapped),
                device: self.clone(),
            }),
        })
    }

    /// Copies `size` bytes of `buffer` from `offset` back to the host and returns them as `T`s
    /// (through a staging buffer; `buffer` needs `COPY_SRC`). Blocks until the copy is done.
    pub fn read_buffer<T: bytemuck::AnyBitPattern>(&self, buffer: &Buffer, offset: u64, size: u64) -> Result<Vec<T>> {
        self.read_buffer_timeout(buffer, offset, size, std::time::Duration::MAX)
    }

    /// [`Device::read_buffer`], waiting at most `timeout` for the copy ([`Error::Timeout`]
    /// after it; the device may still finish the copy later).
    pub fn read_buffer_timeout<T: bytemuck::AnyBitPattern>(
        &self,
        buffer: &Buffer,
        offset: u64,
        size: u64,
        timeout: std::time::Duration,
    ) -> Result<Vec<T>> {
        self.read_buffer_staged(buffer, offset, size, &mut None, timeout)
    }

    /// [`Device::read_buffer_timeout`] through `staging`, a read-back buffer the caller keeps
    /// between reads: used when it holds `size` bytes, else made (or replaced) to fit, so reads
    /// of one size create no buffer after the first. A failed copy or wait leaves `staging`
    /// empty (the buffer may still be mapping).
    pub fn read_buffer_staged<T: bytemuck::AnyBitPattern>(
        &self,
        buffer: &Buffer,
        offset: u64,
        size: u64,
        staging: &mut Option<Buffer>,
        timeout: std::time::Duration,
    ) -> Result<Vec<T>> {
        if !buffer.usage().contains(BufferUsage::COPY_SRC) {
            return Err(Error::InvalidArgument(
                "read_buffer needs a buffer with COPY_SRC usage".into(),
            ));
        }
        let kept = match staging.take() {
            Some(kept) if kept.size() >= size && kept.state.device.as_raw() == self.as_raw() => kept,
            _ => self.create_buffer(&BufferDescriptor {
                label: Some("readback"),
                size,
                usage: BufferUsage::MAP_READ | BufferUsage::COPY_DST,
            })?,
        };
        let mut encoder = self.create_command_encoder(Some("readback"))?;
        encoder.copy_buffer_to_buffer(buffer, offset, &kept, 0, size)?;
        self.submit([encoder.finish()?])?;
        let values = kept.map(MapMode::Read, 0, size).wait_timeout(timeout)?.to_vec()?;
        *staging = Some(kept);
        Ok(values)
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

    /// The device the buffer belongs to (the buffer keeps it alive).
    pub fn device(&self) -> &Device {
        &self.state.device
    }

    /// How many `Buffer` handles share this buffer (this one and its clones) at the moment of the
    /// call; other threads may clone or drop theirs meanwhile. For caches that hold a handle and
    /// want to let go of buffers nobody else holds.
    pub fn handle_count(&self) -> usize {
        Arc::strong_count(&self.state)
    }

    /// Whether the buffer is mapped, or a map request is in flight.
    pub fn is_mapped(&self) -> bool {
        matches!(*self.state.map.lock(), MapState::Pending | MapState::Mapped)
    }

    /// Maps `size` bytes from `offset` for reading or writing. Resolves to a [`BufferMapping`]
    /// that borrows the buffer; the buffer is unmapped when the mapping is dropped, so no slice
    /// of it can outlive the unmap. `offset` must be a multiple of 8 and `size` of 4.
    ///
    /// One map at a time: a second request while one is in flight or mapped fails. A map that
    /// resolves after [`Buffer::destroy`] or [`Device::destroy`] fails.
    pub fn map(&self, mode: MapMode, offset: u64, size: u64) -> MapFuture<'_> {
        let instance = self.state.device.instance().clone();
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
            self.state.device.check_lost()?;
            let mut state = self.state.map.lock();
            match *state {
                MapState::Unmapped => *state = MapState::Pending,
                MapState::Destroyed => return Err(Error::Map("the buffer is destroyed".into())),
                MapState::Pending | MapState::Mapped => {
                    return Err(Error::Map(
                        "the buffer is already mapped (or a map is in flight)".into(),
                    ));
                }
            }
            let (slot, userdata) = future::slot::<()>();
            let callback = sys::WGPUBufferMapCallbackInfo {
                nextInChain: std::ptr::null_mut(),
                mode: sys::WGPUCallbackMode::AllowSpontaneous,
                callback: Some(on_map),
                userdata1: userdata,
                userdata2: std::ptr::null_mut(),
            };
            // Still under the lock, so `Buffer::destroy` comes wholly before (and the request is
            // refused above) or after the request (and Dawn fails it); never between the state
            // change and the request, where Dawn would see a request on a destroyed buffer. The
            // callback, should Dawn run it right away, only fills a slot nobody waits on yet.
            // SAFETY: a valid buffer; the callback gets `userdata` back exactly once. No memory is
            // lent out until the request succeeds and `MapFuture::finish` takes it.
            let id = unsafe {
                sys::wgpuBufferMapAsync(self.as_raw(), mode.to_raw(), offset as usize, size as usize, callback)
            };
            drop(state);
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

    /// Frees the buffer's memory now; later use of it is an error. Refused while mapped (that
    /// would free the memory under the mapping's slices); a map still in flight fails instead.
    /// Destroying twice is not an error.
    pub fn destroy(&self) -> Result<()> {
        {
            let mut state = self.state.map.lock();
            match *state {
                MapState::Mapped => {
                    return Err(Error::InvalidArgument(
                        "cannot destroy a mapped buffer; drop its mapping first".into(),
                    ));
                }
                MapState::Destroyed => return Ok(()),
                // A pending map can no longer become a mapping once the state says destroyed.
                MapState::Unmapped | MapState::Pending => *state = MapState::Destroyed,
            }
        }
        // SAFETY: a valid buffer; the state is `Destroyed`, so no mapping of it exists or can be
        // made (a `MapFuture` turns into a mapping only from `Pending`, under the same lock).
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
    /// Whether this request moved the buffer to `Pending` (and so must undo that on failure).
    claimed: bool,
}

impl<'a> MapFuture<'a> {
    /// Blocks until the buffer is mapped.
    pub fn wait(self) -> Result<BufferMapping<'a>> {
        self.wait_timeout(Duration::MAX)
    }

    /// Blocks until the buffer is mapped or `timeout` passes. A future already polled to its
    /// result (as a `Future`) has nothing more to give: an error.
    pub fn wait_timeout(mut self, timeout: Duration) -> Result<BufferMapping<'a>> {
        let Some(inner) = self.inner.take() else {
            return Err(Error::Map("the map future was already resolved".into()));
        };
        let result = inner.wait_timeout(timeout);
        self.finish(result)
    }

    fn finish(&mut self, result: Result<()>) -> Result<BufferMapping<'a>> {
        result?;
        // First the device (it must not be destroyed while the mapping lives), then the buffer.
        let access = self.buffer.state.device.shared().host_access()?;
        let mut state = self.buffer.state.map.lock();
        if *state != MapState::Pending {
            // Only `Buffer::destroy` leaves `Pending` behind our back.
            return Err(Error::Map(
                "the buffer was destroyed while the map was in flight".into(),
            ));
        }
        // Under the buffer's lock, so `Buffer::destroy` cannot run between getting the range and
        // recording that it is lent out.
        let ptr = match self.mode {
            // SAFETY: the buffer is mapped over exactly this range (the request succeeded and the
            // state is still `Pending`, so nothing destroyed or unmapped it).
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
        *state = MapState::Mapped;
        self.claimed = false;
        Ok(BufferMapping {
            buffer: self.buffer,
            mode: self.mode,
            ptr: ptr.cast(),
            len: self.size as usize,
            _access: access,
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
        if !self.claimed {
            return;
        }
        // Not turned into a mapping: cancel a pending request (or undo a finished one) and
        // release the claim. While the state is `Pending` this future owns the map: no one else
        // can map, and `Buffer::destroy` needs the lock held here, so it comes wholly before (the
        // state says `Destroyed`: nothing to undo) or after the unmap. Dawn may run the request's
        // callback inside the unmap; it only fills the slot and wakes the waiting task.
        let mut state = self.buffer.state.map.lock();
        if *state == MapState::Pending {
            // SAFETY: a valid buffer, not destroyed (the state is `Pending`); no slice into it
            // exists (no mapping was made).
            unsafe { sys::wgpuBufferUnmap(self.buffer.as_raw()) };
            *state = MapState::Unmapped;
        }
    }
}

/// A mapped range of a buffer. Slices borrow the mapping, and the buffer is unmapped when the
/// mapping is dropped, so no slice can be used after the unmap.
///
/// The memory stays valid for as long as the mapping lives: the buffer is borrowed (so alive, and
/// it keeps its device alive), [`Buffer::destroy`] is refused while it is mapped, and so is
/// [`Device::destroy`] while any of the device's buffers is.
#[derive(Debug)]
pub struct BufferMapping<'a> {
    buffer: &'a Buffer,
    mode: MapMode,
    ptr: *mut u8,
    len: usize,
    /// Keeps `Device::destroy` from unmapping the buffer under us.
    _access: HostAccess,
}

// SAFETY: the mapping is the only view of `len` bytes of host memory that stay valid until it
// is dropped (see the type's documentation), wherever it is dropped: unmapping from another
// thread is fine, as Dawn's buffer calls are thread-safe on a device with implicit device
// synchronization. Moving the mapping moves that exclusive view with it.
unsafe impl Send for BufferMapping<'_> {}
// SAFETY: `&BufferMapping` gives only shared (read-only) access to the bytes, and while the
// mapping lives nothing else writes them: the GPU cannot use a mapped buffer (Dawn rejects
// submits that use one, a check only the unsafe `skip_validation` toggle removes).
unsafe impl Sync for BufferMapping<'_> {}

impl BufferMapping<'_> {
    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: Dawn keeps `len` bytes at `ptr` valid while the buffer is mapped, and it stays
        // mapped while `self` lives: only dropping `self` leaves `MapState::Mapped`,
        // `Buffer::destroy` refuses that state, `_access` makes `Device::destroy` refuse, and the
        // borrowed buffer holds a `Device`, so releasing handles cannot destroy the device either.
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
        // SAFETY: a valid, mapped buffer (the state is `Mapped`, which only this mapping leaves);
        // every slice into it borrowed `self` and is gone.
        unsafe { sys::wgpuBufferUnmap(self.buffer.as_raw()) };
        *self.buffer.state.map.lock() = MapState::Unmapped;
        // `_access` is dropped after this, so the device can be destroyed again only once the
        // buffer is unmapped.
    }
}
