//! FLASH_ATTN_EXT's tuning knobs: what they are, their ranges, and their text form
//! (`key=value,…`, as `backend-ops` reads them from `GGML_DAWN_FA`).

use super::MAX_SPLIT;

/// Which kernel to use, when forced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Force {
    Simple,
    Tile,
    Mma,
    Vec,
}

/// Tuning knobs. `None` means the default, which depends on the device (see each field).
/// [`parse_knobs`] reads them from text (`backend-ops` takes it from `GGML_DAWN_FA`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Knobs {
    /// Force a kernel (falls back, with the reason, if it cannot run the shapes).
    pub force: Option<Force>,
    /// KV splits (default: from `target_workgroups`).
    pub split: Option<u32>,
    /// Workgroups to aim for when choosing the split count (default 512 for the tile kernel,
    /// 384 for the mma kernel; 8 on CPU adapters).
    pub target_workgroups: Option<u32>,
    /// Fewest KV tiles per split (default 2).
    pub min_split_tiles: Option<u32>,
    /// Load the next K/V tile into registers while the current one is computed (default: tile
    /// kernel when a thread's share fits 16 chunks of 16 bytes; off for the mma kernel, whose
    /// registers are better spent on occupancy).
    pub prefetch: Option<bool>,
    /// Skip KV tiles whose mask is -inf for every row of the workgroup (default on).
    pub mask_skip: Option<bool>,
    /// Tile kernel: threads per workgroup (default 128).
    pub tile_threads: Option<u32>,
    /// Tile kernel: most query rows per workgroup (default 32).
    pub tile_rows: Option<u32>,
    /// Tile kernel: keys per tile (default 32).
    pub tile_kv: Option<u32>,
    /// Tile kernel: rows per thread in Q·Kᵀ, at most (default 1: more lanes per key, fewer
    /// per dot product).
    pub tile_rq: Option<u32>,
    /// Tile kernel: rows per thread in P·V (default 4).
    pub tile_ro: Option<u32>,
    /// Vec kernel: threads per workgroup (default 128).
    pub vec_threads: Option<u32>,
    /// Vec kernel: lanes per key (default: the head's 16-byte chunks rounded up to a power of
    /// two, at most 16 and the subgroup size).
    pub vec_lanes: Option<u32>,
    /// Vec kernel: keys a lane group loads before using them (default 4).
    pub vec_keys: Option<u32>,
    /// Vec kernel: most query rows (per KV head) it takes (default 8).
    pub vec_rows: Option<u32>,
    /// Vec kernel, measuring only (the results are wrong): 1 loads K and V chunks as usual but
    /// decodes them as if they were f16, so a quantized cache's time without its
    /// dequantization; 2 folds the loaded K, V and mask words into the output without scores,
    /// softmax or products, so the loads' own time; 3 runs the kernel but not the split's
    /// reduce pass (the output left unwritten), so what that second dispatch costs (default 0:
    /// the kernel).
    pub vec_probe: Option<u32>,
    /// Vec kernel: q8_0 and q4_0 K scored by packed 4x8-bit dot products against Q rounded to 8
    /// bits per 8 dimensions (its scale apart), instead of K converted to floats (default: on
    /// GPUs for at most 4 query rows a workgroup, where it measured faster).
    pub vec_qint: Option<bool>,
    /// mma kernel: subgroups per workgroup (default 8; 16 on GPUs for heads of at most 64).
    pub mma_subgroups: Option<u32>,
    /// mma kernel: keys per tile (default 64).
    pub mma_kv: Option<u32>,
    /// mma kernel: fewest query rows per KV head to prefer it over the tile kernel (default M).
    pub mma_min_rows: Option<u32>,
    /// mma kernel: largest head size (K's or V's) to prefer it for (default: any on GPUs, 128
    /// on CPU adapters, where subgroup matrices are emulated; see `plan.rs`). `path=mma` forces
    /// it at any head size.
    pub mma_max_head: Option<u32>,
    /// mma kernel: keep Q in registers as left matrices (default: when they fit 32 words/lane).
    pub mma_q_regs: Option<bool>,
    /// mma kernel: f32 O accumulators per lane before splitting columns over subgroups (default
    /// 128 on GPUs, 64 on CPU adapters).
    pub mma_o_budget: Option<u32>,
    /// mma kernel, measuring only (the results are wrong): 1 stages K and V and leaves out the
    /// math, 2 does the math on workgroup memory never refilled (default 0: neither).
    pub mma_probe: Option<u32>,
    /// mma kernel: lazy-rescale threshold on the running maximum (default 8; 0 rescales on
    /// every increase).
    pub tau: Option<f32>,
}

/// Checks knobs built in code against the ranges [`parse_knobs`] enforces.
pub fn validate_knobs(k: &Knobs) -> std::result::Result<(), String> {
    for (key, value) in [
        ("split", k.split),
        ("target_wg", k.target_workgroups),
        ("min_split_tiles", k.min_split_tiles),
        ("tile_threads", k.tile_threads),
        ("tile_rows", k.tile_rows),
        ("tile_kv", k.tile_kv),
        ("tile_rq", k.tile_rq),
        ("tile_ro", k.tile_ro),
        ("vec_threads", k.vec_threads),
        ("vec_lanes", k.vec_lanes),
        ("vec_keys", k.vec_keys),
        ("vec_rows", k.vec_rows),
        ("mma_sg", k.mma_subgroups),
        ("mma_kv", k.mma_kv),
        ("mma_min_rows", k.mma_min_rows),
        ("mma_max_hs", k.mma_max_head),
        ("mma_o_budget", k.mma_o_budget),
        ("mma_probe", k.mma_probe),
        ("vec_probe", k.vec_probe),
    ] {
        if let Some(v) = value {
            check_knob(key, v)?;
        }
    }
    if let Some(tau) = k.tau
        && !(tau.is_finite() && tau >= 0.0)
    {
        return Err(format!("`tau={tau}`: must be a finite number, at least 0"));
    }
    Ok(())
}

fn check_knob(key: &str, v: u32) -> std::result::Result<(), String> {
    if let Some((lo, hi, pow2)) = knob_range(key) {
        if !(lo..=hi).contains(&v) {
            return Err(format!("`{key}={v}`: must be in {lo}..={hi}"));
        }
        if pow2 && !v.is_power_of_two() {
            return Err(format!("`{key}={v}`: must be a power of two"));
        }
    }
    Ok(())
}

/// The range of each integer knob (`(low, high, power of two)`): what keeps the planner's u32
/// arithmetic from overflowing and the kernels' per-thread arrays, workgroups and workgroup
/// memory within what devices have.
pub(crate) fn knob_range(key: &str) -> Option<(u32, u32, bool)> {
    Some(match key {
        "split" => (1, MAX_SPLIT, false),
        "target_wg" => (1, 1 << 20, false),
        "min_split_tiles" => (1, 1 << 16, false),
        "tile_threads" => (1, 1024, true),
        "tile_rows" => (1, 256, false),
        "tile_kv" => (8, 1024, true),
        "tile_rq" | "tile_ro" => (1, 32, false),
        "vec_threads" => (1, 1024, true),
        "vec_lanes" => (1, 32, true),
        "vec_keys" => (1, 16, false),
        "vec_rows" => (1, 64, false),
        "mma_sg" => (1, 32, false),
        "mma_kv" => (8, 1024, true),
        "mma_min_rows" => (0, 1 << 16, false),
        "mma_max_hs" => (0, 1 << 16, false),
        "mma_o_budget" => (1, 1024, false),
        "mma_probe" => (0, 2, false),
        "vec_probe" => (0, 3, false),
        _ => return None,
    })
}

/// Parses `key=value,...`. Keys: `path` (simple, tile, mma, vec), `split`, `target_wg`,
/// `min_split_tiles`, `tile_threads`, `tile_rows`, `tile_kv`, `tile_rq`, `tile_ro`, `vec_threads`, `vec_lanes`,
/// `vec_keys`, `vec_rows`, `vec_probe` (0-3), `vec_qint` (0/1), `mma_sg`, `mma_kv`,
/// `mma_min_rows`, `mma_max_hs`, `mma_q_regs` (0/1), `mma_o_budget`, `mma_probe` (0-2), `prefetch` (0/1),
/// `mask_skip` (0/1), `tau`
/// (finite, at least 0). A value out of its key's range is an error naming the key.
pub fn parse_knobs(text: &str) -> std::result::Result<Knobs, String> {
    let mut k = Knobs::default();
    let mut seen: Vec<&str> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("`{item}` is not key=value"))?;
        let (key, value) = (key.trim(), value.trim());
        if seen.contains(&key) {
            return Err(format!("`{key}` is given twice"));
        }
        seen.push(key);
        let int = || -> std::result::Result<u32, String> {
            let v = value
                .parse::<u32>()
                .map_err(|_| format!("`{key}={value}`: not a non-negative 32-bit integer"))?;
            check_knob(key, v)?;
            Ok(v)
        };
        let flag = || match value {
            "0" => Ok(false),
            "1" => Ok(true),
            _ => Err(format!("`{key}={value}`: must be 0 or 1")),
        };
        match key {
            "path" => {
                k.force = Some(match value {
                    "simple" => Force::Simple,
                    "tile" => Force::Tile,
                    "mma" => Force::Mma,
                    "vec" => Force::Vec,
                    _ => return Err(format!("path `{value}`: simple, tile, mma or vec")),
                })
            }
            "split" => k.split = Some(int()?),
            "target_wg" => k.target_workgroups = Some(int()?),
            "min_split_tiles" => k.min_split_tiles = Some(int()?),
            "tile_threads" => k.tile_threads = Some(int()?),
            "tile_rows" => k.tile_rows = Some(int()?),
            "tile_kv" => k.tile_kv = Some(int()?),
            "tile_ro" => k.tile_ro = Some(int()?),
            "tile_rq" => k.tile_rq = Some(int()?),
            "vec_threads" => k.vec_threads = Some(int()?),
            "vec_lanes" => k.vec_lanes = Some(int()?),
            "vec_keys" => k.vec_keys = Some(int()?),
            "vec_rows" => k.vec_rows = Some(int()?),
            "vec_probe" => k.vec_probe = Some(int()?),
            "vec_qint" => k.vec_qint = Some(flag()?),
            "mma_sg" => k.mma_subgroups = Some(int()?),
            "mma_kv" => k.mma_kv = Some(int()?),
            "mma_min_rows" => k.mma_min_rows = Some(int()?),
            "mma_max_hs" => k.mma_max_head = Some(int()?),
            "mma_q_regs" => k.mma_q_regs = Some(flag()?),
            "mma_o_budget" => k.mma_o_budget = Some(int()?),
            "mma_probe" => k.mma_probe = Some(int()?),
            "prefetch" => k.prefetch = Some(flag()?),
            "mask_skip" => k.mask_skip = Some(flag()?),
            "tau" => {
                let tau = value
                    .parse::<f32>()
                    .ok()
                    .filter(|t| t.is_finite() && *t >= 0.0)
                    .ok_or_else(|| format!("`tau={value}`: must be a finite number, at least 0"))?;
                k.tau = Some(tau)
            }
            _ => return Err(format!("unknown key `{key}`")),
        }
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_parse() {
        let k = parse_knobs("path=tile, split=4,tile_kv=64,mma_q_regs=0,tau=0").unwrap();
        assert_eq!(k.force, Some(Force::Tile));
        assert_eq!(
            (k.split, k.tile_kv, k.mma_q_regs, k.tau),
            (Some(4), Some(64), Some(false), Some(0.0))
        );
        assert!(parse_knobs("bogus=1").is_err());
        assert!(parse_knobs("split").is_err());
        assert_eq!(parse_knobs("").unwrap(), Knobs::default());
    }

    #[test]
    fn out_of_range_knobs_are_errors_naming_the_key() {
        for bad in [
            "split=0",
            "split=4294967295",
            "tile_threads=4294967295",
            "tile_kv=7",
            "tile_kv=4294967295",
            "mma_kv=4294967295",
            "mma_sg=0",
            "vec_lanes=3",
            "vec_keys=0",
            "tile_rq=1000",
            "mask_skip=2",
            "mma_probe=3",
            "vec_probe=4",
            "vec_qint=2",
            "tau=nan",
            "tau=-1",
            "tau=inf",
        ] {
            let err = parse_knobs(bad).unwrap_err();
            let key = bad.split('=').next().unwrap();
            assert!(err.contains(key), "{bad}: {err}");
        }
        assert!(parse_knobs("split=2,split=4").is_err());
        // Knobs built in code are held to the same ranges.
        let built = Knobs {
            tile_threads: Some(u32::MAX),
            ..Knobs::default()
        };
        assert!(validate_knobs(&built).unwrap_err().contains("tile_threads"));
        assert!(validate_knobs(&Knobs::default()).is_ok());
    }
}
