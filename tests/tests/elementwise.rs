//! ADD / SUB / MUL / DIV and the GLU family end to end on the adapter (lavapipe in CI): a
//! representative part of upstream's lists (all of them with `DAWN_COMPUTE_FULL_TESTS=1`), both
//! kernel widths, the in-place form, each operand check; then host writes into tensors and views
//! ordered with the recorded ops, and kernels of one's own.

use dawn_compute_tests::full;
use ggml_dawn::error::BackendError;
use ggml_dawn::kernel::Access;
use ggml_dawn::ops::binary::BinaryOp;
use ggml_dawn::ops::glu::{GluOp, GluParams};
use ggml_dawn::ops::write::WritePath;
use ggml_dawn::reference::{self, metric};
use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor, Layout};
use ggml_dawn_bench::case_lists::{DECODER_LISTS, parse_list};
use ggml_dawn_bench::cases::Case;
use ggml_dawn_bench::harness::{self, Status};

const OPS: [&str; 10] = [
    "ADD",
    "SUB",
    "MUL",
    "DIV",
    "REGLU",
    "GEGLU",
    "SWIGLU",
    "SWIGLU_OAI",
    "GEGLU_ERF",
    "GEGLU_QUICK",
];

fn context(no_subgroup_matrix: bool) -> GpuContext {
    GpuContext::new(ContextOptions {
        no_subgroup_matrix,
        ..Default::default()
    })
    .expect("an adapter")
}

fn values(count: usize, seed: usize) -> Vec<f32> {
    (0..count)
        .map(|i| (((i * 7 + seed) % 23) as f32 - 11.0) / 8.0)
        .collect()
}

/// Every listed case of the ops (with `DAWN_COMPUTE_FULL_TESTS=1`), else every fourth of each
/// op's list plus those of each feature (chains, permuted and overlapping sources, views, split,
/// swapped), passes on the adapter, with and without subgroup matrices, as upstream judges it.
#[test]
fn upstream_cases_pass() {
    let mut cases: Vec<Case> = Vec::new();
    for (op, supported, _) in DECODER_LISTS {
        if !OPS.contains(op) {
            continue;
        }
        for (i, case) in parse_list(supported).unwrap().into_iter().enumerate() {
            let text = case.to_string();
            let feature = ["nf=16", "perm1=1", "src_overlap=1", "v=1", "split", "swapped=1"]
                .iter()
                .any(|f| text.contains(f));
            let small = !text.contains("320,320");
            if full() || i % 4 == 0 || (feature && small && i % 2 == 0) {
                cases.push(case);
            }
        }
    }
    assert!(cases.len() > 60, "only {} cases", cases.len());
    for no_sgm in [false, true] {
        let ctx = context(no_sgm);
        for case in &cases {
            let status = harness::test_case(&ctx, case, 3);
            assert!(matches!(status, Status::Ok { .. }), "{case}: {status:?}");
        }
        if !full() {
            break; // the kernels do not use subgroup matrices: one mode in CI
        }
    }
}

/// 16-byte vectors where rows are contiguous and starts and extents whole vectors, scalars for
/// views that break it; both agree with the reference, and so does the in-place form.
#[test]
fn both_widths_and_in_place_agree_with_the_reference() {
    let ctx = context(false);
    let (a_host, b_host) = (
        HostTensor::from_f32(GgmlType::F32, [64, 6, 2, 1], &values(768, 1)).unwrap(),
        // Never zero: DIV's results stay comparable (no 0/0).
        HostTensor::from_f32(
            GgmlType::F32,
            [16, 3, 1, 1],
            &values(48, 5).iter().map(|v| v + 0.0625).collect::<Vec<_>>(),
        )
        .unwrap(),
    );
    let (a, b) = (ctx.upload(&a_host).unwrap(), ctx.upload(&b_host).unwrap());
    for op in BinaryOp::ALL {
        let dst = ctx.filled(*a.layout(), 0xFF).unwrap();
        let plan = ctx.binary_into(op, &a, &b, &dst).unwrap();
        assert_eq!(plan.width, 4, "{plan}");
        let want = reference::binary(op, &a_host, &b_host).unwrap();
        assert_eq!(ctx.read_f32(&dst).unwrap(), want, "{op}");
    }
    // A view starting one element in: scalar loads.
    let storage = ctx.from_f32(GgmlType::F32, [65, 6, 2, 1], &values(780, 2)).unwrap();
    let l = storage.layout();
    let view = storage
        .view(Layout {
            ne: [64, 6, 2, 1],
            offset: 4,
            ..*l
        })
        .unwrap();
    let view_host = ctx.read(&view).unwrap();
    let dst = ctx.filled(*a.layout(), 0xFF).unwrap();
    let plan = ctx.binary_into(BinaryOp::Sub, &view, &b, &dst).unwrap();
    assert_eq!(plan.width, 1, "{plan}");
    let want = reference::binary(BinaryOp::Sub, &view_host, &b_host).unwrap();
    assert_eq!(ctx.read_f32(&dst).unwrap(), want);
    // In place: a op= b, a's bytes only.
    let plan = ctx.binary_into(BinaryOp::Mul, &view, &b, &view).unwrap();
    assert!(plan.problem.in_place);
    let got = ctx.read(&view).unwrap().to_f32().unwrap();
    assert_eq!(got, reference::binary(BinaryOp::Mul, &view_host, &b_host).unwrap());
    // The storage's column 0, outside the view, is untouched.
    let all = ctx.read_f32(&storage).unwrap();
    let before = values(780, 2);
    for row in 0..12 {
        assert_eq!(all[row * 65], before[row * 65]);
    }
}

/// `result` is an operand error (not a device failure) whose message holds each of `words`.
fn invalid(result: Result<impl std::fmt::Debug, BackendError>, words: &[&str]) {
    match result {
        Err(
            e @ (BackendError::InvalidOperands(_)
            | BackendError::Unsupported(_)
            | BackendError::Overlap(_)
            | BackendError::WrongType(_)),
        ) => {
            let m = e.to_string();
            for w in words {
                assert!(m.contains(w), "`{m}` does not say `{w}`");
            }
        }
        other => panic!("expected an operand error with {words:?}, got {other:?}"),
    }
}

/// Each check fires with a message naming the op, the operand and the rule.
#[test]
fn operand_checks_name_the_op_the_operand_and_the_rule() {
    let ctx = context(false);
    let a = ctx.zeros(GgmlType::F32, [8, 4, 1, 1]).unwrap();
    let b3 = ctx.zeros(GgmlType::F32, [3, 1, 1, 1]).unwrap();
    invalid(ctx.add(&a, &b3), &["ADD", "b", "repeat"]);
    let q = ctx.zeros(GgmlType::Q8_0, [32, 1, 1, 1]).unwrap();
    invalid(ctx.mul(&q, &q), &["MUL", "a", "q8_0"]);
    let small = ctx.zeros(GgmlType::F32, [8, 2, 1, 1]).unwrap();
    invalid(
        ctx.binary_into(BinaryOp::Div, &a, &a, &small),
        &["DIV", "dst", "like a"],
    );
    // dst overlapping b (not the in-place form).
    let half = a.narrow(1, 0, 2).unwrap();
    let other = a.narrow(1, 1, 2).unwrap();
    invalid(
        ctx.binary_into(BinaryOp::Sub, &half, &other, &other),
        &["SUB", "overlaps"],
    );
    invalid(
        ctx.binary_into(BinaryOp::Sub, &half, &half, &half),
        &["SUB", "overlaps b"],
    );
    // GLU.
    let swiglu = GluParams::new(GluOp::Swiglu);
    let x = ctx.zeros(GgmlType::F32, [8, 4, 1, 1]).unwrap();
    invalid(ctx.glu(&x, Some(&b3), &swiglu), &["SWIGLU", "b", "must be like a"]);
    let swapped = GluParams {
        swapped: true,
        ..swiglu
    };
    invalid(ctx.glu(&x, Some(&x), &swapped), &["SWIGLU", "swapped", "fused"]);
    let oai = GluParams {
        alpha: f32::NAN,
        ..GluParams::new(GluOp::SwigluOai)
    };
    invalid(ctx.glu(&x, None, &oai), &["SWIGLU_OAI", "alpha", "finite"]);
    let wrong = ctx.zeros(GgmlType::F32, [8, 4, 1, 1]).unwrap();
    invalid(
        ctx.glu_into(&x, None, &wrong, &swiglu),
        &["SWIGLU", "dst", "[4, 4, 1, 1]"],
    );
    let strided = x.permute([1, 0, 2, 3]).unwrap();
    invalid(ctx.glu(&strided, None, &swiglu), &["SWIGLU", "rows must be contiguous"]);
    let into_self = x.narrow(0, 0, 4).unwrap();
    invalid(ctx.glu_into(&x, None, &into_self, &swiglu), &["SWIGLU", "overlaps a"]);
}

/// Each GLU, fused (plain and swapped) and split, in f32 and f16, within upstream's threshold
/// of the CPU reference (which reads GEGLU and GEGLU_QUICK from ggml's f16 tables).
#[test]
fn glu_forms_agree_with_the_reference() {
    let ctx = context(false);
    let wide: Vec<f32> = (0..2 * 96 * 3).map(|i| ((i * 37 % 301) as f32 - 150.0) / 1.5).collect();
    for ty in [GgmlType::F32, GgmlType::F16] {
        if ty == GgmlType::F16 && !ctx.capabilities().shader_f16 {
            continue;
        }
        let a_host = HostTensor::from_f32(ty, [192, 3, 1, 1], &wide).unwrap();
        let g_host = HostTensor::from_f32(ty, [192, 3, 1, 1], &values(576, 3)).unwrap();
        let (a, g) = (ctx.upload(&a_host).unwrap(), ctx.upload(&g_host).unwrap());
        for op in GluOp::ALL {
            for (swapped, split) in [(false, false), (true, false), (false, true)] {
                let params = GluParams {
                    swapped,
                    ..GluParams::new(op)
                };
                let b = split.then_some(&g);
                let got = ctx.read_f32(&ctx.glu(&a, b, &params).unwrap()).unwrap();
                let want = reference::glu(&a_host, split.then_some(&g_host), &params).unwrap();
                let nmse = metric::nmse(&want, &got);
                assert!(nmse < 1e-7, "{op} {ty} swapped={swapped} split={split}: nmse {nmse}");
            }
        }
    }
}

/// A write between two recorded ops is seen by the second and not by the first, by both paths:
/// the queue's (a contiguous, aligned tensor) and the staged copy (a strided view, an f16 view
/// starting mid-word).
#[test]
fn writes_are_ordered_with_the_recorded_ops() {
    let ctx = context(false);
    let x = ctx.from_f32(GgmlType::F32, [4, 3, 1, 1], &values(12, 0)).unwrap();
    let one = ctx.from_f32(GgmlType::F32, [1, 1, 1, 1], &[1.0]).unwrap();
    // Contiguous: the queue writes after what is recorded.
    let before = ctx.add(&x, &one).unwrap();
    let new: Vec<f32> = (0..12).map(|i| i as f32 * 10.0).collect();
    assert_eq!(ctx.write_f32(&x, &new).unwrap(), WritePath::QueueWrite);
    let after = ctx.add(&x, &one).unwrap();
    let plus_one = |v: &[f32]| v.iter().map(|v| v + 1.0).collect::<Vec<_>>();
    assert_eq!(ctx.read_f32(&before).unwrap(), plus_one(&values(12, 0)));
    assert_eq!(ctx.read_f32(&after).unwrap(), plus_one(&new));
    // A strided view (column 2 of each row): a staged copy between the ops.
    let column = x.narrow(0, 2, 1).unwrap();
    let before = ctx.add(&x, &one).unwrap();
    assert_eq!(
        ctx.write_f32(&column, &[-1.0, -2.0, -3.0]).unwrap(),
        WritePath::StagedCopy
    );
    let after = ctx.add(&x, &one).unwrap();
    assert_eq!(ctx.read_f32(&before).unwrap(), plus_one(&new));
    let mut want = new.clone();
    for (row, v) in [-1.0, -2.0, -3.0].into_iter().enumerate() {
        want[row * 4 + 2] = v;
    }
    assert_eq!(ctx.read_f32(&after).unwrap(), plus_one(&want));
    // f16 elements 1..4 of a row of 6: starts and ends mid-word; neighbours keep their bytes.
    let h = ctx
        .from_f32(GgmlType::F16, [6, 1, 1, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        .unwrap();
    let inner = h.narrow(0, 1, 3).unwrap();
    let copy = ctx.filled(*h.layout(), 0).unwrap();
    let zero = ctx.zeros(GgmlType::F32, [1, 1, 1, 1]).unwrap();
    if ctx.capabilities().shader_f16 {
        ctx.binary_into(BinaryOp::Add, &h, &zero, &copy).unwrap();
    }
    assert_eq!(
        ctx.write_f32(&inner, &[20.0, 30.0, 40.0]).unwrap(),
        WritePath::StagedCopy
    );
    assert_eq!(ctx.read_f32(&h).unwrap(), [1.0, 20.0, 30.0, 40.0, 5.0, 6.0]);
    if ctx.capabilities().shader_f16 {
        assert_eq!(ctx.read_f32(&copy).unwrap(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }
    // Wrong extents or type: an error, nothing written.
    assert!(ctx.write_f32(&column, &[1.0, 2.0]).is_err());
    let wrong = HostTensor::from_f32(GgmlType::F16, [1, 3, 1, 1], &[0.0; 3]).unwrap();
    invalid(ctx.write(&column, &wrong), &["write", "like dst"]);
}

const SCALE_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
struct Params { x_start: u32, y_start: u32, n: u32, scale: f32 }
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < params.n) {
        y[params.y_start / 4u + i] = x[params.x_start / 4u + i] * params.scale;
    }
}
"#;

/// A kernel of one's own runs in order with the ops; its WGSL errors name it; bad bindings are
/// refused; the safe variant runs only in safe mode.
#[test]
fn custom_kernels_record_in_order_and_fail_cleanly() {
    let ctx = context(false);
    let kernel = ctx
        .compile_kernel("scale", SCALE_WGSL, &[Access::Read, Access::ReadWrite])
        .unwrap();
    let x = ctx.from_f32(GgmlType::F32, [100, 1, 1, 1], &values(100, 4)).unwrap();
    let one = ctx.from_f32(GgmlType::F32, [1, 1, 1, 1], &[1.0]).unwrap();
    let x1 = ctx.add(&x, &one).unwrap();
    // A view starting 3 elements into a buffer: its start word says where.
    let y_storage = ctx.zeros(GgmlType::F32, [103, 1, 1, 1]).unwrap();
    let y = y_storage.narrow(0, 3, 100).unwrap();
    // SAFETY: the kernel reads x[x_start/4 + i] and writes y[y_start/4 + i] for i < n = 100,
    // the elements of x1 and y; y is bound read-write and declared so; no workgroup memory.
    unsafe { ctx.record_kernel(&kernel, &[&x1, &y], &[100, 0.5f32.to_bits()], [2, 1, 1]) }.unwrap();
    let doubled = ctx.add(&y, &y).unwrap();
    let want: Vec<f32> = values(100, 4).iter().map(|v| (v + 1.0) * 0.5 * 2.0).collect();
    assert_eq!(ctx.read_f32(&doubled).unwrap(), want);
    assert_eq!(ctx.read_f32(&y_storage).unwrap()[..3], [0.0; 3]);
    // Compile errors name the kernel.
    match ctx.compile_kernel("broken", "fn main( {", &[]) {
        Err(BackendError::Shader { variant, .. }) => assert!(variant.contains("broken"), "{variant}"),
        other => panic!("{other:?}"),
    }
    // Wrong binding counts, overlapping writes, a block too long.
    // SAFETY: each call is refused before anything is recorded.
    unsafe {
        invalid(
            ctx.record_kernel(&kernel, &[&x1], &[], [1, 1, 1]),
            &["scale", "binds 2"],
        );
        invalid(
            ctx.record_kernel(&kernel, &[&y, &y], &[], [1, 1, 1]),
            &["scale", "read-write"],
        );
        invalid(
            ctx.record_kernel(&kernel, &[&x1, &y], &[0; 63], [1, 1, 1]),
            &["scale", "64-word"],
        );
    }
    invalid(
        ctx.record_kernel_checked(&kernel, &[&x1, &y], &[100, 0], [2, 1, 1]),
        &["safe mode"],
    );
    let safe = GpuContext::new(ContextOptions {
        safe_mode: true,
        ..Default::default()
    })
    .unwrap();
    let kernel = safe
        .compile_kernel("scale", SCALE_WGSL, &[Access::Read, Access::ReadWrite])
        .unwrap();
    let (sx, sy) = (
        safe.from_f32(GgmlType::F32, [8, 1, 1, 1], &values(8, 1)).unwrap(),
        safe.zeros(GgmlType::F32, [8, 1, 1, 1]).unwrap(),
    );
    safe.record_kernel_checked(&kernel, &[&sx, &sy], &[8, 2f32.to_bits()], [1, 1, 1])
        .unwrap();
    let want: Vec<f32> = values(8, 1).iter().map(|v| v * 2.0).collect();
    assert_eq!(safe.read_f32(&sy).unwrap(), want);
}
