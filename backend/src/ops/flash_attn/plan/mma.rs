//! The mma kernel (`flash_attn_mma.wgsl`): subgroup matrices for Q·Kᵀ and P·V, O in f32
//! result matrices, the softmax rescaling lazily.

use std::fmt;

use super::{DeviceFacts, Knobs, Shape, Tail, odd, pow2_floor};

const DEFAULT_MMA_SUBGROUPS: u32 = 8;
/// On GPUs, heads of at most [`SMALL_HEAD`] take twice the subgroups: on the H100 (2026-12-05,
/// hsk=hsv=64, nb=512, kv=7680) 16 subgroups ran f16 / q4_0 / q8_0 K and V in 1355 / 1519 / 1516
/// us against 1629 / 1666 / 1690 with 8; at head size 72 within noise, at 256 much slower (kv=10000:
/// 5887 against 3602 us).
const SMALL_HEAD_MMA_SUBGROUPS: u32 = 16;
const SMALL_HEAD: usize = 64;
const DEFAULT_MMA_KV: u32 = 64;
const DEFAULT_O_BUDGET_CPU: u32 = 64;
/// On GPUs a lane may hold 128 f32 O accumulators before the columns are split over subgroups
/// (which repeats Q·Kᵀ in each). At head size 256 that also changes where fitting 48 KiB of
/// workgroup memory ends: 4 row blocks with a 32-key tile, instead of 16 keys with K and V
/// sharing a buffer. On the H100 (2026-12-05, nb=512) head size 256 ran in 3602 -> 2044 us
/// (kv=10000) and 6230 -> 3799 us (kv=20000) against a budget of 64, q8_0 K and V 8112 -> 5687
/// us; head sizes 64 and 72 within noise.
const DEFAULT_O_BUDGET: u32 = 128;
const DEFAULT_Q_BUDGET: u32 = 32;

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
    /// Measuring only ([`Knobs::mma_probe`]): 0 the kernel, 1 the K/V staging alone, 2 the
    /// math alone.
    pub probe: u32,
}

impl MmaPlan {
    /// The plan's description (see `Plan`'s `Display`).
    pub(super) fn describe(&self, f: &mut fmt::Formatter<'_>, s: &Shape, tau: f32, tail: &Tail) -> fmt::Result {
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
            match m.probe {
                0 => "",
                1 => " (probe: K/V staging only, results wrong)",
                _ => " (probe: math only, results wrong)",
            },
            split
        )
    }
}

/// The mma kernel's layout, if the device has a usable config and some layout fits.
pub fn mma_plan(shape: &Shape, device: &DeviceFacts, knobs: &Knobs) -> Option<MmaPlan> {
    let cfg = device.subgroup_matrix?;
    if !cfg.f32_result || !device.shader_f16 || cfg.m == 0 || cfg.n % 8 != 0 || cfg.k % 8 != 0 {
        return None;
    }
    let (m, n, k) = (cfg.m, cfg.n, cfg.k);
    let sg_min = device.subgroup_min().max(1);
    let sg_max = device.subgroup_max().max(1);
    let default_subgroups = if !device.cpu() && shape.hsk.max(shape.hsv) <= SMALL_HEAD {
        SMALL_HEAD_MMA_SUBGROUPS
    } else {
        DEFAULT_MMA_SUBGROUPS
    };
    let subgroups = pow2_floor(
        knobs
            .mma_subgroups
            .unwrap_or(default_subgroups)
            .clamp(1, (device.max_threads() / sg_max).max(1)),
    );
    let threads = subgroups * sg_max;
    let hskp = (shape.hsk as u32).next_multiple_of(k.max(8));
    let hsvp = (shape.hsv as u32).next_multiple_of(n.max(8));
    // Registers per lane: f32 values of an M×N result, u32 words of an M×K f16 left matrix.
    let o_per_block = (m * n).div_ceil(sg_min);
    let q_words = (hskp / k) * (m * k / 2).div_ceil(sg_min);
    let o_budget = knobs.mma_o_budget.unwrap_or(if device.cpu() {
        DEFAULT_O_BUDGET_CPU
    } else {
        DEFAULT_O_BUDGET
    });
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
    let q_regs = knobs.mma_q_regs.unwrap_or(q_words <= DEFAULT_Q_BUDGET);
    let unit = lcm(n, k).max(8);
    let mut kv_tile = knobs.mma_kv.unwrap_or(DEFAULT_MMA_KV).next_multiple_of(unit).max(unit);
    let mut kv_alias = false;
    let mut q_regs = q_regs;
    loop {
        let p = mma_layout(
            shape, device, knobs, m, n, k, subgroups, threads, rb, cg, kv_tile, hskp, hsvp, q_regs, kv_alias,
        );
        if p.shared_bytes <= device.max_workgroup_storage {
            return Some(p);
        }
        if kv_tile > unit {
            kv_tile = (kv_tile / 2).next_multiple_of(unit);
        } else if !kv_alias {
            kv_alias = true;
        } else if !q_regs && knobs.mma_q_regs.is_none() {
            q_regs = true;
        } else if rb > 1 {
            rb /= 2;
            cg *= 2;
            kv_alias = false;
            kv_tile = knobs.mma_kv.unwrap_or(DEFAULT_MMA_KV).next_multiple_of(unit).max(unit);
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
    shape: &Shape,
    device: &DeviceFacts,
    knobs: &Knobs,
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
    let prefetch = knobs.prefetch.unwrap_or(false);
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
        probe: knobs.mma_probe.unwrap_or(0),
    }
}
