//! Compiling ahead: [`GpuContext::warm_up`] builds the kernels a set of ops will need before
//! the first of them runs, with progress, so that the first prompt does not wait for the
//! driver's compiler (seconds per kernel on a fresh shader cache).

use std::time::Duration;

use crate::context::GpuContext;
use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::flash_attn::{self, FlashAttnOperands, FlashAttnParams};
use crate::ops::mul_mat;

/// An op whose kernels [`GpuContext::warm_up`] compiles: its operands as they will be (the
/// kernels depend on the types, shapes, strides and alignment, so the real tensors, or tensors
/// laid out as they will be, are given; nothing is run and nothing is written).
#[derive(Debug, Clone, Copy)]
pub enum WarmUp<'a> {
    /// `a × b` ([`GpuContext::mul_mat`]).
    MulMat { a: &'a DeviceTensor, b: &'a DeviceTensor },
    /// Attention over these operands ([`GpuContext::flash_attn_ext`]); `dst` is made.
    FlashAttn {
        q: &'a DeviceTensor,
        k: &'a DeviceTensor,
        v: &'a DeviceTensor,
        mask: Option<&'a DeviceTensor>,
        params: FlashAttnParams,
    },
}

impl GpuContext {
    /// Compiles every kernel the ops in `ops` will use, calling `progress(done, total)` after
    /// each; returns the time spent compiling (kernels compiled before are not compiled again, so
    /// a second call costs almost nothing). Each first compilation is also logged (`log` target
    /// `ggml_dawn::kernel`). Each op is recorded on a stream of its own that is dropped without
    /// being submitted: nothing runs, no operand is read or written.
    pub fn warm_up(&self, ops: &[WarmUp<'_>], mut progress: impl FnMut(usize, usize)) -> Result<Duration> {
        let before = self.compile_time();
        for (i, op) in ops.iter().enumerate() {
            // A stream of its own per op: an op records a few dispatches, fewer than a stream's
            // first submit holds, so nothing is ever submitted.
            let mut stream = self.stream()?;
            match *op {
                WarmUp::MulMat { a, b } => {
                    let (la, lb) = (a.layout(), b.layout());
                    let dst = self.empty(GgmlType::F32, crate::ops::mul_mat::dst_ne(la, lb))?;
                    mul_mat::mul_mat(&self.env(), &mut stream, a, b, &dst)?;
                }
                WarmUp::FlashAttn { q, k, v, mask, params } => {
                    let (lq, lv) = (q.layout(), v.layout());
                    let dst = self.empty(GgmlType::F32, [lv.ne[0], lq.ne[2], lq.ne[1], lq.ne[3]])?;
                    let operands = FlashAttnOperands {
                        q,
                        k,
                        v,
                        mask,
                        sinks: None,
                        dst: &dst,
                    };
                    flash_attn::flash_attn_ext(&self.env(), &mut stream, &operands, params)?;
                }
            }
            progress(i + 1, ops.len());
        }
        Ok(self.compile_time().saturating_sub(before))
    }
}
