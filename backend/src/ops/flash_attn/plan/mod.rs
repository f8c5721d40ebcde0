//! How FLASH_ATTN_EXT runs for given shapes, types and device: a pure function from
//! [`Problem`], [`DeviceFacts`] and [`FlashAttnTuning`] to a [`FlashAttnPlan`] (the kernel
//! [`Choice`] with its tiles, split count, workgroup sizes), checked against the
//! workgroup-memory limit. Nothing here touches a GPU. One module
//! per kernel (its layout, how it is sized, its description), and [`split`] for the split-KV
//! scheme both fast kernels share.
//!
//! Kernels:
//! - **mma** (`flash_attn_mma.wgsl`): subgroup matrices for Q·Kᵀ and P·V. A workgroup holds
//!   `rows = rb · M` query rows (the query heads of one KV head times the queries,
//!   head-minor) and walks the KV sequence in tiles of `kv_tile` keys staged as f16 in
//!   workgroup memory; `subgroups = rb · cg` subgroups, each owning a block of M rows and
//!   every `cg`-th block of N keys / N output columns. O stays in f32 result matrices; the
//!   softmax rescales it only when a row's maximum grows by more than `tau` (lazily).
//! - **vec** (`flash_attn_vec.wgsl`): decode (few query rows per KV head, all in one
//!   workgroup). Groups of lanes own keys and read K/V rows straight into registers, each group
//!   with its own online softmax, merged once per workgroup: no barrier per KV tile.
//! - **tile** (`flash_attn_tile.wgsl`): the same walk as mma without subgroup matrices:
//!   register-tiled dot products from workgroup memory (decode too when vec does not fit, or
//!   when forced: the previous decode kernel).
//! - **simple** (`flash_attn_simple.wgsl`): the last resort (head sizes that are not multiples
//!   of 8, devices without subgroups).
//!
//! Both fast kernels split the KV sequence over `n_split` workgroups when the grid is too small
//! for the device, then `flash_attn_reduce.wgsl` combines the splits (and the sinks).

mod mma;
mod simple;
mod split;
mod tile;
mod vec;

use std::fmt;

use crate::ggml_type::GgmlType;

use super::tuning::{FlashAttnTuning, Force};
pub use crate::facts::{DeviceFacts, MatrixConfig};
pub use mma::{MmaPlan, mma_plan};
pub use simple::simple;
pub use tile::{TilePlan, tile_plan};
pub use vec::{VecPlan, vec_plan};

/// The sizes and types of one FLASH_ATTN_EXT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Problem {
    /// K's (and Q's) head size.
    pub hsk: usize,
    /// V's head size.
    pub hsv: usize,
    /// Query rows per head and sequence.
    pub n_q: usize,
    /// Query heads.
    pub n_heads: usize,
    /// K/V heads (`n_heads` is a multiple).
    pub kv_heads: usize,
    /// KV length.
    pub kv: usize,
    /// Sequences (dimension 3).
    pub n_seq: usize,
    pub k_type: GgmlType,
    pub v_type: GgmlType,
    pub has_mask: bool,
}

impl Problem {
    /// Query rows sharing one KV head (per sequence): `n_heads / kv_heads · n_q`.
    pub fn rows_per_kv_head(&self) -> usize {
        self.n_heads / self.kv_heads.max(1) * self.n_q
    }

    /// Output rows: `n_q · n_heads · n_seq`.
    pub fn out_rows(&self) -> usize {
        self.n_q * self.n_heads * self.n_seq
    }
}

/// The kernel a plan uses, with its layout.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// The simple kernel, and why.
    Simple(String),
    Tile(TilePlan),
    Mma(MmaPlan),
    Vec(VecPlan),
}

/// How one FLASH_ATTN_EXT runs.
#[derive(Debug, Clone, PartialEq)]
pub struct FlashAttnPlan {
    /// The sizes and types it was made for.
    pub problem: Problem,
    pub choice: Choice,
    /// Query rows per workgroup (0 for simple).
    pub rows: u32,
    /// Row blocks per KV head and sequence.
    pub row_blocks: u32,
    /// Splits of the KV sequence (1: no reduce pass).
    pub n_split: u32,
    /// Keys per split (a multiple of the kernel's KV tile).
    pub split_len: u32,
    /// Keys per tile.
    pub kv_tile: u32,
    /// Lazy-rescale threshold (mma).
    pub tau: f32,
    /// Fully masked tiles are skipped (a scan of the next tile's mask per tile).
    pub mask_skip: bool,
    /// The fast kernels read K, and V, as 16-byte vectors (see [`Placement`]).
    pub k_vec: bool,
    pub v_vec: bool,
}

/// Where the operands lie in their bindings, as far as the kernels care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Q, dst and sinks start on a 4-byte boundary of their bindings, K and V on a 2-byte one
    /// (the fast kernels' element addressing); else only the simple kernel runs.
    pub aligned: bool,
    /// K (and V) can be bound as 16-byte vectors: a float type, every row and the start
    /// 16-byte aligned, and the binding rounded up to whole vectors still inside the buffer.
    pub k_vec: bool,
    pub v_vec: bool,
}

impl Placement {
    /// Operands at element-aligned starts that cannot be read as vectors.
    pub const PLAIN: Placement = Placement {
        aligned: true,
        k_vec: false,
        v_vec: false,
    };
}

/// The plan for operands placed as `placement` says: [`plan`]'s, with the vector widths it
/// allows; the simple kernel when the starts are misaligned.
pub fn plan_placed(
    shape: &Problem,
    device: &DeviceFacts,
    tuning: &FlashAttnTuning,
    placement: Placement,
) -> FlashAttnPlan {
    if !placement.aligned {
        return simple(
            shape,
            "an operand starts off its element alignment in its binding".into(),
        );
    }
    let mut plan = plan(shape, device, tuning);
    if !matches!(plan.choice, Choice::Simple(_)) {
        plan.k_vec = placement.k_vec;
        plan.v_vec = placement.v_vec;
    }
    plan
}

impl FlashAttnPlan {
    /// Bytes of the split scratch: partial outputs, then (at a 256-byte boundary) the
    /// (max, sum) pairs; 0 without splits.
    pub fn scratch_bytes(&self, shape: &Problem) -> u64 {
        if self.n_split <= 1 {
            return 0;
        }
        self.stats_offset(shape) + self.n_split as u64 * shape.out_rows() as u64 * 8
    }

    /// Byte offset of the (max, sum) pairs in the scratch.
    pub fn stats_offset(&self, shape: &Problem) -> u64 {
        (self.n_split as u64 * shape.out_rows() as u64 * shape.hsv as u64 * 4).next_multiple_of(256)
    }

    /// Whether a reduce pass follows the main kernel: where it splits the KV sequence, unless
    /// the decode kernel's probe leaves it out.
    pub fn reduces(&self) -> bool {
        let skipped = matches!(&self.choice, Choice::Vec(v) if v.skips_reduce());
        self.n_split > 1 && !skipped
    }

    /// Workgroups of the main kernel.
    pub fn workgroups(&self, shape: &Problem) -> u64 {
        self.row_blocks as u64 * self.n_split as u64 * shape.kv_heads as u64 * shape.n_seq as u64
    }
}

/// The parts of a plan's description every fast kernel ends with.
struct Tail {
    /// The KV split, if any.
    split: String,
    /// Which operands are read as vectors.
    vectors: &'static str,
    mask_skip: &'static str,
    /// The grid.
    grid: String,
}

impl fmt::Display for FlashAttnPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.problem;
        let split = if self.n_split > 1 {
            format!(
                ", KV split {} x {} keys{} ({} KiB scratch)",
                self.n_split,
                self.split_len,
                if self.reduces() { " + reduce" } else { "" },
                self.scratch_bytes(s).div_ceil(1024)
            )
        } else {
            String::new()
        };
        let grid = format!(
            "{} workgroups ({} row blocks x {} KV heads x {} seq x {} splits)",
            self.workgroups(s),
            self.row_blocks,
            s.kv_heads,
            s.n_seq,
            self.n_split
        );
        let vectors = match (self.k_vec, self.v_vec) {
            (true, true) => ", K and V as vec4",
            (true, false) => ", K as vec4",
            (false, true) => ", V as vec4",
            (false, false) => "",
        };
        let mask_skip = if self.mask_skip { ", masked tiles skipped" } else { "" };
        let tail = Tail {
            split,
            vectors,
            mask_skip,
            grid,
        };
        match &self.choice {
            Choice::Simple(why) => write!(f, "simple (f32 copies of K and V; {why})"),
            Choice::Tile(t) => t.describe(f, &tail),
            Choice::Vec(v) => v.describe(f, &tail),
            Choice::Mma(m) => m.describe(f, s, self.tau, &tail),
        }
    }
}

/// Plans one FLASH_ATTN_EXT.
pub fn plan(shape: &Problem, device: &DeviceFacts, tuning: &FlashAttnTuning) -> FlashAttnPlan {
    let simple = |why: String| simple(shape, why);
    if let Some(why) = fast_path_obstacle(shape, device) {
        return simple(why);
    }
    if tuning.kernel == Some(Force::Simple) {
        return simple("forced".into());
    }
    let rows_total = shape.rows_per_kv_head() as u32;
    let mma_min = tuning
        .mma_min_rows
        .unwrap_or_else(|| device.subgroup_matrix.map_or(u32::MAX, |c| c.m));
    let want_mma = match tuning.kernel {
        Some(Force::Mma) => true,
        Some(Force::Tile | Force::Vec) => false,
        _ => rows_total >= mma_min && shape.hsk.max(shape.hsv) <= tuning.mma_max_head as usize,
    };
    let mut kernel = None;
    if want_mma {
        kernel = mma_plan(shape, device, tuning).map(Choice::Mma);
    }
    if kernel.is_none() && tuning.kernel != Some(Force::Tile) {
        kernel = vec_plan(shape, device, tuning).map(Choice::Vec);
    }
    if kernel.is_none() {
        kernel = tile_plan(shape, device, tuning).map(Choice::Tile);
    }
    let Some(kernel) = kernel else {
        return simple(format!(
            "no tile of head sizes {}/{} fits {} bytes of workgroup memory",
            shape.hsk, shape.hsv, device.max_workgroup_storage
        ));
    };
    let (rows, kv_tile) = match &kernel {
        Choice::Tile(t) => (t.rows, t.kv_tile),
        Choice::Mma(m) => (m.rows, m.kv_tile),
        Choice::Vec(v) => (v.rows, v.kv_tile()),
        Choice::Simple(_) => unreachable!(),
    };
    let row_blocks = rows_total.div_ceil(rows).max(1);
    let mma = matches!(kernel, Choice::Mma(_));
    let (n_split, split_len) = split::splits(shape, device, tuning, mma, rows.min(rows_total), row_blocks, kv_tile);
    FlashAttnPlan {
        problem: *shape,
        choice: kernel,
        rows,
        row_blocks,
        n_split,
        split_len,
        kv_tile,
        tau: tuning.tau.max(0.0),
        mask_skip: shape.has_mask && tuning.mask_skip,
        k_vec: false,
        v_vec: false,
    }
}

/// Why neither fast kernel can run these shapes on this device, if so.
fn fast_path_obstacle(shape: &Problem, device: &DeviceFacts) -> Option<String> {
    if !device.subgroups {
        return Some("the device has no subgroups".into());
    }
    if !shape.hsk.is_multiple_of(8) || !shape.hsv.is_multiple_of(8) {
        return Some(format!("head sizes {}/{} are not multiples of 8", shape.hsk, shape.hsv));
    }
    if shape.kv == 0 || shape.n_q == 0 || shape.kv_heads == 0 || !shape.n_heads.is_multiple_of(shape.kv_heads) {
        return Some("empty or inconsistent shapes".into());
    }
    if shape.kv > u32::MAX as usize / 2 || shape.out_rows() > u32::MAX as usize / 2 {
        return Some("sizes beyond 32-bit indexing".into());
    }
    None
}

fn pow2_floor(x: u32) -> u32 {
    if x == 0 { 0 } else { 1 << x.ilog2() }
}

/// An odd number of chunks not below `x` (a row stride that spreads rows over memory banks).
fn odd(x: u32) -> u32 {
    if x.is_multiple_of(2) { x + 1 } else { x }
}

#[cfg(test)]
mod tests;
