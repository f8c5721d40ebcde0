//! ARGMAX on the adapter (lavapipe in CI): upstream's list, then ggml's tie and NaN rule exactly
//! (the reference's) on both reductions and both load widths, and each check's error.

use ggml_dawn::error::BackendError;
use ggml_dawn::ops::argmax;
use ggml_dawn::reference;
use ggml_dawn::{ContextOptions, DeviceFacts, GgmlType, GpuContext, HostTensor, Layout};
use ggml_dawn_bench::case_lists;
use ggml_dawn_bench::harness::{self, Rng, Status};

fn ctx() -> GpuContext {
    GpuContext::new(ContextOptions::default()).expect("an adapter")
}

#[test]
fn upstream_cases_pass() {
    let ctx = ctx();
    let (_, supported, _) = case_lists::DECODER_LISTS
        .iter()
        .find(|(op, _, _)| *op == "ARGMAX")
        .expect("a list");
    for case in case_lists::parse_list(supported).expect("the list parses") {
        let status = harness::test_case(&ctx, &case, 9);
        assert!(matches!(status, Status::Ok { .. }), "{case}: {status:?}");
    }
}

/// Rows of few distinct values (many ties), −0 beside +0, ±∞, NaNs inside, at the end and
/// filling a row: the GPU's indices equal the reference's on every path.
#[test]
fn ties_and_nans_follow_ggml_exactly() {
    let ctx = ctx();
    let mut rng = Rng::new(17);
    for n in [7usize, 64, 1000, 4096] {
        let rows = 12;
        let mut v: Vec<f32> = (0..n * rows).map(|_| (rng.next_u64() % 5) as f32 - 2.0).collect();
        let row = |r: usize| r * n..(r + 1) * n;
        v[row(1)].fill(f32::NEG_INFINITY);
        v[row(2)].fill(f32::NAN);
        v[n * 3 + n / 2] = f32::NAN; // a NaN inside
        v[n * 4 + n - 1] = f32::NAN; // ends in NaN
        v[n * 5 + n - 1] = f32::NAN;
        v[n * 5 + n - 2] = f32::NAN;
        v[n * 5 + 1] = f32::NAN;
        for i in row(6) {
            v[i] = if i % 2 == 0 { 0.0 } else { -0.0 };
        }
        v[n * 7] = f32::INFINITY;
        v[n * 8 + n - 1] = f32::INFINITY;
        v[n * 9] = f32::NAN; // NaN first, then the rest
        let hx = HostTensor::from_f32(GgmlType::F32, [n, rows, 1, 1], &v).unwrap();
        let want = reference::argmax(&hx).unwrap();
        let x = ctx.upload(&hx).unwrap();
        // A view one element on: scalar loads.
        let wide = HostTensor::from_f32(GgmlType::F32, [n + 1, rows, 1, 1], &{
            let mut w = Vec::new();
            for r in 0..rows {
                w.push(123.0);
                w.extend_from_slice(&v[row(r)]);
            }
            w
        })
        .unwrap();
        let xw = ctx.upload(&wide).unwrap();
        let view = xw
            .view(Layout {
                ne: [n, rows, 1, 1],
                offset: 4,
                ..*xw.layout()
            })
            .unwrap();
        for f in [
            ctx.facts(),
            DeviceFacts {
                subgroups: false,
                ..ctx.facts()
            },
        ] {
            for t in [&x, &view] {
                let dst = ctx
                    .filled(Layout::contiguous(GgmlType::I32, [rows, 1, 1, 1]).unwrap(), 0xff)
                    .unwrap();
                let env = ctx.env().with_facts(f).unwrap();
                let mut stream = ctx.stream().unwrap();
                let plan = argmax::argmax(&env, &mut stream, t, &dst).unwrap();
                let got = ctx.read_after(&mut stream, &dst).unwrap();
                let got: Vec<i32> = got
                    .data
                    .chunks(4)
                    .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
                    .collect();
                assert!(f.subgroups || !plan.rows.subgroups, "{plan}");
                assert_eq!(got, want, "n = {n}: {plan}");
            }
        }
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
    let cube = ctx.zeros(GgmlType::F32, [4, 2, 2, 1]).unwrap();
    refused(ctx.argmax(&cube), &["ARGMAX", "matrix"]);
    let h = ctx.zeros(GgmlType::F16, [4, 2, 1, 1]).unwrap();
    refused(ctx.argmax(&h), &["ARGMAX", "f16"]);
    let x = ctx.zeros(GgmlType::F32, [4, 2, 1, 1]).unwrap();
    let f = ctx.zeros(GgmlType::F32, [2, 1, 1, 1]).unwrap();
    refused(ctx.argmax_into(&x, &f), &["dst", "i32"]);
    let short = ctx.zeros(GgmlType::I32, [1, 1, 1, 1]).unwrap();
    refused(ctx.argmax_into(&x, &short), &["dst", "[2]"]);
    let empty = ctx.zeros(GgmlType::F32, [0, 2, 1, 1]).unwrap();
    refused(ctx.argmax(&empty), &["at least 1"]);
}
