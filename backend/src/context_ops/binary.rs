//! ADD, SUB, MUL and DIV on the context's stream.

use crate::context::GpuContext;
use crate::error::Result;
use crate::memory::DeviceTensor;
use crate::ops::binary::{self, BinaryOp, BinaryPlan};

impl GpuContext {
    /// `a op b` as ggml's `ggml_add` / `ggml_sub` / `ggml_mul` / `ggml_div`: `a` `[ne0, ne1,
    /// ne2, ne3]` f32 or f16 of any layout, `b` f32 or f16 whose every extent divides `a`'s (it
    /// repeats over `a`); the result a new contiguous tensor like `a`. Recorded, not yet run.
    ///
    /// ```
    /// use ggml_dawn::ops::binary::BinaryOp;
    /// use ggml_dawn::{GgmlType, GpuContext};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = GpuContext::new(Default::default())?;
    /// // A bias of 2 values repeated over 2 rows of 4 (ggml's broadcasting, innermost first).
    /// let x = ctx.from_f32(GgmlType::F32, [4, 2, 1, 1], &[1., 2., 3., 4., 5., 6., 7., 8.])?;
    /// let bias = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[10., 20.])?;
    /// let y = ctx.binary(BinaryOp::Add, &x, &bias)?;
    /// assert_eq!(ctx.read_f32(&y)?, [11., 22., 13., 24., 15., 26., 17., 28.]);
    /// // In place: dst is a itself.
    /// ctx.binary_into(BinaryOp::Mul, &x, &bias, &x)?;
    /// assert_eq!(ctx.read_f32(&x)?, [10., 40., 30., 80., 50., 120., 70., 160.]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn binary(&self, op: BinaryOp, a: &DeviceTensor, b: &DeviceTensor) -> Result<DeviceTensor> {
        binary::check(op, a.layout(), b.layout(), a.layout())?;
        let dst = self.empty(a.layout().ty, a.layout().ne)?;
        self.binary_into(op, a, b, &dst)?;
        Ok(dst)
    }

    /// `dst = a op b` into an existing tensor of `a`'s type and extents (any layout), disjoint
    /// from both, or `a` itself (in place); returns the plan it follows.
    pub fn binary_into(
        &self,
        op: BinaryOp,
        a: &DeviceTensor,
        b: &DeviceTensor,
        dst: &DeviceTensor,
    ) -> Result<BinaryPlan> {
        binary::binary(&self.env(), &mut self.stream.lock(), op, a, b, dst)
    }

    /// `a + b` ([`GpuContext::binary`] with [`BinaryOp::Add`]).
    pub fn add(&self, a: &DeviceTensor, b: &DeviceTensor) -> Result<DeviceTensor> {
        self.binary(BinaryOp::Add, a, b)
    }

    /// `a − b` ([`GpuContext::binary`] with [`BinaryOp::Sub`]).
    pub fn sub(&self, a: &DeviceTensor, b: &DeviceTensor) -> Result<DeviceTensor> {
        self.binary(BinaryOp::Sub, a, b)
    }

    /// `a · b` ([`GpuContext::binary`] with [`BinaryOp::Mul`]).
    pub fn mul(&self, a: &DeviceTensor, b: &DeviceTensor) -> Result<DeviceTensor> {
        self.binary(BinaryOp::Mul, a, b)
    }

    /// `a / b` ([`GpuContext::binary`] with [`BinaryOp::Div`]).
    pub fn div(&self, a: &DeviceTensor, b: &DeviceTensor) -> Result<DeviceTensor> {
        self.binary(BinaryOp::Div, a, b)
    }
}
