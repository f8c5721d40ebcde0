//! ROPE on the adapter (lavapipe in CI) against the CPU reference: a representative part of
//! upstream's list (every mode, f32 and f16, frequency factors, YaRN, views, n_offs; all of it
//! with `DAWN_COMPUTE_FULL_TESTS=1`), in place against out of place, and each check's error.

use dawn_compute_tests::full;
use ggml_dawn::reference::{self, RopeMode, RopeParams, metric};
use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor, Layout};
use ggml_dawn_bench::case_lists;
use ggml_dawn_bench::harness::{self, Status};

fn context() -> GpuContext {
    GpuContext::new(ContextOptions::default()).expect("an adapter")
}

#[test]
fn upstream_rope_cases_pass() {
    let (_, supported, _) = case_lists::DECODER_LISTS
        .iter()
        .find(|(name, ..)| *name == "ROPE")
        .expect("a list");
    let ctx = context();
    let mut seen = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    let mut ran = 0;
    for (i, case) in case_lists::parse_list(supported).unwrap().into_iter().enumerate() {
        let text = case.to_string();
        // One case of each mode, type, factor, YaRN, view and offset combination.
        let key: String = text
            .split(',')
            .filter(|p| {
                ["type=", "mode=", "ef=", "ff=", "v=", "n_offs="]
                    .iter()
                    .any(|k| p.starts_with(k))
            })
            .collect();
        if !(full() || seen.insert(key) || i % 25 == 0) {
            continue;
        }
        ran += 1;
        match harness::test_case(&ctx, &case, 5) {
            Status::Ok { .. } | Status::TooLarge { .. } => {}
            other => failures.push(format!("{case}: {other:?}")),
        }
    }
    assert!(ran >= 40, "only {ran} cases");
    assert!(
        failures.is_empty(),
        "{} of {ran} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// llama.cpp's ROPE_SET_ROWS list (the rotary embedding fused with the KV-cache write): every
/// mode and cache type at 8 tokens, one and three sequences (fused, and the two ops where a
/// tensor holds several sequences), against the CPU reference; all of it with
/// `DAWN_COMPUTE_FULL_TESTS=1`.
#[test]
fn llama_rope_set_rows_cases_pass() {
    let (_, supported, _) = case_lists::DECODER_LISTS
        .iter()
        .find(|(name, ..)| *name == "ROPE_SET_ROWS")
        .expect("a list");
    let ctx = context();
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in case_lists::parse_list(supported).unwrap() {
        let text = case.to_string();
        if !(full() || text.contains(",8,") || text.contains("type_idx=i32")) {
            continue;
        }
        ran += 1;
        match harness::test_case(&ctx, &case, 5) {
            Status::Ok { .. } => {}
            other => failures.push(format!("{case}: {other:?}")),
        }
    }
    assert!(ran >= 20, "only {ran} cases");
    assert!(
        failures.is_empty(),
        "{} of {ran} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn positions(ctx: &GpuContext, n: usize) -> (HostTensor, ggml_dawn::DeviceTensor) {
    let host = HostTensor {
        layout: Layout::contiguous(GgmlType::I32, [n, 1, 1, 1]).unwrap(),
        data: (0..n as i32).flat_map(|p| (p * 37 % 301).to_le_bytes()).collect(),
    };
    let dev = ctx.upload(&host).unwrap();
    (host, dev)
}

/// In place (dst is x) gives what a separate dst gets, for f32 and f16 (whose elements share
/// words between threads), NeoX and M-RoPE, YaRN on.
#[test]
fn in_place_matches_out_of_place() {
    let ctx = context();
    let ne = [64, 4, 6, 1];
    let values: Vec<f32> = (0..64 * 4 * 6).map(|i| ((i * 13 % 97) as f32 - 48.0) / 50.0).collect();
    for ty in [GgmlType::F32, GgmlType::F16] {
        for mode in [RopeMode::Neox, RopeMode::Mrope, RopeMode::Normal] {
            let mut params = RopeParams::new(48, mode);
            params.ext_factor = 0.5;
            params.freq_scale = 0.25;
            params.n_ctx_orig = 4096;
            params.beta_fast = 32.0;
            params.beta_slow = 1.0;
            if mode == RopeMode::Mrope {
                params.sections = [8, 8, 8, 0];
            }
            let (pos_host, pos) = positions(&ctx, 4 * ne[2]);
            let x_host = HostTensor::from_f32(ty, ne, &values).unwrap();
            let want = reference::rope(&x_host, &pos_host, None, &params).unwrap();
            let x = ctx.upload(&x_host).unwrap();
            let out = ctx.rope(&x, &pos, None, &params).unwrap();
            let plan = ctx.rope_into(&x, &pos, None, &x, &params).unwrap();
            assert!(plan.problem.in_place);
            let (a, b) = (ctx.read_f32(&out).unwrap(), ctx.read_f32(&x).unwrap());
            assert_eq!(a, b, "{ty} {mode:?}");
            let nmse = metric::nmse(&want, &a);
            assert!(nmse < 1e-7, "{ty} {mode:?}: nmse {nmse}");
        }
    }
}

/// f16 destinations take the whole-word path (two pairs a thread) where the layout allows it
/// and the atomic path where it does not (an odd count of pairs, an odd row),
/// each mode, out of place and in place, against the reference.
#[test]
fn f16_rows_take_whole_words_or_atomics() {
    let ctx = context();
    // (row, n_dims, n_offs, whole words)
    let shapes = [
        (64, 48, 0, true),
        (64, 40, 8, true),
        (64, 6, 0, false),
        (66, 44, 2, true),
        (63, 48, 0, false),
    ];
    for (ne0, n_dims, n_offs, words) in shapes {
        let ne = [ne0, 3, 5, 1];
        let n: usize = ne.iter().product();
        let values: Vec<f32> = (0..n).map(|i| ((i * 29 % 113) as f32 - 56.0) / 40.0).collect();
        for mode in [RopeMode::Normal, RopeMode::Neox, RopeMode::Mrope] {
            let mut params = RopeParams::new(n_dims, mode);
            params.n_offs = n_offs;
            if mode == RopeMode::Mrope {
                params.sections = [n_dims / 6, n_dims / 6, n_dims / 6, 0];
            }
            let (pos_host, pos) = positions(&ctx, 4 * ne[2]);
            let x_host = HostTensor::from_f32(GgmlType::F16, ne, &values).unwrap();
            let want = reference::rope(&x_host, &pos_host, None, &params).unwrap();
            let x = ctx.upload(&x_host).unwrap();
            let dst = ctx
                .filled(Layout::contiguous(GgmlType::F16, ne).unwrap(), 0xff)
                .unwrap();
            let plan = ctx.rope_into(&x, &pos, None, &dst, &params).unwrap();
            assert_eq!((plan.words, plan.atomic), (words, !words), "{plan}");
            let got = ctx.read_f32(&dst).unwrap();
            let nmse = metric::nmse(&want, &got);
            assert!(nmse < 1e-6, "{plan}: nmse {nmse}");
            let in_place = ctx.rope_into(&x, &pos, None, &x, &params).unwrap();
            assert_eq!(in_place.words, words, "{in_place}");
            assert_eq!(ctx.read_f32(&x).unwrap(), got, "in place {in_place}");
        }
    }
}

/// The fused rotary embedding and KV-cache write (`rope_set_rows`) leaves the projection and
/// the cache byte for byte as ROPE in place and then SET_ROWS do: a decoder's fused q·k·v rows
/// (9 query and 3 key heads roped, keys and values to the cache), one token and a prompt, f16
/// and f32 caches, normal and NeoX pairs, frequency factors, an id past the cache's cells
/// (nothing written, the guard rows after them untouched); a q8_0 cache and rows outside their tokens' stride take the two ops.
#[test]
fn rope_set_rows_matches_rope_then_set_rows() {
    use ggml_dawn::ops::rope::RopeSetRowsPlan;
    let ctx = context();
    let (d, n_head, n_kv, cells) = (64, 9, 3, 40);
    let row = d * (n_head + 2 * n_kv);
    let f32_layout = |ne: [usize; 4], nb: [usize; 4], offset: usize| Layout {
        ty: GgmlType::F32,
        ne,
        nb,
        offset,
    };
    for tokens in [1, 7] {
        let n = row * tokens;
        let values: Vec<f32> = (0..n).map(|i| ((i * 31 % 211) as f32 - 105.0) / 70.0).collect();
        let ids: Vec<i32> = (0..tokens as i32)
            .map(|t| if t == 5 { cells as i32 + 1 } else { 13 + 3 * t })
            .collect();
        let ids_host = HostTensor {
            layout: Layout::contiguous(GgmlType::I32, [tokens, 1, 1, 1]).unwrap(),
            data: ids.iter().flat_map(|p| p.to_le_bytes()).collect(),
        };
        let ids = ctx.upload(&ids_host).unwrap();
        let ff = ctx
            .from_f32(
                GgmlType::F32,
                [d / 2, 1, 1, 1],
                &(0..d / 2).map(|i| 1.0 + i as f32 / 16.0).collect::<Vec<_>>(),
            )
            .unwrap();
        let heads = f32_layout([d, n_head + n_kv, tokens, 1], [4, d * 4, row * 4, row * 4 * tokens], 0);
        let kv = f32_layout(
            [2 * n_kv * d, tokens, 1, 1],
            [4, row * 4, row * 4, row * 4],
            n_head * d * 4,
        );
        for cache_type in [GgmlType::F16, GgmlType::F32, GgmlType::Q8_0] {
            for (mode, with_ff) in [(RopeMode::Normal, false), (RopeMode::Neox, true)] {
                let params = RopeParams::new(d, mode);
                let ff = with_ff.then_some(&ff);
                let run = |fused: bool| {
                    let y = ctx.from_f32(GgmlType::F32, [row, tokens, 1, 1], &values).unwrap();
                    // The cache's cells, followed in their buffer by two guard rows that no id
                    // may reach (token 5's id names the second).
                    let storage = ctx
                        .filled(
                            Layout::contiguous(cache_type, [2 * n_kv * d, cells + 2, 1, 1]).unwrap(),
                            0x3c,
                        )
                        .unwrap();
                    let whole = *storage.layout();
                    let cache = storage
                        .view(Layout {
                            ne: [2 * n_kv * d, cells, 1, 1],
                            ..whole
                        })
                        .unwrap();
                    let (x, rows) = (y.view(heads).unwrap(), y.view(kv).unwrap());
                    let ran = if fused {
                        Some(ctx.rope_set_rows(&x, &ids, ff, &params, &rows, &cache, &ids).unwrap())
                    } else {
                        ctx.rope_into(&x, &ids, ff, &x, &params).unwrap();
                        ctx.set_rows(&cache, &rows, &ids).unwrap();
                        None
                    };
                    let bytes = ctx.read(&storage).unwrap().data;
                    let guard = whole.nb[1] * cells;
                    assert!(
                        bytes[guard..].iter().all(|&b| b == 0x3c),
                        "a write past the cache's cells"
                    );
                    (ctx.read(&y).unwrap().data, bytes, ran)
                };
                let (y1, c1, ran) = run(true);
                let (y2, c2, _) = run(false);
                let what = format!("{tokens} tokens, {cache_type} cache, {mode:?}");
                assert!(y1 == y2, "{what}: the roped projection differs");
                assert!(c1 == c2, "{what}: the cache differs");
                let fused = matches!(ran, Some(RopeSetRowsPlan::Fused(_)));
                assert_eq!(fused, cache_type != GgmlType::Q8_0, "{what}: {}", ran.unwrap());
            }
        }
        // Rows past their token's stride (two tokens' values as one row): the two ops.
        if tokens > 1 {
            let y = ctx.from_f32(GgmlType::F32, [row, tokens, 1, 1], &values).unwrap();
            let cache = ctx.zeros(GgmlType::F16, [2 * row, cells, 1, 1]).unwrap();
            let wide = f32_layout(
                [2 * row, tokens / 2, 1, 1],
                [4, 2 * row * 4, 2 * row * 4, 2 * row * 4],
                0,
            );
            let few = ctx
                .upload(&HostTensor {
                    layout: Layout::contiguous(GgmlType::I32, [tokens / 2, 1, 1, 1]).unwrap(),
                    data: (0..(tokens / 2) as i32).flat_map(|p| p.to_le_bytes()).collect(),
                })
                .unwrap();
            let x = y.view(heads).unwrap();
            let ran = ctx
                .rope_set_rows(
                    &x,
                    &ids,
                    None,
                    &RopeParams::new(d, RopeMode::Normal),
                    &y.view(wide).unwrap(),
                    &cache,
                    &few,
                )
                .unwrap();
            assert!(matches!(ran, RopeSetRowsPlan::Separate(..)), "{ran}");
        }
    }
}

/// Each check refuses with an error naming the rule.
#[test]
fn bad_operands_are_errors() {
    let ctx = context();
    let x = ctx.zeros(GgmlType::F32, [16, 2, 3, 1]).unwrap();
    let (_, pos) = positions(&ctx, 3);
    let err = |p: &RopeParams| ctx.rope(&x, &pos, None, p).unwrap_err().to_string();
    let mut p = RopeParams::new(16, RopeMode::Neox);
    p.freq_base = f32::NAN;
    assert!(err(&p).contains("freq_base"));
    assert!(err(&RopeParams::new(15, RopeMode::Neox)).contains("even"));
    assert!(err(&RopeParams::new(18, RopeMode::Normal)).contains("exceed the row"));
    // Multi-section modes need four positions a token.
    let mut m = RopeParams::new(12, RopeMode::Mrope);
    m.sections = [2, 2, 2, 0];
    assert!(err(&m).contains("positions"));
    // Frequency factors: too few, not f32.
    let few = ctx.zeros(GgmlType::F32, [4, 1, 1, 1]).unwrap();
    let p = RopeParams::new(16, RopeMode::Neox);
    assert!(
        ctx.rope(&x, &pos, Some(&few), &p)
            .unwrap_err()
            .to_string()
            .contains("freq_factors")
    );
    // dst of other extents, or sharing bytes with x without being x.
    let other = ctx.zeros(GgmlType::F32, [16, 2, 2, 1]).unwrap();
    assert!(
        ctx.rope_into(&x, &pos, None, &other, &p)
            .unwrap_err()
            .to_string()
            .contains("extents")
    );
    let shifted = x.narrow(0, 0, 16).unwrap().narrow(2, 1, 2).unwrap();
    let part = x.narrow(2, 0, 2).unwrap();
    let e = ctx.rope_into(&part, &pos, None, &shifted, &p).unwrap_err().to_string();
    assert!(e.contains("overlaps"), "{e}");
}

/// The fused rope + KV-cache write refuses what either op refuses: fewer ids than tokens, a
/// cache of another row length, a cache sharing bytes with the rows it stores (on the fused and
/// on the separate path), or a cache view past its storage; nothing is recorded.
#[test]
fn rope_set_rows_refuses_bad_operands() {
    let ctx = context();
    let (d, heads, tokens) = (16, 4, 3);
    let y = ctx.zeros(GgmlType::F32, [d * heads, tokens, 1, 1]).unwrap();
    let whole = *y.layout();
    let x = y
        .view(Layout {
            ne: [d, heads, tokens, 1],
            nb: [4, d * 4, d * heads * 4, d * heads * tokens * 4],
            ..whole
        })
        .unwrap();
    let rows = y.view(whole).unwrap();
    let ids = |n: usize| {
        ctx.upload(&HostTensor {
            layout: Layout::contiguous(GgmlType::I32, [n, 1, 1, 1]).unwrap(),
            data: (0..n as i32).flat_map(|p| p.to_le_bytes()).collect(),
        })
        .unwrap()
    };
    let (pos, few) = (ids(tokens), ids(tokens - 1));
    let cache = ctx.zeros(GgmlType::F16, [d * heads, 8, 1, 1]).unwrap();
    let p = RopeParams::new(d, RopeMode::Normal);
    let before = ctx.stream_counts().dispatches;
    let err = |r: ggml_dawn::error::Result<ggml_dawn::ops::rope::RopeSetRowsPlan>| r.unwrap_err().to_string();
    assert!(err(ctx.rope_set_rows(&x, &pos, None, &p, &rows, &cache, &few)).contains("ids"));
    let narrow = ctx.zeros(GgmlType::F16, [d, 8, 1, 1]).unwrap();
    assert!(err(ctx.rope_set_rows(&x, &pos, None, &p, &rows, &narrow, &pos)).contains("dims 0"));
    // A cache over the rows' own bytes: refused on the fused path (f32) and on the separate one
    // (q8_0, which the fused kernel does not write) before the ROPE is recorded.
    assert!(err(ctx.rope_set_rows(&x, &pos, None, &p, &rows, &rows, &pos)).contains("overlaps"));
    let q8 = y
        .view(Layout {
            ty: GgmlType::Q8_0,
            ne: [d * heads, 1, 1, 1],
            nb: [34, 68, 68, 68],
            offset: 0,
        })
        .unwrap();
    let one = ids(1);
    let x1 = y
        .view(Layout {
            ne: [d, heads, 1, 1],
            nb: [4, d * 4, d * heads * 4, d * heads * 4],
            ..whole
        })
        .unwrap();
    let row1 = y
        .view(Layout {
            ne: [d * heads, 1, 1, 1],
            nb: [4, d * heads * 4, d * heads * 4, d * heads * 4],
            ..whole
        })
        .unwrap();
    assert!(err(ctx.rope_set_rows(&x1, &one, None, &p, &row1, &q8, &one)).contains("overlaps"));
    let cache_layout = *cache.layout();
    assert!(
        cache
            .view(Layout {
                ne: [d * heads, 9, 1, 1],
                ..cache_layout
            })
            .is_err()
    );
    assert_eq!(ctx.stream_counts().dispatches, before, "a refused call recorded work");
}
