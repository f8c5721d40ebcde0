//! MUL_MAT on the context's stream.

use crate::context::GpuContext;
use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::glu::{self, GluOp, GluParams};
use crate::ops::mul_mat::{
    self, MulMatPlan, MulMatSwigluPlan, NormMulMatPlan, NormMulMatRopePlan, Residual, RopeSetRows,
};
use crate::ops::norm;
use crate::ops::rope;
use crate::tensor::Layout;

impl GpuContext {
    /// `a × b` as ggml's `ggml_mul_mat`: `a` `[k, m, a2, a3]` of any supported type (rows
    /// contiguous), `b` `[k, n, b2, b3]` in f32 or f16 (any strides, `a2 | b2`, `a3 | b3`);
    /// the result a new contiguous f32 `[m, n, b2, b3]`. Recorded, not yet run.
    pub fn mul_mat(&self, a: &DeviceTensor, b: &DeviceTensor) -> Result<DeviceTensor> {
        let (la, lb) = (a.layout(), b.layout());
        let ne = mul_mat::dst_ne(la, lb);
        mul_mat::check(la, lb, &Layout::contiguous(GgmlType::F32, ne)?)?;
        let dst = self.empty(GgmlType::F32, ne)?;
        self.mul_mat_into(a, b, &dst)?;
        Ok(dst)
    }

    /// `dst = a × b` into an existing contiguous f32 tensor; returns the plan it follows.
    pub fn mul_mat_into(&self, a: &DeviceTensor, b: &DeviceTensor, dst: &DeviceTensor) -> Result<MulMatPlan> {
        mul_mat::mul_mat(&self.env(), &mut self.stream.lock(), a, b, dst)
    }

    /// `a × swiglu(b)`, a feed-forward's activation and down projection: `b` f32 or f16
    /// `[2k, n, b2, b3]` with contiguous rows, each a SWIGLU's gate then its up (ggml's fused
    /// form, as one MUL_MAT over the stacked gate and up weights gives it), and `a` `[k, m, …]`
    /// as for [`GpuContext::mul_mat`]; the result a new contiguous f32 `[m, n, b2, b3]`. Where
    /// the integer mat-vec runs, it applies the SWIGLU to what it quantizes, in its workgroups
    /// (one dispatch) or in its quantize pass (`MulMatTuning::vec_int_b_swiglu`,
    /// `vec_int_pass_swiglu`); else the two ops run, with the same result either way. Recorded,
    /// not yet run.
    ///
    /// ```
    /// use ggml_dawn::{GgmlType, GpuContext};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = GpuContext::new(Default::default())?;
    /// // One column [gate | up] = [0, 2 | 3, 1]: silu(0)·3 = 0, silu(2)·1 = 2/(1+e^-2).
    /// let b = ctx.from_f32(GgmlType::F32, [4, 1, 1, 1], &[0., 2., 3., 1.])?;
    /// let a = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[1., 1.])?;
    /// let y = ctx.read_f32(&ctx.mul_mat_swiglu(&a, &b)?)?;
    /// assert!((y[0] - 2.0 / (1.0 + (-2f32).exp())).abs() < 1e-5);
    /// # Ok(())
    /// # }
    /// ```
    pub fn mul_mat_swiglu(&self, a: &DeviceTensor, b: &DeviceTensor) -> Result<DeviceTensor> {
        let (la, lb) = (a.layout(), b.layout());
        let ne = mul_mat::dst_ne(la, lb);
        mul_mat::check_swiglu(la, lb, &Layout::contiguous(GgmlType::F32, ne)?)?;
        let dst = self.empty(GgmlType::F32, ne)?;
        self.mul_mat_swiglu_into(a, b, &dst)?;
        Ok(dst)
    }

    /// [`GpuContext::mul_mat_swiglu`]'s fused mat-vec into an existing contiguous f32 tensor,
    /// where it applies (returns its plan); `Ok(None)`, with nothing recorded, where the two ops
    /// must run instead (a caller with its own buffers for the SWIGLU's result runs them).
    pub fn try_mul_mat_swiglu_into(
        &self,
        a: &DeviceTensor,
        b: &DeviceTensor,
        dst: &DeviceTensor,
    ) -> Result<Option<MulMatPlan>> {
        mul_mat::mul_mat_swiglu(&self.env(), &mut self.stream.lock(), a, b, dst)
    }

    /// [`GpuContext::mul_mat_swiglu`] into an existing contiguous f32 tensor; returns what ran.
    pub fn mul_mat_swiglu_into(
        &self,
        a: &DeviceTensor,
        b: &DeviceTensor,
        dst: &DeviceTensor,
    ) -> Result<MulMatSwigluPlan> {
        if let Some(plan) = self.try_mul_mat_swiglu_into(a, b, dst)? {
            return Ok(MulMatSwigluPlan::Fused(plan));
        }
        // Both ops' operands were checked: the SWIGLU's result is a new tensor.
        let act = self.empty(b.layout().ty, glu::dst_ne(b.layout(), false))?;
        let env = self.env();
        let mut stream = self.stream.lock();
        let g = glu::glu(&env, &mut stream, b, None, &act, &GluParams::new(GluOp::Swiglu))?;
        let m = mul_mat::mul_mat(&env, &mut stream, a, &act, dst)?;
        Ok(MulMatSwigluPlan::Separate(g, m))
    }

    /// `a × (rms_norm(x) · weight)`, a decoder's norm and the projection after it: `x` f32
    /// `[k, n, b2, b3]` (any strides), `weight` f32 repeating over x as RMS_NORM takes it, `a`
    /// `[k, m, …]` as for [`GpuContext::mul_mat`]; the result a new contiguous f32 `[m, n, b2,
    /// b3]`. Where the integer mat-vec runs, it norms b's columns as it quantizes them, in its
    /// workgroups (one dispatch) or in its quantize pass, summing their squares as RMS_NORM's
    /// kernel would (`MulMatTuning::vec_int_b_rms_norm`, `vec_int_pass_rms_norm`); else the two
    /// ops run, with the same result either way. Recorded, not yet run.
    ///
    /// ```
    /// use ggml_dawn::{GgmlType, GpuContext};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = GpuContext::new(Default::default())?;
    /// // x = [3, 4]: rms = sqrt(12.5); weight [1, 2]; a = [1, 1] sums the normed row.
    /// let x = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[3., 4.])?;
    /// let w = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[1., 2.])?;
    /// let a = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[1., 1.])?;
    /// let y = ctx.read_f32(&ctx.rms_norm_mul_mat(&a, &x, &w, 0.0)?)?;
    /// assert!((y[0] - 11.0 / 12.5f32.sqrt()).abs() < 1e-5);
    /// # Ok(())
    /// # }
    /// ```
    pub fn rms_norm_mul_mat(
        &self,
        a: &DeviceTensor,
        x: &DeviceTensor,
        weight: &DeviceTensor,
        eps: f32,
    ) -> Result<DeviceTensor> {
        let (la, lx) = (a.layout(), x.layout());
        let ne = mul_mat::dst_ne(la, lx);
        mul_mat::check_rms_norm(
            la,
            lx,
            None,
            weight.layout(),
            &Layout::contiguous(GgmlType::F32, ne)?,
            eps,
        )?;
        let dst = self.empty(GgmlType::F32, ne)?;
        self.rms_norm_mul_mat_into(a, x, None, weight, eps, &dst)?;
        Ok(dst)
    }

    /// A decoder's residual ADD, its norm and the projection after it: `sum = x + residual`
    /// (f32 of x's extents) and `a × (rms_norm(sum) · weight)` as
    /// [`GpuContext::rms_norm_mul_mat`]; returns both, new tensors. Recorded, not yet run.
    ///
    /// ```
    /// use ggml_dawn::{GgmlType, GpuContext};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = GpuContext::new(Default::default())?;
    /// // x + r = [3, 4]; weight [1, 2]; a = [1, 1] sums the normed row.
    /// let x = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[1., 2.])?;
    /// let r = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[2., 2.])?;
    /// let w = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[1., 2.])?;
    /// let a = ctx.from_f32(GgmlType::F32, [2, 1, 1, 1], &[1., 1.])?;
    /// let (sum, y) = ctx.add_rms_norm_mul_mat(&a, &x, &r, &w, 0.0)?;
    /// assert_eq!(ctx.read_f32(&sum)?, [3., 4.]);
    /// assert!((ctx.read_f32(&y)?[0] - 11.0 / 12.5f32.sqrt()).abs() < 1e-5);
    /// # Ok(())
    /// # }
    /// ```
    pub fn add_rms_norm_mul_mat(
        &self,
        a: &DeviceTensor,
        x: &DeviceTensor,
        residual: &DeviceTensor,
        weight: &DeviceTensor,
        eps: f32,
    ) -> Result<(DeviceTensor, DeviceTensor)> {
        let (la, lx) = (a.layout(), x.layout());
        let ne = mul_mat::dst_ne(la, lx);
        let sum_layout = Layout::contiguous(GgmlType::F32, lx.ne)?;
        mul_mat::check_rms_norm(
            la,
            lx,
            Some((residual.layout(), &sum_layout)),
            weight.layout(),
            &Layout::contiguous(GgmlType::F32, ne)?,
            eps,
        )?;
        let sum = self.empty(GgmlType::F32, lx.ne)?;
        let dst = self.empty(GgmlType::F32, ne)?;
        self.rms_norm_mul_mat_into(a, x, Some(Residual { residual, sum: &sum }), weight, eps, &dst)?;
        Ok((sum, dst))
    }

    /// [`GpuContext::rms_norm_mul_mat`]'s fused mat-vec into an existing contiguous f32 `dst` (and,
    /// with a residual, its sum into `sum`: f32 of x's extents), where it applies (returns its
    /// plan); `Ok(None)`, with nothing recorded, where the two ops must run instead (a caller
    /// with its own buffers for the norm's result runs them).
    pub fn try_rms_norm_mul_mat_into(
        &self,
        a: &DeviceTensor,
        x: &DeviceTensor,
        residual: Option<Residual<'_>>,
        weight: &DeviceTensor,
        eps: f32,
        dst: &DeviceTensor,
    ) -> Result<Option<MulMatPlan>> {
        mul_mat::rms_norm_mul_mat(&self.env(), &mut self.stream.lock(), a, x, residual, weight, eps, dst)
    }

    /// [`GpuContext::rms_norm_mul_mat`] (with a residual, `add_rms_norm_mul_mat`) into existing
    /// tensors; returns what ran.
    pub fn rms_norm_mul_mat_into(
        &self,
        a: &DeviceTensor,
        x: &DeviceTensor,
        residual: Option<Residual<'_>>,
        weight: &DeviceTensor,
        eps: f32,
        dst: &DeviceTensor,
    ) -> Result<NormMulMatPlan> {
        if let Some(plan) = self.try_rms_norm_mul_mat_into(a, x, residual, weight, eps, dst)? {
            return Ok(NormMulMatPlan::Fused(plan));
        }
        // Both ops' operands were checked: the norm's result is a new tensor.
        let normed = self.empty(GgmlType::F32, x.layout().ne)?;
        let env = self.env();
        let mut stream = self.stream.lock();
        let n = match residual {
            Some(r) => norm::add_rms_norm_mul_add(
                &env,
                &mut stream,
                x,
                r.residual,
                r.sum,
                Some(weight),
                None,
                &normed,
                eps,
            )?,
            None => norm::rms_norm_mul_add(&env, &mut stream, x, Some(weight), None, &normed, eps)?,
        };
        let m = mul_mat::mul_mat(&env, &mut stream, a, &normed, dst)?;
        Ok(NormMulMatPlan::Separate(n, m))
    }

    /// A q/k/v projection with the steps around it: [`GpuContext::rms_norm_mul_mat`] of `x`
    /// (with a residual, `add_rms_norm_mul_mat`, its sum into `sum`) into the existing f32
    /// `dst` `[m, n]`, then ROPE of the heads at the start of each of dst's columns and the
    /// KV-cache write of its window (`rope`, see [`RopeSetRows`]: the ops
    /// [`GpuContext::rope_set_rows`] runs). One dispatch where the mat-vec quantizes b in its
    /// workgroups (two with its quantize pass) when the planner fuses them
    /// (`MulMatTuning::vec_rope_set_rows`: each workgroup ropes the rows it stored, with ROPE's
    /// arithmetic, and stores its part of the window); else the ops one after the other, with
    /// the same result. Recorded, not yet run; returns what it recorded.
    ///
    /// ```
    /// use ggml_dawn::ops::mul_mat::RopeSetRows;
    /// use ggml_dawn::reference::{RopeMode, RopeParams};
    /// use ggml_dawn::{GgmlType, GpuContext, HostTensor, Layout};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = GpuContext::new(Default::default())?;
    /// // x = [1, 1, 1, 1] normed is itself; a's rows pick its elements: y = [1, 2, 3, 4] · 1.
    /// let x = ctx.from_f32(GgmlType::F32, [4, 1, 1, 1], &[1.0; 4])?;
    /// let w = ctx.from_f32(GgmlType::F32, [4, 1, 1, 1], &[1.0, 2.0, 3.0, 4.0])?;
    /// let a = ctx.from_f32(GgmlType::F32, [4, 4, 1, 1], &[
    ///     1., 0., 0., 0., 0., 1., 0., 0., 0., 0., 1., 0., 0., 0., 0., 1.,
    /// ])?;
    /// let dst = ctx.empty(GgmlType::F32, [4, 1, 1, 1])?;
    /// // One head of 2 rows roped at position 1; rows 2..4 into cache row 1.
    /// let pos = ctx.upload(&HostTensor {
    ///     layout: Layout::contiguous(GgmlType::I32, [1, 1, 1, 1])?,
    ///     data: 1i32.to_le_bytes().to_vec(),
    /// })?;
    /// let cache = ctx.zeros(GgmlType::F32, [2, 3, 1, 1])?;
    /// let params = RopeParams::new(2, RopeMode::Normal);
    /// let rope = RopeSetRows {
    ///     heads: 1,
    ///     head_dim: 2,
    ///     pos: &pos,
    ///     freq_factors: None,
    ///     params: &params,
    ///     kv_start: 2,
    ///     cache: &cache,
    ///     ids: &pos,
    /// };
    /// ctx.rms_norm_mul_mat_rope_set_rows_into(&a, &x, None, &w, 0.0, &dst, rope)?;
    /// let (y, cells) = (ctx.read_f32(&dst)?, ctx.read_f32(&cache)?);
    /// let (c, s) = (1f32.cos(), 1f32.sin());
    /// assert!((y[0] - (c - 2.0 * s)).abs() < 1e-3 && (y[1] - (s + 2.0 * c)).abs() < 1e-3);
    /// assert_eq!(cells, [0.0, 0.0, 3.0, 4.0, 0.0, 0.0]);
    /// # Ok(())
    /// # }
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn rms_norm_mul_mat_rope_set_rows_into(
        &self,
        a: &DeviceTensor,
        x: &DeviceTensor,
        residual: Option<Residual<'_>>,
        weight: &DeviceTensor,
        eps: f32,
        dst: &DeviceTensor,
        rope: RopeSetRows<'_>,
    ) -> Result<NormMulMatRopePlan> {
        if let Some(plan) = self.try_rms_norm_mul_mat_rope_set_rows_into(a, x, residual, weight, eps, dst, rope)? {
            return Ok(NormMulMatRopePlan::Fused(plan));
        }
        // The try checked every operand of both steps before declining: nothing below refuses
        // what it accepted, so nothing is left half recorded.
        let heads = dst.view(rope.heads_layout(dst.layout())?)?;
        let rows = dst.view(rope.rows_layout(dst.layout())?)?;
        let n = self.rms_norm_mul_mat_into(a, x, residual, weight, eps, dst)?;
        let r = rope::rope_set_rows(
            &self.env(),
            &mut self.stream.lock(),
            &heads,
            rope.pos,
            rope.freq_factors,
            rope.params,
            &rows,
            rope.cache,
            rope.ids,
        )?;
        Ok(NormMulMatRopePlan::Separate(n, Box::new(r)))
    }

    /// [`GpuContext::rms_norm_mul_mat_rope_set_rows_into`]'s fused mat-vec where it applies
    /// (returns its plan); `Ok(None)`, with nothing recorded, where the ops must run instead.
    #[allow(clippy::too_many_arguments)]
    pub fn try_rms_norm_mul_mat_rope_set_rows_into(
        &self,
        a: &DeviceTensor,
        x: &DeviceTensor,
        residual: Option<Residual<'_>>,
        weight: &DeviceTensor,
        eps: f32,
        dst: &DeviceTensor,
        rope: RopeSetRows<'_>,
    ) -> Result<Option<MulMatPlan>> {
        mul_mat::rms_norm_mul_mat_rope_set_rows(
            &self.env(),
            &mut self.stream.lock(),
            a,
            x,
            residual,
            weight,
            eps,
            dst,
            Some(rope),
        )
    }
}
