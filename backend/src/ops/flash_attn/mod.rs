//! FLASH_ATTN_EXT as ggml defines it (see `reference::flash_attn` for the exact semantics).
//!
//! [`plan`] picks a kernel and its tiles from the shapes, types and device (a pure function,
//! unit-tested without a GPU); `encode` records it:
//! - decode and few query rows: `flash_attn_vec.wgsl` (or `flash_attn_tile.wgsl` when they do
//!   not fit it), all query heads of a KV head sharing each K/V row, the KV sequence split over
//!   workgroups, then `flash_attn_reduce.wgsl`;
//! - prefill: `flash_attn_mma.wgsl` with subgroup matrices (of the config's shape with f32
//!   results), or the tile kernel without them;
//! - `flash_attn_simple.wgsl` over f32 copies of K and V, the last resort.
//!
//! Tuning knobs come from the environment variable `GGML_DAWN_FA` (comma-separated
//! `key=value`, see [`Knobs`] and [`parse_knobs`]), or from [`set_knobs`].

mod encode;
pub mod plan;

use std::sync::OnceLock;

use parking_lot::RwLock;

use crate::context::GpuContext;
use crate::error::{BackendError, Result};
use crate::exec::Stream;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::dequantize;
use crate::tensor::Layout;

pub use plan::{Force, Kernel, Knobs, Plan};

/// The scalar parameters of FLASH_ATTN_EXT.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlashAttnParams {
    pub scale: f32,
    pub max_bias: f32,
    pub logit_softcap: f32,
}

/// The operands: q f32 `[hsk, n_q, n_heads, n_seq]`; k `[hsk, kv, kv_heads, n_seq]`; v
/// `[hsv, kv, kv_heads, n_seq]`; mask f16 `[kv, ≥ n_q, 1, mask_seq]`; sinks f32 `[n_heads]`;
/// dst contiguous f32 `[hsv, n_heads, n_q, n_seq]`.
#[derive(Debug, Clone, Copy)]
pub struct FlashAttnOperands<'a> {
    pub q: &'a DeviceTensor,
    pub k: &'a DeviceTensor,
    pub v: &'a DeviceTensor,
    pub mask: Option<&'a DeviceTensor>,
    pub sinks: Option<&'a DeviceTensor>,
    pub dst: &'a DeviceTensor,
}

/// Workgroup size of the simple kernel and the value dimensions each thread holds.
pub(crate) const SIMPLE_WG: usize = 64;
pub(crate) const SIMPLE_DV_PER_THREAD: usize = 16;

/// The layouts of FLASH_ATTN_EXT's operands, for checking them without device memory.
#[derive(Debug, Clone, Copy)]
pub struct FlashAttnLayouts {
    pub q: Layout,
    pub k: Layout,
    pub v: Layout,
    pub mask: Option<Layout>,
    pub sinks: Option<Layout>,
    pub dst: Layout,
}

impl FlashAttnOperands<'_> {
    /// The operands' layouts.
    pub fn layouts(&self) -> FlashAttnLayouts {
        FlashAttnLayouts {
            q: *self.q.layout(),
            k: *self.k.layout(),
            v: *self.v.layout(),
            mask: self.mask.map(|m| *m.layout()),
            sinks: self.sinks.map(|s| *s.layout()),
            dst: *self.dst.layout(),
        }
    }
}

/// Why these operands cannot run here, if they cannot (from the layouts alone).
pub fn check(ops: &FlashAttnLayouts) -> Result<()> {
    let (q, k, v, d) = (&ops.q, &ops.k, &ops.v, &ops.dst);
    let bad = |m: String| Err(BackendError::InvalidOperands(format!("FLASH_ATTN_EXT: {m}")));
    for (name, t) in [("K", k), ("V", v)] {
        if !dequantize::supports(t.ty) {
            return Err(BackendError::Unsupported(format!(
                "FLASH_ATTN_EXT with {name} of type {}",
                t.ty
            )));
        }
    }
    if [q, k, v].iter().any(|t| t.ne.contains(&0)) {
        return bad(format!(
            "degenerate shapes (a zero extent): q {:?}, k {:?}, v {:?}",
            q.ne, k.ne, v.ne
        ));
    }
    if q.ty != GgmlType::F32 || !q.has_contiguous_rows() {
        return bad(format!("Q must be f32 with contiguous rows, is {q:?}"));
    }
    if k.ne[0] != q.ne[0] || k.ne[1] != v.ne[1] || k.ne[2] != v.ne[2] || k.ne[3] != q.ne[3] || v.ne[3] != q.ne[3] {
        return bad(format!("shapes do not fit: q {:?}, k {:?}, v {:?}", q.ne, k.ne, v.ne));
    }
    if k.ne[2] == 0 || q.ne[2] % k.ne[2] != 0 {
        return bad(format!(
            "{} query heads are not a multiple of {} KV heads",
            q.ne[2], k.ne[2]
        ));
    }
    if v.ne[0] > SIMPLE_WG * SIMPLE_DV_PER_THREAD {
        return Err(BackendError::Unsupported(format!(
            "V head size {} over {}",
            v.ne[0],
            SIMPLE_WG * SIMPLE_DV_PER_THREAD
        )));
    }
    if let Some(m) = &ops.mask
        && (m.ty != GgmlType::F16 || m.ne[0] != k.ne[1] || m.ne[1] < q.ne[1] || m.ne[2] != 1 || m.nb[0] != 2)
    {
        return bad(format!("mask must be f16 [kv, >= n_queries, 1, _], is {m:?}"));
    }
    if let Some(s) = &ops.sinks
        && (s.ty != GgmlType::F32 || s.elements() != q.ne[2] || !s.is_contiguous())
    {
        return bad(format!("sinks must be f32 [{}], are {s:?}", q.ne[2]));
    }
    let want = [v.ne[0], q.ne[2], q.ne[1], q.ne[3]];
    if d.ty != GgmlType::F32 || !d.is_contiguous() || d.ne != want {
        return bad(format!("dst must be contiguous f32 {want:?}, is {d:?}"));
    }
    Ok(())
}

/// Records FLASH_ATTN_EXT.
pub fn flash_attn_ext(
    ctx: &GpuContext,
    stream: &mut Stream,
    ops: &FlashAttnOperands<'_>,
    p: FlashAttnParams,
) -> Result<()> {
    let layouts = ops.layouts();
    check(&layouts)?;
    let plan = plan_for(ctx, &layouts);
    encode::record(ctx, stream, ops, p, &shape(&layouts), &plan)
}

/// The plan FLASH_ATTN_EXT follows for these operands on `ctx`'s device (with the current knobs).
pub fn plan_for(ctx: &GpuContext, layouts: &FlashAttnLayouts) -> Plan {
    plan::plan(&shape(layouts), &device(ctx), &knobs())
}

/// The kernel and tiles FLASH_ATTN_EXT uses for these operands, in words (for `backend-ops -v`).
pub fn describe(ctx: &GpuContext, layouts: &FlashAttnLayouts) -> String {
    if let Err(e) = check(layouts) {
        return format!("not run: {e}");
    }
    let s = shape(layouts);
    let p = plan_for(ctx, layouts);
    let split = if p.n_split > 1 {
        format!(
            ", KV split {} x {} keys + reduce ({} KiB scratch)",
            p.n_split,
            p.split_len,
            p.scratch_bytes(&s).div_ceil(1024)
        )
    } else {
        String::new()
    };
    let grid = format!(
        "{} workgroups ({} row blocks x {} KV heads x {} seq x {} splits)",
        p.workgroups(&s),
        p.row_blocks,
        s.kv_heads,
        s.n_seq,
        p.n_split
    );
    match &p.kernel {
        Kernel::Simple(why) => format!("simple (f32 copies of K and V; {why})"),
        Kernel::Tile(t) => format!(
            "tile: {} rows x {} keys a tile, {} threads (q.k {} lanes x {} rows/thread, p.v {} rows x {} chunks, {} key splits), {} B shared{}{}; {grid}",
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
        Kernel::Vec(v) => format!(
            "vec: {} rows, {} threads, {} lanes a key ({} / {} K/V chunks a lane), {} keys a group in flight{}, {} keys a step, merged over teams of {}, {} B shared{}; {grid}",
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
            split
        ),
        Kernel::Mma(m) => format!(
            "mma {}x{}x{} f16->f32: {} rows ({} row blocks x {} a subgroup x {} col groups) x {} keys a tile, {} threads, heads {}/{} padded to {}/{}, Q in {}, {} B shared{}{}{}, tau {}{}; {grid}",
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
            p.tau,
            split
        ),
    }
}

/// The shapes the plan needs, from the (checked) layouts.
pub fn shape(l: &FlashAttnLayouts) -> plan::Shape {
    plan::Shape {
        hsk: l.q.ne[0],
        hsv: l.v.ne[0],
        n_q: l.q.ne[1],
        n_heads: l.q.ne[2],
        kv_heads: l.k.ne[2],
        kv: l.k.ne[1],
        n_seq: l.q.ne[3],
        k_type: l.k.ty,
        v_type: l.v.ty,
        has_mask: l.mask.is_some(),
    }
}

/// What the plan needs to know of the device.
pub fn device(ctx: &GpuContext) -> plan::Device {
    let caps = &ctx.capabilities;
    let limits = &caps.limits;
    let matrix = caps.subgroup_matrix.map(|c| {
        let f32_result = caps.info.subgroup_matrix_configs.iter().any(|o| {
            (o.m, o.n, o.k) == (c.m, c.n, c.k)
                && o.component == dawn::ComponentType::F16
                && o.result == dawn::ComponentType::F32
        });
        plan::MatrixConfig {
            m: c.m,
            n: c.n,
            k: c.k,
            f32_result,
        }
    });
    plan::Device {
        subgroups: caps.subgroups,
        shader_f16: caps.shader_f16,
        subgroup_min: caps.info.subgroup_min_size.max(1),
        subgroup_max: caps.info.subgroup_max_size.max(caps.info.subgroup_min_size).max(1),
        workgroup_memory: limits.max_compute_workgroup_storage_size,
        max_invocations: limits
            .max_compute_invocations_per_workgroup
            .min(limits.max_compute_workgroup_size_x),
        max_binding: limits.max_storage_buffer_binding_size,
        matrix,
        cpu: caps.info.adapter_type == dawn::AdapterType::Cpu,
    }
}

static OVERRIDE: RwLock<Option<Knobs>> = RwLock::new(None);

/// Replaces the knobs taken from `GGML_DAWN_FA` (None: back to the environment's), for the
/// whole process.
pub fn set_knobs(knobs: Option<Knobs>) {
    *OVERRIDE.write() = knobs;
}

/// The knobs in effect: [`set_knobs`]'s, else those of `GGML_DAWN_FA` (read once).
pub fn knobs() -> Knobs {
    if let Some(k) = *OVERRIDE.read() {
        return k;
    }
    static ENV: OnceLock<Knobs> = OnceLock::new();
    *ENV.get_or_init(|| match std::env::var("GGML_DAWN_FA") {
        Ok(text) => parse_knobs(&text).unwrap_or_else(|e| {
            eprintln!("GGML_DAWN_FA ignored: {e}");
            Knobs::default()
        }),
        Err(_) => Knobs::default(),
    })
}

/// Parses `key=value,...`. Keys: `path` (simple, tile, mma, vec), `split`, `target_wg`,
/// `min_split_tiles`, `tile_threads`, `tile_rows`, `tile_kv`, `tile_rq`, `tile_ro`, `vec_threads`, `vec_lanes`,
/// `vec_keys`, `vec_rows`, `vec_prefetch` (0/1), `mma_sg`, `mma_rh`, `mma_kv`,
/// `mma_min_rows`, `mma_q_regs` (0/1), `mma_o_budget`, `prefetch` (0/1), `mask_skip` (0/1), `tau`.
pub fn parse_knobs(text: &str) -> std::result::Result<Knobs, String> {
    let mut k = Knobs::default();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("`{item}` is not key=value"))?;
        let (key, value) = (key.trim(), value.trim());
        let int = || {
            value
                .parse::<u32>()
                .map_err(|_| format!("`{key}={value}`: not a number"))
        };
        match key {
            "path" => {
                k.force = Some(match value {
                    "simple" => Force::Simple,
                    "tile" => Force::Tile,
                    "mma" => Force::Mma,
                    "vec" => Force::Vec,
                    _ => return Err(format!("path `{value}`: simple, tile, mma or vec")),
                })
            }
            "split" => k.split = Some(int()?),
            "target_wg" => k.target_workgroups = Some(int()?),
            "min_split_tiles" => k.min_split_tiles = Some(int()?),
            "tile_threads" => k.tile_threads = Some(int()?),
            "tile_rows" => k.tile_rows = Some(int()?),
            "tile_kv" => k.tile_kv = Some(int()?),
            "tile_ro" => k.tile_ro = Some(int()?),
            "tile_rq" => k.tile_rq = Some(int()?),
            "vec_threads" => k.vec_threads = Some(int()?),
            "vec_lanes" => k.vec_lanes = Some(int()?),
            "vec_keys" => k.vec_keys = Some(int()?),
            "vec_rows" => k.vec_rows = Some(int()?),
            "vec_prefetch" => k.vec_prefetch = Some(int()? != 0),
            "mma_sg" => k.mma_subgroups = Some(int()?),
            "mma_kv" => k.mma_kv = Some(int()?),
            "mma_rh" => k.mma_rh = Some(int()?),
            "mma_min_rows" => k.mma_min_rows = Some(int()?),
            "mma_q_regs" => k.mma_q_regs = Some(int()? != 0),
            "mma_o_budget" => k.mma_o_budget = Some(int()?),
            "prefetch" => k.prefetch = Some(int()? != 0),
            "mask_skip" => k.mask_skip = Some(int()? != 0),
            "tau" => {
                k.tau = Some(
                    value
                        .parse::<f32>()
                        .map_err(|_| format!("`tau={value}`: not a number"))?,
                )
            }
            _ => return Err(format!("unknown key `{key}`")),
        }
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_parse() {
        let k = parse_knobs("path=tile, split=4,tile_kv=64,mma_q_regs=0,tau=0").unwrap();
        assert_eq!(k.force, Some(Force::Tile));
        assert_eq!(
            (k.split, k.tile_kv, k.mma_q_regs, k.tau),
            (Some(4), Some(64), Some(false), Some(0.0))
        );
        assert!(parse_knobs("bogus=1").is_err());
        assert!(parse_knobs("split").is_err());
        assert_eq!(parse_knobs("").unwrap(), Knobs::default());
    }
}
