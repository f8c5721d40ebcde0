//! ARGMAX on the context's stream.

use crate::context::GpuContext;
use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::argmax::{self, ArgmaxPlan};

impl GpuContext {
    /// ggml's `ggml_argmax`: for each row of the f32 matrix `x` `[n, rows, 1, 1]` (any strides)
    /// the index of its maximum, the last of equal maxima as ggml's CPU loop finds it; a new
    /// i32 tensor `[rows]`. Recorded, not yet run.
    ///
    /// ```
    /// use ggml_dawn::{ContextOptions, GgmlType, GpuContext};
    /// let ctx = GpuContext::new(ContextOptions::default())?;
    /// let x = ctx.from_f32(GgmlType::F32, [4, 2, 1, 1], &[1.0, 7.0, 7.0, 2.0, -3.0, -1.0, -9.0, -2.0])?;
    /// let idx = ctx.read(&ctx.argmax(&x)?)?;
    /// let idx: Vec<i32> = idx.data.chunks(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect();
    /// assert_eq!(idx, [2, 1]); // ties: the last
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn argmax(&self, x: &DeviceTensor) -> Result<DeviceTensor> {
        let rows = x.layout().ne[1];
        let dst_layout = crate::tensor::Layout::contiguous(GgmlType::I32, [rows, 1, 1, 1])?;
        argmax::check(x.layout(), &dst_layout)?;
        let dst = self.empty(GgmlType::I32, [rows, 1, 1, 1])?;
        self.argmax_into(x, &dst)?;
        Ok(dst)
    }

    /// [`GpuContext::argmax`] into a packed i32 `dst` `[rows]`; returns the plan it follows.
    pub fn argmax_into(&self, x: &DeviceTensor, dst: &DeviceTensor) -> Result<ArgmaxPlan> {
        argmax::argmax(&self.env(), &mut self.stream.lock(), x, dst)
    }
}
