//! ROPE on the context's stream.

use crate::context::GpuContext;
use crate::error::Result;
use crate::memory::DeviceTensor;
use crate::ops::rope::{self, RopePlan};
use crate::reference::RopeParams;

impl GpuContext {
    /// ggml's `ggml_rope_ext` / `ggml_rope_multi` (forward): `x` f32 or f16 `[ne0, heads,
    /// tokens, seqs]` (any strides) rotated at the i32 positions `pos` (`tokens` of them, or
    /// `4·tokens` in sections for the multi-section modes), with optional f32 `freq_factors`
    /// (one per rotated pair); a new contiguous tensor of x's type and extents. Recorded, not
    /// yet run.
    ///
    /// ```
    /// use ggml_dawn::reference::{RopeMode, RopeParams};
    /// use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor, Layout};
    /// let ctx = GpuContext::new(ContextOptions::default())?;
    /// // One head of two dims at position 0 is unchanged; cos(0) = 1.
    /// let x = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[0.25, -0.5])?;
    /// let pos = ctx.upload(&HostTensor {
    ///     layout: Layout::contiguous(GgmlType::I32, [1, 1, 1, 1])?,
    ///     data: 0i32.to_le_bytes().to_vec(),
    /// })?;
    /// let y = ctx.rope(&x, &pos, None, &RopeParams::new(2, RopeMode::Neox))?;
    /// assert_eq!(ctx.read_f32(&y)?, [0.25, -0.5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rope(
        &self,
        x: &DeviceTensor,
        pos: &DeviceTensor,
        freq_factors: Option<&DeviceTensor>,
        params: &RopeParams,
    ) -> Result<DeviceTensor> {
        let l = x.layout();
        rope::check(l, pos.layout(), freq_factors.map(|f| f.layout()), l, params)?;
        let dst = self.empty(l.ty, l.ne)?;
        self.rope_into(x, pos, freq_factors, &dst, params)?;
        Ok(dst)
    }

    /// [`GpuContext::rope`] into `dst` of x's extents (f32 or f16, any strides), or in place
    /// when `dst` is `x`; returns the plan it follows.
    pub fn rope_into(
        &self,
        x: &DeviceTensor,
        pos: &DeviceTensor,
        freq_factors: Option<&DeviceTensor>,
        dst: &DeviceTensor,
        params: &RopeParams,
    ) -> Result<RopePlan> {
        rope::rope(&self.env(), &mut self.stream.lock(), x, pos, freq_factors, dst, params)
    }
}
