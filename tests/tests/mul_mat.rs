//! MUL_MAT end to end on the adapter (lavapipe in CI): a representative part of upstream's
//! supported cases with and without subgroup matrices, the planner's choice for every upstream
//! case, and seeded random problems (any m, n, k, broadcasting, permuted and padded src1, views
//! at unaligned offsets) through every path the planner can take: mat-vec with and without
//! subgroups, subgroup matrices (narrow and big tiles, single and double buffered, cramped
//! workgroup memory), register tiles, and the simple fallback.

use dawn_compute_tests::{full, gpu_planning};
use ggml_dawn::ops::glu::{GluOp, GluParams};
use ggml_dawn::ops::mul_mat::{self, Choice, DeviceFacts, MatVecPlan, MulMatPlan, MulMatTuning};
use ggml_dawn::ops::norm;
use ggml_dawn::reference::{self, metric};
use ggml_dawn::tuning::Overrides;
use ggml_dawn::tuning::profiles;
use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor, Layout, format};
use ggml_dawn_bench::case_lists;
use ggml_dawn_bench::cases::Case;
use ggml_dawn_bench::harness::{self, Rng, Status};

fn context(no_subgroup_matrix: bool) -> GpuContext {
    GpuContext::new(ContextOptions {
        no_subgroup_matrix,
        ..Default::default()
    })
    .expect("an adapter")
}

/// `facts` as a device without subgroups (and so without subgroup matrices).
fn without_subgroups(facts: DeviceFacts) -> DeviceFacts {
    DeviceFacts {
        subgroups: false,
        subgroup_matrix: None,
        ..facts
    }
}

/// A part of upstream's supported list: every type at m=16 with n=1 (mat-vec) and n=9
/// (mat-mat), half the other shapes (broadcasts, permutations, views, odd k, large sizes), and
/// one in ten of the rest.
fn representative_cases() -> Vec<Case> {
    let all = case_lists::parse_list(case_lists::MUL_MAT_SUPPORTED).unwrap();
    all.into_iter()
        .enumerate()
        .filter(|(i, c)| {
            let text = c.to_string();
            let basic = text.contains(",m=16,") && text.contains("bs=[1,1],nr=[1,1],per=[0,1,2,3]");
            let n1_or_9 = text.contains(",n=1,") || text.contains(",n=9,");
            (basic && n1_or_9) || (!text.contains(",m=16,") && !text.contains("k=8192") && i % 2 == 0) || i % 10 == 0
        })
        .map(|(_, c)| c)
        .collect()
}

/// With and without subgroup matrices, and with `DAWN_COMPUTE_FULL_TESTS=1` also with subgroup
/// matrices planned as on GPUs (a K step of 32, where CPU adapters take 8).
#[test]
fn upstream_cases_pass_with_and_without_subgroup_matrices() {
    let cases = representative_cases();
    assert!(cases.len() > 220, "only {} cases", cases.len());
    let mut modes = vec![
        ("subgroup matrices", context(false)),
        ("no subgroup matrices", context(true)),
    ];
    if full() {
        let gpu = GpuContext::new(ContextOptions {
            tuning: gpu_planning(),
            ..Default::default()
        })
        .expect("an adapter");
        modes.push(("subgroup matrices, planned as on GPUs", gpu));
    }
    for (mode, ctx) in modes {
        let mut failures = Vec::new();
        for case in &cases {
            match harness::test_case(&ctx, case, 7) {
                Status::Ok { .. } => {}
                other => failures.push(format!("{case}: {other:?}")),
            }
        }
        assert!(
            failures.is_empty(),
            "{mode}: {} of {} failed:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
        eprintln!("{mode}: {} cases OK", cases.len());
    }
}

#[test]
fn every_upstream_case_takes_a_fast_path() {
    let all = case_lists::parse_list(case_lists::MUL_MAT_SUPPORTED).unwrap();
    for no_sg in [false, true] {
        let ctx = context(no_sg);
        let has_sg = ctx.capabilities().subgroup_matrix.is_some();
        for case in &all {
            let Case::MulMat(c) = case else { continue };
            let t = c.tensors().unwrap();
            let plan = mul_mat::plan_for(&ctx.env(), &t.a.view, &t.b.view, &t.dst).unwrap();
            let n = t.dst.ne[1] as u64;
            let ok = match plan.choice {
                Choice::MatVec(_) => n <= u64::from(ctx.tuning().mul_mat.vec_max_n),
                Choice::SubgroupMatrix(_) => has_sg,
                Choice::Tiled(_) => !has_sg,
                Choice::Simple(_) => false,
            };
            assert!(ok, "{case}: {plan}");
            assert!(plan.workgroup_bytes <= ctx.capabilities().limits.max_compute_workgroup_storage_size);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Random problems.

/// Storage of `bytes` bytes of type `ty` with values in [-1, 1]: quantized where the CPU can
/// quantize to `ty`, else random blocks with small scales (as the harness makes them).
fn random_storage(rng: &mut Rng, ty: GgmlType, bytes: usize) -> Vec<u8> {
    let blocks = bytes / ty.type_size();
    let elements = blocks * ty.block_size();
    if format::can_quantize(ty) {
        return format::quantize(ty, &rng.fill(elements, -1.0, 1.0)).unwrap();
    }
    let mut data: Vec<u8> = (0..blocks * ty.type_size()).map(|_| rng.next_u64() as u8).collect();
    for block in data.chunks_exact_mut(ty.type_size()) {
        let scale = half::f16::from_f32(rng.uniform(0.01, 0.1)).to_bits();
        if ty == GgmlType::IQ1_M {
            let n = block.len();
            for (i, word) in block[n - 8..].chunks_exact_mut(2).enumerate() {
                let nibble = (scale >> (4 * i)) & 0xf;
                let w = (u16::from_le_bytes([word[0], word[1]]) & 0x0fff) | (nibble << 12);
                word.copy_from_slice(&w.to_le_bytes());
            }
        } else {
            block[..2].copy_from_slice(&scale.to_le_bytes());
        }
    }
    data
}

/// `data` after `skew` zero bytes.
fn skewed(skew: usize, data: Vec<u8>) -> Vec<u8> {
    let mut out = vec![0u8; skew];
    out.extend(data);
    out
}

fn pick<T: Copy>(rng: &mut Rng, items: &[T]) -> T {
    items[(rng.next_u64() % items.len() as u64) as usize]
}

fn range(rng: &mut Rng, lo: usize, hi: usize) -> usize {
    lo + (rng.next_u64() % (hi - lo + 1) as u64) as usize
}

/// One random problem: src0 a padded, offset view; src1 permuted, padded and offset; dst at a
/// small offset.
struct Random {
    a: HostTensor,
    b: HostTensor,
    dst: Layout,
    text: String,
}

/// The random problem of an upstream case string: its layouts, inputs uniform in [-1, 1).
fn random_case(rng: &mut Rng, text: String) -> Random {
    let Case::MulMat(c) = text.parse::<Case>().unwrap() else {
        unreachable!("{text} is a MUL_MAT case")
    };
    let t = c.tensors().unwrap();
    Random {
        a: t.a.host(&rng.fill(t.a.storage.elements(), -1.0, 1.0)).unwrap(),
        b: t.b.host(&rng.fill(t.b.storage.elements(), -1.0, 1.0)).unwrap(),
        dst: t.dst,
        text,
    }
}

fn random_problem(rng: &mut Rng, ty: GgmlType) -> Random {
    let block = ty.block_size();
    let k = if block == 1 {
        range(rng, 1, 300)
    } else {
        block * range(rng, 1, (640 / block).max(1))
    };
    let m = range(rng, 1, 150);
    let n = match rng.next_u64() % 10 {
        0..=3 => range(rng, 1, 8),
        4..=6 => range(rng, 9, 64),
        _ => range(rng, 65, 150),
    };
    let (a2, a3) = (pick(rng, &[1, 1, 2]), pick(rng, &[1, 1, 2]));
    let (r2, r3) = (pick(rng, &[1, 1, 2, 3]), pick(rng, &[1, 1, 2]));
    let (b2, b3) = (a2 * r2, a3 * r3);

    // a: rows padded by whole blocks, matrices padded by whole rows, the view offset by whole
    // blocks (so quantized rows start at any byte).
    let size = ty.type_size();
    let row = k / block * size;
    let nb1 = row + range(rng, 0, 2) * size;
    let nb2 = nb1 * (m + range(rng, 0, 1));
    let nb3 = nb2 * a2;
    // Float views sometimes start at odd bytes (nothing in the kernels may assume alignment):
    // the storage is shifted by `skew` bytes.
    let skew = if block == 1 && rng.next_u64().is_multiple_of(4) {
        range(rng, 1, 3)
    } else {
        0
    };
    let base = range(rng, 0, 5) * size;
    let a_layout = Layout {
        ty,
        ne: [k, m, a2, a3],
        nb: [size, nb1, nb2, nb3],
        offset: base + skew,
    };
    let a = HostTensor {
        layout: a_layout,
        data: skewed(skew, random_storage(rng, ty, base + nb3 * a3)),
    };
    let offset = a_layout.offset;

    // b: allocated with permuted extents (dim 0 padded), viewed back through the permutation.
    let b_type = pick(rng, &[GgmlType::F32, GgmlType::F32, GgmlType::F16]);
    let ne = [k, n, b2, b3];
    let axes: [usize; 4] = match rng.next_u64() % 8 {
        0 => [0, 2, 1, 3],
        1 => [0, 1, 3, 2],
        2 => [0, 3, 2, 1],
        3 => [1, 0, 2, 3],
        4 => [2, 1, 0, 3],
        _ => [0, 1, 2, 3],
    };
    let mut ne_s = [0; 4];
    for i in 0..4 {
        ne_s[i] = ne[axes[i]];
    }
    let mut ne_big = ne_s;
    ne_big[0] += range(rng, 0, 3);
    let big = Layout::contiguous(b_type, ne_big).unwrap();
    let b_skew = if rng.next_u64().is_multiple_of(5) {
        range(rng, 1, 3)
    } else {
        0
    };
    let b_base = range(rng, 0, 3) * b_type.type_size();
    let b_layout = Layout {
        ne: ne_s,
        offset: b_base + b_skew,
        ..big
    }
    .permute(axes)
    .unwrap();
    assert_eq!(b_layout.ne, ne);
    let b = HostTensor {
        layout: b_layout,
        data: skewed(b_skew, random_storage(rng, b_type, b_base + big.span_bytes().unwrap())),
    };
    let b_offset = b_layout.offset;
    let dst = Layout {
        offset: 4 * range(rng, 0, 3),
        ..Layout::contiguous(GgmlType::F32, [m, n, b2, b3]).unwrap()
    };
    let text = format!(
        "{ty}x{b_type} m={m} n={n} k={k} a=[{a2},{a3}] r=[{r2},{r3}] a.nb={:?} a.off={offset} b.axes={axes:?} \
         b.nb={:?} b.off={b_offset} dst.off={}",
        a.layout.nb, b.layout.nb, dst.offset
    );
    Random { a, b, dst, text }
}

/// Runs `p` planned for `facts` and `tuning`; the NMSE against the CPU, or why it failed.
fn run_random(
    ctx: &GpuContext,
    p: &Random,
    facts: &DeviceFacts,
    tuning: &MulMatTuning,
) -> Result<(f64, MulMatPlan), String> {
    let up = ctx.upload_all(&[&p.a, &p.b]).map_err(|e| e.to_string())?;
    let dst = ctx.filled(p.dst, 0xff).map_err(|e| e.to_string())?;
    let mut stream = ctx.stream().map_err(|e| e.to_string())?;
    let plan = mul_mat::mul_mat_with(&ctx.env(), &mut stream, &up[0], &up[1], &dst, facts, tuning)
        .map_err(|e| e.to_string())?;
    stream.synchronize(harness::TIMEOUT).map_err(|e| e.to_string())?;
    let actual = ctx.read_f32(&dst).map_err(|e| e.to_string())?;
    let expected = reference::mul_mat::mul_mat(&p.a, &p.b).map_err(|e| e.to_string())?;
    metric::check(&expected, &actual, metric::MUL_MAT_MAX_NMSE)
        .map(|nmse| (nmse, plan.clone()))
        .map_err(|e| format!("{e} [{plan}]"))
}

/// `text`'s case with random inputs, planned for `facts` and `tuning` and checked against the
/// CPU: the case string and its plan. A failure panics, naming the case and the knobs.
fn run_case(
    ctx: &GpuContext,
    rng: &mut Rng,
    text: String,
    facts: &DeviceFacts,
    tuning: &MulMatTuning,
) -> (String, MulMatPlan) {
    let p = random_case(rng, text);
    let (_, plan) = run_random(ctx, &p, facts, tuning).unwrap_or_else(|e| panic!("{} [{tuning}]: {e}", p.text));
    (p.text, plan)
}

/// A case with views: b's type, m, n, k, a's padded row length `k_v` (0: k), b's batches `bs`,
/// their broadcast over a `nr`, b's permutation `per`.
type Shape = (
    &'static str,
    usize,
    usize,
    usize,
    usize,
    [usize; 2],
    [usize; 2],
    [usize; 4],
);

/// Upstream's case string of an `a_ty` a by a b of `shape`.
fn shaped_case(a_ty: &str, (b_ty, m, n, k, k_v, bs, nr, per): Shape) -> String {
    format!(
        "MUL_MAT(type_a={a_ty},type_b={b_ty},m={m},n={n},k={k},bs={bs:?},nr={nr:?},per={per:?},k_v={k_v},o=1,src_overlap=0)"
    )
    .replace(' ', "")
}

/// The modes the random problems run in: the device as it is, and as devices with less.
fn modes(ctx: &GpuContext) -> Vec<(&'static str, DeviceFacts, MulMatTuning)> {
    let facts = ctx.facts();
    let defaults = tuned(&facts, "");
    let mut modes = vec![("device", facts, defaults)];
    if facts.subgroup_matrix.is_some() {
        let cramped = DeviceFacts {
            max_workgroup_storage: 6144,
            ..facts
        };
        // The GPUs' K step of 32 (CPU adapters default to 8).
        let other_tiles = tuned(
            &facts,
            "sg_stages=1,sg_tk=32,sg_small=2/2,sg_counts=1/2,vec_rows=1/3,vec_wg=64",
        );
        let whole_tiles = defaults;
        modes.push(("whole tiles", facts, whole_tiles));
        modes.push(("cramped workgroup memory", cramped, whole_tiles));
        // As on adapters whose f16 configs only give f16 results.
        let mut f16_results = facts;
        if let Some(c) = f16_results.subgroup_matrix.as_mut() {
            c.f32_result = false;
        }
        modes.push(("f16 accumulators", f16_results, whole_tiles));
        modes.push(("other tiles", facts, other_tiles));
    }
    let no_matrices = DeviceFacts {
        subgroup_matrix: None,
        ..facts
    };
    modes.push(("no subgroup matrices", no_matrices, defaults));
    let bare = without_subgroups(facts);
    let small_tiles = tuned(&facts, "tiled_wg=8/4,tiled_thread=3/5,tiled_tk=8,vec_wg=32");
    modes.push(("no subgroups", bare, small_tiles));
    // b quantized by each workgroup of the integer mat-vec (off on CPU adapters by default).
    modes.push((
        "b quantized by each workgroup",
        facts,
        tuned(&facts, "vec_int_b_wg_max_k=4096"),
    ));
    // No workgroup memory: every problem falls back to the simple kernel.
    let no_workgroup_memory = DeviceFacts {
        max_workgroup_storage: 0,
        subgroup_matrix: None,
        ..bare
    };
    modes.push(("the simple kernel", no_workgroup_memory, defaults));
    modes
}

/// Kernel variants the random problems must reach, by words of their plan's description.
const VARIANTS: &[(&str, &[&str])] = &[
    ("mat-vec, subgroup reduction", &["mat-vec", "subgroup reduction"]),
    ("mat-vec, workgroup-memory reduction", &["mat-vec", "workgroup-memory"]),
    ("integer mat-vec", &["mat-vec", "integer dot products"]),
    (
        "integer mat-vec, b quantized by each workgroup",
        &["mat-vec", "b quantized by each workgroup"],
    ),
    ("the simple kernel", &["simple"]),
    ("register tiles", &["register-tiled"]),
    ("subgroup matrices, narrow tile", &["subgroup-matrix", "narrow tile"]),
    ("subgroup matrices, big tile", &["subgroup-matrix", ": tile"]),
    ("subgroup matrices, double-buffered", &["subgroup-matrix", "2 stages"]),
    ("subgroup matrices, single-buffered", &["subgroup-matrix", "1 stage"]),
    (
        "subgroup matrices, register prefetch",
        &["subgroup-matrix", "1 stage with register prefetch"],
    ),
    (
        "subgroup matrices, f16 accumulators",
        &["subgroup-matrix", "(f16 accumulators)"],
    ),
];

#[test]
fn random_problems_pass_on_every_path() {
    // Dawn's validation on: binding sizes and uses are checked too.
    let ctx = GpuContext::new(ContextOptions {
        safe_mode: true,
        ..Default::default()
    })
    .expect("an adapter");
    let types: Vec<GgmlType> = GgmlType::ALL
        .iter()
        .copied()
        .filter(|&t| ggml_dawn::ops::dequantize::supports(t))
        .collect();
    let mut rng = Rng::new(0x5eed_0005);
    let mut failures = Vec::new();
    let mut runs = 0;
    let mut paths = std::collections::BTreeMap::<String, usize>::new();
    for (mode, (name, facts, tuning)) in modes(&ctx).into_iter().enumerate() {
        // Every type in every mode; the shapes differ each time.
        for (i, &ty) in types.iter().enumerate() {
            let problem = random_problem(&mut rng, ty);
            // The reduced modes run a third of the types each, to keep the test short.
            if mode > 0 && (i + mode) % 3 != 0 {
                continue;
            }
            runs += 1;
            match run_random(&ctx, &problem, &facts, &tuning) {
                Ok((_, plan)) => {
                    let plan = plan.to_string();
                    for (kind, words) in VARIANTS {
                        if words.iter().all(|w| plan.contains(w)) {
                            *paths.entry(kind.to_string()).or_default() += 1;
                        }
                    }
                }
                Err(e) => failures.push(format!("[{name}] {}: {e}", problem.text)),
            }
        }
    }
    eprintln!("{runs} random problems; paths: {paths:?}");
    assert!(
        failures.is_empty(),
        "{} of {runs} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    for (kind, _) in VARIANTS {
        assert!(paths.contains_key(*kind), "{kind} never ran: {paths:?}");
    }
}

/// The subgroup-matrix kernel's optional staging forms against the CPU for every type on random
/// problems (padded, offset and broadcast views of a; b permuted and padded): a quantized a and
/// an f32 b converted to f16 once per call (`sg_a_f16_min_n`, `sg_b_f16_min_n`; b only where k
/// is a multiple of 8), f32 units kept f32 until stored (`sg_raw_units`), and two steps
/// prefetched into registers (`sg_prefetch=2`, odd and even step counts).
#[test]
fn staging_forms_of_the_subgroup_matrix_kernel_match_the_cpu() {
    let ctx = GpuContext::new(ContextOptions {
        safe_mode: true,
        ..Default::default()
    })
    .expect("an adapter");
    let facts = ctx.facts();
    assert!(
        facts.subgroup_matrix.is_some(),
        "the test adapter has subgroup matrices"
    );
    let tuning = tuned(
        &facts,
        "sg_raw_units=1,sg_a_f16_min_n=9,sg_b_f16_min_n=9,sg_stages=1,sg_prefetch=2",
    );
    let mut rng = Rng::new(0x5eed_00a1);
    let mut failures = Vec::new();
    let mut runs = 0;
    for &ty in GgmlType::ALL
        .iter()
        .filter(|&&t| ggml_dawn::ops::dequantize::supports(t))
    {
        let problem = loop {
            let p = random_problem(&mut rng, ty);
            if p.dst.ne[1] >= 9 {
                break p;
            }
        };
        runs += 1;
        match run_random(&ctx, &problem, &facts, &tuning) {
            Ok((_, plan)) => {
                let text = plan.to_string();
                let copied = text.contains("a converted to f16 first");
                let b_copied = text.contains("b converted to f16 first");
                if copied != ty.is_quantized()
                    || b_copied != (problem.b.layout.ty == GgmlType::F32 && problem.b.layout.ne[0].is_multiple_of(8))
                    || !text.contains("f32 units packed at the store")
                    || !text.contains("two steps ahead")
                {
                    failures.push(format!("{}: not planned as asked: {text}", problem.text));
                }
            }
            Err(e) => failures.push(format!("{}: {e}", problem.text)),
        }
    }
    assert!(runs >= 25, "only {runs} types");
    assert!(
        failures.is_empty(),
        "{} of {runs} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The integer mat-vec (b quantized to 8 bits, packed dot products) against the CPU for every
/// format it reads (iq4_nl and iq4_xs by default, `vec_int_iq4nl`, `vec_int_iq4xs`), at
/// every n it takes, with subgroup and workgroup-memory reductions, with and without the
/// prefetch (the 4-bit levels then from the workgroup table, `vec_int_lut=1`), on offset views
/// whose rows start at any even byte.
#[test]
fn integer_mat_vec_matches_the_cpu_for_every_format() {
    let ctx = GpuContext::new(ContextOptions {
        safe_mode: true,
        ..Default::default()
    })
    .expect("an adapter");
    let facts = ctx.facts();
    let bare = without_subgroups(facts);
    let few_rows = tuned(&facts, "vec_int_rows=3/2,vec_int_groups=2/1");
    // As GPUs take some formats by default: the next unit's loads issued first, iq4_nl's levels
    // from the workgroup table, q8_0 at n=1 in one-row groups.
    let prefetch = tuned(&facts, "vec_int_prefetch=all,vec_int_lut=1,vec_int_q8_0_n1=1");
    let mut rng = Rng::new(0x5eed_0008);
    let mut failures = Vec::new();
    let mut runs = 0;
    let int_formats = GgmlType::ALL
        .iter()
        .copied()
        .filter(|&t| mul_mat::plan::has_int_dot(t) || matches!(t, GgmlType::IQ4_NL | GgmlType::IQ4_XS));
    for ty in int_formats {
        let settings = [
            ("device", facts, tuned(&facts, "")),
            ("no subgroups", bare, few_rows),
            ("prefetch", facts, prefetch),
        ];
        for (name, facts, tuning) in settings {
            // Draw until the problem is a mat-vec one.
            let problem = loop {
                let p = random_problem(&mut rng, ty);
                if p.dst.ne[1] <= 8 {
                    break p;
                }
            };
            runs += 1;
            match run_random(&ctx, &problem, &facts, &tuning) {
                Ok((_, plan)) if plan.to_string().contains("integer dot products") => {}
                Ok((_, plan)) => failures.push(format!("[{name}] {}: took {plan}", problem.text)),
                Err(e) => failures.push(format!("[{name}] {}: {e}", problem.text)),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {runs} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Float views at odd byte offsets (not addressable as words) still take the fast paths, and
/// `describe` names the path.
#[test]
fn misaligned_float_views_take_the_fast_paths() {
    let ctx = context(false);
    let mut rng = Rng::new(11);
    for (k, m, n) in [(40, 33, 3), (41, 70, 12), (40, 65, 70)] {
        for (a_skew, b_skew) in [(0, 2), (2, 1), (1, 3)] {
            let a_store = HostTensor::from_f32(GgmlType::F16, [k * m + 2, 1, 1, 1], &rng.fill(k * m + 2, -1.0, 1.0))
                .unwrap()
                .data;
            let b_store = HostTensor::from_f32(GgmlType::F32, [k * n + 1, 1, 1, 1], &rng.fill(k * n + 1, -1.0, 1.0))
                .unwrap()
                .data;
            let view = |ty, ne: [usize; 4], skew: usize, store: Vec<u8>| {
                let mut data = vec![0u8; skew];
                data.extend(store);
                HostTensor {
                    layout: Layout {
                        offset: skew,
                        ..Layout::contiguous(ty, ne).unwrap()
                    },
                    data,
                }
            };
            let p = Random {
                a: view(GgmlType::F16, [k, m, 1, 1], a_skew, a_store),
                b: view(GgmlType::F32, [k, n, 1, 1], b_skew, b_store),
                dst: Layout::contiguous(GgmlType::F32, [m, n, 1, 1]).unwrap(),
                text: format!("f16 at +{a_skew} x f32 at +{b_skew}, m={m} n={n} k={k}"),
            };
            let (nmse, plan) = run_random(&ctx, &p, &ctx.facts(), &tuned(&ctx.facts(), ""))
                .unwrap_or_else(|e| panic!("{}: {e}", p.text));
            eprintln!("{}: nmse {nmse:e}, {plan}", p.text);
            assert!(!matches!(plan.choice, Choice::Simple(_)), "{plan}");
            let described = mul_mat::describe(&ctx.env(), &p.a.layout, &p.b.layout, &p.dst);
            assert!(described.starts_with("MUL_MAT f16xf32: "), "{described}");
        }
    }
}

/// Grids of more than 65535 workgroups are split in 2-D: upstream's broadcast perf shape as a
/// mat-vec, and as a mat-mat through small tiles (register tiles of 2x2; subgroup matrices of
/// one result each).
#[test]
fn two_dimensional_grids() {
    let ctx = context(false);
    let facts = ctx.facts();
    let tiny = tuned(&facts, "tiled_wg=2/2,tiled_thread=1/1,sg_small=1/1");
    let no_matrices = DeviceFacts {
        subgroup_matrix: None,
        ..facts
    };
    let mut rng = Rng::new(3);
    for (n, facts, must_split) in [(1, facts, true), (9, no_matrices, true), (9, facts, false)] {
        let text = shaped_case("f16", ("f32", 16416, n, 128, 0, [8, 1], [4, 1], [0, 2, 1, 3]));
        let p = random_case(&mut rng, text);
        let (nmse, plan) = run_random(&ctx, &p, &facts, &tiny).unwrap_or_else(|e| panic!("{}: {e}", p.text));
        eprintln!("{}: nmse {nmse:e}, {plan}", p.text);
        if must_split {
            assert!(plan.grid[1] > 1, "{plan}");
        }
    }
}

/// Mat-vec workgroups whose outputs (rows × columns) outnumber their threads, and row groups:
/// every output is still written, in both mat-vec kernels and both reductions, for aligned rows
/// and for rows that start 2 bytes into a word (an odd number of blocks per row). 16 rows × 8
/// columns in a workgroup of 64 once left half of dst unwritten.
#[test]
fn mat_vec_with_more_outputs_than_threads() {
    let ctx = context(false);
    let device = ctx.facts();
    let bare = without_subgroups(device);
    let mut rng = Rng::new(17);
    for (words, facts) in [("none", device), ("all", device), ("all", bare)] {
        for knobs in [
            "vec_wg=64,vec_rows=16/16,vec_rows_k=16/16,vec_groups=1/1",
            "vec_wg=32,vec_rows=3/5,vec_rows_k=3/5,vec_groups=4/2",
        ] {
            let tuning = tuned(&facts, &format!("{knobs},vec_words={words}"));
            for (ty, k) in [
                (GgmlType::Q4_0, 800),
                (GgmlType::Q4_0, 1024),
                (GgmlType::Q8_0, 800),
                (GgmlType::Q4_K, 768),
                (GgmlType::Q6_K, 768),
                (GgmlType::F16, 300),
            ] {
                for n in [1, 7, 8] {
                    let text = format!("MUL_MAT(type_a={ty},type_b=f32,m=37,n={n},k={k})");
                    let (_, plan) = run_case(&ctx, &mut rng, text, &facts, &tuning);
                    assert!(matches!(plan.choice, Choice::MatVec(MatVecPlan { .. })), "{plan}");
                }
            }
        }
    }
}

/// The mat-vecs that read a as 16-byte words (`vec_float_vec4`, `vec_int_a_vec4`) against the
/// CPU: float rows of every float type with f32 and f16 b, whole words and rows padded past k
/// (their last elements read one by one, b then read by words), n from 1 to 8, with and without
/// subgroups; q4_K and q5_K units, q4_0 and q8_0 units of 8 blocks (and the blocks after the last
/// whole one), q6_K units at every 16-byte phase of its blocks, at n = 1 to 3.
#[test]
fn mat_vec_reading_16_byte_words_matches_the_cpu() {
    let ctx = context(false);
    let device = ctx.facts();
    let bare = without_subgroups(device);
    let tuning = tuned(&device, "vec_float_vec4=1,vec_int_a_vec4=all");
    // The units kernel (not the K-quant slots) at every n tried.
    let units = tuned(
        &device,
        "vec_float_vec4=1,vec_int_a_vec4=all,vec_int_slots_min_n=65,vec_wg=64",
    );
    let mut rng = Rng::new(31);
    for facts in [device, bare] {
        for (ty, b_ty, k, k_v, n) in [
            (GgmlType::F16, GgmlType::F32, 1000, 0, 1),
            (GgmlType::F16, GgmlType::F32, 1001, 1008, 8),
            (GgmlType::F32, GgmlType::F32, 301, 304, 2),
            (GgmlType::F32, GgmlType::F16, 512, 0, 5),
            (GgmlType::BF16, GgmlType::F32, 1000, 0, 3),
            (GgmlType::F16, GgmlType::F16, 258, 264, 4),
        ] {
            let text = shaped_case(ty.name(), (b_ty.name(), 37, n, k, k_v, [1, 1], [1, 1], [0, 1, 2, 3]));
            let (text, plan) = run_case(&ctx, &mut rng, text, &facts, &tuning);
            assert!(
                matches!(plan.choice, Choice::MatVec(MatVecPlan { .. })) && plan.a_vec4,
                "{}: {plan}",
                text
            );
        }
        // q4_0 and q8_0 in units of 8 blocks, and with rows padded past k, so that one block is left
        // after the last whole unit.
        for (ty, k, k_v) in [
            (GgmlType::Q4_K, 1280, 0),
            (GgmlType::Q5_K, 1280, 0),
            (GgmlType::Q4_0, 1280, 0),
            (GgmlType::Q4_0, 1312, 1536),
            (GgmlType::Q8_0, 1280, 0),
            (GgmlType::Q8_0, 1312, 1536),
            (GgmlType::Q6_K, 2048, 0),
            (GgmlType::Q6_K, 4096, 0),
        ] {
            for n in [1, 2, 3] {
                let text = shaped_case(ty.name(), ("f32", 37, n, k, k_v, [1, 1], [1, 1], [0, 1, 2, 3]));
                let (text, plan) = run_case(&ctx, &mut rng, text, &facts, &units);
                assert!(
                    matches!(
                        plan.choice,
                        Choice::MatVec(MatVecPlan {
                            int_dot: true,
                            int_slots: false,
                            ..
                        })
                    ) && plan.a_vec4,
                    "{}: {plan}",
                    text
                );
            }
        }
    }
}

/// The float mat-vec over 16-byte words of f16 and bf16 a, an f16 b read as 8 halves a word
/// and an f32 b as floats; k with a tail past the last word, padded rows of a, broadcast and
/// permuted b, n from 1 to 8; every output against the CPU reference.
#[test]
fn float_mat_vec_reading_b_as_halves_matches_the_cpu() {
    let ctx = context(false);
    let tuning = tuned(&ctx.facts(), "vec_float_vec4=1");
    let mut rng = Rng::new(0x5eed_0018);
    for ty in ["f16", "bf16"] {
        for shape in [
            ("f32", 37, 1, 256, 0, [1, 1], [1, 1], [0, 1, 2, 3]),
            ("f32", 64, 2, 520, 768, [1, 1], [1, 1], [0, 1, 2, 3]),
            ("f16", 19, 3, 1000, 0, [1, 1], [1, 1], [0, 1, 2, 3]),
            ("f32", 33, 5, 2568, 0, [2, 1], [1, 2], [0, 2, 1, 3]),
            ("f32", 8, 8, 776, 1024, [2, 3], [2, 1], [0, 1, 2, 3]),
        ] {
            let (text, plan) = run_case(&ctx, &mut rng, shaped_case(ty, shape), &ctx.facts(), &tuning);
            assert!(
                matches!(plan.choice, Choice::MatVec(MatVecPlan { int_dot: false, .. })) && plan.a_vec4,
                "{}: {plan}",
                text
            );
            assert!(plan.convert_b.is_none(), "{}: {plan}", text);
        }
    }
}

/// mxfp4 and nvfp4 in the integer mat-vec (`vec_int_fp4=1`): mxfp4's 17-byte blocks read at
/// any byte (rows of an odd number of blocks start at odd bytes), nvfp4's four scales a block,
/// broadcast and permuted b in f32 and f16, n from 1 to 8, with and without subgroups, with the
/// prefetch, with the levels from the workgroup table; every output against the CPU reference.
#[test]
fn integer_mat_vec_reads_the_fp4_formats() {
    let ctx = context(false);
    let device = ctx.facts();
    let bare = without_subgroups(device);
    let settings = [
        (device, tuned(&device, "vec_int_fp4=1")),
        (
            bare,
            tuned(
                &device,
                "vec_int_fp4=1,vec_int_rows=3/3,vec_int_groups=2/2,vec_int_lut=1",
            ),
        ),
        (
            device,
            tuned(&device, "vec_int_fp4=1,vec_int_prefetch=all,vec_int_lut=1"),
        ),
    ];
    let mut rng = Rng::new(0x5eed_0019);
    let mut runs = 0;
    for (ty, ks) in [
        ("mxfp4", [96, 544, 1056, 2560, 736]),
        ("nvfp4", [64, 576, 1088, 2560, 768]),
    ] {
        for (facts, tuning) in settings {
            for ((b_ty, m, n, bs, nr, per), k) in [
                ("f32", 37, 1, [1, 1], [1, 1], [0, 1, 2, 3]),
                ("f32", 64, 2, [1, 1], [1, 1], [0, 1, 2, 3]),
                ("f16", 19, 3, [2, 1], [1, 2], [0, 2, 1, 3]),
                ("f32", 33, 5, [1, 1], [1, 1], [0, 1, 2, 3]),
                ("f32", 8, 8, [2, 3], [2, 1], [0, 1, 2, 3]),
            ]
            .into_iter()
            .zip(ks)
            {
                let text = shaped_case(ty, (b_ty, m, n, k, 0, bs, nr, per));
                let (text, plan) = run_case(&ctx, &mut rng, text, &facts, &tuning);
                runs += 1;
                // The levels from the workgroup table where the knob asks for it (its default:
                // on GPUs, not on CPU adapters).
                let table = tuning.vec_int_lut;
                assert!(
                    matches!(plan.choice, Choice::MatVec(MatVecPlan { int_dot: true, level_table, .. }) if level_table == table),
                    "{}: {plan}",
                    text
                );
            }
        }
    }
    assert_eq!(runs, 30);
}

/// `facts`' profile with `overrides` (`name=value,…`) on top, as a context makes its tuning.
fn tuned(facts: &DeviceFacts, overrides: &str) -> MulMatTuning {
    let mut t = profiles::mul_mat(facts.class);
    t.apply(overrides).unwrap_or_else(|e| panic!("{overrides}: {e}"));
    t
}

/// A context with these MUL_MAT knobs on top of its profile.
fn context_with(knobs: &str) -> GpuContext {
    context(false)
        .with_tuning(Overrides::parse(knobs, "").expect("knobs parse"))
        .expect("a context")
}

/// A context whose integer mat-vec quantizes b in its workgroup (the GPUs' default for small
/// k, off on CPU adapters): where the fused SWIGLU and RMS_NORM run in one dispatch.
fn b_in_workgroup_context() -> GpuContext {
    context_with("vec_int_b_wg_max_k=2048")
}

/// The contexts the fused ops run in: b quantized in the mat-vec's workgroups (where the shape
/// allows), and by the quantize pass, which then applies the op.
fn fused_contexts() -> [(&'static str, GpuContext); 2] {
    [
        ("in the workgroup", b_in_workgroup_context()),
        ("in the pass", context_with("vec_int_b_wg_max_k=0")),
    ]
}

/// The dispatches a fused plan records: the mat-vec, and its quantize pass if it has one;
/// checks the pass applies the op where it runs.
fn fused_dispatches(plan: &mul_mat::MulMatPlan, what: &str) -> u64 {
    assert!(plan.applies_prologue(), "{what}: {plan}");
    match &plan.quantize_b {
        Some(q) => {
            assert!(q.prologue && !plan.prologue_in_workgroup(), "{what}: {plan}");
            2
        }
        None => {
            assert!(plan.prologue_in_workgroup(), "{what}: {plan}");
            1
        }
    }
}

/// A context whose planner fuses nothing into the mat-vec: b quantized by a pass that does not
/// apply the ops.
fn unfused_context() -> GpuContext {
    context_with("vec_int_b_wg_max_k=0,vec_int_pass_swiglu=false,vec_int_pass_rms_norm=false")
}

/// An error for bad operands: invalid, or unsupported.
fn assert_refused(err: &ggml_dawn::Error, what: &str) {
    assert!(
        matches!(
            err,
            ggml_dawn::Error::InvalidOperands(_) | ggml_dawn::Error::Unsupported(_)
        ),
        "{what}: {err}"
    );
}

/// `a × swiglu(b)` with the integer mat-vec quantizing b in its workgroup (off on CPU adapters
/// by default) or in its pass: the fused plan gives the bytes of SWIGLU then MUL_MAT, and the
/// CPU's result.
#[test]
fn mul_mat_swiglu_fused_matches_the_two_ops() {
    for (path, ctx) in fused_contexts() {
        swiglu_fused_matches_the_two_ops(&ctx, path);
    }
}

fn swiglu_fused_matches_the_two_ops(ctx: &GpuContext, path: &str) {
    let mut rng = Rng::new(0x5eed_0a11);
    // (a type, k, m, n, b's column stride in elements past 2k): SmolLM2's down projection,
    // columns with room between them, q4_K's super-blocks (in 16-element slots at n = 4), a
    // k past the workgroup's quantization.
    let shapes = [
        (GgmlType::Q4_1, 1536, 576, 1, 0),
        (GgmlType::Q4_0, 256, 70, 2, 8),
        (GgmlType::Q8_0, 64, 9, 1, 4),
        (GgmlType::Q4_K, 512, 33, 2, 0),
        (GgmlType::Q4_K, 256, 20, 4, 0),
        (GgmlType::Q4_0, 4608, 12, 3, 0),
    ];
    for (ty, k, m, n, pad) in shapes {
        let what = format!("{path}: {ty} k={k} m={m} n={n} pad={pad}");
        let a_values: Vec<f32> = (0..k * m).map(|_| rng.uniform(-1.0, 1.0)).collect();
        let a = HostTensor::from_f32(ty, [k, m, 1, 1], &a_values).unwrap();
        let row = 2 * k + pad;
        let storage: Vec<f32> = (0..row * n).map(|_| 2.0 * rng.uniform(-1.0, 1.0)).collect();
        let b_store = ctx.from_f32(GgmlType::F32, [row, n, 1, 1], &storage).unwrap();
        let b = b_store
            .view(Layout {
                ne: [2 * k, n, 1, 1],
                ..*b_store.layout()
            })
            .unwrap();
        let a_dev = ctx.upload(&a).unwrap();
        let before = ctx.stream_counts().dispatches;
        let fused = ctx.empty(GgmlType::F32, [m, n, 1, 1]).unwrap();
        let ran = ctx.mul_mat_swiglu_into(&a_dev, &b, &fused).unwrap();
        let mul_mat::MulMatSwigluPlan::Fused(plan) = &ran else {
            panic!("{what}: {ran}");
        };
        assert!(ran.to_string().contains("SWIGLU"), "{what}: {ran}");
        assert_eq!(
            ctx.stream_counts().dispatches - before,
            fused_dispatches(plan, &what),
            "{what}"
        );
        // The two ops: the SWIGLU's result quantized by the same mat-vec.
        let act = ctx.glu(&b, None, &GluParams::new(GluOp::Swiglu)).unwrap();
        let separate = ctx.mul_mat(&a_dev, &act).unwrap();
        let (got, want) = (ctx.read_f32(&fused).unwrap(), ctx.read_f32(&separate).unwrap());
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{what}: fused against SWIGLU then MUL_MAT"
        );
        // And the CPU reference of both ops.
        let host_b = HostTensor::from_f32(
            GgmlType::F32,
            [2 * k, n, 1, 1],
            &(0..n)
                .flat_map(|c| storage[c * row..c * row + 2 * k].to_vec())
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let act = reference::glu::glu(&host_b, None, &GluParams::new(GluOp::Swiglu)).unwrap();
        let act = HostTensor::from_f32(GgmlType::F32, [k, n, 1, 1], &act).unwrap();
        let cpu = reference::mul_mat::mul_mat(&a, &act).unwrap();
        metric::check(&cpu, &got, 5e-4).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    // An f16 b: the SWIGLU's own kernel rounds its result to f16, so the two ops run.
    let a = ctx.from_f32(GgmlType::Q8_0, [64, 5, 1, 1], &[0.25; 320]).unwrap();
    let values: Vec<f32> = (0..128).map(|i| (i % 7) as f32 - 3.0).collect();
    let b = ctx.from_f32(GgmlType::F16, [128, 1, 1, 1], &values).unwrap();
    let dst = ctx.empty(GgmlType::F32, [5, 1, 1, 1]).unwrap();
    let ran = ctx.mul_mat_swiglu_into(&a, &b, &dst).unwrap();
    assert!(matches!(ran, mul_mat::MulMatSwigluPlan::Separate(..)), "f16 b: {ran}");
}

/// Where the fused kernel does not apply (a pass that does not apply the op, f16 b of many
/// columns) the two ops run with the same result; bad operands are errors with nothing
/// recorded.
#[test]
fn mul_mat_swiglu_falls_back_and_refuses_bad_operands() {
    let ctx = unfused_context();
    let a = ctx.from_f32(GgmlType::Q8_0, [64, 5, 1, 1], &[0.25; 320]).unwrap();
    for (b_ty, n) in [(GgmlType::F32, 1), (GgmlType::F16, 12)] {
        let values: Vec<f32> = (0..128 * n).map(|i| (i % 7) as f32 - 3.0).collect();
        let b = ctx.from_f32(b_ty, [128, n, 1, 1], &values).unwrap();
        let dst = ctx.empty(GgmlType::F32, [5, n, 1, 1]).unwrap();
        let ran = ctx.mul_mat_swiglu_into(&a, &b, &dst).unwrap();
        assert!(matches!(ran, mul_mat::MulMatSwigluPlan::Separate(..)), "{ran}");
        let act = ctx.glu(&b, None, &GluParams::new(GluOp::Swiglu)).unwrap();
        let want = ctx.read_f32(&ctx.mul_mat(&a, &act).unwrap()).unwrap();
        assert_eq!(ctx.read_f32(&dst).unwrap(), want);
    }
    let b = ctx.from_f32(GgmlType::F32, [128, 1, 1, 1], &[1.0; 128]).unwrap();
    let odd = ctx.from_f32(GgmlType::F32, [127, 1, 1, 1], &[1.0; 127]).unwrap();
    let short_k = ctx.from_f32(GgmlType::F32, [64, 1, 1, 1], &[1.0; 64]).unwrap();
    let strided = b
        .view(Layout {
            ne: [64, 1, 1, 1],
            nb: [8, 512, 512, 512],
            ..*b.layout()
        })
        .unwrap();
    let before = ctx.stream_counts().dispatches;
    for (what, a_op, b_op) in [
        ("odd rows", &a, &odd),
        ("k of the halves not a's", &a, &short_k),
        ("rows not contiguous", &a, &strided),
        ("a and b swapped", &b, &a),
    ] {
        let err = ctx.mul_mat_swiglu(a_op, b_op).expect_err(what);
        assert_refused(&err, what);
    }
    // An output over the input: refused.
    let over = b
        .view(Layout::contiguous(GgmlType::F32, [5, 1, 1, 1]).unwrap())
        .unwrap();
    assert!(ctx.mul_mat_swiglu_into(&a, &b, &over).is_err());
    assert_eq!(ctx.stream_counts().dispatches, before, "nothing recorded");
}

/// `a × (rms_norm(x (+ r)) · w)` with the integer mat-vec quantizing b in its workgroup or in
/// its pass: the fused plan (each workgroup that quantizes b norming its columns as RMS_NORM's
/// kernel would) gives the bytes of RMS_NORM then MUL_MAT, and the CPU's result; with a
/// residual, its sum stored whole.
#[test]
fn rms_norm_mul_mat_fused_matches_the_two_ops() {
    for (path, ctx) in fused_contexts() {
        rms_norm_fused_matches_the_two_ops(&ctx, path);
    }
}

fn rms_norm_fused_matches_the_two_ops(ctx: &GpuContext, path: &str) {
    let mut rng = Rng::new(0x5eed_0a12);
    // (a type, k, m, n, x's column stride in elements past k, with a residual): SmolLM2's
    // q/k/v and gate/up, columns with room between them (an odd stride: a column at a time),
    // q4_K's slots at n = 4, Llama-3-8B's k (the norm's 256- and 1024-thread groups).
    let shapes = [
        (GgmlType::Q4_1, 576, 960, 1, 0, true),
        (GgmlType::Q4_1, 576, 300, 1, 0, false),
        (GgmlType::Q8_0, 256, 70, 2, 8, true),
        (GgmlType::Q4_0, 64, 9, 2, 0, false),
        (GgmlType::Q4_K, 512, 33, 1, 4, true),
        (GgmlType::Q4_0, 96, 7, 3, 1, true),
        (GgmlType::Q4_K, 256, 20, 4, 0, true),
        (GgmlType::Q4_0, 4096, 12, 1, 0, true),
        (GgmlType::Q6_K, 14336, 4, 1, 0, false),
    ];
    let eps = 1e-5;
    for (ty, k, m, n, pad, with_residual) in shapes {
        let what = format!("{path}: {ty} k={k} m={m} n={n} pad={pad} residual={with_residual}");
        let a_values: Vec<f32> = (0..k * m).map(|_| rng.uniform(-1.0, 1.0)).collect();
        let a = HostTensor::from_f32(ty, [k, m, 1, 1], &a_values).unwrap();
        let a_dev = ctx.upload(&a).unwrap();
        let row = k + pad;
        let x_values: Vec<f32> = (0..row * n).map(|_| rng.uniform(-3.0, 3.0)).collect();
        let r_values: Vec<f32> = (0..k * n).map(|_| rng.uniform(-1.0, 1.0)).collect();
        let w_values: Vec<f32> = (0..k).map(|_| rng.uniform(0.5, 1.5)).collect();
        let x_store = ctx.from_f32(GgmlType::F32, [row, n, 1, 1], &x_values).unwrap();
        let x = x_store
            .view(Layout {
                ne: [k, n, 1, 1],
                ..*x_store.layout()
            })
            .unwrap();
        let r = ctx.from_f32(GgmlType::F32, [k, n, 1, 1], &r_values).unwrap();
        let w = ctx.from_f32(GgmlType::F32, [k, 1, 1, 1], &w_values).unwrap();
        let sum = ctx.empty(GgmlType::F32, [k, n, 1, 1]).unwrap();
        let residual = with_residual.then_some(mul_mat::Residual {
            residual: &r,
            sum: &sum,
        });
        let fused = ctx.empty(GgmlType::F32, [m, n, 1, 1]).unwrap();
        let before = ctx.stream_counts().dispatches;
        let ran = ctx
            .rms_norm_mul_mat_into(&a_dev, &x, residual, &w, eps, &fused)
            .unwrap();
        let mul_mat::NormMulMatPlan::Fused(plan) = &ran else {
            panic!("{what}: {ran}");
        };
        assert!(ran.to_string().contains("RMS_NORM"), "{what}: {ran}");
        assert_eq!(
            ctx.stream_counts().dispatches - before,
            fused_dispatches(plan, &what),
            "{what}"
        );
        // The two ops.
        let (want_sum, normed) = if with_residual {
            let (s, y) = ctx.add_rms_norm_mul_add(&x, &r, Some(&w), None, eps).unwrap();
            (Some(s), y)
        } else {
            (None, ctx.rms_norm_mul_add(&x, Some(&w), None, eps).unwrap())
        };
        let separate = ctx.read_f32(&ctx.mul_mat(&a_dev, &normed).unwrap()).unwrap();
        let got = ctx.read_f32(&fused).unwrap();
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            separate.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{what}: fused against RMS_NORM then MUL_MAT"
        );
        if let Some(s) = want_sum {
            assert_eq!(
                ctx.read_f32(&sum).unwrap(),
                ctx.read_f32(&s).unwrap(),
                "{what}: the sum"
            );
        }
        // The CPU: the norm in f64, then MUL_MAT's reference.
        let xs: Vec<f32> = (0..n)
            .flat_map(|c| (0..k).map(move |i| (c, i)))
            .map(|(c, i)| x_values[c * row + i] + if with_residual { r_values[c * k + i] } else { 0.0 })
            .collect();
        let normed: Vec<f32> = xs
            .chunks(k)
            .flat_map(|col| {
                let mean = col.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / k as f64;
                let scale = 1.0 / (mean + f64::from(eps)).sqrt();
                col.iter()
                    .zip(&w_values)
                    .map(move |(&v, &wv)| (f64::from(v) * scale) as f32 * wv)
                    .collect::<Vec<_>>()
            })
            .collect();
        let b = HostTensor::from_f32(GgmlType::F32, [k, n, 1, 1], &normed).unwrap();
        let cpu = reference::mul_mat::mul_mat(&a, &b).unwrap();
        metric::check(&cpu, &got, 5e-4).unwrap_or_else(|e| panic!("{what}: against the CPU: {e}"));
    }
}

/// On a device without subgroups RMS_NORM sums a column's squares by a tree in workgroup
/// memory: the fused norm repeats that tree, in the mat-vec's workgroups and in the quantize
/// pass, and still gives the two ops' bytes.
#[test]
fn rms_norm_mul_mat_fused_without_subgroups_matches_the_two_ops() {
    let mut rng = Rng::new(0x5eed_0a13);
    for (path, ctx) in fused_contexts() {
        let env = ctx.env().with_facts(without_subgroups(ctx.facts())).unwrap();
        // SmolLM2's k with a residual, Llama-3-8B's without.
        for (k, m, with_residual) in [(576, 40, true), (4096, 8, false)] {
            let what = format!("{path}: k={k} m={m} residual={with_residual}");
            let values =
                |n: usize, lo: f32, hi: f32, rng: &mut Rng| (0..n).map(|_| rng.uniform(lo, hi)).collect::<Vec<_>>();
            let a = ctx
                .from_f32(GgmlType::Q4_0, [k, m, 1, 1], &values(k * m, -1.0, 1.0, &mut rng))
                .unwrap();
            let x = ctx
                .from_f32(GgmlType::F32, [k, 1, 1, 1], &values(k, -3.0, 3.0, &mut rng))
                .unwrap();
            let r = ctx
                .from_f32(GgmlType::F32, [k, 1, 1, 1], &values(k, -1.0, 1.0, &mut rng))
                .unwrap();
            let w = ctx
                .from_f32(GgmlType::F32, [k, 1, 1, 1], &values(k, 0.5, 1.5, &mut rng))
                .unwrap();
            let (sum, want_sum) = (
                ctx.empty(GgmlType::F32, [k, 1, 1, 1]).unwrap(),
                ctx.empty(GgmlType::F32, [k, 1, 1, 1]).unwrap(),
            );
            let (fused, normed, separate) = (
                ctx.empty(GgmlType::F32, [m, 1, 1, 1]).unwrap(),
                ctx.empty(GgmlType::F32, [k, 1, 1, 1]).unwrap(),
                ctx.empty(GgmlType::F32, [m, 1, 1, 1]).unwrap(),
            );
            let mut stream = ctx.stream().unwrap();
            let residual = with_residual.then_some(mul_mat::Residual {
                residual: &r,
                sum: &sum,
            });
            let plan = mul_mat::rms_norm_mul_mat(&env, &mut stream, &a, &x, residual, &w, 1e-5, &fused)
                .unwrap()
                .unwrap_or_else(|| panic!("{what}: not fused"));
            assert!(
                matches!(plan.problem.b_prologue, mul_mat::BPrologue::RmsNorm { reduce, .. } if !reduce.subgroups),
                "{what}: {plan}"
            );
            let norm = if with_residual {
                norm::add_rms_norm_mul_add(&env, &mut stream, &x, &r, &want_sum, Some(&w), None, &normed, 1e-5)
            } else {
                norm::rms_norm_mul_add(&env, &mut stream, &x, Some(&w), None, &normed, 1e-5)
            };
            assert!(!norm.unwrap().rows.subgroups, "{what}");
            mul_mat::mul_mat(&env, &mut stream, &a, &normed, &separate).unwrap();
            let bits = |t: &ggml_dawn::DeviceTensor, stream: &mut _| {
                let values = ctx.read_after(stream, t).unwrap().to_f32().unwrap();
                values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            };
            assert_eq!(bits(&fused, &mut stream), bits(&separate, &mut stream), "{what}");
            if with_residual {
                assert_eq!(bits(&sum, &mut stream), bits(&want_sum, &mut stream), "{what}: the sum");
            }
        }
    }
}

/// Where the fused kernel does not apply (a pass that does not apply the op) the two ops run;
/// bad operands are errors with nothing recorded.
#[test]
fn rms_norm_mul_mat_falls_back_and_refuses_bad_operands() {
    let ctx = unfused_context();
    let a = ctx.from_f32(GgmlType::Q8_0, [64, 5, 1, 1], &[0.25; 320]).unwrap();
    let x = ctx
        .from_f32(
            GgmlType::F32,
            [64, 1, 1, 1],
            &(0..64).map(|i| i as f32 - 30.0).collect::<Vec<_>>(),
        )
        .unwrap();
    let w = ctx.from_f32(GgmlType::F32, [64, 1, 1, 1], &[1.5; 64]).unwrap();
    let ran_dst = ctx.empty(GgmlType::F32, [5, 1, 1, 1]).unwrap();
    let ran = ctx.rms_norm_mul_mat_into(&a, &x, None, &w, 1e-6, &ran_dst).unwrap();
    assert!(matches!(ran, mul_mat::NormMulMatPlan::Separate(..)), "{ran}");
    let want = ctx
        .mul_mat(&a, &ctx.rms_norm_mul_add(&x, Some(&w), None, 1e-6).unwrap())
        .unwrap();
    assert_eq!(ctx.read_f32(&ran_dst).unwrap(), ctx.read_f32(&want).unwrap());
    let f16_x = ctx.from_f32(GgmlType::F16, [64, 1, 1, 1], &[1.0; 64]).unwrap();
    let short_w = ctx.from_f32(GgmlType::F32, [48, 1, 1, 1], &[1.0; 48]).unwrap();
    let short_x = ctx.from_f32(GgmlType::F32, [32, 1, 1, 1], &[1.0; 32]).unwrap();
    let before = ctx.stream_counts().dispatches;
    for (what, x_op, w_op, eps) in [
        ("f16 x", &f16_x, &w, 1e-6),
        ("a weight that does not repeat over x", &x, &short_w, 1e-6),
        ("k of x not a's", &short_x, &w, 1e-6),
        ("eps NaN", &x, &w, f32::NAN),
    ] {
        let err = ctx.rms_norm_mul_mat(&a, x_op, w_op, eps).expect_err(what);
        assert_refused(&err, what);
    }
    // The sum over an input, or over dst: refused.
    let r = ctx.from_f32(GgmlType::F32, [64, 1, 1, 1], &[1.0; 64]).unwrap();
    let dst = ctx.empty(GgmlType::F32, [5, 1, 1, 1]).unwrap();
    for (what, sum) in [("the sum over x", &x), ("the sum over the residual", &r)] {
        let residual = Some(mul_mat::Residual { residual: &r, sum });
        assert!(
            ctx.rms_norm_mul_mat_into(&a, &x, residual, &w, 1e-6, &dst).is_err(),
            "{what}"
        );
    }
    assert_eq!(ctx.stream_counts().dispatches, before, "nothing recorded");
}

/// i32 values on the device.
fn i32_tensor(ctx: &GpuContext, values: &[i32]) -> ggml_dawn::DeviceTensor {
    ctx.upload(&HostTensor {
        layout: Layout::contiguous(GgmlType::I32, [values.len(), 1, 1, 1]).unwrap(),
        data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    })
    .unwrap()
}

/// A q/k/v projection with its norm before it and its ROPE and KV-cache write after it: the
/// fused mat-vec (one dispatch, or two with the quantize pass) gives the bytes of the ops one
/// after the other, both in the result and in the cache, whatever the cache's type, the
/// frequency factors, YaRN's ramp, a partial rotation or several tokens.
#[test]
fn rms_norm_mul_mat_rope_set_rows_fused_matches_the_ops() {
    use ggml_dawn::ops::mul_mat::{NormMulMatRopePlan, RopeSetRows};
    use ggml_dawn::reference::{RopeMode, RopeParams};
    let mut rng = Rng::new(0x5eed_0a14);
    // (a type, k, q heads, kv heads, head dim, n_dims, tokens, cache type, freq factors, YaRN,
    // residual): SmolLM2's, Llama-3-8B's head size, a partial rotation.
    let shapes = [
        (GgmlType::Q4_1, 576, 9, 3, 64, 64, 1, GgmlType::F16, false, false, true),
        (GgmlType::Q8_0, 256, 4, 2, 128, 128, 1, GgmlType::F32, true, true, false),
        (GgmlType::Q4_0, 128, 2, 1, 64, 32, 2, GgmlType::F16, false, true, true),
        (GgmlType::Q4_K, 512, 4, 2, 64, 64, 1, GgmlType::F16, true, false, false),
    ];
    for (path, ctx) in fused_contexts() {
        for (ty, k, n_head, n_kv, d, n_dims, n, cache_ty, ff, yarn, with_residual) in shapes {
            let what = format!(
                "{path}: {ty} k={k} heads={n_head}+{n_kv} d={d} n_dims={n_dims} n={n} {cache_ty} ff={ff} yarn={yarn}"
            );
            let m = (n_head + 2 * n_kv) * d;
            let values =
                |len: usize, lo: f32, hi: f32, rng: &mut Rng| (0..len).map(|_| rng.uniform(lo, hi)).collect::<Vec<_>>();
            let a = ctx
                .from_f32(ty, [k, m, 1, 1], &values(k * m, -1.0, 1.0, &mut rng))
                .unwrap();
            let x = ctx
                .from_f32(GgmlType::F32, [k, n, 1, 1], &values(k * n, -2.0, 2.0, &mut rng))
                .unwrap();
            let r = ctx
                .from_f32(GgmlType::F32, [k, n, 1, 1], &values(k * n, -1.0, 1.0, &mut rng))
                .unwrap();
            let w = ctx
                .from_f32(GgmlType::F32, [k, 1, 1, 1], &values(k, 0.5, 1.5, &mut rng))
                .unwrap();
            let factors = ctx
                .from_f32(
                    GgmlType::F32,
                    [n_dims / 2, 1, 1, 1],
                    &values(n_dims / 2, 1.0, 4.0, &mut rng),
                )
                .unwrap();
            let positions: Vec<i32> = (0..n as i32).map(|t| 37 + 5 * t).collect();
            let pos = i32_tensor(&ctx, &positions);
            let ids: Vec<i32> = (0..n as i32).map(|t| 2 + 3 * t).collect();
            let ids = i32_tensor(&ctx, &ids);
            let mut params = RopeParams::new(n_dims, RopeMode::Normal);
            if yarn {
                (params.freq_scale, params.ext_factor, params.n_ctx_orig) = (0.25, 1.0, 4096);
                (params.beta_fast, params.beta_slow, params.attn_factor) = (32.0, 1.0, 1.0);
            }
            let width = 2 * n_kv * d;
            let run = |fused: bool| {
                let dst = ctx.empty(GgmlType::F32, [m, n, 1, 1]).unwrap();
                let sum = ctx.empty(GgmlType::F32, [k, n, 1, 1]).unwrap();
                let cache = ctx.zeros(cache_ty, [width, 16, 1, 1]).unwrap();
                let residual = with_residual.then_some(mul_mat::Residual {
                    residual: &r,
                    sum: &sum,
                });
                let rope = RopeSetRows {
                    heads: n_head + n_kv,
                    head_dim: d,
                    pos: &pos,
                    freq_factors: ff.then_some(&factors),
                    params: &params,
                    kv_start: n_head * d,
                    cache: &cache,
                    ids: &ids,
                };
                let before = ctx.stream_counts().dispatches;
                if fused {
                    let ran = ctx
                        .rms_norm_mul_mat_rope_set_rows_into(&a, &x, residual, &w, 1e-5, &dst, rope)
                        .unwrap();
                    let NormMulMatRopePlan::Fused(plan) = &ran else {
                        panic!("{what}: {ran}");
                    };
                    assert!(
                        plan.applies_epilogue() && ran.to_string().contains("ROPE"),
                        "{what}: {ran}"
                    );
                    assert_eq!(
                        ctx.stream_counts().dispatches - before,
                        fused_dispatches(plan, &what),
                        "{what}"
                    );
                } else {
                    ctx.rms_norm_mul_mat_into(&a, &x, residual, &w, 1e-5, &dst).unwrap();
                    let heads = dst.view(rope.heads_layout(dst.layout()).unwrap()).unwrap();
                    let rows = dst.view(rope.rows_layout(dst.layout()).unwrap()).unwrap();
                    ctx.rope_into(&heads, &pos, rope.freq_factors, &heads, &params).unwrap();
                    ctx.set_rows(&cache, &rows, &ids).unwrap();
                }
                let bits = |t: &ggml_dawn::DeviceTensor| {
                    let h = ctx.read(t).unwrap();
                    h.data
                };
                (bits(&dst), bits(&cache), with_residual.then(|| bits(&sum)))
            };
            let (fused, apart) = (run(true), run(false));
            assert!(fused.0 == apart.0, "{what}: the result");
            assert!(fused.1 == apart.1, "{what}: the cache");
            assert!(fused.1.iter().any(|&b| b != 0), "{what}: the cache written");
            assert!(fused.2 == apart.2, "{what}: the sum");
        }
    }
}

/// Where the fused epilogue does not apply (NeoX pairs, i64 ids, the knob off) the ops run with
/// the same result; bad operands (heads past the result, a cache row of another width, NaN
/// parameters, the cache over the result) are errors with nothing recorded.
#[test]
fn rms_norm_mul_mat_rope_set_rows_falls_back_and_refuses_bad_operands() {
    use ggml_dawn::ops::mul_mat::{NormMulMatRopePlan, RopeSetRows};
    use ggml_dawn::reference::{RopeMode, RopeParams};
    let (k, d) = (64, 8);
    let m = 4 * d;
    let mut rng = Rng::new(0x5eed_0a15);
    let values = |len: usize, rng: &mut Rng| (0..len).map(|_| rng.uniform(-1.0, 1.0)).collect::<Vec<_>>();
    for (what, knobs, mode, ids_i64) in [
        ("NeoX pairs", "", RopeMode::Neox, false),
        ("i64 ids", "", RopeMode::Normal, true),
        ("the knob off", "vec_rope_set_rows=false", RopeMode::Normal, false),
    ] {
        let ctx = context_with(knobs);
        let a = ctx
            .from_f32(GgmlType::Q8_0, [k, m, 1, 1], &values(k * m, &mut rng))
            .unwrap();
        let x = ctx.from_f32(GgmlType::F32, [k, 1, 1, 1], &values(k, &mut rng)).unwrap();
        let w = ctx.from_f32(GgmlType::F32, [k, 1, 1, 1], &[1.0; 64]).unwrap();
        let pos = i32_tensor(&ctx, &[9]);
        let ids = if ids_i64 {
            ctx.upload(&HostTensor {
                layout: Layout::contiguous(GgmlType::I64, [1, 1, 1, 1]).unwrap(),
                data: 3i64.to_le_bytes().to_vec(),
            })
            .unwrap()
        } else {
            i32_tensor(&ctx, &[3])
        };
        let params = RopeParams::new(d, mode);
        let run = |fused: bool| {
            let dst = ctx.empty(GgmlType::F32, [m, 1, 1, 1]).unwrap();
            let cache = ctx.zeros(GgmlType::F16, [2 * d, 4, 1, 1]).unwrap();
            let rope = RopeSetRows {
                heads: 3,
                head_dim: d,
                pos: &pos,
                freq_factors: None,
                params: &params,
                kv_start: 2 * d,
                cache: &cache,
                ids: &ids,
            };
            if fused {
                let ran = ctx
                    .rms_norm_mul_mat_rope_set_rows_into(&a, &x, None, &w, 1e-6, &dst, rope)
                    .unwrap();
                assert!(matches!(ran, NormMulMatRopePlan::Separate(..)), "{what}: {ran}");
            } else {
                ctx.rms_norm_mul_mat_into(&a, &x, None, &w, 1e-6, &dst).unwrap();
                let heads = dst.view(rope.heads_layout(dst.layout()).unwrap()).unwrap();
                let rows = dst.view(rope.rows_layout(dst.layout()).unwrap()).unwrap();
                ctx.rope_into(&heads, &pos, None, &heads, &params).unwrap();
                ctx.set_rows(&cache, &rows, &ids).unwrap();
            }
            (ctx.read(&dst).unwrap().data, ctx.read(&cache).unwrap().data)
        };
        assert!(run(true) == run(false), "{what}");
    }

    let ctx = context(false);
    let a = ctx
        .from_f32(GgmlType::Q8_0, [k, m, 1, 1], &values(k * m, &mut rng))
        .unwrap();
    let x = ctx.from_f32(GgmlType::F32, [k, 1, 1, 1], &values(k, &mut rng)).unwrap();
    let w = ctx.from_f32(GgmlType::F32, [k, 1, 1, 1], &[1.0; 64]).unwrap();
    let pos = i32_tensor(&ctx, &[9]);
    let dst = ctx.empty(GgmlType::F32, [m, 1, 1, 1]).unwrap();
    let cache = ctx.zeros(GgmlType::F16, [2 * d, 4, 1, 1]).unwrap();
    let narrow = ctx.zeros(GgmlType::F16, [d, 4, 1, 1]).unwrap();
    let good = RopeParams::new(d, RopeMode::Normal);
    let mut nan = good;
    nan.freq_base = f32::NAN;
    let over_dst = dst
        .view(Layout::contiguous(GgmlType::F32, [2 * d, 1, 1, 1]).unwrap())
        .unwrap();
    let before = ctx.stream_counts().dispatches;
    for (what, heads, kv_start, c, params) in [
        ("heads past the result", 5, 2 * d, &cache, &good),
        ("the window past the result", 3, 3 * d, &cache, &good),
        ("NaN freq_base", 3, 2 * d, &cache, &nan),
        ("the cache over the result", 3, 2 * d, &over_dst, &good),
    ] {
        let rope = RopeSetRows {
            heads,
            head_dim: d,
            pos: &pos,
            freq_factors: None,
            params,
            kv_start,
            cache: c,
            ids: &pos,
        };
        let err = ctx
            .rms_norm_mul_mat_rope_set_rows_into(&a, &x, None, &w, 1e-6, &dst, rope)
            .expect_err(what);
        if what == "the cache over the result" {
            assert!(
                matches!(err, ggml_dawn::Error::Overlap(_) | ggml_dawn::Error::InvalidOperands(_)),
                "{what}: {err}"
            );
        } else {
            assert_refused(&err, what);
        }
    }
    // A cache row narrower than the window is a window of its width: the rows it names.
    let rope = RopeSetRows {
        heads: 3,
        head_dim: d,
        pos: &pos,
        freq_factors: None,
        params: &good,
        kv_start: 3 * d + 2,
        cache: &narrow,
        ids: &pos,
    };
    assert!(
        ctx.rms_norm_mul_mat_rope_set_rows_into(&a, &x, None, &w, 1e-6, &dst, rope)
            .is_err()
    );
    assert_eq!(ctx.stream_counts().dispatches, before, "nothing recorded");
}

/// Without subgroups the mat-vec reduces its rows by a tree, each row stored by its group's
/// first thread: the ROPE and KV write after it still give the ops' bytes.
#[test]
fn rms_norm_mul_mat_rope_set_rows_without_subgroups_matches_the_ops() {
    use ggml_dawn::ops::mul_mat::RopeSetRows;
    use ggml_dawn::reference::{RopeMode, RopeParams};
    let mut rng = Rng::new(0x5eed_0a16);
    let (k, d, heads, kv_heads) = (576, 64, 3, 1);
    let m = (heads + 2 * kv_heads) * d;
    for (path, ctx) in fused_contexts() {
        let env = ctx.env().with_facts(without_subgroups(ctx.facts())).unwrap();
        let values = |len: usize, rng: &mut Rng| (0..len).map(|_| rng.uniform(-1.0, 1.0)).collect::<Vec<_>>();
        let a = ctx
            .from_f32(GgmlType::Q4_1, [k, m, 1, 1], &values(k * m, &mut rng))
            .unwrap();
        let x = ctx.from_f32(GgmlType::F32, [k, 1, 1, 1], &values(k, &mut rng)).unwrap();
        let w = ctx.from_f32(GgmlType::F32, [k, 1, 1, 1], &values(k, &mut rng)).unwrap();
        let pos = i32_tensor(&ctx, &[11]);
        let params = RopeParams::new(d, RopeMode::Normal);
        let mut stream = ctx.stream().unwrap();
        let mut run = |fused: bool| {
            let dst = ctx.empty(GgmlType::F32, [m, 1, 1, 1]).unwrap();
            let cache = ctx.zeros(GgmlType::F16, [2 * kv_heads * d, 16, 1, 1]).unwrap();
            let rope = RopeSetRows {
                heads: heads + kv_heads,
                head_dim: d,
                pos: &pos,
                freq_factors: None,
                params: &params,
                kv_start: heads * d,
                cache: &cache,
                ids: &pos,
            };
            if fused {
                let plan = mul_mat::rms_norm_mul_mat_rope_set_rows(
                    &env,
                    &mut stream,
                    &a,
                    &x,
                    None,
                    &w,
                    1e-5,
                    &dst,
                    Some(rope),
                )
                .unwrap()
                .unwrap_or_else(|| panic!("{path}: not fused"));
                assert!(
                    plan.applies_epilogue() && matches!(&plan.choice, Choice::MatVec(v) if !v.subgroups),
                    "{path}: {plan}"
                );
            } else {
                let normed = ctx.empty(GgmlType::F32, [k, 1, 1, 1]).unwrap();
                norm::rms_norm_mul_add(&env, &mut stream, &x, Some(&w), None, &normed, 1e-5).unwrap();
                mul_mat::mul_mat(&env, &mut stream, &a, &normed, &dst).unwrap();
                let h = dst.view(rope.heads_layout(dst.layout()).unwrap()).unwrap();
                let rows = dst.view(rope.rows_layout(dst.layout()).unwrap()).unwrap();
                ggml_dawn::ops::rope::rope(&env, &mut stream, &h, &pos, None, &h, &params).unwrap();
                ggml_dawn::ops::rows::set_rows(&env, &mut stream, &cache, &rows, &pos).unwrap();
            }
            let result = ctx.read_after(&mut stream, &dst).unwrap().data;
            (result, ctx.read_after(&mut stream, &cache).unwrap().data)
        };
        let (fused, apart) = (run(true), run(false));
        assert!(fused == apart, "{path}");
    }
}
