//! RMS_NORM and the fused RMS_NORM·weight+bias on the adapter (lavapipe in CI) against the CPU
//! reference: part of upstream's lists (all of them with `DAWN_COMPUTE_FULL_TESTS=1`), long
//! rows, both reductions, in place, the fused op against the unfused composition, and each
//! check's error.

use dawn_compute_tests::full;
use ggml_dawn::error::BackendError;
use ggml_dawn::ops::norm;
use ggml_dawn::reference::{self, BinaryOp, RmsNormParams, metric};
use ggml_dawn::{ContextOptions, DeviceFacts, GgmlType, GpuContext, HostTensor, Layout};
use ggml_dawn_bench::case_lists;
use ggml_dawn_bench::cases::Case;
use ggml_dawn_bench::harness::{self, Rng, Status};

fn ctx() -> GpuContext {
    GpuContext::new(ContextOptions::default()).expect("an adapter")
}

fn list(name: &str) -> Vec<Case> {
    let (_, supported, _) = case_lists::DECODER_LISTS
        .iter()
        .find(|(op, _, _)| *op == name)
        .expect("a list");
    case_lists::parse_list(supported).expect("the list parses")
}

fn run_cases(ctx: &GpuContext, cases: &[Case]) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| match harness::test_case(ctx, case, 3) {
            Status::Ok { .. } => None,
            other => Some(format!("{case}: {other:?}")),
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Upstream's cases: by default those with eps = 1e-6 (every length, view and the fused form's
/// broadcasts and chained adds), every case with `DAWN_COMPUTE_FULL_TESTS=1`; then long rows.
#[test]
fn upstream_cases_and_long_rows_pass() {
    let ctx = ctx();
    let keep = |c: &Case| full() || c.to_string().contains("eps=0.000001");
    let mut cases: Vec<Case> = list("RMS_NORM").into_iter().filter(keep).collect();
    cases.extend(list("RMS_NORM_MUL_ADD").into_iter().filter(keep));
    for spec in [
        "RMS_NORM(type=f32,ne=[4096,8,1,1],v=0,eps=0.000001,inplace=0)",
        "RMS_NORM(type=f32,ne=[16384,2,1,1],v=0,eps=0.000001,inplace=0)",
        "RMS_NORM(type=f32,ne=[16384,2,2,2],v=1,eps=0.000001,inplace=0)",
        "RMS_NORM_MUL_ADD(type=f32,ne=[4096,3,1,1],eps=0.000001,broadcast=0,multi_add=0)",
    ] {
        cases.push(spec.parse().expect("a case"));
    }
    run_cases(&ctx, &cases);
}

fn values(rng: &mut Rng, n: usize) -> Vec<f32> {
    rng.fill(n, -10.0, 10.0)
}

/// The fused op on the GPU against the unfused composition on the CPU (rms_norm, then MUL, then
/// ADD), with the workgroup-memory reduction forced and with the plan's own, 16-byte and scalar
/// loads, in place.
#[test]
fn fused_matches_the_unfused_composition_on_every_path() {
    let ctx = ctx();
    let mut rng = Rng::new(11);
    let eps = 1e-5;
    for (ne, w_ne) in [([4096, 4, 2, 1], [4096, 1, 2, 1]), ([1026, 3, 1, 1], [513, 1, 1, 1])] {
        let n: usize = ne.iter().product();
        let hx = HostTensor::from_f32(GgmlType::F32, ne, &values(&mut rng, n)).unwrap();
        let hw = HostTensor::from_f32(GgmlType::F32, w_ne, &values(&mut rng, w_ne.iter().product())).unwrap();
        let hb = HostTensor::from_f32(GgmlType::F32, [ne[0], 1, 1, 1], &values(&mut rng, ne[0])).unwrap();
        let normed = HostTensor::from_f32(
            GgmlType::F32,
            ne,
            &reference::rms_norm(&hx, RmsNormParams { eps }).unwrap(),
        )
        .unwrap();
        let scaled = HostTensor::from_f32(
            GgmlType::F32,
            ne,
            &reference::binary(BinaryOp::Mul, &normed, &hw).unwrap(),
        )
        .unwrap();
        let unfused = reference::binary(BinaryOp::Add, &scaled, &hb).unwrap();
        let (x, w, b) = (
            ctx.upload(&hx).unwrap(),
            ctx.upload(&hw).unwrap(),
            ctx.upload(&hb).unwrap(),
        );
        let facts = [
            ctx.facts(),
            DeviceFacts {
                subgroups: false,
                ..ctx.facts()
            },
        ];
        for f in facts {
            let dst = ctx
                .filled(Layout::contiguous(GgmlType::F32, ne).unwrap(), 0xff)
                .unwrap();
            let env = ctx.env().with_facts(f).unwrap();
            let mut stream = ctx.stream().unwrap();
            let plan = norm::rms_norm_mul_add(&env, &mut stream, &x, Some(&w), Some(&b), &dst, eps).unwrap();
            let got = ctx.read_after(&mut stream, &dst).unwrap().to_f32().unwrap();
            assert!(f.subgroups || !plan.rows.subgroups, "{plan}");
            let e = metric::check(&unfused, &got, metric::DEFAULT_MAX_NMSE);
            assert!(e.is_ok(), "{ne:?} {plan}: {e:?}");
        }
        // In place: x overwritten with its own norm (weight only).
        let want = reference::rms_norm_mul_add(&hx, Some(&hw), None, RmsNormParams { eps }).unwrap();
        let xi = ctx.upload(&hx).unwrap();
        let plan = ctx.rms_norm_mul_add_into(&xi, Some(&w), None, &xi, eps).unwrap();
        assert!(plan.in_place, "{plan}");
        let got = ctx.read_f32(&xi).unwrap();
        assert!(
            metric::check(&want, &got, metric::DEFAULT_MAX_NMSE).is_ok(),
            "in place {plan}"
        );
    }
}

fn refused(r: Result<impl std::fmt::Debug, BackendError>, words: &[&str]) {
    let e = r.expect_err("refused").to_string();
    for w in words {
        assert!(e.contains(w), "{e:?} should name {w:?}");
    }
}

#[test]
fn bad_operands_are_refused_with_the_rule() {
    let ctx = ctx();
    let x = ctx.from_f32(GgmlType::F32, [8, 4, 1, 1], &[1.0; 32]).unwrap();
    let w3 = ctx.from_f32(GgmlType::F32, [3, 1, 1, 1], &[1.0; 3]).unwrap();
    let h = ctx.from_f32(GgmlType::F16, [8, 4, 1, 1], &[1.0; 32]).unwrap();
    refused(ctx.rms_norm(&x, f32::NAN), &["RMS_NORM", "eps"]);
    refused(ctx.rms_norm(&x, -1.0), &["eps", "at least 0"]);
    refused(
        ctx.rms_norm_mul_add(&x, Some(&w3), None, 0.0),
        &["weight", "does not repeat"],
    );
    refused(ctx.rms_norm(&h, 0.0), &["x", "f16"]);
    let small = ctx.zeros(GgmlType::F32, [8, 2, 1, 1]).unwrap();
    refused(
        ctx.rms_norm_mul_add_into(&x, None, None, &small, 0.0),
        &["dst", "extents"],
    );
    // dst overlapping x without being x: half a row on.
    let big = ctx.zeros(GgmlType::F32, [8, 5, 1, 1]).unwrap();
    let a = big.narrow(1, 0, 4).unwrap();
    let shifted = big
        .view(Layout {
            offset: 16,
            ..*a.layout()
        })
        .unwrap();
    refused(
        ctx.rms_norm_mul_add_into(&a, None, None, &shifted, 0.0),
        &["overlaps", "x"],
    );
    // A weight with strided elements.
    let wide = ctx.zeros(GgmlType::F32, [16, 1, 1, 1]).unwrap();
    let strided = wide
        .view(Layout {
            ne: [8, 1, 1, 1],
            nb: [8, 64, 64, 64],
            ..*wide.layout()
        })
        .unwrap();
    refused(
        ctx.rms_norm_mul_add(&x, Some(&strided), None, 0.0),
        &["weight", "packed"],
    );
}

/// The residual ADD fused before the norm against the CPU's ADD then RMS_NORM·MUL·ADD: the sum
/// and the normed output, on both reductions, 16-byte and scalar loads, and a strided residual.
#[test]
fn residual_add_fused_before_the_norm_matches_add_then_norm() {
    let ctx = ctx();
    let mut rng = Rng::new(17);
    let eps = 1e-6;
    for (ne, w_ne, strided) in [
        ([576, 5, 1, 1], [576, 1, 1, 1], false),
        ([1026, 3, 2, 1], [513, 1, 1, 1], false),
        ([64, 7, 1, 1], [64, 1, 1, 1], true),
    ] {
        let n: usize = ne.iter().product();
        let hx = HostTensor::from_f32(GgmlType::F32, ne, &values(&mut rng, n)).unwrap();
        let hr = HostTensor::from_f32(GgmlType::F32, ne, &values(&mut rng, n)).unwrap();
        let hw = HostTensor::from_f32(GgmlType::F32, w_ne, &values(&mut rng, w_ne.iter().product())).unwrap();
        let sum = reference::binary(BinaryOp::Add, &hx, &hr).unwrap();
        let hsum = HostTensor::from_f32(GgmlType::F32, ne, &sum).unwrap();
        let want = reference::rms_norm_mul_add(&hsum, Some(&hw), None, RmsNormParams { eps }).unwrap();
        let (x, w) = (ctx.upload(&hx).unwrap(), ctx.upload(&hw).unwrap());
        // A strided residual: every other row of a tensor twice as tall.
        let r = if strided {
            let mut tall = vec![0.0f32; 2 * n];
            let hr_values = hr.to_f32().unwrap();
            for row in 0..n / ne[0] {
                tall[2 * row * ne[0]..(2 * row + 1) * ne[0]]
                    .copy_from_slice(&hr_values[row * ne[0]..(row + 1) * ne[0]]);
            }
            let t = ctx.from_f32(GgmlType::F32, [ne[0], 2 * ne[1], 1, 1], &tall).unwrap();
            t.view(Layout {
                ne,
                nb: [4, 8 * ne[0], 8 * ne[0] * ne[1], 8 * ne[0] * ne[1]],
                ..*t.layout()
            })
            .unwrap()
        } else {
            ctx.upload(&hr).unwrap()
        };
        for subgroups in [true, false] {
            let f = DeviceFacts {
                subgroups: subgroups && ctx.facts().subgroups,
                ..ctx.facts()
            };
            let poisoned = || {
                ctx.filled(Layout::contiguous(GgmlType::F32, ne).unwrap(), 0xff)
                    .unwrap()
            };
            let (s, dst) = (poisoned(), poisoned());
            let env = ctx.env().with_facts(f).unwrap();
            let mut stream = ctx.stream().unwrap();
            let plan = norm::add_rms_norm_mul_add(&env, &mut stream, &x, &r, &s, Some(&w), None, &dst, eps).unwrap();
            assert!(plan.residual && !plan.in_place, "{plan}");
            assert!(plan.to_string().starts_with("ADD then RMS_NORM"), "{plan}");
            let got_sum = ctx.read_after(&mut stream, &s).unwrap().to_f32().unwrap();
            let got = ctx.read_after(&mut stream, &dst).unwrap().to_f32().unwrap();
            assert!(
                metric::check(&sum, &got_sum, metric::DEFAULT_MAX_NMSE).is_ok(),
                "{ne:?} {plan}: sum"
            );
            let e = metric::check(&want, &got, metric::DEFAULT_MAX_NMSE);
            assert!(e.is_ok(), "{ne:?} {plan}: {e:?}");
        }
    }
    // The context's form returns both.
    let x = ctx
        .from_f32(GgmlType::F32, [4, 1, 1, 1], &[1.0, 2.0, 3.0, 4.0])
        .unwrap();
    let (s, y) = ctx.add_rms_norm_mul_add(&x, &x, None, None, 0.0).unwrap();
    assert_eq!(ctx.read_f32(&s).unwrap(), [2.0, 4.0, 6.0, 8.0]);
    let rms = (120.0f32 / 4.0).sqrt();
    let y = ctx.read_f32(&y).unwrap();
    assert!((y[3] - 8.0 / rms).abs() < 1e-5, "{y:?}");
}

#[test]
fn residual_operands_are_refused_with_the_rule() {
    let ctx = ctx();
    let x = ctx.from_f32(GgmlType::F32, [8, 4, 1, 1], &[1.0; 32]).unwrap();
    let short = ctx.zeros(GgmlType::F32, [8, 2, 1, 1]).unwrap();
    refused(
        ctx.add_rms_norm_mul_add(&x, &short, None, None, 0.0),
        &["residual", "extents"],
    );
    let h = ctx.from_f32(GgmlType::F16, [8, 4, 1, 1], &[1.0; 32]).unwrap();
    refused(ctx.add_rms_norm_mul_add(&x, &h, None, None, 0.0), &["residual", "f16"]);
    // The sum may be neither dst nor an input.
    let (r, dst) = (
        ctx.zeros(GgmlType::F32, [8, 4, 1, 1]).unwrap(),
        ctx.zeros(GgmlType::F32, [8, 4, 1, 1]).unwrap(),
    );
    refused(
        ctx.add_rms_norm_mul_add_into(&x, &r, &dst, None, None, &dst, 0.0),
        &["overlaps", "dst"],
    );
    refused(
        ctx.add_rms_norm_mul_add_into(&x, &r, &x, None, None, &dst, 0.0),
        &["overlaps", "x"],
    );
    refused(
        ctx.add_rms_norm_mul_add_into(&x, &r, &short, None, None, &dst, 0.0),
        &["sum", "extents"],
    );
}
