//! The plan of ARGMAX: what its encoder binds and dispatches (a leaf module: the
//! shader variants are built from it, and its encoder uses them).

use crate::ops::row_plan::RowPlan;

/// The plan of ARGMAX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArgmaxPlan {
    pub rows: RowPlan,
}

impl std::fmt::Display for ArgmaxPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ARGMAX: {}", self.rows)
    }
}
