//! The operations the backend runs on the GPU. Each op checks its operands, plans its kernels
//! for them and the device (the plan decides everything), and records the plan's dispatches on
//! a [`crate::exec::Stream`]; it returns the plan it followed.
//!
//! [`GpuContext`]'s methods run them on the context's own stream, batched until
//! [`GpuContext::synchronize`] (or a read).

pub mod argmax;
pub mod arith;
pub mod binary;
pub mod dequantize;
pub(crate) mod elementwise;
mod env;
pub mod flash_attn;
pub mod glu;
pub mod mul_mat;
pub mod norm;
pub mod rope;
pub mod row_plan;
pub mod rows;
pub mod scale;
pub mod soft_max;
pub mod write;

use crate::context::GpuContext;
use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::tensor::Layout;

pub use env::Env;
pub(crate) use env::PlanKernelMemos;
use flash_attn::{FlashAttnLayouts, FlashAttnOperands, FlashAttnParams};
use mul_mat::MulMatPlan;

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
        mul_mat::mul_mat(self, &mut self.stream.lock(), a, b, dst)
    }

    /// Attention as ggml's `ggml_flash_attn_ext`: `q` f32 `[hsk, n_q, n_heads, n_seq]`, `k`
    /// `[hsk, kv, kv_heads, n_seq]` and `v` `[hsv, kv, kv_heads, n_seq]` of any supported type,
    /// an optional f16 `mask` `[kv, ≥ n_q, 1, _]` added to the scores, optional f32 `sinks`
    /// `[n_heads]`; the result a new contiguous f32 `[hsv, n_heads, n_q, n_seq]`. Recorded, not
    /// yet run.
    pub fn flash_attn_ext(
        &self,
        q: &DeviceTensor,
        k: &DeviceTensor,
        v: &DeviceTensor,
        mask: Option<&DeviceTensor>,
        sinks: Option<&DeviceTensor>,
        params: FlashAttnParams,
    ) -> Result<DeviceTensor> {
        let (lq, lv) = (q.layout(), v.layout());
        let ne = [lv.ne[0], lq.ne[2], lq.ne[1], lq.ne[3]];
        flash_attn::check(&FlashAttnLayouts {
            q: *lq,
            k: *k.layout(),
            v: *lv,
            mask: mask.map(|m| *m.layout()),
            sinks: sinks.map(|s| *s.layout()),
            dst: Layout::contiguous(GgmlType::F32, ne)?,
        })?;
        let dst = self.empty(GgmlType::F32, ne)?;
        let ops = FlashAttnOperands {
            q,
            k,
            v,
            mask,
            sinks,
            dst: &dst,
        };
        self.flash_attn_ext_into(&ops, params)?;
        Ok(dst)
    }

    /// Attention into the operands' existing `dst`; returns the plan it follows.
    pub fn flash_attn_ext_into(
        &self,
        ops: &FlashAttnOperands<'_>,
        params: FlashAttnParams,
    ) -> Result<flash_attn::FlashAttnPlan> {
        flash_attn::flash_attn_ext(self, &mut self.stream.lock(), ops, params)
    }
}
