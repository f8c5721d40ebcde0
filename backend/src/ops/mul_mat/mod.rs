//! MUL_MAT as ggml defines it: `dst[m, n, i2, i3] = Σ_k a[k, m, i2/r2, i3/r3] · b[k, n, i2, i3]`,
//! with src0 (`a`) of any supported type broadcast over dims 2 and 3, src1 (`b`) f32 or f16
//! (any strides), and a contiguous f32 `dst`.
//!
//! [`plan`] decides everything from the shapes, the device ([`DeviceFacts`]) and the knobs
//! ([`MulMatTuning`], the device's profile with the context's overrides): the kernel (mat-vec for a few columns, subgroup matrices
//! or register tiles for the rest, the simple kernel for what those cannot address), its tiles,
//! vector widths, stores and the quantize pass; [`encode`] binds and dispatches exactly that.

pub mod encode;
pub mod plan;
#[cfg(test)]
mod plan_grid;
pub(crate) mod tuning;

use crate::error::{BackendError, Result};
use crate::exec::BufferRange;
use crate::exec::Stream;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::Env;
use crate::ops::dequantize;
use crate::ops::glu::{self, GluOp, GluParams, GluPlan};
use crate::ops::norm;
use crate::params::MulMatUniforms;
use crate::reference::{RopeMode, RopeParams};
use crate::tensor::Layout;

pub use plan::{
    BPrologue, Choice, DeviceFacts, DstEpilogue, F16Copy, INT_B_WG_MAX_K, MatVecPlan, MatrixConfig, MulMatPlan,
    NormReduce, Problem, QuantizeB, SubgroupMatrixPlan, TiledPlan,
};
pub use tuning::{BVec4, MulMatTuning};

/// dst's extents for `a × b`: `[a.ne1, b.ne1, b.ne2, b.ne3]`.
pub fn dst_ne(a: &Layout, b: &Layout) -> [usize; 4] {
    [a.ne[1], b.ne[1], b.ne[2], b.ne[3]]
}

/// Why `a × b` cannot run here, if it cannot (from the layouts alone).
pub fn check(la: &Layout, lb: &Layout, ld: &Layout) -> Result<()> {
    if !dequantize::supports(la.ty) {
        return Err(BackendError::Unsupported(format!(
            "MUL_MAT with src0 of type {}",
            la.ty
        )));
    }
    if !matches!(lb.ty, GgmlType::F32 | GgmlType::F16) {
        return Err(BackendError::Unsupported(format!(
            "MUL_MAT with src1 of type {}",
            lb.ty
        )));
    }
    if la.ne[0] != lb.ne[0] {
        return Err(BackendError::InvalidOperands(format!(
            "MUL_MAT: src0 has k={}, src1 k={}",
            la.ne[0], lb.ne[0]
        )));
    }
    if la.ne[2] == 0 || la.ne[3] == 0 || !lb.ne[2].is_multiple_of(la.ne[2]) || !lb.ne[3].is_multiple_of(la.ne[3]) {
        return Err(BackendError::InvalidOperands(format!(
            "MUL_MAT: src1 batch {:?} is not a multiple of src0 batch {:?}",
            &lb.ne[2..],
            &la.ne[2..]
        )));
    }
    if !la.has_contiguous_rows() {
        return Err(BackendError::Unsupported(
            "MUL_MAT with src0 rows that are not contiguous".into(),
        ));
    }
    let want = dst_ne(la, lb);
    if ld.ty != GgmlType::F32 || !ld.is_contiguous() || ld.ne != want {
        return Err(BackendError::InvalidOperands(format!(
            "MUL_MAT: dst must be contiguous f32 {want:?}, is {ld:?}"
        )));
    }
    Ok(())
}

/// Records `dst = a × b` with the context's tuning; returns the plan it followed.
pub fn mul_mat(
    env: &Env,
    stream: &mut Stream,
    a: &DeviceTensor,
    b: &DeviceTensor,
    dst: &DeviceTensor,
) -> Result<MulMatPlan> {
    // The context checked its knobs when it was made, and its facts are the device's own.
    record(env, stream, a, b, dst, &env.facts(), &env.tuning().mul_mat)
}

/// [`mul_mat`] planned for other device facts or knobs than `env`'s own: a device with fewer
/// capabilities (no subgroups, less workgroup memory, no subgroup matrices) or other tiles.
/// Facts that claim more than the device has are refused ([`DeviceFacts::check_within`]), and
/// the knobs are checked.
pub fn mul_mat_with(
    env: &Env,
    stream: &mut Stream,
    a: &DeviceTensor,
    b: &DeviceTensor,
    dst: &DeviceTensor,
    facts: &DeviceFacts,
    tuning: &MulMatTuning,
) -> Result<MulMatPlan> {
    tuning.validate().map_err(|message| BackendError::Config {
        name: "MUL_MAT tuning",
        message,
    })?;
    facts
        .check_within(&env.facts())
        .map_err(|message| BackendError::Config {
            name: "MUL_MAT device facts",
            message,
        })?;
    record(env, stream, a, b, dst, facts, tuning)
}

/// Checks the operands, plans and records, with knobs and facts already checked.
fn record(
    env: &Env,
    stream: &mut Stream,
    a: &DeviceTensor,
    b: &DeviceTensor,
    dst: &DeviceTensor,
    facts: &DeviceFacts,
    tuning: &MulMatTuning,
) -> Result<MulMatPlan> {
    check(a.layout(), b.layout(), dst.layout())?;
    if dst.layout().elements() == 0 {
        // Nothing to dispatch.
        return Ok(plan::plan(&problem(a.layout(), b.layout(), 0, 0, 0), facts, tuning));
    }
    env.check_operands(&[a, b, dst])?;
    crate::memory::check_output_disjoint("MUL_MAT", dst, &[("a", a), ("b", b)])?;
    env.check_stream(stream)?;
    let bound = encode::Bindings::new(env, a, b, dst)?;
    let problem = problem(
        a.layout(),
        b.layout(),
        bound.a.start_byte,
        bound.b.start_byte,
        bound.dst.size,
    );
    let plan = plan::plan(&problem, facts, tuning);
    encode::encode(env, stream, a, b, dst, &bound, &plan)?;
    Ok(plan)
}

/// What [`GpuContext::mul_mat_swiglu`](crate::GpuContext::mul_mat_swiglu) ran: one kernel
/// that applies the SWIGLU to b as it reads it, or the SWIGLU then MUL_MAT where that kernel
/// does not apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MulMatSwigluPlan {
    Fused(MulMatPlan),
    Separate(GluPlan, MulMatPlan),
}

impl std::fmt::Display for MulMatSwigluPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MulMatSwigluPlan::Fused(p) => write!(f, "{p}"),
            MulMatSwigluPlan::Separate(g, m) => write!(f, "SWIGLU: {g}; then MUL_MAT: {m}"),
        }
    }
}

/// Why `a × swiglu(b)` cannot run here, if it cannot: `b` f32 or f16 `[2k, n, b2, b3]` with
/// contiguous rows, each holding a SWIGLU's gate then its up (ggml's fused form), and `a × c`
/// valid for the SWIGLU's result `c` `[k, n, b2, b3]`. Returns the layout of b's gate halves
/// (`[k, n, b2, b3]`, b's strides), which the fused kernel's problem reads.
pub fn check_swiglu(la: &Layout, lb: &Layout, ld: &Layout) -> Result<Layout> {
    let params = GluParams::new(GluOp::Swiglu);
    let act = Layout::contiguous(lb.ty, glu::dst_ne(lb, false))?;
    glu::check(lb, None, &act, &params)?;
    if !lb.ne[0].is_multiple_of(2) {
        return Err(BackendError::InvalidOperands(format!(
            "SWIGLU: rows of {} elements do not split into gate and up halves",
            lb.ne[0]
        )));
    }
    check(la, &act, ld)?;
    let mut gate = *lb;
    gate.ne[0] /= 2;
    Ok(gate)
}

/// Records `dst = a × swiglu(b)` (see [`check_swiglu`]) as the integer mat-vec where the planner
/// fuses them ([`MulMatPlan::applies_prologue`]: where the mat-vec quantizes b, in its
/// workgroups or in its quantize pass, it applies the SWIGLU to the values it quantizes, the
/// same bytes as the two ops) and returns its plan; `Ok(None)`, with nothing recorded, where it
/// does not.
pub fn mul_mat_swiglu(
    env: &Env,
    stream: &mut Stream,
    a: &DeviceTensor,
    b: &DeviceTensor,
    dst: &DeviceTensor,
) -> Result<Option<MulMatPlan>> {
    let gate = check_swiglu(a.layout(), b.layout(), dst.layout())?;
    env.check_operands(&[a, b, dst])?;
    crate::memory::check_output_disjoint("MUL_MAT", dst, &[("a", a), ("b", b)])?;
    env.check_stream(stream)?;
    if dst.layout().elements() == 0 {
        return Ok(None);
    }
    // b's binding is its whole rows (gate and up): the kernel reads 2k elements a column.
    let bound = encode::Bindings::new(env, a, b, dst)?;
    let mut problem = problem(
        a.layout(),
        &gate,
        bound.a.start_byte,
        bound.b.start_byte,
        bound.dst.size,
    );
    problem.b_prologue = BPrologue::Swiglu;
    let plan = plan::plan(&problem, &env.facts(), &env.tuning().mul_mat);
    if !plan.applies_prologue() {
        return Ok(None);
    }
    encode::encode(env, stream, a, b, dst, &bound, &plan)?;
    Ok(Some(plan))
}

/// What [`GpuContext::rms_norm_mul_mat`](crate::GpuContext::rms_norm_mul_mat) and
/// `add_rms_norm_mul_mat` ran: one kernel that norms b as it reads it, or the RMS_NORM then
/// MUL_MAT where that kernel does not apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NormMulMatPlan {
    Fused(MulMatPlan),
    Separate(norm::NormPlan, MulMatPlan),
}

impl std::fmt::Display for NormMulMatPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NormMulMatPlan::Fused(p) => write!(f, "{p}"),
            NormMulMatPlan::Separate(n, m) => write!(f, "RMS_NORM: {n}; then MUL_MAT: {m}"),
        }
    }
}

/// What [`GpuContext::rms_norm_mul_mat_rope_set_rows_into`](crate::GpuContext::rms_norm_mul_mat_rope_set_rows_into)
/// ran: the mat-vec that norms b, ropes its result and writes the KV cache, or the ops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NormMulMatRopePlan {
    Fused(MulMatPlan),
    /// The norm and projection, then the ROPE and SET_ROWS (boxed: the rarer variant).
    Separate(NormMulMatPlan, Box<crate::ops::rope::RopeSetRowsPlan>),
}

impl std::fmt::Display for NormMulMatRopePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NormMulMatRopePlan::Fused(p) => write!(f, "{p}"),
            NormMulMatRopePlan::Separate(m, r) => write!(f, "{m}; then ROPE: {r}"),
        }
    }
}

/// The residual ADD before a fused RMS_NORM: `sum = x + residual`, f32 of x's extents.
#[derive(Debug, Clone, Copy)]
pub struct Residual<'a> {
    pub residual: &'a DeviceTensor,
    pub sum: &'a DeviceTensor,
}

/// Why `a × (rms_norm(x (+ residual)) · weight)` cannot run, if it cannot: RMS_NORM's rules for
/// `x`, `weight` and `eps` ([`norm::check`], [`norm::check_residual`]) and MUL_MAT's for `a` times
/// the norm's f32 result. Returns that result's layout.
pub fn check_rms_norm(
    la: &Layout,
    lx: &Layout,
    residual: Option<(&Layout, &Layout)>,
    lw: &Layout,
    ld: &Layout,
    eps: f32,
) -> Result<Layout> {
    let normed = Layout::contiguous(GgmlType::F32, lx.ne)?;
    norm::check(lx, Some(lw), None, &normed, eps)?;
    if let Some((r, s)) = residual {
        norm::check_residual(lx, r, s)?;
    }
    check(la, &normed, ld)?;
    Ok(normed)
}

/// Records `dst = a × (rms_norm(x (+ residual)) · weight)` (see [`check_rms_norm`]; with a
/// residual, `sum = x + residual` too) as the integer mat-vec where the planner fuses them
/// ([`MulMatPlan::applies_prologue`]: where the mat-vec quantizes b, each of its workgroups, or
/// its quantize pass, norms the columns of b it quantizes) and returns its plan; `Ok(None)`,
/// with nothing recorded, where it does not (the weight one row of k elements, the norm's
/// operands packed rows of f32 at whole elements, one batch). The kernel sums each column's
/// squares as RMS_NORM's kernel would (its threads a row, units and reduction: [`NormReduce`]),
/// so the result is the two ops' to the bit on the same device.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_mul_mat(
    env: &Env,
    stream: &mut Stream,
    a: &DeviceTensor,
    x: &DeviceTensor,
    residual: Option<Residual<'_>>,
    weight: &DeviceTensor,
    eps: f32,
    dst: &DeviceTensor,
) -> Result<Option<MulMatPlan>> {
    rms_norm_mul_mat_rope_set_rows(env, stream, a, x, residual, weight, eps, dst, None)
}

/// The ROPE and SET_ROWS after a q/k/v projection, for [`rms_norm_mul_mat_rope_set_rows`] to
/// apply to the projection's result `dst` (f32 `[m, n]`) as its mat-vec stores it: rows `[0,
/// heads · head_dim)` of each column are heads of `head_dim` rows roped in place at the
/// column's position `pos[c]` (ROPE in ggml's normal mode, with `freq_factors`); then rows
/// `[kv_start, kv_start + w)`, `w` the cache's row, are stored as row `ids[c]` of `cache`
/// (SET_ROWS). See [`check_rope_set_rows`].
#[derive(Debug, Clone, Copy)]
pub struct RopeSetRows<'a> {
    pub heads: usize,
    pub head_dim: usize,
    pub pos: &'a DeviceTensor,
    pub freq_factors: Option<&'a DeviceTensor>,
    pub params: &'a RopeParams,
    pub kv_start: usize,
    pub cache: &'a DeviceTensor,
    pub ids: &'a DeviceTensor,
}

impl RopeSetRows<'_> {
    /// The layout ROPE sees in `dst` (`[m, n]` f32): the heads `[head_dim, heads, n]`.
    pub fn heads_layout(&self, dst: &Layout) -> Result<Layout> {
        self.window(dst, self.head_dim, self.heads, 0)
    }

    /// The layout SET_ROWS reads from `dst`: the rows `[w, n]` from `kv_start`.
    pub fn rows_layout(&self, dst: &Layout) -> Result<Layout> {
        let w = self.cache.layout().ne[0];
        let mut l = self.window(dst, w, 1, self.kv_start)?;
        l.ne = [w, dst.ne[1], 1, 1];
        l.nb = [4, dst.nb[1], dst.nb[1] * dst.ne[1], dst.nb[1] * dst.ne[1]];
        Ok(l)
    }

    fn window(&self, dst: &Layout, rows: usize, heads: usize, first: usize) -> Result<Layout> {
        let inside = rows
            .checked_mul(heads)
            .and_then(|r| r.checked_add(first))
            .is_some_and(|end| end <= dst.ne[0]);
        if dst.ty != GgmlType::F32 || !dst.is_contiguous() || dst.ne[2] != 1 || dst.ne[3] != 1 || !inside {
            return Err(BackendError::InvalidOperands(format!(
                "ROPE + SET_ROWS: {heads} heads of {rows} rows from row {first} outside the f32 result {:?}",
                dst.ne
            )));
        }
        let col = dst.nb[1];
        Ok(Layout {
            ty: GgmlType::F32,
            ne: [rows, heads, dst.ne[1], 1],
            nb: [4, rows * 4, col, col * dst.ne[1]],
            offset: dst.offset + first * 4,
        })
    }
}

/// Why ROPE and SET_ROWS of `r` cannot follow a MUL_MAT into `dst`, if they cannot: ROPE's
/// rules ([`crate::ops::rope::check`]) for the heads in place, SET_ROWS's
/// ([`crate::ops::rows::check_set_rows`]) for the rows into the cache.
pub fn check_rope_set_rows(dst: &Layout, r: &RopeSetRows<'_>) -> Result<()> {
    let heads = r.heads_layout(dst)?;
    crate::ops::rope::check(
        &heads,
        r.pos.layout(),
        r.freq_factors.map(|f| f.layout()),
        &heads,
        r.params,
    )?;
    crate::ops::rows::check_set_rows(r.cache.layout(), &r.rows_layout(dst)?, r.ids.layout())?;
    Ok(())
}

/// [`rms_norm_mul_mat`] followed by the ROPE and KV-cache write `rope` describes (see
/// [`RopeSetRows`]), all in the mat-vec where the planner fuses them
/// ([`MulMatPlan::applies_epilogue`]: each workgroup ropes the rows it stored, with ROPE's
/// arithmetic, and stores its part of the KV window, as SET_ROWS would): its plan, or `Ok(None)`
/// with nothing recorded where it does not (the caller runs the ops: ROPE's normal mode
/// without an offset, i32 ids, an f32 or f16 cache of packed word-aligned rows, the window
/// starting at an even row).
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_mul_mat_rope_set_rows(
    env: &Env,
    stream: &mut Stream,
    a: &DeviceTensor,
    x: &DeviceTensor,
    residual: Option<Residual<'_>>,
    weight: &DeviceTensor,
    eps: f32,
    dst: &DeviceTensor,
    rope: Option<RopeSetRows<'_>>,
) -> Result<Option<MulMatPlan>> {
    let (lx, lw) = (x.layout(), weight.layout());
    check_rms_norm(
        a.layout(),
        lx,
        residual.map(|r| (r.residual.layout(), r.sum.layout())),
        lw,
        dst.layout(),
        eps,
    )?;
    if let Some(r) = &rope {
        check_rope_set_rows(dst.layout(), r)?;
    }
    let mut all = vec![a, x, weight, dst];
    if let Some(r) = residual {
        all.extend([r.residual, r.sum]);
    }
    if let Some(r) = &rope {
        all.extend([r.pos, r.cache, r.ids]);
        all.extend(r.freq_factors);
    }
    env.check_operands(&all)?;
    env.check_stream(stream)?;
    let mut inputs = vec![("a", a), ("x", x), ("weight", weight)];
    if let Some(r) = residual {
        inputs.push(("residual", r.residual));
    }
    if let Some(r) = &rope {
        inputs.extend([("pos", r.pos), ("ids", r.ids)]);
        inputs.extend(r.freq_factors.map(|f| ("freq_factors", f)));
    }
    crate::memory::check_output_disjoint("MUL_MAT", dst, &inputs)?;
    if let Some(r) = residual {
        inputs.push(("dst", dst));
        crate::memory::check_output_disjoint("RMS_NORM", r.sum, &inputs)?;
    }
    if let Some(r) = &rope {
        inputs.push(("dst", dst));
        if let Some(res) = residual {
            inputs.push(("sum", res.sum));
        }
        crate::memory::check_output_disjoint("SET_ROWS", r.cache, &inputs)?;
    }
    let k = lx.ne[0];
    let packed = |l: &Layout| l.nb[0] == 4 && l.nb[1].is_multiple_of(4) && l.ne[2] == 1 && l.ne[3] == 1;
    let fusable = dst.layout().elements() > 0
        && lw.ne == [k, 1, 1, 1]
        && packed(lw)
        && lx.ne[2] == 1
        && lx.ne[3] == 1
        && residual.is_none_or(|r| packed(r.residual.layout()) && packed(r.sum.layout()));
    if !fusable {
        return Ok(None);
    }
    let bound = encode::Bindings::new(env, a, x, dst)?;
    let limits = env.limits();
    let (align, max) = (
        u64::from(limits.min_storage_buffer_offset_alignment),
        limits.max_storage_buffer_binding_size,
    );
    let w = weight.binding(align, max)?;
    let r = residual
        .map(|r| Ok::<_, BackendError>((r.residual.binding(align, max)?, r.sum.binding(align, max)?)))
        .transpose()?;
    // Element indices into the norm's bindings: their starts must be whole elements.
    if w.start_byte % 4 != 0 || r.is_some_and(|(r, s)| r.start_byte % 4 != 0 || s.start_byte % 4 != 0) {
        return Ok(None);
    }
    let rows = norm::plan_into_new(env, x, residual.map(|r| (r.residual, r.sum)), Some(weight))?;
    let mut problem = problem(a.layout(), lx, bound.a.start_byte, bound.b.start_byte, bound.dst.size);
    problem.b_prologue = BPrologue::RmsNorm {
        residual: residual.is_some(),
        reduce: NormReduce {
            group: rows.group,
            vec4: rows.vec4,
            subgroups: rows.subgroups,
        },
    };
    let epilogue = match &rope {
        Some(r) => match rope_kv_binding(env, r, dst)? {
            Some(binding) => Some(binding),
            None => return Ok(None),
        },
        None => None,
    };
    if let Some(r) = &rope {
        problem.dst_epilogue = DstEpilogue::RopeSetRows {
            freq_factors: r.freq_factors.is_some(),
            cache_f16: r.cache.layout().ty == GgmlType::F16,
        };
    }
    let plan = plan::plan(&problem, &env.facts(), &env.tuning().mul_mat);
    if !plan.applies_prologue() || rope.is_some() != plan.applies_epilogue() {
        return Ok(None);
    }
    let word = |v: u64| crate::ops::arith::word("MUL_MAT", v);
    let norm = encode::NormBinding {
        weight: BufferRange::new(weight.buffer(), w),
        residual: match (residual, r) {
            (Some(t), Some((rb, sb))) => Some((
                BufferRange::new(t.residual.buffer(), rb),
                BufferRange::new(t.sum.buffer(), sb),
            )),
            _ => None,
        },
        eps,
        w_start: word(w.start_byte / 4)?,
        r_start: word(r.map_or(0, |(r, _)| r.start_byte / 4))?,
        r_nb1: word(residual.map_or(0, |r| r.residual.layout().nb[1] as u64 / 4))?,
        sum_start: word(r.map_or(0, |(_, s)| s.start_byte / 4))?,
        sum_nb1: word(residual.map_or(0, |r| r.sum.layout().nb[1] as u64 / 4))?,
    };
    encode::encode_with(env, stream, a, x, dst, &bound, &plan, Some(&norm), epilogue.as_ref())?;
    Ok(Some(plan))
}

/// The epilogue's bindings and parameters for `r` after a MUL_MAT into `dst` (checked by
/// [`check_rope_set_rows`]), or `None` where the fused kernel does not take them.
fn rope_kv_binding(env: &Env, r: &RopeSetRows<'_>, dst: &DeviceTensor) -> Result<Option<encode::RopeKvBinding>> {
    let (p, lc, li) = (r.params, r.cache.layout(), r.ids.layout());
    let width = lc.ne[0];
    let fusable = p.mode == RopeMode::Normal
        && p.n_offs == 0
        && r.head_dim.is_multiple_of(2)
        && r.kv_start.is_multiple_of(2)
        && width.is_multiple_of(2)
        && matches!(lc.ty, GgmlType::F32 | GgmlType::F16)
        && lc.ne[2] == 1
        && lc.ne[3] == 1
        && lc.nb[1].is_multiple_of(4)
        && li.ty == GgmlType::I32
        && li.nb[0] == 4
        && dst.layout().ne[1] <= li.ne[0];
    if !fusable {
        return Ok(None);
    }
    let limits = env.limits();
    let (align, max) = (
        u64::from(limits.min_storage_buffer_offset_alignment),
        limits.max_storage_buffer_binding_size,
    );
    let (pb, ib, cb) = (
        r.pos.binding(align, max)?,
        r.ids.binding(align, max)?,
        r.cache.binding(align, max)?,
    );
    let fb = r.freq_factors.map(|f| f.binding(align, max)).transpose()?;
    // Element (word) indices into each binding: their starts must be whole words.
    if [pb.start_byte, ib.start_byte, cb.start_byte].iter().any(|b| b % 4 != 0)
        || fb.is_some_and(|f| f.start_byte % 4 != 0)
    {
        return Ok(None);
    }
    let word = |v: u64| crate::ops::arith::word("MUL_MAT", v);
    let angles = crate::reference::rope::rope_angles(p);
    let params = MulMatUniforms {
        rope_rows: word((r.heads * r.head_dim) as u64)?,
        rope_d: word(r.head_dim as u64)?,
        rope_n_dims: word(p.n_dims as u64)?,
        pos_start: word(pb.start_byte / 4)?,
        ff_start: word(fb.map_or(0, |f| f.start_byte / 4))?,
        theta_scale: angles.theta_scale,
        freq_scale: p.freq_scale,
        ext_factor: p.ext_factor,
        attn_factor: p.attn_factor,
        corr0: angles.corr[0],
        corr1: angles.corr[1],
        mscale_ext: angles.mscale_ext,
        kv_start: word(r.kv_start as u64)?,
        kv_end: word((r.kv_start + width) as u64)?,
        ids_start: word(ib.start_byte / 4)?,
        cache_start: word(cb.start_byte / 4)?,
        cache_nb1: word(lc.nb[1] as u64 / 4)?,
        cache_rows: word(lc.ne[1] as u64)?,
        ..MulMatUniforms::default()
    };
    Ok(Some(encode::RopeKvBinding {
        pos: BufferRange::new(r.pos.buffer(), pb),
        freq_factors: r.freq_factors.zip(fb).map(|(f, b)| BufferRange::new(f.buffer(), b)),
        ids: BufferRange::new(r.ids.buffer(), ib),
        cache: BufferRange::new(r.cache.buffer(), cb),
        params,
    }))
}

/// The plan [`mul_mat`] would follow for tensors of these layouts (views placed at their
/// layout's offset from a binding-aligned base, as the context places tensors).
pub fn plan_for(env: &Env, la: &Layout, lb: &Layout, ld: &Layout) -> Result<MulMatPlan> {
    check(la, lb, ld)?;
    let align = u64::from(env.limits().min_storage_buffer_offset_alignment.max(1));
    // Saturating: a view of nearly 2^64 bytes at an unaligned offset must not overflow (it is
    // planned, and refused where it would be bound).
    let dst_bytes = (ld.offset as u64 % align)
        .saturating_add(ld.span_bytes()? as u64)
        .checked_next_multiple_of(4)
        .unwrap_or(u64::MAX)
        .max(4);
    let p = problem(la, lb, la.offset as u64 % align, lb.offset as u64 % align, dst_bytes);
    Ok(plan::plan(&p, &env.facts(), &env.tuning().mul_mat))
}

/// The plan [`mul_mat`] follows for these layouts, in words (`backend-ops -v` prints the plan
/// an op returned; this serves when it did not run).
pub fn describe(env: &Env, a: &Layout, b: &Layout, dst: &Layout) -> String {
    match plan_for(env, a, b, dst) {
        Ok(plan) => format!("MUL_MAT {}x{}: {plan}", a.ty, b.ty),
        Err(e) => format!("MUL_MAT not run: {e}"),
    }
}

/// The planner's view of one MUL_MAT whose operands start `a_start` and `b_start` bytes into
/// their bindings, dst's binding being `dst_bytes` long.
pub fn problem(la: &Layout, lb: &Layout, a_start: u64, b_start: u64, dst_bytes: u64) -> Problem {
    let align = |start: u64, strides: &[usize]| {
        let all = strides.iter().fold(start, |acc, &s| acc | s as u64);
        if all % 16 == 0 {
            16
        } else if all % 4 == 0 {
            4
        } else if all % 2 == 0 {
            2
        } else {
            1
        }
    };
    let contiguous_b = lb.nb[0] == lb.ty.type_size();
    Problem {
        a_type: la.ty,
        b_type: lb.ty,
        m: la.ne[1] as u64,
        n: lb.ne[1] as u64,
        k: la.ne[0] as u64,
        batches: (lb.ne[2] as u64).saturating_mul(lb.ne[3] as u64),
        a_batches: (la.ne[2] as u64).saturating_mul(la.ne[3] as u64),
        a_align: align(a_start, &la.nb[1..]),
        // A contiguous b's element stride is its element size: only the start and the row
        // strides say whether its rows are whole 16-byte words.
        b_align: align(b_start, if contiguous_b { &lb.nb[1..] } else { &lb.nb }),
        b_contiguous: contiguous_b,
        dst_bytes,
        b_prologue: BPrologue::None,
        dst_epilogue: DstEpilogue::None,
    }
}

#[cfg(test)]
mod tests {
    use super::problem;
    use crate::ggml_type::GgmlType;
    use crate::tensor::Layout;

    #[test]
    fn a_contiguous_b_is_aligned_by_its_rows_not_its_element_size() {
        let a = Layout::contiguous(GgmlType::F16, [14336, 4096, 1, 1]).unwrap();
        // f32 rows of 14336 elements at a 16-byte start: whole 16-byte words.
        let b = Layout::contiguous(GgmlType::F32, [14336, 512, 1, 1]).unwrap();
        assert_eq!(problem(&a, &b, 0, 0, 0).b_align, 16);
        assert_eq!(problem(&a, &b, 4, 0, 0).b_align, 16, "a's start says nothing of b");
        assert_eq!(problem(&a, &b, 0, 4, 0).b_align, 4);
        // Rows of 3 f32 elements: 12-byte rows.
        let short = Layout::contiguous(GgmlType::F32, [3, 8, 1, 1]).unwrap();
        assert_eq!(problem(&a, &short, 0, 0, 0).b_align, 4);
        // Not contiguous: the element stride counts too (a 2-byte step of f16 elements).
        let mut strided = Layout::contiguous(GgmlType::F16, [8, 8, 1, 1]).unwrap();
        strided.nb = [2 * 3, 2 * 3 * 8, 2 * 3 * 64, 2 * 3 * 64];
        let p = problem(&a, &strided, 0, 0, 0);
        assert!(!p.b_contiguous);
        assert_eq!(p.b_align, 2);
    }
}
