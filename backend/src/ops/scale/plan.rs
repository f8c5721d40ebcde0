//! The plan of SCALE: how many elements a thread, in which form.

use std::fmt;

/// Threads per workgroup.
pub const WG_SIZE: u32 = 256;

/// SCALE's one dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScalePlan {
    /// Elements.
    pub elements: usize,
    /// x and dst packed: a thread's unit at the same offset in both.
    pub flat: bool,
    /// Flat, in 16-byte units.
    pub vec4: bool,
    /// x is dst: only dst is bound.
    pub in_place: bool,
    /// Units (elements, or vectors of 4).
    pub units: u64,
    pub wg_size: u32,
    pub workgroups: u64,
}

/// The plan for `elements` elements: `flat` when x and dst are both packed, `vec4` when they
/// also allow 16-byte units (the encoder judges both).
pub fn plan(elements: usize, flat: bool, vec4: bool, in_place: bool) -> ScalePlan {
    let vec4 = flat && vec4 && elements.is_multiple_of(4);
    let units = if vec4 { elements / 4 } else { elements } as u64;
    ScalePlan {
        elements,
        flat,
        vec4,
        in_place,
        units,
        wg_size: WG_SIZE,
        workgroups: units.div_ceil(u64::from(WG_SIZE)),
    }
}

impl fmt::Display for ScalePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SCALE{}: {} elements, {} {} units a thread, {} workgroups of {}",
            if self.in_place { " in place" } else { "" },
            self.elements,
            if self.flat { "packed" } else { "strided" },
            if self.vec4 { "16-byte" } else { "scalar" },
            self.workgroups,
            self.wg_size
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_only_for_packed_multiples_of_four() {
        let p = plan(4096 * 512, true, true, false);
        assert!(p.vec4 && p.flat);
        assert_eq!((p.units, p.workgroups), (4096 * 128, 2048));
        assert!(!plan(10_001, true, true, false).vec4);
        let s = plan(1000, false, true, false);
        assert!(!s.vec4 && !s.flat);
        assert_eq!(s.workgroups, 4);
    }
}
