//! MUL_MAT on the context's stream.

use crate::context::GpuContext;
use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::mul_mat::{self, MulMatPlan};
use crate::tensor::Layout;

impl GpuContext {
    /// `a × b` as ggml's `ggml_mul_mat`: `a` `[k, m, a2, a3]` of any supported type (rows
    /// contiguous), `b` `[k, n, b2, b3]` in f32 or f16 (any strides, `a2 | b2`, `a3 | b3`);
    /// the result a new contiguous f32 `[m, n, b2, b3]`. Recorded, not yet run.
    pub fn mul_mat(&self, a: &DeviceTensor, b: &DeviceTensor) -> Result<DeviceTensor> {
        let (la, lb) = (a.layout(), b.layout());
        let ne = [la.ne[1], lb.ne[1], lb.ne[2], lb.ne[3]];
        mul_mat::check(la, lb, &Layout::contiguous(GgmlType::F32, ne)?)?;
        let dst = self.empty(GgmlType::F32, ne)?;
        self.mul_mat_into(a, b, &dst)?;
        Ok(dst)
    }

    /// `dst = a × b` into an existing contiguous f32 tensor; returns the plan it follows.
    pub fn mul_mat_into(&self, a: &DeviceTensor, b: &DeviceTensor, dst: &DeviceTensor) -> Result<MulMatPlan> {
        mul_mat::mul_mat(&self.env(), &mut self.stream.lock(), a, b, dst)
    }
}
