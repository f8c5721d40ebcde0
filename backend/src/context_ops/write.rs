//! Host data written into existing device tensors, in order with the ops on the context's
//! stream.

use crate::context::GpuContext;
use crate::error::Result;
use crate::memory::DeviceTensor;
use crate::ops::write::{self, WritePath};
use crate::tensor::HostTensor;

impl GpuContext {
    /// Writes `host` (of `tensor`'s type and extents, any layout) into `tensor`, which may be
    /// any view (a KV cache's slot, an input buffer), in order with the ops on the context's
    /// stream: ops recorded before read the old values, ops recorded after the new ones, with no
    /// wait for the GPU. Returns how the bytes went ([`WritePath`]).
    ///
    /// ```
    /// use ggml_dawn::{GgmlType, GpuContext, HostTensor};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = GpuContext::new(Default::default())?;
    /// let x = ctx.from_f32(GgmlType::F32, [2, 2, 1, 1], &[1., 2., 3., 4.])?;
    /// let before = ctx.add(&x, &x)?; // recorded, reads [1, 2, 3, 4]
    /// // Column 1 of x (a strided view) becomes [20, 40].
    /// let column = x.narrow(0, 1, 1)?;
    /// ctx.write(&column, &HostTensor::from_f32(GgmlType::F32, [1, 2, 1, 1], &[20., 40.])?)?;
    /// let after = ctx.add(&x, &x)?;
    /// assert_eq!(ctx.read_f32(&before)?, [2., 4., 6., 8.]);
    /// assert_eq!(ctx.read_f32(&after)?, [2., 40., 6., 80.]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn write(&self, tensor: &DeviceTensor, host: &HostTensor) -> Result<WritePath> {
        write::write(&self.env(), &mut self.stream.lock(), tensor, host)
    }

    /// [`GpuContext::write`] of f32 values in ggml's order (innermost first), converted to the
    /// tensor's type on the CPU (rounded for f16 and bf16, quantized for block formats).
    pub fn write_f32(&self, tensor: &DeviceTensor, values: &[f32]) -> Result<WritePath> {
        let l = tensor.layout();
        self.write(tensor, &HostTensor::from_f32(l.ty, l.ne, values)?)
    }
}
