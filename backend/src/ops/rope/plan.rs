//! The plan of ROPE: one dispatch, one thread per rotated pair of a row or per element outside
//! the rotated dims (copied). An f16 destination whose layout lets each thread fill whole words
//! takes two pairs (and two copied elements) a thread and plain word stores; any other f16
//! destination is bound as atomic words, since a pair's two elements lie apart (NeoX,
//! multi-section) and share words with other threads' elements. Where a token has several
//! rows (heads), a workgroup takes one token: its angles are computed once into workgroup
//! memory and shared by the heads (an angle is ggml's running product, up to a multiplication
//! a pair index, so computing it per head made ROPE compute-bound).

use std::fmt;

use crate::exec::grid_2d;
use crate::facts::DeviceFacts;
use crate::ggml_type::GgmlType;
use crate::reference::RopeMode;

/// Threads per workgroup.
pub const WG_SIZE: u32 = 256;

/// Angles a workgroup holds on the shared path (pairs per row at most).
pub const SHARED_PAIRS: u64 = 256;

/// Rows a token needs for the shared path to pay (the angles are computed once for them all).
pub const SHARED_MIN_HEADS: u64 = 4;

/// What the planner needs to know of one ROPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Problem {
    pub src_type: GgmlType,
    pub dst_type: GgmlType,
    pub mode: RopeMode,
    pub freq_factors: bool,
    /// dst is src (ggml's in-place form).
    pub in_place: bool,
    pub ne0: u64,
    pub rows: u64,
    /// Rows a token (ne1, the heads): the rows that share a token's angles.
    pub heads: u64,
    /// Rotated pairs per row.
    pub pairs: u64,
    /// dst is f16 and two consecutive pairs' elements (and two consecutive copied elements) fill
    /// whole 4-byte words of it: packed rows, word-aligned start and strides, an even count of
    /// pairs, an even n_offs and an even row.
    pub dst_words: bool,
    /// src is f16 with packed rows, a word-aligned start and word-aligned strides: with
    /// `dst_words`, each pair of elements a thread reads is one word (the copied ones go over
    /// unconverted).
    pub src_words: bool,
    /// The fused SET_ROWS that follows (`rope_set_rows`): the cache's type (f32 or f16), on
    /// the shared path of an f32 ROPE in place only.
    pub rows_out: Option<GgmlType>,
    /// With `rows_out`: the ids are i64 (else i32).
    pub ids_i64: bool,
}

/// How the kernel runs one ROPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RopePlan {
    pub problem: Problem,
    /// Threads per row: the pairs, then the copied elements (two of each a thread with `words`).
    pub row_units: u64,
    pub units: u64,
    /// Two pairs a thread, each writing whole words of an f16 dst with plain stores.
    pub words: bool,
    /// With `words`: f16 src words read whole, copied elements moved as words.
    pub src_words: bool,
    /// A workgroup a token: its angles computed once into workgroup memory, its heads' units
    /// spread over the workgroup (`grid` counts tokens, not threads).
    pub shared: bool,
    pub atomic: bool,
    pub wg_size: u32,
    pub grid: [u32; 3],
}

/// The plan for `p` on `device`.
pub fn plan(p: &Problem, device: &DeviceFacts) -> RopePlan {
    let words = p.dst_words;
    let copied = p.ne0 - 2 * p.pairs;
    let row_units = if words {
        p.pairs / 2 + copied / 2
    } else {
        p.pairs + copied
    };
    let units = row_units * p.rows;
    let shared = p.heads >= SHARED_MIN_HEADS && p.pairs <= SHARED_PAIRS && p.rows.is_multiple_of(p.heads);
    let groups = if shared {
        u32::try_from(p.rows / p.heads).unwrap_or(u32::MAX)
    } else {
        u32::try_from(units.div_ceil(u64::from(WG_SIZE))).unwrap_or(u32::MAX)
    };
    RopePlan {
        problem: *p,
        row_units,
        units,
        words,
        src_words: words && p.src_words,
        shared,
        atomic: p.dst_type == GgmlType::F16 && !words,
        wg_size: WG_SIZE,
        grid: grid_2d(groups, device.max_workgroups_per_dim),
    }
}

impl fmt::Display for RopePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.problem;
        write!(
            f,
            "ROPE mode {} {}->{}{}{}: {} threads a row ({} pairs), {} rows, {} stores, {}grid {:?} x {}",
            p.mode,
            p.src_type,
            p.dst_type,
            if p.freq_factors { " ff" } else { "" },
            if p.in_place { " in place" } else { "" },
            self.row_units,
            p.pairs,
            p.rows,
            match (self.words, self.atomic) {
                (true, _) if self.src_words => "two pairs a thread, whole-word loads and",
                (true, _) => "two pairs a thread, whole-word",
                (false, true) => "merged (atomic)",
                (false, false) => "word",
            },
            if self.shared {
                "a workgroup a token with its angles shared by its heads, "
            } else {
                ""
            },
            self.grid,
            self.wg_size
        )?;
        match p.rows_out {
            Some(cache) => write!(
                f,
                ", then each token's row into the {cache} cache row its id names (SET_ROWS fused)"
            ),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_copies_make_a_row() {
        let facts = crate::facts::presets::h100();
        let p = Problem {
            src_type: GgmlType::F32,
            dst_type: GgmlType::F32,
            mode: RopeMode::Neox,
            freq_factors: false,
            in_place: false,
            ne0: 128,
            rows: 32 * 512,
            heads: 32,
            pairs: 32,
            dst_words: false,
            src_words: false,
            rows_out: None,
            ids_i64: false,
        };
        let plan = plan(&p, &facts);
        // 32 rotated pairs, 64 copied elements.
        assert_eq!(plan.row_units, 96);
        assert_eq!(plan.units, 96 * 32 * 512);
        assert!(!plan.atomic);
        let h = super::plan(
            &Problem {
                dst_type: GgmlType::F16,
                ..p
            },
            &facts,
        );
        assert!(h.atomic);
        // An f16 dst of whole words: two pairs and two copied elements a thread, no atomics.
        let w = super::plan(
            &Problem {
                dst_type: GgmlType::F16,
                dst_words: true,
                ..p
            },
            &facts,
        );
        assert_eq!((w.row_units, w.words, w.atomic), (16 + 32, true, false));
        // 32 heads a token: a workgroup a token, 512 of them.
        assert!(plan.shared && w.shared);
        assert_eq!(u64::from(plan.grid[0]) * u64::from(plan.grid[1]), 512);
        // One head a token, or more pairs than the table holds: a thread a unit.
        let lone = super::plan(&Problem { heads: 1, ..p }, &facts);
        assert!(!lone.shared && u64::from(lone.grid[0]) * 256 >= lone.units);
        let wide = super::plan(
            &Problem {
                ne0: 1024,
                pairs: 512,
                ..p
            },
            &facts,
        );
        assert!(!wide.shared);
    }
}
