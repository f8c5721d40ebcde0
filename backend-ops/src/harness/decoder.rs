//! The host side of the decoder ops' cases (issue #38): inputs filled as upstream fills them, the
//! CPU reference of the whole graph upstream compares, and the check of a result against it with
//! upstream's threshold. The GPU side plugs in at three places: [`gpu_plan`] checks a case with
//! its op's own checks and names the [`GpuOp`] to run, [`gpu_operands`] lays its operands out on
//! the device, and [`gpu_record`] records the op.

use ggml_dawn::context::GpuContext;
use ggml_dawn::error::BackendError;
use ggml_dawn::exec::Stream;
use ggml_dawn::format;
use ggml_dawn::ggml_type::GgmlType;
use ggml_dawn::memory::DeviceTensor;
use ggml_dawn::ops::{argmax, binary, glu, norm, rope, rows, scale, soft_max};
use ggml_dawn::reference::{
    self, BinaryOp, GluParams, ReferenceError, RmsNormParams, RopeParams, ScaleParams, SoftMaxParams, metric,
};
use ggml_dawn::tensor::{HostTensor, Layout};

use super::{Rng, Status};
use crate::cases::decoder::{DecoderCase, DecoderTensors, Fill, RopeSetRowsCase, Storage};
use crate::cases::{CaseError, CaseTensor};

/// Whether the GPU backend runs `case`, and why not: [`gpu_plan`]'s verdict.
pub fn gpu_support(case: &DecoderCase) -> Result<(), String> {
    gpu_plan(case).map(|_| ())
}

/// The operand of `t` named `name`.
fn view_of(t: &DecoderTensors, name: &str) -> Result<Layout, String> {
    t.operands
        .iter()
        .find(|o| o.name == name)
        .map(|o| o.view)
        .ok_or_else(|| format!("no operand {name}"))
}

/// The checks of the op that runs `case` on the GPU, from its layouts alone, and the op to run.
pub fn gpu_plan(case: &DecoderCase) -> Result<GpuOp, String> {
    let t = case.tensors().map_err(|e| e.to_string())?;
    let v = |name: &str| view_of(&t, name);
    let e = |e: BackendError| e.to_string();
    Ok(match case {
        DecoderCase::GetRows(_) => {
            rows::check_get_rows(&v("src")?, &v("ids")?, &t.dst).map_err(e)?;
            GpuOp::GetRows
        }
        DecoderCase::SetRows(_) => {
            rows::check_set_rows(&v("dst")?, &v("src")?, &v("ids")?).map_err(e)?;
            GpuOp::SetRows
        }
        DecoderCase::Cpy(_) => {
            rows::check_cpy(&v("src")?, &v("dst")?).map_err(e)?;
            GpuOp::Cpy
        }
        DecoderCase::Rope(c) => {
            let ff = v("freq_factors").ok();
            let params = c.params();
            rope::check(&v("a")?, &v("pos")?, ff.as_ref(), &t.dst, &params).map_err(e)?;
            GpuOp::Rope {
                params,
                freq_factors: ff.is_some(),
            }
        }
        DecoderCase::RopeSetRows(c) => {
            let params = c.rope().params();
            let a = v("a")?;
            rope::check(&a, &v("pos")?, None, &a, &params).map_err(e)?;
            rows::check_set_rows(&v("dst")?, &RopeSetRowsCase::rows(&a), &v("row_idxs")?).map_err(e)?;
            GpuOp::RopeSetRows { params }
        }
        DecoderCase::RmsNorm(c) => {
            norm::check(&v("x")?, None, None, &t.dst, c.eps).map_err(e)?;
            GpuOp::RmsNorm { eps: c.eps }
        }
        DecoderCase::RmsNormMulAdd(c) => {
            // The leading ADDs: `dst = a + b`, then `dst += c` (and `+= b`, `+= c` again with
            // multi_add) in place; then the fused op in place over dst.
            let (a, b, cc) = (v("a")?, v("b")?, v("c")?);
            binary::check(BinaryOp::Add, &a, &b, &t.dst).map_err(e)?;
            for w in [&b, &cc] {
                binary::check(BinaryOp::Add, &t.dst, w, &t.dst).map_err(e)?;
            }
            norm::check(&t.dst, Some(&b), Some(&cc), &t.dst, c.eps).map_err(e)?;
            GpuOp::RmsNormMulAdd {
                eps: c.eps,
                multi_add: c.multi_add,
            }
        }
        DecoderCase::SoftMax(c) => {
            let (mask, sinks) = (v("mask").ok(), v("sinks").ok());
            let params = soft_max::SoftMaxParams {
                scale: c.scale,
                max_bias: c.max_bias,
            };
            soft_max::check(&v("x")?, mask.as_ref(), sinks.as_ref(), &t.dst, &params).map_err(e)?;
            GpuOp::SoftMax {
                params,
                mask: mask.is_some(),
                sinks: sinks.is_some(),
            }
        }
        DecoderCase::Argmax(_) => {
            argmax::check(&v("x")?, &t.dst).map_err(e)?;
            GpuOp::Argmax
        }
        DecoderCase::Scale(c) => {
            scale::check(&v("x")?, &t.dst, c.scale, c.bias).map_err(e)?;
            GpuOp::Scale {
                scale: c.scale,
                bias: c.bias,
            }
        }
        DecoderCase::Binary(c) => {
            let (a, bs) = t.operands.split_first().ok_or("no operands")?;
            for b in bs {
                binary::check(c.op, &a.view, &b.view, &t.dst).map_err(e)?;
            }
            GpuOp::Binary { op: c.op }
        }
        DecoderCase::Glu(c) => {
            let params = GluParams {
                op: c.op,
                swapped: c.swapped,
                alpha: c.alpha,
                limit: c.limit,
            };
            let b = v("b").ok();
            glu::check(&v("a")?, b.as_ref(), &t.dst, &params).map_err(e)?;
            GpuOp::Glu {
                params,
                split: b.is_some(),
            }
        }
    })
}

/// A decoder op as the GPU runs it (operands in the case's order, dst last).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GpuOp {
    GetRows,
    SetRows,
    Cpy,
    Rope {
        params: RopeParams,
        freq_factors: bool,
    },
    /// ROPE of `a` in place, then SET_ROWS of its token rows into dst (`rope::rope_set_rows`).
    RopeSetRows {
        params: RopeParams,
    },
    RmsNorm {
        eps: f32,
    },
    /// RMS_NORM_MUL_ADD's graph (`a`, weight `b`, bias `c`): its leading ADDs into dst, then the
    /// fused op in place over dst.
    RmsNormMulAdd {
        eps: f32,
        multi_add: bool,
    },
    SoftMax {
        params: soft_max::SoftMaxParams,
        mask: bool,
        sinks: bool,
    },
    Argmax,
    Scale {
        scale: f32,
        bias: f32,
    },
    /// ADD, SUB, MUL or DIV over `a, b_0 … b_{n-1}`, chained as upstream's graph:
    /// `dst = a op b_0`, then `dst op= b_i` in place.
    Binary {
        op: BinaryOp,
    },
    /// A GLU, fused (`a` alone) or split (`a`, `b`).
    Glu {
        params: GluParams,
        split: bool,
    },
}

/// The case's storages uploaded and its operands viewed over them (in the case's order), then
/// dst: the operand named `dst` where the op writes in place (SET_ROWS, CPY), else a new tensor
/// filled with 0xff.
pub fn gpu_operands(ctx: &GpuContext, run: &HostRun) -> ggml_dawn::error::Result<Vec<DeviceTensor>> {
    let t = &run.tensors;
    let values = &run.operands;
    let storages: Vec<HostTensor> = t
        .storages
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let o = t
                .operands
                .iter()
                .position(|o| o.storage == i)
                .ok_or_else(|| BackendError::InvalidOperands(format!("storage {} is no operand's", s.name)))?;
            Ok(HostTensor {
                layout: s.layout,
                data: values[o].data.clone(),
            })
        })
        .collect::<ggml_dawn::error::Result<_>>()?;
    let up = ctx.upload_all(&storages.iter().collect::<Vec<_>>())?;
    let mut out = Vec::with_capacity(t.operands.len() + 1);
    for o in &t.operands {
        out.push(up[o.storage].view(o.view)?);
    }
    match t.operands.iter().position(|o| o.name == "dst") {
        Some(i) => out.push(out[i].clone()),
        None => out.push(ctx.filled(t.dst, 0xff)?),
    }
    Ok(out)
}

/// Records `op` over `tensors` (see [`gpu_operands`]); returns its plan in words.
pub fn gpu_record(
    ctx: &GpuContext,
    stream: &mut Stream,
    op: &GpuOp,
    tensors: &[DeviceTensor],
) -> ggml_dawn::error::Result<String> {
    let env = ctx.env();
    let missing = || BackendError::InvalidOperands(format!("{op:?}: operands missing"));
    Ok(match (op, tensors) {
        (GpuOp::GetRows, [src, ids, dst]) => rows::get_rows(&env, stream, src, ids, dst)?.to_string(),
        (GpuOp::SetRows, [dst, src, ids, _]) => rows::set_rows(&env, stream, dst, src, ids)?.to_string(),
        (GpuOp::Cpy, [src, _, dst]) => rows::cpy(&env, stream, src, dst)?.to_string(),
        (
            GpuOp::Rope {
                params,
                freq_factors: false,
            },
            [a, pos, dst],
        ) => rope::rope(&env, stream, a, pos, None, dst, params)?.to_string(),
        (
            GpuOp::Rope {
                params,
                freq_factors: true,
            },
            [a, pos, ff, dst],
        ) => rope::rope(&env, stream, a, pos, Some(ff), dst, params)?.to_string(),
        (GpuOp::RopeSetRows { params }, [dst, a, pos, ids, _]) => {
            let rows = a.view(RopeSetRowsCase::rows(a.layout()))?;
            rope::rope_set_rows(&env, stream, a, pos, None, params, &rows, dst, ids)?.to_string()
        }
        (GpuOp::RmsNorm { eps }, [x, dst]) => {
            norm::rms_norm_mul_add(&env, stream, x, None, None, dst, *eps)?.to_string()
        }
        (GpuOp::RmsNormMulAdd { eps, multi_add }, [a, b, c, dst]) => {
            let rounds = if *multi_add { 2 } else { 1 };
            let mut plans = Vec::with_capacity(2 * rounds + 1);
            for round in 0..rounds {
                let x = if round == 0 { a } else { dst };
                plans.push(binary::binary(&env, stream, BinaryOp::Add, x, b, dst)?.to_string());
                plans.push(binary::binary(&env, stream, BinaryOp::Add, dst, c, dst)?.to_string());
            }
            plans.push(norm::rms_norm_mul_add(&env, stream, dst, Some(b), Some(c), dst, *eps)?.to_string());
            plans.join("; ")
        }
        (GpuOp::SoftMax { params, mask, sinks }, [x, rest @ .., dst]) => {
            let (m, s) = match (mask, sinks, rest) {
                (false, false, []) => (None, None),
                (true, false, [m]) => (Some(m), None),
                (false, true, [s]) => (None, Some(s)),
                (true, true, [m, s]) => (Some(m), Some(s)),
                _ => return Err(missing()),
            };
            soft_max::soft_max(&env, stream, x, m, s, dst, *params)?.to_string()
        }
        (GpuOp::Argmax, [x, dst]) => argmax::argmax(&env, stream, x, dst)?.to_string(),
        (GpuOp::Scale { scale: s, bias }, [x, dst]) => scale::scale(&env, stream, x, dst, *s, *bias)?.to_string(),
        (GpuOp::Binary { op }, [a, bs @ .., dst]) if !bs.is_empty() => {
            let mut plans = Vec::with_capacity(bs.len());
            for (i, b) in bs.iter().enumerate() {
                let x = if i == 0 { a } else { dst };
                plans.push(binary::binary(&env, stream, *op, x, b, dst)?.to_string());
            }
            plans.join("; ")
        }
        (GpuOp::Glu { params, split: false }, [a, dst]) => glu::glu(&env, stream, a, None, dst, params)?.to_string(),
        (GpuOp::Glu { params, split: true }, [a, b, dst]) => {
            glu::glu(&env, stream, a, Some(b), dst, params)?.to_string()
        }
        _ => return Err(missing()),
    })
}

/// A case made on the host: its operands (in the case's order) and the reference result.
#[derive(Debug, Clone)]
pub struct HostRun {
    pub tensors: DecoderTensors,
    /// The operands as the op reads them (views over their storages' bytes).
    pub operands: Vec<HostTensor>,
    /// The result upstream compares, as f32 (ARGMAX's indices as values).
    pub reference: Vec<f32>,
    /// Upstream's threshold for the case.
    pub max_nmse: f64,
}

impl HostRun {
    /// Upstream's verdict on `actual` (the result read back as f32).
    pub fn check(&self, actual: &[f32]) -> Status {
        match metric::check(&self.reference, actual, self.max_nmse) {
            Ok(nmse) => Status::Ok { nmse },
            Err(mismatch) => Status::Fail {
                reason: mismatch.to_string(),
            },
        }
    }

    /// The operand named `name` (the first of that name).
    pub fn operand(&self, name: &str) -> Option<&HostTensor> {
        self.tensors
            .operands
            .iter()
            .position(|o| o.name == name)
            .map(|i| &self.operands[i])
    }
}

/// Why a host run could not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Case(#[from] CaseError),
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    #[error("{0}")]
    Format(#[from] format::FormatError),
}

impl From<HostError> for BackendError {
    fn from(e: HostError) -> BackendError {
        match e {
            HostError::Case(e @ CaseError::UnsupportedType { .. }) => BackendError::Unsupported(e.to_string()),
            other => BackendError::InvalidOperands(other.to_string()),
        }
    }
}

/// The i32 or i64 bytes of `values` for a tensor of type `ty`.
fn int_bytes(ty: GgmlType, values: impl Iterator<Item = i64>) -> Vec<u8> {
    match ty {
        GgmlType::I64 => values.flat_map(i64::to_le_bytes).collect(),
        _ => values.flat_map(|v| (v as i32).to_le_bytes()).collect(),
    }
}

/// Fisher–Yates on `0..n` with `rng`.
fn shuffled(rng: &mut Rng, n: usize) -> Vec<i64> {
    let mut v: Vec<i64> = (0..n as i64).collect();
    for i in (1..n).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// One storage's bytes, filled as upstream fills it.
fn fill(rng: &mut Rng, s: &Storage) -> Result<HostTensor, HostError> {
    let l = s.layout;
    let n = l.elements();
    let with_bytes = |data| HostTensor { layout: l, data };
    Ok(match s.fill {
        Fill::Uniform(lo, hi) if format::can_quantize(l.ty) => HostTensor::from_f32(l.ty, l.ne, &rng.fill(n, lo, hi))?,
        Fill::Uniform(..) => {
            // The grid i-quants: random blocks with sane scales, as the MUL_MAT inputs.
            let t = CaseTensor { storage: l, view: l };
            super::input(rng, &t, true).map_err(|e| HostError::Format(format::FormatError::Layout(e.to_string())))?
        }
        Fill::RowIds { rows } => {
            let rows = rows.max(1) as u64;
            with_bytes(int_bytes(l.ty, (0..n).map(|_| (rng.next_u64() % rows) as i64)))
        }
        Fill::Positions { n_ctx } => {
            let n_ctx = n_ctx.max(1) as u64;
            with_bytes(int_bytes(l.ty, (0..n).map(|_| (rng.next_u64() % n_ctx) as i64)))
        }
        Fill::Integers => with_bytes(int_bytes(l.ty, (0..n).map(|_| (rng.next_u64() % 2001) as i64 - 1000))),
        Fill::DistinctRowIds { rows } => {
            // Each row of ids: the first ne0 of a shuffle of 0..rows.
            let mut ids = Vec::with_capacity(n);
            for _ in 0..l.rows() {
                let mut row = shuffled(rng, rows.max(l.ne[0]));
                row.truncate(l.ne[0]);
                ids.extend(row);
            }
            with_bytes(int_bytes(l.ty, ids.into_iter()))
        }
        Fill::Shuffled => {
            let mut values = Vec::with_capacity(n);
            for _ in 0..l.rows() {
                values.extend(shuffled(rng, l.ne[0]).into_iter().map(|v| v as f32));
            }
            HostTensor::from_f32(l.ty, l.ne, &values)?
        }
    })
}

/// A contiguous f32 (or `ty`) tensor of extents `ne` holding `values`.
fn wrap(ty: GgmlType, ne: [usize; 4], values: &[f32]) -> Result<HostTensor, HostError> {
    Ok(HostTensor::from_f32(ty, ne, values)?)
}

/// The reference of the graph upstream builds for `case`, from its operands.
pub fn reference_of(
    case: &DecoderCase,
    run_tensors: &DecoderTensors,
    ops: &[HostTensor],
) -> Result<Vec<f32>, HostError> {
    let get = |name: &str| -> Result<&HostTensor, HostError> {
        run_tensors
            .operands
            .iter()
            .position(|o| o.name == name)
            .map(|i| &ops[i])
            .ok_or_else(|| {
                HostError::Case(CaseError::Invalid {
                    op: case.op_name(),
                    reason: format!("no operand {name}"),
                })
            })
    };
    let opt = |name: &str| get(name).ok();
    Ok(match case {
        DecoderCase::GetRows(_) => reference::get_rows(get("src")?, get("ids")?)?,
        DecoderCase::RmsNorm(c) => reference::rms_norm(get("x")?, RmsNormParams { eps: c.eps })?,
        DecoderCase::RmsNormMulAdd(c) => {
            let (a, b, cc) = (get("a")?, get("b")?, get("c")?);
            let ne = a.layout.ne;
            // a' = (a + b) + c, once more with multi_add.
            let mut x = a.clone();
            for _ in 0..if c.multi_add { 2 } else { 1 } {
                let ab = wrap(GgmlType::F32, ne, &reference::binary(BinaryOp::Add, &x, b)?)?;
                x = wrap(GgmlType::F32, ne, &reference::binary(BinaryOp::Add, &ab, cc)?)?;
            }
            reference::rms_norm_mul_add(&x, Some(b), Some(cc), RmsNormParams { eps: c.eps })?
        }
        DecoderCase::Binary(c) => {
            let a = get("a")?;
            let mut out = a.clone();
            let mut values = Vec::new();
            for (o, t) in run_tensors.operands.iter().zip(ops).skip(1) {
                debug_assert!(o.name.starts_with('b'));
                values = reference::binary(c.op, &out, t)?;
                out = wrap(a.layout.ty, a.layout.ne, &values)?;
            }
            values
        }
        DecoderCase::Rope(c) => reference::rope(get("a")?, get("pos")?, opt("freq_factors"), &c.params())?,
        DecoderCase::RopeSetRows(c) => {
            let roped = reference::rope(get("a")?, get("pos")?, None, &c.rope().params())?;
            let [n0, n1, n2, _] = c.ne_a;
            let rows = wrap(GgmlType::F32, [n0 * n1, n2, 1, 1], &roped[..n0 * n1 * n2])?;
            reference::set_rows(get("dst")?, &rows, get("row_idxs")?)?.to_f32()?
        }
        DecoderCase::Glu(c) => {
            let params = GluParams {
                op: c.op,
                swapped: c.swapped,
                alpha: c.alpha,
                limit: c.limit,
            };
            reference::glu(get("a")?, opt("b"), &params)?
        }
        DecoderCase::SetRows(_) => reference::set_rows(get("dst")?, get("src")?, get("ids")?)?.to_f32()?,
        DecoderCase::Cpy(_) => reference::cpy(get("src")?, get("dst")?)?.to_f32()?,
        DecoderCase::Scale(c) => reference::scale(
            get("x")?,
            ScaleParams {
                scale: c.scale,
                bias: c.bias,
            },
        )?,
        DecoderCase::SoftMax(c) => reference::soft_max(
            get("x")?,
            opt("mask"),
            opt("sinks"),
            SoftMaxParams {
                scale: c.scale,
                max_bias: c.max_bias,
            },
        )?,
        DecoderCase::Argmax(_) => reference::argmax(get("x")?)?.into_iter().map(|i| i as f32).collect(),
    })
}

/// Makes `case` on the host: every storage filled from `seed`, the operands viewed over them, and
/// the reference computed.
pub fn host_run(case: &DecoderCase, seed: u64) -> Result<HostRun, HostError> {
    let tensors = case.tensors()?;
    let mut rng = Rng::new(seed);
    let storages = tensors
        .storages
        .iter()
        .map(|s| fill(&mut rng, s))
        .collect::<Result<Vec<_>, _>>()?;
    let operands: Vec<HostTensor> = tensors
        .operands
        .iter()
        .map(|o| HostTensor {
            layout: o.view,
            data: storages[o.storage].data.clone(),
        })
        .collect();
    let reference = reference_of(case, &tensors, &operands)?;
    let expected = tensors.dst.elements();
    if reference.len() != expected {
        return Err(HostError::Case(CaseError::Invalid {
            op: case.op_name(),
            reason: format!("the reference has {} values, dst {expected}", reference.len()),
        }));
    }
    let max_nmse = case.max_nmse();
    Ok(HostRun {
        tensors,
        operands,
        reference,
        max_nmse,
    })
}

/// What a decoder case allocates on the device: its storages, then dst when it is not one of them.
pub fn allocations(case: &DecoderCase) -> Result<Vec<(&'static str, Layout)>, CaseError> {
    let t = case.tensors()?;
    let mut out: Vec<(&'static str, Layout)> = t.storages.iter().map(|s| (s.name, s.layout)).collect();
    let in_place = t.storages.iter().any(|s| s.name == "dst");
    if !in_place {
        out.push(("dst", t.dst));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::Case;

    fn decoder(spec: &str) -> DecoderCase {
        match spec.parse::<Case>().unwrap() {
            Case::Decoder(c) => c,
            other => panic!("{other} is not a decoder case"),
        }
    }

    /// One small case per op family (the CI subset): the inputs are made, the reference agrees
    /// with itself, and a wrong result fails by upstream's rule.
    #[test]
    fn one_case_per_op_runs_on_the_host() {
        for spec in [
            "GET_ROWS(type=q4_0,n=256,m=5,r=4,be1=7,be2=1,v=1)",
            "GET_ROWS(type=i32,n=256,m=5,r=4,be1=1,be2=1,v=0)",
            "RMS_NORM(type=f32,ne=[64,5,4,3],v=1,eps=0.000001,inplace=0)",
            "RMS_NORM_MUL_ADD(type=f32,ne=[64,5,4,3],eps=0.000001,broadcast=1,multi_add=1)",
            "ADD(type=f32,ne=[10,5,4,3],nr=[2,2,2,2],nf=1,perm1=1,src_overlap=0)",
            "SUB(type=f16,ne=[10,5,4,6],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=1)",
            "MUL(type=f32,ne=[16,5,4,3],nr=[1,1,1,1],nf=16,perm1=0,src_overlap=0)",
            "ROPE(type=f16,ne_a=[128,32,2,1],n_dims=128,mode=2,n_ctx=512,fs=1.424500,ef=0.746500,af=1.424500,ff=1,v=1,inplace=0,n_offs=0)",
            "ROPE(type=f32,ne_a=[128,12,2,1],n_dims=128,mode=24,n_ctx=512,fs=1.000000,ef=0.000000,af=1.000000,ff=0,v=0,inplace=0,n_offs=0)",
            "SWIGLU(type=f16,ne_a=[5,7,11,13],v=1,swapped=1)",
            "GEGLU(type=f32,ne_a=[128,2,2,2],v=0,split)",
            "SWIGLU_OAI(type=f32,ne_a=[128,2,2,2],v=1,alpha=0.500000,limit=2.000000)",
            "SET_ROWS(type_src=f32,type_dst=q4_0,type_idx=i64,ne=[256,11,1,7],nr23=[2,3],r=7,v=1)",
            "CPY(type_src=f32,type_dst=q8_0,ne_src=[256,4,4,4],permute_src=[0,0,0,0],permute_dst=[0,0,0,0],_src_transpose=0)",
            "CPY(type_src=f16,type_dst=f32,ne_src=[256,2,3,4],permute_src=[0,2,1,3],permute_dst=[0,0,0,0],_src_transpose=0)",
            "SCALE(type=f32,ne=[10,10,10,10],scale=2.000000,bias=1.000000,inplace=0)",
            "SOFT_MAX(type=f32,ne=[31,15,1,1],mask=1,sinks=1,m_prec=f16,nr23=[2,3],scale=0.100000,max_bias=8.000000,inplace=0)",
            "ARGMAX(type=f32,ne=[100,10,1,1])",
        ] {
            let case = decoder(spec);
            assert_eq!(case.to_string(), spec);
            let run = host_run(&case, 7).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert!(run.reference.iter().all(|v| v.is_finite()), "{spec}");
            assert_eq!(run.check(&run.reference), Status::Ok { nmse: 0.0 }, "{spec}");
            let mut wrong = run.reference.clone();
            for v in wrong.iter_mut().step_by(3) {
                *v = -*v + 1.0;
            }
            assert!(matches!(run.check(&wrong), Status::Fail { .. }), "{spec}");
            // Every op of issue #38 has its kernel.
            assert_eq!(gpu_support(&case), Ok(()), "{spec}");
        }
    }

    /// Every case of the decoder lists (supported and not) made on the host, its reference
    /// included; cases whose storages pass 2²⁴ elements are skipped. Minutes: run by hand
    /// (`cargo test -p ggml-dawn-bench --lib -- --ignored every_listed`).
    #[test]
    #[ignore = "minutes of CPU; the CI subset is one_case_per_op_runs_on_the_host"]
    fn every_listed_decoder_case_runs_on_the_host() {
        let (mut ran, mut skipped, mut foreign) = (0, 0, 0);
        for case in crate::case_lists::decoder_cases(true).unwrap() {
            let Case::Decoder(c) = &case else { continue };
            let Ok(t) = c.tensors() else {
                foreign += 1;
                continue;
            };
            if t.storages.iter().map(|s| s.layout.elements()).sum::<usize>() > 1 << 24 {
                skipped += 1;
                continue;
            }
            match host_run(c, 1) {
                Ok(run) => {
                    assert!(run.reference.iter().all(|v| !v.is_nan()), "{case}");
                    ran += 1;
                }
                // Types ggml's CPU cannot quantize to either (the grid i-quants).
                Err(HostError::Reference(ReferenceError::Format {
                    source: format::FormatError::Unsupported(_),
                    ..
                })) => foreign += 1,
                Err(e) => panic!("{case}: {e}"),
            }
        }
        println!(
            "{ran} cases ran on the host, {skipped} too large skipped, {foreign} of types without a CPU conversion"
        );
    }

    #[test]
    fn inputs_follow_upstream() {
        // ARGMAX rows are shuffles of 0..ne0: the reference is where ne0 − 1 sits.
        let run = host_run(&decoder("ARGMAX(type=f32,ne=[32,4,1,1])"), 3).unwrap();
        let x = run.operand("x").unwrap().to_f32().unwrap();
        for (r, &idx) in run.reference.iter().enumerate() {
            assert_eq!(x[r * 32 + idx as usize], 31.0);
        }
        // SET_ROWS ids: no id twice in a row, all below ne1.
        let run = host_run(
            &decoder("SET_ROWS(type_src=f32,type_dst=f16,type_idx=i32,ne=[4,11,2,1],nr23=[1,1],r=7,v=0)"),
            5,
        )
        .unwrap();
        let ids = run.operand("ids").unwrap().to_f32().unwrap();
        for row in ids.chunks(7) {
            let mut seen: Vec<f32> = row.to_vec();
            seen.sort_by(f32::total_cmp);
            seen.dedup();
            assert_eq!(seen.len(), 7);
            assert!(row.iter().all(|&i| (0.0..11.0).contains(&i)));
        }
        // ROPE positions below n_ctx, four per token for the multi-section modes.
        let run = host_run(
            &decoder("ROPE(type=f32,ne_a=[128,12,2,1],n_dims=128,mode=8,n_ctx=16,fs=1.000000,ef=0.000000,af=1.000000,ff=0,v=0,inplace=0,n_offs=0)"),
            1,
        )
        .unwrap();
        let pos = run.operand("pos").unwrap().to_f32().unwrap();
        assert_eq!(pos.len(), 8);
        assert!(pos.iter().all(|&p| (0.0..16.0).contains(&p)));
    }

    #[test]
    fn thresholds_follow_upstream() {
        let t = |spec: &str| decoder(spec).max_nmse();
        assert_eq!(t("ARGMAX(type=f32,ne=[32,1,1,1])"), 0.0);
        assert_eq!(
            t(
                "SOFT_MAX(type=f32,ne=[16,16,1,1],mask=0,sinks=0,m_prec=f32,nr23=[1,1],scale=1.000000,max_bias=0.000000,inplace=0)"
            ),
            1e-6
        );
        assert_eq!(t("RMS_NORM(type=f32,ne=[64,5,4,3],v=0,eps=0.000001,inplace=0)"), 1e-7);
        // Any f16 tensor raises the default to 1e-6 on WebGPU.
        assert_eq!(t("SWIGLU(type=f16,ne_a=[128,2,2,2],v=0,swapped=0)"), 1e-6);
        assert_eq!(
            t(
                "CPY(type_src=f32,type_dst=f32,ne_src=[256,4,1,1],permute_src=[0,0,0,0],permute_dst=[0,0,0,0],_src_transpose=1)"
            ),
            0.0
        );
        // q4_0 from f32: (150/8)² / (0.25·150²·n) = 1/(16·n); n = 256·4·4·4.
        let q = t(
            "CPY(type_src=f32,type_dst=q4_0,ne_src=[256,4,4,4],permute_src=[0,0,0,0],permute_dst=[0,0,0,0],_src_transpose=0)",
        );
        assert!((q - 1.0 / (16.0 * 16384.0)).abs() < 1e-15, "{q}");
        // SET_ROWS into q8_0 from f32: (1/64)² / (0.25·n), n = 256·1·3, at least 2e-7 on WebGPU.
        let s = t("SET_ROWS(type_src=f32,type_dst=q8_0,type_idx=i32,ne=[256,5,1,3],nr23=[1,1],r=1,v=0)");
        assert!((s - 1.0 / 4096.0 / 192.0).abs() < 1e-15, "{s}");
        let small = t("SET_ROWS(type_src=f32,type_dst=q8_0,type_idx=i64,ne=[256,5,7,3],nr23=[2,3],r=7,v=0)");
        assert_eq!(small, 2e-7);
    }
}
