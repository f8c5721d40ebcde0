//! [`Ops`] on the GPU: a [`GpuContext`] records each op into its stream, and a read at the end
//! of a step submits the work and waits for it.
//!
//! MUL_MAT, FLASH_ATTN_EXT, ROPE, GET_ROWS and SET_ROWS (the KV cache write) run on the GPU.
//! The kernels of RMS_NORM·MUL, ADD, SWIGLU and ARGMAX are not in the backend yet: until they
//! are, each of those ops reads its operands back, runs [`CpuOps`]' reference and uploads the
//! result (slow, correct). When `GpuContext` gains them, each such method becomes one call.

use ggml_dawn::ops::flash_attn::FlashAttnParams;
use ggml_dawn::reference::RopeParams;
use ggml_dawn::{DeviceTensor, GgmlType, GpuContext, HostTensor, Layout};

use crate::cpu::CpuOps;
use crate::error::{LlmError, Result};
use crate::ops::Ops;

/// The GPU ops of one context.
#[derive(Debug)]
pub struct GpuOps {
    ctx: GpuContext,
}

fn backend_error(e: impl std::fmt::Display) -> LlmError {
    LlmError::Backend(e.to_string())
}

impl GpuOps {
    /// The ops of `ctx`.
    pub fn new(ctx: GpuContext) -> GpuOps {
        GpuOps { ctx }
    }

    /// The context.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// A tensor's values on the host (runs what was recorded).
    fn host(&self, t: &DeviceTensor) -> Result<HostTensor> {
        self.ctx.read(t).map_err(backend_error)
    }

    fn device(&self, t: &HostTensor) -> Result<DeviceTensor> {
        self.ctx.upload(t).map_err(backend_error)
    }
}

impl Ops for GpuOps {
    type Tensor = DeviceTensor;

    fn name(&self) -> String {
        format!("gpu ({})", self.ctx.capabilities().info.device)
    }

    fn upload(&self, t: &HostTensor) -> Result<DeviceTensor> {
        self.device(t)
    }

    fn zeros(&self, ty: GgmlType, ne: [usize; 4]) -> Result<DeviceTensor> {
        self.ctx.zeros(ty, ne).map_err(backend_error)
    }

    fn layout(&self, t: &DeviceTensor) -> Layout {
        *t.layout()
    }

    fn view(&self, t: &DeviceTensor, layout: Layout) -> Result<DeviceTensor> {
        t.view(layout).map_err(backend_error)
    }

    fn get_rows(&self, src: &DeviceTensor, ids: &DeviceTensor) -> Result<DeviceTensor> {
        self.ctx.get_rows(src, ids).map_err(backend_error)
    }

    fn rms_norm_mul(&self, x: &DeviceTensor, weight: &DeviceTensor, eps: f32) -> Result<DeviceTensor> {
        self.device(&CpuOps.rms_norm_mul(&self.host(x)?, &self.host(weight)?, eps)?)
    }

    fn mul_mat(&self, a: &DeviceTensor, b: &DeviceTensor) -> Result<DeviceTensor> {
        self.ctx.mul_mat(a, b).map_err(backend_error)
    }

    fn add(&self, a: &DeviceTensor, b: &DeviceTensor) -> Result<DeviceTensor> {
        self.device(&CpuOps.add(&self.host(a)?, &self.host(b)?)?)
    }

    fn rope(
        &self,
        x: &DeviceTensor,
        pos: &DeviceTensor,
        freq_factors: Option<&DeviceTensor>,
        params: &RopeParams,
    ) -> Result<DeviceTensor> {
        self.ctx.rope(x, pos, freq_factors, params).map_err(backend_error)
    }

    fn swiglu(&self, gate: &DeviceTensor, up: &DeviceTensor) -> Result<DeviceTensor> {
        self.device(&CpuOps.swiglu(&self.host(gate)?, &self.host(up)?)?)
    }

    fn set_rows(&self, dst: &mut DeviceTensor, src: &DeviceTensor, ids: &DeviceTensor) -> Result<()> {
        self.ctx.set_rows(dst, src, ids).map_err(backend_error)?;
        Ok(())
    }

    fn flash_attn(
        &self,
        q: &DeviceTensor,
        k: &DeviceTensor,
        v: &DeviceTensor,
        mask: &DeviceTensor,
        scale: f32,
    ) -> Result<DeviceTensor> {
        self.ctx
            .flash_attn_ext(q, k, v, Some(mask), None, FlashAttnParams::scaled(scale))
            .map_err(backend_error)
    }

    fn argmax(&self, x: &DeviceTensor) -> Result<Vec<i32>> {
        CpuOps.argmax(&self.host(x)?)
    }

    fn read_f32(&self, x: &DeviceTensor) -> Result<Vec<f32>> {
        self.ctx.read_f32(x).map_err(backend_error)
    }
}
