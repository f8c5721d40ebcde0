//! The register-tiled kernel (`mul_mat_tiled.wgsl`): f32 tiles in registers, for every device.

use std::fmt;

use super::{DeviceFacts, MulMatTuning, Placed, Problem};

/// The register tile: threads along m and n, outputs per thread, K step, padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TiledPlan {
    pub wg_m: u32,
    pub wg_n: u32,
    pub thread_m: u32,
    pub thread_n: u32,
    pub tk: u32,
    pub pad: u32,
}

impl TiledPlan {
    pub(super) fn describe(&self, f: &mut fmt::Formatter<'_>, (tm, tn): (u32, u32)) -> fmt::Result {
        let TiledPlan {
            thread_m, thread_n, tk, ..
        } = self;
        write!(
            f,
            "register-tiled: tile {tm}x{tn}x{tk}, {thread_m}x{thread_n} per thread, f32 staging"
        )
    }
}

/// The register tile for `p`, shrunk to the device's workgroup limits.
pub(super) fn plan(p: &Problem, d: &DeviceFacts, t: &MulMatTuning) -> Result<Placed<TiledPlan>, String> {
    let (mut wg_m, mut wg_n) = (t.tiled_wg.0, t.tiled_wg.1);
    while wg_m * wg_n > d.max_invocations.min(d.max_workgroup_size_x) && (wg_m > 1 || wg_n > 1) {
        if wg_m >= wg_n { wg_m /= 2 } else { wg_n /= 2 }
    }
    let (thread_m, thread_n) = (t.tiled_thread.0, t.tiled_thread.1);
    let (tm, tn) = (wg_m * thread_m, wg_n * thread_n);
    let mut tk = t.tiled_tk;
    let bytes = |tk: u32| 2 * tk * ((tm + t.tiled_pad) + (tn + t.tiled_pad)) * 4;
    while bytes(tk) > d.max_workgroup_storage && tk > 8 {
        tk /= 2;
    }
    if bytes(tk) > d.max_workgroup_storage {
        return Err(format!("the register tile needs {} B of workgroup memory", bytes(tk)));
    }
    let plan = TiledPlan {
        wg_m,
        wg_n,
        thread_m,
        thread_n,
        tk,
        pad: t.tiled_pad,
    };
    Ok((
        plan,
        p.m.div_ceil(u64::from(tm)) as u32,
        p.n.div_ceil(u64::from(tn)) as u32,
        bytes(tk),
    ))
}
