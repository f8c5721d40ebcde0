//! The simple kernel (`mul_mat_simple.wgsl`): one thread per output, for what the others
//! cannot address.

use super::{Choice, DeviceFacts, MulMatPlan, Problem};
use crate::exec::grid_2d;

/// Threads per workgroup of the simple kernel.
pub const SIMPLE_WG: u32 = 64;

/// The simple kernel for `problem`, with the reason the others could not take it.
pub(super) fn plan(problem: &Problem, device: &DeviceFacts, reason: String) -> MulMatPlan {
    let outputs = problem.m * problem.n * problem.batches;
    let groups = u32::try_from(outputs.div_ceil(u64::from(SIMPLE_WG))).unwrap_or(u32::MAX);
    MulMatPlan {
        problem: *problem,
        choice: Choice::Simple(reason),
        tiles_m: 1,
        tiles_n: 1,
        batches: u32::try_from(problem.batches).unwrap_or(u32::MAX),
        grid: grid_2d(groups, device.max_workgroups_per_dim),
        workgroup_bytes: 0,
        b_vec4: false,
        a_vec4: false,
        direct_store: false,
        quantize_b: None,
        dequantize_a: None,
        convert_b: None,
    }
}
