//! RMS_NORM and its fused weight and bias on the context's stream.

use crate::context::GpuContext;
use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::norm::{self, NormPlan};

impl GpuContext {
    /// ggml's `ggml_rms_norm`: each row of the f32 `x` `[ne0, ne1, ne2, ne3]` (any strides)
    /// divided by `sqrt(mean(x²) + eps)`; a new contiguous f32 tensor of x's extents. Recorded,
    /// not yet run.
    ///
    /// ```
    /// use ggml_dawn::{ContextOptions, GgmlType, GpuContext};
    /// let ctx = GpuContext::new(ContextOptions::default())?;
    /// // Rows [3, 4] and [1, 1]: mean squares 12.5 and 1.
    /// let x = ctx.from_f32(GgmlType::F32, [2, 2, 1, 1], &[3.0, 4.0, 1.0, 1.0])?;
    /// let y = ctx.read_f32(&ctx.rms_norm(&x, 0.0)?)?;
    /// let s = 12.5f32.sqrt();
    /// assert!((y[0] - 3.0 / s).abs() < 1e-6 && (y[1] - 4.0 / s).abs() < 1e-6 && y[2] == 1.0);
    /// // The decoder's form: normed, times a weight [ne0], plus a bias [ne0] (either optional).
    /// let w = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[2.0, 0.5])?;
    /// let b = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[1.0, 1.0])?;
    /// let z = ctx.read_f32(&ctx.rms_norm_mul_add(&x, Some(&w), Some(&b), 0.0)?)?;
    /// assert_eq!(z[2..], [3.0, 1.5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rms_norm(&self, x: &DeviceTensor, eps: f32) -> Result<DeviceTensor> {
        self.rms_norm_mul_add(x, None, None, eps)
    }

    /// `rms_norm(x, eps) · weight + bias` in one dispatch (upstream's RMS_NORM_MUL_ADD fusion):
    /// `weight` and `bias` f32 with packed rows, each extent dividing x's (repeated over x as
    /// ggml's MUL and ADD repeat them), either left out; a new contiguous f32 tensor of x's
    /// extents. Recorded, not yet run.
    pub fn rms_norm_mul_add(
        &self,
        x: &DeviceTensor,
        weight: Option<&DeviceTensor>,
        bias: Option<&DeviceTensor>,
        eps: f32,
    ) -> Result<DeviceTensor> {
        let l = x.layout();
        let dst_layout = crate::tensor::Layout::contiguous(GgmlType::F32, l.ne)?;
        norm::check(
            l,
            weight.map(|w| w.layout()),
            bias.map(|b| b.layout()),
            &dst_layout,
            eps,
        )?;
        let dst = self.empty(GgmlType::F32, l.ne)?;
        self.rms_norm_mul_add_into(x, weight, bias, &dst, eps)?;
        Ok(dst)
    }

    /// [`GpuContext::rms_norm_mul_add`] into `dst` (f32 of x's extents, any strides; or x itself,
    /// in place); returns the plan it follows.
    pub fn rms_norm_mul_add_into(
        &self,
        x: &DeviceTensor,
        weight: Option<&DeviceTensor>,
        bias: Option<&DeviceTensor>,
        dst: &DeviceTensor,
        eps: f32,
    ) -> Result<NormPlan> {
        norm::rms_norm_mul_add(&self.env(), &mut self.stream.lock(), x, weight, bias, dst, eps)
    }

    /// A decoder's residual ADD and the RMS_NORM after it in one dispatch: `sum = x + residual`
    /// and `rms_norm(sum, eps) · weight + bias`; returns both, new contiguous f32 tensors of x's
    /// extents (`residual` f32 of x's extents; `weight` and `bias` as for
    /// [`GpuContext::rms_norm_mul_add`]). Recorded, not yet run.
    ///
    /// ```
    /// use ggml_dawn::{GgmlType, GpuContext};
    /// let ctx = GpuContext::new(Default::default())?;
    /// let x = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[1.0, 2.0])?;
    /// let r = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[2.0, 2.0])?;
    /// let w = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[1.0, 2.0])?;
    /// let (sum, y) = ctx.add_rms_norm_mul_add(&x, &r, Some(&w), None, 0.0)?;
    /// assert_eq!(ctx.read_f32(&sum)?, [3.0, 4.0]);
    /// let s = 12.5f32.sqrt();
    /// let y = ctx.read_f32(&y)?;
    /// assert!((y[0] - 3.0 / s).abs() < 1e-6 && (y[1] - 8.0 / s).abs() < 1e-6);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn add_rms_norm_mul_add(
        &self,
        x: &DeviceTensor,
        residual: &DeviceTensor,
        weight: Option<&DeviceTensor>,
        bias: Option<&DeviceTensor>,
        eps: f32,
    ) -> Result<(DeviceTensor, DeviceTensor)> {
        let l = x.layout();
        let out = crate::tensor::Layout::contiguous(GgmlType::F32, l.ne)?;
        norm::check(l, weight.map(|w| w.layout()), bias.map(|b| b.layout()), &out, eps)?;
        norm::check_residual(l, residual.layout(), &out)?;
        let sum = self.empty(GgmlType::F32, l.ne)?;
        let dst = self.empty(GgmlType::F32, l.ne)?;
        self.add_rms_norm_mul_add_into(x, residual, &sum, weight, bias, &dst, eps)?;
        Ok((sum, dst))
    }

    /// [`GpuContext::add_rms_norm_mul_add`] into `sum` and `dst` (f32 of x's extents, any
    /// strides, apart from each other and the inputs); returns the plan it follows.
    #[allow(clippy::too_many_arguments)]
    pub fn add_rms_norm_mul_add_into(
        &self,
        x: &DeviceTensor,
        residual: &DeviceTensor,
        sum: &DeviceTensor,
        weight: Option<&DeviceTensor>,
        bias: Option<&DeviceTensor>,
        dst: &DeviceTensor,
        eps: f32,
    ) -> Result<NormPlan> {
        norm::add_rms_norm_mul_add(
            &self.env(),
            &mut self.stream.lock(),
            x,
            residual,
            sum,
            weight,
            bias,
            dst,
            eps,
        )
    }
}
