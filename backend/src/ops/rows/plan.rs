//! The plan of GET_ROWS, SET_ROWS and CPY: a pure function of the problem and the device.
//!
//! One kernel (`rows.wgsl`), one dispatch, one thread per unit: `unit` consecutive destination
//! elements along dim 0 (4, 2 or 1: as many as the destination's packed rows allow, so f32 rows
//! move 16 bytes a thread), or one block of a quantized destination (quantized, or copied as
//! bytes). Units whose bytes are whole aligned words are plain stores; otherwise (16-bit
//! elements one at a time, 18-byte blocks, unaligned starts) the destination is bound as atomic
//! words and each unit merges its bytes into the words it shares.

use std::fmt;

use crate::exec::grid_2d;
use crate::facts::DeviceFacts;
use crate::ggml_type::GgmlType;
use crate::ops::dequantize::kernel::supports;

/// Threads per workgroup.
pub const WG_SIZE: u32 = 256;

/// The types SET_ROWS and CPY write from f32, f16 or bf16 values.
pub fn writes(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(ty, F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | IQ4_NL | Q1_0)
}

/// The types GET_ROWS and CPY read (every type MUL_MAT reads, and i32).
pub fn reads(ty: GgmlType) -> bool {
    supports(ty) || ty == GgmlType::I32
}

/// Which op the kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowsOp {
    /// `dst[k] = src[k]` in each one's logical order.
    Cpy,
    /// `dst[:, i, j, k] = src[:, ids[i, j, k], j, k]`.
    GetRows,
    /// `dst[:, ids[i, j mod c1, k mod c2], j, k] = src[:, i, j, k]`.
    SetRows,
}

impl RowsOp {
    /// The kernel's `MODE`.
    pub fn mode(self) -> u32 {
        match self {
            RowsOp::Cpy => 0,
            RowsOp::GetRows => 1,
            RowsOp::SetRows => 2,
        }
    }
}

impl fmt::Display for RowsOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RowsOp::Cpy => "CPY",
            RowsOp::GetRows => "GET_ROWS",
            RowsOp::SetRows => "SET_ROWS",
        })
    }
}

/// What the planner needs to know of one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Problem {
    pub op: RowsOp,
    pub src_type: GgmlType,
    pub dst_type: GgmlType,
    /// Row ids are i64 (SET_ROWS).
    pub ids_i64: bool,
    /// Elements of the iteration (dst's for CPY and GET_ROWS, src's for SET_ROWS).
    pub elements: u64,
    /// The iteration's row length.
    pub ne0: u64,
    /// CPY: src's own row length (the logical orders may differ in shape).
    pub src_ne0: u64,
    /// src's elements are packed along dim 0 (`nb0` its type's size).
    pub src_packed: bool,
    /// dst's likewise.
    pub dst_packed: bool,
    /// dst's start byte and row strides (nb1..nb3) are multiples of 4.
    pub dst_rows_aligned: bool,
    /// dst's nb0 (bytes per element or block).
    pub dst_nb0: u64,
    /// CPY only: src is dst transposed in dims 0 and 1 (same extents; src packed along dim 1,
    /// not dim 0), with `tiles` 32×32 tiles (times the batches of dims 2 and 3) to cover them.
    pub transposed_tiles: Option<u64>,
}

/// How the kernel runs one problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RowsPlan {
    pub problem: Problem,
    /// Destination elements per thread.
    pub unit: u32,
    /// Bytes copied as they are (same types).
    pub raw: bool,
    /// dst bound as atomic words (units share words).
    pub atomic: bool,
    pub wg_size: u32,
    pub units: u64,
    pub grid: [u32; 3],
    /// Through 32×32 tiles in workgroup memory (`transpose.wgsl`) instead of a unit a thread.
    pub tiled: bool,
}

/// Workgroups of `transpose.wgsl`: a 32×32 tile each.
pub const TILE: u64 = 32;

/// The plan for `p` on `device`.
pub fn plan(p: &Problem, device: &DeviceFacts) -> RowsPlan {
    let raw = p.src_type == p.dst_type;
    // A transposing byte copy of 32- or 16-bit elements: through tiles, so that neither side
    // strides (16-bit destinations as whole words of element pairs).
    let elem = p.dst_type.type_size() as u64;
    let tiled_ok = raw
        && matches!(p.dst_type, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
        && p.dst_packed
        && p.dst_rows_aligned
        && (elem == 4 || p.ne0.is_multiple_of(2));
    if let (true, Some(tiles)) = (tiled_ok, p.transposed_tiles) {
        let groups = u32::try_from(tiles).unwrap_or(u32::MAX);
        return RowsPlan {
            problem: *p,
            unit: 1,
            raw,
            atomic: false,
            wg_size: WG_SIZE,
            units: p.elements,
            grid: grid_2d(groups, device.max_workgroups_per_dim),
            tiled: true,
        };
    }
    let block = p.dst_type.block_size() as u64;
    let unit: u64 = if p.dst_type.is_quantized() {
        block
    } else {
        [4u64, 2]
            .into_iter()
            .find(|&u| {
                p.dst_packed
                    && p.ne0.is_multiple_of(u)
                    && (p.op != RowsOp::Cpy || p.src_ne0.is_multiple_of(u))
                    && (!raw || p.src_packed)
            })
            .unwrap_or(1)
    };
    let unit_bytes = unit / block * p.dst_type.type_size() as u64;
    let step = unit / block * p.dst_nb0;
    let atomic = !(p.dst_rows_aligned && unit_bytes.is_multiple_of(4) && step.is_multiple_of(4));
    let units = p.elements / unit;
    let groups = u32::try_from(units.div_ceil(u64::from(WG_SIZE))).unwrap_or(u32::MAX);
    RowsPlan {
        problem: *p,
        unit: unit as u32,
        raw,
        atomic,
        wg_size: WG_SIZE,
        units,
        grid: grid_2d(groups, device.max_workgroups_per_dim),
        tiled: false,
    }
}

impl fmt::Display for RowsPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.problem;
        if self.tiled {
            return write!(
                f,
                "{} {}->{}: transposed through {TILE}x{TILE} tiles in workgroup memory, {} tiles, grid {:?} x {}",
                p.op,
                p.src_type,
                p.dst_type,
                p.transposed_tiles.unwrap_or(0),
                self.grid,
                self.wg_size
            );
        }
        write!(
            f,
            "{} {}->{}: {} {} unit{} of {} element{}, {} stores, grid {:?} x {}",
            p.op,
            p.src_type,
            p.dst_type,
            self.units,
            if self.raw { "byte-copy" } else { "converting" },
            if self.units == 1 { "" } else { "s" },
            self.unit,
            if self.unit == 1 { "" } else { "s" },
            if self.atomic { "merged (atomic)" } else { "word" },
            self.grid,
            self.wg_size
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> DeviceFacts {
        crate::facts::presets::h100()
    }

    fn problem(op: RowsOp, src: GgmlType, dst: GgmlType, ne0: u64) -> Problem {
        Problem {
            op,
            src_type: src,
            dst_type: dst,
            ids_i64: false,
            elements: ne0 * 64,
            ne0,
            src_ne0: ne0,
            src_packed: true,
            dst_packed: true,
            dst_rows_aligned: true,
            dst_nb0: dst.type_size() as u64,
            transposed_tiles: None,
        }
    }

    #[test]
    fn packed_rows_move_four_elements_a_thread_with_word_stores() {
        let p = plan(&problem(RowsOp::Cpy, GgmlType::F32, GgmlType::F32, 4096), &facts());
        assert_eq!((p.unit, p.raw, p.atomic), (4, true, false));
        assert_eq!(p.units, 4096 * 64 / 4);
        let h = plan(&problem(RowsOp::SetRows, GgmlType::F32, GgmlType::F16, 128), &facts());
        assert_eq!((h.unit, h.raw, h.atomic), (4, false, false));
    }

    #[test]
    fn shared_words_are_merged() {
        // Odd rows of f16: pairs are not possible, single 16-bit elements share words.
        let h = plan(&problem(RowsOp::Cpy, GgmlType::F32, GgmlType::F16, 5), &facts());
        assert_eq!((h.unit, h.atomic), (1, true));
        // 18-byte blocks start at half words.
        let q = plan(&problem(RowsOp::SetRows, GgmlType::F32, GgmlType::Q4_0, 64), &facts());
        assert_eq!((q.unit, q.atomic), (32, true));
        // 20-byte blocks of q4_1 are whole words.
        let q1 = plan(&problem(RowsOp::SetRows, GgmlType::F32, GgmlType::Q4_1, 64), &facts());
        assert_eq!((q1.unit, q1.atomic), (32, false));
        // An unaligned start makes every unit share.
        let mut p = problem(RowsOp::GetRows, GgmlType::F32, GgmlType::F32, 64);
        p.dst_rows_aligned = false;
        assert!(plan(&p, &facts()).atomic);
    }

    #[test]
    fn strided_sources_convert_one_element_or_pack_by_dst() {
        let mut p = problem(RowsOp::Cpy, GgmlType::F16, GgmlType::F32, 64);
        p.src_packed = false;
        // Converting reads each element through its stride: the unit follows dst alone.
        assert_eq!(plan(&p, &facts()).unit, 4);
        // A byte copy needs both packed.
        p.dst_type = GgmlType::F16;
        p.dst_nb0 = 2;
        assert_eq!(plan(&p, &facts()).unit, 1);
        // CPY between shapes: the unit divides both row lengths.
        let mut c = problem(RowsOp::Cpy, GgmlType::F32, GgmlType::F32, 8);
        c.src_ne0 = 6;
        assert_eq!(plan(&c, &facts()).unit, 2);
    }

    #[test]
    fn transposed_float_copies_go_through_tiles() {
        for (ty, ne0, tiled) in [
            (GgmlType::F32, 64, true),
            (GgmlType::F16, 64, true),
            (GgmlType::BF16, 64, true),
            // Odd rows of 16-bit elements: the pairs' words would be shared.
            (GgmlType::F16, 63, false),
        ] {
            let mut p = problem(RowsOp::Cpy, ty, ty, ne0);
            p.src_packed = false;
            p.transposed_tiles = Some(4);
            let plan = plan(&p, &facts());
            assert_eq!(plan.tiled, tiled, "{plan}");
            if tiled {
                assert_eq!(plan.grid, [4, 1, 1]);
                assert!(plan.to_string().contains("tiles"), "{plan}");
            }
        }
        // Converting, or not transposed: the unit path.
        let mut c = problem(RowsOp::Cpy, GgmlType::F32, GgmlType::F16, 64);
        c.src_packed = false;
        c.transposed_tiles = Some(4);
        assert!(!plan(&c, &facts()).tiled);
        assert!(!plan(&problem(RowsOp::Cpy, GgmlType::F32, GgmlType::F32, 64), &facts()).tiled);
    }

    #[test]
    fn large_grids_split_in_two_dimensions() {
        let mut p = problem(RowsOp::Cpy, GgmlType::F32, GgmlType::F32, 4096);
        p.elements = 1 << 32;
        let plan = plan(&p, &facts());
        assert!(plan.grid[1] > 1 && plan.grid[0] <= 65535);
        assert!(u64::from(plan.grid[0]) * u64::from(plan.grid[1]) * 256 >= plan.units);
    }
}
