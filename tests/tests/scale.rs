//! SCALE on the adapter (lavapipe in CI): upstream's list, the packed 16-byte, packed scalar and
//! strided forms, in place, and each check's error.

use ggml_dawn::error::BackendError;
use ggml_dawn::reference::{self, ScaleParams, metric};
use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor, Layout};
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
        .find(|(op, _, _)| *op == "SCALE")
        .expect("a list");
    for case in case_lists::parse_list(supported).expect("the list parses") {
        let status = harness::test_case(&ctx, &case, 4);
        assert!(matches!(status, Status::Ok { .. }), "{case}: {status:?}");
    }
}

#[test]
fn every_form_and_in_place() {
    let ctx = ctx();
    let mut rng = Rng::new(8);
    let ne = [64, 6, 5, 1];
    let hx = HostTensor::from_f32(GgmlType::F32, ne, &rng.fill(64 * 30, -3.0, 3.0)).unwrap();
    let p = ScaleParams {
        scale: -1.5,
        bias: 0.25,
    };
    let x = ctx.upload(&hx).unwrap();
    let permuted = hx.layout.permute([1, 0, 2, 3]).unwrap();
    let xt = x.view(permuted).unwrap();
    let narrowed = x.narrow(0, 1, 62).unwrap();
    let mut seen = Vec::new();
    for t in [&x, &xt, &narrowed] {
        let host = HostTensor {
            layout: *t.layout(),
            data: hx.data.clone(),
        };
        let want = reference::scale(&host, p).unwrap();
        let dst = ctx
            .filled(Layout::contiguous(GgmlType::F32, t.layout().ne).unwrap(), 0xff)
            .unwrap();
        let plan = ctx.scale_into(t, &dst, p.scale, p.bias).unwrap();
        seen.push((plan.flat, plan.vec4));
        let got = ctx.read_f32(&dst).unwrap();
        assert!(metric::check(&want, &got, metric::DEFAULT_MAX_NMSE).is_ok(), "{plan}");
    }
    seen.sort();
    assert_eq!(seen, [(false, false), (false, false), (true, true)]);
    // Packed but one element on: scalar units.
    let off = x
        .view(Layout {
            ne: [63, 1, 1, 1],
            offset: 4,
            ..Layout::contiguous(GgmlType::F32, [63, 1, 1, 1]).unwrap()
        })
        .unwrap();
    let plan = ctx
        .scale_into(&off, &ctx.zeros(GgmlType::F32, [63, 1, 1, 1]).unwrap(), 2.0, 0.0)
        .unwrap();
    assert!(plan.flat && !plan.vec4, "{plan}");
    // In place.
    let xi = ctx.upload(&hx).unwrap();
    let plan = ctx.scale_into(&xi, &xi, p.scale, p.bias).unwrap();
    assert!(plan.in_place);
    let got = ctx.read_f32(&xi).unwrap();
    assert!(metric::check(&reference::scale(&hx, p).unwrap(), &got, metric::DEFAULT_MAX_NMSE).is_ok());
}

#[test]
fn bad_operands_are_refused() {
    let ctx = ctx();
    let x = ctx.zeros(GgmlType::F32, [4, 2, 1, 1]).unwrap();
    let e = ctx.scale(&x, f32::NAN, 0.0).expect_err("NaN scale").to_string();
    assert!(e.contains("SCALE") && e.contains("scale"), "{e}");
    let e = ctx.scale(&x, 1.0, f32::INFINITY).expect_err("inf bias").to_string();
    assert!(e.contains("bias"), "{e}");
    let h = ctx.zeros(GgmlType::F16, [4, 2, 1, 1]).unwrap();
    assert!(matches!(ctx.scale(&h, 1.0, 0.0), Err(BackendError::Unsupported(_))));
    let other = ctx.zeros(GgmlType::F32, [2, 4, 1, 1]).unwrap();
    let e = ctx.scale_into(&x, &other, 1.0, 0.0).expect_err("extents").to_string();
    assert!(e.contains("extents"), "{e}");
    let shifted = x
        .view(Layout {
            ne: [3, 1, 1, 1],
            offset: 4,
            ..Layout::contiguous(GgmlType::F32, [3, 1, 1, 1]).unwrap()
        })
        .unwrap();
    let head = x.narrow(0, 0, 3).unwrap().narrow(1, 0, 1).unwrap();
    let e = ctx
        .scale_into(&head, &shifted, 1.0, 0.0)
        .expect_err("overlap")
        .to_string();
    assert!(e.contains("overlaps"), "{e}");
}
