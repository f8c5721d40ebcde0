//! Every shader variant the backend runs, in one place.
//!
//! The encoders build their kernels' variants only through [`mul_mat`], [`flash_attn`] and
//! [`dequantize_variant`], which are pure functions of a plan (or a type); [`enumerate`] runs the
//! planners over a grid of problems for given device facts and collects what those functions
//! make. So a variant the planners can produce is one [`enumerate`] lists: a new kernel or path
//! goes through the same functions, and the tests below check that every path appears. Used by
//! the Metal check (`backend-ops shaders` writes the variants out, `cargo xtask msl-check`
//! translates each to MSL with Tint) and by the shader tests.

use std::collections::BTreeMap;
use std::fmt;

use dawn::{ComponentType, SubgroupMatrixConfig};

use crate::facts::{DeviceFacts, MatrixConfig};
use crate::ggml_type::GgmlType;
use crate::ops::argmax::plan::ArgmaxPlan;
use crate::ops::dequantize::kernel::{WG_SIZE as DEQUANTIZE_WG_SIZE, supports};
use crate::ops::flash_attn::plan::{
    self as fa, MmaPlan, Placement, SIMPLE_DV_PER_THREAD, SIMPLE_WG as FA_SIMPLE_WG, TilePlan, VecPlan,
};
use crate::ops::flash_attn::tuning::Force;
use crate::ops::mul_mat::plan::{
    self as mm, BPrologue, COPY_WG, Choice, DstEpilogue, MatVecPlan, MulMatPlan, MulMatTuning, Problem, SIMPLE_WG,
    SubgroupMatrixPlan, TiledPlan,
};
use crate::ops::norm::plan::NormPlan;
use crate::ops::rope::plan::{self as rope_plan, RopePlan};
use crate::ops::row_plan::{self, RowPlan};
use crate::ops::rows::plan::{self as rows_plan, RowsOp, RowsPlan};
use crate::ops::scale::plan::ScalePlan;
use crate::ops::soft_max::plan::SoftMaxPlan;
use crate::reference::RopeMode;
use crate::shader_lib::ShaderVariant;

/// The kernels one MUL_MAT plan runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MulMatKernels {
    pub kernel: ShaderVariant,
    /// The pass that quantizes b first ([`MulMatPlan::quantize_b`]).
    pub quantize_b: Option<ShaderVariant>,
    /// The pass that converts a to f16 first ([`MulMatPlan::dequantize_a`]).
    pub dequantize_a: Option<ShaderVariant>,
    /// The pass that converts b to f16 first ([`MulMatPlan::convert_b`]).
    pub convert_b: Option<ShaderVariant>,
}

/// The variants of a MUL_MAT plan.
pub fn mul_mat(plan: &MulMatPlan) -> MulMatKernels {
    let problem = &plan.problem;
    if matches!(plan.choice, Choice::Simple(_)) {
        let kernel = ShaderVariant::new("mul_mat_simple.wgsl")
            .define("A_TYPE", problem.a_type.gguf_id())
            .flag("B_F16", problem.b_type == GgmlType::F16)
            .define("WG_SIZE", format!("{SIMPLE_WG}u"));
        return MulMatKernels {
            kernel,
            quantize_b: None,
            dequantize_a: None,
            convert_b: None,
        };
    }
    // The main kernel reads the f16 copies of a and b where the plan makes them; the passes that
    // make them read a and b themselves.
    let kernel_problem = plan.kernel_problem();
    let operands_of = |problem: &Problem, b_vec4: bool, file: &'static str| {
        ShaderVariant::new(file)
            .define("A_TYPE", problem.a_type.gguf_id())
            .flag("A_ALIGN4", problem.a_align >= 4)
            .flag("A_ALIGN2", problem.a_align >= 2)
            .flag("B_F16", problem.b_type == GgmlType::F16)
            .flag("B_CONTIG", problem.b_contiguous)
            .flag("B_ALIGN4", problem.b_align >= 4)
            .flag("B_ALIGN2", problem.b_align >= 2)
            .flag("B_VEC4", b_vec4)
    };
    let operands = |file: &'static str| operands_of(&kernel_problem, plan.b_vec4, file);
    let kernel = match &plan.choice {
        Choice::MatVec(v) => {
            let MatVecPlan {
                wg_size,
                rows,
                groups,
                cols,
                subgroups,
                max_subgroups,
                whole_words,
                int_dot,
                int_slots,
                prefetch,
                level_table,
                ..
            } = v;
            let variant = operands("mul_mat_vec.wgsl")
                .flag("B_Q8", *int_dot)
                .flag("B_Q8_WG", v.int_b_in_workgroup);
            let variant = with_prologue(variant, plan.prologue_in_workgroup().then_some(plan.problem.b_prologue));
            let variant = match plan.problem.dst_epilogue {
                DstEpilogue::RopeSetRows {
                    freq_factors,
                    cache_f16,
                } if plan.applies_epilogue() => variant
                    .flag("DST_ROPE", true)
                    .flag("ROPE_FF", freq_factors)
                    .flag("CACHE_F16", cache_f16),
                _ => variant,
            };
            let variant = variant
                .define("B_WG_BLOCKS", format!("{}u", v.b_wg_blocks.max(1)))
                .flag("B_Q8K", *int_slots)
                .flag("VEC_PREFETCH", *prefetch)
                .flag("W_LUT", *level_table)
                .flag("A_VEC4", plan.a_vec4)
                .define("WG_SIZE", format!("{wg_size}u"))
                .define("ROWS", format!("{rows}u"))
                .define("GROUPS", format!("{groups}u"))
                .define("VEC_KERNEL", u32::from(*whole_words))
                .define("N_COLS", format!("{cols}u"))
                .flag("USE_SUBGROUPS", *subgroups)
                .define("MAX_SUBGROUPS", format!("{}u", max_subgroups.max(&1)));
            variant
                .flag("PROBE_LOADS", v.probe() == 1)
                .flag("PROBE_ALU", v.probe() == 2 && !*int_dot)
        }
        Choice::Tiled(TiledPlan {
            wg_m,
            wg_n,
            thread_m,
            thread_n,
            tk,
            pad,
        }) => operands("mul_mat_tiled.wgsl")
            .define("WG_M", format!("{wg_m}u"))
            .define("WG_N", format!("{wg_n}u"))
            .define("THREAD_M", format!("{thread_m}u"))
            .define("THREAD_N", format!("{thread_n}u"))
            .define("TK", format!("{tk}u"))
            .define("PAD", format!("{pad}u")),
        Choice::SubgroupMatrix(s) => {
            let SubgroupMatrixPlan {
                config,
                count_m,
                count_n,
                frag_m,
                frag_n,
                tk,
                pad,
                stages,
                prefetch,
                deep_prefetch,
                raw_units,
                wg_size,
                scratch_sgs,
                ..
            } = s;
            operands("mul_mat_subgroup_matrix.wgsl")
                .define("SG_M", format!("{}u", config.m))
                .define("SG_N", format!("{}u", config.n))
                .define("SG_K", format!("{}u", config.k))
                .define("SG_COUNT_M", format!("{count_m}u"))
                .define("SG_COUNT_N", format!("{count_n}u"))
                .define("FRAG_M", format!("{frag_m}u"))
                .define("FRAG_N", format!("{frag_n}u"))
                .define("TK", format!("{tk}u"))
                .define("PAD", format!("{pad}u"))
                .define("STAGES", stages)
                .flag("PREFETCH", *prefetch)
                .flag("DEEP_PREFETCH", *deep_prefetch)
                .flag("PROBE_STAGING", s.probe() == 1)
                .flag("PROBE_MMA", s.probe() == 2)
                .flag("RAW_UNITS", *raw_units)
                .define("WG_SIZE", format!("{wg_size}u"))
                .define("SCRATCH_SGS", format!("{scratch_sgs}u"))
                .flag("A_VEC4", plan.a_vec4)
                .flag("ACC_F32", config.f32_result)
                .flag("DIRECT_STORE", plan.direct_store)
        }
        Choice::Simple(_) => unreachable!("handled above"),
    };
    let quantize_b = plan.quantize_b.map(|q| {
        let prologue = q.prologue.then_some(problem.b_prologue);
        with_prologue(operands("mul_mat_quantize_b.wgsl"), prologue)
            .define("WG_SIZE", format!("{}u", q.wg_size))
            .flag("B_Q8K", q.slots)
            .flag(
                "USE_SUBGROUPS",
                matches!(prologue, Some(BPrologue::RmsNorm { reduce, .. }) if reduce.subgroups),
            )
    });
    let copy = |file: &'static str| {
        operands_of(problem, mm::b_vec4(problem), file)
            .flag("DST_U32", true)
            .define("WG_SIZE", format!("{COPY_WG}u"))
    };
    MulMatKernels {
        kernel,
        quantize_b,
        dequantize_a: plan.dequantize_a.map(|_| copy("mul_mat_dequantize_a.wgsl")),
        convert_b: plan.convert_b.map(|_| copy("mul_mat_convert_b.wgsl")),
    }
}

/// `variant` applying `prologue` to b as it quantizes it (mul_mat_operands.wgsl's B_SWIGLU,
/// B_RMS_NORM and RMS_NORM's reduction); `None`: b as it is.
fn with_prologue(variant: ShaderVariant, prologue: Option<BPrologue>) -> ShaderVariant {
    match prologue {
        None | Some(BPrologue::None) => variant,
        Some(BPrologue::Swiglu) => variant.flag("B_SWIGLU", true),
        Some(BPrologue::RmsNorm { residual, reduce }) => variant
            .flag("B_RMS_NORM", true)
            .flag("B_NORM_RESIDUAL", residual)
            .define("NORM_GROUP", format!("{}u", reduce.group))
            .flag("NORM_VEC4", reduce.vec4)
            .flag("NORM_SUBGROUPS", reduce.subgroups),
    }
}

/// The kernels one FLASH_ATTN_EXT plan runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlashAttnKernels {
    pub kernel: ShaderVariant,
    /// The pass that combines the KV splits (`n_split > 1`).
    pub reduce: Option<ShaderVariant>,
}

/// The variants of a FLASH_ATTN_EXT plan.
pub fn flash_attn(plan: &fa::FlashAttnPlan) -> FlashAttnKernels {
    let shape = &plan.problem;
    let fast = match &plan.choice {
        fa::Choice::Simple(_) => {
            let kernel = ShaderVariant::new("flash_attn_simple.wgsl")
                .define("WG_SIZE", format!("{FA_SIMPLE_WG}u"))
                .define("MAX_DV_PER_THREAD", format!("{SIMPLE_DV_PER_THREAD}u"));
            return FlashAttnKernels { kernel, reduce: None };
        }
        fa::Choice::Tile(t) => tile_variant(t),
        fa::Choice::Mma(m) => mma_variant(m),
        fa::Choice::Vec(v) => vec_variant(v, shape),
    };
    let kernel = fast
        .define("K_TYPE", shape.k_type.gguf_id())
        .define("V_TYPE", shape.v_type.gguf_id())
        .define("K_VEC", u32::from(plan.k_vec))
        .define("V_VEC", u32::from(plan.v_vec))
        .define("HAS_MASK", u32::from(shape.has_mask))
        .define("MASK_SKIP", u32::from(plan.mask_skip))
        .define("HSK", shape.hsk)
        .define("HSV", shape.hsv);
    let reduce = (plan.n_split > 1).then(|| ShaderVariant::new("flash_attn_reduce.wgsl").define("HSV", shape.hsv));
    FlashAttnKernels { kernel, reduce }
}

fn flag(b: bool) -> u32 {
    u32::from(b)
}

fn tile_variant(t: &TilePlan) -> ShaderVariant {
    ShaderVariant::new("flash_attn_tile.wgsl")
        .define("NT", t.threads)
        .define("ROWS", t.rows)
        .define("KV_TILE", t.kv_tile)
        .define("DS", t.ds)
        .define("GQ", t.gq)
        .define("RQ", t.rq)
        .define("LV", t.lv)
        .define("CH", t.ch)
        .define("RO", t.ro)
        .define("RGN", t.rgn)
        .define("KS", t.ks)
        .define("TPR", t.tpr)
        .define("KV_ALIAS", flag(t.kv_alias))
        .define("PREFETCH", flag(t.prefetch))
        .define("KSTR", t.kstr)
        .define("VSTR", t.vstr)
        .define("QW", t.qw)
}

/// Vec probes 1 and 2 replace the scoring; probe 3 runs the kernel as it is.
fn vec_probe_replaces_scoring(v: &VecPlan) -> bool {
    #[cfg(feature = "probes")]
    if matches!(v.probe, 1 | 2) {
        return true;
    }
    let _ = v;
    false
}

fn vec_variant(v: &VecPlan, shape: &fa::Problem) -> ShaderVariant {
    let variant = ShaderVariant::new("flash_attn_vec.wgsl")
        .define("NT", v.threads)
        .define("ROWS", v.rows)
        .define("KV_TILE", v.kv_tile())
        .define("VEC_LK", v.lanes)
        .define("VEC_SGT", v.team)
        .define("VEC_B", v.keys)
        .define("VEC_CK", v.ck)
        .define("VEC_CV", v.cv)
        .define("VEC_ONE_Q", flag(shape.n_q == 1))
        .define("VEC_QINT", flag(v.qint && !vec_probe_replaces_scoring(v)));
    #[cfg(feature = "probes")]
    let variant = variant.define("VEC_PROBE", v.probe);
    variant
}

fn mma_variant(m: &MmaPlan) -> ShaderVariant {
    let variant = ShaderVariant::new("flash_attn_mma.wgsl")
        .define("SG_M", m.m)
        .define("SG_N", m.n)
        .define("SG_K", m.k)
        .define("NSG", m.subgroups)
        .define("RB", m.rb)
        .define("CG", m.cg)
        .define("NT", m.threads)
        .define("ROWS", m.rows)
        .define("KV_TILE", m.kv_tile)
        .define("HSKP", m.hskp)
        .define("HSVP", m.hsvp)
        .define("QSTR", m.qstr)
        .define("KSTR", m.kstr)
        .define("VSTR", m.vstr)
        .define("PSTR", m.pstr)
        .define("SSTR", m.sstr)
        .define("Q_REGS", flag(m.q_regs))
        .define("KV_ALIAS", flag(m.kv_alias))
        .define("PREFETCH", flag(m.prefetch))
        .define("Q_OFF", m.q_off)
        .define("K_OFF", m.k_off)
        .define("V_OFF", m.v_off)
        .define("P_OFF", m.p_off)
        .define("SMEM", m.smem)
        .define("SF", m.sf)
        .define("SB", m.sb)
        .define("TPR", m.tpr);
    #[cfg(feature = "probes")]
    let variant = variant.define("PROBE", m.probe);
    variant
}

/// The dequantize kernel's variant for a source type.
pub fn dequantize_variant(ty: GgmlType) -> ShaderVariant {
    ShaderVariant::new("dequantize.wgsl")
        .define("SRC_TYPE", ty.gguf_id())
        .define("WG_SIZE", format!("{DEQUANTIZE_WG_SIZE}u"))
}

/// The kernel of a GET_ROWS, SET_ROWS or CPY plan.
pub fn rows(plan: &RowsPlan) -> ShaderVariant {
    let p = &plan.problem;
    if plan.tiled {
        return ShaderVariant::new("transpose.wgsl")
            .define("ELEM_BYTES", p.dst_type.type_size())
            .define("WG_SIZE", format!("{}u", plan.wg_size));
    }
    ShaderVariant::new("rows.wgsl")
        .define("MODE", p.op.mode())
        .define("SRC_TYPE", p.src_type.gguf_id())
        .define("DST_TYPE", p.dst_type.gguf_id())
        .define("IDS_I64", flag(p.ids_i64))
        .define("UNIT", format!("{}u", plan.unit))
        .define("RAW", flag(plan.raw))
        .define("DST_ATOMIC", flag(plan.atomic))
        .define("WG_SIZE", format!("{}u", plan.wg_size))
}

/// The kernel of a ROPE plan.
pub fn rope(plan: &RopePlan) -> ShaderVariant {
    let p = &plan.problem;
    ShaderVariant::new("rope.wgsl")
        .define("MODE", p.mode.ggml())
        .define("SRC_TYPE", p.src_type.gguf_id())
        .define("DST_TYPE", p.dst_type.gguf_id())
        .define("FF", flag(p.freq_factors))
        .define("INPLACE", flag(p.in_place))
        .define("DST_ATOMIC", flag(plan.atomic))
        .define("WORDS", flag(plan.words))
        .define("SRC_WORDS", flag(plan.src_words))
        .define("ROWS_OUT", flag(p.rows_out.is_some()))
        .define("CACHE_F16", flag(p.rows_out == Some(GgmlType::F16)))
        .define("IDS_I64", flag(p.ids_i64))
        .define("SHARED", flag(plan.shared))
        .define("SHARED_PAIRS", format!("{}u", rope_plan::SHARED_PAIRS))
        .define("WG_SIZE", format!("{}u", plan.wg_size))
}

/// A row-reducing kernel's variant of `file` for `rows`, its storage bindings numbered in order
/// (`bindings` names them; the parameter block follows).
fn row_variant(file: &'static str, rows: &RowPlan, bindings: &[&str]) -> ShaderVariant {
    let mut v = ShaderVariant::new(file)
        .define("WG_SIZE", format!("{}u", rows.wg_size))
        .define("GROUP_SIZE", format!("{}u", rows.group))
        .flag("VEC4", rows.vec4)
        .flag("USE_SUBGROUPS", rows.subgroups);
    for (i, name) in bindings.iter().enumerate() {
        v = v.define(name, i);
    }
    v.define("PARAMS_BINDING", bindings.len())
}

/// The storage bindings of a kernel that may run in place (x left out) and take optional
/// inputs: x, the present inputs, then dst.
fn bindings<'a>(in_place: bool, inputs: &[(&'a str, bool)]) -> Vec<&'a str> {
    let mut out = Vec::new();
    if !in_place {
        out.push("X_BINDING");
    }
    out.extend(inputs.iter().filter(|(_, on)| *on).map(|(name, _)| *name));
    out.push("DST_BINDING");
    out
}

/// The kernel of an RMS_NORM plan (with its fused weight and bias).
pub fn rms_norm(plan: &NormPlan) -> ShaderVariant {
    let mut b = bindings(
        plan.in_place,
        &[
            ("R_BINDING", plan.residual),
            ("W_BINDING", plan.weight),
            ("B_BINDING", plan.bias),
        ],
    );
    if plan.residual {
        b.push("SUM_BINDING");
    }
    row_variant("rms_norm.wgsl", &plan.rows, &b)
        .flag("INPLACE", plan.in_place)
        .flag("HAS_W", plan.weight)
        .flag("HAS_B", plan.bias)
        .flag("HAS_R", plan.residual)
}

/// The kernel of a SOFT_MAX plan.
pub fn soft_max(plan: &SoftMaxPlan) -> ShaderVariant {
    let b = bindings(
        plan.in_place,
        &[("MASK_BINDING", plan.mask.is_some()), ("SINKS_BINDING", plan.sinks)],
    );
    row_variant("soft_max.wgsl", &plan.rows, &b)
        .flag("INPLACE", plan.in_place)
        .flag("HAS_MASK", plan.mask.is_some())
        .flag("MASK_F16", plan.mask == Some(GgmlType::F16))
        .flag("HAS_SINKS", plan.sinks)
        .flag("CACHED", plan.cached)
        .define("CACHED_UNITS", format!("{}u", crate::ops::soft_max::plan::CACHED_UNITS))
}

/// The kernel of an ARGMAX plan.
pub fn argmax(plan: &ArgmaxPlan) -> ShaderVariant {
    row_variant("argmax.wgsl", &plan.rows, &[])
}

/// The kernel of a SCALE plan.
pub fn scale(plan: &ScalePlan) -> ShaderVariant {
    let b = bindings(plan.in_place, &[]);
    let mut v = ShaderVariant::new("scale.wgsl")
        .define("WG_SIZE", format!("{}u", plan.wg_size))
        .flag("FLAT", plan.flat)
        .flag("VEC4", plan.vec4)
        .flag("INPLACE", plan.in_place);
    for (i, name) in b.iter().enumerate() {
        v = v.define(name, i);
    }
    v.define("PARAMS_BINDING", b.len())
}

/// The binary kernel's variant for a plan.
pub fn binary_variant(plan: &crate::ops::binary::plan::BinaryPlan) -> ShaderVariant {
    let p = &plan.problem;
    let f16 = |t: GgmlType| u32::from(t == GgmlType::F16);
    ShaderVariant::new("binary.wgsl")
        .define("OP", p.op as u32)
        .define("A_F16", f16(p.a_type))
        .define("B_F16", f16(p.b_type))
        .define("DST_F16", f16(p.dst_type))
        .define("VEC", plan.width)
        .define("IN_PLACE", u32::from(p.in_place))
        .define("WG_SIZE", format!("{}u", crate::ops::binary::plan::WG_SIZE))
}

/// The GLU kernel's variant for a plan (its op's number is ggml's `enum ggml_glu_op` order).
pub fn glu_variant(plan: &crate::ops::glu::plan::GluPlan) -> ShaderVariant {
    let p = &plan.problem;
    let op = crate::reference::GluOp::ALL
        .iter()
        .position(|&o| o == p.op)
        .unwrap_or_default();
    ShaderVariant::new("glu.wgsl")
        .define("OP", op)
        .define("F16", u32::from(p.ty == GgmlType::F16))
        .define("WG_SIZE", format!("{}u", crate::ops::glu::plan::WG_SIZE))
}

/// The kernel that copies staged host bytes into a view ([`crate::GpuContext::write`]).
pub fn write_variant() -> ShaderVariant {
    ShaderVariant::new("write.wgsl").define("WG_SIZE", format!("{}u", crate::exec::WRITE_WG_SIZE))
}

/// The key of a kernel of one's own ([`crate::GpuContext::compile_kernel`]): it names the
/// kernel in caches and errors; its WGSL is the caller's, never rendered from an embedded file.
pub fn custom_kernel_key(name: &str) -> ShaderVariant {
    ShaderVariant::new("custom").define("NAME", name)
}

/// The op a variant serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    MulMat,
    FlashAttnExt,
    Dequantize,
    /// GET_ROWS, SET_ROWS and CPY (one kernel).
    Rows,
    Rope,
    RmsNorm,
    SoftMax,
    Argmax,
    Scale,
    Binary,
    Glu,
    Write,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::MulMat => "MUL_MAT",
            Op::FlashAttnExt => "FLASH_ATTN_EXT",
            Op::Dequantize => "DEQUANTIZE",
            Op::Rows => "GET_ROWS/SET_ROWS/CPY",
            Op::Rope => "ROPE",
            Op::RmsNorm => "RMS_NORM",
            Op::SoftMax => "SOFT_MAX",
            Op::Argmax => "ARGMAX",
            Op::Scale => "SCALE",
            Op::Binary => "ADD/SUB/MUL/DIV",
            Op::Glu => "GLU",
            Op::Write => "WRITE",
        })
    }
}

/// The name of a FLASH_ATTN_EXT kernel (exhaustive, as above).
pub fn flash_attn_path(choice: &fa::Choice) -> &'static str {
    match choice {
        fa::Choice::Simple(_) => "simple",
        fa::Choice::Tile(_) => "tile",
        fa::Choice::Mma(_) => "mma",
        fa::Choice::Vec(_) => "vec",
    }
}

/// One variant of [`enumerate`], with the first plan that produced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enumerated {
    pub op: Op,
    /// The path or pass (`vec`, `tiled`, `subgroup_matrix`, `quantize_b`, `mma`, `reduce`, …).
    pub path: &'static str,
    /// The plan's problem, in words.
    pub example: String,
}

/// The MUL_MAT knob sets [`enumerate`] plans with, on top of the device's profile: none, then
/// the sets that switch on the kernels' optional forms (the integer mat-vec where a profile has
/// it off, its prefetch everywhere, f16 accumulation, the mat-vecs' 16-byte reads of a, iq4_nl's
/// and iq4_xs's float mat-vec, the FP4 formats' integer mat-vec with the 4-bit levels' table,
/// the f16 copies with raw units and deep prefetch).
pub const MUL_MAT_KNOBS: &[&str] = &[
    "",
    "vec_int_max_n=8,vec_int_prefetch=all",
    "sg_acc_f16=1",
    "vec_float_vec4=1,vec_int_a_vec4=all,vec_int_iq4nl=0,vec_int_iq4xs=0",
    "vec_int_max_n=8,vec_int_fp4=1,vec_int_lut=1",
    "sg_raw_units=1,sg_a_f16_min_n=9,sg_b_f16_min_n=9,sg_prefetch=2,sg_stages=1",
];

/// The FLASH_ATTN_EXT knob sets: the defaults, then each kernel forced.
pub const FLASH_ATTN_KNOBS: &[&str] = &["", "kernel=tile", "kernel=vec", "kernel=mma", "kernel=simple"];

/// Every variant the planners produce on `device` over the problem grid below (all types the
/// ops take, sizes from 1 up, every alignment the planners distinguish), by variant.
pub fn enumerate(device: &DeviceFacts) -> BTreeMap<ShaderVariant, Enumerated> {
    let mut out = BTreeMap::new();
    let mut add = |variant: ShaderVariant, op: Op, path: &'static str, example: &dyn Fn() -> String| {
        out.entry(variant).or_insert_with(|| Enumerated {
            op,
            path,
            example: example(),
        });
    };
    let types: Vec<GgmlType> = GgmlType::ALL.iter().copied().filter(|&t| supports(t)).collect();

    for &ty in &types {
        add(dequantize_variant(ty), Op::Dequantize, "dequantize", &|| ty.to_string());
    }

    add_rows_and_rope(&mut add, device);
    add_row_ops(&mut add, device);
    add_elementwise(device, &mut add);

    for knobs in MUL_MAT_KNOBS {
        let mut tuning = crate::tuning::profiles::mul_mat(device.class);
        tuning.apply(knobs).expect("valid knob set");
        for &a_type in &types {
            let float = matches!(a_type, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16);
            let ks: &[u64] = if float { &[7, 130, 256, 4096] } else { &[256, 4096] };
            for b_type in [GgmlType::F32, GgmlType::F16] {
                for &k in ks {
                    for m in [1u64, 64, 4096] {
                        for n in [1u64, 2, 3, 4, 5, 8, 9, 16, 64, 512] {
                            for a_align in [1u32, 2, 4, 16] {
                                for b_align in [2u32, 4, 16] {
                                    for b_contiguous in [true, false] {
                                        let problem = Problem {
                                            a_type,
                                            b_type,
                                            m,
                                            n,
                                            k,
                                            batches: 1,
                                            a_batches: 1,
                                            a_align,
                                            b_align,
                                            b_contiguous,
                                            dst_bytes: m * n * 4,
                                            b_prologue: BPrologue::None,
                                            dst_epilogue: DstEpilogue::None,
                                        };
                                        add_mul_mat(&mut add, &problem, device, &tuning, knobs);
                                        // b with the ops before it, where the plan applies them.
                                        for b_prologue in prologues(k, n, device) {
                                            let fused = Problem { b_prologue, ..problem };
                                            if !mm::plan(&fused, device, &tuning).applies_prologue() {
                                                continue;
                                            }
                                            add_mul_mat(&mut add, &fused, device, &tuning, knobs);
                                            // A q/k/v projection's ROPE and KV write after the norm.
                                            if !matches!(b_prologue, BPrologue::RmsNorm { .. }) {
                                                continue;
                                            }
                                            for (freq_factors, cache_f16) in
                                                [(false, false), (false, true), (true, false), (true, true)]
                                            {
                                                let dst_epilogue = DstEpilogue::RopeSetRows {
                                                    freq_factors,
                                                    cache_f16,
                                                };
                                                let qkv = Problem { dst_epilogue, ..fused };
                                                if mm::plan(&qkv, device, &tuning).applies_epilogue() {
                                                    add_mul_mat(&mut add, &qkv, device, &tuning, knobs);
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                // Past 32-bit indexing: the simple kernel.
                let huge = Problem {
                    a_type,
                    b_type,
                    m: 1 << 16,
                    n: 1 << 16,
                    k: 256,
                    batches: 1,
                    a_batches: 1,
                    a_align: 16,
                    b_align: 16,
                    b_contiguous: true,
                    dst_bytes: 1 << 34,
                    b_prologue: BPrologue::None,
                    dst_epilogue: DstEpilogue::None,
                };
                add_mul_mat(&mut add, &huge, device, &tuning, knobs);
            }
        }
    }

    let placements = [
        Placement::PLAIN,
        Placement {
            aligned: true,
            k_vec: true,
            v_vec: true,
        },
        Placement {
            aligned: true,
            k_vec: true,
            v_vec: false,
        },
        Placement {
            aligned: true,
            k_vec: false,
            v_vec: true,
        },
        Placement {
            aligned: false,
            k_vec: false,
            v_vec: false,
        },
    ];
    let heads = [
        (40, 40),
        (64, 64),
        (80, 80),
        (96, 96),
        (112, 112),
        (128, 128),
        (192, 128),
        (256, 256),
        (576, 512),
    ];
    for knobs in FLASH_ATTN_KNOBS {
        let mut tuning = crate::tuning::profiles::flash_attn(device.class);
        tuning.apply(knobs).expect("valid knob set");
        for &ty in &types {
            // Vector reads are for float K and V only (`vec_layout`).
            let float = matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16);
            for &(hsk, hsv) in &heads {
                for n_q in [1usize, 2, 8, 32, 512] {
                    for (n_heads, kv_heads) in [(8usize, 8usize), (32, 8)] {
                        for kv in [256usize, 16384] {
                            for has_mask in [false, true] {
                                for placement in placements {
                                    if !float && (placement.k_vec || placement.v_vec) {
                                        continue;
                                    }
                                    let shape = fa::Problem {
                                        hsk,
                                        hsv,
                                        n_q,
                                        n_heads,
                                        kv_heads,
                                        kv,
                                        n_seq: 1,
                                        k_type: ty,
                                        v_type: ty,
                                        has_mask,
                                    };
                                    let plan = fa::plan_placed(&shape, device, &tuning, placement);
                                    let kernels = flash_attn(&plan);
                                    let example = || format!("{shape:?} {placement:?} knobs [{knobs}]");
                                    let path = flash_attn_path(&plan.choice);
                                    add(kernels.kernel, Op::FlashAttnExt, path, &example);
                                    if let Some(r) = kernels.reduce {
                                        add(r, Op::FlashAttnExt, "reduce", &example);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The GET_ROWS, SET_ROWS, CPY and ROPE variants: every type pair the checks admit, every unit
/// and store form, every ROPE mode with and without factors, in place or not.
fn add_rows_and_rope(add: &mut Add<'_>, device: &DeviceFacts) {
    use crate::ops::rows::plan::{reads, writes};
    let readable: Vec<GgmlType> = GgmlType::ALL.iter().copied().filter(|&t| reads(t)).collect();
    let writable: Vec<GgmlType> = GgmlType::ALL.iter().copied().filter(|&t| writes(t)).collect();
    let mut rows = |op: RowsOp, src: GgmlType, dst: GgmlType, ids_i64: bool| {
        for (ne0, packed, aligned) in [
            (256u64, true, true),
            (256, true, false),
            (5, true, true),
            (6, false, true),
        ] {
            let problem = rows_plan::Problem {
                op,
                src_type: src,
                dst_type: dst,
                ids_i64,
                elements: ne0 * 8,
                ne0,
                src_ne0: ne0,
                src_packed: packed,
                dst_packed: packed,
                dst_rows_aligned: aligned,
                dst_nb0: if packed {
                    dst.type_size() as u64
                } else {
                    2 * dst.type_size() as u64
                },
                transposed_tiles: None,
            };
            if problem.dst_type.is_quantized() && !problem.ne0.is_multiple_of(dst.block_size() as u64) {
                continue;
            }
            if problem.src_type.is_quantized() && !problem.ne0.is_multiple_of(src.block_size() as u64) {
                continue;
            }
            let plan = rows_plan::plan(&problem, device);
            let path = if plan.atomic { "rows_merged" } else { "rows_words" };
            add(rows(&plan), Op::Rows, path, &|| format!("{problem:?}"));
        }
    };
    for &src in &readable {
        let dst = if src == GgmlType::I32 {
            GgmlType::I32
        } else {
            GgmlType::F32
        };
        rows(RowsOp::GetRows, src, dst, false);
        rows(RowsOp::Cpy, src, src, false);
        if src.is_quantized() {
            rows(RowsOp::Cpy, src, GgmlType::F32, false);
        }
    }
    for &dst in &writable {
        for src in [GgmlType::F32, GgmlType::F16] {
            for ids_i64 in [false, true] {
                rows(RowsOp::SetRows, src, dst, ids_i64);
            }
        }
        for src in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
            rows(RowsOp::Cpy, src, dst, false);
        }
    }
    rows(RowsOp::Cpy, GgmlType::F32, GgmlType::I32, false);
    rows(RowsOp::Cpy, GgmlType::I32, GgmlType::F32, false);
    // The transposing copies' tiles, of each element size.
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
        let problem = rows_plan::Problem {
            op: RowsOp::Cpy,
            src_type: ty,
            dst_type: ty,
            ids_i64: false,
            elements: 64 * 64,
            ne0: 64,
            src_ne0: 64,
            src_packed: false,
            dst_packed: true,
            dst_rows_aligned: true,
            dst_nb0: ty.type_size() as u64,
            transposed_tiles: Some(4),
        };
        let plan = rows_plan::plan(&problem, device);
        add(crate::variants::rows(&plan), Op::Rows, "rows_tiles", &|| {
            format!("{problem:?}")
        });
    }
    for mode in [
        RopeMode::Normal,
        RopeMode::Neox,
        RopeMode::Mrope,
        RopeMode::Vision,
        RopeMode::Imrope,
    ] {
        for (src_type, dst_type) in [
            (GgmlType::F32, GgmlType::F32),
            (GgmlType::F16, GgmlType::F16),
            (GgmlType::F32, GgmlType::F16),
            (GgmlType::F16, GgmlType::F32),
        ] {
            for freq_factors in [false, true] {
                for in_place in [false, true] {
                    if in_place && src_type != dst_type {
                        continue;
                    }
                    for (dst_words, src_words) in [(false, false), (true, false), (true, true)] {
                        if dst_words && dst_type != GgmlType::F16 || src_words && src_type != GgmlType::F16 {
                            continue;
                        }
                        for heads in [1, 8] {
                            let problem = rope_plan::Problem {
                                src_type,
                                dst_type,
                                mode,
                                freq_factors,
                                in_place,
                                ne0: 128,
                                rows: 64,
                                heads,
                                pairs: 32,
                                dst_words,
                                src_words,
                                rows_out: None,
                                ids_i64: false,
                            };
                            let plan = rope_plan::plan(&problem, device);
                            add(rope(&plan), Op::Rope, "rope", &|| format!("{problem:?}"));
                            // The fused KV-cache write: f32 in place, a workgroup a token.
                            if in_place && src_type == GgmlType::F32 && plan.shared {
                                for cache in [GgmlType::F32, GgmlType::F16] {
                                    for ids_i64 in [false, true] {
                                        let problem = rope_plan::Problem {
                                            rows_out: Some(cache),
                                            ids_i64,
                                            ..problem
                                        };
                                        let plan = rope_plan::plan(&problem, device);
                                        add(rope(&plan), Op::Rope, "rope_set_rows", &|| format!("{problem:?}"));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The variants of the element-wise ops and the write kernel: every op, type combination, form
/// and vector width.
fn add_elementwise(device: &DeviceFacts, add: &mut Add<'_>) {
    // The plans' own modules (leaves), not the ops', whose encoders use these variants.
    use crate::ops::binary::plan as binary;
    use crate::ops::glu::plan as glu;
    use crate::reference::{BinaryOp, GluOp};
    let floats = [GgmlType::F32, GgmlType::F16];
    for op in BinaryOp::ALL {
        for a_type in floats {
            for b_type in floats {
                for in_place in [false, true] {
                    for vec4_layout in [false, true] {
                        let problem = binary::Problem {
                            op,
                            a_type,
                            b_type,
                            dst_type: a_type,
                            ne: [4096, 512, 1, 1],
                            b_ne: [4096, 1, 1, 1],
                            in_place,
                            vec4_layout,
                        };
                        if let Ok(plan) = binary::plan(&problem, device) {
                            add(binary_variant(&plan), Op::Binary, "binary", &|| plan.to_string());
                        }
                    }
                }
            }
        }
    }
    for op in GluOp::ALL {
        for ty in floats {
            let problem = glu::Problem {
                op,
                ty,
                dst_ne: [64, 4, 1, 1],
                split: false,
                swapped: false,
            };
            if let Ok(plan) = glu::plan(&problem, device) {
                add(glu_variant(&plan), Op::Glu, "glu", &|| plan.to_string());
            }
        }
    }
    add(write_variant(), Op::Write, "write", &|| "a strided view".into());
}

type Add<'a> = dyn FnMut(ShaderVariant, Op, &'static str, &dyn Fn() -> String) + 'a;

/// The RMS_NORM, SOFT_MAX, ARGMAX and SCALE variants: row lengths from 1 to 200000 over few and
/// many rows, vectors or not, every optional operand and in place or not.
fn add_row_ops(add: &mut Add<'_>, device: &DeviceFacts) {
    for len in [1usize, 4, 16, 64, 130, 1024, 4096, 16384, 200_000] {
        for rows in [1usize, 8, 1024] {
            for vec4 in [false, true] {
                let r = row_plan::plan(len, rows, vec4, device);
                let path = if r.subgroups { "subgroup" } else { "workgroup" };
                let example = || format!("{r}");
                // The residual form never runs in place.
                for (in_place, residual) in [(false, false), (true, false), (false, true)] {
                    for (weight, bias) in [(false, false), (true, false), (true, true), (false, true)] {
                        let plan = NormPlan {
                            rows: r,
                            weight,
                            bias,
                            residual,
                            in_place,
                        };
                        add(rms_norm(&plan), Op::RmsNorm, path, &example);
                    }
                    for mask in [None, Some(GgmlType::F32), Some(GgmlType::F16)] {
                        for (sinks, cached) in [(false, false), (true, false), (false, true), (true, true)] {
                            let plan = SoftMaxPlan {
                                rows: r,
                                mask,
                                sinks,
                                in_place,
                                cached,
                            };
                            add(soft_max(&plan), Op::SoftMax, path, &example);
                        }
                    }
                }
                add(argmax(&ArgmaxPlan { rows: r }), Op::Argmax, path, &example);
            }
        }
    }
    for (flat, vec4) in [(false, false), (true, false), (true, true)] {
        for in_place in [false, true] {
            let plan = crate::ops::scale::plan::plan(4096, flat, vec4, in_place);
            let path = if plan.vec4 {
                "vec4"
            } else if flat {
                "flat"
            } else {
                "strided"
            };
            add(scale(&plan), Op::Scale, path, &|| plan.to_string());
        }
    }
}

/// The ops a MUL_MAT of `k` and `n` may apply to b: the SWIGLU, and the RMS_NORM with and
/// without the residual in each of the reductions RMS_NORM's own plan takes on `device`.
fn prologues(k: u64, n: u64, device: &DeviceFacts) -> Vec<BPrologue> {
    let mut out = vec![BPrologue::Swiglu];
    for vec4 in [false, true] {
        let rows = row_plan::plan(k as usize, n as usize, vec4, device);
        let reduce = mm::NormReduce {
            group: rows.group,
            vec4: rows.vec4,
            subgroups: rows.subgroups,
        };
        for residual in [false, true] {
            out.push(BPrologue::RmsNorm { residual, reduce });
        }
    }
    out
}

fn add_mul_mat(add: &mut Add<'_>, problem: &Problem, device: &DeviceFacts, tuning: &MulMatTuning, knobs: &str) {
    let plan = mm::plan(problem, device, tuning);
    let kernels = mul_mat(&plan);
    let example = || format!("{problem:?} knobs [{knobs}]");
    let path = plan.choice.name();
    add(kernels.kernel, Op::MulMat, path, &example);
    if let Some(q) = kernels.quantize_b {
        add(q, Op::MulMat, "quantize_b", &example);
    }
    if let Some(q) = kernels.dequantize_a {
        add(q, Op::MulMat, "dequantize_a", &example);
    }
    if let Some(q) = kernels.convert_b {
        add(q, Op::MulMat, "convert_b", &example);
    }
}

/// The subgroup-matrix configs Dawn's Metal backend reports on Apple GPUs (Apple7 family and
/// later; `PhysicalDeviceMTL.mm`): 8x8x8 with f32 components and results, and with f16 ones.
/// Metal multiplies only matrices of one element type (`simdgroup_multiply_accumulate`), so
/// there is no f16-to-f32 config.
pub const APPLE_MATRIX_CONFIGS: [SubgroupMatrixConfig; 2] = [
    SubgroupMatrixConfig {
        m: 8,
        n: 8,
        k: 8,
        component: ComponentType::F32,
        result: ComponentType::F32,
    },
    SubgroupMatrixConfig {
        m: 8,
        n: 8,
        k: 8,
        component: ComponentType::F16,
        result: ComponentType::F16,
    },
];

/// Devices [`enumerate`] serves the Metal check with: Apple GPUs (Apple7 family and later:
/// 32-wide SIMD groups, 32 KiB of threadgroup memory) with the subgroup-matrix config the
/// context would pick among [`APPLE_MATRIX_CONFIGS`] (the same functions as on a real adapter),
/// and without subgroup matrices (the feature off, or an older GPU).
pub fn apple_devices() -> Vec<(&'static str, DeviceFacts)> {
    let base = crate::facts::presets::without_subgroup_matrix(crate::facts::presets::apple());
    let picked =
        MatrixConfig::default_choice(&APPLE_MATRIX_CONFIGS).map(|c| MatrixConfig::of(c, &APPLE_MATRIX_CONFIGS));
    vec![
        (
            "apple-8x8x8",
            DeviceFacts {
                subgroup_matrix: picked,
                ..base
            },
        ),
        ("apple-no-subgroup-matrix", base),
    ]
}

/// The variants of every device of [`apple_devices`], merged (the first device that produces a
/// variant names it).
pub fn enumerate_apple() -> BTreeMap<ShaderVariant, (&'static str, Enumerated)> {
    let mut all = BTreeMap::new();
    for (name, device) in apple_devices() {
        for (variant, e) in enumerate(&device) {
            all.entry(variant).or_insert((name, e));
        }
    }
    all
}

// Keep `Force` in view: a new forced kernel must join FLASH_ATTN_KNOBS.
const _: fn(Force) = |f| match f {
    Force::Simple | Force::Tile | Force::Vec | Force::Mma => {}
};

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// One enumeration for all tests (it plans a few hundred thousand problems).
    fn apple() -> &'static BTreeMap<ShaderVariant, (&'static str, Enumerated)> {
        static ALL: std::sync::OnceLock<BTreeMap<ShaderVariant, (&'static str, Enumerated)>> =
            std::sync::OnceLock::new();
        ALL.get_or_init(enumerate_apple)
    }

    /// A discrete Vulkan GPU whose driver offers 16x16x16 f16 matrices with f16 and with f32
    /// results (as NVIDIA's does): the device of the paths Apple's facts never take.
    fn vulkan_gpu() -> &'static BTreeMap<ShaderVariant, Enumerated> {
        static ALL: std::sync::OnceLock<BTreeMap<ShaderVariant, Enumerated>> = std::sync::OnceLock::new();
        ALL.get_or_init(|| {
            let configs = [ComponentType::F16, ComponentType::F32].map(|result| SubgroupMatrixConfig {
                m: 16,
                n: 16,
                k: 16,
                component: ComponentType::F16,
                result,
            });
            let device = DeviceFacts {
                subgroup_min_size: 32,
                subgroup_max_size: 32,
                max_workgroup_storage: 49152,
                subgroup_matrix: MatrixConfig::default_choice(&configs).map(|c| MatrixConfig::of(c, &configs)),
                ..apple_devices()[0].1
            };
            enumerate(&device)
        })
    }

    /// Metal multiplies matrices of one element type only: no variant for Apple accumulates
    /// f16 matrices in f32, and every subgroup-matrix variant is 8x8x8.
    #[test]
    fn apple_variants_use_only_the_configs_metal_offers() {
        let facts = apple_devices()[0]
            .1
            .subgroup_matrix
            .expect("Apple GPUs report subgroup matrices");
        assert_eq!(
            (facts.m, facts.n, facts.k, facts.f16_result, facts.f32_result),
            (8, 8, 8, true, false)
        );
        let sg: Vec<&ShaderVariant> = apple()
            .keys()
            .filter(|v| v.file == "mul_mat_subgroup_matrix.wgsl")
            .collect();
        assert!(!sg.is_empty());
        assert!(
            sg.iter()
                .all(|v| !v.defines.contains_key("ACC_F32") && v.defines["SG_M"] == "8u" && v.defines["SG_K"] == "8u")
        );
        assert!(apple().keys().all(|v| v.file != "flash_attn_mma.wgsl"));
    }

    #[test]
    fn every_path_of_every_op_appears_for_apple_and_vulkan_devices() {
        let all = apple();
        let paths: BTreeSet<(Op, &str)> = all
            .values()
            .map(|(_, e)| (e.op, e.path))
            .chain(vulkan_gpu().values().map(|e| (e.op, e.path)))
            .collect();
        for want in [
            (Op::MulMat, "vec"),
            (Op::MulMat, "vec_int"),
            (Op::MulMat, "quantize_b"),
            (Op::MulMat, "dequantize_a"),
            (Op::MulMat, "convert_b"),
            (Op::MulMat, "tiled"),
            (Op::MulMat, "subgroup_matrix"),
            (Op::MulMat, "simple"),
            (Op::FlashAttnExt, "simple"),
            (Op::FlashAttnExt, "tile"),
            (Op::FlashAttnExt, "vec"),
            (Op::FlashAttnExt, "mma"),
            (Op::FlashAttnExt, "reduce"),
            (Op::Dequantize, "dequantize"),
            (Op::Rows, "rows_words"),
            (Op::Rows, "rows_merged"),
            (Op::Rows, "rows_tiles"),
            (Op::Rope, "rope"),
            (Op::RmsNorm, "subgroup"),
            (Op::RmsNorm, "workgroup"),
            (Op::SoftMax, "subgroup"),
            (Op::SoftMax, "workgroup"),
            (Op::Argmax, "subgroup"),
            (Op::Argmax, "workgroup"),
            (Op::Scale, "vec4"),
            (Op::Scale, "flat"),
            (Op::Scale, "strided"),
            (Op::Binary, "binary"),
            (Op::Glu, "glu"),
            (Op::Write, "write"),
        ] {
            assert!(paths.contains(&want), "{want:?} missing from {paths:?}");
        }
        // Both accumulations of the subgroup-matrix kernel where the driver offers both.
        let sg: Vec<&ShaderVariant> = vulkan_gpu()
            .keys()
            .filter(|v| v.file == "mul_mat_subgroup_matrix.wgsl")
            .collect();
        assert!(sg.iter().any(|v| v.defines.contains_key("ACC_F32")));
        assert!(sg.iter().any(|v| !v.defines.contains_key("ACC_F32")));
        // The ops fused into the mat-vec: the norm and SWIGLU in its workgroups and in its
        // quantize pass, the ROPE and KV write after it.
        for (file, define) in [
            ("mul_mat_vec.wgsl", "B_RMS_NORM"),
            ("mul_mat_vec.wgsl", "B_SWIGLU"),
            ("mul_mat_quantize_b.wgsl", "B_RMS_NORM"),
            ("mul_mat_quantize_b.wgsl", "B_SWIGLU"),
            ("mul_mat_vec.wgsl", "DST_ROPE"),
        ] {
            assert!(
                all.keys().any(|v| v.file == file && v.defines.contains_key(define)),
                "{file} with {define}"
            );
        }
        // The float mat-vec reading an f16 b as words (a knob set switches it on).
        assert!(apple().keys().any(|v| {
            v.file == "mul_mat_vec.wgsl" && v.defines.contains_key("B_F16") && v.defines.contains_key("B_VEC4")
        }));
    }

    #[test]
    fn every_variant_renders() {
        for (variant, (device, e)) in apple() {
            variant
                .render()
                .unwrap_or_else(|err| panic!("{variant} ({device}, {:?}): {err}", e.example));
        }
    }

    #[test]
    fn the_removed_subgroup_matrix_forms_are_recognised() {
        use crate::shader_lib::removed_subgroup_matrix_forms as removed;
        assert_eq!(removed("let l = subgroupMatrixLoad<Left>(&a, 0u, false, 8u);").len(), 1);
        assert_eq!(
            removed("let l = subgroupMatrixLoad<subgroup_matrix_left<f16, 8, 8>>(&a, 0u, true, 8u);").len(),
            1
        );
        assert_eq!(removed("subgroupMatrixStore(&d, 0u, acc, true, 8u);").len(), 1);
        assert!(
            removed("let l = subgroupMatrixLoad<subgroup_matrix_left<f16, 8, 8>, row_major>(&a, 0u, 8u);").is_empty()
        );
        assert!(removed("let r = subgroupMatrixLoad<Right, col_major>(&b, 0u, 8u);").is_empty());
        assert!(removed("subgroupMatrixStore<col_major>(&d, 0u, acc, 8u);").is_empty());
        assert!(removed("// subgroupMatrixStore(&d, 0u, acc, true, 8u);").is_empty());
        assert!(removed("the subgroupMatrixLoad/Store forms").is_empty());
    }

    /// No shader source and no variant the planners produce uses the removed forms.
    #[test]
    fn no_shader_uses_the_removed_subgroup_matrix_forms() {
        use crate::shader_lib::{SOURCE_NAMES, removed_subgroup_matrix_forms as removed, source};
        for name in SOURCE_NAMES {
            let hits = removed(source(name).unwrap());
            assert!(hits.is_empty(), "{name}: {hits:#?}");
        }
        for variant in apple().keys() {
            if variant.file.contains("subgroup_matrix") || variant.file.contains("mma") {
                let hits = removed(&variant.render().unwrap());
                assert!(hits.is_empty(), "{variant}: {hits:#?}");
            }
        }
    }

    /// The encoders make variants only through this module: `ShaderVariant::new` appears in no
    /// other source file of the crate (the preprocessor's own file and tests aside).
    #[test]
    fn no_variant_is_built_outside_this_module() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut stack = vec![src.clone()];
        let mut offenders = Vec::new();
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let rel = path.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
                if rel == "variants.rs" || rel == "shader_lib.rs" || path.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap_or("");
                if code.contains("ShaderVariant::new(") {
                    offenders.push(rel);
                }
            }
        }
        assert!(
            offenders.is_empty(),
            "variants built outside variants.rs: {offenders:?}"
        );
    }
}
