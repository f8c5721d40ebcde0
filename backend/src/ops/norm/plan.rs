//! The plan of NORM: what its encoder binds and dispatches (a leaf module: the
//! shader variants are built from it, and its encoder uses them).

use crate::ops::row_plan::RowPlan;

/// The plan of RMS_NORM (with its fused weight and bias).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NormPlan {
    pub rows: RowPlan,
    pub weight: bool,
    pub bias: bool,
    /// x + r is normed and also written out (a decoder's residual ADD fused in).
    pub residual: bool,
    /// x is dst (ggml's in-place form): only dst is bound.
    pub in_place: bool,
}

impl std::fmt::Display for NormPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fused = match (self.weight, self.bias) {
            (true, true) => " ·weight +bias",
            (true, false) => " ·weight",
            (false, true) => " +bias",
            (false, false) => "",
        };
        let place = if self.in_place { ", in place" } else { "" };
        let add = if self.residual { "ADD then " } else { "" };
        write!(f, "{add}RMS_NORM{fused}{place}: {}", self.rows)
    }
}
