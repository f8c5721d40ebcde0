//! Tensors past the device's limits give clear errors, never wrong results.

use ggml_dawn::error::BackendError;
use ggml_dawn::memory::{self, DeviceTensor};
use ggml_dawn::tuning::{Overrides, Tuning};
use ggml_dawn::{ContextOptions, GgmlType, GpuContext, Layout};

fn tensor(ctx: &GpuContext, ty: GgmlType, ne: [usize; 4]) -> DeviceTensor {
    ctx.empty(ty, ne).unwrap()
}

#[test]
fn a_tensor_over_the_binding_limit_is_an_error() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let max = ctx.capabilities().limits.max_storage_buffer_binding_size;
    // src0 one row longer than what one binding may cover.
    let k = 4096;
    let rows = (max as usize / (k * 4)) + 1;
    let a = tensor(&ctx, GgmlType::F32, [k, rows, 1, 1]);
    let b = tensor(&ctx, GgmlType::F32, [k, 1, 1, 1]);
    let dst = tensor(&ctx, GgmlType::F32, [rows, 1, 1, 1]);
    let mut stream = ctx.stream().unwrap();
    let err = ggml_dawn::ops::mul_mat::mul_mat(&ctx, &mut stream, &a, &b, &dst).unwrap_err();
    assert!(
        matches!(
            err,
            BackendError::TooLarge {
                limit_name: "maxStorageBufferBindingSize",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("maxStorageBufferBindingSize"), "{err}");
}

#[test]
fn a_buffer_over_the_size_limit_is_an_error() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let too_big = ctx.capabilities().limits.max_buffer_size + 16;
    let err = ctx.empty(GgmlType::F32, [too_big as usize / 4, 1, 1, 1]).unwrap_err();
    assert!(
        matches!(
            err,
            BackendError::TooLarge {
                limit_name: "maxBufferSize",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn mismatched_operands_are_errors() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let a = tensor(&ctx, GgmlType::Q4_0, [64, 8, 1, 1]);
    let b = tensor(&ctx, GgmlType::F32, [32, 2, 1, 1]);
    let dst = tensor(&ctx, GgmlType::F32, [8, 2, 1, 1]);
    let mut stream = ctx.stream().unwrap();
    let err = ggml_dawn::ops::mul_mat::mul_mat(&ctx, &mut stream, &a, &b, &dst).unwrap_err();
    assert!(matches!(err, BackendError::InvalidOperands(_)), "{err}");
    // A broadcast that does not divide.
    let a = tensor(&ctx, GgmlType::F16, [32, 8, 2, 1]);
    let b = tensor(&ctx, GgmlType::F32, [32, 2, 3, 1]);
    let dst = tensor(&ctx, GgmlType::F32, [8, 2, 3, 1]);
    assert!(ggml_dawn::ops::mul_mat::mul_mat(&ctx, &mut stream, &a, &b, &dst).is_err());
    // Nothing was recorded for the refused calls.
    assert_eq!(stream.pending(), 0);
}

#[test]
fn device_tensors_are_checked_against_their_buffer() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    // SAFETY: the test only makes buffers on the device; it destroys none and runs nothing on
    // it but the backend's own kernels.
    let device = unsafe { ctx.device() };
    let buffer = memory::create_storage(device, "t", 64).unwrap();
    let l = Layout::contiguous(GgmlType::F32, [4, 4, 1, 1]).unwrap();
    let t = DeviceTensor::new(l, buffer.clone(), 0, 64).unwrap();
    assert_eq!((t.base(), t.storage_bytes(), *t.layout()), (0, 64, l));
    // Storage past the buffer's end, or whose end overflows.
    assert!(DeviceTensor::new(l, buffer.clone(), 4, 64).is_err());
    assert!(DeviceTensor::new(l, buffer.clone(), u64::MAX, 2).is_err());
    // A layout past its storage: too short, an offset, strides that overflow.
    assert!(DeviceTensor::new(l, buffer.clone(), 0, 60).is_err());
    assert!(t.view(Layout { offset: 4, ..l }).is_err());
    assert!(
        t.view(Layout {
            nb: [4, usize::MAX / 2, 4, 4],
            ..l
        })
        .is_err()
    );
    assert!(t.view(l.permute([1, 0, 2, 3]).unwrap()).is_ok());
    // A binding is never cut short at the buffer's end: an f16 [3] fills a 6-byte buffer, and
    // its binding would need 8 bytes.
    let odd = device
        .create_buffer(&dawn::BufferDescriptor::new(
            6,
            dawn::BufferUsage::STORAGE | dawn::BufferUsage::COPY_DST,
        ))
        .unwrap();
    let f16 = DeviceTensor::new(Layout::contiguous(GgmlType::F16, [3, 1, 1, 1]).unwrap(), odd, 0, 6).unwrap();
    let err = f16.binding(256, u64::from(u32::MAX)).unwrap_err();
    assert!(matches!(err, BackendError::InvalidOperands(_)), "{err}");
}

#[test]
fn degenerate_attention_shapes_are_errors() {
    use ggml_dawn::ops::flash_attn::{self, FlashAttnOperands, FlashAttnParams};
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    // Zero query heads over one KV head.
    let q = tensor(&ctx, GgmlType::F32, [64, 1, 0, 1]);
    let k = tensor(&ctx, GgmlType::F16, [64, 32, 1, 1]);
    let v = tensor(&ctx, GgmlType::F16, [64, 32, 1, 1]);
    let dst = tensor(&ctx, GgmlType::F32, [64, 0, 1, 1]);
    let ops = FlashAttnOperands {
        q: &q,
        k: &k,
        v: &v,
        mask: None,
        sinks: None,
        dst: &dst,
    };
    let params = FlashAttnParams::scaled(0.125);
    let mut stream = ctx.stream().unwrap();
    let err = flash_attn::flash_attn_ext(&ctx, &mut stream, &ops, params).unwrap_err();
    assert!(matches!(err, BackendError::InvalidOperands(_)), "{err}");
    assert_eq!(stream.pending(), 0);
}

/// A wait that times out stops the stream: it reports why and refuses later work at once
/// instead of waiting again.
#[test]
fn a_stream_stops_after_a_timeout_and_fails_fast() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    // About a second of work on lavapipe, waited for with no time at all.
    let a = tensor(&ctx, GgmlType::F32, [1024, 1024, 1, 1]);
    let b = tensor(&ctx, GgmlType::F32, [1024, 512, 1, 1]);
    let dst = tensor(&ctx, GgmlType::F32, [1024, 512, 1, 1]);
    let mut stream = ctx.stream().unwrap();
    ggml_dawn::ops::mul_mat::mul_mat(&ctx, &mut stream, &a, &b, &dst).unwrap();
    let err = stream.synchronize(std::time::Duration::ZERO).unwrap_err();
    assert!(stream.failure().is_some(), "{err}");
    let again = ggml_dawn::ops::mul_mat::mul_mat(&ctx, &mut stream, &a, &b, &dst).unwrap_err();
    assert!(matches!(again, BackendError::StreamFailed(_)), "{again}");
    assert!(matches!(stream.flush(), Err(BackendError::StreamFailed(_))));
    // A fresh stream on the same context still works once the device is done.
    let mut fresh = ctx.stream().unwrap();
    fresh.synchronize(std::time::Duration::from_secs(600)).unwrap();
    ggml_dawn::ops::mul_mat::mul_mat(&ctx, &mut fresh, &a, &b, &dst).unwrap();
    fresh.synchronize(std::time::Duration::from_secs(600)).unwrap();
}

/// The simple attention path's f32 copies of K and V live in the context's scratch, so repeated
/// calls reuse their buffers and bind groups instead of keeping each call's copies alive.
#[test]
fn repeated_attention_reuses_its_buffers() {
    use ggml_dawn::ops::flash_attn::{self, FlashAttnOperands, FlashAttnParams};
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let q = tensor(&ctx, GgmlType::F32, [64, 1, 4, 1]);
    let k = tensor(&ctx, GgmlType::F16, [64, 32, 2, 1]);
    let v = tensor(&ctx, GgmlType::F16, [64, 32, 2, 1]);
    let dst = tensor(&ctx, GgmlType::F32, [64, 4, 1, 1]);
    let ops = FlashAttnOperands {
        q: &q,
        k: &k,
        v: &v,
        mask: None,
        sinks: None,
        dst: &dst,
    };
    let params = FlashAttnParams::scaled(0.125);
    let ctx = ctx.with_tuning(Overrides::parse("", "kernel=simple").unwrap()).unwrap();
    let mut stream = ctx.stream().unwrap();
    let mut counts = Vec::new();
    for _ in 0..6 {
        flash_attn::flash_attn_ext(&ctx, &mut stream, &ops, params).unwrap();
        counts.push(stream.cached_bind_groups());
    }
    stream.synchronize(std::time::Duration::from_secs(600)).unwrap();
    assert!(counts.windows(2).all(|w| w[0] == w[1]), "bind groups grew: {counts:?}");
}

/// An op whose dispatches pass data through the context's scratch submits them together, so
/// another stream of the same context cannot overwrite the scratch between them: here stream `a`
/// has a submit nearly full when it records attention's f32 copies of K and V and the kernel
/// reading them, and stream `b` runs attention over other K and V (through the same scratch)
/// before `a` submits again.
#[test]
fn an_ops_scratch_is_not_overwritten_by_another_stream() {
    use ggml_dawn::exec::FIRST_SUBMIT_DISPATCHES;
    use ggml_dawn::ops::dequantize;
    use ggml_dawn::ops::flash_attn::{self, FlashAttnOperands, FlashAttnParams};
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let ctx = ctx.with_tuning(Overrides::parse("", "kernel=simple").unwrap()).unwrap();
    let values =
        |n: usize, seed: usize| -> Vec<f32> { (0..n).map(|i| ((i * 7 + seed) % 23) as f32 / 11.0 - 1.0).collect() };
    let kv = |seed| {
        ctx.from_f32(GgmlType::F16, [64, 32, 1, 1], &values(64 * 32, seed))
            .unwrap()
    };
    let q = ctx.from_f32(GgmlType::F32, [64, 1, 2, 1], &values(128, 1)).unwrap();
    let (k1, v1, k2, v2) = (kv(2), kv(3), kv(4), kv(5));
    let params = FlashAttnParams::scaled(0.125);
    let expected = ctx
        .read_f32(&ctx.flash_attn_ext(&q, &k1, &v1, None, None, params).unwrap())
        .unwrap();
    let (dst1, dst2) = (
        tensor(&ctx, GgmlType::F32, [64, 2, 1, 1]),
        tensor(&ctx, GgmlType::F32, [64, 2, 1, 1]),
    );
    fn ops<'a>(
        q: &'a DeviceTensor,
        k: &'a DeviceTensor,
        v: &'a DeviceTensor,
        dst: &'a DeviceTensor,
    ) -> FlashAttnOperands<'a> {
        FlashAttnOperands {
            q,
            k,
            v,
            mask: None,
            sinks: None,
            dst,
        }
    }
    let (mut a, mut b) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let (x, y) = (kv(6), tensor(&ctx, GgmlType::F32, [64, 32, 1, 1]));
    for _ in 0..FIRST_SUBMIT_DISPATCHES - 2 {
        dequantize::dequantize(&ctx, &mut a, &x, &y).unwrap();
    }
    flash_attn::flash_attn_ext(&ctx, &mut a, &ops(&q, &k1, &v1, &dst1), params).unwrap();
    // The copies and the kernel wait in `a`, all three, not split over two submits.
    assert_eq!(a.pending(), 3, "{:?}", a.pending_dispatches());
    flash_attn::flash_attn_ext(&ctx, &mut b, &ops(&q, &k2, &v2, &dst2), params).unwrap();
    b.synchronize(std::time::Duration::from_secs(600)).unwrap();
    a.synchronize(std::time::Duration::from_secs(600)).unwrap();
    assert_eq!(ctx.read_f32(&dst1).unwrap(), expected);
}

/// The bind groups a stream caches keep their buffers alive; once nothing else holds one of
/// their buffers (its tensors were dropped), they are let go at the next submit, so an op run
/// again and again on fresh tensors does not keep every earlier call's tensors alive (what the
/// 4096-entry cap alone allowed: gigabytes of dropped outputs).
#[test]
fn cached_bind_groups_let_go_of_dropped_tensors() {
    use ggml_dawn::ops::dequantize;
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let src = ctx.zeros(GgmlType::F16, [256, 4, 1, 1]).unwrap();
    let kept = tensor(&ctx, GgmlType::F32, [256, 4, 1, 1]);
    let mut stream = ctx.stream().unwrap();
    dequantize::dequantize(&ctx, &mut stream, &src, &kept).unwrap();
    for _ in 0..40 {
        let fresh = tensor(&ctx, GgmlType::F32, [256, 4, 1, 1]);
        dequantize::dequantize(&ctx, &mut stream, &src, &fresh).unwrap();
    }
    stream.synchronize(std::time::Duration::from_secs(600)).unwrap();
    // Only the group of the tensors still held is left.
    assert_eq!(stream.cached_bind_groups(), 1);
    dequantize::dequantize(&ctx, &mut stream, &src, &kept).unwrap();
    assert_eq!(stream.cached_bind_groups(), 1, "reused, not made again");
    stream.synchronize(std::time::Duration::from_secs(600)).unwrap();
    assert_eq!(stream.cached_bind_groups(), 1);
}

/// A tensor of another device never reaches a kernel: without validation nothing else would stop
/// a binding of foreign memory.
#[test]
fn tensors_of_another_device_are_refused() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let other = GpuContext::new(ContextOptions::default()).unwrap();
    let a = tensor(&ctx, GgmlType::F32, [32, 4, 1, 1]);
    let b = tensor(&other, GgmlType::F32, [32, 2, 1, 1]);
    let err = ctx.mul_mat(&a, &b).unwrap_err();
    assert!(matches!(err, BackendError::InvalidOperands(_)), "{err}");
    assert!(ctx.read(&b).is_err());
    let mut stream = ctx.stream().unwrap();
    let dst = tensor(&ctx, GgmlType::F32, [4, 2, 1, 1]);
    assert!(ggml_dawn::ops::mul_mat::mul_mat(&ctx, &mut stream, &a, &b, &dst).is_err());
    assert_eq!(stream.pending(), 0);
}

/// A stream of another device never records this context's kernels: its bind groups and passes
/// would mix the two devices' objects, which nothing checks without validation.
#[test]
fn streams_of_another_device_are_refused() {
    use ggml_dawn::ops::flash_attn::{self, FlashAttnOperands, FlashAttnParams};
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let other = GpuContext::new(ContextOptions::default()).unwrap();
    let mut foreign = other.stream().unwrap();
    let a = tensor(&ctx, GgmlType::F32, [32, 4, 1, 1]);
    let b = tensor(&ctx, GgmlType::F32, [32, 2, 1, 1]);
    let dst = tensor(&ctx, GgmlType::F32, [4, 2, 1, 1]);
    let err = ggml_dawn::ops::mul_mat::mul_mat(&ctx, &mut foreign, &a, &b, &dst).unwrap_err();
    assert!(matches!(err, BackendError::InvalidOperands(_)), "{err}");

    let q = tensor(&ctx, GgmlType::F32, [64, 1, 2, 1]);
    let k = tensor(&ctx, GgmlType::F16, [64, 32, 1, 1]);
    let v = tensor(&ctx, GgmlType::F16, [64, 32, 1, 1]);
    let out = tensor(&ctx, GgmlType::F32, [64, 2, 1, 1]);
    let ops = FlashAttnOperands {
        q: &q,
        k: &k,
        v: &v,
        mask: None,
        sinks: None,
        dst: &out,
    };
    let params = FlashAttnParams::scaled(0.125);
    let err = flash_attn::flash_attn_ext(&ctx, &mut foreign, &ops, params).unwrap_err();
    assert!(matches!(err, BackendError::InvalidOperands(_)), "{err}");

    let f32_k = tensor(&ctx, GgmlType::F32, [64, 32, 1, 1]);
    let err = ggml_dawn::ops::dequantize::dequantize(&ctx, &mut foreign, &k, &f32_k).unwrap_err();
    assert!(matches!(err, BackendError::InvalidOperands(_)), "{err}");
    assert_eq!(foreign.pending(), 0);

    // The context's own streams still take the same operands.
    let mut own = ctx.stream().unwrap();
    ggml_dawn::ops::mul_mat::mul_mat(&ctx, &mut own, &a, &b, &dst).unwrap();
    own.synchronize(std::time::Duration::from_secs(600)).unwrap();
}

/// Device facts that claim more than the device has are refused before anything is recorded: a
/// kernel planned for them could need workgroup memory, workgroup sizes or subgroup matrices the
/// device lacks, which nothing checks without validation and robustness. Facts that claim less
/// run.
#[test]
fn facts_beyond_the_device_are_refused() {
    use ggml_dawn::DeviceFacts;
    use ggml_dawn::facts::MatrixConfig;
    use ggml_dawn::ops::flash_attn::{self, FlashAttnOperands, FlashAttnParams};
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let facts = ctx.facts();
    let a = tensor(&ctx, GgmlType::F32, [256, 64, 1, 1]);
    let b = tensor(&ctx, GgmlType::F32, [256, 16, 1, 1]);
    let dst = tensor(&ctx, GgmlType::F32, [64, 16, 1, 1]);
    let q = tensor(&ctx, GgmlType::F32, [64, 8, 2, 1]);
    let k = tensor(&ctx, GgmlType::F16, [64, 32, 1, 1]);
    let out = tensor(&ctx, GgmlType::F32, [64, 2, 8, 1]);
    let ops = FlashAttnOperands {
        q: &q,
        k: &k,
        v: &k,
        mask: None,
        sinks: None,
        dst: &out,
    };
    let params = FlashAttnParams::scaled(0.125);
    let mul_mat_tuning = Tuning::for_device(&ctx.facts()).mul_mat;
    let flash_attn_tuning = Tuning::for_device(&ctx.facts()).flash_attn;
    let mut stream = ctx.stream().unwrap();
    let huge_matrices = MatrixConfig {
        m: 64,
        n: 64,
        k: 64,
        f32_result: true,
        f16_result: true,
    };
    for (what, claimed) in [
        (
            "workgroup storage",
            DeviceFacts {
                max_workgroup_storage: facts.max_workgroup_storage.saturating_mul(4),
                ..facts
            },
        ),
        (
            "workgroup size",
            DeviceFacts {
                max_invocations: facts.max_invocations.saturating_mul(2),
                max_workgroup_size_x: facts.max_workgroup_size_x.saturating_mul(2),
                ..facts
            },
        ),
        (
            "subgroup sizes",
            DeviceFacts {
                subgroup_min_size: facts.subgroup_min_size + 1,
                ..facts
            },
        ),
        (
            "subgroup matrices",
            DeviceFacts {
                subgroup_matrix: Some(huge_matrices),
                ..facts
            },
        ),
    ] {
        let err = ggml_dawn::ops::mul_mat::mul_mat_with(&ctx, &mut stream, &a, &b, &dst, &claimed, &mul_mat_tuning)
            .unwrap_err();
        assert!(matches!(err, BackendError::Config { .. }), "{what}: {err}");
        let err =
            flash_attn::flash_attn_ext_with(&ctx, &mut stream, &ops, params, &claimed, &flash_attn_tuning).unwrap_err();
        assert!(matches!(err, BackendError::Config { .. }), "{what}: {err}");
    }
    assert_eq!(stream.pending(), 0);
    // Claiming less is planning for a smaller device: it runs.
    let less = DeviceFacts {
        subgroups: false,
        subgroup_matrix: None,
        max_workgroup_storage: facts.max_workgroup_storage / 2,
        ..facts
    };
    ggml_dawn::ops::mul_mat::mul_mat_with(&ctx, &mut stream, &a, &b, &dst, &less, &mul_mat_tuning).unwrap();
    flash_attn::flash_attn_ext_with(&ctx, &mut stream, &ops, params, &less, &flash_attn_tuning).unwrap();
    stream.synchronize(std::time::Duration::from_secs(600)).unwrap();
}

/// The backend's device checks every creation where it happens, also without validation: an
/// object whose creation failed (out of memory) must never reach the driver through a later call.
#[test]
fn the_backends_device_checks_every_creation() {
    for safe_mode in [false, true] {
        let ctx = GpuContext::new(ContextOptions {
            safe_mode,
            ..ContextOptions::default()
        })
        .unwrap();
        // SAFETY: only reads a setting of the device.
        let device = unsafe { ctx.device() };
        assert_eq!(
            device.error_checking(),
            dawn::ErrorChecking::EveryCall,
            "safe mode {safe_mode}"
        );
    }
}

/// Planning layouts of nearly 2^64 bytes at an unaligned offset is arithmetic that must not
/// overflow (a panic in debug builds before).
#[test]
fn plans_for_huge_views_do_not_overflow() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let m = (1usize << 62) - 1;
    let la = Layout::contiguous(GgmlType::F32, [1, m, 1, 1]).unwrap();
    let lb = Layout::contiguous(GgmlType::F32, [1, 1, 1, 1]).unwrap();
    let ld = Layout {
        offset: 252,
        ..Layout::contiguous(GgmlType::F32, [m, 1, 1, 1]).unwrap()
    };
    let plan = ggml_dawn::ops::mul_mat::plan_for(&ctx, &la, &lb, &ld).unwrap();
    assert_eq!(plan.problem.m, m as u64);
}

/// Knobs out of range are refused before a context can take them, naming the knob.
#[test]
fn invalid_knobs_are_refused_before_a_context_takes_them() {
    for (mul_mat, flash_attn, knob) in [
        ("vec_wg=100", "", "vec_wg"),
        ("", "tile_kv=7", "tile_kv"),
        ("nope=1", "", "nope"),
    ] {
        let err = Overrides::parse(mul_mat, flash_attn).unwrap_err();
        assert!(
            matches!(err, BackendError::Config { .. }) && err.to_string().contains(knob),
            "{err}"
        );
    }
    let ctx = GpuContext::new(ContextOptions {
        tuning: Overrides::parse("vec_wg=64", "").unwrap(),
        ..ContextOptions::default()
    })
    .unwrap();
    assert_eq!(ctx.tuning().mul_mat.vec_wg, 64);
    assert_eq!(
        ctx.with_tuning(Overrides::none()).unwrap().tuning(),
        &Tuning::for_device(&ctx.facts())
    );
}
