//! The GLU family's plan: a pure function of the problem and the device.

use std::fmt;

use crate::error::{BackendError, Result};
use crate::exec::grid_2d;
use crate::facts::DeviceFacts;
use crate::ggml_type::GgmlType;
use crate::reference::GluOp;

/// Threads per workgroup (one dst element each).
pub const WG_SIZE: u32 = 256;

/// What a GLU is asked to do, as the planner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Problem {
    pub op: GluOp,
    pub ty: GgmlType,
    /// dst's extents (`n` = ne0).
    pub dst_ne: [usize; 4],
    /// Two tensors (ggml's `ggml_glu_split`) rather than the halves of one.
    pub split: bool,
    pub swapped: bool,
}

/// Every decision the encoder follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GluPlan {
    pub problem: Problem,
    /// Threads (dst elements).
    pub threads: u32,
    pub workgroups: [u32; 3],
}

/// Plans `p` on the device `facts` describes.
pub fn plan(p: &Problem, facts: &DeviceFacts) -> Result<GluPlan> {
    if p.ty == GgmlType::F16 && !facts.shader_f16 {
        return Err(BackendError::Unsupported(format!(
            "{}: f16 operands need the device's shader-f16 feature",
            p.op
        )));
    }
    let elements: usize = p.dst_ne.iter().product();
    let threads = u32::try_from(elements)
        .map_err(|_| BackendError::Unsupported(format!("{}: {elements} elements pass 2^32", p.op)))?;
    Ok(GluPlan {
        problem: *p,
        threads,
        workgroups: grid_2d(threads.div_ceil(WG_SIZE), facts.max_workgroups_per_dim),
    })
}

impl fmt::Display for GluPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.problem;
        let form = match (p.split, p.swapped) {
            (true, _) => "split",
            (false, true) => "fused, swapped",
            (false, false) => "fused",
        };
        write!(
            f,
            "{} {} ({form}) dst {:?}: {} threads, grid {:?} of {}",
            p.op, p.ty, p.dst_ne, self.threads, self.workgroups, WG_SIZE
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::elementwise::test_facts as facts;

    #[test]
    fn one_thread_per_output_and_f16_needs_the_feature() {
        let p = Problem {
            op: GluOp::Swiglu,
            ty: GgmlType::F32,
            dst_ne: [5, 7, 11, 13],
            split: false,
            swapped: true,
        };
        let plan = plan(&p, &facts(false, 65535)).unwrap();
        assert_eq!(plan.threads, 5 * 7 * 11 * 13);
        assert_eq!(plan.workgroups, [(5 * 7 * 11 * 13u32).div_ceil(WG_SIZE), 1, 1]);
        assert!(plan.to_string().contains("fused, swapped"));
        let half = Problem { ty: GgmlType::F16, ..p };
        assert!(super::plan(&half, &facts(false, 65535)).is_err());
        assert!(super::plan(&half, &facts(true, 65535)).is_ok());
    }
}
