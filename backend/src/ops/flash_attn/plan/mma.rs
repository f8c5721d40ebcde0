//! The mma kernel (`flash_attn_mma.wgsl`): subgroup matrices for Q·Kᵀ and P·V, O in f32
//! result matrices, the softmax rescaling lazily.

use std::fmt;

use super::{DeviceFacts, FlashAttnTuning, Problem, Tail, odd, pow2_floor};

/// u32 words a lane may hold for Q's left matrices when `mma_q_regs` is auto.
const Q_REG_BUDGET: u32 = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmaPlan {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    /// Subgroups doing matrix work (`rb · cg`).
    pub subgroups: u32,
    /// Threads per workgroup (`subgroups · subgroup_max`).
    pub threads: u32,
    /// Row blocks of M rows.
    pub rb: u32,
    /// Subgroups sharing a row block (they split its key blocks and output columns).
    pub cg: u32,
    /// Query rows per workgroup (`rb · m`).
    pub rows: u32,
    /// Keys per tile.
    pub kv_tile: u32,
    /// Head sizes padded to whole matrices (and 8).
    pub hskp: u32,
    pub hsvp: u32,
    pub qstr: u32,
    pub kstr: u32,
    pub vstr: u32,
    pub pstr: u32,
    /// vec4<f32> per row of the score buffer.
    pub sstr: u32,
    pub q_regs: bool,
    pub kv_alias: bool,
    pub p_alias: bool,
    /// The next tile's K/V loads are issued before this tile's math.
    pub prefetch: bool,
    pub q_off: u32,
    pub k_off: u32,
    pub v_off: u32,
    pub p_off: u32,
    /// Chunks of the f16 buffer.
    pub smem: u32,
    /// vec4<f32> of the f32 buffer (scores, then rescale/epilogue scratch).
    pub sf: u32,
    /// O blocks per subgroup per scratch round.
    pub sb: u32,
    /// Softmax: lanes per row.
    pub tpr: u32,
    pub shared_bytes: u32,
    /// Measuring only ([`FlashAttnTuning::mma_probe`]): 0 the kernel, 1 the K/V staging
    /// alone, 2 the math alone.
    #[cfg(feature = "probes")]
    pub probe: u32,
}

impl MmaPlan {
    /// The plan's description (see `FlashAttnPlan`'s `Display`).
    pub(super) fn describe(&self, f: &mut fmt::Formatter<'_>, s: &Problem, tau: f32, tail: &Tail) -> fmt::Result {
        let m = self;
        let Tail {
            split,
            vectors,
            mask_skip,
            grid,
        } = tail;
        write!(
            f,
            "mma {}x{}x{} f16->f32: {} rows ({} row blocks x {} col groups) x {} keys a tile, {} threads, heads {}/{} padded to {}/{}, Q in {}, {} B shared{}{}{}, tau {}{}{}{vectors}{mask_skip}; {grid}",
            m.m,
            m.n,
            m.k,
            m.rows,
            m.rb,
            m.cg,
            m.kv_tile,
            m.threads,
            s.hsk,
            s.hsv,
            m.hskp,
            m.hsvp,
            if m.q_regs { "registers" } else { "shared memory" },
            m.shared_bytes,
            if m.kv_alias { ", V over K" } else { "" },
            if m.p_alias { ", P over K" } else { "" },
            if m.sb * m.cg < m.hsvp / m.n {
                ", O in rounds"
            } else {
                ""
            },
            tau,
            m.probe_note(),
            split
        )
    }
}

impl MmaPlan {
    /// What the plan's probe leaves out, if any.
    fn probe_note(&self) -> &'static str {
        #[cfg(feature = "probes")]
        match self.probe {
            0 => {}
            1 => return " (probe: K/V staging only, results wrong)",
            _ => return " (probe: math only, results wrong)",
        }
        ""
    }
}

/// The mma kernel's layout, if the device has a usable config and some layout fits.
pub fn mma_plan(shape: &Problem, device: &DeviceFacts, tuning: &FlashAttnTuning) -> Option<MmaPlan> {
    let cfg = device.subgroup_matrix?;
    if !cfg.f32_result || !device.shader_f16 || cfg.m == 0 || cfg.n % 8 != 0 || cfg.k % 8 != 0 {
        return None;
    }
    let (m, n, k) = (cfg.m, cfg.n, cfg.k);
    let sg_min = device.subgroup_min().max(1);
    let sg_max = device.subgroup_max().max(1);
    let subgroups = if shape.hsk.max(shape.hsv) <= tuning.mma_small_head as usize {
        tuning.mma_small_head_subgroups
    } else {
        tuning.mma_subgroups
    };
    let subgroups = pow2_floor(subgroups.clamp(1, (device.max_threads() / sg_max).max(1)));
    let threads = subgroups * sg_max;
    let hskp = (shape.hsk as u32).next_multiple_of(k.max(8));
    let hsvp = (shape.hsv as u32).next_multiple_of(n.max(8));
    // Registers per lane: f32 values of an M×N result, u32 words of an M×K f16 left matrix.
    let o_per_block = (m * n).div_ceil(sg_min);
    let q_words = (hskp / k) * (m * k / 2).div_ceil(sg_min);
    let o_budget = tuning.mma_o_budget;
    let obt = hsvp / n;
    let mut cg = 1;
    while cg < subgroups && obt.div_ceil(cg) * o_per_block > o_budget {
        cg *= 2;
    }
    let total = shape.rows_per_kv_head().max(1) as u32;
    let mut rb = subgroups / cg;
    while rb > 1 && (rb / 2) * m >= total {
        rb /= 2;
        cg *= 2;
    }
    let q_regs = tuning.mma_q_regs.unwrap_or(q_words <= Q_REG_BUDGET);
    let unit = lcm(n, k).max(8);
    let mut kv_tile = tuning.mma_kv.next_multiple_of(unit).max(unit);
    let mut kv_alias = false;
    let mut q_regs = q_regs;
    loop {
        let p = mma_layout(
            shape, device, tuning, m, n, k, subgroups, threads, rb, cg, kv_tile, hskp, hsvp, q_regs, kv_alias,
        );
        if p.shared_bytes <= device.max_workgroup_storage {
            return Some(p);
        }
        if kv_tile > unit {
            kv_tile = (kv_tile / 2).next_multiple_of(unit);
        } else if !kv_alias {
            kv_alias = true;
        } else if !q_regs && tuning.mma_q_regs.is_none() {
            q_regs = true;
        } else if rb > 1 {
            rb /= 2;
            cg *= 2;
            kv_alias = false;
            kv_tile = tuning.mma_kv.next_multiple_of(unit).max(unit);
        } else {
            return None;
        }
    }
}

fn lcm(a: u32, b: u32) -> u32 {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    if a == 0 || b == 0 { a.max(b) } else { a / gcd(a, b) * b }
}

#[allow(clippy::too_many_arguments)]
fn mma_layout(
    shape: &Problem,
    device: &DeviceFacts,
    tuning: &FlashAttnTuning,
    m: u32,
    n: u32,
    k: u32,
    subgroups: u32,
    threads: u32,
    rb: u32,
    cg: u32,
    kv_tile: u32,
    hskp: u32,
    hsvp: u32,
    q_regs: bool,
    kv_alias: bool,
) -> MmaPlan {
    let _ = shape;
    let rows = rb * m;
    let qstr = odd(hskp / 8);
    let kstr = odd(hskp / 8);
    let vstr = odd(hsvp / 8);
    let pstr = odd(kv_tile / 8);
    let sstr = odd(kv_tile / 4);
    // The f16 buffer: [K | V] (or one buffer for both), P (in K's place when it fits), Q
    // (overlapping everything when it lives in registers after the start).
    let k_chunks = kv_tile * kstr;
    let v_chunks = kv_tile * vstr;
    let p_chunks = rows * pstr;
    let q_chunks = rows * qstr;
    let (k_off, v_off, mut end) = if kv_alias {
        (0, 0, kv_tile * kstr.max(vstr))
    } else {
        (0, k_chunks, k_chunks + v_chunks)
    };
    let p_alias = !kv_alias && p_chunks <= k_chunks;
    let p_off = if p_alias {
        k_off
    } else {
        let at = end;
        end += p_chunks;
        at
    };
    let q_off = if q_regs {
        0
    } else {
        let at = end;
        end += q_chunks;
        at
    };
    let smem = if q_regs { end.max(q_chunks) } else { end };
    // The f32 buffer: scores, later one O block per subgroup per round at least.
    let block = m * n / 4;
    let sf = (rows * sstr).max(subgroups * block);
    let obs = (hsvp / n).div_ceil(cg);
    let sb = (sf / (subgroups * block)).clamp(1, obs.max(1));
    let tpr = pow2_floor(threads / rows).clamp(1, device.subgroup_min().max(1).min(kv_tile / 8));
    let shared_bytes = smem * 16 + sf * 16 + 5 * rows * 4 + 16;
    let prefetch = tuning.mma_prefetch;
    MmaPlan {
        m,
        n,
        k,
        subgroups,
        threads,
        rb,
        cg,
        rows,
        kv_tile,
        hskp,
        hsvp,
        qstr,
        kstr,
        vstr,
        pstr,
        sstr,
        q_regs,
        kv_alias,
        p_alias,
        prefetch,
        q_off,
        k_off,
        v_off,
        p_off,
        smem,
        sf,
        sb,
        tpr,
        shared_bytes,
        #[cfg(feature = "probes")]
        probe: tuning.mma_probe,
    }
}
