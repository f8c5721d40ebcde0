//! SOFT_MAX on the context's stream.

use crate::context::GpuContext;
use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::soft_max::{self, SoftMaxParams, SoftMaxPlan};

impl GpuContext {
    /// ggml's `ggml_soft_max_ext`: the softmax of each row of `x·scale + slope·mask` for the f32
    /// `x` `[n, rows, heads, seqs]` (any strides), with an optional f32 or f16 `mask` `[≥ n,
    /// ≥ rows, m2, m3]` repeated over heads and sequences (`m2 | heads`, `m3 | seqs`), optional
    /// f32 `sinks` `[≥ heads]` (one logit per head that joins the normalisation), and ALiBi
    /// slopes from `max_bias` (0: none); a new contiguous f32 tensor of x's extents. Recorded,
    /// not yet run.
    ///
    /// ```
    /// use ggml_dawn::ops::soft_max::SoftMaxParams;
    /// use ggml_dawn::{ContextOptions, GgmlType, GpuContext};
    /// let ctx = GpuContext::new(ContextOptions::default())?;
    /// let x = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[0.0, 0.0])?;
    /// let mask = ctx.from_f32(GgmlType::F16, [2, 1, 1, 1], &[0.0, f32::NEG_INFINITY])?;
    /// let sinks = ctx.from_f32(GgmlType::F32, [1, 1, 1, 1], &[0.0])?;
    /// let p = SoftMaxParams { scale: 1.0, max_bias: 0.0 };
    /// // e^0 / (e^0 + e^sink): one half; the masked key gets nothing.
    /// let y = ctx.read_f32(&ctx.soft_max(&x, Some(&mask), Some(&sinks), p)?)?;
    /// assert!((y[0] - 0.5).abs() < 1e-6 && y[1] == 0.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn soft_max(
        &self,
        x: &DeviceTensor,
        mask: Option<&DeviceTensor>,
        sinks: Option<&DeviceTensor>,
        params: SoftMaxParams,
    ) -> Result<DeviceTensor> {
        let l = x.layout();
        let dst_layout = crate::tensor::Layout::contiguous(GgmlType::F32, l.ne)?;
        soft_max::check(
            l,
            mask.map(|m| m.layout()),
            sinks.map(|s| s.layout()),
            &dst_layout,
            &params,
        )?;
        let dst = self.empty(GgmlType::F32, l.ne)?;
        self.soft_max_into(x, mask, sinks, &dst, params)?;
        Ok(dst)
    }

    /// [`GpuContext::soft_max`] into `dst` (f32 of x's extents, any strides; or x itself, in
    /// place); returns the plan it follows.
    pub fn soft_max_into(
        &self,
        x: &DeviceTensor,
        mask: Option<&DeviceTensor>,
        sinks: Option<&DeviceTensor>,
        dst: &DeviceTensor,
        params: SoftMaxParams,
    ) -> Result<SoftMaxPlan> {
        soft_max::soft_max(&self.env(), &mut self.stream.lock(), x, mask, sinks, dst, params)
    }
}
