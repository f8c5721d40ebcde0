//! GET_ROWS, SET_ROWS and CPY on the adapter (lavapipe in CI) against the CPU references: a
//! representative part of upstream's lists (every type and kernel form once; all of them with
//! `DAWN_COMPUTE_FULL_TESTS=1`), quantization bit for bit against ggml's CPU (the references), ids out of
//! range, and each check's error.

use dawn_compute_tests::full;
use ggml_dawn::error::BackendError;
use ggml_dawn::reference;
use ggml_dawn::{ContextOptions, DeviceTensor, GgmlType, GpuContext, HostTensor, Layout, format};
use ggml_dawn_bench::case_lists;
use ggml_dawn_bench::cases::Case;
use ggml_dawn_bench::harness::{self, Status, decoder};

fn context() -> GpuContext {
    GpuContext::new(ContextOptions::default()).expect("an adapter")
}

/// Upstream's cases of `op` (both lists) the GPU runs: all with `DAWN_COMPUTE_FULL_TESTS=1`, else
/// the first case of each distinct type pair and kernel form and one in `stride` of the rest.
fn cases(op: &str, stride: usize) -> Vec<Case> {
    let (_, supported, unsupported) = case_lists::DECODER_LISTS
        .iter()
        .find(|(name, ..)| *name == op)
        .expect("a list");
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (i, case) in case_lists::parse_list(supported)
        .unwrap()
        .into_iter()
        .chain(case_lists::parse_list(unsupported).unwrap())
        .enumerate()
    {
        let Case::Decoder(c) = &case else { continue };
        if decoder::gpu_support(c).is_err() {
            continue;
        }
        let text = case.to_string();
        // The type pair and whether the views permute, are odd-sized or views.
        let key: String = text
            .split(',')
            .filter(|p| p.contains("type") || p.starts_with("v=") || p.contains("permute"))
            .collect();
        if full() || seen.insert(key) || i % stride == 0 {
            out.push(case);
        }
    }
    out
}

fn run_all(op: &str, stride: usize, at_least: usize) {
    let ctx = context();
    let cases = cases(op, stride);
    assert!(cases.len() >= at_least, "{op}: only {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        match harness::test_case(&ctx, case, 3) {
            Status::Ok { .. } => {}
            // Too large for lavapipe's bindings.
            Status::TooLarge { .. } => {}
            other => failures.push(format!("{case}: {other:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{op}: {} of {} failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn upstream_get_rows_cases_pass() {
    run_all("GET_ROWS", 7, 30);
}

#[test]
fn upstream_set_rows_cases_pass() {
    run_all("SET_ROWS", 11, 30);
}

#[test]
fn upstream_cpy_cases_pass() {
    run_all("CPY", 9, 40);
}

fn ids_tensor(ctx: &GpuContext, ty: GgmlType, values: &[i64]) -> DeviceTensor {
    let data = match ty {
        GgmlType::I64 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        _ => values.iter().flat_map(|&v| (v as i32).to_le_bytes()).collect(),
    };
    ctx.upload(&HostTensor {
        layout: Layout::contiguous(ty, [values.len(), 1, 1, 1]).unwrap(),
        data,
    })
    .unwrap()
}

/// Values that put quantization on its edges: ties of the scaled values, equal magnitudes of
/// both signs, zero blocks, tiny and large blocks.
fn hard_values(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let block = i / 32;
            let j = (i % 32) as f32;
            match block % 5 {
                0 => (j - 16.0) / 8.0,
                1 => ((i * 7919 % 257) as f32 - 128.0) / 17.0,
                2 => 0.0,
                3 => (j - 15.5) * 1e-3,
                _ => (if i % 2 == 0 { 3.0 } else { -3.0 }) * (1.0 + j / 64.0),
            }
        })
        .collect()
}

/// SET_ROWS and CPY write each quantized KV-cache type with exactly ggml's CPU bytes, from f32 and
/// f16 rows, into rows whose blocks share words (18-byte blocks).
#[test]
fn quantization_is_bit_exact() {
    let ctx = context();
    let rows = 5;
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::IQ4_NL,
        GgmlType::Q1_0,
    ] {
        // An odd number of blocks a row: 18-byte blocks share words across rows.
        let n = 5 * ty.block_size();
        for src_ty in [GgmlType::F32, GgmlType::F16] {
            let values = hard_values(n * 3);
            let src_host = HostTensor::from_f32(src_ty, [n, 3, 1, 1], &values).unwrap();
            let dst_host = HostTensor::from_f32(ty, [n, rows, 1, 1], &vec![0.5; n * rows]).unwrap();
            let ids_host = HostTensor {
                layout: Layout::contiguous(GgmlType::I64, [3, 1, 1, 1]).unwrap(),
                data: [4i64, 1, 2].iter().flat_map(|v| v.to_le_bytes()).collect(),
            };
            let want = reference::set_rows(&dst_host, &src_host, &ids_host).unwrap();
            let (dst, src, ids) = (
                ctx.upload(&dst_host).unwrap(),
                ctx.upload(&src_host).unwrap(),
                ctx.upload(&ids_host).unwrap(),
            );
            ctx.set_rows(&dst, &src, &ids).unwrap();
            assert_eq!(ctx.read(&dst).unwrap().data, want.data, "SET_ROWS {src_ty} -> {ty}");
            // CPY of the whole source into a contiguous tensor of the type.
            let out = ctx.empty(ty, [n, 3, 1, 1]).unwrap();
            ctx.cpy(&src, &out).unwrap();
            let exact = reference::cpy(&src_host, &ctx.read(&out).unwrap()).unwrap().data;
            assert_eq!(ctx.read(&out).unwrap().data, exact, "CPY {src_ty} -> {ty}");
        }
    }
}

/// f16 and bf16 are rounded to nearest even, ties included, as the CPU rounds them.
#[test]
fn f16_and_bf16_round_to_nearest_even() {
    let ctx = context();
    let mut values = Vec::new();
    for k in 0..64u32 {
        // Exactly halfway between two f16 (and bf16) neighbours, both parities; subnormals.
        values.push(1.0 + (2 * k + 1) as f32 / 2048.0);
        values.push(f32::from_bits(0x3f80_8000 + (k << 16)));
        values.push(k as f32 * 3.0e-8);
        values.push(-65520.0 - k as f32);
    }
    let n = values.len();
    let src = ctx.from_f32(GgmlType::F32, [n, 1, 1, 1], &values).unwrap();
    for ty in [GgmlType::F16, GgmlType::BF16] {
        let out = ctx.empty(ty, [n, 1, 1, 1]).unwrap();
        ctx.cpy(&src, &out).unwrap();
        assert_eq!(
            ctx.read(&out).unwrap().data,
            format::quantize(ty, &values).unwrap(),
            "{ty}"
        );
    }
}

/// GET_ROWS gives zeros for an id outside src's rows; SET_ROWS writes nothing for one outside
/// dst's rows; neither touches a byte outside its operands (dst sits inside a larger poisoned
/// tensor).
#[test]
fn ids_out_of_range_touch_nothing_outside() {
    let ctx = context();
    let table: Vec<f32> = (0..4 * 3).map(|v| v as f32).collect();
    let src = ctx.from_f32(GgmlType::F32, [4, 3, 1, 1], &table).unwrap();
    let ids = ids_tensor(&ctx, GgmlType::I32, &[1, -1, 3, i32::MAX as i64]);
    let rows = ctx.get_rows(&src, &ids).unwrap();
    let got = ctx.read_f32(&rows).unwrap();
    assert_eq!(&got[..4], &table[4..8]);
    assert!(got[4..].iter().all(|&v| v == 0.0), "{got:?}");

    for ty in [GgmlType::I32, GgmlType::I64] {
        for dst_ty in [GgmlType::F16, GgmlType::Q4_0] {
            let n = 32;
            // Rows 1..4 of a 6-row poisoned tensor are dst.
            let whole = ctx
                .filled(Layout::contiguous(dst_ty, [n, 6, 1, 1]).unwrap(), 0xff)
                .unwrap();
            let dst = whole.narrow(1, 1, 3).unwrap();
            let src = ctx.from_f32(GgmlType::F32, [n, 4, 1, 1], &vec![0.25; 4 * n]).unwrap();
            let big = if ty == GgmlType::I64 { 1i64 << 40 } else { 3 };
            let ids = ids_tensor(&ctx, ty, &[-1, 3, big, 1]);
            ctx.set_rows(&dst, &src, &ids).unwrap();
            let bytes = ctx.read(&whole).unwrap().data;
            let row = dst_ty.row_bytes(n).unwrap();
            for r in 0..6 {
                let written = r == 2; // dst row 1 only
                let slice = &bytes[r * row..(r + 1) * row];
                assert_eq!(
                    slice.iter().all(|&b| b == 0xff),
                    !written,
                    "{ty} {dst_ty} row {r}: {slice:?}"
                );
            }
        }
    }
}

fn message(e: BackendError) -> String {
    e.to_string()
}

/// Each check refuses with an error naming the operand and the rule, before anything runs.
#[test]
fn bad_operands_are_errors() {
    let ctx = context();
    let f = |ne| ctx.zeros(GgmlType::F32, ne).unwrap();
    let ids = ids_tensor(&ctx, GgmlType::I32, &[0, 1]);
    let src = f([8, 4, 1, 1]);
    // GET_ROWS: ids' type, dst's shape, dst's type.
    let fids = f([2, 1, 1, 1]);
    assert!(message(ctx.get_rows(&src, &fids).unwrap_err()).contains("ids must be i32"));
    assert!(message(ctx.get_rows_into(&src, &ids, &f([8, 3, 1, 1])).unwrap_err()).contains("dst"));
    let h = ctx.zeros(GgmlType::F16, [8, 2, 1, 1]).unwrap();
    assert!(message(ctx.get_rows_into(&src, &ids, &h).unwrap_err()).contains("dst must be f32"));
    // dst sharing bytes with src.
    let e = ctx
        .get_rows_into(&src, &ids, &src.narrow(1, 0, 2).unwrap())
        .unwrap_err();
    assert!(message(e).contains("overlaps src"));
    // SET_ROWS: src type, ids broadcast, unsupported dst type, rows not whole blocks.
    let cache = f([8, 4, 2, 1]);
    let q = ctx.zeros(GgmlType::Q8_0, [32, 1, 2, 1]).unwrap();
    assert!(message(ctx.set_rows(&cache, &q, &ids).unwrap_err()).contains("src must be f32 or f16"));
    let rows3 = ctx.zeros(GgmlType::I32, [2, 3, 1, 1]).unwrap();
    assert!(message(ctx.set_rows(&cache, &f([8, 2, 2, 1]), &rows3).unwrap_err()).contains("c1 |"));
    let k = ctx.zeros(GgmlType::Q2_K, [256, 2, 1, 1]).unwrap();
    let e = ctx.set_rows(&k, &f([256, 2, 1, 1]), &ids).unwrap_err();
    assert!(matches!(e, BackendError::Unsupported(_)), "{e}");
    // CPY: element counts, pairs ggml has no copy for, a quantized dst that is a view.
    assert!(message(ctx.cpy(&src, &f([8, 3, 1, 1])).unwrap_err()).contains("different numbers"));
    let to_k = ctx.cpy(&f([256, 1, 1, 1]), &ctx.zeros(GgmlType::Q2_K, [256, 1, 1, 1]).unwrap());
    assert!(matches!(to_k, Err(BackendError::Unsupported(_))), "{to_k:?}");
    let q_to_h = ctx.cpy(&q, &ctx.zeros(GgmlType::F16, [32, 1, 2, 1]).unwrap());
    assert!(matches!(q_to_h, Err(BackendError::Unsupported(_))), "{q_to_h:?}");
    let permuted = ctx
        .zeros(GgmlType::Q4_0, [32, 2, 2, 1])
        .unwrap()
        .permute([0, 2, 1, 3])
        .unwrap();
    let e = ctx.cpy(&f([32, 2, 2, 1]), &permuted).unwrap_err();
    assert!(message(e).contains("must be contiguous"));
}

/// A CPY whose source is the destination transposed in dims 0 and 1 goes through tiles for f32,
/// f16 and bf16 (odd 16-bit rows take the unit path) and copies exactly what the CPU does, with
/// partial tiles at both edges and batches in dims 2 and 3.
#[test]
fn transposed_copies_go_through_tiles_and_match_the_cpu() {
    let ctx = context();
    for (ty, ne, tiled) in [
        (GgmlType::F32, [37usize, 70, 3, 2], true),
        (GgmlType::F16, [38, 70, 2, 1], true),
        (GgmlType::BF16, [64, 33, 1, 2], true),
        (GgmlType::F16, [37, 40, 1, 1], false),
    ] {
        // src: a tensor of [ne1, ne0] seen transposed, so its element (i0, i1) steps ne1·size
        // along i0 and one element along i1.
        let n: usize = ne.iter().product();
        let values: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 10.0 - 50.0).collect();
        let base = HostTensor::from_f32(ty, [ne[1], ne[0], ne[2], ne[3]], &values).unwrap();
        let src = ctx.upload(&base).unwrap().permute([1, 0, 2, 3]).unwrap();
        assert_eq!(src.layout().ne, ne);
        let src_host = HostTensor {
            layout: *src.layout(),
            data: base.data.clone(),
        };
        let out = ctx.filled(Layout::contiguous(ty, ne).unwrap(), 0xff).unwrap();
        let plan = ctx.cpy(&src, &out).unwrap();
        assert_eq!(plan.tiled, tiled, "{ty} {ne:?}: {plan}");
        let want = reference::cpy(&src_host, &ctx.read(&out).unwrap()).unwrap();
        assert_eq!(ctx.read(&out).unwrap().data, want.data, "{ty} {ne:?}: {plan}");
    }
}
