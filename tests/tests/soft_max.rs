//! SOFT_MAX on the adapter (lavapipe in CI) against the CPU reference: part of upstream's list
//! (all of it with `DAWN_COMPUTE_FULL_TESTS=1`), both reductions, −∞ masks, in place, and each
//! check's error.

use dawn_compute_tests::full;
use ggml_dawn::error::BackendError;
use ggml_dawn::ops::soft_max::{self, SoftMaxParams};
use ggml_dawn::reference::{self, metric};
use ggml_dawn::{ContextOptions, DeviceFacts, GgmlType, GpuContext, HostTensor, Layout};
use ggml_dawn_bench::case_lists;
use ggml_dawn_bench::cases::Case;
use ggml_dawn_bench::harness::{self, Rng, Status};

fn ctx() -> GpuContext {
    GpuContext::new(ContextOptions::default()).expect("an adapter")
}

/// Upstream's cases: by default the masked ones of rows 15 and 16 and the long rows (f32 and
/// f16 masks, sinks, ALiBi, broadcasts over heads and sequences, 16-byte and scalar loads);
/// every case with `DAWN_COMPUTE_FULL_TESTS=1`.
#[test]
fn upstream_cases_pass() {
    let ctx = ctx();
    let (_, supported, _) = case_lists::DECODER_LISTS
        .iter()
        .find(|(op, _, _)| *op == "SOFT_MAX")
        .expect("a list");
    let cases: Vec<Case> = case_lists::parse_list(supported)
        .expect("the list parses")
        .into_iter()
        .filter(|c| {
            let s = c.to_string();
            full()
                || (s.contains("mask=1")
                    && (s.contains("ne=[16,16,") || s.contains("ne=[15,15,"))
                    && s.contains("nr23=[2,3]"))
                || s.contains("ne=[16,2,32,1]")
                || s.contains("ne=[200001,")
        })
        .collect();
    assert!(cases.len() >= 10);
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| match harness::test_case(&ctx, case, 5) {
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

/// Rows with −∞ mask entries (a fully masked row with a sink among them), on both reductions
/// and in place, against the reference.
#[test]
fn masked_rows_on_every_path() {
    let ctx = ctx();
    let mut rng = Rng::new(3);
    let ne = [1024, 3, 4, 1];
    let n: usize = ne.iter().product();
    let hx = HostTensor::from_f32(GgmlType::F32, ne, &rng.fill(n, -5.0, 5.0)).unwrap();
    let mut m = rng.fill(1024 * 3 * 2, -1.0, 1.0);
    for (i, v) in m.iter_mut().enumerate() {
        if i % 7 == 0 || i < 1024 {
            *v = f32::NEG_INFINITY;
        }
    }
    let hm = HostTensor::from_f32(GgmlType::F16, [1024, 3, 2, 1], &m).unwrap();
    let hs = HostTensor::from_f32(GgmlType::F32, [4, 1, 1, 1], &[0.5, -1.0, 2.0, 0.0]).unwrap();
    let p = SoftMaxParams {
        scale: 0.7,
        max_bias: 4.0,
    };
    let rp = reference::SoftMaxParams {
        scale: 0.7,
        max_bias: 4.0,
    };
    let want = reference::soft_max(&hx, Some(&hm), Some(&hs), rp).unwrap();
    let (x, mask, sinks) = (
        ctx.upload(&hx).unwrap(),
        ctx.upload(&hm).unwrap(),
        ctx.upload(&hs).unwrap(),
    );
    for f in [
        ctx.facts(),
        DeviceFacts {
            subgroups: false,
            ..ctx.facts()
        },
    ] {
        let dst = ctx
            .filled(Layout::contiguous(GgmlType::F32, ne).unwrap(), 0xff)
            .unwrap();
        let env = ctx.env().with_facts(f).unwrap();
        let mut stream = ctx.stream().unwrap();
        let plan = soft_max::soft_max(&env, &mut stream, &x, Some(&mask), Some(&sinks), &dst, p).unwrap();
        let got = ctx.read_after(&mut stream, &dst).unwrap().to_f32().unwrap();
        assert!(f.subgroups || !plan.rows.subgroups, "{plan}");
        let e = metric::check(&want, &got, 1e-6);
        assert!(e.is_ok(), "{plan}: {e:?}");
    }
    let xi = ctx.upload(&hx).unwrap();
    let plan = ctx.soft_max_into(&xi, Some(&mask), Some(&sinks), &xi, p).unwrap();
    assert!(plan.in_place);
    let got = ctx.read_f32(&xi).unwrap();
    assert!(metric::check(&want, &got, 1e-6).is_ok(), "in place {plan}");
}

/// Rows at the register-held path's limit and one vector past it (a thread's share of the row
/// then no longer fits [`soft_max::plan::CACHED_UNITS`]): both paths, with a mask, against the
/// reference, and the plan says which ran.
#[test]
fn rows_at_the_cached_limit_take_each_path() {
    let ctx = ctx();
    let mut rng = Rng::new(11);
    for (row, cached) in [(32768, true), (32772, false), (1000, true)] {
        let ne = [row, 3, 1, 1];
        let n = row * 3;
        let hx = HostTensor::from_f32(GgmlType::F32, ne, &rng.fill(n, -8.0, 8.0)).unwrap();
        let mut m = rng.fill(row * 3, -2.0, 2.0);
        m.iter_mut().step_by(5).for_each(|v| *v = f32::NEG_INFINITY);
        let hm = HostTensor::from_f32(GgmlType::F32, ne, &m).unwrap();
        let p = SoftMaxParams {
            scale: 0.5,
            max_bias: 0.0,
        };
        let rp = reference::SoftMaxParams {
            scale: 0.5,
            max_bias: 0.0,
        };
        let want = reference::soft_max(&hx, Some(&hm), None, rp).unwrap();
        let (x, mask) = (ctx.upload(&hx).unwrap(), ctx.upload(&hm).unwrap());
        let dst = ctx
            .filled(Layout::contiguous(GgmlType::F32, ne).unwrap(), 0xff)
            .unwrap();
        let plan = ctx.soft_max_into(&x, Some(&mask), None, &dst, p).unwrap();
        assert_eq!(plan.cached, cached, "{plan}");
        let got = ctx.read_f32(&dst).unwrap();
        let e = metric::check(&want, &got, 1e-6);
        assert!(e.is_ok(), "{plan}: {e:?}");
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
    let x = ctx.zeros(GgmlType::F32, [8, 4, 3, 1]).unwrap();
    let p = SoftMaxParams {
        scale: 1.0,
        max_bias: 0.0,
    };
    let short = ctx.zeros(GgmlType::F16, [8, 3, 1, 1]).unwrap();
    refused(ctx.soft_max(&x, Some(&short), None, p), &["SOFT_MAX", "mask", "cover"]);
    let two_heads = ctx.zeros(GgmlType::F32, [8, 4, 2, 1]).unwrap();
    refused(ctx.soft_max(&x, Some(&two_heads), None, p), &["mask", "repeat"]);
    let q8 = ctx.from_f32(GgmlType::Q8_0, [32, 4, 1, 1], &[0.0; 128]).unwrap();
    refused(ctx.soft_max(&x, Some(&q8), None, p), &["mask", "q8_0"]);
    let sinks = ctx.zeros(GgmlType::F32, [2, 1, 1, 1]).unwrap();
    refused(ctx.soft_max(&x, None, Some(&sinks), p), &["sinks"]);
    refused(
        ctx.soft_max(
            &x,
            None,
            None,
            SoftMaxParams {
                scale: f32::INFINITY,
                max_bias: 0.0,
            },
        ),
        &["scale"],
    );
    refused(
        ctx.soft_max(
            &x,
            None,
            None,
            SoftMaxParams {
                scale: 1.0,
                max_bias: -1.0,
            },
        ),
        &["max_bias"],
    );
    let dst = ctx.zeros(GgmlType::F32, [8, 4, 1, 1]).unwrap();
    refused(ctx.soft_max_into(&x, None, None, &dst, p), &["dst", "extents"]);
    let mask = ctx.zeros(GgmlType::F32, [8, 4, 1, 1]).unwrap();
    let into_mask = mask
        .view(Layout::contiguous(GgmlType::F32, [8, 4, 1, 1]).unwrap())
        .unwrap();
    let x1 = ctx.zeros(GgmlType::F32, [8, 4, 1, 1]).unwrap();
    refused(
        ctx.soft_max_into(&x1, Some(&mask), None, &into_mask, p),
        &["overlaps", "mask"],
    );
}
