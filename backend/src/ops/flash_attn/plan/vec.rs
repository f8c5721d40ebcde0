//! The vec kernel (`flash_attn_vec.wgsl`): decode. Groups of lanes own keys and read K/V
//! rows straight into registers, each group with its own online softmax, merged once per
//! workgroup.

use std::fmt;

use super::{DeviceFacts, FlashAttnTuning, Problem, Tail, pow2_floor};
use crate::ggml_type::GgmlType;

/// Most lanes a key takes when `vec_lanes` is auto.
const AUTO_LANES_MAX: u32 = 16;
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
    /// Measuring only ([`FlashAttnTuning::vec_probe`]): 0 the kernel, 1 K/V decoded as f16
    /// whatever their type, 2 the K/V and mask loads alone, 3 the kernel without the split's
    /// reduce pass.
    #[cfg(feature = "probes")]
    pub probe: u32,
    /// q8_0 / q4_0 K scored by packed 8-bit dot products ([`FlashAttnTuning::vec_qint`]).
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
    /// The plan's description (see `FlashAttnPlan`'s `Display`).
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
            v.note()
        )
    }
}

impl VecPlan {
    /// How K is scored, or what the plan's probe leaves out.
    fn note(&self) -> &'static str {
        #[cfg(feature = "probes")]
        match self.probe {
            1 => return " (probe: K/V decoded as f16, results wrong)",
            2 => return " (probe: K/V loads only, results wrong)",
            3 => return " (probe: no reduce pass, output unwritten)",
            _ => {}
        }
        if self.qint {
            ", K scored by 8-bit dot products"
        } else {
            ""
        }
    }

    /// The plan leaves out the split's reduce pass (a probe).
    pub(super) fn skips_reduce(&self) -> bool {
        #[cfg(feature = "probes")]
        if self.probe == 3 {
            return true;
        }
        false
    }
}

/// The vec kernel's layout, if all query rows of a KV head fit its registers and workgroup memory.
pub fn vec_plan(shape: &Problem, device: &DeviceFacts, tuning: &FlashAttnTuning) -> Option<VecPlan> {
    let team = pow2_floor(device.subgroup_min().clamp(1, 32));
    let threads = pow2_floor(tuning.vec_threads.clamp(team, device.max_threads().max(team)));
    let hsk8 = shape.hsk as u32 / 8;
    let hsv8 = shape.hsv as u32 / 8;
    let lanes = match tuning.vec_lanes {
        Some(l) => pow2_floor(l.max(1)),
        None => hsk8.max(hsv8).next_power_of_two().min(AUTO_LANES_MAX),
    }
    .min(team);
    let (ck, cv) = (hsk8.div_ceil(lanes), hsv8.div_ceil(lanes));
    let rows = shape.rows_per_kv_head().max(1) as u32;
    let max_rows = tuning.vec_rows.min(VEC_REG_BUDGET / (8 * ck.max(cv)));
    if rows > max_rows {
        return None;
    }
    let keys = tuning.vec_keys.clamp(1, 16);
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
        #[cfg(feature = "probes")]
        probe: tuning.vec_probe,
        qint: tuning.vec_qint.unwrap_or(rows <= tuning.vec_qint_max_rows)
            && matches!(shape.k_type, GgmlType::Q8_0 | GgmlType::Q4_0),
        shared_bytes,
    })
}
