//! The vec kernel (`flash_attn_vec.wgsl`): decode. Groups of lanes own keys and read K/V
//! rows straight into registers, each group with its own online softmax, merged once per
//! workgroup.

use std::fmt;

use super::{DeviceFacts, Knobs, Shape, Tail, pow2_floor};
use crate::ggml_type::GgmlType;

const DEFAULT_VEC_THREADS: u32 = 128;
const DEFAULT_VEC_LANES: u32 = 16;
const DEFAULT_VEC_KEYS: u32 = 4;
const DEFAULT_VEC_ROWS: u32 = 8;
/// f32 registers a vec-kernel lane may hold for Q, and for O.
const VEC_REG_BUDGET: u32 = 64;

/// The vec kernel's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VecPlan {
    /// Threads per workgroup.
    pub threads: u32,
    /// Lanes per key (a power of two dividing `team`).
    pub lanes: u32,
    /// Lanes merged by shuffles at the end (the subgroup size, or a divisor of it).
    pub team: u32,
    /// Keys a lane group loads at once.
    pub keys: u32,
    /// Query rows per workgroup (all of a KV head's).
    pub rows: u32,
    /// 16-byte chunks of a K / V row per lane.
    pub ck: u32,
    pub cv: u32,
    /// Measuring only ([`Knobs::vec_probe`]): 0 the kernel, 1 K/V decoded as f16 whatever their
    /// type, 2 the K/V and mask loads alone, 3 the kernel without the split's reduce pass.
    pub probe: u32,
    /// q8_0 / q4_0 K scored by packed 8-bit dot products ([`Knobs::vec_qint`]).
    pub qint: bool,
    pub shared_bytes: u32,
}

impl VecPlan {
    /// Keys a workgroup walks per step.
    pub fn kv_tile(&self) -> u32 {
        self.threads / self.lanes * self.keys
    }
}

impl VecPlan {
    /// The plan's description (see `Plan`'s `Display`).
    pub(super) fn describe(&self, f: &mut fmt::Formatter<'_>, tail: &Tail) -> fmt::Result {
        let v = self;
        let Tail {
            split,
            vectors,
            mask_skip,
            grid,
        } = tail;
        write!(
            f,
            "vec: {} rows, {} threads, {} lanes a key ({} / {} K/V chunks a lane), {} keys a group in flight, {} keys a step, merged over teams of {}, {} B shared{}{}{vectors}{mask_skip}; {grid}",
            v.rows,
            v.threads,
            v.lanes,
            v.ck,
            v.cv,
            v.keys,
            v.kv_tile(),
            v.team,
            v.shared_bytes,
            split,
            match (v.probe, v.qint) {
                (1, _) => " (probe: K/V decoded as f16, results wrong)",
                (2, _) => " (probe: K/V loads only, results wrong)",
                (3, _) => " (probe: no reduce pass, output unwritten)",
                (_, true) => ", K scored by 8-bit dot products",
                _ => "",
            }
        )
    }
}

/// The vec kernel's layout, if all query rows of a KV head fit its registers and workgroup memory.
pub fn vec_plan(shape: &Shape, device: &DeviceFacts, knobs: &Knobs) -> Option<VecPlan> {
    let team = pow2_floor(device.subgroup_min().clamp(1, 32));
    let threads = pow2_floor(
        knobs
            .vec_threads
            .unwrap_or(DEFAULT_VEC_THREADS)
            .clamp(team, device.max_threads().max(team)),
    );
    let hsk8 = shape.hsk as u32 / 8;
    let hsv8 = shape.hsv as u32 / 8;
    let lanes = match knobs.vec_lanes {
        Some(l) => pow2_floor(l.max(1)),
        None => hsk8.max(hsv8).next_power_of_two().min(DEFAULT_VEC_LANES),
    }
    .min(team);
    let (ck, cv) = (hsk8.div_ceil(lanes), hsv8.div_ceil(lanes));
    let rows = shape.rows_per_kv_head().max(1) as u32;
    let max_rows = knobs
        .vec_rows
        .unwrap_or(DEFAULT_VEC_ROWS)
        .min(VEC_REG_BUDGET / (8 * ck.max(cv)));
    if rows > max_rows {
        return None;
    }
    let keys = knobs.vec_keys.unwrap_or(DEFAULT_VEC_KEYS).clamp(1, 16);
    let shared_bytes = 2 * (threads / team) * rows * 4 + rows * shape.hsv as u32 * 4;
    if shared_bytes > device.max_workgroup_storage {
        return None;
    }
    Some(VecPlan {
        threads,
        lanes,
        team,
        keys,
        rows,
        ck,
        cv,
        probe: knobs.vec_probe.unwrap_or(0),
        // H100 (bench/results/2026-12-06-h100-defaults.md): 4 rows, hsk=128, kv=16384: q8_0
        // 34.2 us against 38.0, q4_0 33.7 against 36.8; 8 rows, hsk=64, kv=7680: q8_0 35.1
        // against 27.7, q4_0 unchanged. So by default up to 4 rows, on GPUs: lavapipe's packed
        // dot products are slower than its conversions (4 rows, kv=4096: q4_0 8.0-8.3 ms
        // against 3.8-5.0, q8_0 8.2-10.0 against 5.8-7.7).
        qint: knobs.vec_qint.unwrap_or(!device.cpu() && rows <= 4)
            && matches!(shape.k_type, GgmlType::Q8_0 | GgmlType::Q4_0),
        shared_bytes,
    })
}
