//! How FLASH_ATTN_EXT runs for given shapes, types and device: a pure function from
//! [`Shape`], [`DeviceFacts`] and [`Knobs`] to a [`Plan`] (kernel, tiles, split count, workgroup
//! sizes), checked against the workgroup-memory limit. Nothing here touches a GPU.
//!
//! Kernels:
//! - **mma** (`flash_attn_mma.wgsl`): subgroup matrices for Q·Kᵀ and P·V. A workgroup holds
//!   `rows = rh · rb · M` query rows (the query heads of one KV head times the queries,
//!   head-minor) and walks the KV sequence in tiles of `kv_tile` keys staged as f16 in
//!   workgroup memory; `subgroups = rb · cg` subgroups, each owning `rh` blocks of M rows and
//!   every `cg`-th block of N keys / N output columns. O stays in f32 result matrices; the softmax rescales it only when a row's
//!   maximum grows by more than `tau` (lazily).
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

use crate::ggml_type::GgmlType;

/// The sizes and types of one FLASH_ATTN_EXT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
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

impl Shape {
    /// Query rows sharing one KV head (per sequence): `n_heads / kv_heads · n_q`.
    pub fn rows_per_kv_head(&self) -> usize {
        self.n_heads / self.kv_heads.max(1) * self.n_q
    }

    /// Output rows: `n_q · n_heads · n_seq`.
    pub fn out_rows(&self) -> usize {
        self.n_q * self.n_heads * self.n_seq
    }
}

pub use crate::facts::{DeviceFacts, MatrixConfig};

pub use super::knobs::{Force, Knobs};

/// The tile kernel's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TilePlan {
    /// Threads per workgroup.
    pub threads: u32,
    /// Query rows per workgroup (G).
    pub rows: u32,
    /// Keys per tile (T).
    pub kv_tile: u32,
    /// Q·Kᵀ: lanes sharing one dot product (reduced with subgroup shuffles).
    pub ds: u32,
    /// Q·Kᵀ: row groups (threads per key / ds).
    pub gq: u32,
    /// Q·Kᵀ: rows per thread.
    pub rq: u32,
    /// P·V: lanes over the 8-element chunks of an output row.
    pub lv: u32,
    /// P·V: chunks per lane.
    pub ch: u32,
    /// P·V: rows per thread.
    pub ro: u32,
    /// P·V: row groups (`ceil(rows / ro)`).
    pub rgn: u32,
    /// P·V: key splits inside the workgroup (combined at the end).
    pub ks: u32,
    /// Softmax: lanes per row.
    pub tpr: u32,
    /// V staged into K's buffer after Q·Kᵀ (less memory, less overlap).
    pub kv_alias: bool,
    /// The next tile's K/V loads are issued before this tile's math.
    pub prefetch: bool,
    /// 16-byte chunks per K / V row in workgroup memory (odd, against bank conflicts).
    pub kstr: u32,
    pub vstr: u32,
    /// f32 values per Q row in workgroup memory (also the final reduction's rows).
    pub qw: u32,
    pub shared_bytes: u32,
}

/// The vec kernel's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VecPlan {
    /// Threads per workgroup.
    pub threads: u32,
    /// Lanes per key (a power of two dividing `team`).
    pub lanes: u32,
    /// Lanes merged by shuffles at the end (the subgroup size, or a divisor of it).
    pub team: u32,
    /// Keys a lane group loads at once.
    pub keys: u32,
    /// Query rows per workgroup (all of a KV head's).
    pub rows: u32,
    /// 16-byte chunks of a K / V row per lane.
    pub ck: u32,
    pub cv: u32,
    /// The next step's loads are issued before this step's math.
    pub prefetch: bool,
    /// Measuring only ([`Knobs::vec_probe`]): 0 the kernel, 1 K/V decoded as f16 whatever their
    /// type, 2 the K/V and mask loads alone, 3 the kernel without the split's reduce pass.
    pub probe: u32,
    /// q8_0 / q4_0 K scored by packed 8-bit dot products ([`Knobs::vec_qint`]).
    pub qint: bool,
    pub shared_bytes: u32,
}

impl VecPlan {
    /// Keys a workgroup walks per step.
    pub fn kv_tile(&self) -> u32 {
        self.threads / self.lanes * self.keys
    }
}

/// The mma kernel's layout (offsets and strides in 16-byte chunks of 8 f16 values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmaPlan {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    /// Row blocks per subgroup (each K/V matrix loaded serves `rh` products).
    pub rh: u32,
    /// Subgroups doing matrix work (`rb · cg`).
    pub subgroups: u32,
    /// Threads per workgroup (`subgroups · subgroup_max`).
    pub threads: u32,
    /// Row blocks of M rows.
    pub rb: u32,
    /// Subgroups sharing a row block (they split its key blocks and output columns).
    pub cg: u32,
    /// Query rows per workgroup (`rh · rb · m`).
    pub rows: u32,
    /// Keys per tile.
    pub kv_tile: u32,
    /// Head sizes padded to whole matrices (and 8).
    pub hskp: u32,
    pub hsvp: u32,
    pub qstr: u32,
    pub kstr: u32,
    pub vstr: u32,
    pub pstr: u32,
    /// vec4<f32> per row of the score buffer.
    pub sstr: u32,
    pub q_regs: bool,
    pub kv_alias: bool,
    pub p_alias: bool,
    /// The next tile's K/V loads are issued before this tile's math.
    pub prefetch: bool,
    pub q_off: u32,
    pub k_off: u32,
    pub v_off: u32,
    pub p_off: u32,
    /// Chunks of the f16 buffer.
    pub smem: u32,
    /// vec4<f32> of the f32 buffer (scores, then rescale/epilogue scratch).
    pub sf: u32,
    /// O blocks per subgroup per scratch round.
    pub sb: u32,
    /// Softmax: lanes per row.
    pub tpr: u32,
    pub shared_bytes: u32,
    /// Measuring only ([`Knobs::mma_probe`]): 0 the kernel, 1 the K/V staging alone, 2 the
    /// math alone.
    pub probe: u32,
}

/// The kernel a plan uses.
#[derive(Debug, Clone, PartialEq)]
pub enum Kernel {
    /// The simple kernel, and why.
    Simple(String),
    Tile(TilePlan),
    Mma(MmaPlan),
    Vec(VecPlan),
}

/// How one FLASH_ATTN_EXT runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The sizes and types it was made for.
    pub shape: Shape,
    pub kernel: Kernel,
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
pub fn plan_placed(shape: &Shape, device: &DeviceFacts, knobs: &Knobs, placement: Placement) -> Plan {
    if !placement.aligned {
        return simple(
            shape,
            "an operand starts off its element alignment in its binding".into(),
        );
    }
    let mut plan = plan(shape, device, knobs);
    if !matches!(plan.kernel, Kernel::Simple(_)) {
        plan.k_vec = placement.k_vec;
        plan.v_vec = placement.v_vec;
    }
    plan
}

/// The simple kernel (over f32 copies of K and V), for `why`.
pub fn simple(shape: &Shape, why: String) -> Plan {
    Plan {
        shape: *shape,
        kernel: Kernel::Simple(why),
        rows: 0,
        row_blocks: 0,
        n_split: 1,
        split_len: shape.kv as u32,
        kv_tile: 0,
        tau: 0.0,
        mask_skip: false,
        k_vec: false,
        v_vec: false,
    }
}

impl Plan {
    /// Bytes of the split scratch: partial outputs, then (at a 256-byte boundary) the
    /// (max, sum) pairs; 0 without splits.
    pub fn scratch_bytes(&self, shape: &Shape) -> u64 {
        if self.n_split <= 1 {
            return 0;
        }
        self.stats_offset(shape) + self.n_split as u64 * shape.out_rows() as u64 * 8
    }

    /// Byte offset of the (max, sum) pairs in the scratch.
    pub fn stats_offset(&self, shape: &Shape) -> u64 {
        (self.n_split as u64 * shape.out_rows() as u64 * shape.hsv as u64 * 4).next_multiple_of(256)
    }

    /// Whether a reduce pass follows the main kernel: where it splits the KV sequence, unless
    /// the decode kernel's probe leaves it out.
    pub fn reduces(&self) -> bool {
        let probe = match &self.kernel {
            Kernel::Vec(v) => v.probe,
            _ => 0,
        };
        self.n_split > 1 && probe != 3
    }

    /// Workgroups of the main kernel.
    pub fn workgroups(&self, shape: &Shape) -> u64 {
        self.row_blocks as u64 * self.n_split as u64 * shape.kv_heads as u64 * shape.n_seq as u64
    }
}

impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.shape;
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
        match &self.kernel {
            Kernel::Simple(why) => write!(f, "simple (f32 copies of K and V; {why})"),
            Kernel::Tile(t) => write!(
                f,
                "tile: {} rows x {} keys a tile, {} threads (q.k {} lanes x {} rows/thread, p.v {} rows x {} chunks, {} key splits), {} B shared{}{}{vectors}{mask_skip}; {grid}",
                t.rows,
                t.kv_tile,
                t.threads,
                t.ds,
                t.rq,
                t.ro,
                t.ch,
                t.ks,
                t.shared_bytes,
                if t.kv_alias { ", V over K" } else { "" },
                split
            ),
            Kernel::Vec(v) => write!(
                f,
                "vec: {} rows, {} threads, {} lanes a key ({} / {} K/V chunks a lane), {} keys a group in flight{}, {} keys a step, merged over teams of {}, {} B shared{}{}{vectors}{mask_skip}; {grid}",
                v.rows,
                v.threads,
                v.lanes,
                v.ck,
                v.cv,
                v.keys,
                if v.prefetch { " (next step's prefetched)" } else { "" },
                v.kv_tile(),
                v.team,
                v.shared_bytes,
                split,
                match (v.probe, v.qint) {
                    (1, _) => " (probe: K/V decoded as f16, results wrong)",
                    (2, _) => " (probe: K/V loads only, results wrong)",
                    (3, _) => " (probe: no reduce pass, output unwritten)",
                    (_, true) => ", K scored by 8-bit dot products",
                    _ => "",
                }
            ),
            Kernel::Mma(m) => write!(
                f,
                "mma {}x{}x{} f16->f32: {} rows ({} row blocks x {} a subgroup x {} col groups) x {} keys a tile, {} threads, heads {}/{} padded to {}/{}, Q in {}, {} B shared{}{}{}, tau {}{}{}{vectors}{mask_skip}; {grid}",
                m.m,
                m.n,
                m.k,
                m.rows,
                m.rb,
                m.rh,
                m.cg,
                m.kv_tile,
                m.threads,
                s.hsk,
                s.hsv,
                m.hskp,
                m.hsvp,
                if m.q_regs { "registers" } else { "shared memory" },
                m.shared_bytes,
                if m.kv_alias { ", V over K" } else { "" },
                if m.p_alias { ", P over K" } else { "" },
                if m.sb * m.cg < m.hsvp / m.n {
                    ", O in rounds"
                } else {
                    ""
                },
                self.tau,
                match m.probe {
                    0 => "",
                    1 => " (probe: K/V staging only, results wrong)",
                    _ => " (probe: math only, results wrong)",
                },
                split
            ),
        }
    }
}

/// Defaults that depend on nothing but taste (see [`Knobs`]).
const DEFAULT_TARGET_WG: u32 = 512;
const DEFAULT_TARGET_WG_CPU: u32 = 8;
/// The mma kernel's workgroups are heavier (and fewer fit a multiprocessor).
const DEFAULT_TARGET_WG_MMA: u32 = 384;
const DEFAULT_MIN_SPLIT_TILES: u32 = 2;
const DEFAULT_TILE_THREADS: u32 = 128;
const DEFAULT_TILE_ROWS: u32 = 32;
const DEFAULT_TILE_KV: u32 = 32;
const DEFAULT_TILE_RO: u32 = 4;
const DEFAULT_TILE_RQ: u32 = 1;
const DEFAULT_VEC_THREADS: u32 = 128;
const DEFAULT_VEC_LANES: u32 = 16;
const DEFAULT_VEC_KEYS: u32 = 4;
const DEFAULT_VEC_ROWS: u32 = 8;
/// f32 registers a vec-kernel lane may hold for Q, and for O.
const VEC_REG_BUDGET: u32 = 64;
const DEFAULT_MMA_SUBGROUPS: u32 = 8;
/// On GPUs, heads of at most [`SMALL_HEAD`] take twice the subgroups: on the H100 (2026-12-05,
/// hsk=hsv=64, nb=512, kv=7680) 16 subgroups ran f16 / q4_0 / q8_0 K and V in 1355 / 1519 / 1516
/// us against 1629 / 1666 / 1690 with 8; at head size 72 within noise, at 256 much slower (kv=10000:
/// 5887 against 3602 us).
const SMALL_HEAD_MMA_SUBGROUPS: u32 = 16;
const SMALL_HEAD: usize = 64;
const DEFAULT_MMA_KV: u32 = 64;
/// Largest head size the mma kernel is preferred for on CPU adapters, which emulate subgroup
/// matrices: on lavapipe it ran slower than the tile kernel at every head size measured (time
/// per run, mma against tile: hs 64 nb 32 kv 512 2.9 against 2.5 ms, hs 128 nb 32 kv 1024 10.4
/// against 6.6 ms, hs 256 nb 16 kv 512 5.6 against 3.6 ms, hs 576/512 nb 4 kv 256 15.0 against
/// 2.9 ms), and its Q·K, unrolled over the head, compiles in seconds that grow with it (first
/// run with compilation 5.8, 9.4, 24.8 and 141.6 s, against under a second for tile). Up to
/// 128 it stays the CPU default all the same: lavapipe is where CI checks the kernel before
/// any GPU does.
const DEFAULT_MMA_MAX_HEAD_CPU: u32 = 128;
const DEFAULT_Q_BUDGET: u32 = 32;
const DEFAULT_O_BUDGET_CPU: u32 = 64;
/// On GPUs a lane may hold 128 f32 O accumulators before the columns are split over subgroups
/// (which repeats Q·Kᵀ in each). At head size 256 that also changes where fitting 48 KiB of
/// workgroup memory ends: 4 row blocks with a 32-key tile, instead of 16 keys with K and V
/// sharing a buffer. On the H100 (2026-12-05, nb=512) head size 256 ran in 3602 -> 2044 us
/// (kv=10000) and 6230 -> 3799 us (kv=20000) against a budget of 64, q8_0 K and V 8112 -> 5687
/// us; head sizes 64 and 72 within noise.
const DEFAULT_O_BUDGET: u32 = 128;
const DEFAULT_TAU: f32 = 8.0;
/// Most KV splits (partials beyond this cost more to write and reduce than they gain).
pub const MAX_SPLIT: u32 = 512;
/// K/V bytes a split reads per byte of partial results it writes, at least (unless that leaves
/// too few workgroups).
const PARTIAL_RATIO: u64 = 8;
/// 16-byte K/V chunks a thread may hold in registers to prefetch the next tile.
const PREFETCH_CHUNKS: u32 = 16;
/// Accumulators (f32) a tile-kernel thread may hold in P·V.
const TILE_ACC_BUDGET: u32 = 64;

/// Plans one FLASH_ATTN_EXT.
pub fn plan(shape: &Shape, device: &DeviceFacts, knobs: &Knobs) -> Plan {
    let simple = |why: String| simple(shape, why);
    if let Some(why) = fast_path_obstacle(shape, device) {
        return simple(why);
    }
    if knobs.force == Some(Force::Simple) {
        return simple("forced".into());
    }
    let rows_total = shape.rows_per_kv_head() as u32;
    let mma_min = knobs
        .mma_min_rows
        .unwrap_or_else(|| device.subgroup_matrix.map_or(u32::MAX, |c| c.m));
    let mma_max_head = knobs.mma_max_head.unwrap_or(if device.cpu() {
        DEFAULT_MMA_MAX_HEAD_CPU
    } else {
        u32::MAX
    });
    let want_mma = match knobs.force {
        Some(Force::Mma) => true,
        Some(Force::Tile | Force::Vec) => false,
        _ => rows_total >= mma_min && shape.hsk.max(shape.hsv) <= mma_max_head as usize,
    };
    let mut kernel = None;
    if want_mma {
        kernel = mma_plan(shape, device, knobs).map(Kernel::Mma);
    }
    if kernel.is_none() && knobs.force != Some(Force::Tile) {
        kernel = vec_plan(shape, device, knobs).map(Kernel::Vec);
    }
    if kernel.is_none() {
        kernel = tile_plan(shape, device, knobs).map(Kernel::Tile);
    }
    let Some(kernel) = kernel else {
        return simple(format!(
            "no tile of head sizes {}/{} fits {} bytes of workgroup memory",
            shape.hsk, shape.hsv, device.max_workgroup_storage
        ));
    };
    let (rows, kv_tile) = match &kernel {
        Kernel::Tile(t) => (t.rows, t.kv_tile),
        Kernel::Mma(m) => (m.rows, m.kv_tile),
        Kernel::Vec(v) => (v.rows, v.kv_tile()),
        Kernel::Simple(_) => unreachable!(),
    };
    let row_blocks = rows_total.div_ceil(rows).max(1);
    let mma = matches!(kernel, Kernel::Mma(_));
    let (n_split, split_len) = splits(shape, device, knobs, mma, rows.min(rows_total), row_blocks, kv_tile);
    Plan {
        shape: *shape,
        kernel,
        rows,
        row_blocks,
        n_split,
        split_len,
        kv_tile,
        tau: knobs.tau.unwrap_or(DEFAULT_TAU).max(0.0),
        mask_skip: shape.has_mask && knobs.mask_skip.unwrap_or(true),
        k_vec: false,
        v_vec: false,
    }
}

/// Why neither fast kernel can run these shapes on this device, if so.
fn fast_path_obstacle(shape: &Shape, device: &DeviceFacts) -> Option<String> {
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

/// The split count and keys per split.
/// Bytes of a row of `n` elements of `ty`.
fn row_bytes(ty: GgmlType, n: usize) -> u64 {
    (n.div_ceil(ty.block_size()) * ty.type_size()) as u64
}

#[allow(clippy::too_many_arguments)]
fn splits(
    shape: &Shape,
    device: &DeviceFacts,
    knobs: &Knobs,
    mma: bool,
    rows: u32,
    row_blocks: u32,
    kv_tile: u32,
) -> (u32, u32) {
    let kv = shape.kv as u32;
    let tiles = kv.div_ceil(kv_tile);
    let base = row_blocks as u64 * shape.kv_heads as u64 * shape.n_seq as u64;
    let target = knobs.target_workgroups.unwrap_or(if device.cpu() {
        DEFAULT_TARGET_WG_CPU
    } else if mma {
        DEFAULT_TARGET_WG_MMA
    } else {
        DEFAULT_TARGET_WG
    });
    let min_tiles = knobs.min_split_tiles.unwrap_or(DEFAULT_MIN_SPLIT_TILES).max(1);
    // A split should read several times more K/V bytes than it writes partial results.
    let kv_bytes = row_bytes(shape.k_type, shape.hsk) + row_bytes(shape.v_type, shape.hsv);
    let partial = rows as u64 * (shape.hsv as u64 + 2) * 4;
    let min_keys = (partial * PARTIAL_RATIO).div_ceil(kv_bytes.max(1)) as u32;
    let min_tiles = min_tiles.max(min_keys.div_ceil(kv_tile));
    let mut n = match knobs.split {
        Some(n) => n.max(1),
        None if base >= target as u64 => 1,
        None => (target as u64).div_ceil(base).min(tiles.div_ceil(min_tiles) as u64) as u32,
    };
    n = n.clamp(1, tiles.min(MAX_SPLIT));
    // The scratch must fit one binding.
    let per_split = shape.out_rows() as u64 * (shape.hsv as u64 + 2) * 4 + 256;
    if let Some(most) = device.max_storage_binding.checked_div(per_split) {
        n = n.min(most.clamp(1, u32::MAX as u64) as u32);
    }
    let split_len = tiles.div_ceil(n) * kv_tile;
    (kv.div_ceil(split_len), split_len)
}

/// The vec kernel's layout, if all query rows of a KV head fit its registers and workgroup memory.
pub fn vec_plan(shape: &Shape, device: &DeviceFacts, knobs: &Knobs) -> Option<VecPlan> {
    let team = pow2_floor(device.subgroup_min().clamp(1, 32));
    let threads = pow2_floor(
        knobs
            .vec_threads
            .unwrap_or(DEFAULT_VEC_THREADS)
            .clamp(team, device.max_threads().max(team)),
    );
    let hsk8 = shape.hsk as u32 / 8;
    let hsv8 = shape.hsv as u32 / 8;
    let lanes = match knobs.vec_lanes {
        Some(l) => pow2_floor(l.max(1)),
        None => hsk8.max(hsv8).next_power_of_two().min(DEFAULT_VEC_LANES),
    }
    .min(team);
    let (ck, cv) = (hsk8.div_ceil(lanes), hsv8.div_ceil(lanes));
    let rows = shape.rows_per_kv_head().max(1) as u32;
    let max_rows = knobs
        .vec_rows
        .unwrap_or(DEFAULT_VEC_ROWS)
        .min(VEC_REG_BUDGET / (8 * ck.max(cv)));
    if rows > max_rows {
        return None;
    }
    let keys = knobs.vec_keys.unwrap_or(DEFAULT_VEC_KEYS).clamp(1, 16);
    let shared_bytes = 2 * (threads / team) * rows * 4 + rows * shape.hsv as u32 * 4;
    if shared_bytes > device.max_workgroup_storage {
        return None;
    }
    Some(VecPlan {
        threads,
        lanes,
        team,
        keys,
        rows,
        ck,
        cv,
        prefetch: knobs.vec_prefetch.unwrap_or(false),
        probe: knobs.vec_probe.unwrap_or(0),
        // H100 (bench/results/2026-12-06-h100-defaults.md): 4 rows, hsk=128, kv=16384: q8_0
        // 34.2 us against 38.0, q4_0 33.7 against 36.8; 8 rows, hsk=64, kv=7680: q8_0 35.1
        // against 27.7, q4_0 unchanged. So by default up to 4 rows, on GPUs: lavapipe's packed
        // dot products are slower than its conversions (4 rows, kv=4096: q4_0 8.0-8.3 ms
        // against 3.8-5.0, q8_0 8.2-10.0 against 5.8-7.7).
        qint: knobs.vec_qint.unwrap_or(!device.cpu() && rows <= 4)
            && matches!(shape.k_type, GgmlType::Q8_0 | GgmlType::Q4_0),
        shared_bytes,
    })
}

/// The tile kernel's layout, shrunk until it fits the device.
pub fn tile_plan(shape: &Shape, device: &DeviceFacts, knobs: &Knobs) -> Option<TilePlan> {
    let sg_max = device.subgroup_max().max(1);
    let threads = knobs
        .tile_threads
        .unwrap_or(DEFAULT_TILE_THREADS)
        .next_multiple_of(sg_max)
        .min(device.max_threads() / sg_max * sg_max)
        .max(sg_max);
    let threads = pow2_floor(threads).max(sg_max);
    let total = shape.rows_per_kv_head().max(1) as u32;
    let max_rows = knobs.tile_rows.unwrap_or(DEFAULT_TILE_ROWS).max(1);
    // Balance the row blocks: 20 rows with at most 16 a block give two blocks of 10.
    let mut rows = total.div_ceil(total.div_ceil(max_rows));
    let mut kv_tile = pow2_floor(knobs.tile_kv.unwrap_or(DEFAULT_TILE_KV).clamp(8, threads));
    let mut kv_alias = false;
    loop {
        if let Some(t) = tile_layout(shape, device, knobs, threads, rows, kv_tile, kv_alias)
            && t.shared_bytes <= device.max_workgroup_storage
        {
            return Some(t);
        }
        if !kv_alias {
            kv_alias = true;
        } else if kv_tile > 8 {
            kv_tile /= 2;
            kv_alias = false;
        } else if rows > 1 {
            rows = rows.div_ceil(2);
            kv_tile = pow2_floor(knobs.tile_kv.unwrap_or(DEFAULT_TILE_KV).clamp(8, threads));
            kv_alias = false;
        } else {
            return None;
        }
    }
}

fn tile_layout(
    shape: &Shape,
    device: &DeviceFacts,
    knobs: &Knobs,
    threads: u32,
    rows: u32,
    kv_tile: u32,
    kv_alias: bool,
) -> Option<TilePlan> {
    let hsk8 = shape.hsk as u32 / 8;
    let hsv8 = shape.hsv as u32 / 8;
    let lane_cap = device.subgroup_min().clamp(1, 32);
    // Q·Kᵀ: threads per key split into row groups and lanes per dot product.
    // Q·Kᵀ: a thread takes up to `rq_pref` rows of one key (so each K chunk is read and
    // converted once for all of them), and the lanes of a key share its dimensions.
    let cap = lane_cap.min(pow2_floor(hsk8).max(1));
    let rq_pref = knobs.tile_rq.unwrap_or(DEFAULT_TILE_RQ).max(1);
    let mut kv_tile = kv_tile.min(threads);
    let (mut gq, mut ds);
    loop {
        let per_key = threads / kv_tile;
        gq = rows.div_ceil(rq_pref).next_power_of_two().min(per_key).max(1);
        ds = per_key / gq;
        if ds > cap {
            gq = (per_key / cap).max(1);
            ds = per_key / gq;
        }
        if ds <= cap || kv_tile >= threads {
            break;
        }
        kv_tile *= 2;
    }
    let ds = ds.max(1);
    let rq = rows.div_ceil(gq);
    // P·V: lanes over an output row's chunks, row groups, key splits.
    let lv = hsv8.min(threads).max(1);
    let ch = hsv8.div_ceil(lv);
    let rgp = threads / lv;
    let mut ro = knobs.tile_ro.unwrap_or(DEFAULT_TILE_RO).clamp(1, rows);
    if rows.div_ceil(ro) > rgp {
        ro = rows.div_ceil(rgp);
    }
    let rgn = rows.div_ceil(ro);
    let ks = (rgp / rgn).clamp(1, kv_tile);
    if ro * ch * 8 > TILE_ACC_BUDGET || rq > 32 {
        return None;
    }
    let tpr = pow2_floor(threads / rows).clamp(1, lane_cap.min(kv_tile));
    let kstr = odd(hsk8);
    let vstr = odd(hsv8);
    let qw = (shape.hsk.max(shape.hsv) as u32).next_multiple_of(4);
    let kv_chunks = if kv_alias {
        kv_tile * kstr.max(vstr)
    } else {
        kv_tile * (kstr + vstr)
    };
    let shared_bytes = rows * qw * 4 + kv_chunks * 16 + rows * kv_tile * 4 + 5 * rows * 4 + 16;
    let staged = (kv_tile * hsk8).div_ceil(threads) + (kv_tile * hsv8).div_ceil(threads);
    let prefetch = knobs.prefetch.unwrap_or(staged <= PREFETCH_CHUNKS);
    Some(TilePlan {
        threads,
        rows,
        kv_tile,
        ds,
        gq,
        rq,
        lv,
        ch,
        ro,
        rgn,
        ks,
        tpr,
        kv_alias,
        prefetch,
        kstr,
        vstr,
        qw,
        shared_bytes,
    })
}

/// The mma kernel's layout, if the device has a usable config and some layout fits.
pub fn mma_plan(shape: &Shape, device: &DeviceFacts, knobs: &Knobs) -> Option<MmaPlan> {
    let cfg = device.subgroup_matrix?;
    if !cfg.f32_result || !device.shader_f16 || cfg.m == 0 || cfg.n % 8 != 0 || cfg.k % 8 != 0 {
        return None;
    }
    let (m, n, k) = (cfg.m, cfg.n, cfg.k);
    let sg_min = device.subgroup_min().max(1);
    let sg_max = device.subgroup_max().max(1);
    let default_subgroups = if !device.cpu() && shape.hsk.max(shape.hsv) <= SMALL_HEAD {
        SMALL_HEAD_MMA_SUBGROUPS
    } else {
        DEFAULT_MMA_SUBGROUPS
    };
    let subgroups = pow2_floor(
        knobs
            .mma_subgroups
            .unwrap_or(default_subgroups)
            .clamp(1, (device.max_threads() / sg_max).max(1)),
    );
    let threads = subgroups * sg_max;
    let hskp = (shape.hsk as u32).next_multiple_of(k.max(8));
    let hsvp = (shape.hsv as u32).next_multiple_of(n.max(8));
    // Registers per lane: f32 values of an M×N result, u32 words of an M×K f16 left matrix.
    let o_per_block = (m * n).div_ceil(sg_min);
    let rh = knobs.mma_rh.unwrap_or(1).clamp(1, 4);
    let q_words = rh * (hskp / k) * (m * k / 2).div_ceil(sg_min);
    let o_budget = knobs.mma_o_budget.unwrap_or(if device.cpu() {
        DEFAULT_O_BUDGET_CPU
    } else {
        DEFAULT_O_BUDGET
    });
    let obt = hsvp / n;
    let mut cg = 1;
    while cg < subgroups && rh * obt.div_ceil(cg) * o_per_block > o_budget {
        cg *= 2;
    }
    let total = shape.rows_per_kv_head().max(1) as u32;
    let mut rb = subgroups / cg;
    while rb > 1 && (rb / 2) * m * rh >= total {
        rb /= 2;
        cg *= 2;
    }
    let q_regs = knobs.mma_q_regs.unwrap_or(q_words <= DEFAULT_Q_BUDGET);
    let unit = lcm(n, k).max(8);
    let mut kv_tile = knobs.mma_kv.unwrap_or(DEFAULT_MMA_KV).next_multiple_of(unit).max(unit);
    let mut kv_alias = false;
    let mut q_regs = q_regs;
    loop {
        let p = mma_layout(
            shape, device, knobs, m, n, k, subgroups, threads, rb, rh, cg, kv_tile, hskp, hsvp, q_regs, kv_alias,
        );
        if p.shared_bytes <= device.max_workgroup_storage {
            return Some(p);
        }
        if kv_tile > unit {
            kv_tile = (kv_tile / 2).next_multiple_of(unit);
        } else if !kv_alias {
            kv_alias = true;
        } else if !q_regs && knobs.mma_q_regs.is_none() {
            q_regs = true;
        } else if rb > 1 {
            rb /= 2;
            cg *= 2;
            kv_alias = false;
            kv_tile = knobs.mma_kv.unwrap_or(DEFAULT_MMA_KV).next_multiple_of(unit).max(unit);
        } else {
            return None;
        }
    }
}

fn lcm(a: u32, b: u32) -> u32 {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    if a == 0 || b == 0 { a.max(b) } else { a / gcd(a, b) * b }
}

#[allow(clippy::too_many_arguments)]
fn mma_layout(
    shape: &Shape,
    device: &DeviceFacts,
    knobs: &Knobs,
    m: u32,
    n: u32,
    k: u32,
    subgroups: u32,
    threads: u32,
    rb: u32,
    rh: u32,
    cg: u32,
    kv_tile: u32,
    hskp: u32,
    hsvp: u32,
    q_regs: bool,
    kv_alias: bool,
) -> MmaPlan {
    let _ = shape;
    let rows = rh * rb * m;
    let qstr = odd(hskp / 8);
    let kstr = odd(hskp / 8);
    let vstr = odd(hsvp / 8);
    let pstr = odd(kv_tile / 8);
    let sstr = odd(kv_tile / 4);
    // The f16 buffer: [K | V] (or one buffer for both), P (in K's place when it fits), Q
    // (overlapping everything when it lives in registers after the start).
    let k_chunks = kv_tile * kstr;
    let v_chunks = kv_tile * vstr;
    let p_chunks = rows * pstr;
    let q_chunks = rows * qstr;
    let (k_off, v_off, mut end) = if kv_alias {
        (0, 0, kv_tile * kstr.max(vstr))
    } else {
        (0, k_chunks, k_chunks + v_chunks)
    };
    let p_alias = !kv_alias && p_chunks <= k_chunks;
    let p_off = if p_alias {
        k_off
    } else {
        let at = end;
        end += p_chunks;
        at
    };
    let q_off = if q_regs {
        0
    } else {
        let at = end;
        end += q_chunks;
        at
    };
    let smem = if q_regs { end.max(q_chunks) } else { end };
    // The f32 buffer: scores, later one O block per subgroup per round at least.
    let block = m * n / 4;
    let sf = (rows * sstr).max(subgroups * block);
    let obs = rh * (hsvp / n).div_ceil(cg);
    let sb = (sf / (subgroups * block)).clamp(1, obs.max(1));
    let tpr = pow2_floor(threads / rows).clamp(1, device.subgroup_min().max(1).min(kv_tile / 8));
    let shared_bytes = smem * 16 + sf * 16 + 5 * rows * 4 + 16;
    let prefetch = knobs.prefetch.unwrap_or(false);
    MmaPlan {
        m,
        n,
        k,
        subgroups,
        threads,
        rb,
        rh,
        cg,
        rows,
        kv_tile,
        hskp,
        hsvp,
        qstr,
        kstr,
        vstr,
        pstr,
        sstr,
        q_regs,
        kv_alias,
        p_alias,
        prefetch,
        q_off,
        k_off,
        v_off,
        p_off,
        smem,
        sf,
        sb,
        tpr,
        shared_bytes,
        probe: knobs.mma_probe.unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(hsk: usize, hsv: usize, nh: usize, r2: usize, kv: usize, nb: usize, ty: GgmlType) -> Shape {
        Shape {
            hsk,
            hsv,
            n_q: nb,
            n_heads: nh * r2,
            kv_heads: nh,
            kv,
            n_seq: 1,
            k_type: ty,
            v_type: ty,
            has_mask: true,
        }
    }

    fn h200(m: u32, n: u32, k: u32) -> DeviceFacts {
        DeviceFacts {
            shader_f16: true,
            subgroups: true,
            subgroup_min_size: 32,
            subgroup_max_size: 32,
            subgroup_matrix: Some(MatrixConfig {
                m,
                n,
                k,
                f32_result: true,
                f16_result: true,
            }),
            max_workgroup_storage: 49152,
            max_invocations: 1024,
            max_workgroup_size_x: 1024,
            max_workgroups_per_dim: 65535,
            max_storage_binding: 2_147_483_644,
            class: crate::facts::DeviceClass::NvidiaHopper,
        }
    }

    fn lavapipe() -> DeviceFacts {
        DeviceFacts {
            shader_f16: true,
            subgroups: true,
            subgroup_min_size: 8,
            subgroup_max_size: 8,
            subgroup_matrix: Some(MatrixConfig {
                m: 8,
                n: 8,
                k: 8,
                f32_result: true,
                f16_result: true,
            }),
            max_workgroup_storage: 32768,
            max_invocations: 1024,
            max_workgroup_size_x: 1024,
            max_workgroups_per_dim: 65535,
            max_storage_binding: 134_217_728,
            class: crate::facts::DeviceClass::Cpu,
        }
    }

    /// Every plan respects the device's limits and its own invariants.
    fn check(s: &Shape, d: &DeviceFacts, p: &Plan) {
        assert!(p.n_split >= 1 && p.n_split <= MAX_SPLIT);
        assert!(p.scratch_bytes(s) <= d.max_storage_binding);
        match &p.kernel {
            Kernel::Simple(_) => {}
            Kernel::Tile(t) => {
                assert!(t.shared_bytes <= d.max_workgroup_storage, "{t:?}");
                assert!(t.threads <= d.max_threads() && t.threads % d.subgroup_max() == 0);
                assert_eq!(t.ds * t.gq * t.kv_tile, t.threads, "{t:?}");
                assert!(t.gq * t.rq >= t.rows);
                assert!(t.ds <= d.subgroup_min() && t.tpr <= d.subgroup_min());
                assert!(t.lv * t.rgn * t.ks <= t.threads && t.ro * t.rgn >= t.rows);
                assert!(t.lv * t.ch * 8 >= s.hsv as u32);
                assert!(t.ro * t.ch * 8 <= TILE_ACC_BUDGET);
                assert_eq!(p.split_len % t.kv_tile, 0);
            }
            Kernel::Mma(m) => {
                assert!(m.shared_bytes <= d.max_workgroup_storage, "{m:?}");
                assert_eq!(m.threads % d.subgroup_max(), 0);
                assert_eq!(m.rb * m.cg, m.subgroups);
                assert_eq!(m.rows, m.rh * m.rb * m.m);
                assert_eq!(m.kv_tile % m.n, 0);
                assert_eq!(m.kv_tile % m.k, 0);
                assert_eq!(m.hskp % m.k, 0);
                assert_eq!(m.hsvp % m.n, 0);
                assert!(m.sf >= m.subgroups * m.sb * m.m * m.n / 4);
                assert!(m.sf >= m.rows * m.sstr && m.sstr >= m.kv_tile / 4);
                assert!(m.sb <= m.rh * (m.hsvp / m.n).div_ceil(m.cg));
                assert!(m.kstr >= m.hskp / 8 && m.vstr >= m.hsvp / 8 && m.pstr >= m.kv_tile / 8);
                if m.p_alias {
                    assert!(m.rows * m.pstr <= m.kv_tile * m.kstr);
                }
                assert_eq!(p.split_len % m.kv_tile, 0);
            }
            Kernel::Vec(v) => {
                assert!(v.shared_bytes <= d.max_workgroup_storage, "{v:?}");
                assert!(v.threads <= d.max_threads() && v.threads % v.team == 0);
                assert!(v.team <= d.subgroup_min() && v.team % v.lanes == 0);
                assert!(v.lanes * v.ck * 8 >= s.hsk as u32 && v.lanes * v.cv * 8 >= s.hsv as u32);
                assert!(v.rows as usize >= s.rows_per_kv_head() && p.row_blocks == 1);
                assert_eq!(p.split_len % v.kv_tile(), 0);
            }
        }
        assert!(p.n_split as u64 * p.split_len as u64 >= s.kv as u64);
        assert!((p.n_split as u64 - 1) * (p.split_len as u64) < s.kv as u64);
    }

    #[test]
    fn decode_splits_the_kv_sequence_and_shares_kv_heads() {
        let d = h200(16, 16, 16);
        let s = shape(128, 128, 8, 4, 16384, 1, GgmlType::F16);
        let p = plan(&s, &d, &Knobs::default());
        check(&s, &d, &p);
        let Kernel::Vec(v) = &p.kernel else { panic!("{p:?}") };
        // The 4 query heads of a KV head in one workgroup: K/V read once per split.
        assert_eq!((v.rows, p.row_blocks), (4, 1));
        assert_eq!((v.lanes, v.ck, v.cv), (16, 1, 1));
        assert!(p.n_split >= 64, "{p:?}");
        assert!(p.workgroups(&s) >= 512);
        assert!(!v.qint);
        // q8_0 and q4_0 K are scored by 8-bit dot products for up to 4 rows unless told
        // otherwise.
        for (ty, r2) in [(GgmlType::Q8_0, 4), (GgmlType::Q4_0, 1), (GgmlType::Q8_0, 8)] {
            let s = shape(128, 128, 8, r2, 16384, 1, ty);
            let by_rows = r2 <= 4;
            for (knobs, qint) in [
                ("", by_rows),
                ("vec_qint=0", false),
                ("vec_qint=1", true),
                ("vec_probe=1", by_rows),
            ] {
                let p = plan(&s, &d, &super::super::knobs::parse_knobs(knobs).unwrap());
                let Kernel::Vec(v) = &p.kernel else { panic!("{p:?}") };
                assert_eq!(v.qint, qint, "{ty} r2={r2} {knobs}");
            }
        }
        // Not on CPU adapters unless told.
        let s = shape(128, 128, 8, 4, 4096, 1, GgmlType::Q8_0);
        for (knobs, qint) in [("path=vec", false), ("path=vec,vec_qint=1", true)] {
            let p = plan(&s, &lavapipe(), &super::super::knobs::parse_knobs(knobs).unwrap());
            let Kernel::Vec(v) = &p.kernel else { panic!("{p:?}") };
            assert_eq!(v.qint, qint, "lavapipe {knobs}");
        }
    }

    #[test]
    fn prefill_uses_subgroup_matrices_and_no_split() {
        let d = h200(16, 16, 16);
        let s = shape(72, 72, 16, 1, 5776, 5776, GgmlType::F16);
        let p = plan(&s, &d, &Knobs::default());
        check(&s, &d, &p);
        let Kernel::Mma(m) = &p.kernel else { panic!("{p:?}") };
        assert_eq!((m.hskp, m.hsvp), (80, 80));
        assert_eq!(m.rows, 128);
        assert!(m.q_regs);
        assert_eq!(p.n_split, 1);
        assert_eq!(p.row_blocks, 5776u32.div_ceil(128));
    }

    #[test]
    fn gpus_give_small_heads_more_subgroups_and_large_heads_whole_rows() {
        let mma = |d: &DeviceFacts, hs: usize| {
            let s = shape(hs, hs, 8, 8, 7680, 512, GgmlType::F16);
            let p = plan(&s, d, &Knobs::default());
            check(&s, d, &p);
            match p.kernel {
                Kernel::Mma(m) => m,
                other => panic!("{other:?}"),
            }
        };
        let gpu = h200(16, 16, 16);
        // Head size 64: 16 subgroups (8 row blocks of 16 rows, two subgroups on each, as
        // much as 48 KiB of workgroup memory holds).
        let small = mma(&gpu, 64);
        assert_eq!((small.subgroups, small.rb, small.cg, small.rows), (16, 8, 2, 128));
        // Head size 256: 16 O blocks of 8 f32 a lane fit the budget of 128, so the layout
        // starts from whole rows per subgroup, and fitting 48 KiB ends at 4 row blocks with a
        // fresh 32-key tile; the old budget of 64 (a knob still asks for it) starts from two
        // subgroups a row block and ends at 16 keys with K and V sharing their buffer.
        let large = mma(&gpu, 256);
        let knobs = Knobs {
            mma_o_budget: Some(64),
            ..Knobs::default()
        };
        let s = shape(256, 256, 8, 8, 7680, 512, GgmlType::F16);
        let Kernel::Mma(old) = plan(&s, &gpu, &knobs).kernel else {
            panic!()
        };
        assert_eq!((large.subgroups, large.rb, large.cg), (8, 4, 2));
        assert_eq!((large.kv_tile, large.kv_alias), (32, false), "{large:?}");
        assert_eq!((old.kv_tile, old.kv_alias), (16, true), "{old:?}");
        // CPU adapters keep 8 subgroups and the smaller budget.
        let cpu = lavapipe();
        assert_eq!(mma(&cpu, 64).subgroups, 8);
    }

    #[test]
    fn cpu_adapters_take_the_tile_kernel_for_large_heads() {
        let d = lavapipe();
        let kernel = |hsk, hsv, knobs: &Knobs| {
            let s = shape(hsk, hsv, 8, 2, 512, 32, GgmlType::F16);
            let p = plan(&s, &d, knobs);
            check(&s, &d, &p);
            p.kernel
        };
        let defaults = Knobs::default();
        assert!(matches!(kernel(128, 128, &defaults), Kernel::Mma(_)));
        for (hsk, hsv) in [(192, 128), (256, 256), (576, 512)] {
            assert!(matches!(kernel(hsk, hsv, &defaults), Kernel::Tile(_)), "{hsk}/{hsv}");
            // Forced, or with the limit raised, the mma kernel runs them.
            let forced = Knobs {
                force: Some(Force::Mma),
                ..defaults
            };
            assert!(matches!(kernel(hsk, hsv, &forced), Kernel::Mma(_)), "{hsk}/{hsv}");
            let raised = super::super::knobs::parse_knobs("mma_max_hs=576").unwrap();
            assert!(matches!(kernel(hsk, hsv, &raised), Kernel::Mma(_)), "{hsk}/{hsv}");
        }
        // GPUs take it at every head size.
        let gpu = DeviceFacts {
            class: crate::facts::DeviceClass::NvidiaHopper,
            ..d
        };
        let s = shape(576, 512, 8, 2, 512, 32, GgmlType::F16);
        assert!(matches!(plan(&s, &gpu, &defaults).kernel, Kernel::Mma(_)));
    }

    #[test]
    fn non_square_configs_pad_by_their_own_sizes() {
        for (m, n, k) in [(16, 8, 16), (16, 8, 8), (8, 16, 16)] {
            let d = h200(m, n, k);
            for (hsk, hsv) in [(40, 40), (72, 72), (192, 128), (576, 512), (320, 256), (256, 256)] {
                let s = shape(hsk, hsv, 4, 2, 1000, 64, GgmlType::Q8_0);
                let p = plan(&s, &d, &Knobs::default());
                check(&s, &d, &p);
                let Kernel::Mma(mm) = &p.kernel else {
                    panic!("{m}x{n}x{k} {hsk}/{hsv}: {p:?}")
                };
                assert_eq!((mm.m, mm.n, mm.k), (m, n, k));
                assert!(mm.hskp >= hsk as u32 && mm.hskp - (hsk as u32) < k.max(8));
                assert!(mm.hsvp >= hsv as u32 && mm.hsvp - (hsv as u32) < n.max(8));
            }
        }
        // 16x8x16: 72 → 80 for K (k = 16), 72 stays for V (n = 8).
        let d = h200(16, 8, 16);
        let s = shape(72, 72, 4, 1, 1000, 512, GgmlType::F16);
        let Kernel::Mma(mm) = plan(&s, &d, &Knobs::default()).kernel else {
            panic!()
        };
        assert_eq!((mm.hskp, mm.hsvp), (80, 72));
    }

    #[test]
    fn every_upstream_head_size_fits_both_devices_and_modes() {
        let sizes = [
            (40, 40),
            (64, 64),
            (72, 72),
            (80, 80),
            (96, 96),
            (128, 128),
            (192, 128),
            (192, 192),
            (256, 256),
            (320, 256),
            (512, 512),
            (576, 512),
            (128, 64),
            (64, 128),
        ];
        for d in [h200(16, 16, 16), h200(16, 8, 8), lavapipe()] {
            for no_matrix in [false, true] {
                let mut d = d;
                if no_matrix {
                    d.subgroup_matrix = None;
                }
                for (hsk, hsv) in sizes {
                    for (r2, nb, kv) in [(1, 1, 113), (4, 1, 16384), (20, 1, 1024), (1, 75, 512), (8, 512, 7680)] {
                        for ty in [GgmlType::F16, GgmlType::Q4_0, GgmlType::F32] {
                            let s = shape(hsk, hsv, 2, r2, kv, nb, ty);
                            let p = plan(&s, &d, &Knobs::default());
                            check(&s, &d, &p);
                            assert!(
                                !matches!(p.kernel, Kernel::Simple(_)),
                                "{hsk}/{hsv} r2={r2} nb={nb} falls back: {p:?}"
                            );
                            if no_matrix {
                                assert!(matches!(p.kernel, Kernel::Tile(_) | Kernel::Vec(_)));
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn fallbacks_say_why() {
        let d = h200(16, 16, 16);
        let s = shape(36, 36, 1, 1, 100, 1, GgmlType::F16);
        assert!(
            matches!(plan(&s, &d, &Knobs::default()).kernel, Kernel::Simple(ref w) if w.contains("multiples of 8"))
        );
        let mut no_sg = d;
        no_sg.subgroups = false;
        let s = shape(64, 64, 1, 1, 100, 1, GgmlType::F16);
        assert!(matches!(plan(&s, &no_sg, &Knobs::default()).kernel, Kernel::Simple(ref w) if w.contains("subgroups")));
        // Without f32 results the mma kernel is not used.
        let mut f16_only = d;
        f16_only.subgroup_matrix = Some(MatrixConfig {
            m: 16,
            n: 16,
            k: 16,
            f32_result: false,
            f16_result: true,
        });
        let s = shape(64, 64, 1, 1, 100, 512, GgmlType::F16);
        assert!(matches!(plan(&s, &f16_only, &Knobs::default()).kernel, Kernel::Tile(_)));
    }

    #[test]
    fn knobs_force_kernels_and_splits() {
        let d = lavapipe();
        let s = shape(64, 64, 2, 1, 300, 40, GgmlType::F16);
        let force = |f| Knobs {
            force: Some(f),
            ..Knobs::default()
        };
        assert!(matches!(plan(&s, &d, &force(Force::Tile)).kernel, Kernel::Tile(_)));
        assert!(matches!(plan(&s, &d, &force(Force::Mma)).kernel, Kernel::Mma(_)));
        assert!(matches!(plan(&s, &d, &force(Force::Simple)).kernel, Kernel::Simple(_)));
        // Two row blocks per subgroup: twice the rows, the same subgroups.
        let rh2 = Knobs {
            mma_rh: Some(2),
            ..force(Force::Mma)
        };
        let p = plan(&s, &d, &rh2);
        check(&s, &d, &p);
        let Kernel::Mma(m) = &p.kernel else { panic!("{p:?}") };
        assert_eq!((m.rh, m.rows), (2, 2 * m.rb * m.m));
        // Vec takes only what fits it, else tile; tile keeps decode on the previous kernel.
        assert!(matches!(plan(&s, &d, &force(Force::Vec)).kernel, Kernel::Tile(_)));
        let dec = shape(64, 64, 2, 4, 300, 1, GgmlType::F16);
        assert!(matches!(plan(&dec, &d, &Knobs::default()).kernel, Kernel::Vec(_)));
        assert!(matches!(plan(&dec, &d, &force(Force::Tile)).kernel, Kernel::Tile(_)));
        let p = plan(
            &s,
            &d,
            &Knobs {
                split: Some(3),
                ..Knobs::default()
            },
        );
        check(&s, &d, &p);
        assert_eq!(p.n_split, 3);
        // More splits than tiles are clamped; splits are never empty.
        let p = plan(
            &s,
            &d,
            &Knobs {
                split: Some(100),
                ..Knobs::default()
            },
        );
        check(&s, &d, &p);
    }

    #[test]
    fn large_batches_split_the_grid_and_not_the_sequence() {
        let d = h200(16, 16, 16);
        let s = shape(64, 64, 8, 8, 7680, 512, GgmlType::Q4_0);
        let p = plan(&s, &d, &Knobs::default());
        check(&s, &d, &p);
        assert!(matches!(p.kernel, Kernel::Mma(_)));
        assert!(p.n_split <= 2, "{p:?}");
        let s = shape(256, 256, 2, 16, 20000, 1, GgmlType::F16);
        let p = plan(&s, &d, &Knobs::default());
        check(&s, &d, &p);
        assert!(p.n_split > 1);
    }
}
