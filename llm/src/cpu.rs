//! [`Ops`] on the CPU: every op is `ggml_dawn::reference`'s, on [`HostTensor`]s. It is the
//! oracle the GPU decoder is checked against, and a (slow) model runner of its own.

use ggml_dawn::reference::{self, BinaryOp, GluOp, GluParams, RmsNormParams, RopeParams};
use ggml_dawn::{GgmlType, HostTensor, Layout};

use crate::error::{LlmError, Result};
use crate::ops::Ops;

/// The CPU reference ops: f32 activations, f64 sums.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuOps;

fn backend_error(e: impl std::fmt::Display) -> LlmError {
    LlmError::Backend(e.to_string())
}

/// A contiguous f32 tensor of `ne` holding `values`.
fn f32_result(ne: [usize; 4], values: Vec<f32>) -> Result<HostTensor> {
    let layout = Layout::contiguous(GgmlType::F32, ne).map_err(backend_error)?;
    if values.len() != layout.elements() {
        return Err(LlmError::Backend(format!(
            "{} values for a tensor of {ne:?}",
            values.len()
        )));
    }
    Ok(HostTensor {
        layout,
        data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    })
}

impl Ops for CpuOps {
    type Tensor = HostTensor;

    fn name(&self) -> String {
        "cpu".into()
    }

    fn upload(&self, t: &HostTensor) -> Result<HostTensor> {
        Ok(t.clone())
    }

    fn zeros(&self, ty: GgmlType, ne: [usize; 4]) -> Result<HostTensor> {
        let layout = Layout::contiguous(ty, ne).map_err(backend_error)?;
        let bytes = layout.span_bytes().map_err(backend_error)?;
        Ok(HostTensor {
            layout,
            data: vec![0; bytes],
        })
    }

    fn layout(&self, t: &HostTensor) -> Layout {
        t.layout
    }

    fn view(&self, t: &HostTensor, layout: Layout) -> Result<HostTensor> {
        t.view(layout).map_err(backend_error)
    }

    fn get_rows(&self, src: &HostTensor, ids: &HostTensor) -> Result<HostTensor> {
        let [n, _, b1, b2] = src.layout.ne;
        let out = reference::get_rows(src, ids).map_err(backend_error)?;
        f32_result([n, ids.layout.ne[0], b1, b2], out)
    }

    fn rms_norm_mul(&self, x: &HostTensor, weight: &HostTensor, eps: f32) -> Result<HostTensor> {
        let out = reference::rms_norm_mul_add(x, Some(weight), None, RmsNormParams { eps }).map_err(backend_error)?;
        f32_result(x.layout.ne, out)
    }

    fn mul_mat(&self, a: &HostTensor, b: &HostTensor) -> Result<HostTensor> {
        let out = reference::mul_mat(a, b).map_err(backend_error)?;
        let [_, m, _, _] = a.layout.ne;
        let [_, n, b2, b3] = b.layout.ne;
        f32_result([m, n, b2, b3], out)
    }

    fn add(&self, a: &HostTensor, b: &HostTensor) -> Result<HostTensor> {
        let out = reference::binary(BinaryOp::Add, a, b).map_err(backend_error)?;
        f32_result(a.layout.ne, out)
    }

    fn rope(
        &self,
        x: &HostTensor,
        pos: &HostTensor,
        freq_factors: Option<&HostTensor>,
        params: &RopeParams,
    ) -> Result<HostTensor> {
        let out = reference::rope(x, pos, freq_factors, params).map_err(backend_error)?;
        f32_result(x.layout.ne, out)
    }

    fn swiglu(&self, gate: &HostTensor, up: Option<&HostTensor>) -> Result<HostTensor> {
        let out = reference::glu(gate, up, &GluParams::new(GluOp::Swiglu)).map_err(backend_error)?;
        let mut ne = gate.layout.ne;
        if up.is_none() {
            ne[0] /= 2;
        }
        f32_result(ne, out)
    }

    fn rope_in_place(
        &self,
        t: &mut HostTensor,
        view: Layout,
        pos: &HostTensor,
        freq_factors: Option<&HostTensor>,
        params: &RopeParams,
    ) -> Result<()> {
        if view.ty != GgmlType::F32 {
            return Err(LlmError::Backend(format!("ROPE in place on {} (f32 only)", view.ty)));
        }
        let values =
            reference::rope(&t.view(view).map_err(backend_error)?, pos, freq_factors, params).map_err(backend_error)?;
        // The values in logical order, each back at its element's byte offset in the view.
        let [n0, n1, n2, n3] = view.ne;
        let mut values = values.into_iter();
        for i3 in 0..n3 {
            for i2 in 0..n2 {
                for i1 in 0..n1 {
                    for i0 in 0..n0 {
                        let at = view.offset + i0 * view.nb[0] + i1 * view.nb[1] + i2 * view.nb[2] + i3 * view.nb[3];
                        let value = values
                            .next()
                            .ok_or_else(|| LlmError::Backend("ROPE returned too few values".into()))?;
                        t.data
                            .get_mut(at..at + 4)
                            .ok_or_else(|| LlmError::Backend("ROPE's view passes its tensor's end".into()))?
                            .copy_from_slice(&value.to_le_bytes());
                    }
                }
            }
        }
        Ok(())
    }

    fn set_rows(&self, dst: &mut HostTensor, view: Layout, src: &HostTensor, ids: &HostTensor) -> Result<()> {
        let written = reference::set_rows(&dst.view(view).map_err(backend_error)?, src, ids).map_err(backend_error)?;
        dst.data = written.data;
        Ok(())
    }

    fn flash_attn(
        &self,
        q: &HostTensor,
        k: &HostTensor,
        v: &HostTensor,
        mask: Option<&HostTensor>,
        scale: f32,
    ) -> Result<HostTensor> {
        let out = reference::flash_attn_ext(q, k, v, mask, None, scale, 0.0, 0.0).map_err(backend_error)?;
        let [_, n_q, n_head, n_seq] = q.layout.ne;
        f32_result([v.layout.ne[0], n_head, n_q, n_seq], out)
    }

    fn argmax(&self, x: &HostTensor) -> Result<Vec<i32>> {
        reference::argmax(x).map_err(backend_error)
    }

    fn read_f32(&self, x: &HostTensor) -> Result<Vec<f32>> {
        x.to_f32().map_err(backend_error)
    }
}
