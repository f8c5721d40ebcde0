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
    if [q, k, v, d].iter().any(|t| t.ne.iter().any(|&n| n > i32::MAX as usize)) {
        return Err(BackendError::Unsupported(format!(
            "FLASH_ATTN_EXT with an extent past 2^31: q {:?}, k {:?}, v {:?}",
            q.ne, k.ne, v.ne
        )));
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
    let knobs = knobs_to_run()?;
    let plan = plan::plan(&shape(&layouts), &device(ctx), &knobs);
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

/// The environment variable with knob overrides.
pub const KNOBS_ENV: &str = "GGML_DAWN_FA";

/// The knobs in effect: [`set_knobs`]'s, else those of `GGML_DAWN_FA` (read once; the
/// defaults when its value is invalid: [`env_knobs`] says why, and [`flash_attn_ext`] refuses
/// to run then).
pub fn knobs() -> Knobs {
    if let Some(k) = *OVERRIDE.read() {
        return k;
    }
    env_knobs().unwrap_or_default()
}

/// The knobs of `GGML_DAWN_FA` (read once per process), or why its value is invalid.
pub fn env_knobs() -> Result<Knobs> {
    static ENV: OnceLock<std::result::Result<Knobs, String>> = OnceLock::new();
    ENV.get_or_init(|| match std::env::var(KNOBS_ENV) {
        Ok(text) => parse_knobs(&text),
        Err(std::env::VarError::NotPresent) => Ok(Knobs::default()),
        Err(std::env::VarError::NotUnicode(_)) => Err("the value is not UTF-8".into()),
    })
    .clone()
    .map_err(|message| BackendError::Config {
        name: KNOBS_ENV,
        message,
    })
}

/// The knobs [`flash_attn_ext`] runs with: [`set_knobs`]'s, else the environment's (an error
/// when its value is invalid).
fn knobs_to_run() -> Result<Knobs> {
    match *OVERRIDE.read() {
        Some(k) => {
            validate_knobs(&k).map_err(|message| BackendError::Config {
                name: "set_knobs",
                message,
            })?;
            Ok(k)
        }
        None => env_knobs(),
    }
}

/// Checks knobs built in code (for [`set_knobs`]) against the ranges [`parse_knobs`] enforces.
pub fn validate_knobs(k: &Knobs) -> std::result::Result<(), String> {
    for (key, value) in [
        ("split", k.split),
        ("target_wg", k.target_workgroups),
        ("min_split_tiles", k.min_split_tiles),
        ("tile_threads", k.tile_threads),
        ("tile_rows", k.tile_rows),
        ("tile_kv", k.tile_kv),
        ("tile_rq", k.tile_rq),
        ("tile_ro", k.tile_ro),
        ("vec_threads", k.vec_threads),
        ("vec_lanes", k.vec_lanes),
        ("vec_keys", k.vec_keys),
        ("vec_rows", k.vec_rows),
        ("mma_sg", k.mma_subgroups),
        ("mma_rh", k.mma_rh),
        ("mma_kv", k.mma_kv),
        ("mma_min_rows", k.mma_min_rows),
        ("mma_o_budget", k.mma_o_budget),
    ] {
        if let Some(v) = value {
            check_knob(key, v)?;
        }
    }
    if let Some(tau) = k.tau
        && !(tau.is_finite() && tau >= 0.0)
    {
        return Err(format!("`tau={tau}`: must be a finite number, at least 0"));
    }
    Ok(())
}

fn check_knob(key: &str, v: u32) -> std::result::Result<(), String> {
    if let Some((lo, hi, pow2)) = knob_range(key) {
        if !(lo..=hi).contains(&v) {
            return Err(format!("`{key}={v}`: must be in {lo}..={hi}"));
        }
        if pow2 && !v.is_power_of_two() {
            return Err(format!("`{key}={v}`: must be a power of two"));
        }
    }
    Ok(())
}

/// The range of each integer knob (`(low, high, power of two)`): what keeps the planner's u32
/// arithmetic from overflowing and the kernels' per-thread arrays, workgroups and workgroup
/// memory within what devices have.
fn knob_range(key: &str) -> Option<(u32, u32, bool)> {
    Some(match key {
        "split" => (1, plan::MAX_SPLIT, false),
        "target_wg" => (1, 1 << 20, false),
        "min_split_tiles" => (1, 1 << 16, false),
        "tile_threads" => (1, 1024, true),
        "tile_rows" => (1, 256, false),
        "tile_kv" => (8, 1024, true),
        "tile_rq" | "tile_ro" => (1, 32, false),
        "vec_threads" => (1, 1024, true),
        "vec_lanes" => (1, 32, true),
        "vec_keys" => (1, 16, false),
        "vec_rows" => (1, 64, false),
        "mma_sg" => (1, 32, false),
        "mma_rh" => (1, 4, false),
        "mma_kv" => (8, 1024, true),
        "mma_min_rows" => (0, 1 << 16, false),
        "mma_o_budget" => (1, 1024, false),
        _ => return None,
    })
}

/// Parses `key=value,...`. Keys: `path` (simple, tile, mma, vec), `split`, `target_wg`,
/// `min_split_tiles`, `tile_threads`, `tile_rows`, `tile_kv`, `tile_rq`, `tile_ro`, `vec_threads`, `vec_lanes`,
/// `vec_keys`, `vec_rows`, `vec_prefetch` (0/1), `mma_sg`, `mma_rh`, `mma_kv`,
/// `mma_min_rows`, `mma_q_regs` (0/1), `mma_o_budget`, `prefetch` (0/1), `mask_skip` (0/1), `tau`
/// (finite, at least 0). A value out of its key's range is an error naming the key.
pub fn parse_knobs(text: &str) -> std::result::Result<Knobs, String> {
    let mut k = Knobs::default();
    let mut seen: Vec<&str> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("`{item}` is not key=value"))?;
        let (key, value) = (key.trim(), value.trim());
        if seen.contains(&key) {
            return Err(format!("`{key}` is given twice"));
        }
        seen.push(key);
        let int = || -> std::result::Result<u32, String> {
            let v = value
                .parse::<u32>()
                .map_err(|_| format!("`{key}={value}`: not a non-negative 32-bit integer"))?;
            check_knob(key, v)?;
            Ok(v)
        };
        let flag = || match value {
            "0" => Ok(false),
            "1" => Ok(true),
            _ => Err(format!("`{key}={value}`: must be 0 or 1")),
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
            "vec_prefetch" => k.vec_prefetch = Some(flag()?),
            "mma_sg" => k.mma_subgroups = Some(int()?),
            "mma_kv" => k.mma_kv = Some(int()?),
            "mma_rh" => k.mma_rh = Some(int()?),
            "mma_min_rows" => k.mma_min_rows = Some(int()?),
            "mma_q_regs" => k.mma_q_regs = Some(flag()?),
            "mma_o_budget" => k.mma_o_budget = Some(int()?),
            "prefetch" => k.prefetch = Some(flag()?),
            "mask_skip" => k.mask_skip = Some(flag()?),
            "tau" => {
                let tau = value
                    .parse::<f32>()
                    .ok()
                    .filter(|t| t.is_finite() && *t >= 0.0)
                    .ok_or_else(|| format!("`tau={value}`: must be a finite number, at least 0"))?;
                k.tau = Some(tau)
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

    #[test]
    fn out_of_range_knobs_are_errors_naming_the_key() {
        for bad in [
            "split=0",
            "split=4294967295",
            "tile_threads=4294967295",
            "tile_kv=7",
            "tile_kv=4294967295",
            "mma_kv=4294967295",
            "mma_sg=0",
            "vec_lanes=3",
            "vec_keys=0",
            "tile_rq=1000",
            "mask_skip=2",
            "tau=nan",
            "tau=-1",
            "tau=inf",
        ] {
            let err = parse_knobs(bad).unwrap_err();
            let key = bad.split('=').next().unwrap();
            assert!(err.contains(key), "{bad}: {err}");
        }
        assert!(parse_knobs("split=2,split=4").is_err());
        // Knobs built in code are held to the same ranges.
        let built = Knobs {
            tile_threads: Some(u32::MAX),
            ..Knobs::default()
        };
        assert!(validate_knobs(&built).unwrap_err().contains("tile_threads"));
        assert!(validate_knobs(&Knobs::default()).is_ok());
        // Every key at both ends of its range plans without a panic.
        use plan::{Device, MatrixConfig, Shape};
        let device = Device {
            subgroups: true,
            shader_f16: true,
            subgroup_min: 8,
            subgroup_max: 32,
            workgroup_memory: 32768,
            max_invocations: 256,
            max_binding: 1 << 27,
            matrix: Some(MatrixConfig {
                m: 8,
                n: 8,
                k: 8,
                f32_result: true,
            }),
            cpu: false,
        };
        for end in [0, 1] {
            let mut text = Vec::new();
            for key in [
                "split",
                "target_wg",
                "min_split_tiles",
                "tile_threads",
                "tile_rows",
                "tile_kv",
                "tile_rq",
                "tile_ro",
                "vec_threads",
                "vec_lanes",
                "vec_keys",
                "vec_rows",
                "mma_sg",
                "mma_rh",
                "mma_kv",
                "mma_min_rows",
                "mma_o_budget",
            ] {
                let (lo, hi, pow2) = knob_range(key).unwrap();
                let v = if end == 0 { lo } else { hi };
                let v = if pow2 { v.next_power_of_two().min(hi) } else { v };
                text.push(format!("{key}={v}"));
            }
            let base = parse_knobs(&text.join(",")).unwrap();
            for force in [
                None,
                Some(Force::Tile),
                Some(Force::Mma),
                Some(Force::Vec),
                Some(Force::Simple),
            ] {
                let knobs = Knobs { force, ..base };
                for (n_q, kv) in [(1, 1), (1, 4096), (7, 300), (64, 1000)] {
                    let shape = Shape {
                        hsk: 128,
                        hsv: 128,
                        n_q,
                        n_heads: 8,
                        kv_heads: 2,
                        kv,
                        n_seq: 1,
                        k_type: GgmlType::F16,
                        v_type: GgmlType::F16,
                        has_mask: true,
                    };
                    let _ = plan::plan(&shape, &device, &knobs);
                }
            }
        }
    }
}
