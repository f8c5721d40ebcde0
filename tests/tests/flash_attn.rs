//! FLASH_ATTN_EXT on the adapter (lavapipe in CI) against the CPU reference: a representative
//! part of upstream's lists, every kernel the plan can pick (forced through the knobs), and
//! seeded random cases, with and without subgroup matrices.

use ggml_dawn::ops::flash_attn;
use ggml_dawn::tuning::Overrides;
use ggml_dawn::{ContextOptions, GgmlType, GpuContext};
use ggml_dawn_bench::case_lists;
use ggml_dawn_bench::cases::{Case, FlashAttnCase};
use ggml_dawn_bench::harness::{self, Rng, Status};

use dawn_compute_tests::{full, gpu_planning};

/// Head sizes of the representative subset: one not a multiple of 16, the common ones, K and V
/// of different sizes, and the largest the vec kernel takes.
const HEADS: &[&str] = &[
    "hsk=40,hsv=40,",
    "hsk=64,hsv=64,",
    "hsk=128,hsv=128,",
    "hsk=192,hsv=128,",
    "hsk=320,hsv=256,",
];

/// The contexts the cases run in: with subgroup matrices and without, and with
/// `DAWN_COMPUTE_FULL_TESTS=1` also with subgroup matrices planned as on GPUs (the mma kernel
/// at every head size, where a CPU adapter takes it only up to 128).
fn contexts() -> Vec<(&'static str, GpuContext)> {
    let mut modes = vec![
        ("subgroup matrices", ContextOptions::default()),
        (
            "no subgroup matrices",
            ContextOptions {
                no_subgroup_matrix: true,
                ..ContextOptions::default()
            },
        ),
    ];
    if full() {
        modes.push((
            "subgroup matrices, planned as on GPUs",
            ContextOptions {
                tuning: gpu_planning(),
                ..ContextOptions::default()
            },
        ));
    }
    modes
        .into_iter()
        .map(|(name, options)| (name, GpuContext::new(options).expect("an adapter")))
        .collect()
}

/// Runs the cases on `ctx`; returns the failures as text.
fn run(ctx: &GpuContext, cases: &[Case], seed: u64) -> Vec<String> {
    let start = std::time::Instant::now();
    let mut failures = Vec::new();
    for case in cases {
        match harness::test_case(ctx, case, seed) {
            Status::Ok { .. } => {}
            other => {
                let how = match &case {
                    Case::FlashAttnExt(c) => {
                        let t = c.tensors().expect("valid case");
                        let layouts = flash_attn::FlashAttnLayouts {
                            q: t.q.view,
                            k: t.k.view,
                            v: t.v.view,
                            mask: t.mask,
                            sinks: t.sinks,
                            dst: t.dst,
                        };
                        flash_attn::describe(ctx, &layouts)
                    }
                    Case::MulMat(_) | Case::Decoder(_) => String::new(),
                };
                failures.push(format!("{case}: {other:?} [{how}]"));
            }
        }
    }
    eprintln!("{} cases in {:.1} s", cases.len(), start.elapsed().as_secs_f64());
    failures
}

fn list(text: &str, keep: impl Fn(&str) -> bool) -> Vec<Case> {
    case_lists::parse_list(text)
        .expect("the list parses")
        .into_iter()
        .filter(|c| keep(&c.to_string()))
        .collect()
}

fn assert_none(what: &str, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{what}: {} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Upstream's supported cases with kv = 113 (every head size, type, mask, sinks, ALiBi, softcap,
/// GQA, batch and view variant of the main grid) and a few longer ones, in two tests that run
/// side by side: head size 64 (the one with every K/V type), and the others.
fn upstream_cases(head_64: bool) -> Vec<Case> {
    let full = full();
    let mut cases = list(case_lists::FLASH_ATTN_SUPPORTED, |s| {
        s.contains("kv=113,")
            && (s.contains("nb=1,") || s.contains("nb=32,") || s.contains("nb=75,"))
            // 75 query rows (a part-filled block of rows): with f16 K and V only, unless full;
            // each other type's loaders run at 32 rows, and the mma kernel compiles its 64-row
            // layout per type (seconds apiece on lavapipe).
            && (full || !s.contains("nb=75,") || s.contains("type_K=f16,"))
            && (full || HEADS.iter().any(|h| s.contains(h)))
            && s.contains("hsk=64,hsv=64,") == head_64
    });
    if !head_64 {
        cases.extend(
            list(case_lists::FLASH_ATTN_SUPPORTED, |s| {
                s.contains("kv=1024,nb=32,") && s.contains("hsk=128,hsv=128,") && s.contains("sinks=0,")
            })
            .into_iter()
            .take(2),
        );
    }
    cases
}

#[test]
fn upstream_cases_pass_in_both_modes_head_64() {
    let cases = upstream_cases(true);
    assert!(cases.len() > 100, "{} cases", cases.len());
    for (name, ctx) in contexts() {
        assert_none(name, &run(&ctx, &cases, 1));
    }
}

#[test]
fn upstream_cases_pass_in_both_modes_other_heads() {
    let cases = upstream_cases(false);
    assert!(cases.len() > if full() { 200 } else { 150 }, "{} cases", cases.len());
    for (name, ctx) in contexts() {
        assert_none(name, &run(&ctx, &cases, 1));
    }
}

/// Cases upstream's WebGPU backend refuses: other K/V types, head sizes 512 and 576, mixed
/// K/V types and V as a view of quantized K.
#[test]
fn cases_upstream_refuses_pass_too() {
    let mut cases = list(case_lists::FLASH_ATTN_UNSUPPORTED, |s| {
        s.contains("kv=113,")
            && s.contains("nb=3,")
            && s.contains("nr23=[1,1]")
            && s.contains("sinks=1")
            && s.contains("max_bias=0.0")
            && !s.contains("q2_0")
    });
    cases.extend(list(case_lists::FLASH_ATTN_UNSUPPORTED, |s| {
        (s.contains("kv=128,") || s.contains("kv=96,") || s.contains("kv=64,")) && !s.contains("q2_0")
    }));
    cases.extend(list(case_lists::FLASH_ATTN_UNSUPPORTED, |s| {
        s.contains("type_K=q8_0") && s.contains("kv=113,")
    }));
    assert!(cases.len() > 25, "{} cases", cases.len());
    for (name, ctx) in contexts() {
        assert_none(name, &run(&ctx, &cases, 2));
    }
}

/// The cases the forced variants run on: head size 64 (masks, batches of 1 and 32, GQA, ALiBi)
/// and K and V of different sizes (192/128, with a mask); with `DAWN_COMPUTE_FULL_TESTS=1`
/// twice as many, 192/128 without a mask and 576/512 too.
fn variant_cases() -> (Vec<Case>, Vec<Case>) {
    let cases = list(case_lists::FLASH_ATTN_SUPPORTED, |s| {
        s.contains("kv=113,")
            && (s.contains("nb=1,") || s.contains("nb=32,"))
            && s.contains("sinks=1")
            && (s.contains("hsk=64,hsv=64,") || s.contains("hsk=576,") || s.contains("hsk=192,hsv=128"))
    });
    let full = full();
    let (small, other): (Vec<Case>, Vec<Case>) = cases
        .into_iter()
        .step_by(if full { 2 } else { 4 })
        .filter(|c| full || !c.to_string().contains("mask=0") || c.to_string().contains("hsk=64,"))
        .partition(|c| c.to_string().contains("hsk=64,"));
    assert!(
        small.len() > 5 && !other.is_empty(),
        "{} + {} cases",
        small.len(),
        other.len()
    );
    (small, other)
}

/// Runs each forced variant (FLASH_ATTN_EXT knobs) on the cases, with subgroup matrices.
fn run_variants(variants: &[&str], cases: &[Case]) {
    let ctx = GpuContext::new(ContextOptions::default()).expect("an adapter");
    for v in variants {
        let tuned = ctx
            .with_tuning(Overrides::parse("", v).expect("knobs parse"))
            .expect("valid knobs");
        assert_none(v, &run(&tuned, cases, 3));
    }
}

/// Every kernel and variant the plan can pick, forced on a small set (one test per kernel, so
/// they run side by side): vec, tile and mma kernels, splits and the reduce, no prefetch, no
/// mask skipping, V staged over K, Q from workgroup memory, an eager rescale (tau = 0), small
/// tiles.
#[test]
fn every_tile_variant_passes() {
    let (small, other) = variant_cases();
    let cases: Vec<Case> = small.into_iter().chain(other).collect();
    run_variants(
        &[
            "kernel=tile",
            "kernel=tile,split=3,tile_prefetch=0,tile_kv=8,tile_rq=1",
            "kernel=tile,mask_skip=0,tile_threads=32,tile_rows=3",
        ],
        &cases,
    );
}

/// The mma kernel's variants on head size 64, and K and V of different sizes forced through it
/// once by default (each variant at 192/128 costs lavapipe tens of seconds; every variant with
/// `DAWN_COMPUTE_FULL_TESTS=1`).
#[test]
fn every_mma_variant_passes() {
    let (small, other) = variant_cases();
    let variants = [
        "kernel=mma,split=2,mma_q_regs=0,tau=0",
        "kernel=mma,mma_kv=8,mma_subgroups=2,mma_small_head=0,mma_prefetch=0",
        "kernel=mma,mma_o_budget=8,mask_skip=0",
        "kernel=mma,split=2,mma_prefetch=1",
        // GPUs' defaults for head size 64: 16 subgroups, 128 O accumulators a lane.
        "kernel=mma,mma_small_head=64,mma_small_head_subgroups=16,mma_o_budget=128",
    ];
    if full() {
        let cases: Vec<Case> = small.into_iter().chain(other).collect();
        run_variants(&variants, &cases);
    } else {
        run_variants(&variants, &small);
        run_variants(&["kernel=mma"], &other);
    }
}

/// The vec kernel's variants and the simple kernel. The one with a lane per key walks 2 keys
/// per lane group by default (its default 4, a 256-key step with one lane per key, took
/// lavapipe 38 s to compile); 4 with `DAWN_COMPUTE_FULL_TESTS=1`. Then q8_0 / q4_0 K decode (1 and 3 query
/// rows, with and without ALiBi, GQA) scored by 8-bit dot products at every row count, and
/// never.
#[test]
fn every_vec_and_simple_variant_passes() {
    let (small, other) = variant_cases();
    let cases: Vec<Case> = small.into_iter().chain(other).collect();
    let quantized_k = list(case_lists::FLASH_ATTN_SUPPORTED, |s| {
        s.contains("hsk=64,hsv=64,")
            && s.contains("kv=113,")
            && s.contains("sinks=1")
            && (s.contains("nb=1,") || s.contains("nb=3,"))
            && (s.contains("type_K=q8_0") || s.contains("type_K=q4_0"))
    });
    assert!(quantized_k.len() >= 8, "{} cases", quantized_k.len());
    run_variants(
        &["kernel=vec,vec_qint=1", "kernel=vec,vec_qint=0,split=2"],
        &quantized_k,
    );
    let narrow = if full() {
        "kernel=vec,vec_threads=64,vec_lanes=1"
    } else {
        "kernel=vec,vec_threads=64,vec_lanes=1,vec_keys=2"
    };
    run_variants(
        &["kernel=vec,split=3,vec_lanes=4,vec_keys=3", narrow, "kernel=simple"],
        &cases,
    );
}

/// Random shapes, types, strides and options (seeded), in both modes.
#[test]
fn random_cases_pass_in_both_modes() {
    let mut rng = Rng::new(0x5eed_fa11);
    let heads = [
        (40, 40),
        (64, 64),
        (72, 72),
        (80, 80),
        (96, 96),
        (128, 128),
        (192, 128),
        (256, 256),
        (576, 512),
    ];
    let types = [
        GgmlType::F16,
        GgmlType::F32,
        GgmlType::BF16,
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::IQ4_NL,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::MXFP4,
    ];
    let mut pick = |n: usize| (rng.next_u64() % n as u64) as usize;
    let mut cases = Vec::new();
    while cases.len() < if full() { 24 } else { 12 } {
        let (hsk, hsv) = heads[pick(heads.len())];
        let mut c = FlashAttnCase::new(hsk, hsv, 1 + pick(3), 1 + pick(300), 1 + pick(40));
        c.nr23 = [[1, 2, 4, 5][pick(4)], 1 + pick(2)];
        c.mask = pick(4) != 0;
        c.sinks = pick(2) == 0;
        c.max_bias = if pick(4) == 0 { 8.0 } else { 0.0 };
        c.logit_softcap = if pick(5) == 0 { 10.0 } else { 0.0 };
        let tk = types[pick(types.len())];
        let tv = if pick(3) == 0 { types[pick(types.len())] } else { tk };
        c.type_k = tk.into();
        c.type_v = tv.into();
        c.kv_view = pick(2) == 0;
        c.permute = if pick(4) == 0 { [0, 2, 1, 3] } else { [0, 1, 2, 3] };
        c.v_is_view_of_k = tk == tv && hsv <= hsk && pick(4) == 0;
        // Large quantized heads need whole 256-element blocks; keep those shapes small.
        if hsk * hsv > 128 * 128 {
            c.nb = c.nb.min(8);
            c.kv = c.kv.min(160);
        }
        if c.tensors().is_ok() {
            cases.push(Case::FlashAttnExt(c));
        }
    }
    for (name, ctx) in contexts() {
        assert_none(name, &run(&ctx, &cases, 4));
    }
}

/// The plan's description names the kernel (what `backend-ops -v` prints).
#[test]
fn describe_names_the_kernel() {
    let case: FlashAttnCase = "FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1)"
        .parse()
        .expect("case parses");
    let t = case.tensors().expect("valid");
    let layouts = flash_attn::FlashAttnLayouts {
        q: t.q.view,
        k: t.k.view,
        v: t.v.view,
        mask: t.mask,
        sinks: t.sinks,
        dst: t.dst,
    };
    for (name, ctx) in contexts() {
        let text = flash_attn::describe(&ctx, &layouts);
        assert!(text.starts_with("vec") && text.contains("split"), "{name}: {text}");
    }
}
