//! How a kernel that reduces rows (RMS_NORM, SOFT_MAX, ARGMAX) lays its threads over them: a
//! power-of-two group of threads per row, as many rows per workgroup as make a workgroup of at
//! least [`MIN_WG`] threads, 16-byte loads where every operand allows them, and the reduction
//! across the group on subgroup operations where the device has them and a group holds whole
//! subgroups, in workgroup memory otherwise. A pure function of the row shape and the device.

use std::fmt;

use crate::error::{BackendError, Result};
use crate::facts::DeviceFacts;
use crate::memory::{Binding, DeviceTensor};
use crate::ops::Env;
use crate::tensor::Layout;

/// The smallest workgroup (short rows share one).
pub const MIN_WG: u32 = 64;
/// Threads per row when there are enough rows to fill a GPU with one workgroup each.
pub const MANY_ROWS_GROUP: u32 = 256;
/// Rows at which a kernel has enough workgroups without longer groups.
pub const MANY_ROWS: usize = 128;
/// Threads per row at most (a few long rows: more threads each).
pub const MAX_GROUP: u32 = 1024;
/// Elements (or 16-byte vectors) per thread a group is sized for.
pub const UNITS_PER_THREAD: usize = 4;

/// The threads of a row-reducing kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RowPlan {
    /// Elements a row.
    pub row_len: usize,
    /// Rows.
    pub rows: usize,
    /// Threads a row (a power of two).
    pub group: u32,
    /// Rows a workgroup.
    pub rows_per_wg: u32,
    /// `group · rows_per_wg`.
    pub wg_size: u32,
    /// Rows read and written as 16-byte vectors.
    pub vec4: bool,
    /// The group's reduction on subgroup operations (else a workgroup-memory tree).
    pub subgroups: bool,
    /// Workgroups in all (`rows / rows_per_wg`, rounded up).
    pub workgroups: u32,
}

/// The plan for `rows` rows of `row_len` elements; `vec4` when every operand allows 16-byte
/// loads (the caller judges). `row_len` over `u32` is the caller's to refuse.
pub fn plan(row_len: usize, rows: usize, vec4: bool, d: &DeviceFacts) -> RowPlan {
    let vec4 = vec4 && row_len.is_multiple_of(4) && row_len > 0;
    let units = if vec4 { row_len / 4 } else { row_len };
    let max_threads = prev_pow2(d.max_threads().max(1));
    let cap = if rows >= MANY_ROWS { MANY_ROWS_GROUP } else { MAX_GROUP }.min(max_threads);
    let want = units.div_ceil(UNITS_PER_THREAD).clamp(1, cap as usize) as u32;
    let group = want.next_power_of_two().min(cap);
    let sg = d.subgroup_max();
    let subgroups = d.subgroups && sg.is_power_of_two() && group >= sg;
    let rows_pow2 = rows.max(1).next_power_of_two().min(MIN_WG as usize) as u32;
    let rows_per_wg = (MIN_WG / group).clamp(1, rows_pow2.max(1));
    let wg_size = group * rows_per_wg;
    let workgroups = u32::try_from(rows.div_ceil(rows_per_wg as usize)).unwrap_or(u32::MAX);
    RowPlan {
        row_len,
        rows,
        group,
        rows_per_wg,
        wg_size,
        vec4,
        subgroups,
        workgroups,
    }
}

fn prev_pow2(v: u32) -> u32 {
    1 << v.ilog2()
}

impl fmt::Display for RowPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} rows of {}: {} threads a row, {} rows a workgroup of {}, {} workgroups, {} loads, {} reduction",
            self.rows,
            self.row_len,
            self.group,
            self.rows_per_wg,
            self.wg_size,
            self.workgroups,
            if self.vec4 { "16-byte" } else { "scalar" },
            if self.subgroups { "subgroup" } else { "workgroup-memory" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn gpu() -> DeviceFacts {
        crate::variants::apple_devices()[1].1
    }

    #[test]
    fn long_rows_get_whole_workgroups_and_short_rows_share_them() {
        let d = gpu();
        // 4096 f32 as 1024 vectors over 512 rows: 256 threads each, a row a workgroup.
        let p = plan(4096, 512, true, &d);
        assert_eq!((p.group, p.rows_per_wg, p.wg_size, p.workgroups), (256, 1, 256, 512));
        assert!(p.vec4 && p.subgroups);
        // One long row (decode): up to 1024 threads.
        let p = plan(16384, 1, true, &d);
        assert_eq!((p.group, p.rows_per_wg, p.workgroups), (1024, 1, 1));
        // Rows of 16 vectors: 4 threads each (under a subgroup: the tree), 16 rows a workgroup.
        let p = plan(16, 1024, false, &d);
        assert_eq!((p.group, p.rows_per_wg, p.wg_size, p.workgroups), (4, 16, 64, 64));
        assert!(!p.subgroups);
        // A row length not a multiple of 4 reads scalars.
        assert!(!plan(1023, 4, true, &d).vec4);
        // Without subgroups: the workgroup-memory tree at every size.
        let none = DeviceFacts { subgroups: false, ..d };
        assert!(!plan(4096, 512, true, &none).subgroups);
    }

    #[test]
    fn groups_are_powers_of_two_within_the_device() {
        let d = DeviceFacts {
            max_invocations: 192,
            max_workgroup_size_x: 192,
            ..gpu()
        };
        for len in [1usize, 3, 4, 31, 64, 1000, 4096, 200_000] {
            for rows in [1usize, 3, 64, 1000] {
                for vec4 in [false, true] {
                    let p = plan(len, rows, vec4, &d);
                    assert!(p.group.is_power_of_two() && p.wg_size <= 192, "{p}");
                    assert_eq!(p.wg_size, p.group * p.rows_per_wg);
                    assert!(p.workgroups as usize * p.rows_per_wg as usize >= rows);
                    assert!(!p.subgroups || p.group >= d.subgroup_max());
                }
            }
        }
    }
}

/// Where a kernel finds an operand: its start and strides in units of the kernel's reads
/// (elements, or vectors of 4 elements: then `nb[0]` is 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Units {
    pub start: u32,
    pub nb: [u32; 4],
}

/// `l` (bound as `b`) in units of `unit` bytes: `vector` when a unit is 4 packed elements
/// (rows packed, every row 16- or 8-byte aligned, which [`vector_binding`] judged), else one
/// element of `l`'s type. An error names the operand when a start or stride is not a whole
/// number of units or passes 32-bit indexing.
pub(crate) fn units(op: &str, name: &str, l: &Layout, b: &Binding, vector: bool) -> Result<Units> {
    let elem = l.ty.type_size();
    let unit = if vector { 4 * elem } else { elem };
    let bad = |what: String| Err(BackendError::InvalidOperands(format!("{op}: {name}: {what}")));
    let word = |v: u64, what: &str| {
        u32::try_from(v).map_err(|_| {
            BackendError::Unsupported(format!("{op}: {name}'s {what} of {v} units passes 32-bit indexing"))
        })
    };
    if !b.start_byte.is_multiple_of(unit as u64) {
        return bad(format!(
            "starts at byte {} of its binding, not a multiple of {unit}",
            b.start_byte
        ));
    }
    word(b.size / unit as u64, "binding")?;
    let mut nb = [0u32; 4];
    for (i, n) in nb.iter_mut().enumerate() {
        if l.ne[i] <= 1 {
            continue;
        }
        if i == 0 && vector {
            *n = 1;
            continue;
        }
        if !l.nb[i].is_multiple_of(unit) {
            return bad(format!(
                "stride nb[{i}] = {} is not a multiple of {unit} bytes",
                l.nb[i]
            ));
        }
        *n = word((l.nb[i] / unit) as u64, "stride")?;
    }
    Ok(Units {
        start: word(b.start_byte / unit as u64, "start")?,
        nb,
    })
}

/// Whether `l` can be read as vectors of 4 elements: packed rows of a multiple of 4 elements,
/// every row start a multiple of the vector's bytes apart.
pub(crate) fn vector_layout(l: &Layout) -> bool {
    let v = 4 * l.ty.type_size();
    l.has_contiguous_rows() && l.ne[0].is_multiple_of(4) && (1..4).all(|i| l.ne[i] <= 1 || l.nb[i].is_multiple_of(v))
}

/// `t`'s binding, and with `want` the same rounded up to whole vectors when the layout, its
/// start and the buffer allow reading it as vectors of 4 elements.
pub(crate) fn vector_binding(t: &DeviceTensor, env: &Env, want: bool) -> Result<(Binding, Option<Binding>)> {
    let limits = env.limits();
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let max = limits.max_storage_buffer_binding_size;
    let b = t.binding(align, max)?;
    let v = 4 * t.layout().ty.type_size() as u64;
    if want && vector_layout(t.layout()) && b.start_byte.is_multiple_of(v) {
        let size = b.size.next_multiple_of(v);
        if b.offset + size <= t.buffer().size() && size <= max {
            return Ok((b, Some(Binding { size, ..b })));
        }
    }
    Ok((b, None))
}

pub(crate) use crate::ops::arith::word_of as word;
