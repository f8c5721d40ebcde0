//! FLASH_ATTN_EXT's tuning: every knob the planner reads, declared once with
//! [`knobs!`](crate::knobs) (field names are the text keys of `GGML_DAWN_FA`). The values come
//! from the device's profile ([`crate::tuning::profiles::flash_attn`]); `auto` (`None`) leaves a
//! knob to the planner, which picks from the problem's shape.

use crate::ops::flash_attn::MAX_SPLIT;

crate::knob_enum! {
    /// A kernel to force (the planner falls back, saying why, when it cannot run the shapes).
    pub enum Force {
        Simple = "simple",
        Tile = "tile",
        Mma = "mma",
        Vec = "vec",
    }
}

crate::knobs! {
    /// FLASH_ATTN_EXT's knobs.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct FlashAttnTuning {
        /// The kernel (auto: mma for enough query rows per KV head, else vec when its rows fit,
        /// else tile).
        kernel: Option<Force>,
        /// KV splits (auto: from `target_workgroups`).
        split: Option<u32> [range(1, MAX_SPLIT)],
        /// Workgroups the tile and vec kernels aim for when choosing the split count.
        target_workgroups: u32 [range(1, 1 << 20)],
        /// ... and the mma kernel, whose workgroups are heavier (fewer fit a multiprocessor).
        mma_target_workgroups: u32 [range(1, 1 << 20)],
        /// Fewest KV tiles per split.
        min_split_tiles: u32 [range(1, 1 << 16)],
        /// Skip KV tiles whose mask is -inf for every row of the workgroup.
        mask_skip: bool,
        /// Tile kernel: threads per workgroup.
        tile_threads: u32 [range(1, 1024).pow2()],
        /// Tile kernel: most query rows per workgroup.
        tile_rows: u32 [range(1, 256)],
        /// Tile kernel: keys per tile.
        tile_kv: u32 [range(8, 1024).pow2()],
        /// Tile kernel: rows per thread in Q·Kᵀ, at most (1: more lanes per key, fewer per dot
        /// product).
        tile_rq: u32 [range(1, 32)],
        /// Tile kernel: rows per thread in P·V.
        tile_ro: u32 [range(1, 32)],
        /// Tile kernel: load the next K/V tile into registers while the current one is computed
        /// (auto: when a thread's share fits 16 chunks of 16 bytes).
        tile_prefetch: Option<bool>,
        /// Vec kernel: threads per workgroup.
        vec_threads: u32 [range(1, 1024).pow2()],
        /// Vec kernel: lanes per key (auto: the head's 16-byte chunks rounded up to a power of
        /// two, at most 16 and the subgroup size).
        vec_lanes: Option<u32> [range(1, 32).pow2()],
        /// Vec kernel: keys a lane group loads before using them.
        vec_keys: u32 [range(1, 16)],
        /// Vec kernel: most query rows (per KV head) it takes.
        vec_rows: u32 [range(1, 64)],
        /// Vec kernel: q8_0 and q4_0 K scored by packed 4x8-bit dot products against Q rounded
        /// to 8 bits per 8 dimensions (its scale apart), instead of K converted to floats
        /// (auto: for at most `vec_qint_max_rows` query rows a workgroup).
        vec_qint: Option<bool>,
        /// Vec kernel: most query rows a workgroup for which `vec_qint` is on when auto.
        vec_qint_max_rows: u32 [range(0, 64)],
        /// Vec kernel, measuring only (the results are wrong): 1 loads K and V chunks as usual
        /// but decodes them as if they were f16, so a quantized cache's time without its
        /// dequantization; 2 folds the loaded K, V and mask words into the output without
        /// scores, softmax or products, so the loads' own time; 3 runs the kernel but not the
        /// split's reduce pass (the output left unwritten), so what that second dispatch costs
        /// (0: the kernel).
        #[cfg(feature = "probes")]
        vec_probe: u32 [range(0, 3)],
        /// mma kernel: subgroups per workgroup for heads larger than `mma_small_head`.
        mma_subgroups: u32 [range(1, 32)],
        /// mma kernel: largest head size (K's or V's) that takes `mma_small_head_subgroups`.
        mma_small_head: u32 [range(0, 1 << 16)],
        /// mma kernel: subgroups per workgroup for heads of at most `mma_small_head`.
        mma_small_head_subgroups: u32 [range(1, 32)],
        /// mma kernel: keys per tile.
        mma_kv: u32 [range(8, 1024).pow2()],
        /// mma kernel: fewest query rows per KV head to prefer it over the tile kernel (auto:
        /// the subgroup-matrix config's M).
        mma_min_rows: Option<u32> [range(0, 1 << 16)],
        /// mma kernel: largest head size (K's or V's) to prefer it for (`kernel=mma` forces it
        /// at any head size).
        mma_max_head: u32 [range(0, 1 << 16)],
        /// mma kernel: keep Q in registers as left matrices (auto: when they fit 32 words a
        /// lane).
        mma_q_regs: Option<bool>,
        /// mma kernel: f32 O accumulators per lane before splitting columns over subgroups.
        mma_o_budget: u32 [range(1, 1024)],
        /// mma kernel: load the next K/V tile into registers while the current one is computed.
        mma_prefetch: bool,
        /// mma kernel, measuring only (the results are wrong): 1 stages K and V and leaves out
        /// the math, 2 does the math on workgroup memory never refilled (0: neither).
        #[cfg(feature = "probes")]
        mma_probe: u32 [range(0, 2)],
        /// mma kernel: lazy-rescale threshold on the running maximum, in nats (0 rescales on
        /// every increase; P stays below e^tau, which f16 holds up to 11).
        tau: f32 [range_f(0.0, 11.0)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::DeviceClass;
    use crate::tuning::profiles;

    fn hopper() -> FlashAttnTuning {
        profiles::flash_attn(DeviceClass::NvidiaHopper)
    }

    #[test]
    fn overrides_set_typed_values_and_auto() {
        let mut t = hopper();
        t.apply("kernel=tile, split=4,tile_kv=64,mma_q_regs=0,tau=0").unwrap();
        assert_eq!(t.kernel, Some(Force::Tile));
        assert_eq!(
            (t.split, t.tile_kv, t.mma_q_regs, t.tau),
            (Some(4), 64, Some(false), 0.0)
        );
        t.apply("kernel=auto,split=auto").unwrap();
        assert_eq!((t.kernel, t.split), (None, None));
        // The text form reads back as the same values.
        let mut back = hopper();
        back.apply(&t.to_string()).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn out_of_range_values_and_old_spellings_are_errors_naming_the_knob() {
        let base = hopper();
        let mut bad = vec![
            "split=0",
            "split=513",
            "tile_threads=4294967295",
            "tile_threads=96",
            "tile_kv=7",
            "tile_kv=4294967295",
            "mma_kv=4294967295",
            "mma_subgroups=0",
            "vec_lanes=3",
            "vec_keys=0",
            "tile_rq=1000",
            "mask_skip=2",
            "vec_qint=2",
            "tau=nan",
            "tau=-1",
            "tau=inf",
            "tau=12",
            "kernel=fast",
        ];
        if cfg!(feature = "probes") {
            bad.extend(["mma_probe=3", "vec_probe=4"]);
        }
        for text in bad {
            let mut t = base;
            let err = t.apply(text).unwrap_err();
            let key = text.split('=').next().unwrap();
            assert!(err.contains(key), "{text}: {err}");
            assert_eq!(t, base, "{text} changed the values");
        }
        // The keys before they were the field names, and the deleted experiments.
        for old in [
            "path=tile",
            "target_wg=8",
            "mma_sg=8",
            "mma_max_hs=64",
            "prefetch=1",
            "vec_prefetch=1",
            "mma_rh=2",
        ] {
            let mut t = base;
            let err = t.apply(old).unwrap_err();
            assert!(err.contains("unknown knob"), "{old}: {err}");
        }
    }

    /// Without the `probes` feature the probe knobs do not exist.
    #[cfg(not(feature = "probes"))]
    #[test]
    fn probe_knobs_need_the_feature() {
        for probe in ["vec_probe=1", "mma_probe=1"] {
            assert!(hopper().apply(probe).unwrap_err().contains("unknown knob"), "{probe}");
        }
    }
}
