//! MUL_MAT's knobs, declared once: what each one is and the values it may take. Their values
//! come from the device's profile (`tuning/profiles/mul_mat.rs`, with the measurements behind
//! them), with a context's overrides on top (`name=value,…`; `GGML_DAWN_MUL_MAT` in
//! `backend-ops`).

use crate::tuning::values::{FromN, Pair, TypeNs, TypeSet};

crate::knob_enum! {
    /// Where b is read as 16-byte words when its layout allows ([`super::plan::b_vec4`]).
    pub enum BVec4 {
        /// Nowhere.
        Never = "never",
        /// Where it measured faster: the subgroup-matrix kernel, the float mat-vec's 16-byte
        /// steps, and the mat-vec of the lookup-table formats (IQ*, mxfp4, nvfp4).
        Measured = "measured",
        /// Every kernel but the simple one.
        Always = "always",
    }
}

crate::knobs! {
    /// MUL_MAT's tuning: the planner's choices that measurements settle, per device.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct MulMatTuning {
        /// The mat-vec kernels for n up to this.
        vec_max_n: u32 [range(0, 64)],
        /// Mat-vec workgroup size.
        vec_wg: u32 [range(1, 1024).pow2()],
        /// Mat-vec rows per thread (and per row group) for n <= 4 / n > 4, for floats and
        /// 32-element blocks.
        vec_rows: Pair [range(1, 64)],
        /// The same for 256-element super-blocks (K-quants, i-quants).
        vec_rows_k: Pair [range(1, 64)],
        /// Mat-vec row groups per workgroup for n <= 4 / n > 4: the workgroup's threads split
        /// into groups of `vec_wg / groups`, each with its own rows, so b is read once per
        /// `rows · groups` rows.
        vec_groups: Pair [range(1, 1024).pow2()],
        /// The float mat-vec's accumulators (rows · columns) per thread at most, reading a two
        /// elements at a time / as 16-byte words of halves: above it rows halve and row groups
        /// double (more would spill registers).
        vec_acc_max: Pair [range(1, 4096)],
        /// The float mat-vec reads a as 16-byte words where its rows allow
        /// ([`super::plan::float_rows_vec4`]), b too where its layout allows.
        vec_float_vec4: bool,
        /// Quantized formats the float mat-vec reads in 64-element units of whole words (q4_0,
        /// q8_0, q4_K and q6_K have that kernel); the others in 8-element units.
        vec_words: TypeSet,
        /// The integer mat-vec (b quantized to 8-bit blocks once per call, packed 4x8-bit dot
        /// products) for n up to this, for the formats that have it.
        vec_int_max_n: u32 [range(0, 64)],
        /// ... for an a of at least this many KiB: below it the float mat-vec runs, which reads
        /// b as it is, so a small MUL_MAT is one dispatch instead of a quantize pass and the
        /// kernel (in a model's decode step, where dispatches rather than bytes take the time).
        vec_int_min_a_kib: u32 [range(0, 1 << 22)],
        /// For k up to this (at most [`super::plan::INT_B_WG_MAX_K`]; 0: never) and n <= 2,
        /// the integer mat-vec of 32-element blocks quantizes b itself, each workgroup into its
        /// own workgroup memory, instead of after a quantize pass: one dispatch instead of two,
        /// for the small matrices of a decode step, where dispatches rather than bytes take
        /// the time (every workgroup repeats the quantization: k·n values).
        vec_int_b_wg_max_k: u32 [range(0, 4096)],
        /// ... and only where the grid quantizes at most this many values in all (the
        /// workgroups along m times k: each repeats the quantization), so a tall matrix keeps
        /// its pass (`auto`: no bound).
        vec_int_b_wg_max_values: Option<u32> [range(1, u32::MAX)],
        /// Where the integer mat-vec quantizes b itself (`vec_int_b_wg_max_k`), it also applies
        /// the SWIGLU before it (`GpuContext::mul_mat_swiglu`: b's rows hold gate then up, the
        /// kernel reads silu(gate)·up): one dispatch for a feed-forward's activation and down
        /// projection, with the same bytes as the two ops.
        vec_int_b_swiglu: bool,
        /// ... and the RMS_NORM times its weight before it, with the residual ADD before that
        /// where there is one (`GpuContext::rms_norm_mul_mat`): one dispatch for a decoder's
        /// norm and the projection after it (each workgroup sums its columns' squares itself).
        vec_int_b_rms_norm: bool,
        /// Where the integer mat-vec reads b from its quantize pass instead (k past
        /// `vec_int_b_wg_max_k`, n > 2, the K-quants' slots), that pass applies the SWIGLU
        /// before it: two dispatches for the activation and the down projection instead of three.
        vec_int_pass_swiglu: bool,
        /// ... and the RMS_NORM (with the residual ADD) before it, a workgroup a column summing
        /// its squares as RMS_NORM's kernel would.
        vec_int_pass_rms_norm: bool,
        /// The mat-vec ropes its result rows and stores the KV window to the cache itself
        /// (`GpuContext::try_rms_norm_mul_mat_rope_set_rows_into`): a q/k/v projection, its
        /// rotary embedding and its KV-cache write in one dispatch instead of two or three.
        vec_rope_set_rows: bool,
        /// Its rows per row group, for 32-element blocks / super-blocks.
        vec_int_rows: Pair [range(1, 64)],
        /// Its row groups per workgroup, for 32-element blocks / super-blocks.
        vec_int_groups: Pair [range(1, 1024).pow2()],
        /// The units kernel's row groups for q6_K.
        vec_int_groups_q6k: u32 [range(1, 1024).pow2()],
        /// q8_0 at n=1 in row groups of one row, two a workgroup.
        vec_int_q8_0_n1: bool,
        /// K-quants take the slot kernel (16-element slots, consecutive lanes on consecutive
        /// words; `mul_mat_vec_kq.wgsl`) from this n (up to `vec_int_max_n`); below it, whole
        /// 32-element sub-blocks a lane (`mul_mat_vec_q8.wgsl`).
        vec_int_slots_min_n: u32 [range(1, 65)],
        /// The slot kernel's rows per row group for n < 4 / n >= 4.
        vec_int_slot_rows: Pair [range(1, 64)],
        /// ... for q3_K and q6_K (signed bytes, no mins) at n >= 8.
        vec_int_slot_rows_q36: u32 [range(1, 64)],
        /// The slot kernel's row groups per workgroup, in general / for q3_K and q6_K at n >= 8.
        vec_int_slot_groups: Pair [range(1, 1024).pow2()],
        /// The formats and ns at which the integer mat-vec loads each lane's next unit of a
        /// before it multiplies the current one.
        vec_int_prefetch: TypeNs,
        /// iq4_nl in the integer mat-vec (its nibbles mapped to their signed levels).
        vec_int_iq4nl: bool,
        /// mxfp4 and nvfp4 in the integer mat-vec (nibbles mapped to the E2M1 levels doubled).
        vec_int_fp4: bool,
        /// iq4_xs in the integer mat-vec, a 32-element sub-block a unit.
        vec_int_iq4xs: bool,
        /// The integer kernel's 4-bit levels looked up two a byte of codes in a 256-word
        /// workgroup table, instead of picked one by one out of a constant vector.
        vec_int_lut: bool,
        /// Formats whose rows the integer mat-vec's units kernel reads as 16-byte words where
        /// they allow ([`super::plan::int_a_vec4`]).
        vec_int_a_vec4: TypeSet,
        /// Measurement only, results are wrong: 1 replaces the mat-vecs' dot products with a
        /// bitwise fold of the same loaded words (the loads' own cost); 2 runs b's quantize pass
        /// twice, and in the float kernel makes a's words from the step instead of loading them.
        #[cfg(feature = "probes")]
        vec_int_probe: u32 [range(0, 2)],
        /// The subgroup-matrix kernel's narrow tile for n up to this.
        small_n_max: u32 [range(0, 1024)],
        /// Its big tile: subgroups along m / n.
        sg_counts: Pair [range(1, 64)],
        /// The big tile the fragments per subgroup are sized for, along m / n.
        sg_tile: Pair [range(1, 1024)],
        /// The narrow tile: subgroups along m (one along n) / fragments per subgroup along m.
        sg_small: Pair [range(1, 64)],
        /// K step (elements; rounded up to the config's K and to 8).
        sg_tk: u32 [range(1, 512)],
        /// Halves of padding per workgroup-memory row (rows are 16-byte chunks).
        sg_pad: u32 [range(0, 64).multiple_of(8)],
        /// 2: double-buffered K loop; 1: single buffer, two barriers per step.
        sg_stages: u32 [range(1, 2)],
        /// With one stage: the next K step's units fetched into registers before this step's
        /// multiplies; 2: the step after it too (twice the registers).
        sg_prefetch: u32 [range(0, 2)],
        /// Where b is read as 16-byte words.
        b_vec4: BVec4,
        /// Measuring only (results wrong): 1 = the staging alone, 2 = the multiplies alone.
        #[cfg(feature = "probes")]
        sg_probe: u32 [range(0, 2)],
        /// f32 elements of a or b stay f32 in registers from their fetch until they are stored
        /// into workgroup memory (instead of packed to halves at the fetch).
        sg_raw_units: bool,
        /// From this n on, a quantized a is converted to f16 once per call, into scratch
        /// (`mul_mat_dequantize_a.wgsl`: `m·k·2` bytes per a matrix), and the subgroup-matrix
        /// kernel reads that copy as 16-byte words.
        sg_a_f16_min_n: FromN [range(1, 1 << 20)],
        /// From this n on, an f32 b is converted to a contiguous f16 copy once per call
        /// (`mul_mat_convert_b.wgsl`).
        sg_b_f16_min_n: FromN [range(1, 1 << 20)],
        /// Accumulator registers per invocation a subgroup may hold (f32 words).
        sg_acc_regs: u32 [range(1, 1024)],
        /// f16 accumulators even where the adapter offers f32 results (upstream's choice).
        sg_acc_f16: bool,
        /// At most this many result matrices in the edge-tile scratch (`auto`: as many as fit);
        /// 1 makes every subgroup take its turn, for testing the rounds.
        sg_scratch_max: Option<u32> [range(1, 1024)],
        /// The register-tiled kernel: threads along m / n.
        tiled_wg: Pair [range(1, 1024)],
        /// ... outputs per thread along m / n.
        tiled_thread: Pair [range(1, 16)],
        /// ... K step.
        tiled_tk: u32 [range(8, 256).pow2()],
        /// ... padding per workgroup-memory row.
        tiled_pad: u32 [range(0, 64)],
    }
}
