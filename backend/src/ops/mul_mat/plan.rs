//! Which MUL_MAT kernel runs, with which tiles: a pure function of the problem (types, shape,
//! alignment), the device ([`DeviceFacts`]) and the tuning knobs ([`Tuning`]), so every choice
//! is testable without a GPU.
//!
//! Paths, in order of preference:
//! 1. [`Path::Vec`] for `n <= vec_max_n`: memory-bound matrix × few vectors; for f16 a, where
//!    the knob asks, [`Path::VecMma`]: the same on subgroup matrices.
//! 2. [`Path::SubgroupMatrix`] where the adapter has an f16 subgroup-matrix config: tiles from
//!    the config, the subgroup size and the workgroup-memory limit; a narrow tile for small `n`.
//! 3. [`Path::Tiled`]: register tiles in f32, for every device.
//! 4. [`Path::Simple`]: one thread per output, for what the others cannot address (sizes past
//!    32-bit indexing). Views at any byte offset and with any strides take the fast paths.

use std::fmt;

use crate::exec::grid_2d;
use crate::ggml_type::GgmlType;

pub use crate::facts::{DeviceFacts, MatrixConfig};

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
}

/// The tuning knobs, with the defaults the planner uses. [`Tuning::parse`] reads overrides
/// (`name=value,…`), so they can be swept without rebuilding (see `GGML_DAWN_MUL_MAT` in
/// `mul_mat/mod.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Mat-vec for n up to this.
    pub vec_max_n: u32,
    /// Mat-vec workgroup size (a power of two).
    pub vec_wg: u32,
    /// Mat-vec rows per thread (and per row group) for n <= 4.
    pub vec_rows: u32,
    /// Mat-vec rows per thread for n > 4.
    pub vec_rows_wide: u32,
    /// The same two for weights in 256-element super-blocks (K-quants, i-quants).
    pub vec_rows_k: u32,
    pub vec_rows_wide_k: u32,
    /// The float mat-vec's (f32, f16, bf16 weights) accumulators (rows · columns) per thread at
    /// most: above it, rows halve and row groups double (a workgroup covers as many rows), since
    /// more spill registers (H200, n=8: f16 73 against 102 us, f32 92 against 114, bf16 73
    /// against 103; n=5 keeps 16 rows). Quantized weights measured slower with it (iq4_nl,
    /// mxfp4, nvfp4, q1_0 at n=8: 7-25%), so they keep their rows.
    pub vec_acc_max: u32,
    /// The float mat-vec at n >= 2: pairs of each column of b staged in workgroup memory per
    /// chunk (0: none, each group reads b through the cache). Staging reads b once per
    /// workgroup instead of once per group of rows. Off: on the H100 it was slower at every n
    /// and chunk measured (f16 n=8 76 against 99-174 us, n=4 61 against 98-156; BENCHMARKS.md).
    pub vec_b_shared: u32,
    /// 1: the float mat-vec reads a as 16-byte words where its rows allow ([`float_rows_vec4`]): a lane
    /// takes 8 halves (4 floats) of every row a step, with b as 16-byte words where b's layout
    /// allows ([`b_vec4`]), instead of 2 elements: a quarter of the load instructions. 2 (the
    /// default): on GPUs only. H100, m=4096 k=14336 (bench/results/2026-12-06-h100-knobs.md): f32
    /// n=1/4/8 80.6/86.1/92.4 us against 84.0/97.5/103.9, f16 n=1/4/8 41.8/53.4/60.2 against
    /// 42.8/58.7/75.0 (with [`Tuning::vec_acc_max_halves`]); f16 n=2 45.8 against 44.0.
    pub vec_float_vec4: u32,
    /// The float mat-vec over 16-byte words of an f16 or bf16 a reads an f32 b from an f16 copy
    /// made first (`mul_mat_convert_b.wgsl`) from this n on (0: never): each column's 8
    /// elements of a step in one 16-byte load instead of two, half of b's bytes through the
    /// cache, which every row group re-reads. Off: on the H100 2-4% faster at n = 3, 4 only,
    /// slower at n = 1, 2 (the copy pass) and n=8 (102.6 us against 60.0: the conversions).
    pub vec_b_f16_min_n: u32,
    /// [`Tuning::vec_acc_max`] for f16 and bf16 weights read as 16-byte words: a lane's 8 halves
    /// a row hold more registers, so fewer rows (H100, f16 n=8: 60.2 us against 123.1 with 80
    /// and 75.0 with 2-element reads; n=2 and n=4 within 1% of 80).
    pub vec_acc_max_halves: u32,
    /// Mat-vec row groups per workgroup (a power of two) for n <= 4 and n > 4: the workgroup's
    /// threads split into groups of `vec_wg / groups`, each with its own rows, so a workgroup
    /// covers `rows · groups` rows and b is read once per that many rows.
    pub vec_groups: u32,
    pub vec_groups_wide: u32,
    /// Mat-vec kernel: 1 reads q4_0, q8_0, q4_K and q6_K in 64-element units of whole words;
    /// 0 reads every type in 8-element units; 2 takes the whole-word kernel for q6_K only, the
    /// one type where it measured faster on the H200 (74.7 vs 85.8 us at n=1, 301 vs 658 at n=8).
    pub vec_kernel: u32,
    /// The integer mat-vec (b quantized to 8-bit blocks once per call, packed 4x8-bit dot
    /// products) for n up to this, for the formats that have it (0: never).
    pub vec_int_max_n: u32,
    /// Its rows per row group and row groups per workgroup (a power of two), and the same two
    /// for weights in 256-element super-blocks.
    pub vec_int_rows: u32,
    pub vec_int_groups: u32,
    pub vec_int_rows_k: u32,
    pub vec_int_groups_k: u32,
    /// The units kernel's row groups for q6_K (0, the default: by device, 8 on GPUs, as
    /// `vec_int_groups_k` on CPU adapters). H100, n=1 (bench/results/2026-12-06-h100-defaults.md):
    /// 8 groups of 2 rows (a group per 32-lane subgroup) 30.7 us against 36.1 with 4 of 2; q4_K
    /// measured slower so (16.1 against 14.7).
    pub vec_int_groups_q6k: u32,
    /// q8_0 at n=1 in row groups of one row, two a workgroup (128 lanes a row) instead of
    /// `vec_int_rows` and `vec_int_groups`: 1 always, 2 (the default) on GPUs, 0 never. H100,
    /// m=4096 k=14336 (bench/results/2026-12-07-h100.md): 29.85 us against 33.39 (1 row in 4
    /// groups 31.67); the other 32-element formats slower so (q4_0 17.41 against 14.69), and
    /// q8_0 at n=2 too (34.44 against 32.19).
    pub vec_int_q8_0_n1: u32,
    /// K-quants in the integer mat-vec for n at least this (above `vec_int_max_n`: never) take
    /// the slot kernel: each lane 16 elements of a block read from one or two words,
    /// consecutive lanes on consecutive words (`mul_mat_vec_kq.wgsl`). Below it, a lane takes
    /// whole 32-element sub-blocks, two or four sharing their bytes (`mul_mat_vec_q8.wgsl`),
    /// which measured faster at n=1 on the H200 (q4_K 25.4 against 31.0 us; BENCHMARKS.md).
    /// 0 (the default) picks by device: 2 on GPUs, 4 on CPU adapters, where the units kernel
    /// measured faster at n = 2 and 3 (lavapipe, q4_K n=2: 18.7 against 29.9 ms).
    pub vec_int_slots_min_n: u32,
    /// The slot kernel's row groups per workgroup (a power of two), and its rows per row group
    /// for n < 4 and n >= 4.
    pub vec_int_slot_groups: u32,
    /// The slot kernel's rows per group and groups for q3_K and q6_K (signed bytes, no mins)
    /// at n >= 8: H200, q6_K n=8 68.0 us against 81.3 with the general pair, q3_K 59.5
    /// against 74.2 (q4_K and q5_K were 7-11% slower so; BENCHMARKS.md).
    pub vec_int_slot_rows_q36: u32,
    pub vec_int_slot_groups_q36: u32,
    pub vec_int_slot_rows: u32,
    pub vec_int_slot_rows_wide: u32,
    /// The integer mat-vec loads each lane's next unit of a before it multiplies the current
    /// one (two units' loads in flight per lane instead of one): 0 never, 1 always, 2 (the
    /// default) on GPUs where it measured faster ([`int_prefetch_on`]). H100, m=4096 k=14336
    /// (bench/results/2026-12-06-h100-evening.md, -night.md: three sweeps agreeing): q4_0 / q4_1
    /// n=4 29.7 / 29.8 us → 25.4 / 25.4, q4_0 n=2 17.9 → 17.3, q5_0 n=1 / 2 / 4 / 5 24.7 / 25.7
    /// / 34.4 / 38.0 → 21.6 / 23.8 / 30.7 / 34.5; slower at n=3 (q5_0 27.2 → 31.4), at n=8 for
    /// every format (q4_0 40.6 → 50.2) and for q8_0 and iq4_nl from n=2.
    pub vec_int_prefetch: u32,
    /// f16 a times a few columns on subgroup matrices ([`Path::VecMma`]): 0 never, 1 wherever
    /// the device and shapes allow, 2 on GPUs from n = `vec_mma_min_n`. The float mat-vec
    /// re-reads every column of b from cache for each row it multiplies; a subgroup matrix
    /// of b serves the config's M rows at once. Off: slower on the H100 at every n (f16, n=1 /
    /// 8: 62.4 / 116.8 us, 68.3 / 72.7 at best, against 43.5 / 60.8; bench/results/
    /// 2026-12-06-h100-night.md): 16 rows a workgroup leave two workgroups a multiprocessor.
    pub vec_mma: u32,
    pub vec_mma_min_n: u32,
    /// Subgroups per workgroup, each taking every `vec_mma_split`-th K step of the same rows.
    pub vec_mma_split: u32,
    /// K steps whose loads a subgroup issues before their multiplies.
    pub vec_mma_unroll: u32,
    /// Result matrices per subgroup along m (rows per workgroup: this · the config's M).
    pub vec_mma_frag_m: u32,
    /// Rounds whose loads are in flight while one is multiplied (register sets).
    pub vec_mma_depth: u32,
    /// 1: at n=1 the integer mat-vec's workgroups quantize b themselves into workgroup memory
    /// (where k/32 blocks of 48 bytes fit), instead of a separate pass: one dispatch per op.
    pub vec_int_fused: u32,
    /// iq4_nl in the integer mat-vec too (its nibbles mapped to their signed levels, then packed
    /// dot products; 0 off; 1 on, the default; 2 on GPUs only). The float kernel looks up and
    /// converts every element. H100, m=4096 k=14336 (bench/results/2026-12-06-h100-evening.md):
    /// n=1 53.0 us against 63.0, n=8 70.2 against 210.9; lavapipe n=1 22.5 / 21.8 ms against
    /// 22.8 / 23.8.
    pub vec_int_iq4nl: u32,
    /// mxfp4 and nvfp4 in the integer mat-vec too, as iq4_nl (their nibbles mapped to the E2M1
    /// levels doubled, their scales as f32; mxfp4's 17-byte blocks read at any byte): 0 off; 1
    /// on; 2 (the default) on GPUs where it measured faster ([`int_fp4_on`]). H100, m=4096
    /// k=14336, three rounds (bench/results/2026-12-06-h100-late.md): mxfp4 n=1 / 4 / 8 64.2 /
    /// 86.0 / 206.9 us → 54.8 / 60.8 / 70.7, nvfp4 n=2 / 8 76.4 / 247.1 → 59.2 / 94.1, but
    /// nvfp4 n=1 69.3 → 74.4 without the levels' table; with it (H200,
    /// bench/results/2026-12-06-h200.md) nvfp4 n=1 68.8 → 25.4.
    pub vec_int_fp4: u32,
    /// iq4_xs in the integer mat-vec too, a 32-element sub-block a unit, its levels as iq4_nl's:
    /// 0 off; 1 on, the default; 2 on GPUs only. Faster at every n measured: H200, m=4096
    /// k=14336 (bench/results/2026-12-06-h200.md), n=1 / 8 73.3 / 139.3 us → 52.1 / 70.3
    /// (23.9 / 40.6 with the levels' table); lavapipe n=1 33.8–44.2 ms → 21.2–24.4.
    pub vec_int_iq4xs: u32,
    /// The integer kernel's 4-bit levels (iq4_nl, iq4_xs, mxfp4, nvfp4) looked up two a byte of codes
    /// in a 256-word workgroup table instead of picked one by one out of a constant vector: 0
    /// never, 1 always, 2 (the default) on GPUs. The picks are arithmetic on every byte: H200,
    /// m=4096 k=14336 (bench/results/2026-12-06-h200.md), iq4_nl n=1 / 8 52.1 / 68.9 us → 24.9 /
    /// 41.6, mxfp4 53.6 / 70.7 → 27.3 / 42.6. Lavapipe is slower with the table (iq4_nl n=1
    /// 26.9-27.9 ms against 24.7), its lookups being per-lane gathers.
    pub vec_int_lut: u32,
    /// 1: the integer mat-vec's units kernel reads q4_K, q5_K, q4_0, q8_0 and q6_K rows at 16-byte
    /// offsets as 16-byte words ([`int_a_vec4`]): a q4_K unit in three loads (q5_K five), q4_0
    /// and q8_0 in units of 4 blocks (5 and 9 loads), a q6_K unit in ten (realigned by selects)
    /// instead of 4-byte loads. 2 (the default): on GPUs, for the K-quants only. H100, n=1
    /// (bench/results/2026-12-06-h100-knobs.md): q4_K 15.9 us against 19.9, q5_K 18.5 against 25.2,
    /// q6_K 36.1 against 36.7, but q4_0 25.3 against 14.8 and q8_0 41.0 against 31.8 in units
    /// of 8 blocks (as then: too few units per row to keep a lane's loads in flight).
    pub vec_int_a_vec4: u32,
    /// q4_0 and q8_0 rows at 16-byte offsets, k a multiple of 256, read by the integer
    /// mat-vec as a stream of 16-byte words, consecutive lanes on consecutive words whatever the
    /// block size, with b's 8-bit values laid out to match ([`int_stream`]; 0 off, the default;
    /// 1 on; 2 on GPUs only). A measurement of what coalesced loads are worth: the block-per-lane
    /// kernel spreads a warp's 4-byte reads over as many cache lines as its 18- or 34-byte
    /// blocks span, yet it is faster. H100, m=4096 k=14336 (bench/results/2026-12-06-h100-evening.md):
    /// q4_0 n=1 / 8 21.1 / 50.8 us against 15.8 / 40.5, q8_0 34.0 / 71.6 against 31.4 / 46.3.
    pub vec_int_stream: u32,
    /// Measurement only, results are wrong: 1 replaces the integer kernels' dot products (units
    /// and slots) and the float kernel's products with a bitwise fold of the same loaded and
    /// unpacked words (the loads' own cost); 2 runs b's quantize pass twice (its cost, by
    /// difference), and in the float kernel makes a's words from the step instead of loading
    /// them (the arithmetic's own cost, b still read).
    pub vec_int_probe: u32,
    /// Subgroup-matrix path: the narrow tile for n up to this.
    pub small_n_max: u32,
    /// Subgroup-matrix big tile: subgroups along m and n.
    pub sg_count_m: u32,
    pub sg_count_n: u32,
    /// The big tile the fragments per subgroup are sized for.
    pub sg_tile_m: u32,
    pub sg_tile_n: u32,
    /// Narrow tile: subgroups along m (one along n) and fragments per subgroup along m.
    pub sg_small_count_m: u32,
    pub sg_small_frag_m: u32,
    /// K step (elements; rounded to the config's K and to 8). 0 (the default) picks by
    /// device: 64 on GPUs, 8 on CPU adapters, where the unrolled staging of a 32-element step
    /// compiles 2.5-4.5x slower and runs no faster (lavapipe, first run with compilation /
    /// time per run, K step 32 against 8: q4_0 4096x33x4096 5.9 s / 164 ms against 2.3 s / 174
    /// ms; f16 4096x64x4096 10.3 s / 245 ms against 2.2 s / 233 ms; q4_K 1024x512x2048 4.8 s /
    /// 197 ms against 1.9 s / 200 ms; iq2_xxs 1024x128x2048 5.6 s / 63 ms against 1.4 s / 58 ms).
    pub sg_tk: u32,
    /// Halves of padding per workgroup-memory row (a multiple of 8: rows are 16-byte chunks).
    pub sg_pad: u32,
    /// 2: double-buffered K loop; 1: single buffer, two barriers per step; 0 (the default):
    /// by device, 1 on GPUs (with `sg_prefetch`), 2 on CPU adapters (as measured for CI).
    pub sg_stages: u32,
    /// With one stage: the next K step's units fetched into registers before this step's
    /// multiplies (two barriers a step), instead of after them; 2: the step after it too, so
    /// two steps' loads are in flight (twice the registers).
    pub sg_prefetch: u32,
    /// Where b is read as 16-byte words when its layout allows ([`b_vec4`]): 0 nowhere, 2
    /// everywhere, 1 where it measured faster: the subgroup-matrix kernel and the mat-vec of
    /// the lookup-table formats (IQ*, mxfp4, nvfp4), not the float mat-vec, nor the
    /// register-tiled kernel.
    pub b_vec4: u32,
    /// Measuring only (results wrong): 1 = the staging alone (global loads and workgroup
    /// stores, no multiplies), 2 = the multiplies alone (workgroup memory never refilled).
    pub sg_probe: u32,
    /// 1: f32 elements of a or b stay f32 in registers from their fetch until they are stored
    /// into workgroup memory, so a prefetched step's loads are waited on after the step's
    /// multiplies rather than before them; 0: packed to halves at the fetch; 2 (the default):
    /// by device, 1 on GPUs, 0 on CPU adapters.
    pub sg_raw_units: u32,
    /// From this n up, a quantized a is converted to f16 once per call, into scratch
    /// (`mul_mat_dequantize_a.wgsl`), and the subgroup-matrix kernel reads that copy as 16-byte
    /// words instead of decoding a's blocks while it stages them. Costs `m·k·2` bytes of
    /// scratch per a matrix; ggml's weights themselves are read as they are, every call. 0
    /// (the default): by device, [`SG_COPY_MIN_N`] on GPUs, never on CPU adapters (whose
    /// 128 MiB bindings and CI time the copies would spend); `1048576`: never.
    pub sg_a_f16_min_n: u32,
    /// From this n up, an f32 b is converted to a contiguous f16 copy once per call
    /// (`mul_mat_convert_b.wgsl`), which the subgroup-matrix kernel stages as 16-byte words of
    /// halves: half the bytes through the caches, and no conversion in every workgroup. 0 (the
    /// default): by device, as `sg_a_f16_min_n`.
    pub sg_b_f16_min_n: u32,
    /// Accumulator registers per invocation a subgroup may hold (f32 words).
    pub sg_acc_regs: u32,
    /// Halve the tile while the grid has fewer workgroups than this (0: never), so that small
    /// problems still spread over every multiprocessor (an H200 has 132).
    pub sg_min_workgroups: u32,
    /// 1: f16 accumulators even where the adapter offers f32 results (upstream's choice).
    pub sg_acc_f16: u32,
    /// At most this many result matrices in the edge-tile scratch (0: as many as fit); 1 makes
    /// every subgroup take its turn, for testing the rounds.
    pub sg_scratch_max: u32,
    /// Register-tiled path: threads along m and n, outputs per thread, K step, padding.
    pub tiled_wg_m: u32,
    pub tiled_wg_n: u32,
    pub tiled_thread_m: u32,
    pub tiled_thread_n: u32,
    pub tiled_tk: u32,
    pub tiled_pad: u32,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            vec_max_n: 8,
            vec_wg: 256,
            // Measured on the H200 (BENCHMARKS.md), one group: 4 rows for q4_0 at n=1, 2 for
            // q4_K and q6_K; at n > 4, 16 rows for q4_0 and f16 (q4_0 n=8: 104.8 us, 8 rows
            // 153.3) and 4 for the K-quants (q4_K n=8: 468 us, 8 rows 554). The whole-word
            // kernel measured slower for every type but q6_K (vec_kernel below).
            vec_rows: 4,
            vec_rows_wide: 16,
            vec_rows_k: 2,
            vec_rows_wide_k: 4,
            vec_acc_max: 80,
            vec_b_shared: 0,
            vec_float_vec4: 2,
            vec_b_f16_min_n: 0,
            vec_acc_max_halves: 40,
            vec_groups: 1,
            vec_groups_wide: 1,
            vec_kernel: 2,
            vec_int_max_n: 8,
            vec_int_rows: 2,
            vec_int_groups: 4,
            // H200, 2026-12-04 (BENCHMARKS.md): 4 groups of 2 rows at n=1 beat 8 of 1 for
            // every K-quant by 5-14% (q4_K 23.7 against 25.0 us, q3_K 27.2 against 31.6).
            vec_int_rows_k: 2,
            vec_int_groups_k: 4,
            vec_int_groups_q6k: 0,
            vec_int_q8_0_n1: 2,
            // H200 (BENCHMARKS.md): the slot kernel from n=2 (q2_K n=2: 37.0 against 41.9
            // us), two rows from n=4 (q4_K n=8: 75.0 against 90.7 us with one).
            vec_int_slots_min_n: 0,
            vec_int_slot_groups: 8,
            vec_int_slot_rows_q36: 4,
            vec_int_slot_groups_q36: 4,
            vec_int_slot_rows: 1,
            vec_int_slot_rows_wide: 2,
            vec_int_prefetch: 2,
            vec_mma: 0,
            vec_mma_min_n: 2,
            vec_mma_split: 8,
            vec_mma_unroll: 4,
            vec_mma_frag_m: 1,
            vec_mma_depth: 2,
            vec_int_fused: 0,
            vec_int_iq4nl: 1,
            vec_int_fp4: 2,
            vec_int_iq4xs: 1,
            vec_int_lut: 2,
            vec_int_a_vec4: 2,
            vec_int_stream: 0,
            vec_int_probe: 0,
            small_n_max: 64,
            // 4x4 subgroups (512 invocations) on a 128x128 tile: 990 us for f16 at n=512 on the
            // H200, against 1393 us with 2x4 (fewer warps to hide the staging loads).
            sg_count_m: 4,
            sg_count_n: 4,
            sg_tile_m: 128,
            sg_tile_n: 128,
            sg_small_count_m: 4,
            sg_small_frag_m: 1,
            // By device (see `SG_TK`): on the H200 at n=512 (BENCHMARKS.md) one 64-deep stage
            // with the next step prefetched into registers beat two 32-deep stages by 15-20%
            // (f16 760 against 877 us, q4_K 947 against 1119): half the barriers, twice the
            // loads in flight.
            sg_tk: 0,
            sg_pad: 8,
            sg_stages: 0,
            sg_prefetch: 1,
            // H200 (BENCHMARKS.md): 16-byte reads of b took f16 n=512 from 760 to 609 us and
            // iq4_xs n=1 from 77.0 to 73.5; the float mat-vec was slower with them (f16 n=8
            // 81.3 against 72.9 us), the register-tiled kernel within noise (3416 against 3312).
            b_vec4: 1,
            sg_probe: 0,
            sg_raw_units: 2,
            sg_a_f16_min_n: 0,
            sg_b_f16_min_n: 0,
            sg_acc_regs: 64,
            // Measured on the H200: halving 4096x512's 128x128 tiles to fill all 132
            // multiprocessors was slower (5590 vs 4469 us for f16), so no halving by default.
            sg_min_workgroups: 0,
            sg_acc_f16: 0,
            sg_scratch_max: 0,
            tiled_wg_m: 16,
            tiled_wg_n: 16,
            tiled_thread_m: 4,
            tiled_thread_n: 4,
            tiled_tk: 16,
            tiled_pad: 4,
        }
    }
}

macro_rules! knobs {
    ($($name:ident),* $(,)?) => {
        impl Tuning {
            /// The knobs' names, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            fn knob(&mut self, name: &str) -> Option<&mut u32> {
                match name {
                    $(stringify!($name) => Some(&mut self.$name),)*
                    _ => None,
                }
            }

            fn values(&self) -> Vec<(&'static str, u32)> {
                vec![$((stringify!($name), self.$name)),*]
            }
        }
    };
}

knobs!(
    vec_max_n,
    vec_wg,
    vec_rows,
    vec_rows_wide,
    vec_rows_k,
    vec_rows_wide_k,
    vec_acc_max,
    vec_b_shared,
    vec_float_vec4,
    vec_b_f16_min_n,
    vec_acc_max_halves,
    vec_groups,
    vec_groups_wide,
    vec_kernel,
    vec_int_max_n,
    vec_int_rows,
    vec_int_groups,
    vec_int_rows_k,
    vec_int_groups_k,
    vec_int_groups_q6k,
    vec_int_q8_0_n1,
    vec_int_slots_min_n,
    vec_int_slot_groups,
    vec_int_slot_rows_q36,
    vec_int_slot_groups_q36,
    vec_int_slot_rows,
    vec_int_slot_rows_wide,
    vec_int_prefetch,
    vec_mma,
    vec_mma_min_n,
    vec_mma_split,
    vec_mma_unroll,
    vec_mma_frag_m,
    vec_mma_depth,
    vec_int_fused,
    vec_int_iq4nl,
    vec_int_fp4,
    vec_int_iq4xs,
    vec_int_lut,
    vec_int_a_vec4,
    vec_int_stream,
    vec_int_probe,
    small_n_max,
    sg_count_m,
    sg_count_n,
    sg_tile_m,
    sg_tile_n,
    sg_small_count_m,
    sg_small_frag_m,
    sg_tk,
    sg_pad,
    sg_stages,
    sg_prefetch,
    b_vec4,
    sg_probe,
    sg_raw_units,
    sg_a_f16_min_n,
    sg_b_f16_min_n,
    sg_acc_regs,
    sg_min_workgroups,
    sg_acc_f16,
    sg_scratch_max,
    tiled_wg_m,
    tiled_wg_n,
    tiled_thread_m,
    tiled_thread_n,
    tiled_tk,
    tiled_pad,
);

impl Tuning {
    /// The defaults with `name=value` overrides (comma- or space-separated). Values that would
    /// break a kernel or the planner's arithmetic (out of [`Tuning::range`], a non-power-of-two
    /// workgroup) are refused, naming the knob.
    pub fn parse(text: &str) -> Result<Tuning, String> {
        let mut t = Tuning::default();
        t.apply(text)?;
        Ok(t)
    }

    /// Applies `name=value` overrides (comma- or space-separated) on top of these values, then
    /// validates the whole; on an error `self` is unchanged.
    pub fn apply(&mut self, text: &str) -> Result<(), String> {
        let mut t = *self;
        for (name, value) in crate::tuning::knob::items(text)? {
            let value = <u32 as crate::tuning::knob::Knob>::parse_knob(value).map_err(|e| format!("{name}: {e}"))?;
            let slot = t
                .knob(name)
                .ok_or_else(|| format!("unknown knob `{name}` (known: {})", Tuning::NAMES.join(", ")))?;
            *slot = value;
        }
        t.validate()?;
        *self = t;
        Ok(())
    }

    /// The range each knob must lie in: what keeps the planner's u32 arithmetic from
    /// overflowing and the kernels' per-thread arrays, workgroups and workgroup memory within
    /// what devices have (the planner shrinks tiles to the device's limits from there).
    pub fn range(name: &str) -> Option<(u32, u32)> {
        Some(match name {
            "vec_max_n" | "vec_int_max_n" => (0, 64),
            "vec_wg" => (1, 1024),
            "vec_rows" | "vec_rows_wide" | "vec_rows_k" | "vec_rows_wide_k" | "vec_int_rows" | "vec_int_rows_k" => {
                (1, 64)
            }
            "vec_groups"
            | "vec_groups_wide"
            | "vec_int_groups"
            | "vec_int_groups_k"
            | "vec_int_slot_groups"
            | "vec_int_slot_groups_q36" => (1, 1024),
            "vec_int_groups_q6k" => (0, 1024),
            "vec_acc_max" | "vec_acc_max_halves" => (1, 4096),
            "vec_b_shared" => (0, 4096),
            "vec_kernel" => (0, 2),
            "vec_int_slots_min_n" => (0, 65),
            "vec_int_slot_rows" | "vec_int_slot_rows_wide" | "vec_int_slot_rows_q36" => (1, 64),
            "vec_int_prefetch" | "vec_mma" => (0, 2),
            "vec_mma_min_n" => (1, 64),
            "vec_b_f16_min_n" => (0, 64),
            "vec_mma_split" => (1, 32),
            "vec_mma_unroll" => (1, 16),
            "vec_mma_frag_m" => (1, 8),
            "vec_mma_depth" => (1, 2),
            "vec_int_fused" => (0, 1),
            "vec_int_iq4nl" | "vec_int_iq4xs" | "vec_int_fp4" | "vec_int_lut" | "vec_int_stream"
            | "vec_int_q8_0_n1" => (0, 2),
            "vec_int_a_vec4" | "vec_float_vec4" => (0, 2),
            "vec_int_probe" => (0, 2),
            "small_n_max" => (0, 1024),
            "sg_count_m" | "sg_count_n" | "sg_small_count_m" | "sg_small_frag_m" => (1, 64),
            "sg_tile_m" | "sg_tile_n" => (1, 1024),
            "sg_tk" => (0, 512),
            "sg_pad" | "tiled_pad" => (0, 64),
            "sg_stages" => (0, 2),
            "sg_prefetch" => (0, 2),
            "b_vec4" => (0, 2),
            "sg_probe" => (0, 2),
            "sg_raw_units" => (0, 2),
            "sg_a_f16_min_n" | "sg_b_f16_min_n" => (0, 1 << 20),
            "sg_acc_regs" => (1, 1024),
            "sg_min_workgroups" => (0, 1 << 20),
            "sg_acc_f16" => (0, 1),
            "sg_scratch_max" => (0, 1024),
            "tiled_wg_m" | "tiled_wg_n" => (1, 1024),
            "tiled_thread_m" | "tiled_thread_n" => (1, 16),
            "tiled_tk" => (8, 256),
            _ => return None,
        })
    }

    /// Checks every knob against [`Tuning::range`] and the kernels' other assumptions; the
    /// error names the knob.
    pub fn validate(&self) -> Result<(), String> {
        for (name, value) in self.values() {
            let (lo, hi) = Tuning::range(name).ok_or_else(|| format!("{name}: no range known"))?;
            if !(lo..=hi).contains(&value) {
                return Err(format!("{name}={value}: must be in {lo}..={hi}"));
            }
        }
        for (name, value) in [
            ("vec_wg", self.vec_wg),
            ("vec_groups", self.vec_groups),
            ("vec_groups_wide", self.vec_groups_wide),
            ("vec_int_groups", self.vec_int_groups),
            ("vec_int_groups_k", self.vec_int_groups_k),
            ("vec_int_slot_groups", self.vec_int_slot_groups),
            ("vec_int_slot_groups_q36", self.vec_int_slot_groups_q36),
            ("tiled_tk", self.tiled_tk),
        ] {
            if !value.is_power_of_two() {
                return Err(format!("{name}={value}: must be a power of two"));
            }
        }
        if self.vec_int_groups_q6k != 0 && !self.vec_int_groups_q6k.is_power_of_two() {
            return Err(format!(
                "vec_int_groups_q6k={}: must be 0 (by device) or a power of two",
                self.vec_int_groups_q6k
            ));
        }
        if !self.sg_pad.is_multiple_of(8) {
            return Err(format!("sg_pad={}: must be a multiple of 8 (halves)", self.sg_pad));
        }
        if !self.tiled_tk.is_multiple_of(8) {
            return Err(format!("tiled_tk={}: must be a multiple of 8", self.tiled_tk));
        }
        Ok(())
    }
}

impl fmt::Display for Tuning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: Vec<String> = self.values().iter().map(|(n, v)| format!("{n}={v}")).collect();
        f.write_str(&text.join(","))
    }
}

/// The kernel and its shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Path {
    /// `mul_mat_vec.wgsl`: `groups` groups of `rows` rows × all `cols` columns per workgroup.
    Vec {
        wg_size: u32,
        rows: u32,
        groups: u32,
        cols: u32,
        subgroups: bool,
        /// Workgroup size over the smallest subgroup size (the reduction buffer's length).
        max_subgroups: u32,
        /// [`Tuning::vec_kernel`].
        kernel: u32,
        /// The integer kernel: b quantized first (`mul_mat_quantize_b.wgsl`) into
        /// [`int_scratch_bytes`] of scratch.
        int_dot: bool,
        /// With `int_dot`, K-quants in 16-element slots ([`Tuning::vec_int_slots_min_n`]).
        int_slots: bool,
        /// With `int_dot`, q4_0 / q8_0 rows read as a stream of 16-byte words
        /// ([`Tuning::vec_int_stream`]).
        int_stream: bool,
        /// With `int_dot`, the next unit's loads issued before the current one's arithmetic
        /// ([`Tuning::vec_int_prefetch`]).
        prefetch: bool,
        /// With `int_dot`, the 4-bit formats' levels looked up in a workgroup table
        /// ([`Tuning::vec_int_lut`]).
        level_table: bool,
        /// With `int_dot` at n=1, b quantized by the mat-vec's own workgroups into this many
        /// 32-element blocks of workgroup memory (0: by a separate pass;
        /// [`Tuning::vec_int_fused`]).
        fused_blocks: u32,
        /// [`Tuning::vec_int_probe`] (0 but when measuring).
        probe: u32,
        /// The float kernel: pairs of each column of b staged in workgroup memory per chunk
        /// (0: b read through the cache; [`Tuning::vec_b_shared`]).
        b_shared: u32,
    },
    /// `mul_mat_vec_mma.wgsl`: f16 a times b (n <= `config.n`) on subgroup matrices, one right
    /// matrix of b per K step serving `config.m` rows. A workgroup's `split` subgroups share its
    /// `frag_m · config.m` rows; every round the workgroup stages `split · unroll` K steps of
    /// them and of b in workgroup memory, each subgroup multiplying its own `unroll`; their
    /// partial results are summed in workgroup memory.
    VecMma {
        config: MatrixConfig,
        split: u32,
        frag_m: u32,
        unroll: u32,
        /// Register sets of staged loads ([`Tuning::vec_mma_depth`]).
        depth: u32,
        wg_size: u32,
    },
    /// `mul_mat_tiled.wgsl`.
    Tiled {
        wg_m: u32,
        wg_n: u32,
        thread_m: u32,
        thread_n: u32,
        tk: u32,
        pad: u32,
    },
    /// `mul_mat_subgroup_matrix.wgsl`.
    SubgroupMatrix {
        config: MatrixConfig,
        /// Subgroups along m and n.
        count_m: u32,
        count_n: u32,
        /// Result matrices per subgroup along m and n.
        frag_m: u32,
        frag_n: u32,
        tk: u32,
        pad: u32,
        stages: u32,
        /// One stage with the next step fetched into registers first ([`Tuning::sg_prefetch`]).
        prefetch: bool,
        /// ... and the step after it too: two steps' loads in flight (`sg_prefetch=2`).
        deep_prefetch: bool,
        /// [`Tuning::sg_probe`] (0 but when measuring).
        probe: u32,
        /// f32 units kept f32 in registers until stored ([`Tuning::sg_raw_units`]).
        raw_units: bool,
        wg_size: u32,
        /// Result matrices the edge-tile scratch holds (subgroups take turns when fewer than
        /// `count_m · count_n`): what is left of the workgroup memory after staging.
        scratch_sgs: u32,
        /// The narrow tile for small n.
        narrow: bool,
    },
    /// `mul_mat_simple.wgsl`, and why.
    Simple { reason: String },
}

/// The plan of one MUL_MAT: every decision the encoder follows (kernel, tiles, grid, vector
/// widths, stores, the quantize pass), and the problem it was made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MulMatPlan {
    pub problem: Problem,
    pub path: Path,
    /// Workgroups per dst matrix along m and n.
    pub tiles_m: u32,
    pub tiles_n: u32,
    pub batches: u32,
    /// Workgroups dispatched (x, y, 1): `tiles_m · tiles_n · batches` split in 2-D.
    pub grid: [u32; 3],
    /// Bytes of workgroup memory the kernel declares.
    pub workgroup_bytes: u32,
    /// The kernel reads b as 16-byte words ([`b_vec4`], [`Tuning::b_vec4`]).
    pub b_vec4: bool,
    /// The subgroup-matrix kernel also reads a as 16-byte words ([`a_vec4`]).
    pub a_vec4: bool,
    /// The subgroup-matrix kernel stores whole result matrices straight into dst (its binding
    /// holds at least one), not through the edge scratch.
    pub direct_store: bool,
    /// The integer mat-vec's pass that quantizes b into scratch first.
    pub quantize_b: Option<QuantizeB>,
    /// The subgroup-matrix kernel's pass that converts a quantized a to f16 in scratch first
    /// (`mul_mat_dequantize_a.wgsl`, [`Tuning::sg_a_f16_min_n`]: row r of a's matrix i at halves
    /// `(i·m + r)·k`); the kernel then reads that copy ([`MulMatPlan::kernel_problem`]).
    pub dequantize_a: Option<F16Copy>,
    /// Likewise for an f32 b (`mul_mat_convert_b.wgsl`, [`Tuning::sg_b_f16_min_n`]: column c of
    /// b's matrix i at halves `(i·n + c)·k`).
    pub convert_b: Option<F16Copy>,
}

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

/// The pass that quantizes b to 8-bit blocks for the integer mat-vec
/// (`mul_mat_quantize_b.wgsl`), which then reads them in b's place.
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
    /// The byte stream's layout ([`Path::Vec::int_stream`]).
    pub stream: bool,
    /// Recorded twice ([`Tuning::vec_int_probe`] 2: measurement only).
    pub twice: bool,
}

/// Threads per workgroup of the simple kernel.
pub const SIMPLE_WG: u32 = 64;
/// Threads per workgroup of the pass that quantizes b for the integer mat-vec.
pub const QUANTIZE_WG: u32 = 64;
/// Threads per workgroup of the passes that make f16 copies of a and b for the subgroup-matrix
/// kernel.
pub const COPY_WG: u32 = 256;

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

/// A switch knob that may also pick by device: 1 on, 2 on GPUs only (not CPU adapters), 0 off.
pub fn knob_on(knob: u32, d: &DeviceFacts) -> bool {
    match knob {
        1 => true,
        2 => !d.cpu(),
        _ => false,
    }
}

/// [`Tuning::vec_int_prefetch`]: 1 always; 2 on GPUs for the cases it measured faster in
/// (q4_0 at n = 2 and 4, q4_1 at n = 4, q5_0 at n = 1, 2, 4 and 5).
pub fn int_prefetch_on(knob: u32, d: &DeviceFacts, p: &Problem) -> bool {
    match knob {
        1 => true,
        2 if !d.cpu() => match p.a_type {
            GgmlType::Q4_0 => matches!(p.n, 2 | 4),
            GgmlType::Q4_1 => p.n == 4,
            GgmlType::Q5_0 => matches!(p.n, 1 | 2 | 4 | 5),
            _ => false,
        },
        _ => false,
    }
}

/// [`Tuning::vec_int_fp4`]: 1 always; 2 on GPUs for the cases it measured faster in (mxfp4 at
/// every n, nvfp4 from n=2, and at n=1 too where the levels come from the workgroup table).
fn int_fp4_on(t: &Tuning, d: &DeviceFacts, p: &Problem) -> bool {
    match t.vec_int_fp4 {
        1 => true,
        2 => !d.cpu() && (p.a_type == GgmlType::MXFP4 || p.n >= 2 || knob_on(t.vec_int_lut, d)),
        _ => false,
    }
}

/// [`Tuning::vec_int_a_vec4`]: 1 every format [`int_a_vec4`] allows, 2 the K-quants on GPUs.
fn int_a_vec4_on(knob: u32, d: &DeviceFacts, p: &Problem) -> bool {
    match knob {
        1 => true,
        2 => !d.cpu() && matches!(p.a_type, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K),
        _ => false,
    }
}

/// Whether the float mat-vec reads a's rows as 16-byte words: where [`Tuning::vec_float_vec4`]
/// lets it and the rows allow (and b is not staged, which the caller knows).
fn float_a_vec4_on(t: &Tuning, d: &DeviceFacts, p: &Problem) -> bool {
    knob_on(t.vec_float_vec4, d) && float_rows_vec4(p)
}

/// Whether the float mat-vec can read a's rows as 16-byte words: float rows at 16-byte offsets
/// (a row's last k % 8 halves, or k % 4 floats, are read one by one).
pub fn float_rows_vec4(p: &Problem) -> bool {
    matches!(p.a_type, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) && p.a_align >= 16
}

/// Whether the integer mat-vec can read a's blocks as 16-byte words, with rows at 16-byte
/// offsets: q4_K or q5_K (144- and 176-byte blocks, whole words), q4_0 or q8_0 in pairs of
/// 4-block units (144 and 272 bytes) where a row holds a pair at least, q6_K where rows are whole words
/// (k a multiple of 2048: 8 blocks of 210 bytes; its blocks are realigned in registers).
pub fn int_a_vec4(p: &Problem) -> bool {
    let formats = match p.a_type {
        GgmlType::Q4_K | GgmlType::Q5_K => true,
        GgmlType::Q4_0 | GgmlType::Q8_0 => p.k >= 256,
        GgmlType::Q6_K => p.k.is_multiple_of(2048),
        _ => false,
    };
    formats && p.a_align >= 16
}

/// Whether the integer mat-vec can read a's rows as a byte stream: q4_0 or q8_0 rows at
/// 16-byte offsets whose length is a whole number of 16-byte words with an odd last block (k a
/// multiple of 256), so that no word of a row reaches into the next.
pub fn int_stream(p: &Problem) -> bool {
    matches!(p.a_type, GgmlType::Q4_0 | GgmlType::Q8_0) && p.k.is_multiple_of(256) && p.a_align >= 16
}

impl MulMatPlan {
    /// The problem the main kernel reads: the plan's own, or with a replaced by its f16 copy
    /// ([`MulMatPlan::dequantize_a`]: contiguous, 16-byte aligned rows).
    pub fn kernel_problem(&self) -> Problem {
        with_copies(&self.problem, self.dequantize_a.is_some(), self.convert_b.is_some())
    }

    /// The dst tile one workgroup computes (rows along m, columns along n).
    pub fn tile(&self) -> (u32, u32) {
        match &self.path {
            Path::Vec { rows, groups, cols, .. } => (rows * groups, *cols),
            Path::VecMma { config, frag_m, .. } => (frag_m * config.m, config.n),
            Path::Tiled {
                wg_m,
                wg_n,
                thread_m,
                thread_n,
                ..
            } => (wg_m * thread_m, wg_n * thread_n),
            Path::SubgroupMatrix {
                config,
                count_m,
                count_n,
                frag_m,
                frag_n,
                ..
            } => (count_m * frag_m * config.m, count_n * frag_n * config.n),
            Path::Simple { .. } => (1, 1),
        }
    }
}

impl fmt::Display for MulMatPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (tm, tn) = self.tile();
        match &self.path {
            Path::Vec {
                wg_size,
                rows,
                groups,
                cols,
                subgroups,
                kernel,
                int_dot,
                int_slots,
                int_stream,
                prefetch,
                level_table,
                fused_blocks,
                probe,
                b_shared,
                ..
            } => write!(
                f,
                "mat-vec{}: {groups}x{rows} rows x {cols} columns per workgroup of {wg_size}, {} reduction{}{}{}{}{}",
                if *int_slots {
                    " (8-bit b, integer dot products, 16-element slots)"
                } else if *int_stream {
                    " (8-bit b, integer dot products, a read as a stream of 16-byte words)"
                } else if *int_dot {
                    " (8-bit b, integer dot products)"
                } else if !self.problem.a_type.is_quantized() {
                    " (float pairs)"
                } else if *kernel == 0 {
                    " (8-element units)"
                } else {
                    ""
                },
                if *subgroups { "subgroup" } else { "workgroup-memory" },
                if *prefetch { ", next unit prefetched" } else { "" },
                if *level_table {
                    ", 4-bit levels from a workgroup table"
                } else {
                    ""
                },
                if *fused_blocks > 0 {
                    ", b quantized in workgroup memory"
                } else {
                    ""
                },
                if *b_shared > 0 {
                    format!(", b staged {b_shared} pairs a column at a time in workgroup memory")
                } else {
                    String::new()
                },
                match (probe, int_dot) {
                    (0, _) => "",
                    (1, _) => " (probe: loads only, results wrong)",
                    (_, true) => " (probe: b quantized twice)",
                    (_, false) => " (probe: arithmetic without a's loads, results wrong)",
                }
            )?,
            Path::VecMma {
                config,
                split,
                unroll,
                depth,
                wg_size,
                ..
            } => write!(
                f,
                "mat-vec on subgroup matrices {}x{}x{}: {tm} rows per workgroup of {wg_size}, K split over \
                 {split} subgroups, {unroll} steps each per staged round, {depth} rounds' loads in flight",
                config.m, config.n, config.k
            )?,
            Path::Tiled {
                thread_m, thread_n, tk, ..
            } => write!(
                f,
                "register-tiled: tile {tm}x{tn}x{tk}, {thread_m}x{thread_n} per thread, f32 staging"
            )?,
            Path::SubgroupMatrix {
                config,
                count_m,
                count_n,
                frag_m,
                frag_n,
                tk,
                stages,
                prefetch,
                deep_prefetch,
                probe,
                raw_units,
                wg_size,
                scratch_sgs,
                narrow,
                ..
            } => write!(
                f,
                "subgroup-matrix {}x{}x{} ({} accumulators): {}tile {tm}x{tn}x{tk}, {count_m}x{count_n} subgroups \
                 of {frag_m}x{frag_n} results, {stages} stage{}{}{}, workgroup of {wg_size}, edge scratch of \
                 {scratch_sgs}{}",
                config.m,
                config.n,
                config.k,
                if config.f32_result { "f32" } else { "f16" },
                if *narrow { "narrow " } else { "" },
                if *stages == 1 { "" } else { "s" },
                match (prefetch, deep_prefetch) {
                    (true, true) => " with register prefetch two steps ahead",
                    (true, false) => " with register prefetch",
                    _ => "",
                },
                if *raw_units {
                    ", f32 units packed at the store"
                } else {
                    ""
                },
                match probe {
                    0 => "",
                    1 => " (probe: staging only, results wrong)",
                    _ => " (probe: multiplies only, results wrong)",
                },
            )?,
            Path::Simple { reason } => return write!(f, "simple (fallback: {reason})"),
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
        if let Some(q) = &self.dequantize_a {
            write!(
                f,
                "; a converted to f16 first: {} units into {} B of scratch, grid {:?}",
                q.units, q.scratch_bytes, q.grid
            )?;
        }
        if let Some(q) = &self.convert_b {
            write!(
                f,
                "; b converted to f16 first: {} units into {} B of scratch, grid {:?}",
                q.units, q.scratch_bytes, q.grid
            )?;
        }
        if let Some(q) = &self.quantize_b {
            write!(
                f,
                "; b quantized first: {} blocks into {} B of scratch, grid {:?}{}",
                q.blocks,
                q.scratch_bytes,
                q.grid,
                if q.twice { " (twice)" } else { "" }
            )?;
        }
        Ok(())
    }
}

/// Chooses the kernel and tiles for `problem` on `device`.
pub fn plan(problem: &Problem, device: &DeviceFacts, tuning: &Tuning) -> MulMatPlan {
    match fast_path(problem, device, tuning) {
        Ok(plan) => plan,
        Err(reason) => simple(problem, device, reason),
    }
}

fn simple(problem: &Problem, device: &DeviceFacts, reason: String) -> MulMatPlan {
    let outputs = problem.m * problem.n * problem.batches;
    let groups = u32::try_from(outputs.div_ceil(u64::from(SIMPLE_WG))).unwrap_or(u32::MAX);
    MulMatPlan {
        problem: *problem,
        path: Path::Simple { reason },
        tiles_m: 1,
        tiles_n: 1,
        batches: u32::try_from(problem.batches).unwrap_or(u32::MAX),
        grid: grid_2d(groups, device.max_workgroups_per_dim),
        workgroup_bytes: 0,
        b_vec4: false,
        a_vec4: false,
        direct_store: false,
        quantize_b: None,
        dequantize_a: None,
        convert_b: None,
    }
}

fn fast_path(p: &Problem, d: &DeviceFacts, t: &Tuning) -> Result<MulMatPlan, String> {
    // Element indices of dst (and the batch · tile products) must fit 32 bits.
    let outputs = p.m * p.n * p.batches;
    if outputs >= 1 << 32 || p.k >= 1 << 31 {
        return Err(format!("{outputs} outputs or k={} exceed 32-bit indexing", p.k));
    }
    let batches = p.batches as u32;

    // The subgroup-matrix kernel may read f16 copies of a and b made first (by the knobs).
    let (mut dequantize_a, mut convert_b) = (dequantize_a_pass(p, d, t), convert_b_pass(p, d, t));
    let copied = with_copies(p, dequantize_a.is_some(), convert_b.is_some());
    let (path, tiles_m, tiles_n, workgroup_bytes) = if p.n <= u64::from(t.vec_max_n) {
        let choice = vec_mma_path(p, d, t).unwrap_or_else(|| vec_path(p, d, t));
        (dequantize_a, convert_b) = (None, float_b_f16_pass(&choice.0, p, d, t));
        choice
    } else if let Some(sg) = (dequantize_a.is_some() || convert_b.is_some())
        .then(|| subgroup_matrix_path(&copied, d, t))
        .flatten()
    {
        sg
    } else {
        (dequantize_a, convert_b) = (None, None);
        if let Some(sg) = subgroup_matrix_path(p, d, t) {
            sg
        } else {
            tiled_path(p, d, t)?
        }
    };
    let kp = with_copies(p, dequantize_a.is_some(), convert_b.is_some());
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
    let (a_vec4, direct_store) = match &path {
        Path::VecMma { .. } => (true, false),
        Path::SubgroupMatrix { config, .. } => (a_vec4(&kp), p.dst_bytes >= u64::from(config.m * config.n * 4)),
        Path::Vec {
            int_dot: false,
            b_shared: 0,
            ..
        } => (float_a_vec4_on(t, d, p), false),
        Path::Vec {
            int_dot: true,
            int_slots: false,
            int_stream,
            ..
        } => (
            *int_stream || (int_a_vec4_on(t.vec_int_a_vec4, d, p) && int_a_vec4(p)),
            false,
        ),
        _ => (false, false),
    };
    let quantize_b = match path {
        Path::Vec {
            int_dot: true,
            int_slots,
            int_stream,
            probe,
            fused_blocks: 0,
            ..
        } => {
            let scratch_bytes = int_scratch_bytes(p);
            // Within one binding (the path checked), so the block count fits 32 bits.
            let blocks = (scratch_bytes / 48) as u32;
            Some(QuantizeB {
                scratch_bytes,
                blocks,
                grid: grid_2d(blocks.div_ceil(QUANTIZE_WG), d.max_workgroups_per_dim),
                slots: int_slots,
                stream: int_stream,
                twice: probe == 2,
            })
        }
        _ => None,
    };
    let b_vec4 = b_vec4(&kp)
        && match t.b_vec4 {
            0 => false,
            1 => match path {
                Path::SubgroupMatrix { .. } | Path::VecMma { .. } => true,
                // The float mat-vec's 16-byte steps read b 16 bytes at a time too.
                Path::Vec { int_dot: false, .. } if a_vec4 => true,
                // Measured faster for the lookup-table formats' mat-vec only (the float one was
                // slower; the integer one reads b's 8-bit blocks, not b).
                Path::Vec { .. } => matches!(
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
                Path::Tiled { .. } | Path::Simple { .. } => false,
            },
            _ => true,
        };
    Ok(MulMatPlan {
        problem: *p,
        path,
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

/// Where the f16 copies of a and b start by default on GPUs: wherever the subgroup-matrix
/// kernel runs (n > `vec_max_n`). H100, m=4096 k=14336 (BENCHMARKS.md, 2026-12-05): both
/// copies took q4_K from 891 to 373 us at n=64 and from 565 to 305 at n=16 (the narrow tile
/// decodes every block of a for a few columns), q4_K / f16 at n=512 from 772 / 567 to 478 / 388.
pub const SG_COPY_MIN_N: u32 = 9;

/// The n from which a copy knob makes its copy (`u64::MAX`: never).
fn copy_min_n(knob: u32, d: &DeviceFacts) -> u64 {
    match knob {
        0 if d.cpu() => u64::MAX,
        0 => u64::from(SG_COPY_MIN_N),
        n => u64::from(n),
    }
}

/// The f16 copy of a quantized a, if [`Tuning::sg_a_f16_min_n`] asks for one at this n.
fn dequantize_a_pass(p: &Problem, d: &DeviceFacts, t: &Tuning) -> Option<F16Copy> {
    if p.n < copy_min_n(t.sg_a_f16_min_n, d) || !p.a_type.is_quantized() {
        return None;
    }
    f16_copy([p.a_batches, p.m, p.k], d)
}

/// The f16 copy of an f32 b, if [`Tuning::sg_b_f16_min_n`] asks for one at this n.
fn convert_b_pass(p: &Problem, d: &DeviceFacts, t: &Tuning) -> Option<F16Copy> {
    if p.n < copy_min_n(t.sg_b_f16_min_n, d) || p.b_type != GgmlType::F32 {
        return None;
    }
    f16_copy([p.batches, p.n, p.k], d)
}

/// The float mat-vec's f16 copy of an f32 b ([`Tuning::vec_b_f16_min_n`]), where `path` is the
/// float mat-vec reading f16 or bf16 rows of a as 16-byte words.
fn float_b_f16_pass(path: &Path, p: &Problem, d: &DeviceFacts, t: &Tuning) -> Option<F16Copy> {
    let wanted = matches!(
        path,
        Path::Vec {
            int_dot: false,
            b_shared: 0,
            ..
        }
    ) && float_a_vec4_on(t, d, p)
        && matches!(p.a_type, GgmlType::F16 | GgmlType::BF16)
        && p.b_type == GgmlType::F32
        && t.vec_b_f16_min_n > 0
        && p.n >= u64::from(t.vec_b_f16_min_n);
    wanted.then(|| f16_copy([p.batches, p.n, p.k], d)).flatten()
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
fn with_copies(p: &Problem, a: bool, b: bool) -> Problem {
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

type Choice = (Path, u32, u32, u32);

/// Formats the integer mat-vec reads by default (`mul_mat_vec_q8.wgsl`; iq4_nl, iq4_xs, mxfp4
/// and nvfp4 too with [`Tuning::vec_int_iq4nl`], [`Tuning::vec_int_iq4xs`] and
/// [`Tuning::vec_int_fp4`]).
pub fn has_int_dot(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(ty, Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q2_K | Q3_K | Q4_K | Q5_K | Q6_K)
}

/// Bytes of b's 8-bit blocks for the integer mat-vec: 48 per 32 elements (the slot kernel's
/// interleaved layout takes 36 of them).
pub fn int_scratch_bytes(p: &Problem) -> u64 {
    p.batches * p.n * (p.k / 32) * 48
}

/// [`Path::VecMma`], where [`Tuning::vec_mma`] asks for it and the problem allows: f16 a whose
/// rows are whole 16-byte words at 16-byte offsets (staged as such), an f16 config with f32
/// results (k in the thousands would lose too much in f16 sums), k whole K steps, n within
/// one right matrix, and the staging within the device's workgroup memory.
fn vec_mma_path(p: &Problem, d: &DeviceFacts, t: &Tuning) -> Option<Choice> {
    let wanted = match t.vec_mma {
        1 => true,
        2 => !d.cpu() && p.n >= u64::from(t.vec_mma_min_n),
        _ => false,
    };
    let c = d.subgroup_matrix?;
    if !wanted || p.a_type != GgmlType::F16 || !a_vec4(p) || !d.shader_f16 || !d.subgroups {
        return None;
    }
    if !c.f32_result || c.m == 0 || c.n == 0 || !c.k.is_multiple_of(8) || d.subgroup_max_size == 0 {
        return None;
    }
    let rows = c.m * t.vec_mma_frag_m;
    if p.n > u64::from(c.n) || !p.k.is_multiple_of(u64::from(c.k)) {
        return None;
    }
    let wg_size = t.vec_mma_split * d.subgroup_max_size;
    // The staging: each subgroup's run of `unroll` steps (a 16-byte word of 8 halves per 8
    // elements) plus a word of padding, for its rows of a and the config's columns of b; then
    // the partial results, f32.
    let run_words = t.vec_mma_unroll * c.k / 8 + 1;
    let workgroup_bytes = t.vec_mma_split * ((rows + c.n) * run_words * 16 + rows * c.n * 4);
    if wg_size > d.max_invocations || wg_size > d.max_workgroup_size_x || workgroup_bytes > d.max_workgroup_storage {
        return None;
    }
    let path = Path::VecMma {
        config: c,
        split: t.vec_mma_split,
        frag_m: t.vec_mma_frag_m,
        unroll: t.vec_mma_unroll,
        depth: t.vec_mma_depth,
        wg_size,
    };
    Some((
        path,
        u32::try_from(p.m.div_ceil(u64::from(rows))).ok()?,
        1,
        workgroup_bytes,
    ))
}

fn vec_path(p: &Problem, d: &DeviceFacts, t: &Tuning) -> Choice {
    let cols = p.n.max(1) as u32;
    let super_blocks = p.a_type.block_size() >= 256;
    let iq4nl = p.a_type == GgmlType::IQ4_NL && knob_on(t.vec_int_iq4nl, d);
    let iq4xs = p.a_type == GgmlType::IQ4_XS && knob_on(t.vec_int_iq4xs, d);
    let fp4 = matches!(p.a_type, GgmlType::MXFP4 | GgmlType::NVFP4) && int_fp4_on(t, d, p);
    // mxfp4's 17-byte blocks are read at any byte, so its rows need no alignment.
    let mxfp4 = fp4 && p.a_type == GgmlType::MXFP4;
    // Formats whose nibbles index 16 levels (their bytes mapped to the levels, then as the rest).
    let four_bit_levels = iq4nl || iq4xs || fp4;
    let int_dot = (has_int_dot(p.a_type) || four_bit_levels)
        && p.n <= u64::from(t.vec_int_max_n)
        && (p.a_align >= 2 || mxfp4)
        && p.k > 0
        && p.k.is_multiple_of(32)
        && int_scratch_bytes(p) <= d.max_storage_binding;
    let slots_min_n = match t.vec_int_slots_min_n {
        0 if d.cpu() => 4,
        0 => 2,
        n => n,
    };
    // The slot kernel reads the K-quants only (iq4_xs's units are whole sub-blocks).
    let k_quants = has_int_dot(p.a_type) && super_blocks;
    let int_slots = int_dot && k_quants && p.n >= u64::from(slots_min_n) && p.k.is_multiple_of(128);
    let signed_k = matches!(p.a_type, GgmlType::Q3_K | GgmlType::Q6_K);
    let q8_0_n1 = int_dot && p.a_type == GgmlType::Q8_0 && cols == 1 && knob_on(t.vec_int_q8_0_n1, d);
    let rows = match (cols <= 4, super_blocks) {
        _ if int_slots && signed_k && cols >= 8 => t.vec_int_slot_rows_q36,
        _ if int_slots && cols >= 4 => t.vec_int_slot_rows_wide,
        _ if int_slots => t.vec_int_slot_rows,
        _ if int_dot && super_blocks => t.vec_int_rows_k,
        _ if q8_0_n1 => 1,
        _ if int_dot => t.vec_int_rows,
        (true, false) => t.vec_rows,
        (false, false) => t.vec_rows_wide,
        (true, true) => t.vec_rows_k,
        (false, true) => t.vec_rows_wide_k,
    };
    let wg_size = t.vec_wg.min(d.max_invocations).min(d.max_workgroup_size_x);
    // A power of two (the workgroup-memory tree halves it).
    let wg_size: u32 = 1 << (31 - wg_size.max(1).leading_zeros());
    let subgroups = d.subgroups && d.subgroup_min_size > 0;
    // A group must hold whole subgroups (each subgroup's sums belong to one group's rows).
    let min_group = if subgroups { d.subgroup_max_size.max(1) } else { 1 };
    let mut groups = match (int_dot, cols <= 4) {
        (true, _) if int_slots && signed_k && cols >= 8 => t.vec_int_slot_groups_q36,
        (true, _) if int_slots => t.vec_int_slot_groups,
        (true, _) if p.a_type == GgmlType::Q6_K => match t.vec_int_groups_q6k {
            0 if d.cpu() => t.vec_int_groups_k,
            0 => 8,
            g => g,
        },
        (true, _) if super_blocks => t.vec_int_groups_k,
        (true, _) if q8_0_n1 => 2,
        (true, _) => t.vec_int_groups,
        (false, true) => t.vec_groups,
        (false, false) => t.vec_groups_wide,
    };
    let mut rows = rows;
    if !p.a_type.is_quantized() {
        // Halves read 8 a lane per row as 16-byte words (the float path without staged b).
        let halves_vec4 = matches!(p.a_type, GgmlType::F16 | GgmlType::BF16)
            && float_a_vec4_on(t, d, p)
            && (t.vec_b_shared == 0 || cols < 2);
        let acc_max = if halves_vec4 {
            t.vec_acc_max_halves
        } else {
            t.vec_acc_max
        };
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
    let level_table = int_dot && four_bit_levels && knob_on(t.vec_int_lut, d);
    let bytes = if level_table { bytes + 1024 } else { bytes };
    // b quantized in workgroup memory at n=1 (the units kernel), where its blocks fit.
    let fused_bytes = (p.k / 32) * 48;
    let fused = t.vec_int_fused == 1
        && int_dot
        && !int_slots
        && cols == 1
        && u64::from(bytes) + fused_bytes <= u64::from(d.max_workgroup_storage);
    let (fused_blocks, bytes) = if fused {
        ((p.k / 32) as u32, bytes + fused_bytes as u32)
    } else {
        (0, bytes)
    };
    // b's columns staged in workgroup memory (the float kernel, several columns), in chunks
    // halved until they fit beside the reduction buffer.
    let mut b_shared = if !int_dot && !p.a_type.is_quantized() && cols >= 2 {
        t.vec_b_shared
    } else {
        0
    };
    while b_shared > 0 && bytes + cols * b_shared * 8 > d.max_workgroup_storage {
        b_shared /= 2;
    }
    let bytes = bytes + cols * b_shared * 8;
    // The byte stream for q4_0 / q8_0 where the rows allow it (its b layout fits the scratch of
    // the 48-byte blocks: 34 or 36 bytes of stream and 4 of scale per 32 elements).
    let int_stream = int_dot && !int_slots && fused_blocks == 0 && knob_on(t.vec_int_stream, d) && int_stream(p);
    let tiles_m = (p.m.div_ceil(u64::from(rows * groups))) as u32;
    let path = Path::Vec {
        wg_size,
        rows,
        groups,
        cols,
        subgroups,
        max_subgroups,
        kernel: match t.vec_kernel {
            _ if int_dot => 0,
            2 => u32::from(p.a_type == GgmlType::Q6_K),
            k => k,
        },
        int_dot,
        int_slots,
        int_stream,
        prefetch: int_dot && !int_stream && int_prefetch_on(t.vec_int_prefetch, d, p),
        level_table,
        fused_blocks,
        probe: if int_dot || !p.a_type.is_quantized() {
            t.vec_int_probe
        } else {
            0
        },
        b_shared,
    };
    (path, tiles_m, 1, bytes)
}

fn tiled_path(p: &Problem, d: &DeviceFacts, t: &Tuning) -> Result<Choice, String> {
    let (mut wg_m, mut wg_n) = (t.tiled_wg_m, t.tiled_wg_n);
    while wg_m * wg_n > d.max_invocations.min(d.max_workgroup_size_x) && (wg_m > 1 || wg_n > 1) {
        if wg_m >= wg_n { wg_m /= 2 } else { wg_n /= 2 }
    }
    let (tm, tn) = (wg_m * t.tiled_thread_m, wg_n * t.tiled_thread_n);
    let mut tk = t.tiled_tk;
    let bytes = |tk: u32| 2 * tk * ((tm + t.tiled_pad) + (tn + t.tiled_pad)) * 4;
    while bytes(tk) > d.max_workgroup_storage && tk > 8 {
        tk /= 2;
    }
    if bytes(tk) > d.max_workgroup_storage {
        return Err(format!("the register tile needs {} B of workgroup memory", bytes(tk)));
    }
    let path = Path::Tiled {
        wg_m,
        wg_n,
        thread_m: t.tiled_thread_m,
        thread_n: t.tiled_thread_n,
        tk,
        pad: t.tiled_pad,
    };
    Ok((
        path,
        p.m.div_ceil(u64::from(tm)) as u32,
        p.n.div_ceil(u64::from(tn)) as u32,
        bytes(tk),
    ))
}

/// Bytes of workgroup memory of the subgroup-matrix kernel.
fn sg_staging_bytes(c: &MatrixConfig, counts: (u32, u32), frags: (u32, u32), tk: u32, pad: u32, stages: u32) -> u32 {
    let (tm, tn) = (counts.0 * frags.0 * c.m, counts.1 * frags.1 * c.n);
    stages * (tm + tn) * (tk + pad) * 2
}

/// Bytes of one result matrix in the edge scratch.
fn sg_scratch_bytes(c: &MatrixConfig) -> u32 {
    c.m * c.n * if c.f32_result { 4 } else { 2 }
}

/// Staging plus a scratch of one result matrix: what must fit.
fn sg_bytes(c: &MatrixConfig, counts: (u32, u32), frags: (u32, u32), tk: u32, pad: u32, stages: u32) -> u32 {
    sg_staging_bytes(c, counts, frags, tk, pad, stages) + sg_scratch_bytes(c)
}

/// [`Tuning::sg_tk`]'s and [`Tuning::sg_stages`]'s defaults on GPUs and on CPU adapters.
const SG_TK: u32 = 64;
const SG_TK_CPU: u32 = 8;
const SG_STAGES: u32 = 1;
const SG_STAGES_CPU: u32 = 2;

fn subgroup_matrix_path(p: &Problem, d: &DeviceFacts, t: &Tuning) -> Option<Choice> {
    let c = d.subgroup_matrix?;
    // f32 accumulators where the adapter offers them, unless `sg_acc_f16` asks for f16 ones.
    let c = MatrixConfig {
        f32_result: c.f32_result && !(t.sg_acc_f16 == 1 && c.f16_result),
        ..c
    };
    // Workgroup memory is read in 16-byte chunks of 8 halves, so K steps by whole chunks.
    if !d.shader_f16 || !d.subgroups || c.m == 0 || c.n == 0 || c.k == 0 || !c.k.is_multiple_of(8) {
        return None;
    }
    let sg_size = d.subgroup_max_size;
    if sg_size == 0 {
        return None;
    }
    let narrow = p.n <= u64::from(t.small_n_max);
    // Subgroups, and fragments per subgroup, along m and n.
    let (mut counts, mut frags) = if narrow {
        let frag_n = (p.n as u32).div_ceil(c.n).max(1);
        ((t.sg_small_count_m, 1), (t.sg_small_frag_m, frag_n))
    } else {
        let frag = |target: u32, count: u32, size: u32| (target / (count * size)).max(1);
        (
            (t.sg_count_m, t.sg_count_n),
            (
                frag(t.sg_tile_m, t.sg_count_m, c.m),
                frag(t.sg_tile_n, t.sg_count_n, c.n),
            ),
        )
    };
    // Accumulator registers: each result holds m·n/sg_size words (f16 results pack two).
    let words = (c.m * c.n)
        .div_ceil(sg_size)
        .div_ceil(if c.f32_result { 1 } else { 2 })
        .max(1);
    // (Halving the fragments of the longer tile side keeps the tile square-ish.)
    let longer_m = |counts: (u32, u32), frags: (u32, u32)| {
        (frags.1 == 1 || counts.0 * frags.0 * c.m >= counts.1 * frags.1 * c.n) && frags.0 > 1
    };
    while frags.0 * frags.1 * words > t.sg_acc_regs && (frags.0 > 1 || frags.1 > 1) {
        if longer_m(counts, frags) {
            frags.0 /= 2
        } else {
            frags.1 /= 2
        }
    }
    // Enough workgroups to fill the device: halve the tile (fragments first, then subgroups;
    // the narrow tile only along m, so a stays read once) while the grid is short of
    // `sg_min_workgroups`.
    let groups = |counts: (u32, u32), frags: (u32, u32)| {
        let (tm, tn) = (counts.0 * frags.0 * c.m, counts.1 * frags.1 * c.n);
        p.m.div_ceil(u64::from(tm)) * p.n.div_ceil(u64::from(tn)) * p.batches
    };
    while groups(counts, frags) < u64::from(t.sg_min_workgroups) {
        let (tm, tn) = (counts.0 * frags.0 * c.m, counts.1 * frags.1 * c.n);
        let along_m = narrow || tm >= tn;
        if along_m && frags.0 > 1 {
            frags.0 /= 2;
        } else if !along_m && frags.1 > 1 {
            frags.1 /= 2;
        } else if along_m && counts.0 > 1 {
            counts.0 /= 2;
        } else if !along_m && counts.1 > 1 {
            counts.1 /= 2;
        } else {
            break;
        }
    }
    // The workgroup: a multiple of the largest subgroup size, within the limits.
    let max_wg = d.max_invocations.min(d.max_workgroup_size_x);
    while counts.0 * counts.1 * sg_size > max_wg && counts.0 * counts.1 > 1 {
        if counts.0 >= counts.1 {
            counts.0 /= 2
        } else {
            counts.1 /= 2
        }
    }
    if counts.0 * counts.1 * sg_size > max_wg {
        return None;
    }
    // K step: a multiple of the config's K and of 8 (the dequantization unit).
    let unit = lcm(c.k, 8);
    let sg_tk = match t.sg_tk {
        0 if d.cpu() => SG_TK_CPU,
        0 => SG_TK,
        k => k,
    };
    let mut tk = sg_tk.max(unit).next_multiple_of(unit);
    let pad = t.sg_pad;
    let sg_stages = match t.sg_stages {
        0 if d.cpu() => SG_STAGES_CPU,
        0 => SG_STAGES,
        s => s,
    };
    let mut stages = sg_stages;
    // Shrink until the workgroup memory fits: K step, then single buffering, then fragments.
    let limit = d.max_workgroup_storage;
    loop {
        if sg_bytes(&c, counts, frags, tk, pad, stages) <= limit {
            break;
        }
        if tk > unit {
            tk = (tk / 2).next_multiple_of(unit).max(unit);
            if sg_bytes(&c, counts, frags, tk, pad, stages) <= limit {
                break;
            }
            continue;
        }
        if stages > 1 {
            stages = 1;
            tk = sg_tk.max(unit).next_multiple_of(unit);
            continue;
        }
        if frags.0 > 1 || frags.1 > 1 {
            if longer_m(counts, frags) {
                frags.0 /= 2
            } else {
                frags.1 /= 2
            }
            tk = sg_tk.max(unit).next_multiple_of(unit);
            stages = sg_stages;
            continue;
        }
        if counts.0 * counts.1 > 1 {
            if counts.0 >= counts.1 {
                counts.0 /= 2
            } else {
                counts.1 /= 2
            }
            continue;
        }
        return None;
    }
    // The edge scratch takes what is left, up to one matrix per subgroup.
    let staging = sg_staging_bytes(&c, counts, frags, tk, pad, stages);
    let mut scratch_sgs = ((limit - staging) / sg_scratch_bytes(&c)).clamp(1, counts.0 * counts.1);
    if t.sg_scratch_max > 0 {
        scratch_sgs = scratch_sgs.min(t.sg_scratch_max);
    }
    let bytes = staging + scratch_sgs * sg_scratch_bytes(&c);
    let path = Path::SubgroupMatrix {
        config: c,
        count_m: counts.0,
        count_n: counts.1,
        frag_m: frags.0,
        frag_n: frags.1,
        tk,
        pad,
        stages,
        prefetch: stages == 1 && t.sg_prefetch >= 1,
        deep_prefetch: stages == 1 && t.sg_prefetch == 2,
        probe: t.sg_probe,
        raw_units: knob_on(t.sg_raw_units, d),
        wg_size: counts.0 * counts.1 * sg_size,
        scratch_sgs,
        narrow,
    };
    let (tm, tn) = (counts.0 * frags.0 * c.m, counts.1 * frags.1 * c.n);
    Some((
        path,
        p.m.div_ceil(u64::from(tm)) as u32,
        p.n.div_ceil(u64::from(tn)) as u32,
        bytes,
    ))
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: u32, b: u32) -> u32 {
    a / gcd(a, b) * b
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::facts::DeviceClass;
    use crate::facts::presets::{self, lavapipe};

    fn nvidia(config: (u32, u32, u32)) -> DeviceFacts {
        presets::with_config(presets::h100(), config)
    }

    fn problem(a_type: GgmlType, m: u64, n: u64, k: u64) -> Problem {
        Problem {
            a_type,
            b_type: GgmlType::F32,
            m,
            n,
            k,
            batches: 1,
            a_batches: 1,
            a_align: 4,
            b_align: 4,
            b_contiguous: true,
            dst_bytes: m * n * 4,
        }
    }

    type SgShape = (MatrixConfig, (u32, u32), (u32, u32), u32, u32, u32, bool);

    fn sg_shape(plan: &MulMatPlan) -> SgShape {
        match plan.path {
            Path::SubgroupMatrix {
                config,
                count_m,
                count_n,
                frag_m,
                frag_n,
                tk,
                stages,
                wg_size,
                narrow,
                ..
            } => (
                config,
                (count_m, count_n),
                (frag_m, frag_n),
                tk,
                stages,
                wg_size,
                narrow,
            ),
            ref other => panic!("not the subgroup-matrix path: {other:?}"),
        }
    }

    #[test]
    fn gpus_stage_f16_copies_of_quantized_a_and_f32_b_and_cpus_do_not() {
        let t = Tuning::default();
        let gpu = nvidia((16, 8, 16));
        let q = plan(&problem(GgmlType::Q4_K, 4096, 512, 14336), &gpu, &t);
        assert!(matches!(q.path, Path::SubgroupMatrix { raw_units: true, .. }), "{q}");
        let (a, b) = (q.dequantize_a.expect("a's copy"), q.convert_b.expect("b's copy"));
        assert_eq!(a.scratch_bytes, 4096 * 14336 * 2);
        assert_eq!(b.scratch_bytes, 512 * 14336 * 2);
        assert_eq!(u64::from(a.units) * 16, a.scratch_bytes);
        let kp = q.kernel_problem();
        assert_eq!(
            (kp.a_type, kp.b_type, kp.a_align, kp.b_align),
            (GgmlType::F16, GgmlType::F16, 16, 16)
        );
        assert!(q.a_vec4 && q.b_vec4, "{q}");
        // Float a: only b's copy; n=9 is the first n the subgroup-matrix kernel takes.
        let f = plan(&problem(GgmlType::F16, 4096, 9, 14336), &gpu, &t);
        assert!(f.dequantize_a.is_none() && f.convert_b.is_some(), "{f}");
        // Mat-vec n, CPU adapters, a switched-off knob, k off the 8-element grid, and copies
        // over the binding limit: none.
        assert!(
            plan(&problem(GgmlType::Q4_K, 4096, 8, 14336), &gpu, &t)
                .dequantize_a
                .is_none()
        );
        let cpu = plan(&problem(GgmlType::Q4_K, 512, 512, 1024), &lavapipe(), &t);
        assert!(cpu.dequantize_a.is_none() && cpu.convert_b.is_none(), "{cpu}");
        assert!(
            matches!(cpu.path, Path::SubgroupMatrix { raw_units: false, .. }),
            "{cpu}"
        );
        let off = Tuning::parse("sg_a_f16_min_n=1048576,sg_b_f16_min_n=1048576").unwrap();
        let o = plan(&problem(GgmlType::Q4_K, 4096, 512, 14336), &gpu, &off);
        assert!(o.dequantize_a.is_none() && o.convert_b.is_none(), "{o}");
        let odd = plan(&problem(GgmlType::F32, 64, 64, 36), &gpu, &t);
        assert!(odd.convert_b.is_none(), "{odd}");
        let tight = DeviceFacts {
            max_storage_binding: 1 << 26,
            ..gpu
        };
        let big = plan(&problem(GgmlType::Q4_K, 4096, 512, 14336), &tight, &t);
        assert!(big.dequantize_a.is_none() && big.convert_b.is_some(), "{big}");
    }

    #[test]
    fn b_is_read_as_16_byte_words_where_it_measured_faster() {
        let d = nvidia((16, 16, 16));
        let no_sg = DeviceFacts {
            subgroup_matrix: None,
            ..d
        };
        let vec4 = |ty: GgmlType, n: u64, d: &DeviceFacts, t: &Tuning| {
            let mut p = problem(ty, 4096, n, 14336);
            p.b_align = 16;
            plan(&p, d, t).b_vec4
        };
        let t = Tuning::default();
        assert!(vec4(GgmlType::F16, 512, &d, &t), "subgroup-matrix");
        assert!(vec4(GgmlType::IQ4_XS, 1, &d, &t), "mat-vec of a lookup-table format");
        assert!(!vec4(GgmlType::Q1_0, 1, &d, &t), "not measured: words");
        assert!(!vec4(GgmlType::F16, 8, &d, &t), "float mat-vec");
        assert!(!vec4(GgmlType::F16, 512, &no_sg, &t), "register-tiled");
        let all = Tuning::parse("b_vec4=2").unwrap();
        assert!(vec4(GgmlType::F16, 8, &d, &all) && vec4(GgmlType::F16, 512, &no_sg, &all));
        let none = Tuning::parse("b_vec4=0").unwrap();
        assert!(!vec4(GgmlType::F16, 512, &d, &none) && !vec4(GgmlType::IQ4_XS, 1, &d, &none));
        // A layout that does not allow it is never read so, whatever the knob (unless the kernel
        // reads b's f16 copy instead).
        let mut p = problem(GgmlType::F16, 4096, 512, 14336);
        p.b_align = 4;
        let uncopied = Tuning::parse("b_vec4=2,sg_b_f16_min_n=1048576").unwrap();
        assert!(!plan(&p, &d, &uncopied).b_vec4);
        assert!(plan(&p, &d, &all).b_vec4);
    }

    #[test]
    fn nvidia_16x16x16_gets_128_square_tiles_one_deep_stage() {
        let plan = plan(
            &problem(GgmlType::F16, 4096, 2048, 14336),
            &nvidia((16, 16, 16)),
            &Tuning::default(),
        );
        let (_, counts, frags, tk, stages, wg, narrow) = sg_shape(&plan);
        assert_eq!(
            (counts, frags, tk, stages, wg, narrow),
            ((4, 4), (2, 2), 64, 1, 512, false)
        );
        assert!(
            matches!(plan.path, Path::SubgroupMatrix { prefetch: true, .. }),
            "{plan}"
        );
        assert_eq!(plan.tile(), (128, 128));
        assert_eq!((plan.tiles_m, plan.tiles_n), (32, 16));
        assert!(plan.workgroup_bytes <= 49152, "{plan}");
    }

    #[test]
    fn edge_scratch_takes_what_staging_leaves() {
        let scratch = |t: &Tuning| match plan(&problem(GgmlType::F16, 4096, 512, 14336), &nvidia((16, 16, 16)), t).path
        {
            Path::SubgroupMatrix { scratch_sgs, tk, .. } => (scratch_sgs, tk),
            ref other => panic!("{other:?}"),
        };
        // 4x4 subgroups, one stage of 256 rows x 72 halves: 36864 B leave room for 12 of the
        // 16 (1 KiB each), which take turns in two rounds.
        assert_eq!(scratch(&Tuning::default()), (12, 64));
        // Two stages of 256 rows x 40 halves: 40960 B leave room for 8.
        let t = Tuning::parse("sg_tk=32,sg_stages=2").unwrap();
        assert_eq!(scratch(&t), (8, 32));
        // 2x4 subgroups: one stage of 36864 B leaves room for all 8.
        let t = Tuning::parse("sg_count_m=2,sg_count_n=4").unwrap();
        assert_eq!(scratch(&t), (8, 64));
        let t = Tuning::parse("sg_scratch_max=1").unwrap();
        assert_eq!(scratch(&t), (1, 64));
    }

    #[test]
    fn small_grids_get_smaller_tiles() {
        let d = nvidia((16, 16, 16));
        // 4096 x 512 in 128 x 128 tiles is 128 workgroups, fewer than an H200's 132
        // multiprocessors: the tile halves along m.
        // multiprocessors: with `sg_min_workgroups=256` the tile halves along m (off by default:
        // measured slower).
        let on = Tuning::parse("sg_min_workgroups=256").unwrap();
        let plan = plan(&problem(GgmlType::Q4_0, 4096, 512, 14336), &d, &on);
        assert_eq!(plan.tile(), (64, 128), "{plan}");
        assert_eq!(plan.tiles_m * plan.tiles_n, 256);
        let off = Tuning::default();
        assert_eq!(
            super::plan(&problem(GgmlType::Q4_0, 4096, 512, 14336), &d, &off).tile(),
            (128, 128)
        );
        // The narrow tile shrinks along m only.
        let narrow = super::plan(&problem(GgmlType::Q4_0, 4096, 40, 14336), &d, &on);
        assert_eq!(narrow.tile(), (16, 48), "{narrow}");
        assert_eq!(
            super::plan(&problem(GgmlType::Q4_0, 4096, 40, 14336), &d, &off).tile(),
            (64, 48)
        );
    }

    #[test]
    fn non_square_16x8x16_config_keeps_the_tile_and_the_limit() {
        let d = nvidia((16, 8, 16));
        let plan = plan(&problem(GgmlType::Q4_0, 4096, 2048, 14336), &d, &Tuning::default());
        let (c, counts, frags, tk, _, wg, _) = sg_shape(&plan);
        assert_eq!((c.m, c.n, c.k), (16, 8, 16));
        assert_eq!(plan.tile(), (128, 128), "{plan}");
        assert_eq!((counts, frags, wg), ((4, 4), (2, 4), 512));
        assert!(tk.is_multiple_of(16));
        assert!(plan.workgroup_bytes <= 49152);
        // The narrow tile for small n: columns in steps of the config's n (8).
        let off = Tuning::parse("sg_min_workgroups=0").unwrap();
        let narrow = super::plan(&problem(GgmlType::Q4_0, 4096, 20, 14336), &d, &off);
        let (_, counts, frags, _, _, _, narrow_flag) = sg_shape(&narrow);
        assert!(narrow_flag);
        assert_eq!((counts, frags), ((4, 1), (1, 3)));
        assert_eq!(narrow.tile(), (64, 24));
    }

    #[test]
    fn intel_8x16x16_and_16x8x8() {
        for (cfg, sg) in [((8, 16, 16), 16), ((16, 8, 8), 32)] {
            let d = DeviceFacts {
                subgroup_min_size: 8,
                subgroup_max_size: sg,
                ..nvidia(cfg)
            };
            let plan = plan(&problem(GgmlType::F16, 1000, 300, 999), &d, &Tuning::default());
            let (c, counts, _, tk, _, wg, _) = sg_shape(&plan);
            assert_eq!((c.m, c.n, c.k), cfg);
            assert_eq!(wg, counts.0 * counts.1 * sg);
            assert!(tk.is_multiple_of(cfg.2) && tk.is_multiple_of(8));
            assert!(plan.workgroup_bytes <= d.max_workgroup_storage);
        }
    }

    #[test]
    fn lavapipe_8x8x8_fits_32k() {
        let off = Tuning::parse("sg_min_workgroups=0,sg_count_m=2,sg_count_n=4,sg_tk=32").unwrap();
        let plan = plan(&problem(GgmlType::Q4_K, 300, 100, 512), &lavapipe(), &off);
        let (_, counts, frags, tk, stages, wg, _) = sg_shape(&plan);
        assert_eq!((counts, frags, tk, stages, wg), ((2, 4), (4, 2), 32, 2, 64));
        assert_eq!(plan.tile(), (64, 64));
        assert!(plan.workgroup_bytes <= 32768);
        // The default 4x4 subgroups: 8 accumulators of 8 words each per subgroup; a CPU
        // adapter's K step of 8.
        let plan = super::plan(&problem(GgmlType::Q4_K, 300, 100, 512), &lavapipe(), &Tuning::default());
        let (_, counts, frags, tk, stages, wg, _) = sg_shape(&plan);
        assert_eq!((counts, frags, tk, stages, wg), ((4, 4), (2, 4), 8, 2, 128));
        assert!(plan.workgroup_bytes <= 32768);
        // Two 32-deep stages fit as well.
        let two = Tuning::parse("sg_tk=32,sg_stages=2").unwrap();
        let plan = super::plan(&problem(GgmlType::Q4_K, 300, 100, 512), &lavapipe(), &two);
        let (_, counts, frags, tk, stages, wg, _) = sg_shape(&plan);
        assert_eq!((counts, frags, tk, stages, wg), ((4, 4), (2, 4), 32, 2, 128));
        assert!(plan.workgroup_bytes <= 32768);
        // A GPU with lavapipe's limits takes the GPU's one 64-element stage.
        let gpu = DeviceFacts {
            class: DeviceClass::NvidiaHopper,
            ..lavapipe()
        };
        let plan = super::plan(&problem(GgmlType::Q4_K, 300, 100, 512), &gpu, &Tuning::default());
        assert_eq!((sg_shape(&plan).3, sg_shape(&plan).4), (64, 1));
    }

    #[test]
    fn workgroup_memory_never_exceeds_the_limit() {
        let configs = [
            (8, 8, 8),
            (16, 16, 16),
            (16, 8, 16),
            (16, 8, 8),
            (8, 16, 16),
            (32, 32, 16),
        ];
        for limit in [4096, 8192, 12288, 16384, 24576, 32768, 49152, 65536] {
            for &cfg in &configs {
                for f32_result in [false, true] {
                    for sg in [4, 8, 16, 32, 64, 128] {
                        for n in [9, 33, 64, 65, 512] {
                            let mut d = nvidia(cfg);
                            d.max_workgroup_storage = limit;
                            d.subgroup_max_size = sg;
                            d.subgroup_min_size = sg;
                            d.subgroup_matrix.as_mut().unwrap().f32_result = f32_result;
                            let plan = plan(&problem(GgmlType::Q6_K, 777, n, 2048), &d, &Tuning::default());
                            assert!(plan.workgroup_bytes <= limit, "{cfg:?} {limit} {sg}: {plan}");
                            if let Path::SubgroupMatrix { wg_size, .. } = plan.path {
                                assert!(wg_size.is_multiple_of(sg) && wg_size <= 1024);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn small_n_runs_mat_vec_and_the_rest_picks_by_capability() {
        let d = nvidia((16, 16, 16));
        let t = Tuning::default();
        for n in 1..=8 {
            let plan = plan(&problem(GgmlType::Q4_0, 4096, n, 14336), &d, &t);
            let Path::Vec {
                rows,
                groups,
                cols,
                subgroups,
                ..
            } = plan.path
            else {
                panic!("{plan}")
            };
            assert_eq!(cols as u64, n);
            assert!(subgroups);
            assert_eq!(plan.tiles_m, 4096 / (rows * groups));
        }
        let no_sg = DeviceFacts {
            subgroup_matrix: None,
            ..d
        };
        let tiled = plan(&problem(GgmlType::F32, 100, 100, 100), &no_sg, &t);
        assert!(matches!(tiled.path, Path::Tiled { .. }), "{tiled}");
        assert_eq!((tiled.tiles_m, tiled.tiles_n), (2, 2));
        // No subgroups at all: the workgroup-memory reduction.
        let bare = DeviceFacts {
            subgroups: false,
            ..no_sg
        };
        let v = plan(&problem(GgmlType::F16, 100, 3, 100), &bare, &t);
        assert!(matches!(v.path, Path::Vec { subgroups: false, .. }), "{v}");
        assert_eq!(v.workgroup_bytes, 4 * 256);
    }

    #[test]
    fn b_is_staged_only_for_the_float_mat_vec_of_several_columns_and_only_as_much_as_fits() {
        let d = nvidia((16, 16, 16));
        let t = Tuning::parse("vec_b_shared=512").unwrap();
        let staged = |ty: GgmlType, n: u64, d: &DeviceFacts| {
            let plan = plan(&problem(ty, 4096, n, 14336), d, &t);
            let Path::Vec { b_shared, .. } = plan.path else {
                panic!("{plan}")
            };
            assert!(plan.workgroup_bytes <= d.max_workgroup_storage, "{plan}");
            b_shared
        };
        assert_eq!(staged(GgmlType::F16, 8, &d), 512);
        assert_eq!(staged(GgmlType::F32, 2, &d), 512);
        assert_eq!(staged(GgmlType::F16, 1, &d), 0);
        assert_eq!(staged(GgmlType::Q4_0, 8, &d), 0);
        assert_eq!(staged(GgmlType::IQ4_NL, 8, &d), 0);
        // 8 columns of 512 pairs are 32 KiB: halved to fit 16 KiB with the reduction buffer.
        let small = DeviceFacts {
            max_workgroup_storage: 16384,
            ..d
        };
        assert_eq!(staged(GgmlType::F16, 8, &small), 128);
        // The reduction buffer (2048 B) fits, no chunk beside it: b read through the cache.
        assert_eq!(
            staged(
                GgmlType::F16,
                8,
                &DeviceFacts {
                    max_workgroup_storage: 2100,
                    ..d
                }
            ),
            0
        );
        assert!(Tuning::parse("vec_b_shared=4097").is_err());
    }

    #[test]
    fn mat_vec_groups_hold_whole_subgroups() {
        // The float kernel's knobs (the integer kernel off).
        let d = nvidia((16, 16, 16));
        let vec_shape = |t: &Tuning, n: u64| {
            let plan = plan(&problem(GgmlType::Q4_K, 4096, n, 14336), &d, t);
            let Path::Vec {
                wg_size, rows, groups, ..
            } = plan.path
            else {
                panic!("{plan}")
            };
            assert_eq!(plan.tiles_m, 4096 / (rows * groups), "{plan}");
            (wg_size, rows, groups)
        };
        let t = Tuning::parse("vec_int_max_n=0,vec_kernel=1,vec_rows_k=4,vec_groups_wide=4").unwrap();
        assert_eq!(vec_shape(&t, 1), (256, 4, 1));
        assert_eq!(vec_shape(&t, 8), (256, 4, 4));
        // Groups of 16 threads cannot hold a subgroup of 32: halved to groups of 32.
        let small =
            Tuning::parse("vec_int_max_n=0,vec_kernel=1,vec_rows_k=4,vec_rows_wide_k=4,vec_wg=64,vec_groups_wide=4")
                .unwrap();
        assert_eq!(vec_shape(&small, 8), (64, 4, 2));
        let tiny = Tuning::parse("vec_int_max_n=0,vec_kernel=1,vec_rows_k=4,vec_wg=16,vec_groups=8").unwrap();
        assert_eq!(vec_shape(&tiny, 1), (16, 4, 1));
        // Without subgroups any power-of-two group works (the tree reduction halves it).
        let bare = DeviceFacts {
            subgroups: false,
            subgroup_matrix: None,
            ..d
        };
        let plan = plan(&problem(GgmlType::Q4_0, 100, 8, 256), &bare, &small);
        assert!(
            matches!(
                plan.path,
                Path::Vec {
                    groups: 4,
                    rows: 16,
                    ..
                }
            ),
            "{plan}"
        );
        // Float weights cap their accumulators: half the rows in twice the groups.
        let f = super::plan(&problem(GgmlType::F16, 100, 8, 256), &bare, &small);
        assert!(matches!(f.path, Path::Vec { groups: 8, rows: 8, .. }), "{f}");
        let uncapped = Tuning {
            vec_acc_max: 4096,
            ..small
        };
        let f = super::plan(&problem(GgmlType::F16, 100, 8, 256), &bare, &uncapped);
        assert!(
            matches!(
                f.path,
                Path::Vec {
                    groups: 4,
                    rows: 16,
                    ..
                }
            ),
            "{f}"
        );
        assert!(Tuning::parse("vec_groups=3").is_err());
        assert!(Tuning::parse("vec_int_max_n=0,vec_kernel=3").is_err());
        // vec_kernel=2: the whole-word kernel for q6_K only.
        let mixed = Tuning::parse("vec_int_max_n=0,vec_kernel=2").unwrap();
        for (ty, kernel) in [(GgmlType::Q6_K, 1), (GgmlType::Q4_K, 0), (GgmlType::Q4_0, 0)] {
            let plan = super::plan(&problem(ty, 4096, 1, 14336), &d, &mixed);
            assert!(
                matches!(plan.path, Path::Vec { kernel: k, .. } if k == kernel),
                "{ty}: {plan}"
            );
        }
        assert!(Tuning::parse("vec_int_max_n=0,vec_kernel=0").is_ok());
    }

    #[test]
    fn the_four_bit_levels_come_from_a_workgroup_table_on_gpus() {
        let table = |ty: GgmlType, d: &DeviceFacts, knobs: &str| {
            let t = Tuning::parse(knobs).unwrap();
            let plan = plan(&problem(ty, 4096, 1, 14336), d, &t);
            let Path::Vec { level_table, .. } = plan.path else {
                panic!("{plan}");
            };
            (level_table, plan.workgroup_bytes)
        };
        let gpu = nvidia((16, 16, 16));
        for ty in [GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4, GgmlType::NVFP4] {
            let (on, bytes) = table(ty, &gpu, "vec_int_fp4=1");
            let (off, bytes_off) = table(ty, &gpu, "vec_int_fp4=1,vec_int_lut=0");
            assert!(on && !off, "{ty}: on GPUs by default, off with 0");
            // The table's 256 words are counted against the workgroup memory limit.
            assert_eq!(bytes, bytes_off + 1024, "{ty}");
            assert!(
                !table(ty, &lavapipe(), "vec_int_fp4=1").0,
                "{ty}: not on CPU adapters by default"
            );
            assert!(table(ty, &lavapipe(), "vec_int_fp4=1,vec_int_lut=1").0, "{ty}");
        }
        // Formats without 4-bit levels, and those off the integer kernel, have none.
        assert!(!table(GgmlType::Q4_0, &gpu, "vec_int_lut=1").0);
        assert!(!table(GgmlType::IQ4_NL, &gpu, "vec_int_iq4nl=0,vec_int_lut=1").0);
    }

    #[test]
    fn q8_0_at_n1_takes_one_row_groups_two_a_workgroup_where_its_knob_says() {
        let (gpu, cpu) = (nvidia((16, 16, 16)), lavapipe());
        let shape = |ty: GgmlType, n: u64, d: &DeviceFacts, knobs: &str| {
            let plan = plan(&problem(ty, 4096, n, 14336), d, &Tuning::parse(knobs).unwrap());
            let Path::Vec {
                rows,
                groups,
                int_dot: true,
                ..
            } = plan.path
            else {
                panic!("{plan}")
            };
            (rows, groups)
        };
        let t = Tuning::default();
        let usual = (t.vec_int_rows, t.vec_int_groups);
        assert_eq!(shape(GgmlType::Q8_0, 1, &gpu, ""), (1, 2));
        assert_eq!(shape(GgmlType::Q8_0, 1, &cpu, ""), usual);
        // Not the other formats, nor q8_0 at n=2.
        assert_eq!(shape(GgmlType::Q8_0, 2, &gpu, ""), usual);
        assert_eq!(shape(GgmlType::Q4_0, 1, &gpu, ""), usual);
        assert_eq!(shape(GgmlType::Q5_1, 1, &gpu, ""), usual);
        for (value, d, on) in [(0, &gpu, false), (1, &gpu, true), (1, &cpu, true), (2, &cpu, false)] {
            let knobs = format!("vec_int_q8_0_n1={value}");
            let expected = if on { (1, 2) } else { usual };
            assert_eq!(shape(GgmlType::Q8_0, 1, d, &knobs), expected, "{knobs}");
        }
    }

    #[test]
    fn integer_mat_vec_takes_the_formats_it_reads_when_it_can() {
        let int_dot =
            |p: &Problem, d: &DeviceFacts, t: &Tuning| matches!(plan(p, d, t).path, Path::Vec { int_dot: true, .. });
        let d = nvidia((16, 16, 16));
        let t = Tuning::default();
        for ty in [
            GgmlType::Q4_0,
            GgmlType::Q5_1,
            GgmlType::Q8_0,
            GgmlType::Q3_K,
            GgmlType::Q6_K,
        ] {
            for n in 1..=8 {
                assert!(int_dot(&problem(ty, 4096, n, 14336), &d, &t), "{ty} n={n}");
            }
            assert!(!int_dot(&problem(ty, 4096, 9, 14336), &d, &t), "{ty} n=9");
        }
        for ty in [GgmlType::F16, GgmlType::Q1_0] {
            assert!(!int_dot(&problem(ty, 4096, 1, 14336), &d, &t), "{ty}");
        }
        // A switch knob's values: 0 nowhere, 1 everywhere, 2 on GPUs only (value, device, on).
        let cpu = lavapipe();
        let switch = [
            (0, &d, false),
            (1, &d, true),
            (1, &cpu, true),
            (2, &d, true),
            (2, &cpu, false),
        ];
        let gated_by = |knob: &str, p: &Problem| {
            for (value, dev, expected) in switch {
                let tuning = Tuning::parse(&format!("{knob}={value}")).unwrap();
                assert_eq!(int_dot(p, dev, &tuning), expected, "{knob}={value}");
            }
        };
        // iq4_nl by its knob, 1 (everywhere) by default.
        let iq4 = problem(GgmlType::IQ4_NL, 4096, 1, 14336);
        assert!(int_dot(&iq4, &d, &t) && int_dot(&iq4, &lavapipe(), &t));
        gated_by("vec_int_iq4nl", &iq4);
        // mxfp4 and nvfp4 by theirs, by default on GPUs where measured faster: mxfp4 at every n,
        // nvfp4 from n=2, and at n=1 with the levels' table. mxfp4's rows at any byte, nvfp4's
        // at even ones.
        let mx = Problem {
            a_align: 1,
            ..problem(GgmlType::MXFP4, 4096, 1, 14336)
        };
        let nv = problem(GgmlType::NVFP4, 4096, 2, 14336);
        for p in [&mx, &nv] {
            assert!(int_dot(p, &d, &t) && !int_dot(p, &lavapipe(), &t));
            gated_by("vec_int_fp4", p);
        }
        // iq4_xs by its own, 1 (everywhere) by default; never in the K-quants' slot kernel.
        let xs = problem(GgmlType::IQ4_XS, 4096, 1, 14336);
        assert!(int_dot(&xs, &d, &t) && int_dot(&xs, &lavapipe(), &t));
        gated_by("vec_int_iq4xs", &xs);
        for n in 1..=8 {
            let plan = plan(&problem(GgmlType::IQ4_XS, 4096, n, 14336), &d, &t);
            assert!(
                matches!(
                    plan.path,
                    Path::Vec {
                        int_dot: true,
                        int_slots: false,
                        ..
                    }
                ),
                "n={n}: {plan}"
            );
        }
        let nv1 = problem(GgmlType::NVFP4, 4096, 1, 14336);
        assert!(int_dot(&nv1, &d, &t), "nvfp4 n=1 with the levels' table");
        assert!(
            !int_dot(&nv1, &d, &Tuning::parse("vec_int_lut=0").unwrap()),
            "nor without it"
        );
        assert!(int_dot(
            &nv1,
            &d,
            &Tuning::parse("vec_int_fp4=1,vec_int_lut=0").unwrap()
        ));
        let odd_nv = Problem { a_align: 1, ..nv };
        assert!(!int_dot(&odd_nv, &d, &Tuning::parse("vec_int_fp4=1").unwrap()));
        // The byte stream: q4_0 and q8_0 rows at 16-byte offsets with k a multiple of 256, where
        // its knob lets it (1 everywhere, 2 on GPUs); never the K-quants, never other k.
        let stream = |p: &Problem, d: &DeviceFacts, t: &Tuning| {
            let plan = plan(p, d, t);
            let on = matches!(
                plan.path,
                Path::Vec {
                    int_dot: true,
                    int_stream: true,
                    prefetch: false,
                    ..
                }
            );
            assert_eq!(on, plan.quantize_b.as_ref().is_some_and(|q| q.stream), "{plan}");
            assert!(!on || plan.a_vec4, "{plan}");
            on
        };
        for (knob, dev, expected) in switch {
            let tuning = Tuning::parse(&format!("vec_int_stream={knob},vec_int_prefetch=1")).unwrap();
            for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
                let aligned = |m, n, k| Problem {
                    a_align: 16,
                    ..problem(ty, m, n, k)
                };
                for n in [1, 5, 8] {
                    assert_eq!(stream(&aligned(4096, n, 14336), dev, &tuning), expected, "{ty} {knob}");
                }
                assert!(!stream(&aligned(64, 1, 288), dev, &tuning), "{ty} k=288");
                assert!(!stream(&aligned(64, 9, 512), dev, &tuning), "{ty} n=9");
                assert!(!stream(&problem(ty, 64, 1, 512), dev, &tuning), "{ty} 4-byte rows");
            }
            for ty in [GgmlType::Q4_K, GgmlType::Q4_1] {
                let p = Problem {
                    a_align: 16,
                    ..problem(ty, 4096, 1, 14336)
                };
                assert!(!stream(&p, dev, &tuning), "{ty}");
            }
        }
        // The prefetch where its knob lets it: 2 (the default) on GPUs for q4_0 at n=2 and 4, q4_1
        // at n=4 and q5_0 at n=1, 2, 4 and 5; 1 in every integer kernel but the slots; 0 nowhere.
        let prefetch = |p: &Problem, d: &DeviceFacts, t: &Tuning| {
            matches!(
                plan(p, d, t).path,
                Path::Vec {
                    int_dot: true,
                    prefetch: true,
                    ..
                }
            )
        };
        let always = Tuning::parse("vec_int_prefetch=1").unwrap();
        let never = Tuning::parse("vec_int_prefetch=0").unwrap();
        for n in 1..=8 {
            for (ty, on_gpu) in [
                (GgmlType::Q4_0, n == 2 || n == 4),
                (GgmlType::Q4_1, n == 4),
                (GgmlType::Q5_0, matches!(n, 1 | 2 | 4 | 5)),
                (GgmlType::Q5_1, false),
                (GgmlType::Q8_0, false),
                (GgmlType::IQ4_NL, false),
            ] {
                let p = problem(ty, 4096, n, 14336);
                assert_eq!(prefetch(&p, &d, &t), on_gpu, "{ty} n={n}");
                assert!(!prefetch(&p, &lavapipe(), &t), "{ty} n={n} on a CPU");
                assert!(
                    prefetch(&p, &d, &always) && prefetch(&p, &lavapipe(), &always),
                    "{ty} n={n}"
                );
                assert!(!prefetch(&p, &d, &never), "{ty} n={n}");
            }
        }
        // Odd rows, a switched-off knob and a scratch over the binding limit take the float kernel.
        let odd = Problem {
            a_align: 1,
            ..problem(GgmlType::Q4_0, 64, 1, 256)
        };
        assert!(!int_dot(&odd, &d, &t));
        let off = Tuning::parse("vec_int_max_n=0").unwrap();
        assert!(!int_dot(&problem(GgmlType::Q4_0, 64, 1, 256), &d, &off));
        let tight = DeviceFacts {
            max_storage_binding: 1 << 20,
            ..d
        };
        let big_batch = Problem {
            batches: 4096,
            ..problem(GgmlType::Q4_0, 64, 8, 256)
        };
        assert!(int_scratch_bytes(&big_batch) > tight.max_storage_binding);
        assert!(!int_dot(&big_batch, &tight, &t));
        // Super-block formats take their own rows and groups; the slot kernel from n=2, with
        // its own rows.
        let k = plan(&problem(GgmlType::Q4_K, 4096, 1, 14336), &d, &t);
        assert!(
            matches!(
                k.path,
                Path::Vec {
                    rows: 2,
                    groups: 4,
                    int_slots: false,
                    ..
                }
            ),
            "{k}"
        );
        // q6_K's units kernel: a group per 32-lane subgroup on GPUs, `vec_int_groups_k` on CPU
        // adapters unless told.
        let q6 = problem(GgmlType::Q6_K, 4096, 1, 14336);
        let four = Tuning::parse("vec_int_groups_q6k=4").unwrap();
        for (dev, tuning, expected) in [(&d, &t, 8), (&lavapipe(), &t, 4), (&d, &four, 4)] {
            let k = plan(&q6, dev, tuning);
            assert!(
                matches!(k.path, Path::Vec { rows: 2, groups, int_slots: false, .. } if groups == expected),
                "{k}"
            );
        }
        assert!(Tuning::parse("vec_int_groups_q6k=3").is_err());
        for (n, rows) in [(2, 1), (3, 1), (4, 2), (8, 2)] {
            for ty in [
                GgmlType::Q2_K,
                GgmlType::Q3_K,
                GgmlType::Q4_K,
                GgmlType::Q5_K,
                GgmlType::Q6_K,
            ] {
                let signed_wide = n >= 8 && matches!(ty, GgmlType::Q3_K | GgmlType::Q6_K);
                let (rows, groups) = if signed_wide { (4, 4) } else { (rows, 8) };
                let k = plan(&problem(ty, 4096, n, 14336), &d, &t);
                assert!(
                    matches!(k.path, Path::Vec { int_slots: true, rows: r, groups: g, probe: 0, .. } if r == rows && g == groups),
                    "{ty} n={n}: {k}"
                );
            }
        }
        for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
            let k = plan(&problem(ty, 4096, 4, 14336), &d, &t);
            assert!(
                matches!(
                    k.path,
                    Path::Vec {
                        int_dot: true,
                        int_slots: false,
                        ..
                    }
                ),
                "{ty}: {k}"
            );
        }
        // The float mat-vec caps its accumulators per thread: 16 rows x 5 columns, but 8 rows
        // in twice the groups for 8 columns.
        for (n, rows, groups) in [(5, 16, 1), (8, 8, 2)] {
            let f = plan(&problem(GgmlType::F16, 4096, n, 14336), &d, &t);
            assert!(
                matches!(f.path, Path::Vec { rows: r, groups: g, int_dot: false, .. } if r == rows && g == groups),
                "n={n}: {f}"
            );
        }
        // Halves read as 16-byte words (rows at 16-byte offsets, on GPUs) cap them at
        // `vec_acc_max_halves`; f32 rows and CPU adapters keep `vec_acc_max`.
        let cases = [
            (GgmlType::F16, &d, [(5, 8, 2), (8, 4, 4)]),
            (GgmlType::BF16, &d, [(5, 8, 2), (8, 4, 4)]),
            (GgmlType::F32, &d, [(5, 16, 1), (8, 8, 2)]),
            (GgmlType::F16, &lavapipe(), [(5, 16, 1), (8, 8, 2)]),
        ];
        for (ty, dev, shapes) in cases {
            for (n, rows, groups) in shapes {
                let mut p = problem(ty, 4096, n, 14336);
                p.a_align = 16;
                let f = plan(&p, dev, &t);
                assert!(
                    matches!(f.path, Path::Vec { rows: r, groups: g, int_dot: false, .. } if r == rows && g == groups),
                    "{ty} n={n}: {f}"
                );
            }
        }
        // CPU adapters keep the units kernel up to n=3 unless told otherwise.
        let cpu = lavapipe();
        for (n, slots) in [(1, false), (2, false), (3, false), (4, true), (8, true)] {
            let k = plan(&problem(GgmlType::Q4_K, 4096, n, 14336), &cpu, &t);
            assert!(
                matches!(k.path, Path::Vec { int_dot: true, int_slots: s, .. } if s == slots),
                "n={n}: {k}"
            );
        }
        let from_two = Tuning::parse("vec_int_slots_min_n=2").unwrap();
        let k = plan(&problem(GgmlType::Q4_K, 4096, 2, 14336), &cpu, &from_two);
        assert!(matches!(k.path, Path::Vec { int_slots: true, .. }), "{k}");
        let never = Tuning::parse("vec_int_slots_min_n=65").unwrap();
        let k = plan(&problem(GgmlType::Q6_K, 4096, 8, 14336), &d, &never);
        assert!(
            matches!(
                k.path,
                Path::Vec {
                    int_dot: true,
                    int_slots: false,
                    ..
                }
            ),
            "{k}"
        );
    }

    #[test]
    fn any_alignment_is_fast_and_only_huge_sizes_are_simple() {
        let d = nvidia((16, 16, 16));
        for (ty, a_align, b_align) in [(GgmlType::F32, 2, 1), (GgmlType::F16, 1, 2), (GgmlType::Q4_0, 1, 4)] {
            let mut p = problem(ty, 64, 64, 65);
            p.a_align = a_align;
            p.b_align = b_align;
            assert!(matches!(
                plan(&p, &d, &Tuning::default()).path,
                Path::SubgroupMatrix { .. }
            ));
        }
        let huge = problem(GgmlType::Q4_0, 1 << 17, 1 << 16, 64);
        let plan = plan(&huge, &d, &Tuning::default());
        assert!(matches!(plan.path, Path::Simple { .. }), "{plan}");
        assert!(plan.to_string().contains("32-bit"));
    }

    #[test]
    fn mat_vecs_read_16_byte_words_where_the_knobs_and_rows_allow() {
        let d = nvidia((16, 16, 16));
        let on = Tuning::parse("vec_float_vec4=1,vec_int_a_vec4=1").unwrap();
        let case = |a_type, n, a_align| Problem {
            a_type,
            b_type: GgmlType::F32,
            m: 4096,
            n,
            k: 14336,
            batches: 1,
            a_batches: 1,
            a_align,
            b_align: 16,
            b_contiguous: true,
            dst_bytes: 4096 * n * 4,
        };
        for (a_type, n, a_align, expected) in [
            (GgmlType::F16, 1, 16, true),
            (GgmlType::F32, 8, 16, true),
            (GgmlType::BF16, 4, 16, true),
            (GgmlType::F16, 1, 4, false),
            (GgmlType::Q4_K, 1, 16, true),
            (GgmlType::Q5_K, 1, 16, true),
            (GgmlType::Q4_K, 1, 4, false),
            // The slot kernel and other formats keep 4-byte reads.
            (GgmlType::Q4_K, 2, 16, false),
            (GgmlType::Q4_0, 1, 16, true),
            (GgmlType::Q8_0, 1, 16, true),
            (GgmlType::Q8_0, 1, 4, false),
            (GgmlType::Q6_K, 1, 16, true),
            (GgmlType::Q6_K, 1, 4, false),
        ] {
            let p = case(a_type, n, a_align);
            let q = plan(&p, &d, &on);
            assert!(matches!(q.path, Path::Vec { .. }), "{q}");
            assert_eq!(q.a_vec4, expected, "{a_type} n={n} a_align={a_align}: {q}");
            // The float kernel's 16-byte steps read b by words too.
            if expected && !a_type.is_quantized() {
                assert!(q.b_vec4, "{q}");
            }
            // The default (2): on GPUs only, and of the quantized formats the K-quants only
            // (q4_0 and q8_0 measured slower in units of 8 blocks).
            let by_device = expected && !matches!(a_type, GgmlType::Q4_0 | GgmlType::Q8_0);
            assert_eq!(plan(&p, &d, &Tuning::default()).a_vec4, by_device, "{a_type} n={n}");
            assert!(!plan(&p, &lavapipe(), &Tuning::default()).a_vec4);
            let off = Tuning::parse("vec_float_vec4=0,vec_int_a_vec4=0").unwrap();
            assert!(!plan(&p, &d, &off).a_vec4);
        }
        // q6_K rows are whole 16-byte words only when k is a multiple of 2048 (8 blocks).
        let q6 = Problem {
            k: 14336 - 256,
            ..case(GgmlType::Q6_K, 1, 16)
        };
        assert!(!plan(&q6, &d, &on).a_vec4);
    }

    #[test]
    fn large_grids_split_in_two_dimensions() {
        let d = nvidia((16, 16, 16));
        let mut p = problem(GgmlType::F16, 16416, 1, 128);
        p.batches = 32;
        let plan = plan(&p, &d, &Tuning::default());
        let groups = 16416u32.div_ceil(4) * 32;
        assert!(groups > 65535);
        let [x, y, z] = plan.grid;
        assert!(x <= 65535 && y > 1 && z == 1 && x * y >= groups, "{plan}");
    }

    #[test]
    fn tuning_parses_overrides_and_refuses_nonsense() {
        let t = Tuning::parse("vec_rows=8, sg_tk=64").unwrap();
        assert_eq!((t.vec_rows, t.sg_tk), (8, 64));
        assert_eq!(Tuning::parse("").unwrap(), Tuning::default());
        assert!(Tuning::parse("vec_wg=100").is_err());
        assert!(Tuning::parse("nope=1").is_err());
        assert!(Tuning::parse("sg_stages=3").is_err());
        let round = Tuning::parse(&Tuning::default().to_string()).unwrap();
        assert_eq!(round, Tuning::default());
    }

    /// Values that would wrap the planner's u32 products, divide by zero or make a kernel's
    /// per-thread arrays absurd are errors naming the knob; every valid extreme plans without
    /// overflow.
    #[test]
    fn out_of_range_knobs_are_errors_naming_the_knob() {
        for bad in [
            "tiled_wg_m=4294967295",
            "tiled_wg_m=65536,tiled_wg_n=65536",
            "vec_rows=100000",
            "vec_max_n=100000",
            "sg_count_m=100000",
            "sg_tk=4294967295",
            "sg_acc_f16=2",
            "tiled_thread_m=1000",
            "tiled_tk=1024",
            "vec_groups=2048",
            "sg_pad=4",
        ] {
            let err = Tuning::parse(bad).unwrap_err();
            let name = bad.split('=').next().unwrap();
            assert!(err.contains(name), "{bad}: {err}");
        }
        for (bad, name) in [
            ("sg_prefetch=3", "sg_prefetch"),
            ("sg_probe=3", "sg_probe"),
            ("sg_raw_units=3", "sg_raw_units"),
            ("sg_a_f16_min_n=1048577", "sg_a_f16_min_n"),
            ("sg_b_f16_min_n=4294967295", "sg_b_f16_min_n"),
            ("vec_int_fused=2", "vec_int_fused"),
            ("b_vec4=3", "b_vec4"),
            ("vec_float_vec4=3", "vec_float_vec4"),
            ("vec_int_a_vec4=3", "vec_int_a_vec4"),
            ("vec_int_iq4nl=3", "vec_int_iq4nl"),
            ("vec_int_fp4=3", "vec_int_fp4"),
            ("vec_int_lut=3", "vec_int_lut"),
            ("vec_int_iq4xs=3", "vec_int_iq4xs"),
            ("vec_mma=3", "vec_mma"),
            ("vec_mma_min_n=0", "vec_mma_min_n"),
            ("vec_mma_split=0", "vec_mma_split"),
            ("vec_mma_split=33", "vec_mma_split"),
            ("vec_mma_unroll=17", "vec_mma_unroll"),
            ("vec_mma_frag_m=9", "vec_mma_frag_m"),
            ("vec_mma_depth=3", "vec_mma_depth"),
            ("vec_b_f16_min_n=65", "vec_b_f16_min_n"),
            ("vec_int_stream=3", "vec_int_stream"),
            ("vec_int_prefetch=3", "vec_int_prefetch"),
            ("vec_int_groups_q6k=2048", "vec_int_groups_q6k"),
            ("vec_int_groups_q6k=6", "vec_int_groups_q6k"),
            ("vec_int_q8_0_n1=3", "vec_int_q8_0_n1"),
            ("vec_acc_max_halves=0", "vec_acc_max_halves"),
        ] {
            let err = Tuning::parse(bad).unwrap_err();
            assert!(err.contains(name), "{bad}: {err}");
        }
        assert!(Tuning::parse("vec_rows=1,vec_rows=2").is_err());
        assert!(Tuning::parse("vec_rows=-1").is_err());
        assert!(Tuning::parse("vec_rows=99999999999").is_err());
        for name in Tuning::NAMES {
            assert!(Tuning::range(name).is_some(), "{name}");
        }
        // Every knob at its extremes plans without a panic, on every kind of device.
        let extremes = [
            |n: &str| Tuning::range(n).unwrap().0,
            |n: &str| Tuning::range(n).unwrap().1,
        ];
        for pick in extremes {
            let mut t = Tuning::default();
            for name in Tuning::NAMES {
                let v = pick(name);
                let v = match *name {
                    "vec_wg"
                    | "vec_groups"
                    | "vec_groups_wide"
                    | "vec_int_groups"
                    | "vec_int_groups_k"
                    | "vec_int_slot_groups"
                    | "vec_int_slot_groups_q36"
                    | "tiled_tk" => 1 << (31 - v.leading_zeros()),
                    "vec_int_groups_q6k" if v > 0 => 1 << (31 - v.leading_zeros()),
                    "sg_pad" => v / 8 * 8,
                    _ => v,
                };
                *t.knob(name).unwrap() = v;
            }
            t.validate().unwrap();
            for d in [
                nvidia((16, 16, 16)),
                lavapipe(),
                DeviceFacts {
                    subgroup_matrix: None,
                    ..lavapipe()
                },
            ] {
                for n in [1, 8, 64, 300] {
                    let _ = plan(&problem(GgmlType::Q4_K, 4096, n, 4096), &d, &t);
                    let _ = plan(&problem(GgmlType::F16, 1000, n, 999), &d, &t);
                }
            }
        }
    }

    #[test]
    fn mat_vec_on_subgroup_matrices_only_where_asked_and_allowed() {
        let on = Tuning::parse("vec_mma=1").unwrap();
        let gpu = nvidia((16, 8, 16));
        let aligned = |ty, n, k| Problem {
            a_align: 16,
            b_align: 16,
            ..problem(ty, 4096, n, k)
        };
        let mma = |p: &Problem, d: &DeviceFacts, t: &Tuning| matches!(plan(p, d, t).path, Path::VecMma { .. });
        let p = plan(&aligned(GgmlType::F16, 8, 14336), &gpu, &on);
        assert!(
            matches!(
                p.path,
                Path::VecMma {
                    split: 8,
                    frag_m: 1,
                    unroll: 4,
                    wg_size: 256,
                    ..
                }
            ),
            "{p}"
        );
        // 16 rows a workgroup, any m (the last tile part empty); no copies, a read as 16-byte words.
        assert_eq!((p.tiles_m, p.tile()), (256, (16, 8)));
        assert!(p.a_vec4 && p.convert_b.is_none() && p.dequantize_a.is_none() && p.quantize_b.is_none());
        assert!(p.workgroup_bytes <= gpu.max_workgroup_storage);
        assert_eq!(
            plan(
                &Problem {
                    m: 4097,
                    ..aligned(GgmlType::F16, 8, 14336)
                },
                &gpu,
                &on
            )
            .tiles_m,
            257
        );
        assert!(mma(&aligned(GgmlType::F16, 1, 16), &lavapipe(), &on));
        // Off by default; other types, unaligned rows, k off the K steps, n past one right matrix,
        // f16 results only, no config: the mat-vec.
        assert!(!mma(&aligned(GgmlType::F16, 8, 14336), &gpu, &Tuning::default()));
        assert!(!mma(&aligned(GgmlType::F32, 8, 14336), &gpu, &on));
        assert!(!mma(&aligned(GgmlType::Q4_0, 8, 14336), &gpu, &on));
        assert!(!mma(&problem(GgmlType::F16, 4096, 8, 14336), &gpu, &on));
        assert!(!mma(&aligned(GgmlType::F16, 8, 14344), &gpu, &on));
        let wide = Tuning::parse("vec_mma=1,vec_max_n=16").unwrap();
        assert!(mma(&aligned(GgmlType::F16, 9, 14336), &nvidia((16, 16, 16)), &wide));
        assert!(!mma(&aligned(GgmlType::F16, 9, 14336), &gpu, &wide));
        let f16_results = DeviceFacts {
            subgroup_matrix: gpu.subgroup_matrix.map(|c| MatrixConfig { f32_result: false, ..c }),
            ..gpu
        };
        assert!(!mma(&aligned(GgmlType::F16, 8, 14336), &f16_results, &on));
        assert!(!mma(
            &aligned(GgmlType::F16, 8, 14336),
            &DeviceFacts {
                subgroup_matrix: None,
                ..gpu
            },
            &on
        ));
        // 2: GPUs only, from vec_mma_min_n; staging past the workgroup memory: the mat-vec.
        let by_device = Tuning::parse("vec_mma=2,vec_mma_min_n=4").unwrap();
        assert!(mma(&aligned(GgmlType::F16, 4, 14336), &gpu, &by_device));
        assert!(!mma(&aligned(GgmlType::F16, 3, 14336), &gpu, &by_device));
        assert!(!mma(&aligned(GgmlType::F16, 4, 16), &lavapipe(), &by_device));
        let big = Tuning::parse("vec_mma=1,vec_mma_unroll=16,vec_mma_frag_m=8").unwrap();
        assert!(!mma(&aligned(GgmlType::F16, 8, 14336), &gpu, &big));
    }

    #[test]
    fn float_mat_vec_copies_b_to_f16_only_where_asked_and_allowed() {
        let on = Tuning::parse("vec_b_f16_min_n=4").unwrap();
        let gpu = nvidia((16, 8, 16));
        let aligned = |ty, n, k| Problem {
            a_align: 16,
            b_align: 16,
            ..problem(ty, 4096, n, k)
        };
        for ty in [GgmlType::F16, GgmlType::BF16] {
            let p = plan(&aligned(ty, 8, 14336), &gpu, &on);
            assert!(
                matches!(p.path, Path::Vec { int_dot: false, .. }) && p.a_vec4 && p.b_vec4,
                "{p}"
            );
            let copy = p.convert_b.expect("b's f16 copy");
            assert_eq!(copy.scratch_bytes, 8 * 14336 * 2);
            let kp = p.kernel_problem();
            assert_eq!((kp.b_type, kp.b_align, kp.b_contiguous), (GgmlType::F16, 16, true));
        }
        // Below its n, off by default, f32 or quantized a, an f16 b, rows not read as words, k
        // off the 8-element grid: no copy.
        assert!(plan(&aligned(GgmlType::F16, 3, 14336), &gpu, &on).convert_b.is_none());
        assert!(
            plan(&aligned(GgmlType::F16, 8, 14336), &gpu, &Tuning::default())
                .convert_b
                .is_none()
        );
        assert!(plan(&aligned(GgmlType::F32, 8, 14336), &gpu, &on).convert_b.is_none());
        assert!(plan(&aligned(GgmlType::Q8_0, 8, 14336), &gpu, &on).convert_b.is_none());
        let f16_b = Problem {
            b_type: GgmlType::F16,
            ..aligned(GgmlType::F16, 8, 14336)
        };
        assert!(plan(&f16_b, &gpu, &on).convert_b.is_none());
        assert!(
            plan(&problem(GgmlType::F16, 4096, 8, 14336), &gpu, &on)
                .convert_b
                .is_none()
        );
        assert!(plan(&aligned(GgmlType::F16, 8, 14340), &gpu, &on).convert_b.is_none());
    }
}
