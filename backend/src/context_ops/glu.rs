//! The GLU family on the context's stream.

use crate::context::GpuContext;
use crate::error::Result;
use crate::memory::DeviceTensor;
use crate::ops::glu::{self, GluParams, GluPlan};

impl GpuContext {
    /// A gated linear unit as ggml's `ggml_glu` (fused: `b` `None`, each row of `a`
    /// `[2n, ne1, ne2, ne3]` holds the activation's input then the gate, the other way round
    /// when `params.swapped`) or `ggml_glu_split` (`b` the gate, like `a` `[n, ne1, ne2, ne3]`):
    /// f32 or f16 with contiguous rows; the result a new contiguous `[n, ne1, ne2, ne3]` of `a`'s
    /// type. Recorded, not yet run.
    ///
    /// ```
    /// use ggml_dawn::ops::glu::{GluOp, GluParams};
    /// use ggml_dawn::{GgmlType, GpuContext};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = GpuContext::new(Default::default())?;
    /// // One row [x0, x1 | g0, g1]: REGLU gives max(x, 0)·g.
    /// let a = ctx.from_f32(GgmlType::F32, [4, 1, 1, 1], &[1., -2., 3., 4.])?;
    /// let y = ctx.glu(&a, None, &GluParams::new(GluOp::Reglu))?;
    /// assert_eq!(ctx.read_f32(&y)?, [3., 0.]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn glu(&self, a: &DeviceTensor, b: Option<&DeviceTensor>, params: &GluParams) -> Result<DeviceTensor> {
        let ne = glu::dst_ne(a.layout(), b.is_some());
        let dst = self.empty(a.layout().ty, ne)?;
        self.glu_into(a, b, &dst, params)?;
        Ok(dst)
    }

    /// [`GpuContext::glu`] into an existing tensor (any layout with contiguous rows, disjoint
    /// from the inputs); returns the plan it follows.
    pub fn glu_into(
        &self,
        a: &DeviceTensor,
        b: Option<&DeviceTensor>,
        dst: &DeviceTensor,
        params: &GluParams,
    ) -> Result<GluPlan> {
        glu::glu(&self.env(), &mut self.stream.lock(), a, b, dst, params)
    }
}
