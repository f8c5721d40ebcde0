//! Each op's encoder does what its plan says: the dispatches it records (kernels, their
//! defines, workgroup counts) are checked against the plan the op returned, over every path the
//! planners take on this adapter, with and without subgroup matrices. A decision taken in an
//! encoder behind the plan's back fails here.

use ggml_dawn::exec::{Stream, grid_2d};
use ggml_dawn::ops::flash_attn::{self, FlashAttnOperands, FlashAttnParams};
use ggml_dawn::ops::mul_mat::{self, Choice, MatVecPlan, MulMatPlan, SubgroupMatrixPlan, TiledPlan};
use ggml_dawn::shader_lib::ShaderVariant;
use ggml_dawn::tuning::Overrides;
use ggml_dawn::{ContextOptions, DeviceTensor, GgmlType, GpuContext};

fn contexts() -> Vec<GpuContext> {
    [false, true]
        .into_iter()
        .map(|off| {
            GpuContext::new(ContextOptions {
                no_subgroup_matrix: off,
                ..ContextOptions::default()
            })
            .expect("an adapter")
        })
        .collect()
}

fn define<'a>(v: &'a ShaderVariant, name: &str) -> Option<&'a str> {
    v.defines.get(name).map(String::as_str)
}

fn flag(v: &ShaderVariant, name: &str) -> bool {
    define(v, name) == Some("1")
}

fn u(x: u32) -> String {
    format!("{x}u")
}

/// The recorded dispatches of one MUL_MAT against its plan.
fn check_mul_mat(plan: &MulMatPlan, dispatches: &[(ShaderVariant, [u32; 3])]) {
    let what = plan.to_string();
    let quantize = plan.quantize_b.map_or(0, |q| if q.twice { 2 } else { 1 });
    // The f16 copies (a's, then b's) come first, each reading the operands as they are.
    let mut copies = Vec::new();
    if let Some(q) = &plan.dequantize_a {
        assert!(plan.problem.a_type.is_quantized(), "{what}");
        copies.push(("mul_mat_dequantize_a.wgsl", q.grid));
    }
    if let Some(q) = &plan.convert_b {
        assert_eq!(plan.problem.b_type, GgmlType::F32, "{what}");
        copies.push(("mul_mat_convert_b.wgsl", q.grid));
    }
    let dequantize = copies.len();
    assert!(quantize == 0 || dequantize == 0, "{what}");
    assert_eq!(dispatches.len(), 1 + quantize + dequantize, "{what}: {dispatches:?}");
    for ((v, grid), (file, want)) in dispatches.iter().zip(&copies) {
        assert_eq!(v.file, *file, "{what}");
        assert_eq!(grid, want, "{what}");
        let a_type = plan.problem.a_type.gguf_id().to_string();
        assert_eq!(define(v, "A_TYPE"), Some(a_type.as_str()), "{what}");
        assert_eq!(flag(v, "B_F16"), plan.problem.b_type == GgmlType::F16, "{what}");
    }
    if let Some(q) = &plan.quantize_b {
        for (v, grid) in &dispatches[..quantize] {
            assert_eq!(v.file, "mul_mat_quantize_b.wgsl", "{what}");
            assert_eq!(*grid, q.grid, "{what}");
            assert_eq!(flag(v, "B_Q8K"), q.slots, "{what}");
        }
    }
    let (v, grid) = &dispatches[quantize + dequantize];
    // The main kernel reads a's f16 copy where the plan makes one.
    let kp = plan.kernel_problem();
    assert_eq!(
        define(v, "A_TYPE"),
        Some(kp.a_type.gguf_id().to_string().as_str()),
        "{what}: {v}"
    );
    assert_eq!(*grid, plan.grid, "{what}: {v}");
    let file = match &plan.choice {
        Choice::MatVec(_) => "mul_mat_vec.wgsl",
        Choice::Tiled(_) => "mul_mat_tiled.wgsl",
        Choice::SubgroupMatrix(_) => "mul_mat_subgroup_matrix.wgsl",
        Choice::Simple(_) => "mul_mat_simple.wgsl",
    };
    assert_eq!(v.file, file, "{what}");
    if !matches!(plan.choice, Choice::Simple(_)) {
        assert_eq!(flag(v, "B_VEC4"), plan.b_vec4, "{what}: {v}");
        assert_eq!(flag(v, "A_ALIGN4"), kp.a_align >= 4, "{what}: {v}");
        assert_eq!(flag(v, "B_CONTIG"), plan.problem.b_contiguous, "{what}: {v}");
    }
    match &plan.choice {
        Choice::MatVec(
            mv @ MatVecPlan {
                wg_size,
                rows,
                groups,
                cols,
                subgroups,
                int_dot,
                int_slots,
                prefetch,
                level_table,
                ..
            },
        ) => {
            let probe = &mv.probe();
            assert_eq!(define(v, "WG_SIZE"), Some(u(*wg_size).as_str()), "{what}: {v}");
            assert_eq!(define(v, "ROWS"), Some(u(*rows).as_str()), "{what}: {v}");
            assert_eq!(define(v, "GROUPS"), Some(u(*groups).as_str()), "{what}: {v}");
            assert_eq!(define(v, "N_COLS"), Some(u(*cols).as_str()), "{what}: {v}");
            assert_eq!(flag(v, "USE_SUBGROUPS"), *subgroups, "{what}: {v}");
            assert_eq!(flag(v, "B_Q8"), *int_dot, "{what}: {v}");
            assert_eq!(flag(v, "B_Q8K"), *int_slots, "{what}: {v}");
            assert_eq!(flag(v, "VEC_PREFETCH"), *prefetch, "{what}: {v}");
            assert_eq!(flag(v, "W_LUT"), *level_table, "{what}: {v}");
            assert_eq!(flag(v, "PROBE_LOADS"), *probe == 1, "{what}: {v}");
            assert_eq!(flag(v, "PROBE_ALU"), *probe == 2 && !*int_dot, "{what}: {v}");
            assert_eq!(plan.quantize_b.is_some(), *int_dot, "{what}");
        }
        Choice::Tiled(TiledPlan { wg_m, wg_n, tk, .. }) => {
            assert_eq!(define(v, "WG_M"), Some(u(*wg_m).as_str()), "{what}: {v}");
            assert_eq!(define(v, "WG_N"), Some(u(*wg_n).as_str()), "{what}: {v}");
            assert_eq!(define(v, "TK"), Some(u(*tk).as_str()), "{what}: {v}");
        }
        Choice::SubgroupMatrix(
            sg @ SubgroupMatrixPlan {
                config,
                count_m,
                count_n,
                tk,
                stages,
                prefetch,
                deep_prefetch,
                raw_units,
                wg_size,
                ..
            },
        ) => {
            let probe = &sg.probe();
            assert_eq!(define(v, "SG_M"), Some(u(config.m).as_str()), "{what}: {v}");
            assert_eq!(flag(v, "RAW_UNITS"), *raw_units, "{what}: {v}");
            assert_eq!(define(v, "STAGES"), Some(stages.to_string().as_str()), "{what}: {v}");
            assert_eq!(flag(v, "PREFETCH"), *prefetch, "{what}: {v}");
            assert_eq!(flag(v, "DEEP_PREFETCH"), *deep_prefetch, "{what}: {v}");
            assert_eq!(flag(v, "PROBE_STAGING"), *probe == 1, "{what}: {v}");
            assert_eq!(flag(v, "PROBE_MMA"), *probe == 2, "{what}: {v}");
            assert_eq!(define(v, "SG_COUNT_M"), Some(u(*count_m).as_str()), "{what}: {v}");
            assert_eq!(define(v, "SG_COUNT_N"), Some(u(*count_n).as_str()), "{what}: {v}");
            assert_eq!(define(v, "TK"), Some(u(*tk).as_str()), "{what}: {v}");
            assert_eq!(define(v, "WG_SIZE"), Some(u(*wg_size).as_str()), "{what}: {v}");
            assert_eq!(flag(v, "A_VEC4"), plan.a_vec4, "{what}: {v}");
            assert_eq!(flag(v, "ACC_F32"), config.f32_result, "{what}: {v}");
            assert_eq!(flag(v, "DIRECT_STORE"), plan.direct_store, "{what}: {v}");
        }
        Choice::Simple(_) => {
            assert!(!plan.a_vec4 && !plan.b_vec4 && !plan.direct_store && plan.quantize_b.is_none());
            assert!(plan.dequantize_a.is_none() && plan.convert_b.is_none());
        }
    }
}

#[test]
fn mul_mat_encoders_follow_their_plans() {
    let mut paths = std::collections::BTreeSet::new();
    for base in contexts() {
        // The defaults, and knobs that move problems onto the other kernels.
        let tunings = [
            Overrides::none(),
            Overrides::parse("vec_int_max_n=0,vec_words=all", "").unwrap(),
            Overrides::parse("vec_int_probe=2,sg_acc_f16=1", "").unwrap(),
            Overrides::parse("vec_float_vec4=1", "").unwrap(),
            Overrides::parse(
                "sg_raw_units=1,sg_a_f16_min_n=9,sg_b_f16_min_n=9,sg_stages=1,sg_prefetch=2",
                "",
            )
            .unwrap(),
        ];
        for tuning in tunings {
            let ctx = base.with_tuning(tuning).unwrap();
            for (ty, m, n, k, b_type) in [
                (GgmlType::Q4_0, 64, 1, 256, GgmlType::F32),
                (GgmlType::Q4_K, 48, 3, 512, GgmlType::F32),
                (GgmlType::Q6_K, 33, 8, 256, GgmlType::F16),
                (GgmlType::F16, 40, 24, 64, GgmlType::F32),
                (GgmlType::F32, 70, 70, 36, GgmlType::F32),
                (GgmlType::Q8_0, 16, 100, 96, GgmlType::F16),
                (GgmlType::IQ4_NL, 20, 2, 64, GgmlType::F32),
                (GgmlType::F16, 64, 5, 128, GgmlType::F32),
                (GgmlType::F16, 32, 8, 64, GgmlType::F16),
            ] {
                let a = ctx.zeros(ty, [k, m, 1, 1]).unwrap();
                let b = ctx.zeros(b_type, [k, n, 2, 1]).unwrap();
                let dst = ctx.empty(GgmlType::F32, [m, n, 2, 1]).unwrap();
                // Views at odd offsets and strides too (a narrowed, b permuted).
                let b_view = ctx.zeros(b_type, [k, 2, n, 1]).unwrap().permute([0, 2, 1, 3]).unwrap();
                for b in [&b, &b_view] {
                    let mut stream = ctx.stream().unwrap();
                    let plan = mul_mat::mul_mat(&ctx, &mut stream, &a, b, &dst).unwrap();
                    check_mul_mat(&plan, &stream.pending_dispatches());
                    paths.insert(plan.to_string().split(':').next().unwrap_or_default().to_owned());
                }
            }
        }
    }
    eprintln!("paths checked: {paths:?}");
    assert!(paths.len() >= 4, "{paths:?}");
}

/// The recorded dispatches of one FLASH_ATTN_EXT against its plan.
fn check_flash_attn(ctx: &GpuContext, plan: &flash_attn::FlashAttnPlan, dispatches: &[(ShaderVariant, [u32; 3])]) {
    let what = plan.to_string();
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension;
    if let flash_attn::Choice::Simple(_) = plan.choice {
        // K and V to f32, then the simple kernel.
        let files: Vec<&str> = dispatches.iter().map(|(v, _)| v.file).collect();
        assert_eq!(
            files,
            ["dequantize.wgsl", "dequantize.wgsl", "flash_attn_simple.wgsl"],
            "{what}"
        );
        return;
    }
    assert_eq!(
        dispatches.len(),
        1 + usize::from(plan.reduces()),
        "{what}: {dispatches:?}"
    );
    let (v, grid) = &dispatches[0];
    assert_eq!(*grid, grid_2d(plan.workgroups(&plan.problem) as u32, max), "{what}");
    assert_eq!(
        define(v, "K_VEC"),
        Some(if plan.k_vec { "1" } else { "0" }),
        "{what}: {v}"
    );
    assert_eq!(
        define(v, "V_VEC"),
        Some(if plan.v_vec { "1" } else { "0" }),
        "{what}: {v}"
    );
    assert_eq!(
        define(v, "MASK_SKIP"),
        Some(if plan.mask_skip { "1" } else { "0" }),
        "{what}: {v}"
    );
    let threads = match &plan.choice {
        flash_attn::Choice::Tile(t) => {
            assert_eq!(v.file, "flash_attn_tile.wgsl", "{what}");
            assert_eq!(
                define(v, "KV_TILE"),
                Some(t.kv_tile.to_string().as_str()),
                "{what}: {v}"
            );
            t.threads
        }
        flash_attn::Choice::Vec(t) => {
            assert_eq!(v.file, "flash_attn_vec.wgsl", "{what}");
            assert_eq!(define(v, "VEC_LK"), Some(t.lanes.to_string().as_str()), "{what}: {v}");
            assert_eq!(
                define(v, "VEC_PROBE"),
                Some(t.probe.to_string().as_str()),
                "{what}: {v}"
            );
            // The probes that replace the scoring (1, 2) leave the 8-bit dot products out.
            assert_eq!(flag(v, "VEC_QINT"), t.qint && !matches!(t.probe, 1 | 2), "{what}: {v}");
            t.threads
        }
        flash_attn::Choice::Mma(m) => {
            assert_eq!(v.file, "flash_attn_mma.wgsl", "{what}");
            assert_eq!(
                define(v, "KV_TILE"),
                Some(m.kv_tile.to_string().as_str()),
                "{what}: {v}"
            );
            assert_eq!(define(v, "PROBE"), Some(m.probe.to_string().as_str()), "{what}: {v}");
            m.threads
        }
        flash_attn::Choice::Simple(_) => unreachable!(),
    };
    assert_eq!(define(v, "NT"), Some(threads.to_string().as_str()), "{what}: {v}");
    assert_eq!(define(v, "ROWS"), Some(plan.rows.to_string().as_str()), "{what}: {v}");
    if plan.reduces() {
        assert_eq!(dispatches[1].0.file, "flash_attn_reduce.wgsl", "{what}");
    }
}

/// Records one masked FLASH_ATTN_EXT (scale 1/8, no ALiBi, no softcap, no sinks) on `stream`.
fn record_flash_attn(
    ctx: &GpuContext,
    stream: &mut Stream,
    q: &DeviceTensor,
    k: &DeviceTensor,
    v: &DeviceTensor,
    mask: &DeviceTensor,
    dst: &DeviceTensor,
) -> flash_attn::FlashAttnPlan {
    let ops = FlashAttnOperands {
        q,
        k,
        v,
        mask: Some(mask),
        sinks: None,
        dst,
    };
    let params = FlashAttnParams::scaled(0.125);
    flash_attn::flash_attn_ext(ctx, stream, &ops, params).unwrap()
}

#[test]
fn flash_attn_encoders_follow_their_plans() {
    let mut kernels = std::collections::BTreeSet::new();
    for base in contexts() {
        for knobs in [
            "",
            "kernel=tile,split=3",
            "kernel=vec,split=2",
            "kernel=mma",
            "kernel=simple",
        ] {
            let ctx = base.with_tuning(Overrides::parse("", knobs).unwrap()).unwrap();
            for (hsk, hsv, n_q, kv, ty) in [
                (64, 64, 1, 300, GgmlType::F16),
                (128, 128, 7, 256, GgmlType::Q8_0),
                (64, 64, 40, 100, GgmlType::F32),
                (40, 40, 3, 50, GgmlType::F16),
            ] {
                let (heads, kv_heads) = (4, 2);
                let q = ctx.zeros(GgmlType::F32, [hsk, n_q, heads, 1]).unwrap();
                let k = ctx.zeros(ty, [hsk, kv, kv_heads, 1]).unwrap();
                let v = ctx.zeros(ty, [hsv, kv, kv_heads, 1]).unwrap();
                let mask = ctx.zeros(GgmlType::F16, [kv, n_q, 1, 1]).unwrap();
                let dst = ctx.empty(GgmlType::F32, [hsv, heads, n_q, 1]).unwrap();
                // K as a view one row in: its start is off the 16-byte vectors when rows are odd.
                let k_store = ctx.zeros(ty, [hsk, kv + 1, kv_heads, 1]).unwrap();
                let k_view = k_store.narrow(1, 1, kv).unwrap();
                for k in [&k, &k_view] {
                    let mut stream = ctx.stream().unwrap();
                    let plan = record_flash_attn(&ctx, &mut stream, &q, k, &v, &mask, &dst);
                    check_flash_attn(&ctx, &plan, &stream.pending_dispatches());
                    kernels.insert(plan.to_string().split(':').next().unwrap_or_default().to_owned());
                }
            }
        }
    }
    eprintln!("kernels checked: {kernels:?}");
    assert!(kernels.len() >= 4, "{kernels:?}");
}

/// The attention mma kernel's probes (measuring only) build, run to completion and say so in
/// their plan.
#[test]
fn flash_attn_probes_run_and_name_themselves() {
    let ctx = GpuContext::new(ContextOptions::default()).expect("an adapter");
    for (probe, words) in [(1, "K/V staging only"), (2, "math only")] {
        let ctx = ctx
            .with_tuning(Overrides::parse("", &format!("kernel=mma,mma_probe={probe},split=2")).unwrap())
            .unwrap();
        let (hs, n_q, kv, heads) = (64, 20, 200, 2);
        let q = ctx.zeros(GgmlType::F32, [hs, n_q, heads, 1]).unwrap();
        let k = ctx.zeros(GgmlType::F16, [hs, kv, heads, 1]).unwrap();
        let v = ctx.zeros(GgmlType::F16, [hs, kv, heads, 1]).unwrap();
        let mask = ctx.zeros(GgmlType::F16, [kv, n_q, 1, 1]).unwrap();
        let dst = ctx.empty(GgmlType::F32, [hs, heads, n_q, 1]).unwrap();
        let mut stream = ctx.stream().unwrap();
        let plan = record_flash_attn(&ctx, &mut stream, &q, &k, &v, &mask, &dst);
        let flash_attn::Choice::Mma(m) = &plan.choice else {
            panic!("no mma kernel: {plan}")
        };
        assert_eq!(m.probe, probe);
        assert!(plan.to_string().contains(words), "{plan}");
        check_flash_attn(&ctx, &plan, &stream.pending_dispatches());
        stream.synchronize(std::time::Duration::from_secs(60)).unwrap();
    }
    // The decode kernel's probes: a quantized cache read as if it were f16; an f16 cache's
    // loads alone; the kernel without the split's reduce pass, f16 and q8_0 (K still scored
    // by 8-bit dot products). `vec_qint=1` asks for those dot products wherever K allows.
    for (probe, ty, words) in [
        (1, GgmlType::Q8_0, "K/V decoded as f16"),
        (2, GgmlType::F16, "K/V loads only"),
        (3, GgmlType::F16, "no reduce pass"),
        (3, GgmlType::Q8_0, "no reduce pass"),
    ] {
        let ctx = ctx
            .with_tuning(Overrides::parse("", &format!("kernel=vec,vec_probe={probe},split=2,vec_qint=1")).unwrap())
            .unwrap();
        let (hs, kv, heads) = (128, 256, 2);
        let q = ctx.zeros(GgmlType::F32, [hs, 1, heads, 1]).unwrap();
        let k = ctx.zeros(ty, [hs, kv, heads, 1]).unwrap();
        let v = ctx.zeros(ty, [hs, kv, heads, 1]).unwrap();
        let mask = ctx.zeros(GgmlType::F16, [kv, 1, 1, 1]).unwrap();
        let dst = ctx.empty(GgmlType::F32, [hs, heads, 1, 1]).unwrap();
        let mut stream = ctx.stream().unwrap();
        let plan = record_flash_attn(&ctx, &mut stream, &q, &k, &v, &mask, &dst);
        let flash_attn::Choice::Vec(t) = &plan.choice else {
            panic!("no vec kernel: {plan}")
        };
        assert_eq!(t.probe, probe, "{plan}");
        assert_eq!(t.qint, ty == GgmlType::Q8_0, "{plan}");
        assert!(plan.to_string().contains(words), "{plan}");
        check_flash_attn(&ctx, &plan, &stream.pending_dispatches());
        stream.synchronize(std::time::Duration::from_secs(60)).unwrap();
    }
}

/// The plan an op returns is the plan `describe` (what `backend-ops -v` falls back on) gives
/// for the same layouts.
#[test]
fn returned_plans_match_the_planned_ones() {
    for ctx in contexts() {
        let a = ctx.zeros(GgmlType::Q4_K, [256, 64, 1, 1]).unwrap();
        for n in [1, 5, 64] {
            let b = ctx.zeros(GgmlType::F32, [256, n, 1, 1]).unwrap();
            let dst = ctx.empty(GgmlType::F32, [64, n, 1, 1]).unwrap();
            let ran = ctx.mul_mat_into(&a, &b, &dst).unwrap();
            let planned = mul_mat::plan_for(&ctx, a.layout(), b.layout(), dst.layout()).unwrap();
            assert_eq!(ran, planned);
        }
        ctx.synchronize().unwrap();
    }
}
