//! SCALE on the context's stream.

use crate::context::GpuContext;
use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::scale::{self, ScalePlan};

impl GpuContext {
    /// ggml's `ggml_scale_bias`: `x·scale + bias` for each element of the f32 `x` `[ne0, ne1,
    /// ne2, ne3]` (any strides), one fused multiply-add; a new contiguous f32 tensor. Recorded,
    /// not yet run.
    ///
    /// ```
    /// use ggml_dawn::{ContextOptions, GgmlType, GpuContext};
    /// let ctx = GpuContext::new(ContextOptions::default())?;
    /// let x = ctx.from_f32(GgmlType::F32, [4, 1, 1, 1], &[1.0, -2.0, 0.5, 0.0])?;
    /// let y = ctx.read_f32(&ctx.scale(&x, 2.0, 1.0)?)?;
    /// assert_eq!(y, [3.0, -3.0, 2.0, 1.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scale(&self, x: &DeviceTensor, scale: f32, bias: f32) -> Result<DeviceTensor> {
        let l = x.layout();
        scale::check(l, &crate::tensor::Layout::contiguous(GgmlType::F32, l.ne)?, scale, bias)?;
        let dst = self.empty(GgmlType::F32, l.ne)?;
        self.scale_into(x, &dst, scale, bias)?;
        Ok(dst)
    }

    /// [`GpuContext::scale`] into `dst` (f32 of x's extents, any strides; or x itself, in
    /// place); returns the plan it follows.
    pub fn scale_into(&self, x: &DeviceTensor, dst: &DeviceTensor, scale: f32, bias: f32) -> Result<ScalePlan> {
        scale::scale(&self.env(), &mut self.stream.lock(), x, dst, scale, bias)
    }
}
