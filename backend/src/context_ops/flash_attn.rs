//! FLASH_ATTN_EXT on the context's stream.

use crate::context::GpuContext;
use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::flash_attn::{self, FlashAttnLayouts, FlashAttnOperands, FlashAttnParams};
use crate::tensor::Layout;

impl GpuContext {
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
        flash_attn::flash_attn_ext(&self.env(), &mut self.stream.lock(), ops, params)
    }
}
