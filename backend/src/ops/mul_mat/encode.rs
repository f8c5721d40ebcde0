//! Binding, parameters and dispatch of a [`MulMatPlan`]: every choice comes from the plan.

use std::sync::Arc;

use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream};
use crate::kernel::{Access, Pipeline};
use crate::memory::{Binding, DeviceTensor};
use crate::ops::Env;
use crate::params::{MulMatSimpleUniforms, MulMatUniforms};

use super::plan::{BPrologue, Choice, DstEpilogue, MulMatPlan, SIMPLE_WG};

/// The three storage bindings (a, b, dst).
#[derive(Debug, Clone, Copy)]
pub struct Bindings {
    pub a: Binding,
    pub b: Binding,
    pub dst: Binding,
}

impl Bindings {
    pub fn new(env: &Env, a: &DeviceTensor, b: &DeviceTensor, dst: &DeviceTensor) -> Result<Bindings> {
        let limits = env.limits();
        let align = u64::from(limits.min_storage_buffer_offset_alignment);
        let max = limits.max_storage_buffer_binding_size;
        Ok(Bindings {
            a: a.binding(align, max)?,
            b: b.binding(align, max)?,
            dst: dst.binding(align, max)?,
        })
    }
}

fn word(v: u64) -> Result<u32> {
    crate::ops::arith::word("MUL_MAT", v)
}

/// The compiled kernels of one plan (see `variants::mul_mat`).
#[derive(Debug)]
pub struct PlanKernels {
    pub kernel: Arc<Pipeline>,
    pub quantize_b: Option<Arc<Pipeline>>,
    pub dequantize_a: Option<Arc<Pipeline>>,
    pub convert_b: Option<Arc<Pipeline>>,
}

/// `plan`'s kernels, from the context's memo of recent plans or compiled now.
fn plan_kernels(env: &Env, plan: &MulMatPlan) -> Result<Arc<PlanKernels>> {
    env.plan_kernels().mul_mat.get_or_try_insert(plan, || {
        let variants = crate::variants::mul_mat(plan);
        // The norm's operands follow the storage bindings of the kernel that applies it.
        let norm_accesses: &[Access] = match plan.problem.b_prologue {
            BPrologue::RmsNorm { residual: false, .. } => &[Access::Read],
            BPrologue::RmsNorm { residual: true, .. } => &[Access::Read, Access::Read, Access::ReadWrite],
            BPrologue::None | BPrologue::Swiglu => &[],
        };
        let mut main = vec![Access::Read, Access::Read, Access::ReadWrite];
        if plan.a_vec4 {
            main.push(Access::Read);
        }
        if plan.prologue_in_workgroup() {
            main.extend_from_slice(norm_accesses);
        }
        if let (true, DstEpilogue::RopeSetRows { freq_factors, .. }) =
            (plan.applies_epilogue(), plan.problem.dst_epilogue)
        {
            main.push(Access::Read);
            if freq_factors {
                main.push(Access::Read);
            }
            main.extend([Access::Read, Access::ReadWrite]);
        }
        let pass = [Access::Read, Access::Read, Access::ReadWrite];
        let compile = |v: Option<&crate::shader_lib::ShaderVariant>| v.map(|v| env.kernel(v, &pass)).transpose();
        let mut quantize = pass.to_vec();
        if plan.quantize_b.is_some_and(|q| q.prologue) {
            quantize.extend_from_slice(norm_accesses);
        }
        Ok(Arc::new(PlanKernels {
            kernel: env.kernel(&variants.kernel, &main)?,
            quantize_b: variants
                .quantize_b
                .as_ref()
                .map(|v| env.kernel(v, &quantize))
                .transpose()?,
            dequantize_a: compile(variants.dequantize_a.as_ref())?,
            convert_b: compile(variants.convert_b.as_ref())?,
        }))
    })
}

/// The RMS_NORM's operands a plan with [`BPrologue::RmsNorm`] binds after the MUL_MAT's, and
/// its parameters (elements from each binding's start).
#[derive(Debug, Clone)]
pub struct NormBinding {
    pub weight: BufferRange,
    /// The residual and the sum the kernel stores.
    pub residual: Option<(BufferRange, BufferRange)>,
    pub eps: f32,
    pub w_start: u32,
    pub r_start: u32,
    pub r_nb1: u32,
    pub sum_start: u32,
    pub sum_nb1: u32,
}

impl NormBinding {
    /// Binds the norm's operands after a kernel's MUL_MAT storage bindings
    /// (mul_mat_operands.wgsl's NORM_BINDING) and sets its parameters.
    fn bind(&self, buffers: &mut Vec<BufferRange>, params: &mut MulMatUniforms) {
        buffers.push(self.weight.clone());
        if let Some((r, s)) = &self.residual {
            buffers.push(r.clone());
            buffers.push(s.clone());
        }
        params.norm_eps = self.eps;
        params.norm_w_start = self.w_start;
        params.norm_r_start = self.r_start;
        params.norm_r_nb1 = self.r_nb1;
        params.norm_sum_start = self.sum_start;
        params.norm_sum_nb1 = self.sum_nb1;
    }
}

/// The ROPE and KV-cache write a plan with [`DstEpilogue::RopeSetRows`] binds after the
/// norm's operands (mul_mat_operands.wgsl's EPI_BINDING), and its parameters: the
/// `MulMatUniforms` fields from `rope_rows` on, the rest left at their defaults (the main
/// kernel's block starts from it).
#[derive(Debug, Clone)]
pub struct RopeKvBinding {
    pub pos: BufferRange,
    pub freq_factors: Option<BufferRange>,
    pub ids: BufferRange,
    pub cache: BufferRange,
    pub params: MulMatUniforms,
}

impl RopeKvBinding {
    fn bind(&self, buffers: &mut Vec<BufferRange>) {
        buffers.push(self.pos.clone());
        buffers.extend(self.freq_factors.clone());
        buffers.push(self.ids.clone());
        buffers.push(self.cache.clone());
    }
}

/// Records the planned kernel.
pub fn encode(
    env: &Env,
    stream: &mut Stream,
    a: &DeviceTensor,
    b: &DeviceTensor,
    dst: &DeviceTensor,
    bound: &Bindings,
    plan: &MulMatPlan,
) -> Result<()> {
    encode_with(env, stream, a, b, dst, bound, plan, None, None)
}

/// [`encode`] with the norm's operands of a [`BPrologue::RmsNorm`] plan and the epilogue's of a
/// [`DstEpilogue::RopeSetRows`] plan (which need them and take no others).
#[allow(clippy::too_many_arguments)]
pub fn encode_with(
    env: &Env,
    stream: &mut Stream,
    a: &DeviceTensor,
    b: &DeviceTensor,
    dst: &DeviceTensor,
    bound: &Bindings,
    plan: &MulMatPlan,
    norm: Option<&NormBinding>,
    rope: Option<&RopeKvBinding>,
) -> Result<()> {
    if plan.applies_epilogue() != rope.is_some()
        || rope.is_some_and(|r| {
            r.freq_factors.is_some()
                != matches!(
                    plan.problem.dst_epilogue,
                    DstEpilogue::RopeSetRows { freq_factors: true, .. }
                )
        })
    {
        return Err(BackendError::InvalidOperands(
            "MUL_MAT: an epilogue's operands that do not match the plan".into(),
        ));
    }
    let norm_residual = match plan.problem.b_prologue {
        BPrologue::RmsNorm { residual, .. } => Some(residual),
        _ => None,
    };
    if norm_residual != norm.map(|n| n.residual.is_some()) {
        return Err(BackendError::InvalidOperands(
            "MUL_MAT: a norm's operands that do not match the plan's prologue".into(),
        ));
    }
    if plan.problem.b_prologue != BPrologue::None && !plan.applies_prologue() {
        // b is an op's input: only the kernel that applies the op may read it.
        return Err(BackendError::InvalidOperands(format!(
            "MUL_MAT: b's {:?} planned for a kernel that does not apply it",
            plan.problem.b_prologue
        )));
    }
    if matches!(plan.choice, Choice::Simple(_)) {
        return simple(env, stream, a, b, dst, bound, plan);
    }
    let kernels = plan_kernels(env, plan)?;
    let kernel = &kernels.kernel;
    let plain = MulMatUniforms::default();
    let base = rope.map_or(&plain, |r| &r.params);
    let mut params = operand_params(a, b, bound, bound.dst.start_byte / 4, plan.grid[0], plan, base)?;
    let mut buffers = vec![
        BufferRange::new(a.buffer(), bound.a),
        BufferRange::new(b.buffer(), bound.b),
        BufferRange::new(dst.buffer(), bound.dst),
    ];
    if plan.a_vec4 {
        buffers.push(BufferRange::new(a.buffer(), bound.a));
    }
    if let Some(n) = norm.filter(|_| plan.prologue_in_workgroup()) {
        n.bind(&mut buffers, &mut params);
    }
    if let Some(r) = rope {
        r.bind(&mut buffers);
    }
    if plan.dequantize_a.is_some() || plan.convert_b.is_some() {
        // The f16 copies go to the context's scratch first, in the same submit as the kernel,
        // which reads them in a's and b's places. Both passes read a and b as they are.
        let passes = usize::from(plan.dequantize_a.is_some()) + usize::from(plan.convert_b.is_some());
        stream.reserve(1 + passes)?;
        let originals = [buffers[0].clone(), buffers[1].clone()];
        let (m, n, k) = (u64::from(params.m), u64::from(params.n), u64::from(params.k));
        if let Some(q) = &plan.dequantize_a {
            let copy = copy_pass(
                env,
                stream,
                &originals,
                kernels.dequantize_a.as_ref(),
                "MUL_MAT f16 a",
                q.scratch_bytes,
                &operand_params(a, b, bound, 0, q.grid[0], plan, &plain)?,
                q.grid,
            )?;
            let a_ne2 = a.layout().ne[2] as u64;
            params.a_start = 0;
            params.a_nb1 = word(k * 2)?;
            params.a_nb2 = word(m * k * 2)?;
            params.a_nb3 = word(a_ne2 * m * k * 2)?;
            buffers[0] = copy.clone();
            if plan.a_vec4 {
                buffers[3] = copy;
            }
        }
        if let Some(q) = &plan.convert_b {
            let copy = copy_pass(
                env,
                stream,
                &originals,
                kernels.convert_b.as_ref(),
                "MUL_MAT f16 b",
                q.scratch_bytes,
                &operand_params(a, b, bound, 0, q.grid[0], plan, &plain)?,
                q.grid,
            )?;
            let b_ne2 = b.layout().ne[2] as u64;
            params.b_start = 0;
            params.b_nb0 = 2;
            params.b_nb1 = word(k * 2)?;
            params.b_nb2 = word(n * k * 2)?;
            params.b_nb3 = word(b_ne2 * n * k * 2)?;
            buffers[1] = copy;
        }
    }
    if let Some(q) = &plan.quantize_b {
        // The quantize pass and the kernel share the context's scratch: one submit.
        stream.reserve(if q.twice() { 3 } else { 2 })?;
        // b's 8-bit blocks go to scratch first; the mat-vec reads them in b's place.
        let scratch = env.scratch_buffer("MUL_MAT 8-bit b", q.scratch_bytes)?;
        let quantize = kernels.quantize_b.as_ref().ok_or_else(|| {
            BackendError::InvalidOperands("a plan that quantizes b without the quantize kernel".into())
        })?;
        let scratch = BufferRange {
            buffer: scratch,
            offset: 0,
            size: q.scratch_bytes,
        };
        let mut quantize_buffers = vec![buffers[0].clone(), buffers[1].clone(), scratch.clone()];
        let mut quantize_params = operand_params(a, b, bound, 0, q.grid[0], plan, &plain)?;
        if let Some(n) = norm.filter(|_| q.prologue) {
            n.bind(&mut quantize_buffers, &mut quantize_params);
        }
        stream.dispatch(quantize, &quantize_buffers, &quantize_params, q.grid)?;
        if q.twice() {
            stream.dispatch(quantize, &quantize_buffers, &quantize_params, q.grid)?;
        }
        buffers[1] = scratch;
    }
    stream.dispatch(kernel, &buffers, &params, plan.grid)
}

/// Records one pass that writes an f16 copy of a or b into the context's scratch for `label`
/// (bound as the pass's dst beside a and b); returns the copy's range.
#[allow(clippy::too_many_arguments)]
fn copy_pass(
    env: &Env,
    stream: &mut Stream,
    originals: &[BufferRange; 2],
    kernel: Option<&Arc<Pipeline>>,
    label: &'static str,
    bytes: u64,
    params: &MulMatUniforms,
    grid: [u32; 3],
) -> Result<BufferRange> {
    let kernel = kernel
        .ok_or_else(|| BackendError::InvalidOperands(format!("a plan with a {label} copy but no kernel for it")))?;
    let copy = BufferRange {
        buffer: env.scratch_buffer(label, bytes)?,
        offset: 0,
        size: bytes,
    };
    let buffers = [originals[0].clone(), originals[1].clone(), copy.clone()];
    stream.dispatch(kernel, &buffers, params, grid)?;
    Ok(copy)
}

/// The parameter block of the fast kernels, with dst starting `dst_start` elements (or words)
/// into its binding and grids `grid_x` wide; the fields past the operands' (a fused op's) as
/// `base` has them.
fn operand_params(
    a: &DeviceTensor,
    b: &DeviceTensor,
    bound: &Bindings,
    dst_start: u64,
    grid_x: u32,
    plan: &MulMatPlan,
    base: &MulMatUniforms,
) -> Result<MulMatUniforms> {
    let (la, lb) = (a.layout(), b.layout());
    let w = |v: usize| word(v as u64);
    Ok(MulMatUniforms {
        a_start: word(bound.a.start_byte)?,
        b_start: word(bound.b.start_byte)?,
        dst_start: word(dst_start)?,
        m: w(la.ne[1])?,
        n: w(lb.ne[1])?,
        k: w(la.ne[0])?,
        a_nb1: w(la.nb[1])?,
        a_nb2: w(la.nb[2])?,
        a_nb3: w(la.nb[3])?,
        b_nb0: w(lb.nb[0])?,
        b_nb1: w(lb.nb[1])?,
        b_nb2: w(lb.nb[2])?,
        b_nb3: w(lb.nb[3])?,
        r2: w(lb.ne[2] / la.ne[2])?,
        r3: w(lb.ne[3] / la.ne[3])?,
        b_ne2: w(lb.ne[2])?,
        batches: plan.batches,
        tiles_m: plan.tiles_m,
        tiles_n: plan.tiles_n,
        grid_x,
        ..*base
    })
}

/// The simple kernel: one thread per output element.
fn simple(
    env: &Env,
    stream: &mut Stream,
    a: &DeviceTensor,
    b: &DeviceTensor,
    dst: &DeviceTensor,
    bound: &Bindings,
    plan: &MulMatPlan,
) -> Result<()> {
    let (la, lb) = (&a.layout(), &b.layout());
    let kernels = plan_kernels(env, plan)?;
    let outputs = dst.layout().elements();
    u32::try_from(outputs).map_err(|_| BackendError::Unsupported("more than 2^32 outputs".into()))?;
    let w = |v: usize| word(v as u64);
    let params = MulMatSimpleUniforms {
        a_start: word(bound.a.start_byte)?,
        b_start: word(bound.b.start_byte)?,
        dst_start: word(bound.dst.start_byte / 4)?,
        m: w(la.ne[1])?,
        n: w(lb.ne[1])?,
        k: w(la.ne[0])?,
        a_nb1: w(la.nb[1])?,
        a_nb2: w(la.nb[2])?,
        a_nb3: w(la.nb[3])?,
        b_nb0: w(lb.nb[0])?,
        b_nb1: w(lb.nb[1])?,
        b_nb2: w(lb.nb[2])?,
        b_nb3: w(lb.nb[3])?,
        a_ne2: w(la.ne[2])?,
        a_ne3: w(la.ne[3])?,
        b_ne2: w(lb.ne[2])?,
        b_ne3: w(lb.ne[3])?,
        row_stride: plan.grid[0]
            .checked_mul(SIMPLE_WG)
            .ok_or_else(|| BackendError::Unsupported("MUL_MAT: a grid row of more than 2^32 threads".into()))?,
    };
    let buffers = [
        BufferRange::new(a.buffer(), bound.a),
        BufferRange::new(b.buffer(), bound.b),
        BufferRange::new(dst.buffer(), bound.dst),
    ];
    stream.dispatch(&kernels.kernel, &buffers, &params, plan.grid)
}
