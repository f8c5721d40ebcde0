//! FLASH_ATTN_EXT's defaults per class of device.

use crate::facts::DeviceClass;
use crate::tuning::FlashAttnTuning;

/// FLASH_ATTN_EXT's defaults for `class`.
pub fn flash_attn(class: DeviceClass) -> FlashAttnTuning {
    match class {
        DeviceClass::NvidiaHopper => hopper(),
        DeviceClass::Cpu => cpu(),
        // unmeasured: Hopper's values, the only GPU measured. The planner sizes every tile from
        // the device's workgroup memory, subgroup sizes and matrix config, so they run
        // everywhere; each class's own values wait for its measurements.
        DeviceClass::NvidiaBlackwell
        | DeviceClass::NvidiaAda
        | DeviceClass::NvidiaAmpere
        | DeviceClass::NvidiaOlder
        | DeviceClass::Amd
        | DeviceClass::Intel
        | DeviceClass::Apple
        | DeviceClass::Other => hopper(),
    }
}

/// H100 and H200.
fn hopper() -> FlashAttnTuning {
    FlashAttnTuning {
        kernel: None,
        split: None,
        // bench/results/2026-12-05-h100.md (decode: target_wg=1024 12.70 -> 22.35 us at kv=4096),
        // bench/results/2026-12-04-h200-float-rows-fa-sweep.md (256: no better across cases)
        target_workgroups: 512,
        // unmeasured: fewer than the tile and vec kernels' 512, as the mma kernel's workgroups
        // are heavier (fewer fit a multiprocessor).
        mma_target_workgroups: 384,
        // unmeasured: two tiles keep a split's prologue and epilogue a minor part of it.
        min_split_tiles: 2,
        // unmeasured: a scan of the next tile's mask per tile, against whole tiles of masked
        // keys skipped (causal prefill).
        mask_skip: true,
        // unmeasured: with subgroup matrices the tile kernel takes only the query rows per KV
        // head between what the vec kernel holds and the mma kernel's M; values sized for 48
        // KiB of workgroup memory and 64 accumulators a thread.
        tile_threads: 128,
        tile_rows: 32,
        tile_kv: 32,
        tile_rq: 1,
        tile_ro: 4,
        tile_prefetch: None,
        // bench/results/2026-12-05-h100.md, bench/results/2026-12-07-h100.md (decode:
        // vec_threads=64 / 256, vec_keys=8, vec_lanes=8 all slower at kv=16384)
        vec_threads: 128,
        vec_lanes: None,
        vec_keys: 4,
        // unmeasured: 8 rows (a KV head's query heads under GQA up to 8) fit the vec kernel's
        // 64 registers of Q and O at head size 128.
        vec_rows: 8,
        vec_qint: None,
        // bench/results/2026-12-06-h100-defaults.md (4 rows, hsk=128, kv=16384: q8_0 34.2 us
        // against 38.0, q4_0 33.7 against 36.8; 8 rows, hsk=64, kv=7680: q8_0 35.1 against
        // 27.7)
        vec_qint_max_rows: 4,
        #[cfg(feature = "probes")]
        vec_probe: 0,
        // bench/results/2026-12-05-h100.md runs 1 and 2 (hsk=hsv=64, nb=512, kv=7680: 16
        // subgroups 1355 / 1519 / 1516 us for f16 / q4_0 / q8_0 against 1629 / 1666 / 1690 with
        // 8; at 72 within noise; at 256 much slower, kv=10000: 5887 against 3602 us)
        mma_subgroups: 8,
        mma_small_head: 64,
        mma_small_head_subgroups: 16,
        // bench/results/2026-12-05-h100.md run 1 (32 and 128 keys within 8% of 64, neither
        // better everywhere) and run 2 (128 with 16 subgroups: head size 256 2.2x slower)
        mma_kv: 64,
        mma_min_rows: None,
        // The mma kernel at every head size (GPUs run subgroup matrices natively).
        mma_max_head: 1 << 16,
        mma_q_regs: None,
        // bench/results/2026-12-05-h100.md runs 1 and 2 (head size 256, nb=512: 3602 -> 2044 us
        // at kv=10000 and 6230 -> 3799 at kv=20000 against 64, q8_0 8112 -> 5687; 64 and 72
        // within noise)
        mma_o_budget: 128,
        // bench/results/2026-12-05-h100.md run 1 (prefetch=1: hsk=72 and 64 f16 5% faster, q4_0
        // / q8_0 and head size 256 slower); BENCHMARKS.md's H200 knob variants (2838 against
        // 2714 us at hsk=72)
        mma_prefetch: false,
        #[cfg(feature = "probes")]
        mma_probe: 0,
        // BENCHMARKS.md's H200 knob variants (tau=0: 3762 against 2714 us at hsk=72, nb=5776)
        tau: 8.0,
    }
}

/// Software adapters (lavapipe): few threads, and subgroup matrices emulated.
fn cpu() -> FlashAttnTuning {
    FlashAttnTuning {
        // unmeasured: a CPU adapter runs a few workgroups at a time, so few splits of long
        // work.
        target_workgroups: 8,
        mma_target_workgroups: 8,
        // BENCHMARKS.md "NVIDIA H100, 2026-12-06 (afternoon)": on lavapipe, hsk=128 4 rows
        // kv=4096, packed dot products q4_0 8.0-8.3 ms against 3.8-5.0 converting K, q8_0
        // 8.2-10.0 against 5.8-7.7: never by default.
        vec_qint_max_rows: 0,
        // unmeasured: 8 subgroups at every head size.
        mma_small_head: 0,
        // lavapipe, mma against tile (ms a run; figures kept from the planner's comment, no
        // bench/results file holds them): hs 64 nb 32 kv 512 2.9 against 2.5, hs 128 nb
        // 32 kv 1024 10.4 against 6.6, hs 256 nb 16 kv 512 5.6 against 3.6, hs 576/512 nb 4 kv
        // 256 15.0 against 2.9; the mma kernel's Q·K, unrolled over the head, compiles in
        // seconds that grow with it (5.8, 9.4, 24.8, 141.6 s against under one for tile). Up to
        // 128 it stays the default all the same: lavapipe is where CI checks the kernel before
        // any GPU does.
        mma_max_head: 128,
        // unmeasured: the budget before the H100's measurement raised it to 128 for GPUs.
        mma_o_budget: 64,
        ..hopper()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_has_a_valid_profile() {
        use DeviceClass as C;
        for class in [
            C::NvidiaHopper,
            C::NvidiaBlackwell,
            C::NvidiaAda,
            C::NvidiaAmpere,
            C::NvidiaOlder,
            C::Amd,
            C::Intel,
            C::Apple,
            C::Cpu,
            C::Other,
        ] {
            let t = flash_attn(class);
            t.validate().unwrap_or_else(|e| panic!("{class:?}: {e}"));
            // Its text form reads back as the same values.
            let mut back = t;
            back.apply(&t.to_string()).unwrap();
            assert_eq!(back, t, "{class:?}");
        }
        // CPU adapters differ where they were measured to.
        let (gpu, cpu) = (flash_attn(C::NvidiaHopper), flash_attn(C::Cpu));
        assert!(cpu.mma_max_head < gpu.mma_max_head && cpu.target_workgroups < gpu.target_workgroups);
    }
}
