//! [`Ops`] on the GPU: a [`GpuContext`] records each op into its stream, and a read at the end
//! of a step submits the work and waits for it. Every op of a step runs on the GPU: nothing is
//! read back but what the caller asks for (the logits, or with [`Ops::argmax`] only the ids).
//!
//! Activations come from a pool of device buffers: a tensor's buffer goes back to the pool
//! when its last view is dropped, and a later op needing that many bytes takes it again. So a
//! step allocates nothing once the first step of its size has run, its bind groups are the
//! previous step's (the stream caches them by buffer), and device memory stays near the graph's
//! peak, as llama.cpp's graph allocator keeps it. Reusing a buffer whose last reader is
//! recorded but not yet run is safe: the stream runs dispatches in order and Dawn orders a
//! dispatch's writes after earlier dispatches' reads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use ggml_dawn::exec::SubmitPolicy;
use ggml_dawn::ops::flash_attn::{FlashAttnOperands, FlashAttnParams};
use ggml_dawn::ops::mul_mat;
use ggml_dawn::reference::RopeParams;
use ggml_dawn::reference::binary::BinaryOp;
use ggml_dawn::reference::glu::{GluOp, GluParams};
use ggml_dawn::{DeviceTensor, GgmlType, GpuContext, HostTensor, Layout};

use crate::error::{LlmError, Result};
use crate::ops::{Ops, QkvRope};

/// How many dispatches a decode step hands the GPU at a time, by the model's weight bytes a
/// layer (the first row whose bound is at least the model's applies). A single-token step's
/// time is the host's recording plus what the GPU still has to run after the last submit, so
/// small models, whose kernels are short, want small submits; large ones are bound by the GPU
/// and only pay for more submits. Measured on an H100, tg128 tokens/s (submits of FIRST,MAX):
/// SmolLM2-135M Q4_1, 3 MiB a layer: 8,32 427, 4,32 428, 16,64 399, 8,64 367, 8,128 312,
/// 8,512 321 (the backend's default); Llama-3-8B q4_0, 138 MiB a layer (tg64): 8,128 218,
/// 8,64 216, 8,512 185 (bench/results/2026-12-07-h100-decode-submits.md).
pub const SUBMIT_POLICIES: &[(u64, SubmitPolicy)] = &[
    (32 << 20, SubmitPolicy { first: 8, max: 32 }),
    (u64::MAX, SubmitPolicy { first: 8, max: 128 }),
];

/// Whether a decode step fuses the rotary embedding with the KV-cache write on `class` of
/// device, as measured (`DAWN_ALT="unfused:DAWN_LLM_FUSION=off" bash bench/llm-compare.sh`):
/// on lavapipe the recording thread's CPU time a SmolLM2 token falls 2397–2548 → 2075–2288 us
/// with it; on an H100 (2026-12-07, 2cc5d6c, alternating in one run) SmolLM2 tg128 fell from
/// 508 to 399 t/s with it (the host's time a token 1232 → 2017 us, cause not yet found), so it
/// stays off on GPUs until a run shows it paying there.
pub fn fuses_by_default(class: ggml_dawn::facts::DeviceClass) -> bool {
    class == ggml_dawn::facts::DeviceClass::Cpu
}

/// The submit policy [`SUBMIT_POLICIES`] gives a model of `layer_bytes` weight bytes a layer.
pub fn submit_policy(layer_bytes: u64) -> SubmitPolicy {
    SUBMIT_POLICIES
        .iter()
        .find(|(bound, _)| layer_bytes <= *bound)
        .map_or_else(SubmitPolicy::default, |(_, policy)| *policy)
}

/// Pool buffers are whole multiples of this many bytes, so tensors of nearly the same size
/// share them.
const POOL_GRANULE: u64 = 256;

/// Free device buffers by size, each with the number it was made with.
#[derive(Debug, Default)]
struct Pool {
    free: HashMap<u64, Vec<(u64, DeviceTensor)>>,
    /// Bytes of every buffer the pool made (free or lent).
    made_bytes: u64,
    /// Buffers made.
    made: u64,
}

impl Pool {
    /// The free buffer of `bytes` made first. Taking the lowest number, not the last given back,
    /// makes which buffer an op gets depend only on which are free, not on the order they came
    /// back in: every step of one size then binds the same buffers, and reuses its bind groups.
    fn take(&mut self, bytes: u64) -> Option<(u64, DeviceTensor)> {
        let list = self.free.get_mut(&bytes)?;
        let (at, _) = list.iter().enumerate().min_by_key(|(_, (id, _))| *id)?;
        Some(list.swap_remove(at))
    }
}

/// A pool buffer lent to a tensor and its views; given back when the last of them is dropped.
#[derive(Debug)]
struct Lease {
    storage: Option<(u64, DeviceTensor)>,
    pool: Weak<Mutex<Pool>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let (Some((id, storage)), Some(pool)) = (self.storage.take(), self.pool.upgrade()) {
            let mut pool = pool.lock().unwrap_or_else(|e| e.into_inner());
            pool.free
                .entry(storage.storage_bytes())
                .or_default()
                .push((id, storage));
        }
    }
}

/// A tensor of [`GpuOps`]: a device tensor, and the pool lease that keeps its buffer out of the
/// pool while it (or a view of it) lives.
#[derive(Debug, Clone)]
pub struct GpuTensor {
    tensor: DeviceTensor,
    _lease: Option<Arc<Lease>>,
}

impl GpuTensor {
    /// The device tensor.
    pub fn device(&self) -> &DeviceTensor {
        &self.tensor
    }
}

/// The GPU ops of one context.
#[derive(Debug)]
pub struct GpuOps {
    ctx: GpuContext,
    pool: Arc<Mutex<Pool>>,
    /// Bytes of the tensors `zeros` made (the KV cache).
    zeroed: std::sync::atomic::AtomicU64,
    /// Steps the backend can fuse run fused (by default where measured to pay:
    /// [`fuses_by_default`]; [`GpuOps::with_fusion`] sets it).
    fused: bool,
}

fn backend_error(e: impl std::fmt::Display) -> LlmError {
    LlmError::Backend(e.to_string())
}

impl GpuOps {
    /// The ops of `ctx`.
    pub fn new(ctx: GpuContext) -> GpuOps {
        let fused = fuses_by_default(ctx.facts().class);
        GpuOps {
            ctx,
            pool: Arc::default(),
            zeroed: Default::default(),
            fused,
        }
    }

    /// The same ops with the steps the backend can fuse (the rotary embedding with the
    /// KV-cache write: [`GpuContext::rope_set_rows`]) run fused or, with `false`, as their ops
    /// one after the other (ROPE, then SET_ROWS): the same results either way, one dispatch a
    /// layer apart (`DAWN_LLM_FUSION=on|off` in `dawn-llm`).
    pub fn with_fusion(mut self, fused: bool) -> GpuOps {
        self.fused = fused;
        self
    }

    /// The context.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// Device bytes of the pool's buffers, lent and free: the weights and each step's inputs
    /// and activations (everything but the KV cache).
    pub fn pool_bytes(&self) -> u64 {
        self.pool.lock().unwrap_or_else(|e| e.into_inner()).made_bytes
    }

    /// A contiguous tensor on a pool buffer, its bytes left as the buffer's last user wrote
    /// them (every op below writes all of its output).
    /// `sum = a + b` into `sum`, and its RMS norm times `weight` into a new tensor of the pool.
    fn add_rms_norm_mul_into(
        &self,
        a: &GpuTensor,
        b: &GpuTensor,
        sum: &GpuTensor,
        weight: &GpuTensor,
        eps: f32,
    ) -> Result<GpuTensor> {
        let dst = self.alloc(GgmlType::F32, a.tensor.layout().ne)?;
        self.ctx
            .add_rms_norm_mul_add_into(
                &a.tensor,
                &b.tensor,
                &sum.tensor,
                Some(&weight.tensor),
                None,
                &dst.tensor,
                eps,
            )
            .map_err(backend_error)?;
        Ok(dst)
    }

    fn alloc(&self, ty: GgmlType, ne: [usize; 4]) -> Result<GpuTensor> {
        let layout = Layout::contiguous(ty, ne)?;
        let bytes = (layout.end_bytes()? as u64).max(4).next_multiple_of(POOL_GRANULE);
        let reused = self.pool.lock().unwrap_or_else(|e| e.into_inner()).take(bytes);
        let (id, storage) = match reused {
            Some(s) => s,
            None => {
                let s = self
                    .ctx
                    .empty(GgmlType::F32, [(bytes / 4) as usize, 1, 1, 1])
                    .map_err(backend_error)?;
                let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
                pool.made_bytes += bytes;
                pool.made += 1;
                (pool.made, s)
            }
        };
        Ok(GpuTensor {
            tensor: storage.view(layout).map_err(backend_error)?,
            _lease: Some(Arc::new(Lease {
                storage: Some((id, storage)),
                pool: Arc::downgrade(&self.pool),
            })),
        })
    }

    /// `t` seen through `layout`, keeping its lease.
    fn same_lease(&self, t: &GpuTensor, tensor: DeviceTensor) -> GpuTensor {
        GpuTensor {
            tensor,
            _lease: t._lease.clone(),
        }
    }
}

impl Ops for GpuOps {
    type Tensor = GpuTensor;

    fn name(&self) -> String {
        format!("gpu ({})", self.ctx.capabilities().info.device)
    }

    /// Weights and per-step inputs alike: a pool buffer written in order with the ops (so a
    /// step's token ids reuse the last step's buffer).
    fn upload(&self, t: &HostTensor) -> Result<GpuTensor> {
        // `write` lays out a host tensor of any strides into the contiguous pool buffer.
        let dst = self.alloc(t.layout.ty, t.layout.ne)?;
        self.ctx.write(&dst.tensor, t).map_err(backend_error)?;
        Ok(dst)
    }

    fn zeros(&self, ty: GgmlType, ne: [usize; 4]) -> Result<GpuTensor> {
        let tensor = self.ctx.zeros(ty, ne).map_err(backend_error)?;
        self.zeroed
            .fetch_add(tensor.storage_bytes(), std::sync::atomic::Ordering::Relaxed);
        Ok(GpuTensor { tensor, _lease: None })
    }

    fn layout(&self, t: &GpuTensor) -> Layout {
        *t.tensor.layout()
    }

    fn view(&self, t: &GpuTensor, layout: Layout) -> Result<GpuTensor> {
        Ok(self.same_lease(t, t.tensor.view(layout).map_err(backend_error)?))
    }

    fn get_rows(&self, src: &GpuTensor, ids: &GpuTensor) -> Result<GpuTensor> {
        let (ls, li) = (src.tensor.layout(), ids.tensor.layout());
        let dst = self.alloc(GgmlType::F32, [ls.ne[0], li.ne[0], ls.ne[2], ls.ne[3]])?;
        self.ctx
            .get_rows_into(&src.tensor, &ids.tensor, &dst.tensor)
            .map_err(backend_error)?;
        Ok(dst)
    }

    fn rms_norm_mul(&self, x: &GpuTensor, weight: &GpuTensor, eps: f32) -> Result<GpuTensor> {
        let dst = self.alloc(GgmlType::F32, x.tensor.layout().ne)?;
        self.ctx
            .rms_norm_mul_add_into(&x.tensor, Some(&weight.tensor), None, &dst.tensor, eps)
            .map_err(backend_error)?;
        Ok(dst)
    }

    fn add_rms_norm_mul(
        &self,
        a: &GpuTensor,
        b: &GpuTensor,
        weight: &GpuTensor,
        eps: f32,
    ) -> Result<(GpuTensor, GpuTensor)> {
        let sum = self.alloc(GgmlType::F32, a.tensor.layout().ne)?;
        let dst = self.add_rms_norm_mul_into(a, b, &sum, weight, eps)?;
        Ok((sum, dst))
    }

    fn mul_mat(&self, a: &GpuTensor, b: &GpuTensor) -> Result<GpuTensor> {
        let (la, lb) = (a.tensor.layout(), b.tensor.layout());
        let dst = self.alloc(GgmlType::F32, mul_mat::dst_ne(la, lb))?;
        self.ctx
            .mul_mat_into(&a.tensor, &b.tensor, &dst.tensor)
            .map_err(backend_error)?;
        Ok(dst)
    }

    fn rms_norm_mul_mat(&self, a: &GpuTensor, x: &GpuTensor, weight: &GpuTensor, eps: f32) -> Result<GpuTensor> {
        // One kernel where the backend's planner fuses them, else the two ops with the norm's
        // result from the pool.
        let (la, lx) = (a.tensor.layout(), x.tensor.layout());
        let dst = self.alloc(GgmlType::F32, mul_mat::dst_ne(la, lx))?;
        let fused = self
            .ctx
            .try_rms_norm_mul_mat_into(&a.tensor, &x.tensor, None, &weight.tensor, eps, &dst.tensor)
            .map_err(backend_error)?;
        if fused.is_some() {
            return Ok(dst);
        }
        let normed = self.rms_norm_mul(x, weight, eps)?;
        self.ctx
            .mul_mat_into(&a.tensor, &normed.tensor, &dst.tensor)
            .map_err(backend_error)?;
        Ok(dst)
    }

    fn add_rms_norm_mul_mat(
        &self,
        a: &GpuTensor,
        x: &GpuTensor,
        residual: &GpuTensor,
        weight: &GpuTensor,
        eps: f32,
    ) -> Result<(GpuTensor, GpuTensor)> {
        let (la, lx) = (a.tensor.layout(), x.tensor.layout());
        let sum = self.alloc(GgmlType::F32, lx.ne)?;
        let dst = self.alloc(GgmlType::F32, mul_mat::dst_ne(la, lx))?;
        let operands = mul_mat::Residual {
            residual: &residual.tensor,
            sum: &sum.tensor,
        };
        let fused = self
            .ctx
            .try_rms_norm_mul_mat_into(&a.tensor, &x.tensor, Some(operands), &weight.tensor, eps, &dst.tensor)
            .map_err(backend_error)?;
        if fused.is_some() {
            return Ok((sum, dst));
        }
        // The two ops: the sum into the tensor made above, the norm's result from the pool.
        let normed = self.add_rms_norm_mul_into(x, residual, &sum, weight, eps)?;
        self.ctx
            .mul_mat_into(&a.tensor, &normed.tensor, &dst.tensor)
            .map_err(backend_error)?;
        Ok((sum, dst))
    }

    fn mul_mat_swiglu(&self, a: &GpuTensor, gate_up: &GpuTensor) -> Result<GpuTensor> {
        // One kernel where the backend's planner fuses them (the mat-vec that quantizes b in
        // its workgroup), else the two ops: the same bytes either way.
        let (la, lb) = (a.tensor.layout(), gate_up.tensor.layout());
        let dst = self.alloc(GgmlType::F32, mul_mat::dst_ne(la, lb))?;
        let fused = self
            .ctx
            .try_mul_mat_swiglu_into(&a.tensor, &gate_up.tensor, &dst.tensor)
            .map_err(backend_error)?;
        if fused.is_some() {
            return Ok(dst);
        }
        // The SWIGLU's result from the pool, like every other intermediate.
        let act = self.swiglu(gate_up, None)?;
        self.ctx
            .mul_mat_into(&a.tensor, &act.tensor, &dst.tensor)
            .map_err(backend_error)?;
        Ok(dst)
    }

    fn add(&self, a: &GpuTensor, b: &GpuTensor) -> Result<GpuTensor> {
        let la = a.tensor.layout();
        let dst = self.alloc(la.ty, la.ne)?;
        self.ctx
            .binary_into(BinaryOp::Add, &a.tensor, &b.tensor, &dst.tensor)
            .map_err(backend_error)?;
        Ok(dst)
    }

    fn rope(
        &self,
        x: &GpuTensor,
        pos: &GpuTensor,
        freq_factors: Option<&GpuTensor>,
        params: &RopeParams,
    ) -> Result<GpuTensor> {
        let l = x.tensor.layout();
        let dst = self.alloc(l.ty, l.ne)?;
        self.ctx
            .rope_into(
                &x.tensor,
                &pos.tensor,
                freq_factors.map(|f| &f.tensor),
                &dst.tensor,
                params,
            )
            .map_err(backend_error)?;
        Ok(dst)
    }

    fn swiglu(&self, gate: &GpuTensor, up: Option<&GpuTensor>) -> Result<GpuTensor> {
        let l = gate.tensor.layout();
        let dst = self.alloc(l.ty, ggml_dawn::ops::glu::dst_ne(l, up.is_some()))?;
        self.ctx
            .glu_into(
                &gate.tensor,
                up.map(|u| &u.tensor),
                &dst.tensor,
                &GluParams::new(GluOp::Swiglu),
            )
            .map_err(backend_error)?;
        Ok(dst)
    }

    fn rope_in_place(
        &self,
        t: &mut GpuTensor,
        view: Layout,
        pos: &GpuTensor,
        freq_factors: Option<&GpuTensor>,
        params: &RopeParams,
    ) -> Result<()> {
        // The same view as source and destination: the op runs in place.
        let x = t.tensor.view(view).map_err(backend_error)?;
        self.ctx
            .rope_into(&x, &pos.tensor, freq_factors.map(|f| &f.tensor), &x, params)
            .map_err(backend_error)?;
        Ok(())
    }

    fn set_rows(&self, dst: &mut GpuTensor, view: Layout, src: &GpuTensor, ids: &GpuTensor) -> Result<()> {
        let rows = dst.tensor.view(view).map_err(backend_error)?;
        self.ctx
            .set_rows(&rows, &src.tensor, &ids.tensor)
            .map_err(backend_error)?;
        Ok(())
    }

    fn rope_set_rows(
        &self,
        t: &mut GpuTensor,
        view: Layout,
        pos: &GpuTensor,
        freq_factors: Option<&GpuTensor>,
        params: &RopeParams,
        rows: Layout,
        dst: &mut GpuTensor,
        dst_view: Layout,
        ids: &GpuTensor,
    ) -> Result<()> {
        if !self.fused {
            self.rope_in_place(t, view, pos, freq_factors, params)?;
            let rows = self.view(t, rows)?;
            return self.set_rows(dst, dst_view, &rows, ids);
        }
        // One dispatch where the backend can fuse them, else ROPE then SET_ROWS.
        let x = t.tensor.view(view).map_err(backend_error)?;
        let rows = t.tensor.view(rows).map_err(backend_error)?;
        let cells = dst.tensor.view(dst_view).map_err(backend_error)?;
        self.ctx
            .rope_set_rows(
                &x,
                &pos.tensor,
                freq_factors.map(|f| &f.tensor),
                params,
                &rows,
                &cells,
                &ids.tensor,
            )
            .map_err(backend_error)?;
        Ok(())
    }

    fn norm_mul_mat_rope_set_rows(
        &self,
        a: &GpuTensor,
        x: &GpuTensor,
        residual: Option<&GpuTensor>,
        weight: &GpuTensor,
        eps: f32,
        rope: &QkvRope<'_, GpuTensor>,
        cache: &mut GpuTensor,
        cache_view: Layout,
    ) -> Result<(Option<GpuTensor>, GpuTensor)> {
        // One mat-vec where the backend's planner fuses them all, else the steps as the
        // default has them (the norm fused into the projection, the rotary embedding with the
        // KV-cache write, wherever each fuses).
        let (la, lx) = (a.tensor.layout(), x.tensor.layout());
        let dst = self.alloc(GgmlType::F32, mul_mat::dst_ne(la, lx))?;
        let sum = residual.map(|_| self.alloc(GgmlType::F32, lx.ne)).transpose()?;
        let cells = cache.tensor.view(cache_view).map_err(backend_error)?;
        let fused = self
            .ctx
            .try_rms_norm_mul_mat_rope_set_rows_into(
                &a.tensor,
                &x.tensor,
                residual.zip(sum.as_ref()).map(|(r, s)| mul_mat::Residual {
                    residual: &r.tensor,
                    sum: &s.tensor,
                }),
                &weight.tensor,
                eps,
                &dst.tensor,
                mul_mat::RopeSetRows {
                    heads: rope.heads,
                    head_dim: rope.head_dim,
                    pos: &rope.pos.tensor,
                    freq_factors: rope.freq_factors.map(|f| &f.tensor),
                    params: rope.params,
                    kv_start: rope.kv_start,
                    cache: &cells,
                    ids: &rope.ids.tensor,
                },
            )
            .map_err(backend_error)?;
        if fused.is_some() {
            return Ok((sum, dst));
        }
        // The tensors made above go back to the pool; the steps take their own.
        drop((dst, sum, cells));
        crate::ops::norm_mul_mat_then_rope_set_rows(self, a, x, residual, weight, eps, rope, cache, cache_view)
    }

    fn flash_attn(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        mask: Option<&GpuTensor>,
        scale: f32,
    ) -> Result<GpuTensor> {
        let (lq, lv) = (q.tensor.layout(), v.tensor.layout());
        let dst = self.alloc(GgmlType::F32, [lv.ne[0], lq.ne[2], lq.ne[1], lq.ne[3]])?;
        let operands = FlashAttnOperands {
            q: &q.tensor,
            k: &k.tensor,
            v: &v.tensor,
            mask: mask.map(|m| &m.tensor),
            sinks: None,
            dst: &dst.tensor,
        };
        self.ctx
            .flash_attn_ext_into(&operands, FlashAttnParams::scaled(scale))
            .map_err(backend_error)?;
        Ok(dst)
    }

    fn argmax(&self, x: &GpuTensor) -> Result<Vec<i32>> {
        let dst = self.alloc(GgmlType::I32, [x.tensor.layout().ne[1], 1, 1, 1])?;
        self.ctx.argmax_into(&x.tensor, &dst.tensor).map_err(backend_error)?;
        let ids = self.ctx.read(&dst.tensor).map_err(backend_error)?;
        Ok(ids
            .data
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    fn read_f32(&self, x: &GpuTensor) -> Result<Vec<f32>> {
        self.ctx.read_f32(&x.tensor).map_err(backend_error)
    }

    fn dispatches(&self) -> Option<u64> {
        Some(self.ctx.stream_counts().dispatches)
    }

    fn device_bytes(&self) -> Option<crate::ops::DeviceBytes> {
        Some(crate::ops::DeviceBytes {
            pool: self.pool_bytes(),
            zeroed: self.zeroed.load(std::sync::atomic::Ordering::Relaxed),
            scratch: self.ctx.scratch_bytes(),
        })
    }

    fn start_profile(&self, mode: ggml_dawn::profile::ProfileMode) -> Result<bool> {
        if !self.ctx.capabilities().timestamp_query {
            return Ok(false);
        }
        self.ctx.start_profile(mode).map_err(backend_error)?;
        Ok(true)
    }

    fn finish_profile(&self) -> Result<Option<ggml_dawn::profile::Profile>> {
        Ok(Some(self.ctx.finish_profile().map_err(backend_error)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submit_policies_are_valid_and_chosen_by_layer_size() {
        assert!(SUBMIT_POLICIES.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(SUBMIT_POLICIES.iter().all(|(_, p)| p.check().is_ok()));
        // SmolLM2-135M Q4_1 (92 MiB over 30 layers) and Llama-3-8B q4_0 (4.4 GiB over 32).
        assert_eq!(submit_policy((92 << 20) / 30), SubmitPolicy { first: 8, max: 32 });
        assert_eq!(submit_policy((4437 << 20) / 32), SubmitPolicy { first: 8, max: 128 });
    }
}
