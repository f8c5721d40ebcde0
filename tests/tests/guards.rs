//! Every operand a kernel reads lies in ONE buffer, at an aligned offset, followed by at least
//! 4 KiB of 0xFF bytes (NaN as f32 and f16, a NaN scale in a quantized block, -1 as an index);
//! dst is followed by such a guard too. The default context runs with Dawn's robustness off, so
//! nothing but the kernels' own bounds keeps them inside their operands: a read past an operand
//! turns the output into NaN or off values (the CPU reference catches both), and a write past
//! dst (or into any operand) changes a byte the test reads back.
//!
//! One case per kernel path of MUL_MAT (a quantized and an f16 weight, 1 and 9 columns, b a
//! strided, permuted view) and FLASH_ATTN_EXT (vec with one query, tile and mma with 8; f16 and
//! q8_0 K/V; a mask of exactly `n_q` rows and sinks), one of each decoder op with GPU kernels
//! (GET_ROWS, SET_ROWS, CPY, ROPE), and the q/k/v projection with its norm, ROPE and KV-cache
//! write fused into the mat-vec.

use std::ops::Range;

use ggml_dawn::ops::flash_attn::{self, FlashAttnOperands, FlashAttnParams};
use ggml_dawn::ops::mul_mat;
use ggml_dawn::reference::{self, RopeMode, RopeParams, metric};
use ggml_dawn::tuning::Overrides;
use ggml_dawn::{ContextOptions, DeviceTensor, GgmlType, GpuContext, HostTensor, Layout};

/// Bytes of 0xFF after each operand (more with the padding to the next aligned offset).
const GUARD_BYTES: usize = 4096;
/// Operands start at multiples of this (WebGPU's largest offset alignment), so each binding
/// starts at its operand's first byte.
const ALIGN: usize = 256;
const POISON: u8 = 0xFF;

fn context() -> GpuContext {
    GpuContext::new(ContextOptions::default()).expect("an adapter")
}

/// `n` values in [-1, 1), different for each seed, the same on every run.
fn values(n: usize, seed: u64) -> Vec<f32> {
    (0..n as u64)
        .map(|i| {
            let h = (i.wrapping_add(seed.wrapping_mul(0x9E37_79B9)))
                .wrapping_mul(0x2545_F491_4F6C_DD1D)
                .rotate_right(29);
            (h % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// A tensor of `layout` whose bytes are all 0xFF (what the op must overwrite).
fn poisoned(layout: Layout) -> HostTensor {
    HostTensor {
        layout,
        data: vec![POISON; layout.end_bytes().unwrap()],
    }
}

fn ids(ty: GgmlType, values: &[i64]) -> HostTensor {
    let data = match ty {
        GgmlType::I64 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        _ => values.iter().flat_map(|&v| (v as i32).to_le_bytes()).collect(),
    };
    HostTensor {
        layout: Layout::contiguous(ty, [values.len(), 1, 1, 1]).unwrap(),
        data,
    }
}

/// The host image of the one buffer: operands at aligned offsets, each followed by a guard.
#[derive(Default)]
struct Packing {
    bytes: Vec<u8>,
    /// The bytes the op may write (each output's storage: dst, and a second output's).
    dst: Vec<Range<usize>>,
}

impl Packing {
    /// Places `t`'s storage; returns its layout in the buffer.
    fn place(&mut self, t: &HostTensor) -> Layout {
        let base = self.bytes.len().next_multiple_of(ALIGN);
        self.bytes.resize(base, POISON);
        self.bytes.extend_from_slice(&t.data);
        let end = self.bytes.len() + GUARD_BYTES;
        self.bytes.resize(end.next_multiple_of(ALIGN), POISON);
        Layout {
            offset: base + t.layout.offset,
            ..t.layout
        }
    }

    /// Places an output's storage (its initial bytes) and marks it as bytes the op may change
    /// (with the other outputs', the only ones).
    fn place_dst(&mut self, t: &HostTensor) -> Layout {
        let layout = self.place(t);
        let start = layout.offset - t.layout.offset;
        self.dst.push(start..start + t.data.len());
        layout
    }

    fn upload(self, ctx: &GpuContext) -> Packed {
        let whole = ctx
            .upload(&HostTensor {
                layout: Layout::contiguous(GgmlType::I8, [self.bytes.len(), 1, 1, 1]).unwrap(),
                data: self.bytes.clone(),
            })
            .unwrap();
        Packed { host: self, whole }
    }
}

/// The buffer on the device.
struct Packed {
    host: Packing,
    whole: DeviceTensor,
}

impl Packed {
    /// The operand placed at `layout`, a view of the one buffer.
    fn tensor(&self, layout: Layout) -> DeviceTensor {
        self.whole.view(layout).unwrap()
    }

    /// Waits for the op, asserts that no byte outside the outputs changed (the guards after
    /// every operand and output are still 0xFF, the operands as uploaded), and returns the
    /// values of the output placed at `layout` as that layout holds them.
    fn finish(&self, ctx: &GpuContext, what: &str, layout: Layout) -> Vec<f32> {
        let after = ctx.read(&self.whole).unwrap().data;
        assert_eq!(after.len(), self.host.bytes.len(), "{what}: buffer size");
        let outputs = &self.host.dst;
        let changed: Vec<usize> = (0..after.len())
            .filter(|i| !outputs.iter().any(|d| d.contains(i)) && after[*i] != self.host.bytes[*i])
            .collect();
        let dst = outputs
            .iter()
            .find(|d| d.start == layout.offset)
            .cloned()
            .expect("an output placed at the layout's offset");
        assert!(
            changed.is_empty(),
            "{what}: {} bytes outside the outputs ({outputs:?}) changed, the first at {} (now {:#04x})",
            changed.len(),
            changed[0],
            after[changed[0]]
        );
        let contiguous = Layout {
            offset: 0,
            ..Layout::contiguous(layout.ty, layout.ne).unwrap()
        };
        assert_eq!(layout.offset, dst.start, "{what}: dst is contiguous from its base");
        HostTensor {
            layout: contiguous,
            data: after[dst].to_vec(),
        }
        .to_f32()
        .unwrap()
    }
}

/// Finite everywhere (a guard read shows as NaN) and within `max_nmse` of the reference.
fn assert_matches(what: &str, want: &[f32], got: &[f32], max_nmse: f64) {
    if let Some(i) = got.iter().position(|v| !v.is_finite()) {
        panic!("{what}: output {i} is {} (a guard byte read?)", got[i]);
    }
    if let Err(e) = metric::check(want, got, max_nmse) {
        panic!("{what}: {e}");
    }
}

/// MUL_MAT of an `a_ty` weight `[k, 33]` and `n` columns of b, b a view over 3 of every 4
/// rows of its storage with dimensions 1 and 2 swapped (strided and permuted; broadcast over a),
/// in a context of `options` (robustness off); `kernel` names the kernel the plan must take.
fn mul_mat_case(a_ty: GgmlType, n: usize, options: ContextOptions, kernel: &str) {
    let ctx = GpuContext::new(options).expect("an adapter");
    let (k, m, batch) = (256, 33, 3);
    let a = HostTensor::from_f32(a_ty, [k, m, 1, 1], &values(k * m, 1)).unwrap();
    let b_store = HostTensor::from_f32(GgmlType::F32, [k, batch + 1, n, 1], &values(k * (batch + 1) * n, 2)).unwrap();
    let b_view = |t: &HostTensor| t.narrow(1, 0, batch).unwrap().permute([0, 2, 1, 3]).unwrap();
    let b = b_view(&b_store);
    let want = reference::mul_mat(&a, &b).unwrap();

    let mut p = Packing::default();
    let la = p.place(&a);
    let lb = p.place(&b_store);
    let ld = p.place_dst(&poisoned(Layout::contiguous(GgmlType::F32, [m, n, batch, 1]).unwrap()));
    let packed = p.upload(&ctx);
    let (da, dd) = (packed.tensor(la), packed.tensor(ld));
    let db = packed
        .tensor(lb)
        .narrow(1, 0, batch)
        .unwrap()
        .permute([0, 2, 1, 3])
        .unwrap();
    let plan = mul_mat::describe(&ctx.env(), da.layout(), db.layout(), dd.layout());
    let what = format!("MUL_MAT {a_ty} x f32 view, n = {n} ({plan})");
    assert!(plan.contains(kernel), "{what}: not the {kernel} kernel");
    ctx.mul_mat_into(&da, &db, &dd).unwrap();
    let got = packed.finish(&ctx, &what, ld);
    assert_matches(&what, &want, &got, metric::MUL_MAT_MAX_NMSE);
}

#[test]
fn mul_mat_q4_0_vector_stays_inside() {
    mul_mat_case(GgmlType::Q4_0, 1, ContextOptions::default(), "mat-vec");
}

#[test]
fn mul_mat_q4_0_matrix_stays_inside() {
    mul_mat_case(GgmlType::Q4_0, 9, ContextOptions::default(), "subgroup-matrix");
}

/// The register-tiled kernel (the mat-mat path of devices without subgroup matrices).
#[test]
fn mul_mat_q4_0_tiled_stays_inside() {
    mul_mat_case(
        GgmlType::Q4_0,
        9,
        ContextOptions {
            no_subgroup_matrix: true,
            ..ContextOptions::default()
        },
        "register-tiled",
    );
}

#[test]
fn mul_mat_f16_vector_stays_inside() {
    mul_mat_case(GgmlType::F16, 1, ContextOptions::default(), "mat-vec");
}

#[test]
fn mul_mat_f16_matrix_stays_inside() {
    mul_mat_case(GgmlType::F16, 9, ContextOptions::default(), "subgroup-matrix");
}

/// FLASH_ATTN_EXT with head size 64, 4 query heads over 2 KV heads, 113 keys (no whole tile),
/// `n_q` queries, a mask of exactly `n_q` rows and sinks; `kernel` forces the kernel
/// (`None`: the plan's choice) and must name the one the plan describes.
fn flash_attn_case(kv_ty: GgmlType, n_q: usize, kernel: Option<&str>) {
    let base = context();
    let ctx = match kernel {
        Some(k) => base
            .with_tuning(Overrides::parse("", &format!("kernel={k}")).expect("knobs parse"))
            .expect("valid knobs"),
        None => base,
    };
    let (hs, nh, nkv, kv) = (64, 4, 2, 113);
    let q = HostTensor::from_f32(GgmlType::F32, [hs, n_q, nh, 1], &values(hs * n_q * nh, 3)).unwrap();
    let k = HostTensor::from_f32(kv_ty, [hs, kv, nkv, 1], &values(hs * kv * nkv, 4)).unwrap();
    let v = HostTensor::from_f32(kv_ty, [hs, kv, nkv, 1], &values(hs * kv * nkv, 5)).unwrap();
    // Scores biased in [-2, 0], and every seventh key masked out.
    let mask_values: Vec<f32> = values(kv * n_q, 6)
        .into_iter()
        .enumerate()
        .map(|(i, x)| if i % 7 == 3 { f32::NEG_INFINITY } else { x - 1.0 })
        .collect();
    let mask = HostTensor::from_f32(GgmlType::F16, [kv, n_q, 1, 1], &mask_values).unwrap();
    let sinks = HostTensor::from_f32(GgmlType::F32, [nh, 1, 1, 1], &values(nh, 7)).unwrap();
    let scale = 1.0 / (hs as f32).sqrt();
    let want = reference::flash_attn_ext(&q, &k, &v, Some(&mask), Some(&sinks), scale, 0.0, 0.0).unwrap();

    let mut p = Packing::default();
    let lq = p.place(&q);
    let lk = p.place(&k);
    let lv = p.place(&v);
    let lm = p.place(&mask);
    let ls = p.place(&sinks);
    let ld = p.place_dst(&poisoned(Layout::contiguous(GgmlType::F32, [hs, nh, n_q, 1]).unwrap()));
    let packed = p.upload(&ctx);
    let (dq, dk, dv, dm, ds, dd) = (
        packed.tensor(lq),
        packed.tensor(lk),
        packed.tensor(lv),
        packed.tensor(lm),
        packed.tensor(ls),
        packed.tensor(ld),
    );
    let ops = FlashAttnOperands {
        q: &dq,
        k: &dk,
        v: &dv,
        mask: Some(&dm),
        sinks: Some(&ds),
        dst: &dd,
    };
    let plan = flash_attn::describe(&ctx.env(), &ops.layouts());
    let what = format!("FLASH_ATTN_EXT {kv_ty} K/V, n_q = {n_q} ({plan})");
    if let Some(k) = kernel {
        assert!(plan.starts_with(k), "{what}: not the {k} kernel");
    }
    ctx.flash_attn_ext_into(&ops, FlashAttnParams::scaled(scale)).unwrap();
    let got = packed.finish(&ctx, &what, ld);
    assert_matches(&what, &want, &got, metric::FLASH_ATTN_EXT_MAX_NMSE);
}

#[test]
fn flash_attn_vec_f16_stays_inside() {
    flash_attn_case(GgmlType::F16, 1, Some("vec"));
}

#[test]
fn flash_attn_vec_q8_0_stays_inside() {
    flash_attn_case(GgmlType::Q8_0, 1, Some("vec"));
}

#[test]
fn flash_attn_tile_f16_stays_inside() {
    flash_attn_case(GgmlType::F16, 8, Some("tile"));
}

#[test]
fn flash_attn_tile_q8_0_stays_inside() {
    flash_attn_case(GgmlType::Q8_0, 8, Some("tile"));
}

#[test]
fn flash_attn_planned_f16_stays_inside() {
    flash_attn_case(GgmlType::F16, 8, None);
}

#[test]
fn flash_attn_planned_q8_0_stays_inside() {
    flash_attn_case(GgmlType::Q8_0, 8, None);
}

/// GET_ROWS of 4 rows (one twice) of an f16 table of 10 rows, into f32.
#[test]
fn get_rows_stays_inside() {
    let ctx = context();
    let src = HostTensor::from_f32(GgmlType::F16, [64, 10, 1, 1], &values(640, 8)).unwrap();
    let ids = ids(GgmlType::I32, &[3, 0, 9, 3]);
    let want = reference::get_rows(&src, &ids).unwrap();
    let mut p = Packing::default();
    let (ls, li) = (p.place(&src), p.place(&ids));
    let ld = p.place_dst(&poisoned(Layout::contiguous(GgmlType::F32, [64, 4, 1, 1]).unwrap()));
    let packed = p.upload(&ctx);
    ctx.get_rows_into(&packed.tensor(ls), &packed.tensor(li), &packed.tensor(ld))
        .unwrap();
    let got = packed.finish(&ctx, "GET_ROWS", ld);
    assert_matches("GET_ROWS", &want, &got, metric::default_max_nmse(true));
}

/// SET_ROWS of 3 f32 rows into rows 5, 0 and 2 of an f16 cache of 8 rows (i64 ids): the other
/// rows keep their values, nothing past the cache changes.
#[test]
fn set_rows_stays_inside() {
    let ctx = context();
    let cache = HostTensor::from_f32(GgmlType::F16, [64, 8, 1, 1], &values(512, 9)).unwrap();
    let src = HostTensor::from_f32(GgmlType::F32, [64, 3, 1, 1], &values(192, 10)).unwrap();
    let ids = ids(GgmlType::I64, &[5, 0, 2]);
    let want = reference::set_rows(&cache, &src, &ids).unwrap().to_f32().unwrap();
    let mut p = Packing::default();
    let (ls, li) = (p.place(&src), p.place(&ids));
    let ld = p.place_dst(&cache);
    let packed = p.upload(&ctx);
    ctx.set_rows(&packed.tensor(ld), &packed.tensor(ls), &packed.tensor(li))
        .unwrap();
    let got = packed.finish(&ctx, "SET_ROWS", ld);
    assert_matches("SET_ROWS", &want, &got, metric::default_max_nmse(true));
}

/// CPY of a permuted f32 view into a contiguous f16 tensor.
#[test]
fn cpy_stays_inside() {
    let ctx = context();
    let store = HostTensor::from_f32(GgmlType::F32, [64, 6, 2, 1], &values(768, 11)).unwrap();
    let src = store.permute([0, 2, 1, 3]).unwrap();
    let dst_layout = Layout::contiguous(GgmlType::F16, src.layout.ne).unwrap();
    let want = reference::cpy(&src, &poisoned(dst_layout)).unwrap().to_f32().unwrap();
    let mut p = Packing::default();
    let ls = p.place(&store);
    let ld = p.place_dst(&poisoned(dst_layout));
    let packed = p.upload(&ctx);
    let dsrc = packed.tensor(ls).permute([0, 2, 1, 3]).unwrap();
    ctx.cpy(&dsrc, &packed.tensor(ld)).unwrap();
    let got = packed.finish(&ctx, "CPY", ld);
    assert_matches("CPY", &want, &got, metric::default_max_nmse(true));
}

/// ROPE (NeoX) of 4 heads of 64 over 3 tokens at positions 0, 5 and 17.
#[test]
fn rope_stays_inside() {
    let ctx = context();
    let x = HostTensor::from_f32(GgmlType::F32, [64, 4, 3, 1], &values(768, 12)).unwrap();
    let pos = ids(GgmlType::I32, &[0, 5, 17]);
    let params = RopeParams::new(64, RopeMode::Neox);
    let want = reference::rope(&x, &pos, None, &params).unwrap();
    let mut p = Packing::default();
    let (lx, lp) = (p.place(&x), p.place(&pos));
    let ld = p.place_dst(&poisoned(x.layout));
    let packed = p.upload(&ctx);
    ctx.rope_into(
        &packed.tensor(lx),
        &packed.tensor(lp),
        None,
        &packed.tensor(ld),
        &params,
    )
    .unwrap();
    let got = packed.finish(&ctx, "ROPE", ld);
    assert_matches("ROPE", &want, &got, metric::default_max_nmse(false));
}

/// The residual ADD fused before RMS_NORM·weight (two outputs, the sum and the normed rows):
/// nothing outside the two outputs changes, and both hold the reference's values.
#[test]
fn add_rms_norm_stays_inside() {
    let ctx = context();
    let x = HostTensor::from_f32(GgmlType::F32, [64, 3, 1, 1], &values(192, 13)).unwrap();
    let r = HostTensor::from_f32(GgmlType::F32, [64, 3, 1, 1], &values(192, 14)).unwrap();
    let w = HostTensor::from_f32(GgmlType::F32, [64, 1, 1, 1], &values(64, 15)).unwrap();
    let sum = reference::binary(reference::BinaryOp::Add, &x, &r).unwrap();
    let hsum = HostTensor::from_f32(GgmlType::F32, [64, 3, 1, 1], &sum).unwrap();
    let want = reference::rms_norm_mul_add(&hsum, Some(&w), None, reference::RmsNormParams { eps: 1e-6 }).unwrap();
    let mut p = Packing::default();
    let (lx, lr, lw) = (p.place(&x), p.place(&r), p.place(&w));
    let ls = p.place_dst(&poisoned(x.layout));
    let ld = p.place_dst(&poisoned(x.layout));
    let packed = p.upload(&ctx);
    ctx.add_rms_norm_mul_add_into(
        &packed.tensor(lx),
        &packed.tensor(lr),
        &packed.tensor(ls),
        Some(&packed.tensor(lw)),
        None,
        &packed.tensor(ld),
        1e-6,
    )
    .unwrap();
    let got_sum = packed.finish(&ctx, "ADD then RMS_NORM (sum)", ls);
    assert_matches(
        "ADD then RMS_NORM (sum)",
        &sum,
        &got_sum,
        metric::default_max_nmse(false),
    );
    let got = packed.finish(&ctx, "ADD then RMS_NORM", ld);
    assert_matches("ADD then RMS_NORM", &want, &got, metric::default_max_nmse(false));
}

/// A transposing f16 CPY through 32×32 tiles (partial tiles at both edges): nothing outside dst
/// changes, dst holds the reference's values.
#[test]
fn transposed_cpy_through_tiles_stays_inside() {
    let ctx = context();
    let store = HostTensor::from_f32(GgmlType::F16, [45, 34, 2, 1], &values(45 * 34 * 2, 16)).unwrap();
    let src = store.permute([1, 0, 2, 3]).unwrap();
    let dst_layout = Layout::contiguous(GgmlType::F16, src.layout.ne).unwrap();
    let want = reference::cpy(&src, &poisoned(dst_layout)).unwrap().to_f32().unwrap();
    let mut p = Packing::default();
    let ls = p.place(&store);
    let ld = p.place_dst(&poisoned(dst_layout));
    let packed = p.upload(&ctx);
    let dsrc = packed.tensor(ls).permute([1, 0, 2, 3]).unwrap();
    let plan = ctx.cpy(&dsrc, &packed.tensor(ld)).unwrap();
    assert!(plan.tiled, "{plan}");
    let got = packed.finish(&ctx, "CPY (tiles)", ld);
    assert_matches("CPY (tiles)", &want, &got, 0.0);
}

/// A q/k/v projection with the steps fused into its mat-vec (the residual ADD and RMS_NORM
/// before it, ROPE and the KV-cache write after it), b quantized in the mat-vec's workgroups
/// and in its quantize pass: nothing outside the result, the sum and the cache changes, and
/// they hold the values of the ops apart.
#[test]
fn norm_mul_mat_rope_set_rows_stays_inside() {
    use ggml_dawn::ops::mul_mat::{NormMulMatRopePlan, RopeSetRows};
    let (k, d, heads, kv_heads) = (256, 16, 4, 2);
    let m = (heads + 2 * kv_heads) * d;
    let width = 2 * kv_heads * d;
    let a = HostTensor::from_f32(GgmlType::Q4_0, [k, m, 1, 1], &values(k * m, 21)).unwrap();
    let x = HostTensor::from_f32(GgmlType::F32, [k, 1, 1, 1], &values(k, 22)).unwrap();
    let r = HostTensor::from_f32(GgmlType::F32, [k, 1, 1, 1], &values(k, 23)).unwrap();
    let w = HostTensor::from_f32(GgmlType::F32, [k, 1, 1, 1], &values(k, 24)).unwrap();
    let ff = HostTensor::from_f32(GgmlType::F32, [d / 2, 1, 1, 1], &[1.5; 8]).unwrap();
    let pos = ids(GgmlType::I32, &[5]);
    let cells = ids(GgmlType::I32, &[2]);
    let cache_layout = Layout::contiguous(GgmlType::F16, [width, 4, 1, 1]).unwrap();
    let params = RopeParams::new(d, RopeMode::Normal);
    for knobs in ["vec_int_b_wg_max_k=2048", "vec_int_b_wg_max_k=0"] {
        let ctx = GpuContext::new(ContextOptions {
            tuning: Overrides::parse(knobs, "").unwrap(),
            ..Default::default()
        })
        .expect("an adapter");
        let mut p = Packing::default();
        let (la, lx, lr, lw, lf, lp, li) = (
            p.place(&a),
            p.place(&x),
            p.place(&r),
            p.place(&w),
            p.place(&ff),
            p.place(&pos),
            p.place(&cells),
        );
        let ld = p.place_dst(&poisoned(Layout::contiguous(GgmlType::F32, [m, 1, 1, 1]).unwrap()));
        let ls = p.place_dst(&poisoned(x.layout));
        let lc = p.place_dst(&HostTensor {
            layout: cache_layout,
            data: vec![0; cache_layout.end_bytes().unwrap()],
        });
        let packed = p.upload(&ctx);
        let t = |l: Layout| packed.tensor(l);
        let (da, dx, dr, dw, df, dp, di, dd, ds, dc) =
            (t(la), t(lx), t(lr), t(lw), t(lf), t(lp), t(li), t(ld), t(ls), t(lc));
        let rope = |cache| RopeSetRows {
            heads: heads + kv_heads,
            head_dim: d,
            pos: &dp,
            freq_factors: Some(&df),
            params: &params,
            kv_start: heads * d,
            cache,
            ids: &di,
        };
        let residual = mul_mat::Residual {
            residual: &dr,
            sum: &ds,
        };
        let ran = ctx
            .rms_norm_mul_mat_rope_set_rows_into(&da, &dx, Some(residual), &dw, 1e-6, &dd, rope(&dc))
            .unwrap();
        let what = format!("{knobs}: {ran}");
        assert!(matches!(ran, NormMulMatRopePlan::Fused(_)), "{what}");
        // The ops apart, on tensors of their own.
        let (want_d, want_s, want_c) = (
            ctx.empty(GgmlType::F32, [m, 1, 1, 1]).unwrap(),
            ctx.empty(GgmlType::F32, [k, 1, 1, 1]).unwrap(),
            ctx.zeros(GgmlType::F16, [width, 4, 1, 1]).unwrap(),
        );
        let apart = mul_mat::Residual {
            residual: &dr,
            sum: &want_s,
        };
        ctx.rms_norm_mul_mat_into(&da, &dx, Some(apart), &dw, 1e-6, &want_d)
            .unwrap();
        let op = rope(&want_c);
        let heads_view = want_d.view(op.heads_layout(want_d.layout()).unwrap()).unwrap();
        let rows = want_d.view(op.rows_layout(want_d.layout()).unwrap()).unwrap();
        ctx.rope_into(&heads_view, &dp, Some(&df), &heads_view, &params)
            .unwrap();
        ctx.set_rows(&want_c, &rows, &di).unwrap();
        for (name, layout, want) in [
            ("the result", ld, &want_d),
            ("the sum", ls, &want_s),
            ("the cache", lc, &want_c),
        ] {
            let got = packed.finish(&ctx, &format!("{what}: {name}"), layout);
            assert_matches(&format!("{what}: {name}"), &ctx.read_f32(want).unwrap(), &got, 0.0);
        }
    }
}
