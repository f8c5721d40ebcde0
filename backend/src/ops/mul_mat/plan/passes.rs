//! The passes some kernels run first: b quantized to 8-bit blocks for the integer mat-vec
//! (`mul_mat_quantize_b.wgsl`), and contiguous f16 copies of a and b for the subgroup-matrix
//! kernel (`mul_mat_dequantize_a.wgsl`, `mul_mat_convert_b.wgsl`).

use super::{BPrologue, DeviceFacts, MatVecPlan, MulMatTuning, Problem, int_scratch_bytes};
use crate::exec::grid_2d;
use crate::ggml_type::GgmlType;

/// Threads per workgroup of the pass that quantizes b for the integer mat-vec.
pub const QUANTIZE_WG: u32 = 64;
/// Threads per workgroup of the passes that make f16 copies of a and b for the subgroup-matrix
/// kernel.
pub const COPY_WG: u32 = 256;

/// A pass that writes a contiguous f16 copy of an operand into scratch, one thread per
/// 8-element unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct F16Copy {
    /// Bytes of scratch: the operand's elements · 2.
    pub scratch_bytes: u64,
    /// 8-element units it converts.
    pub units: u32,
    /// Workgroups of [`COPY_WG`] threads.
    pub grid: [u32; 3],
}

/// The pass that quantizes b to 8-bit blocks for the integer mat-vec, which then reads them in
/// b's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantizeB {
    /// Bytes of scratch ([`int_scratch_bytes`]).
    pub scratch_bytes: u64,
    /// Blocks of 32 elements it writes.
    pub blocks: u32,
    /// Workgroups of [`QUANTIZE_WG`] threads, one block each.
    pub grid: [u32; 3],
    /// K-quant super-blocks in the slot kernel's layout.
    pub slots: bool,
    /// The pass quantizes b's values after the op its problem asks for
    /// ([`Problem::b_prologue`](super::Problem::b_prologue)): the mat-vec after it reads them.
    pub prologue: bool,
    /// Threads a workgroup: [`QUANTIZE_WG`], one block each; with an RMS_NORM, the norm's group
    /// ([`NormReduce::group`](super::NormReduce::group)), one workgroup a column.
    pub wg_size: u32,
    /// Recorded twice (`vec_int_probe=2`: measurement only).
    #[cfg(feature = "probes")]
    pub twice: bool,
}

impl QuantizeB {
    /// Whether the pass is recorded twice (a probe; never without the `probes` feature).
    pub fn twice(&self) -> bool {
        #[cfg(feature = "probes")]
        return self.twice;
        #[cfg(not(feature = "probes"))]
        false
    }
}

/// The quantize pass of the integer mat-vec `v`.
pub(super) fn quantize_b(p: &Problem, d: &DeviceFacts, t: &MulMatTuning, v: &MatVecPlan) -> QuantizeB {
    let scratch_bytes = int_scratch_bytes(p);
    // Within one binding (the mat-vec checked), so the block count fits 32 bits.
    let blocks = (scratch_bytes / 48) as u32;
    let prologue = match p.b_prologue {
        BPrologue::None => false,
        // The ops' own kernels keep f16 results in f16: only an f32 b is theirs to the bit.
        _ if p.b_type != GgmlType::F32 => false,
        BPrologue::Swiglu => t.vec_int_pass_swiglu,
        // RMS_NORM's reduction repeated in a workgroup of its group's threads a column: one
        // batch (as the fused op's check has it), its subgroup operations where the device has
        // them.
        BPrologue::RmsNorm { reduce, .. } => {
            t.vec_int_pass_rms_norm
                && p.batches == 1
                && reduce.group <= d.max_threads()
                && (!reduce.subgroups || d.subgroups)
                && 4 * reduce.group <= d.max_workgroup_storage
        }
    };
    let (wg_size, workgroups) = match p.b_prologue {
        BPrologue::RmsNorm { reduce, .. } if prologue => (reduce.group, (p.n * p.batches) as u32),
        _ => (QUANTIZE_WG, blocks.div_ceil(QUANTIZE_WG)),
    };
    QuantizeB {
        scratch_bytes,
        blocks,
        grid: grid_2d(workgroups, d.max_workgroups_per_dim),
        slots: v.int_slots,
        prologue,
        wg_size,
        #[cfg(feature = "probes")]
        twice: v.probe == 2,
    }
}

/// The f16 copy of a quantized a, if [`MulMatTuning::sg_a_f16_min_n`] asks for one at this n.
pub(super) fn dequantize_a(p: &Problem, d: &DeviceFacts, t: &MulMatTuning) -> Option<F16Copy> {
    if !t.sg_a_f16_min_n.reached(p.n) || !p.a_type.is_quantized() {
        return None;
    }
    f16_copy([p.a_batches, p.m, p.k], d)
}

/// The f16 copy of an f32 b, if [`MulMatTuning::sg_b_f16_min_n`] asks for one at this n.
pub(super) fn convert_b(p: &Problem, d: &DeviceFacts, t: &MulMatTuning) -> Option<F16Copy> {
    if !t.sg_b_f16_min_n.reached(p.n) || p.b_type != GgmlType::F32 {
        return None;
    }
    f16_copy([p.batches, p.n, p.k], d)
}

/// The copy of an operand of `matrices · rows · k` elements, if its rows are whole 8-element
/// units and it fits one binding (and 32-bit unit indices).
fn f16_copy([matrices, rows, k]: [u64; 3], d: &DeviceFacts) -> Option<F16Copy> {
    if !k.is_multiple_of(8) {
        return None;
    }
    let scratch_bytes = matrices.checked_mul(rows)?.checked_mul(k)?.checked_mul(2)?;
    if scratch_bytes == 0 || scratch_bytes > d.max_storage_binding || scratch_bytes >= 1 << 32 {
        return None;
    }
    let units = (scratch_bytes / 16) as u32;
    Some(F16Copy {
        scratch_bytes,
        units,
        grid: grid_2d(units.div_ceil(COPY_WG), d.max_workgroups_per_dim),
    })
}

/// `p` with a and (or) b replaced by their contiguous f16 copies at the start of their
/// bindings (k is a multiple of 8 wherever a copy is made, so rows are whole 16-byte words).
pub(super) fn with_copies(p: &Problem, a: bool, b: bool) -> Problem {
    let mut q = *p;
    if a {
        q.a_type = GgmlType::F16;
        q.a_align = 16;
    }
    if b {
        q.b_type = GgmlType::F16;
        q.b_align = 16;
        q.b_contiguous = true;
    }
    q
}
