//! The plan of SOFT_MAX: what its encoder binds and dispatches (a leaf module: the
//! shader variants are built from it, and its encoder uses them).

use crate::ggml_type::GgmlType;
use crate::ops::row_plan::RowPlan;

/// The plan of SOFT_MAX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SoftMaxPlan {
    pub rows: RowPlan,
    /// The mask's type, if there is one.
    pub mask: Option<GgmlType>,
    pub sinks: bool,
    /// x is dst: only dst is bound.
    pub in_place: bool,
}

impl std::fmt::Display for SoftMaxPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SOFT_MAX")?;
        if let Some(m) = self.mask {
            write!(f, " mask {m}")?;
        }
        if self.sinks {
            write!(f, " sinks")?;
        }
        if self.in_place {
            write!(f, ", in place")?;
        }
        write!(f, ": {}", self.rows)
    }
}
