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
    /// Each thread's part of its row is held in registers (at most [`CACHED_UNITS`] units):
    /// the row is read once and each element's exponential taken once; else one pass keeps a
    /// running max and sum and a second reads the row again.
    pub cached: bool,
}

/// Units (elements, or 16-byte vectors) a thread holds on the cached path.
pub const CACHED_UNITS: usize = 8;

/// Whether a row of `plan` fits the cached path.
pub fn fits_cached(rows: &RowPlan) -> bool {
    let units = if rows.vec4 { rows.row_len / 4 } else { rows.row_len };
    units <= rows.group as usize * CACHED_UNITS
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
        let passes = if self.cached {
            "row held in registers"
        } else {
            "two passes"
        };
        write!(f, ", {passes}: {}", self.rows)
    }
}
