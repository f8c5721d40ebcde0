//! The queue: submissions, buffer uploads, completion notifications.

use std::ffi::c_void;

use dawn_sys as sys;

use crate::buffer::Buffer;
use crate::command::CommandBuffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::future::{self, GpuFuture};
use crate::handle::{device_child_is_thread_safe, handle};
use crate::strings;
use crate::types::BufferUsage;

handle!(
    /// A device's queue.
    Queue,
    sys::WGPUQueue,
    sys::wgpuQueueAddRef,
    sys::wgpuQueueRelease
);
// Submit, WriteBuffer and OnSubmittedWorkDone: device-locked (the last returns a future and
// locks inside Dawn).
device_child_is_thread_safe!(Queue);

impl Device {
    /// Submits command buffers for execution, in order. Fails if the device is lost.
    pub fn submit(&self, commands: impl IntoIterator<Item = CommandBuffer>) -> Result<()> {
        self.check_lost()?;
        let commands: Vec<CommandBuffer> = commands.into_iter().collect();
        let raw: Vec<sys::WGPUCommandBuffer> = commands.iter().map(CommandBuffer::as_raw).collect();
        // SAFETY: valid queue and command buffers; the array lives during the call.
        unsafe { sys::wgpuQueueSubmit(self.queue().as_raw(), raw.len(), raw.as_ptr()) };
        Ok(())
    }

    /// Copies `data` into `buffer` at byte `offset`, in queue order. The buffer needs
    /// `COPY_DST`; offset and length must be multiples of 4 and fit in the buffer.
    pub fn write_buffer<T: bytemuck::NoUninit>(&self, buffer: &Buffer, offset: u64, data: &[T]) -> Result<()> {
        self.check_lost()?;
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let len = bytes.len() as u64;
        if !buffer.usage().contains(BufferUsage::COPY_DST) {
            return Err(Error::InvalidArgument(
                "write_buffer needs a buffer with COPY_DST usage".into(),
            ));
        }
        if !offset.is_multiple_of(4) || !len.is_multiple_of(4) {
            return Err(Error::InvalidArgument(format!(
                "write_buffer: offset {offset} and length {len} must be multiples of 4"
            )));
        }
        if offset.checked_add(len).is_none_or(|end| end > buffer.size()) {
            return Err(Error::InvalidArgument(format!(
                "write_buffer: {len} bytes at offset {offset} overrun a buffer of {} bytes",
                buffer.size()
            )));
        }
        // SAFETY: valid handles; `bytes` is readable for its length during the call (Dawn copies).
        unsafe {
            sys::wgpuQueueWriteBuffer(
                self.queue().as_raw(),
                buffer.as_raw(),
                offset,
                bytes.as_ptr().cast(),
                bytes.len(),
            )
        };
        Ok(())
    }

    /// Resolves once all work submitted so far has finished on the GPU.
    pub fn on_submitted_work_done(&self) -> GpuFuture<()> {
        if let Err(error) = self.check_lost() {
            return GpuFuture::ready(self.instance(), Err(error));
        }
        let (slot, userdata) = future::slot::<()>();
        let callback = sys::WGPUQueueWorkDoneCallbackInfo {
            nextInChain: std::ptr::null_mut(),
            mode: sys::WGPUCallbackMode::AllowSpontaneous,
            callback: Some(on_work_done),
            userdata1: userdata,
            userdata2: std::ptr::null_mut(),
        };
        // SAFETY: a valid queue; the callback gets `userdata` back exactly once.
        let id = unsafe { sys::wgpuQueueOnSubmittedWorkDone(self.queue().as_raw(), callback) };
        GpuFuture::new(self.instance(), id, slot)
    }

    /// Waits for all submitted work, at most `timeout`. A lost device is an error, and so is the
    /// first uncaptured error since the last call (the others stay in
    /// [`Device::take_uncaptured_errors`]'s log only until this call: it drains the log).
    pub fn synchronize(&self, timeout: std::time::Duration) -> Result<()> {
        self.on_submitted_work_done().wait_timeout(timeout)?;
        self.check_lost()?;
        match self.take_uncaptured_errors().into_iter().next() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

unsafe extern "C" fn on_work_done(
    status: sys::WGPUQueueWorkDoneStatus,
    message: sys::WGPUStringView,
    userdata1: *mut c_void,
    _userdata2: *mut c_void,
) {
    future::guard(|| {
        let result = match status {
            sys::WGPUQueueWorkDoneStatus::Success => Ok(()),
            sys::WGPUQueueWorkDoneStatus::CallbackCancelled => Err(Error::Cancelled(strings::from_view(message))),
            _ => Err(Error::Internal(format!(
                "queue work failed: {}",
                strings::from_view(message)
            ))),
        };
        // SAFETY: `userdata1` came from `future::slot::<()>()`; called once.
        unsafe { future::complete(userdata1, result) };
    });
}
