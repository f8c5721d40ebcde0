//! GET_ROWS, SET_ROWS and CPY on the context's stream.

use crate::context::GpuContext;
use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::rows::{self, RowsPlan};

impl GpuContext {
    /// ggml's `ggml_get_rows`: `src` `[n, m, b1, b2]` of any type MUL_MAT reads (or i32), `ids`
    /// i32 `[r, b1, b2, 1]`; a new contiguous f32 (i32 for i32 `src`) `[n, r, b1, b2]` holding
    /// row `ids[i, j, k]` of `src`'s batch `(j, k)` at `(i, j, k)`. An id outside `0..m` gives a
    /// row of zeros. Recorded, not yet run.
    ///
    /// ```
    /// use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor, Layout};
    /// let ctx = GpuContext::new(ContextOptions::default())?;
    /// let table = ctx.from_f32(GgmlType::F16, [2, 3, 1, 1], &[0.0, 0.5, 1.0, 1.5, 2.0, 2.5])?;
    /// let ids = ctx.upload(&HostTensor {
    ///     layout: Layout::contiguous(GgmlType::I32, [2, 1, 1, 1])?,
    ///     data: [2i32, 0].iter().flat_map(|v| v.to_le_bytes()).collect(),
    /// })?;
    /// let rows = ctx.get_rows(&table, &ids)?;
    /// assert_eq!(ctx.read_f32(&rows)?, [2.0, 2.5, 0.0, 0.5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_rows(&self, src: &DeviceTensor, ids: &DeviceTensor) -> Result<DeviceTensor> {
        let (ls, li) = (src.layout(), ids.layout());
        let ty = if ls.ty == GgmlType::I32 {
            GgmlType::I32
        } else {
            GgmlType::F32
        };
        let dst = self.empty(ty, [ls.ne[0], li.ne[0], ls.ne[2], ls.ne[3]])?;
        self.get_rows_into(src, ids, &dst)?;
        Ok(dst)
    }

    /// [`GpuContext::get_rows`] into an existing `dst`; returns the plan it follows.
    pub fn get_rows_into(&self, src: &DeviceTensor, ids: &DeviceTensor, dst: &DeviceTensor) -> Result<RowsPlan> {
        rows::get_rows(&self.env(), &mut self.stream.lock(), src, ids, dst)
    }

    /// ggml's `ggml_set_rows`: writes row `i` of `src` (f32 or f16 `[n, r, b2, b3]`) into row
    /// `ids[i, j mod c1, k mod c2]` of `dst` (`[n, m, b2, b3]`, f32, f16, bf16, q8_0, q4_0,
    /// q4_1, q5_0, q5_1 or iq4_nl; quantized bit for bit as ggml's CPU) for each batch `(j, k)`;
    /// `ids` i32 or i64 `[r, c1, c2, 1]`. Rows not named keep their bytes; an id outside `0..m`
    /// writes nothing. Returns the plan it follows.
    ///
    /// ```
    /// use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor, Layout};
    /// let ctx = GpuContext::new(ContextOptions::default())?;
    /// let cache = ctx.zeros(GgmlType::F16, [2, 4, 1, 1])?;
    /// let k = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[1.0, -2.0])?;
    /// let at = ctx.upload(&HostTensor {
    ///     layout: Layout::contiguous(GgmlType::I64, [1, 1, 1, 1])?,
    ///     data: 3i64.to_le_bytes().to_vec(),
    /// })?;
    /// ctx.set_rows(&cache, &k, &at)?;
    /// assert_eq!(ctx.read_f32(&cache)?, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, -2.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_rows(&self, dst: &DeviceTensor, src: &DeviceTensor, ids: &DeviceTensor) -> Result<RowsPlan> {
        rows::set_rows(&self.env(), &mut self.stream.lock(), dst, src, ids)
    }

    /// ggml's `ggml_cpy`: the elements of `src` in logical order (`i0` fastest) into those of
    /// `dst`, any layouts of equal element counts (views, permutations), converted: the same
    /// type as bytes, f32/f16/bf16 to each other, f32 to and from i32, f32/f16/bf16 to q8_0, q4_0,
    /// q4_1, q5_0, q5_1, iq4_nl (contiguous dst; ggml's rounding), a quantized type to f32.
    /// Returns the plan it follows.
    ///
    /// ```
    /// use ggml_dawn::{ContextOptions, GgmlType, GpuContext};
    /// let ctx = GpuContext::new(ContextOptions::default())?;
    /// let x = ctx.from_f32(GgmlType::F32, [3, 2, 1, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    /// // The transpose, written contiguous in f16.
    /// let t = ctx.empty(GgmlType::F16, [2, 3, 1, 1])?;
    /// ctx.cpy(&x.permute([1, 0, 2, 3])?, &t)?;
    /// assert_eq!(ctx.read_f32(&t)?, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cpy(&self, src: &DeviceTensor, dst: &DeviceTensor) -> Result<RowsPlan> {
        rows::cpy(&self.env(), &mut self.stream.lock(), src, dst)
    }
}
