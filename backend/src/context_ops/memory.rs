//! [`crate::GpuContext`]'s device tensors: made, filled and read back on its device, and the
//! waits on its stream.

use std::time::Duration;

use crate::context::GpuContext;
use crate::error::Result;
use crate::exec::Stream;
use crate::ggml_type::GgmlType;
use crate::memory::{DeviceTensor, create_storage, download_timeout, poisoned, upload};
use crate::tensor::{HostTensor, Layout};

/// Device tensors made, filled and read back through the context (on its device, so its ops
/// take them).
impl GpuContext {
    /// Copies a host tensor (any type, any layout over its bytes) into a new buffer.
    pub fn upload(&self, tensor: &HostTensor) -> Result<DeviceTensor> {
        Ok(upload(&self.device, &[tensor])?.remove(0))
    }

    /// Copies host tensors into one new buffer, each at a binding-aligned offset; in order.
    pub fn upload_all(&self, tensors: &[&HostTensor]) -> Result<Vec<DeviceTensor>> {
        upload(&self.device, tensors)
    }

    /// A contiguous tensor of type `ty` and extents `ne` from f32 values in ggml's order
    /// (innermost first), converted on the CPU: rounded for f16 and bf16, quantized for the
    /// block formats the CPU can quantize.
    pub fn from_f32(&self, ty: GgmlType, ne: [usize; 4], values: &[f32]) -> Result<DeviceTensor> {
        self.upload(&HostTensor::from_f32(ty, ne, values)?)
    }

    /// A contiguous tensor whose every byte is zero (0.0 in the float types).
    pub fn zeros(&self, ty: GgmlType, ne: [usize; 4]) -> Result<DeviceTensor> {
        self.filled(Layout::contiguous(ty, ne)?, 0)
    }

    /// A contiguous tensor to be written (by an op's `_into`), without filling it from the
    /// host. Its bytes read as zero before they are written: Dawn clears new buffers on first
    /// use, and where a context switched that off (`lazy_clear_resource_on_first_use`), this
    /// fills them with zeros itself.
    pub fn empty(&self, ty: GgmlType, ne: [usize; 4]) -> Result<DeviceTensor> {
        let layout = Layout::contiguous(ty, ne)?;
        let lazy_clear_off = self
            .options()
            .disable_toggles
            .iter()
            .any(|t| t == "lazy_clear_resource_on_first_use");
        if lazy_clear_off {
            return self.filled(layout, 0);
        }
        let bytes = layout.end_bytes()? as u64;
        let buffer = create_storage(&self.device, "tensor", bytes)?;
        DeviceTensor::new(layout, buffer, 0, bytes)
    }

    /// A new tensor of `layout` whose every byte is `byte` (0xFF reads as NaN in f32 and f16,
    /// so elements a kernel fails to write stand out).
    pub fn filled(&self, layout: Layout, byte: u8) -> Result<DeviceTensor> {
        poisoned(&self.device, layout, byte)
    }

    /// Waits for the context's recorded work (at most its timeout), then reads the tensor's
    /// storage back (all of it: a view reads back with its own layout over the same bytes).
    /// Work recorded on other streams is not waited for: see [`GpuContext::read_after`].
    pub fn read(&self, tensor: &DeviceTensor) -> Result<HostTensor> {
        self.check_operands(&[tensor])?;
        let timeout = self.options().timeout;
        let mut staging = self.readback.lock();
        self.stream
            .lock()
            .read_through(|| crate::memory::download_staged(&self.device, tensor, &mut staging, timeout))
    }

    /// Reads a tensor written by ops recorded on a stream of one's own ([`GpuContext::stream`]):
    /// waits for that stream's work and the context's own (each at most the context's timeout),
    /// then reads it back. [`GpuContext::read`] waits for the context's own stream only, so
    /// work still recorded on another stream would not be in what it reads.
    pub fn read_after(&self, stream: &mut Stream, tensor: &DeviceTensor) -> Result<HostTensor> {
        self.check_operands(&[tensor])?;
        self.check_stream(stream)?;
        stream.synchronize(self.options().timeout)?;
        self.synchronize()?;
        download_timeout(&self.device, tensor, self.options().timeout)
    }

    /// [`GpuContext::read`], converted to f32 values in the tensor's logical order.
    pub fn read_f32(&self, tensor: &DeviceTensor) -> Result<Vec<f32>> {
        Ok(self.read(tensor)?.to_f32()?)
    }

    /// Submits the context's recorded work, then tells without blocking whether all of it has
    /// Dispatches recorded and submits made on the context's own stream so far.
    pub fn stream_counts(&self) -> crate::exec::StreamCounts {
        self.stream.lock().counts()
    }

    /// Bind groups the context's own stream keeps for reuse (a step that records the same ops
    /// on the same buffers again makes none).
    pub fn cached_bind_groups(&self) -> usize {
        self.stream.lock().cached_bind_groups()
    }

    /// finished: a wait that never blocks, e.g. to keep a user interface responsive.
    pub fn poll(&self) -> Result<bool> {
        self.stream.lock().poll()
    }

    /// Starts timing the context's work on the GPU, by kernel or by submit ([`crate::profile`]);
    /// fails where the device has no timestamp queries. Each submit is then waited for, so a
    /// profiled run is slower than a plain one.
    pub fn start_profile(&self, mode: crate::profile::ProfileMode) -> Result<()> {
        self.stream.lock().start_profile(mode)
    }

    /// Stops profiling and returns the GPU time per kernel since [`GpuContext::start_profile`].
    pub fn finish_profile(&self) -> Result<crate::profile::Profile> {
        self.stream.lock().finish_profile()
    }

    /// Submits the context's recorded work without waiting for it.
    pub fn flush(&self) -> Result<()> {
        self.stream.lock().flush()
    }

    /// Submits the context's recorded work and waits for it, at most the context's timeout.
    pub fn synchronize(&self) -> Result<()> {
        self.synchronize_timeout(self.options().timeout)
    }

    /// Submits the context's recorded work and waits for it, at most `timeout`. A timeout is
    /// an error ([`dawn::Error::Timeout`] inside [`BackendError::Dawn`](crate::error::BackendError::Dawn)) after which the work
    /// goes on and the context stays usable (wait again, or [`GpuContext::poll`]); a lost device
    /// stops the context's stream: later work fails at once ([`BackendError::StreamFailed`](crate::error::BackendError::StreamFailed)).
    pub fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        self.stream.lock().synchronize(timeout)
    }
}
