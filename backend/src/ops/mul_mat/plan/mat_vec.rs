//! The mat-vec kernels (`mul_mat_vec.wgsl`): `groups` groups of `rows` rows × all `cols`
//! columns of b per workgroup, reading a once; for the formats that have it and few columns,
//! the integer form, which multiplies b quantized to 8-bit blocks first by packed 4x8-bit dot
//! products (`mul_mat_vec_q8.wgsl`, and `mul_mat_vec_kq.wgsl` for the K-quants' slots).

use std::fmt;

use super::{BPrologue, DeviceFacts, DstEpilogue, MulMatTuning, Placed, Problem};
use crate::ggml_type::GgmlType;

/// The mat-vec's shape and form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatVecPlan {
    pub wg_size: u32,
    pub rows: u32,
    pub groups: u32,
    pub cols: u32,
    pub subgroups: bool,
    /// Workgroup size over the smallest subgroup size (the reduction buffer's length).
    pub max_subgroups: u32,
    /// The float kernel reads a quantized a in 64-element units of whole words
    /// ([`MulMatTuning::vec_words`]), not 8-element ones.
    pub whole_words: bool,
    /// The integer kernel: b quantized first (`mul_mat_quantize_b.wgsl`) into
    /// [`int_scratch_bytes`] of scratch.
    pub int_dot: bool,
    /// With `int_dot`, K-quants in 16-element slots ([`MulMatTuning::vec_int_slots_min_n`]).
    pub int_slots: bool,
    /// With `int_dot`, the next unit's loads issued before the current one's arithmetic
    /// ([`MulMatTuning::vec_int_prefetch`]).
    pub prefetch: bool,
    /// With `int_dot`, the 4-bit formats' levels looked up in a workgroup table
    /// ([`MulMatTuning::vec_int_lut`]).
    pub level_table: bool,
    /// With `int_dot` (32-element blocks), each workgroup quantizes its columns of b into
    /// workgroup memory itself ([`MulMatTuning::vec_int_b_wg_max_k`]): no quantize pass.
    pub int_b_in_workgroup: bool,
    /// The blocks of 32 a column its workgroup array holds (`k / 32` rounded up to a power of
    /// two: a kernel serves every k up to it); 0 without `int_b_in_workgroup`.
    pub b_wg_blocks: u32,
    /// The kernel applies its problem's [`DstEpilogue`] to the rows it stored
    /// ([`MulMatTuning::vec_rope_set_rows`]; a workgroup's rows an even number, m even, one
    /// batch).
    pub epilogue: bool,
    /// `MulMatTuning::vec_int_probe` (0 but when measuring).
    #[cfg(feature = "probes")]
    pub probe: u32,
}

impl MatVecPlan {
    /// The probe the kernel runs (0: none; always 0 without the `probes` feature).
    pub fn probe(&self) -> u32 {
        #[cfg(feature = "probes")]
        return self.probe;
        #[cfg(not(feature = "probes"))]
        0
    }

    pub(super) fn describe(&self, f: &mut fmt::Formatter<'_>, p: &Problem) -> fmt::Result {
        let MatVecPlan {
            wg_size,
            rows,
            groups,
            cols,
            subgroups,
            ..
        } = self;
        write!(
            f,
            "mat-vec{}: {groups}x{rows} rows x {cols} columns per workgroup of {wg_size}, {} reduction{}{}{}{}{}{}",
            if self.int_slots {
                " (8-bit b, integer dot products, 16-element slots)"
            } else if self.int_dot {
                " (8-bit b, integer dot products)"
            } else if !p.a_type.is_quantized() {
                " (float pairs)"
            } else if !self.whole_words {
                " (8-element units)"
            } else {
                ""
            },
            if *subgroups { "subgroup" } else { "workgroup-memory" },
            if self.prefetch { ", next unit prefetched" } else { "" },
            if self.level_table {
                ", 4-bit levels from a workgroup table"
            } else {
                ""
            },
            if self.int_b_in_workgroup {
                ", b quantized by each workgroup"
            } else {
                ""
            },
            match (self.int_b_in_workgroup, p.b_prologue) {
                (true, BPrologue::Swiglu) => " after its SWIGLU (silu(gate) x up)",
                (true, BPrologue::RmsNorm { residual: false, .. }) => " after its RMS_NORM x weight",
                (true, BPrologue::RmsNorm { residual: true, .. }) => " after the residual ADD and RMS_NORM x weight",
                (_, _) => "",
            },
            match (self.epilogue, p.dst_epilogue) {
                (true, DstEpilogue::RopeSetRows { .. }) => ", then ROPE and the KV-cache write of its rows",
                _ => "",
            },
            match (self.probe(), self.int_dot) {
                (0, _) => "",
                (1, _) => " (probe: loads only, results wrong)",
                (_, true) => " (probe: b quantized twice)",
                (_, false) => " (probe: arithmetic without a's loads, results wrong)",
            }
        )
    }
}

/// Formats the integer mat-vec reads whatever the knobs (`mul_mat_vec_q8.wgsl`; iq4_nl, iq4_xs,
/// mxfp4 and nvfp4 too with [`MulMatTuning::vec_int_iq4nl`], [`MulMatTuning::vec_int_iq4xs`]
/// and [`MulMatTuning::vec_int_fp4`]).
pub fn has_int_dot(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(ty, Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q2_K | Q3_K | Q4_K | Q5_K | Q6_K)
}

/// The largest k whose b a workgroup of the integer mat-vec quantizes itself (its workgroup
/// array holds `k / 32` blocks of 48 bytes per column).
pub const INT_B_WG_MAX_K: u64 = 4096;

/// Columns at most whose b a workgroup quantizes itself.
pub const INT_B_WG_MAX_COLS: u32 = 2;

/// Bytes of b's 8-bit blocks for the integer mat-vec: 48 per 32 elements (the slot kernel's
/// interleaved layout takes 36 of them).
pub fn int_scratch_bytes(p: &Problem) -> u64 {
    p.batches * p.n * (p.k / 32) * 48
}

/// Whether the float mat-vec can read a's rows as 16-byte words: float rows at 16-byte offsets
/// (a row's last k % 8 halves, or k % 4 floats, are read one by one).
pub fn float_rows_vec4(p: &Problem) -> bool {
    matches!(p.a_type, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) && p.a_align >= 16
}

/// Whether the integer mat-vec can read a's blocks as 16-byte words, with rows at 16-byte
/// offsets: q4_K or q5_K (144- and 176-byte blocks, whole words), q4_0 or q8_0 in pairs of
/// 4-block units (144 and 272 bytes) where a row holds a pair at least, q6_K where rows are
/// whole words (k a multiple of 2048: 8 blocks of 210 bytes; its blocks are realigned in
/// registers).
pub fn int_a_vec4(p: &Problem) -> bool {
    let formats = match p.a_type {
        GgmlType::Q4_K | GgmlType::Q5_K => true,
        GgmlType::Q4_0 | GgmlType::Q8_0 => p.k >= 256,
        GgmlType::Q6_K => p.k.is_multiple_of(2048),
        _ => false,
    };
    formats && p.a_align >= 16
}

/// Bytes of a (one batch of it: the matrix the kernel streams).
fn a_bytes(p: &Problem) -> u64 {
    p.a_type
        .row_bytes(p.k as usize)
        .map_or(u64::MAX, |row| row as u64 * p.m)
}

/// The mat-vec for `p`.
pub(super) fn plan(p: &Problem, d: &DeviceFacts, t: &MulMatTuning) -> Placed<MatVecPlan> {
    let cols = p.n.max(1) as u32;
    let super_blocks = p.a_type.block_size() >= 256;
    let iq4nl = p.a_type == GgmlType::IQ4_NL && t.vec_int_iq4nl;
    let iq4xs = p.a_type == GgmlType::IQ4_XS && t.vec_int_iq4xs;
    let fp4 = matches!(p.a_type, GgmlType::MXFP4 | GgmlType::NVFP4) && t.vec_int_fp4;
    // mxfp4's 17-byte blocks are read at any byte, so its rows need no alignment.
    let mxfp4 = fp4 && p.a_type == GgmlType::MXFP4;
    // Formats whose nibbles index 16 levels (their bytes mapped to the levels, then as the rest).
    let four_bit_levels = iq4nl || iq4xs || fp4;
    let int_dot = (has_int_dot(p.a_type) || four_bit_levels)
        && p.n <= u64::from(t.vec_int_max_n)
        && a_bytes(p) >= u64::from(t.vec_int_min_a_kib) * 1024
        && (p.a_align >= 2 || mxfp4)
        && p.k > 0
        && p.k.is_multiple_of(32)
        && int_scratch_bytes(p) <= d.max_storage_binding;
    // The slot kernel reads the K-quants only (iq4_xs's units are whole sub-blocks).
    let k_quants = has_int_dot(p.a_type) && super_blocks;
    let int_slots = int_dot && k_quants && p.n >= u64::from(t.vec_int_slots_min_n) && p.k.is_multiple_of(128);
    let signed_k = matches!(p.a_type, GgmlType::Q3_K | GgmlType::Q6_K);
    let q8_0_n1 = int_dot && p.a_type == GgmlType::Q8_0 && cols == 1 && t.vec_int_q8_0_n1;
    let rows = match (cols <= 4, super_blocks) {
        _ if int_slots && signed_k && cols >= 8 => t.vec_int_slot_rows_q36,
        _ if int_slots && cols >= 4 => t.vec_int_slot_rows.1,
        _ if int_slots => t.vec_int_slot_rows.0,
        _ if int_dot && super_blocks => t.vec_int_rows.1,
        _ if q8_0_n1 => 1,
        _ if int_dot => t.vec_int_rows.0,
        (true, false) => t.vec_rows.0,
        (false, false) => t.vec_rows.1,
        (true, true) => t.vec_rows_k.0,
        (false, true) => t.vec_rows_k.1,
    };
    let wg_size = t.vec_wg.min(d.max_invocations).min(d.max_workgroup_size_x);
    // A power of two (the workgroup-memory tree halves it).
    let wg_size: u32 = 1 << (31 - wg_size.max(1).leading_zeros());
    let subgroups = d.subgroups && d.subgroup_min_size > 0;
    // A group must hold whole subgroups (each subgroup's sums belong to one group's rows).
    let min_group = if subgroups { d.subgroup_max_size.max(1) } else { 1 };
    let mut groups = match (int_dot, cols <= 4) {
        (true, _) if int_slots && signed_k && cols >= 8 => t.vec_int_slot_groups.1,
        (true, _) if int_slots => t.vec_int_slot_groups.0,
        (true, _) if p.a_type == GgmlType::Q6_K => t.vec_int_groups_q6k,
        (true, _) if super_blocks => t.vec_int_groups.1,
        (true, _) if q8_0_n1 => 2,
        (true, _) => t.vec_int_groups.0,
        (false, true) => t.vec_groups.0,
        (false, false) => t.vec_groups.1,
    };
    let mut rows = rows;
    if !p.a_type.is_quantized() {
        // Halves read 8 a lane per row as 16-byte words hold more registers.
        let halves_vec4 = matches!(p.a_type, GgmlType::F16 | GgmlType::BF16) && t.vec_float_vec4 && float_rows_vec4(p);
        let acc_max = if halves_vec4 { t.vec_acc_max.1 } else { t.vec_acc_max.0 };
        while rows > 1 && rows * cols > acc_max {
            rows = rows.div_ceil(2);
            groups = groups.saturating_mul(2);
        }
    }
    while groups > 1 && wg_size / groups < min_group {
        groups /= 2;
    }
    let max_subgroups = if subgroups {
        wg_size.div_ceil(d.subgroup_min_size)
    } else {
        0
    };
    // One sum per subgroup and per row and column of its group. (A group's outputs may
    // outnumber its threads: the kernel's final sums loop over them.)
    let bytes = if subgroups {
        4 * max_subgroups * rows * cols
    } else {
        4 * wg_size
    };
    // The integer kernel's table of the 4-bit formats' levels, two a byte of codes (256 words).
    let level_table = int_dot && four_bit_levels && t.vec_int_lut;
    let bytes = if level_table { bytes + 1024 } else { bytes };
    // b's 8-bit blocks in workgroup memory, `k / 32` rounded up to a power of two a column,
    // where they fit beside the rest; not while probing (a probe times the quantize pass).
    #[cfg(feature = "probes")]
    let probe_free = t.vec_int_probe == 0;
    #[cfg(not(feature = "probes"))]
    let probe_free = true;
    let b_wg_blocks = (p.k / 32).max(1).next_power_of_two().min(INT_B_WG_MAX_K / 32) as u32;
    // An RMS_NORM before the quantization reduces each column's squares in workgroup memory.
    let norm_bytes = if matches!(p.b_prologue, BPrologue::RmsNorm { .. }) {
        4 * (wg_size + cols)
    } else {
        0
    };
    let b_wg_bytes = b_wg_blocks * 48 * cols + norm_bytes;
    // The values the grid quantizes in all when each workgroup along m repeats it.
    let repeated = p.m.div_ceil(u64::from(rows * groups)).saturating_mul(p.k);
    let int_b_in_workgroup = probe_free
        && int_dot
        && !int_slots
        && cols <= INT_B_WG_MAX_COLS
        && p.k <= u64::from(t.vec_int_b_wg_max_k).min(INT_B_WG_MAX_K)
        && t.vec_int_b_wg_max_values.is_none_or(|max| repeated <= u64::from(max))
        && match p.b_prologue {
            BPrologue::None => true,
            // The ops' own kernels keep f16 results in f16: only an f32 b is theirs to the bit.
            _ if p.b_type != GgmlType::F32 => false,
            BPrologue::Swiglu => t.vec_int_b_swiglu,
            // RMS_NORM's reduction repeated: its group inside the workgroup, its subgroup
            // operations where the mat-vec has them.
            BPrologue::RmsNorm { reduce, .. } => {
                t.vec_int_b_rms_norm && reduce.group <= wg_size && (!reduce.subgroups || subgroups)
            }
        }
        && bytes + b_wg_bytes <= d.max_workgroup_storage;
    let (bytes, b_wg_blocks) = if int_b_in_workgroup {
        (bytes + b_wg_bytes, b_wg_blocks)
    } else {
        (bytes, 0)
    };
    let tiles_m = (p.m.div_ceil(u64::from(rows * groups))) as u32;
    // The epilogue pairs rows 2i and 2i + 1 within a workgroup's rows.
    let epilogue = match p.dst_epilogue {
        DstEpilogue::None => false,
        DstEpilogue::RopeSetRows { .. } => {
            t.vec_rope_set_rows && (rows * groups).is_multiple_of(2) && p.m.is_multiple_of(2) && p.batches == 1
        }
    };
    let plan = MatVecPlan {
        wg_size,
        rows,
        groups,
        cols,
        subgroups,
        max_subgroups,
        whole_words: !int_dot && t.vec_words.contains(p.a_type),
        int_dot,
        int_slots,
        prefetch: int_dot && t.vec_int_prefetch.contains(p.a_type, p.n),
        level_table,
        int_b_in_workgroup,
        b_wg_blocks,
        epilogue,
        #[cfg(feature = "probes")]
        probe: if int_dot || !p.a_type.is_quantized() {
            t.vec_int_probe
        } else {
            0
        },
    };
    (plan, tiles_m, 1, bytes)
}
