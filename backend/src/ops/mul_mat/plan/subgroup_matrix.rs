//! The subgroup-matrix kernel (`mul_mat_subgroup_matrix.wgsl`): tiles from the adapter's f16
//! config, the subgroup size and the workgroup-memory limit; a narrow tile for small n.

use std::fmt;

use super::{DeviceFacts, MatrixConfig, MulMatTuning, Placed, Problem};
use crate::ops::arith::lcm;

/// The subgroup-matrix kernel's tile and K loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubgroupMatrixPlan {
    pub config: MatrixConfig,
    /// Subgroups along m and n.
    pub count_m: u32,
    pub count_n: u32,
    /// Result matrices per subgroup along m and n.
    pub frag_m: u32,
    pub frag_n: u32,
    pub tk: u32,
    pub pad: u32,
    pub stages: u32,
    /// One stage with the next step fetched into registers first
    /// ([`MulMatTuning::sg_prefetch`]).
    pub prefetch: bool,
    /// ... and the step after it too: two steps' loads in flight (`sg_prefetch=2`).
    pub deep_prefetch: bool,
    /// `MulMatTuning::sg_probe` (0 but when measuring).
    #[cfg(feature = "probes")]
    pub probe: u32,
    /// f32 units kept f32 in registers until stored ([`MulMatTuning::sg_raw_units`]).
    pub raw_units: bool,
    pub wg_size: u32,
    /// Result matrices the edge-tile scratch holds (subgroups take turns when fewer than
    /// `count_m · count_n`): what is left of the workgroup memory after staging.
    pub scratch_sgs: u32,
    /// The narrow tile for small n.
    pub narrow: bool,
}

impl SubgroupMatrixPlan {
    /// The probe the kernel runs (0: none; always 0 without the `probes` feature).
    pub fn probe(&self) -> u32 {
        #[cfg(feature = "probes")]
        return self.probe;
        #[cfg(not(feature = "probes"))]
        0
    }

    pub(super) fn describe(&self, f: &mut fmt::Formatter<'_>, (tm, tn): (u32, u32)) -> fmt::Result {
        let SubgroupMatrixPlan {
            config,
            count_m,
            count_n,
            frag_m,
            frag_n,
            tk,
            stages,
            wg_size,
            scratch_sgs,
            ..
        } = self;
        write!(
            f,
            "subgroup-matrix {}x{}x{} ({} accumulators): {}tile {tm}x{tn}x{tk}, {count_m}x{count_n} subgroups \
             of {frag_m}x{frag_n} results, {stages} stage{}{}{}, workgroup of {wg_size}, edge scratch of \
             {scratch_sgs}{}",
            config.m,
            config.n,
            config.k,
            if config.f32_result { "f32" } else { "f16" },
            if self.narrow { "narrow " } else { "" },
            if *stages == 1 { "" } else { "s" },
            match (self.prefetch, self.deep_prefetch) {
                (true, true) => " with register prefetch two steps ahead",
                (true, false) => " with register prefetch",
                _ => "",
            },
            if self.raw_units {
                ", f32 units packed at the store"
            } else {
                ""
            },
            match self.probe() {
                0 => "",
                1 => " (probe: staging only, results wrong)",
                _ => " (probe: multiplies only, results wrong)",
            },
        )
    }
}

/// Bytes of workgroup memory of the staging.
fn staging_bytes(c: &MatrixConfig, counts: (u32, u32), frags: (u32, u32), tk: u32, pad: u32, stages: u32) -> u32 {
    let (tm, tn) = (counts.0 * frags.0 * c.m, counts.1 * frags.1 * c.n);
    stages * (tm + tn) * (tk + pad) * 2
}

/// Bytes of one result matrix in the edge scratch.
fn scratch_bytes(c: &MatrixConfig) -> u32 {
    c.m * c.n * if c.f32_result { 4 } else { 2 }
}

/// Staging plus a scratch of one result matrix: what must fit.
fn bytes(c: &MatrixConfig, counts: (u32, u32), frags: (u32, u32), tk: u32, pad: u32, stages: u32) -> u32 {
    staging_bytes(c, counts, frags, tk, pad, stages) + scratch_bytes(c)
}

/// The subgroup-matrix kernel for `p`, if the device has a config it can use.
pub(super) fn plan(p: &Problem, d: &DeviceFacts, t: &MulMatTuning) -> Option<Placed<SubgroupMatrixPlan>> {
    let c = d.subgroup_matrix?;
    // f32 accumulators where the adapter offers them, unless `sg_acc_f16` asks for f16 ones.
    let c = MatrixConfig {
        f32_result: c.f32_result && !(t.sg_acc_f16 && c.f16_result),
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
        ((t.sg_small.0, 1), (t.sg_small.1, frag_n))
    } else {
        let frag = |target: u32, count: u32, size: u32| (target / (count * size)).max(1);
        (
            (t.sg_counts.0, t.sg_counts.1),
            (
                frag(t.sg_tile.0, t.sg_counts.0, c.m),
                frag(t.sg_tile.1, t.sg_counts.1, c.n),
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
    let mut tk = t.sg_tk.max(unit).next_multiple_of(unit);
    let pad = t.sg_pad;
    let mut stages = t.sg_stages;
    // Shrink until the workgroup memory fits: K step, then single buffering, then fragments.
    let limit = d.max_workgroup_storage;
    loop {
        if bytes(&c, counts, frags, tk, pad, stages) <= limit {
            break;
        }
        if tk > unit {
            tk = (tk / 2).next_multiple_of(unit).max(unit);
            if bytes(&c, counts, frags, tk, pad, stages) <= limit {
                break;
            }
            continue;
        }
        if stages > 1 {
            stages = 1;
            tk = t.sg_tk.max(unit).next_multiple_of(unit);
            continue;
        }
        if frags.0 > 1 || frags.1 > 1 {
            if longer_m(counts, frags) {
                frags.0 /= 2
            } else {
                frags.1 /= 2
            }
            tk = t.sg_tk.max(unit).next_multiple_of(unit);
            stages = t.sg_stages;
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
    let staging = staging_bytes(&c, counts, frags, tk, pad, stages);
    let mut scratch_sgs = ((limit - staging) / scratch_bytes(&c)).clamp(1, counts.0 * counts.1);
    if let Some(max) = t.sg_scratch_max {
        scratch_sgs = scratch_sgs.min(max);
    }
    let workgroup_bytes = staging + scratch_sgs * scratch_bytes(&c);
    let plan = SubgroupMatrixPlan {
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
        #[cfg(feature = "probes")]
        probe: t.sg_probe,
        raw_units: t.sg_raw_units,
        wg_size: counts.0 * counts.1 * sg_size,
        scratch_sgs,
        narrow,
    };
    let (tm, tn) = (counts.0 * frags.0 * c.m, counts.1 * frags.1 * c.n);
    Some((
        plan,
        p.m.div_ceil(u64::from(tm)) as u32,
        p.n.div_ceil(u64::from(tn)) as u32,
        workgroup_bytes,
    ))
}
