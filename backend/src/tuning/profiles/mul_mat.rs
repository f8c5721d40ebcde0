//! MUL_MAT's defaults per class of device. NVIDIA Hopper's and the CPU adapters' (lavapipe)
//! were measured, each value with the file of `bench/results/` that holds its figures (and
//! BENCHMARKS.md the story); the other classes were never measured and start from those with
//! the changes upstream's choices suggest, marked `unmeasured:`.

use crate::facts::DeviceClass;
use crate::ggml_type::GgmlType::{self, *};
use crate::ops::mul_mat::tuning::{BVec4, MulMatTuning};
use crate::tuning::values::{FromN, Pair, TypeNs, TypeSet};

/// MUL_MAT's defaults for `class`.
pub fn mul_mat(class: DeviceClass) -> MulMatTuning {
    match class {
        DeviceClass::NvidiaHopper => hopper(),
        // unmeasured: the same warps, subgroup matrices and memory hierarchy as Hopper's.
        DeviceClass::NvidiaBlackwell
        | DeviceClass::NvidiaAda
        | DeviceClass::NvidiaAmpere
        | DeviceClass::NvidiaOlder => hopper(),
        DeviceClass::Cpu => cpu(),
        DeviceClass::Amd => amd(),
        DeviceClass::Intel => intel(),
        DeviceClass::Apple | DeviceClass::Other => apple(),
    }
}

/// The formats whose units the integer mat-vec reads as 16-byte words on GPUs.
const K_QUANTS_VEC4: [GgmlType; 3] = [Q4_K, Q5_K, Q6_K];

/// Measured on H100s and H200s.
fn hopper() -> MulMatTuning {
    MulMatTuning {
        vec_max_n: 8,
        vec_wg: 256,
        // bench/results/2026-12-04-h200-decode-prefill.md: 4 rows for q4_0 at n=1; at n > 4 16
        // rows for q4_0 and f16 (q4_0 n=8 104.8 us, 8 rows 153.3), 4 for the K-quants.
        vec_rows: Pair(4, 16),
        vec_rows_k: Pair(2, 4),
        vec_groups: Pair(1, 1),
        // bench/results/2026-12-04-h200-float-rows-fa-sweep.md (80: f16 n=8 73 against 102 us);
        // bench/results/2026-12-06-h100-knobs.md (40 for 16-byte words: f16 n=8 60.2 against 123.1).
        vec_acc_max: Pair(80, 40),
        // bench/results/2026-12-06-h100-knobs.md: f32 n=1/4/8 80.6/86.1/92.4 us against 84.0/97.5/103.9.
        vec_float_vec4: true,
        // bench/results/2026-12-04-h200-decode-prefill.md: whole words faster for q6_K only (74.7 against 85.8 us at n=1).
        vec_words: TypeSet::of(&[Q6_K]),
        vec_int_max_n: 8,
        vec_int_min_a_kib: 0,
        // bench/results/2026-12-07-h100-night-rope-b-in-workgroup.md: removes the quantize pass
        // of the small decode MUL_MATs (the same bytes as the pass's): SmolLM2 tg128 413 against
        // 362 t/s with the pass.
        vec_int_b_wg_max_k: 2048,
        // measured without a bound (SmolLM2's output projection: 6144 workgroups x 576).
        vec_int_b_wg_max_values: None,
        // unmeasured: 30 dispatches fewer a SmolLM2 token (the SWIGLUs), the same bytes.
        vec_int_b_swiglu: true,
        // unmeasured: 60 dispatches fewer a SmolLM2 token (the norms before the projections).
        vec_int_b_rms_norm: true,
        // unmeasured: 64 and 32 dispatches fewer a Llama-3-8B token (the norms, the SWIGLUs),
        // whose matrices are past `vec_int_b_wg_max_k`; the same bytes.
        vec_int_pass_swiglu: true,
        vec_int_pass_rms_norm: true,
        // unmeasured: 60 dispatches fewer a SmolLM2 token, 64 a Llama-3-8B one.
        vec_rope_set_rows: true,
        // bench/results/2026-12-03-h200-int-matvec-sweep.md: 4 groups of 2 rows at n=1 (q4_K 23.7 against 25.0 us with 8 of 1).
        vec_int_rows: Pair(2, 2),
        vec_int_groups: Pair(4, 4),
        // bench/results/2026-12-06-h100-defaults.md: 8 groups of 2 rows, 30.7 us against 36.1 with 4.
        vec_int_groups_q6k: 8,
        // bench/results/2026-12-07-h100.md: 29.85 us against 33.39.
        vec_int_q8_0_n1: true,
        // bench/results/2026-12-03-h200-compare.txt: the slot kernel from n=2 (q2_K n=2 37.0 against 41.9 us).
        vec_int_slots_min_n: 2,
        // bench/results/2026-12-04-h200-decode-prefill.md: two rows from n=4 (q4_K n=8 75.0 against 90.7 us).
        vec_int_slot_rows: Pair(1, 2),
        // bench/results/2026-12-05-h200-evening.md: q6_K n=8 68.0 us against 81.3, q3_K 59.5 against 74.2.
        vec_int_slot_rows_q36: 4,
        vec_int_slot_groups: Pair(8, 4),
        // bench/results/2026-12-06-h100-evening.md, 2026-12-06-h100-night.md: faster only in these
        // (q4_0 n=4 29.7 → 25.4 us, q5_0 n=1 24.7 → 21.6); slower at n=3, at n=8, and for q8_0.
        vec_int_prefetch: TypeNs::of(&[(Q4_0, &[2, 4]), (Q4_1, &[4]), (Q5_0, &[1, 2, 4, 5])]),
        // bench/results/2026-12-06-h100-evening.md: iq4_nl n=1 53.0 us against 63.0, n=8 70.2 against 210.9.
        vec_int_iq4nl: true,
        // bench/results/2026-12-06-h100-late.md, 2026-12-06-h200.md: mxfp4 n=8 206.9 → 70.7 us, nvfp4 n=1 68.8 → 25.4 (with the table).
        vec_int_fp4: true,
        // bench/results/2026-12-06-h200.md: iq4_xs n=1 73.3 us → 52.1.
        vec_int_iq4xs: true,
        // bench/results/2026-12-06-h200.md: iq4_nl n=1 52.1 us → 24.9.
        vec_int_lut: true,
        // bench/results/2026-12-06-h100-knobs.md: q4_K n=1 15.9 us against 19.9 (q4_0 25.3 against 14.8).
        vec_int_a_vec4: TypeSet::of(&K_QUANTS_VEC4),
        #[cfg(feature = "probes")]
        vec_int_probe: 0,
        small_n_max: 64,
        // bench/results/2026-12-05-h200-evening.md: 4x4 subgroups on 128x128, f16 n=512 990 us against 1393 with 2x4.
        sg_counts: Pair(4, 4),
        sg_tile: Pair(128, 128),
        sg_small: Pair(4, 1),
        // bench/results/2026-12-05-h200-h100-staging.md: one 64-deep stage with register prefetch
        // (f16 n=512 760 us against 877 with two 32-deep stages).
        sg_tk: 64,
        sg_pad: 8,
        sg_stages: 1,
        sg_prefetch: 1,
        // bench/results/2026-12-04-h200-evening.md: f16 n=512 760 → 609 us; the float mat-vec slower.
        b_vec4: BVec4::Measured,
        #[cfg(feature = "probes")]
        sg_probe: 0,
        // bench/results/2026-12-05-h200-h100-staging.md.
        sg_raw_units: true,
        // bench/results/2026-12-05-h100.md: both copies, q4_K n=64 891 → 373 us, n=512 772 → 478.
        sg_a_f16_min_n: FromN::From(9),
        sg_b_f16_min_n: FromN::From(9),
        sg_acc_regs: 64,
        sg_acc_f16: false,
        sg_scratch_max: None,
        tiled_wg: Pair(16, 16),
        tiled_thread: Pair(4, 4),
        tiled_tk: 16,
        tiled_pad: 4,
    }
}

/// Measured on lavapipe (CI's adapter): few threads, per-lane gathers, compile time counted.
fn cpu() -> MulMatTuning {
    MulMatTuning {
        // BENCHMARKS.md (lavapipe): the 16-byte float reads and q8_0's one-row groups untested there.
        vec_float_vec4: false,
        vec_int_q8_0_n1: false,
        vec_int_groups_q6k: 4,
        // bench/results/2026-12-05-lavapipe-decode-compare.txt: the units kernel faster at n=2, 3 (q4_K n=2 18.7 against 29.9 ms).
        vec_int_slots_min_n: 4,
        // lavapipe: each workgroup's own quantization of b costs a CPU adapter more than the
        // pass it saves (SmolLM2 tg32 3.55-3.80 t/s against 9.07-9.91 with the pass, though
        // 303 dispatches a token instead of 424; `dawn-llm bench -p 0 -n 32 -r 2 -v`).
        vec_int_b_wg_max_k: 0,
        // BENCHMARKS.md (lavapipe): the ops inside the quantize pass, SmolLM2 394 → 303
        // dispatches a token, the recording thread 1.76 → 1.19 ms, tg16 10.5–11.0 → 11.6–12.5 t/s.
        vec_int_pass_swiglu: true,
        vec_int_pass_rms_norm: true,
        // BENCHMARKS.md (lavapipe): 303 → 273 dispatches, the recording thread 1.37–1.47 → 1.13–1.17 ms.
        vec_rope_set_rows: true,
        vec_int_prefetch: TypeNs::NONE,
        // bench/results/2026-12-06-lavapipe-fp4.txt.
        vec_int_fp4: false,
        // bench/results/2026-12-06-lavapipe-levels.txt: iq4_nl n=1 26.9-27.9 ms with the table against 24.7.
        vec_int_lut: false,
        vec_int_a_vec4: TypeSet::NONE,
        // BENCHMARKS.md (lavapipe): a 32-element step compiles 2.5-4.5x slower and runs no faster
        // (q4_0 4096x33x4096 5.9 s / 164 ms against 2.3 s / 174 ms).
        sg_tk: 8,
        sg_stages: 2,
        sg_raw_units: false,
        // No copies: 128 MiB bindings, and CI's time.
        sg_a_f16_min_n: FromN::Never,
        sg_b_f16_min_n: FromN::Never,
        ..hopper()
    }
}

/// unmeasured: Hopper's kernels without the rules measured per format and n on NVIDIA (the
/// prefetch table), and q8_0's one-row groups and q6_K's 8 groups, sized for 32-wide warps
/// (RDNA runs wave64 or wave32, GCN wave64). ggml-vulkan runs its dp4a mat-vec on AMD too.
fn amd() -> MulMatTuning {
    MulMatTuning {
        vec_int_q8_0_n1: false,
        vec_int_groups_q6k: 4,
        vec_int_prefetch: TypeNs::NONE,
        ..hopper()
    }
}

/// unmeasured: as AMD, and no f16 copies of the operands (integrated GPUs share the system's
/// memory; upstream ggml-webgpu reads the blocks in place).
fn intel() -> MulMatTuning {
    MulMatTuning {
        sg_a_f16_min_n: FromN::Never,
        sg_b_f16_min_n: FromN::Never,
        ..amd()
    }
}

/// unmeasured: as Intel, and no integer mat-vec: upstream ggml-webgpu runs its 8-bit dot
/// product mat-vec only on AMD, Intel and NVIDIA.
fn apple() -> MulMatTuning {
    MulMatTuning {
        vec_int_max_n: 0,
        vec_int_lut: false,
        ..intel()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_is_valid() {
        for class in [
            DeviceClass::NvidiaHopper,
            DeviceClass::NvidiaBlackwell,
            DeviceClass::NvidiaAda,
            DeviceClass::NvidiaAmpere,
            DeviceClass::NvidiaOlder,
            DeviceClass::Amd,
            DeviceClass::Intel,
            DeviceClass::Apple,
            DeviceClass::Cpu,
            DeviceClass::Other,
        ] {
            mul_mat(class).validate().unwrap_or_else(|e| panic!("{class:?}: {e}"));
        }
    }
}
