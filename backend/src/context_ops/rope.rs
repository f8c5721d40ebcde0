//! ROPE on the context's stream.

use crate::context::GpuContext;
use crate::error::Result;
use crate::memory::DeviceTensor;
use crate::ops::rope::{self, RopePlan, RopeSetRowsPlan};
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

    /// A decoder's rotary embedding and KV-cache write in one: ROPE of `x` in place (as
    /// [`GpuContext::rope_into`] with `dst` = `x`), then SET_ROWS of `rows` into `dst` at the
    /// i32 or i64 `ids` (as [`GpuContext::set_rows`]), where `rows` may hold roped elements of
    /// `x`. One
    /// dispatch where the kernel can take both: f32 `x` `[d, heads, tokens, 1]` with several
    /// heads, `rows` f32 `[n, tokens]` viewing the same storage with each token's row within
    /// that token's stride of x (the keys and values beside the queries and keys of one fused
    /// projection), `dst` f32 or f16 rows `[n, cells]`; otherwise the two ops, one after the
    /// other, with the same result. Recorded, not yet run; returns what it recorded.
    ///
    /// ```
    /// use ggml_dawn::reference::{RopeMode, RopeParams};
    /// use ggml_dawn::ops::rope::RopeSetRowsPlan;
    /// use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor, Layout};
    /// let ctx = GpuContext::new(ContextOptions::default())?;
    /// // Two tokens, each a row of 4 heads of 2 values to rope, then 2 values left as they are.
    /// let y = ctx.from_f32(GgmlType::F32, [10, 2, 1, 1], &[1.0; 20])?;
    /// let heads = Layout { ne: [2, 4, 2, 1], nb: [4, 8, 40, 80], ..*y.layout() };
    /// let x = y.view(heads)?;
    /// // Each token's last 2 heads and its 2 other values go to the cache.
    /// let tail = Layout { ne: [6, 2, 1, 1], nb: [4, 40, 80, 80], offset: 16, ..*y.layout() };
    /// let rows = y.view(tail)?;
    /// let cache = ctx.zeros(GgmlType::F16, [6, 8, 1, 1])?;
    /// let pos = ctx.upload(&HostTensor {
    ///     layout: Layout::contiguous(GgmlType::I32, [2, 1, 1, 1])?,
    ///     data: [0i32, 3].iter().flat_map(|p| p.to_le_bytes()).collect(),
    /// })?;
    /// let ran = ctx.rope_set_rows(&x, &pos, None, &RopeParams::new(2, RopeMode::Normal), &rows, &cache, &pos)?;
    /// assert!(matches!(ran, RopeSetRowsPlan::Fused(_)));
    /// let cells = ctx.read_f32(&cache)?;
    /// // Cell 0 holds token 0 (position 0: unrotated), cell 3 token 1, rotated by 3 radians.
    /// assert_eq!(cells[..6], [1.0; 6]);
    /// let (c, s) = (3f32.cos(), 3f32.sin());
    /// assert!((cells[18] - (c - s)).abs() < 2e-3 && (cells[19] - (s + c)).abs() < 2e-3);
    /// assert_eq!(cells[22..24], [1.0, 1.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn rope_set_rows(
        &self,
        x: &DeviceTensor,
        pos: &DeviceTensor,
        freq_factors: Option<&DeviceTensor>,
        params: &RopeParams,
        rows: &DeviceTensor,
        dst: &DeviceTensor,
        ids: &DeviceTensor,
    ) -> Result<RopeSetRowsPlan> {
        rope::rope_set_rows(
            &self.env(),
            &mut self.stream.lock(),
            x,
            pos,
            freq_factors,
            params,
            rows,
            dst,
            ids,
        )
    }
}
