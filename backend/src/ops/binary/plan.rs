//! The binary ops' plan: a pure function of the problem and the device.

use std::fmt;

use crate::error::{BackendError, Result};
use crate::exec::grid_2d;
use crate::facts::DeviceFacts;
use crate::ggml_type::GgmlType;
use crate::reference::BinaryOp;

/// Threads per workgroup (one unit each).
pub const WG_SIZE: u32 = 256;

/// What a binary op is asked to do, as the planner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Problem {
    pub op: BinaryOp,
    pub a_type: GgmlType,
    pub b_type: GgmlType,
    pub dst_type: GgmlType,
    /// dst's (= a's) extents.
    pub ne: [usize; 4],
    pub b_ne: [usize; 4],
    /// dst is a (ggml's in-place form).
    pub in_place: bool,
    /// Every operand can be read as 4-element vectors: rows contiguous, starts and strides whole
    /// vectors, `ne0` and `b_ne0` multiples of 4.
    pub vec4_layout: bool,
}

/// Every decision the encoder follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinaryPlan {
    pub problem: Problem,
    /// Elements per thread along dimension 0 (1, or 4 with 16-byte loads and stores of f32).
    pub width: u32,
    /// Threads (units of dst).
    pub units: u32,
    pub workgroups: [u32; 3],
}

/// Plans `p` on the device `facts` describes.
pub fn plan(p: &Problem, facts: &DeviceFacts) -> Result<BinaryPlan> {
    let f16 = [p.a_type, p.b_type, p.dst_type].contains(&GgmlType::F16);
    if f16 && !facts.shader_f16 {
        return Err(BackendError::Unsupported(format!(
            "{}: f16 operands need the device's shader-f16 feature",
            p.op
        )));
    }
    let width = if p.vec4_layout { 4 } else { 1 };
    let elements: usize = p.ne.iter().product();
    let units = u32::try_from(elements / width as usize)
        .map_err(|_| BackendError::Unsupported(format!("{}: {elements} elements pass 2^32", p.op)))?;
    let workgroups = grid_2d(units.div_ceil(WG_SIZE), facts.max_workgroups_per_dim);
    Ok(BinaryPlan {
        problem: *p,
        width,
        units,
        workgroups,
    })
}

impl fmt::Display for BinaryPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.problem;
        write!(
            f,
            "{} {}{}{}->{} ne {:?} b {:?}: width {}, {} threads, grid {:?} of {}{}",
            p.op,
            p.a_type,
            if p.in_place { " (in place) " } else { " " },
            p.b_type,
            p.dst_type,
            p.ne,
            p.b_ne,
            self.width,
            self.units,
            self.workgroups,
            WG_SIZE,
            if self.width == 4 { " (16-byte f32 loads)" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::elementwise::test_facts as facts;

    fn problem(vec4_layout: bool) -> Problem {
        Problem {
            op: BinaryOp::Add,
            a_type: GgmlType::F32,
            b_type: GgmlType::F32,
            dst_type: GgmlType::F32,
            ne: [4096, 512, 1, 1],
            b_ne: [4096, 1, 1, 1],
            in_place: false,
            vec4_layout,
        }
    }

    #[test]
    fn vectors_where_the_layout_allows() {
        let facts = facts(true, 65535);
        let p = plan(&problem(true), &facts).unwrap();
        assert_eq!((p.width, p.units), (4, 4096 * 512 / 4));
        assert_eq!(p.workgroups, [2048, 1, 1]);
        let s = plan(&problem(false), &facts).unwrap();
        assert_eq!((s.width, s.units), (1, 4096 * 512));
        assert!(s.to_string().contains("width 1"));
    }

    #[test]
    fn large_grids_split_and_f16_needs_the_feature() {
        let p = plan(&problem(false), &facts(true, 1024)).unwrap();
        let [x, y, _] = p.workgroups;
        assert!(x <= 1024 && x * y * WG_SIZE >= p.units);
        let half = Problem {
            a_type: GgmlType::F16,
            ..problem(false)
        };
        assert!(matches!(
            plan(&half, &facts(false, 65535)),
            Err(BackendError::Unsupported(_))
        ));
        assert!(plan(&half, &facts(true, 65535)).is_ok());
    }
}
