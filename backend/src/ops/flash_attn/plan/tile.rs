//! The tile kernel (`flash_attn_tile.wgsl`): register-tiled dot products from workgroup
//! memory, for devices without usable subgroup matrices, and decode that does not fit the vec
//! kernel.

use std::fmt;

use super::{DeviceFacts, FlashAttnTuning, Problem, Tail, odd, pow2_floor};

/// 16-byte K/V chunks a thread may hold in registers to prefetch the next tile (when
/// `tile_prefetch` is auto).
const PREFETCH_CHUNKS: u32 = 16;
/// Accumulators (f32) a tile-kernel thread may hold in P·V.
pub(super) const TILE_ACC_BUDGET: u32 = 64;

/// The tile kernel's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TilePlan {
    /// Threads per workgroup.
    pub threads: u32,
    /// Query rows per workgroup (G).
    pub rows: u32,
    /// Keys per tile (T).
    pub kv_tile: u32,
    /// Q·Kᵀ: lanes sharing one dot product (reduced with subgroup shuffles).
    pub ds: u32,
    /// Q·Kᵀ: row groups (threads per key / ds).
    pub gq: u32,
    /// Q·Kᵀ: rows per thread.
    pub rq: u32,
    /// P·V: lanes over the 8-element chunks of an output row.
    pub lv: u32,
    /// P·V: chunks per lane.
    pub ch: u32,
    /// P·V: rows per thread.
    pub ro: u32,
    /// P·V: row groups (`ceil(rows / ro)`).
    pub rgn: u32,
    /// P·V: key splits inside the workgroup (combined at the end).
    pub ks: u32,
    /// Softmax: lanes per row.
    pub tpr: u32,
    /// V staged into K's buffer after Q·Kᵀ (less memory, less overlap).
    pub kv_alias: bool,
    /// The next tile's K/V loads are issued before this tile's math.
    pub prefetch: bool,
    /// 16-byte chunks per K / V row in workgroup memory (odd, against bank conflicts).
    pub kstr: u32,
    pub vstr: u32,
    /// f32 values per Q row in workgroup memory (also the final reduction's rows).
    pub qw: u32,
    pub shared_bytes: u32,
}

impl TilePlan {
    /// The plan's description (see `FlashAttnPlan`'s `Display`).
    pub(super) fn describe(&self, f: &mut fmt::Formatter<'_>, tail: &Tail) -> fmt::Result {
        let t = self;
        let Tail {
            split,
            vectors,
            mask_skip,
            grid,
        } = tail;
        write!(
            f,
            "tile: {} rows x {} keys a tile, {} threads (q.k {} lanes x {} rows/thread, p.v {} rows x {} chunks, {} key splits), {} B shared{}{}{vectors}{mask_skip}; {grid}",
            t.rows,
            t.kv_tile,
            t.threads,
            t.ds,
            t.rq,
            t.ro,
            t.ch,
            t.ks,
            t.shared_bytes,
            if t.kv_alias { ", V over K" } else { "" },
            split
        )
    }
}

/// The tile kernel's layout, shrunk until it fits the device.
pub fn tile_plan(shape: &Problem, device: &DeviceFacts, tuning: &FlashAttnTuning) -> Option<TilePlan> {
    let sg_max = device.subgroup_max().max(1);
    let threads = tuning
        .tile_threads
        .next_multiple_of(sg_max)
        .min(device.max_threads() / sg_max * sg_max)
        .max(sg_max);
    let threads = pow2_floor(threads).max(sg_max);
    let total = shape.rows_per_kv_head().max(1) as u32;
    let max_rows = tuning.tile_rows.max(1);
    // Balance the row blocks: 20 rows with at most 16 a block give two blocks of 10.
    let mut rows = total.div_ceil(total.div_ceil(max_rows));
    let mut kv_tile = pow2_floor(tuning.tile_kv.clamp(8, threads));
    let mut kv_alias = false;
    loop {
        if let Some(t) = tile_layout(shape, device, tuning, threads, rows, kv_tile, kv_alias)
            && t.shared_bytes <= device.max_workgroup_storage
        {
            return Some(t);
        }
        if !kv_alias {
            kv_alias = true;
        } else if kv_tile > 8 {
            kv_tile /= 2;
            kv_alias = false;
        } else if rows > 1 {
            rows = rows.div_ceil(2);
            kv_tile = pow2_floor(tuning.tile_kv.clamp(8, threads));
            kv_alias = false;
        } else {
            return None;
        }
    }
}

fn tile_layout(
    shape: &Problem,
    device: &DeviceFacts,
    tuning: &FlashAttnTuning,
    threads: u32,
    rows: u32,
    kv_tile: u32,
    kv_alias: bool,
) -> Option<TilePlan> {
    let hsk8 = shape.hsk as u32 / 8;
    let hsv8 = shape.hsv as u32 / 8;
    let lane_cap = device.subgroup_min().clamp(1, 32);
    // Q·Kᵀ: threads per key split into row groups and lanes per dot product.
    // Q·Kᵀ: a thread takes up to `rq_pref` rows of one key (so each K chunk is read and
    // converted once for all of them), and the lanes of a key share its dimensions.
    let cap = lane_cap.min(pow2_floor(hsk8).max(1));
    let rq_pref = tuning.tile_rq.max(1);
    let mut kv_tile = kv_tile.min(threads);
    let (mut gq, mut ds);
    loop {
        let per_key = threads / kv_tile;
        gq = rows.div_ceil(rq_pref).next_power_of_two().min(per_key).max(1);
        ds = per_key / gq;
        if ds > cap {
            gq = (per_key / cap).max(1);
            ds = per_key / gq;
        }
        if ds <= cap || kv_tile >= threads {
            break;
        }
        kv_tile *= 2;
    }
    let ds = ds.max(1);
    let rq = rows.div_ceil(gq);
    // P·V: lanes over an output row's chunks, row groups, key splits.
    let lv = hsv8.min(threads).max(1);
    let ch = hsv8.div_ceil(lv);
    let rgp = threads / lv;
    let mut ro = tuning.tile_ro.clamp(1, rows);
    if rows.div_ceil(ro) > rgp {
        ro = rows.div_ceil(rgp);
    }
    let rgn = rows.div_ceil(ro);
    let ks = (rgp / rgn).clamp(1, kv_tile);
    if ro * ch * 8 > TILE_ACC_BUDGET || rq > 32 {
        return None;
    }
    let tpr = pow2_floor(threads / rows).clamp(1, lane_cap.min(kv_tile));
    let kstr = odd(hsk8);
    let vstr = odd(hsv8);
    let qw = (shape.hsk.max(shape.hsv) as u32).next_multiple_of(4);
    let kv_chunks = if kv_alias {
        kv_tile * kstr.max(vstr)
    } else {
        kv_tile * (kstr + vstr)
    };
    let shared_bytes = rows * qw * 4 + kv_chunks * 16 + rows * kv_tile * 4 + 5 * rows * 4 + 16;
    let staged = (kv_tile * hsk8).div_ceil(threads) + (kv_tile * hsv8).div_ceil(threads);
    let prefetch = tuning.tile_prefetch.unwrap_or(staged <= PREFETCH_CHUNKS);
    Some(TilePlan {
        threads,
        rows,
        kv_tile,
        ds,
        gq,
        rq,
        lv,
        ch,
        ro,
        rgn,
        ks,
        tpr,
        kv_alias,
        prefetch,
        kstr,
        vstr,
        qw,
        shared_bytes,
    })
}
