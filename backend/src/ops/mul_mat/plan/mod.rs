//! Which MUL_MAT kernel runs, with which tiles: a pure function of the problem (types, shape,
//! alignment), the device ([`DeviceFacts`]) and the tuning ([`MulMatTuning`]), so every choice
//! is testable without a GPU.
//!
//! Kernels, in order of preference, each with its plan type and planner in its own module:
//! 1. [`Choice::MatVec`] for `n <= vec_max_n`: memory-bound matrix × few vectors (`mat_vec.rs`).
//! 2. [`Choice::SubgroupMatrix`] where the adapter has an f16 subgroup-matrix config: tiles from
//!    the config, the subgroup size and the workgroup-memory limit; a narrow tile for small `n`
//!    (`subgroup_matrix.rs`).
//! 3. [`Choice::Tiled`]: register tiles in f32, for every device (`tiled.rs`).
//! 4. [`Choice::Simple`]: one thread per output, for what the others cannot address (sizes past
//!    32-bit indexing; `simple.rs`). Views at any byte offset and with any strides take the fast
//!    kernels.
//!
//! The passes some kernels run first (b quantized to 8 bits, f16 copies of a and b) are in
//! `passes.rs`.

mod mat_vec;
mod passes;
mod simple;
mod subgroup_matrix;
#[cfg(test)]
mod tests;
mod tiled;

use std::fmt;

use crate::exec::grid_2d;
use crate::ggml_type::GgmlType;

pub use super::tuning::{BVec4, MulMatTuning};
pub use crate::facts::{DeviceFacts, MatrixConfig};
pub use mat_vec::{
    INT_B_WG_MAX_COLS, INT_B_WG_MAX_K, MatVecPlan, float_rows_vec4, has_int_dot, int_a_vec4, int_scratch_bytes,
};
pub use passes::{COPY_WG, F16Copy, QUANTIZE_WG, QuantizeB};
pub use simple::SIMPLE_WG;
pub use subgroup_matrix::SubgroupMatrixPlan;
pub use tiled::TiledPlan;

/// One MUL_MAT as the planner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Problem {
    pub a_type: GgmlType,
    /// F32 or F16.
    pub b_type: GgmlType,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// dst matrices (`b.ne2 · b.ne3`).
    pub batches: u64,
    /// a's matrices (`a.ne2 · a.ne3`; b's batches broadcast over them).
    pub a_batches: u64,
    /// The largest of 16, 4, 2, 1 dividing a's start byte (in its binding) and its row strides.
    pub a_align: u32,
    /// Likewise for b (its element stride included).
    pub b_align: u32,
    /// b's elements are adjacent (`nb0` is the element size).
    pub b_contiguous: bool,
    /// Bytes of dst's binding.
    pub dst_bytes: u64,
    /// What the kernel makes of b's values before it multiplies: planned only where the
    /// integer mat-vec quantizes b, in its workgroup or in its quantize pass
    /// ([`MulMatPlan::applies_prologue`]).
    pub b_prologue: BPrologue,
    /// What the kernel does with its result rows after it stores them: planned only where the
    /// mat-vec runs ([`MulMatPlan::applies_epilogue`]).
    pub dst_epilogue: DstEpilogue,
}

/// An op applied to the mat-vec's result rows once its workgroup has stored them: a decoder's
/// steps after its q/k/v projection, in the projection's dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DstEpilogue {
    /// The rows as they are.
    None,
    /// ROPE in place of the heads in the rows' first part (ggml's normal mode: adjacent rows
    /// paired), then the rows of a window stored to a KV cache at each column's id, as SET_ROWS
    /// would (`GpuContext::try_rms_norm_mul_mat_rope_set_rows_into`): with frequency factors,
    /// into an f16 cache (else f32).
    RopeSetRows { freq_factors: bool, cache_f16: bool },
}

/// An op applied to b as the integer mat-vec quantizes it, in its workgroup or in its quantize
/// pass: a decoder's step before a projection, in the projection's dispatches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BPrologue {
    /// b as it is.
    None,
    /// b's rows hold a SWIGLU's gate then its up (`2k` elements each, ggml's fused form), and
    /// the kernel multiplies by `silu(gate) · up` (`GpuContext::mul_mat_swiglu`).
    Swiglu,
    /// The kernel multiplies by `rms_norm(b (+ r)) · w` (`GpuContext::rms_norm_mul_mat`), each
    /// workgroup that quantizes b summing the squares of its columns itself; with `residual`,
    /// `b + r`, which one workgroup a column also stores.
    RmsNorm { residual: bool, reduce: NormReduce },
}

/// How RMS_NORM's own kernel would sum a column's squares (its [`RowPlan`](crate::ops::row_plan::RowPlan)
/// for the column), which the fused kernel repeats so that its scale, and so its result, is
/// the two ops' to the bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NormReduce {
    /// Threads a column (a power of two).
    pub group: u32,
    /// In 16-byte units.
    pub vec4: bool,
    /// Reduced with subgroup operations (else a workgroup-memory tree).
    pub subgroups: bool,
}

/// The kernel chosen, with its own plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// `mul_mat_vec.wgsl` (and its integer forms).
    MatVec(MatVecPlan),
    /// `mul_mat_subgroup_matrix.wgsl`.
    SubgroupMatrix(SubgroupMatrixPlan),
    /// `mul_mat_tiled.wgsl`.
    Tiled(TiledPlan),
    /// `mul_mat_simple.wgsl`, and why.
    Simple(String),
}

impl Choice {
    /// The kernel's name (`vec`, `vec_int`, `subgroup_matrix`, `tiled`, `simple`).
    pub fn name(&self) -> &'static str {
        match self {
            Choice::MatVec(v) if v.int_dot => "vec_int",
            Choice::MatVec(_) => "vec",
            Choice::SubgroupMatrix(_) => "subgroup_matrix",
            Choice::Tiled(_) => "tiled",
            Choice::Simple(_) => "simple",
        }
    }
}

/// The plan of one MUL_MAT: every decision the encoder follows (kernel, tiles, grid, vector
/// widths, stores, the passes first), and the problem it was made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MulMatPlan {
    pub problem: Problem,
    pub choice: Choice,
    /// Workgroups per dst matrix along m and n.
    pub tiles_m: u32,
    pub tiles_n: u32,
    pub batches: u32,
    /// Workgroups dispatched (x, y, 1): `tiles_m · tiles_n · batches` split in 2-D.
    pub grid: [u32; 3],
    /// Bytes of workgroup memory the kernel declares.
    pub workgroup_bytes: u32,
    /// The kernel reads b as 16-byte words ([`b_vec4`], [`MulMatTuning::b_vec4`]).
    pub b_vec4: bool,
    /// The kernel also reads a as 16-byte words ([`a_vec4`], [`float_rows_vec4`],
    /// [`int_a_vec4`]).
    pub a_vec4: bool,
    /// The subgroup-matrix kernel stores whole result matrices straight into dst (its binding
    /// holds at least one), not through the edge scratch.
    pub direct_store: bool,
    /// The integer mat-vec's pass that quantizes b into scratch first.
    pub quantize_b: Option<QuantizeB>,
    /// The subgroup-matrix kernel's pass that converts a quantized a to f16 in scratch first
    /// (`mul_mat_dequantize_a.wgsl`, [`MulMatTuning::sg_a_f16_min_n`]: row r of a's matrix i at
    /// halves `(i·m + r)·k`); the kernel then reads that copy ([`MulMatPlan::kernel_problem`]).
    pub dequantize_a: Option<F16Copy>,
    /// Likewise for an f32 b (`mul_mat_convert_b.wgsl`, [`MulMatTuning::sg_b_f16_min_n`]:
    /// column c of b's matrix i at halves `(i·n + c)·k`).
    pub convert_b: Option<F16Copy>,
}

/// A kernel's plan with its workgroups along m and n and its workgroup memory in bytes.
type Placed<T> = (T, u32, u32, u32);

/// Whether b can be bound as 16-byte words: contiguous, every row 16-byte aligned and a multiple
/// of 16 bytes long (so every read lies inside a whole word of the binding).
pub fn b_vec4(p: &Problem) -> bool {
    let row_bytes = p.k * if p.b_type == GgmlType::F16 { 2 } else { 4 };
    p.b_contiguous && p.b_align >= 16 && row_bytes.is_multiple_of(16)
}

/// Whether a can be read as 16-byte words: float rows in whole 16-byte units at 16-byte offsets.
pub fn a_vec4(p: &Problem) -> bool {
    let elem = match p.a_type {
        GgmlType::F32 => 4,
        GgmlType::F16 | GgmlType::BF16 => 2,
        _ => return false,
    };
    p.a_align >= 16 && (p.k * elem).is_multiple_of(16)
}

impl MulMatPlan {
    /// Whether the plan applies the op on b its problem asks for ([`Problem::b_prologue`]): only
    /// the integer mat-vec does, where it quantizes b in its workgroup
    /// ([`MulMatPlan::prologue_in_workgroup`]) or its quantize pass does
    /// ([`QuantizeB::prologue`]); elsewhere the ops run apart.
    pub fn applies_prologue(&self) -> bool {
        self.prologue_in_workgroup() || self.quantize_b.is_some_and(|q| q.prologue)
    }

    /// Whether the main kernel itself applies the op on b (the integer mat-vec that quantizes b
    /// in its workgroup), and so binds the op's operands.
    pub fn prologue_in_workgroup(&self) -> bool {
        self.problem.b_prologue != BPrologue::None && matches!(&self.choice, Choice::MatVec(v) if v.int_b_in_workgroup)
    }

    /// Whether the kernel applies the op on its result its problem asks for
    /// ([`Problem::dst_epilogue`]): only the mat-vec does, where its workgroups' rows pair up
    /// ([`MatVecPlan::epilogue`]); elsewhere the ops run apart.
    pub fn applies_epilogue(&self) -> bool {
        self.problem.dst_epilogue != DstEpilogue::None && matches!(&self.choice, Choice::MatVec(v) if v.epilogue)
    }

    /// The problem the main kernel reads: the plan's own, or with a and b replaced by their f16
    /// copies ([`MulMatPlan::dequantize_a`], [`MulMatPlan::convert_b`]).
    pub fn kernel_problem(&self) -> Problem {
        passes::with_copies(&self.problem, self.dequantize_a.is_some(), self.convert_b.is_some())
    }

    /// The dst tile one workgroup computes (rows along m, columns along n).
    pub fn tile(&self) -> (u32, u32) {
        match &self.choice {
            Choice::MatVec(v) => (v.rows * v.groups, v.cols),
            Choice::Tiled(t) => (t.wg_m * t.thread_m, t.wg_n * t.thread_n),
            Choice::SubgroupMatrix(s) => (s.count_m * s.frag_m * s.config.m, s.count_n * s.frag_n * s.config.n),
            Choice::Simple(_) => (1, 1),
        }
    }
}

impl fmt::Display for MulMatPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tile = self.tile();
        match &self.choice {
            Choice::MatVec(v) => v.describe(f, &self.problem)?,
            Choice::Tiled(t) => t.describe(f, tile)?,
            Choice::SubgroupMatrix(s) => s.describe(f, tile)?,
            Choice::Simple(reason) => return write!(f, "simple (fallback: {reason})"),
        }
        write!(
            f,
            "; {}x{} tiles x {} batches, grid {:?}, {} B workgroup memory",
            self.tiles_m, self.tiles_n, self.batches, self.grid, self.workgroup_bytes
        )?;
        if self.a_vec4 {
            f.write_str("; a as vec4")?;
        }
        if self.b_vec4 {
            f.write_str("; b as vec4")?;
        }
        if self.direct_store {
            f.write_str("; direct stores")?;
        }
        for (operand, copy) in [("a", &self.dequantize_a), ("b", &self.convert_b)] {
            if let Some(q) = copy {
                write!(
                    f,
                    "; {operand} converted to f16 first: {} units into {} B of scratch, grid {:?}",
                    q.units, q.scratch_bytes, q.grid
                )?;
            }
        }
        if let Some(q) = &self.quantize_b {
            write!(
                f,
                "; b quantized first{}: {} blocks into {} B of scratch, grid {:?}{}",
                match (q.prologue, self.problem.b_prologue) {
                    (true, BPrologue::Swiglu) => " after its SWIGLU (silu(gate) x up)",
                    (true, BPrologue::RmsNorm { residual: false, .. }) => {
                        " after its RMS_NORM x weight, a workgroup a column"
                    }
                    (true, BPrologue::RmsNorm { residual: true, .. }) => {
                        " after the residual ADD and RMS_NORM x weight, a workgroup a column"
                    }
                    _ => "",
                },
                q.blocks,
                q.scratch_bytes,
                q.grid,
                if q.twice() { " (twice)" } else { "" }
            )?;
        }
        Ok(())
    }
}

/// Chooses the kernel and tiles for `problem` on `device`.
pub fn plan(problem: &Problem, device: &DeviceFacts, tuning: &MulMatTuning) -> MulMatPlan {
    match fast_path(problem, device, tuning) {
        Ok(plan) => plan,
        Err(reason) => simple::plan(problem, device, reason),
    }
}

fn fast_path(p: &Problem, d: &DeviceFacts, t: &MulMatTuning) -> Result<MulMatPlan, String> {
    // Element indices of dst (and the batch · tile products) must fit 32 bits.
    let outputs = p.m * p.n * p.batches;
    if outputs >= 1 << 32 || p.k >= 1 << 31 {
        return Err(format!("{outputs} outputs or k={} exceed 32-bit indexing", p.k));
    }
    let batches = p.batches as u32;

    // The subgroup-matrix kernel may read f16 copies of a and b made first (by the knobs).
    let (mut dequantize_a, mut convert_b) = (passes::dequantize_a(p, d, t), passes::convert_b(p, d, t));
    let copied = passes::with_copies(p, dequantize_a.is_some(), convert_b.is_some());
    let sg = |p: &Problem| {
        subgroup_matrix::plan(p, d, t).map(|(s, tm, tn, bytes)| (Choice::SubgroupMatrix(s), tm, tn, bytes))
    };
    let (choice, tiles_m, tiles_n, workgroup_bytes) = if p.n <= u64::from(t.vec_max_n) {
        (dequantize_a, convert_b) = (None, None);
        let (v, tm, tn, bytes) = mat_vec::plan(p, d, t);
        (Choice::MatVec(v), tm, tn, bytes)
    } else if let Some(chosen) = (dequantize_a.is_some() || convert_b.is_some())
        .then(|| sg(&copied))
        .flatten()
    {
        chosen
    } else {
        (dequantize_a, convert_b) = (None, None);
        match sg(p) {
            Some(chosen) => chosen,
            None => {
                let (tp, tm, tn, bytes) = tiled::plan(p, d, t)?;
                (Choice::Tiled(tp), tm, tn, bytes)
            }
        }
    };
    let kp = passes::with_copies(p, dequantize_a.is_some(), convert_b.is_some());
    if workgroup_bytes > d.max_workgroup_storage {
        return Err(format!(
            "{workgroup_bytes} B of workgroup memory exceed the limit {}",
            d.max_workgroup_storage
        ));
    }
    let groups = u64::from(tiles_m) * u64::from(tiles_n) * p.batches;
    let max = u64::from(d.max_workgroups_per_dim);
    if groups > max * max || groups >= 1 << 32 {
        return Err(format!("{groups} workgroups exceed a 2-D grid"));
    }
    let (a_vec4, direct_store) = match &choice {
        Choice::SubgroupMatrix(s) => (a_vec4(&kp), p.dst_bytes >= u64::from(s.config.m * s.config.n * 4)),
        Choice::MatVec(v) if !v.int_dot => (t.vec_float_vec4 && float_rows_vec4(p), false),
        Choice::MatVec(v) if !v.int_slots => (t.vec_int_a_vec4.contains(p.a_type) && int_a_vec4(p), false),
        _ => (false, false),
    };
    let quantize_b = match &choice {
        Choice::MatVec(v) if v.int_dot && !v.int_b_in_workgroup => Some(passes::quantize_b(p, d, t, v)),
        _ => None,
    };
    let b_vec4 = b_vec4(&kp)
        && match t.b_vec4 {
            BVec4::Never => false,
            BVec4::Measured => match &choice {
                Choice::SubgroupMatrix(_) => true,
                // The float mat-vec's 16-byte steps read b 16 bytes at a time too.
                Choice::MatVec(v) if !v.int_dot && a_vec4 => true,
                // Measured faster for the lookup-table formats' mat-vec only (the float one was
                // slower; the integer one reads b's 8-bit blocks, not b).
                Choice::MatVec(_) => matches!(
                    p.a_type,
                    GgmlType::IQ2_XXS
                        | GgmlType::IQ2_XS
                        | GgmlType::IQ2_S
                        | GgmlType::IQ3_XXS
                        | GgmlType::IQ3_S
                        | GgmlType::IQ1_S
                        | GgmlType::IQ1_M
                        | GgmlType::IQ4_NL
                        | GgmlType::IQ4_XS
                        | GgmlType::MXFP4
                        | GgmlType::NVFP4
                ),
                Choice::Tiled(_) | Choice::Simple(_) => false,
            },
            BVec4::Always => true,
        };
    Ok(MulMatPlan {
        problem: *p,
        choice,
        tiles_m,
        tiles_n,
        batches,
        grid: grid_2d(groups as u32, d.max_workgroups_per_dim),
        workgroup_bytes,
        b_vec4,
        a_vec4,
        direct_store,
        quantize_b,
        dequantize_a,
        convert_b,
    })
}
