//! Tensors past the device's limits give clear errors, never wrong results.

use ggml_dawn::error::BackendError;
use ggml_dawn::memory::{self, DeviceTensor};
use ggml_dawn::tuning::{Overrides, Tuning};
use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor, Layout};

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
    assert!(matches!(err, BackendError::OutOfBounds(_)), "{err}");
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

/// A wait that times out is an error and nothing more: the work goes on, the stream takes
/// more, a later wait finds the results, and `poll` tells without blocking when it is done.
#[test]
fn a_timed_out_wait_leaves_the_stream_and_context_usable() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    // About a second of work on lavapipe, waited for with no time at all.
    let host = |ne: [usize; 4], seed: usize| {
        let values: Vec<f32> = (0..ne.iter().product::<usize>())
            .map(|i| ((i * 13 + seed) % 17) as f32 / 8.0 - 1.0)
            .collect();
        HostTensor::from_f32(GgmlType::F32, ne, &values).unwrap()
    };
    let (a_host, b_host) = (host([1024, 1024, 1, 1], 1), host([1024, 512, 1, 1], 2));
    let a = ctx.upload(&a_host).unwrap();
    let b = ctx.upload(&b_host).unwrap();
    let dst = tensor(&ctx, GgmlType::F32, [1024, 512, 1, 1]);
    let mut stream = ctx.stream().unwrap();
    ggml_dawn::ops::mul_mat::mul_mat(&ctx, &mut stream, &a, &b, &dst).unwrap();
    let err = stream.synchronize(std::time::Duration::ZERO).unwrap_err();
    assert!(
        matches!(err, BackendError::Dawn(dawn::Error::Timeout(_))),
        "a timeout, not a failure: {err}"
    );
    assert!(stream.failure().is_none(), "{err}");
    // More work is taken, and a zero-time poll never blocks.
    ggml_dawn::ops::mul_mat::mul_mat(&ctx, &mut stream, &a, &b, &dst).unwrap();
    let polled = stream.poll().unwrap();
    stream.synchronize(std::time::Duration::from_secs(600)).unwrap();
    assert!(
        stream.poll().unwrap(),
        "everything finished after the wait (polled {polled} before)"
    );
    // The results are right, read through the same context.
    let expected = ggml_dawn::reference::mul_mat(&a_host, &b_host).unwrap();
    let got = ctx.read_f32(&dst).unwrap();
    assert!(ggml_dawn::reference::metric::nmse(&expected, &got) < 1e-6);
    // The context's own stream likewise: a zero-time wait, then reads of every tensor.
    ctx.mul_mat_into(&a, &b, &dst).unwrap();
    let _ = ctx.synchronize_timeout(std::time::Duration::ZERO);
    assert_eq!(ctx.read(&a).unwrap().data, a_host.data);
    assert!(ctx.poll().unwrap());
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

/// Scratch memory stays within `ContextOptions::scratch_budget` (an op that needs more is an
/// error naming the budget) and goes back to the device on request; the next op allocates it anew.
#[test]
fn scratch_has_a_budget_and_is_released_on_request() {
    let values: Vec<f32> = (0..256 * 64).map(|i| ((i * 7 % 23) as f32 - 11.0) / 16.0).collect();
    let w_host = HostTensor::from_f32(GgmlType::Q4_0, [256, 64, 1, 1], &values).unwrap();
    let x_host = HostTensor::from_f32(GgmlType::F32, [256, 1, 1, 1], &values[..256]).unwrap();
    // The integer mat-vec (q4_0 at n = 1) quantizes x into scratch first.
    let tight = GpuContext::new(ContextOptions {
        scratch_budget: Some(16),
        ..ContextOptions::default()
    })
    .unwrap();
    let (w, x) = (tight.upload(&w_host).unwrap(), tight.upload(&x_host).unwrap());
    let err = tight.mul_mat(&w, &x).unwrap_err();
    assert!(
        matches!(&err, BackendError::TooLarge { limit: 16, limit_name, .. } if limit_name.contains("scratch_budget")),
        "{err}"
    );

    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let (w, x) = (ctx.upload(&w_host).unwrap(), ctx.upload(&x_host).unwrap());
    let expected = ggml_dawn::reference::mul_mat(&w_host, &x_host).unwrap();
    let y = ctx.mul_mat(&w, &x).unwrap();
    assert!(ctx.scratch_bytes() > 0);
    ctx.release_scratch();
    assert_eq!(ctx.scratch_bytes(), 0);
    // The recorded op still runs on what it bound; a new op allocates anew.
    let got = ctx.read_f32(&y).unwrap();
    assert!(ggml_dawn::reference::metric::nmse(&expected, &got) < ggml_dawn::reference::metric::MUL_MAT_MAX_NMSE);
    let again = ctx.mul_mat(&w, &x).unwrap();
    let got = ctx.read_f32(&again).unwrap();
    assert!(ggml_dawn::reference::metric::nmse(&expected, &got) < ggml_dawn::reference::metric::MUL_MAT_MAX_NMSE);
    assert!(ctx.scratch_bytes() > 0);
}

/// `read_after` waits for the stream it names: an op recorded on a stream of one's own (not yet
/// submitted) is in what it reads.
#[test]
fn reads_wait_for_the_stream_they_name() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let values: Vec<f32> = (0..64 * 32).map(|i| ((i * 5 % 19) as f32 - 9.0) / 8.0).collect();
    let a_host = HostTensor::from_f32(GgmlType::F32, [64, 32, 1, 1], &values).unwrap();
    let b_host = HostTensor::from_f32(GgmlType::F32, [64, 4, 1, 1], &values[..256]).unwrap();
    let (a, b) = (ctx.upload(&a_host).unwrap(), ctx.upload(&b_host).unwrap());
    let dst = ctx
        .filled(Layout::contiguous(GgmlType::F32, [32, 4, 1, 1]).unwrap(), 0xFF)
        .unwrap();
    let mut stream = ctx.stream().unwrap();
    ggml_dawn::ops::mul_mat::mul_mat(&ctx, &mut stream, &a, &b, &dst).unwrap();
    assert!(stream.pending() > 0);
    let got = ctx.read_after(&mut stream, &dst).unwrap().to_f32().unwrap();
    let expected = ggml_dawn::reference::mul_mat(&a_host, &b_host).unwrap();
    assert!(ggml_dawn::reference::metric::nmse(&expected, &got) < 1e-6);
    assert_eq!(stream.pending(), 0);
}

/// Attention operands the kernels would read past: a mask with no sequence (`ne[3] = 0`: a
/// 4-byte binding the kernels index by the KV length) or one whose sequences do not repeat
/// whole, and K or V rows that are not packed (`nb[0]` is not passed to the kernels) are refused.
#[test]
fn attention_operands_the_kernels_would_misread_are_refused() {
    use ggml_dawn::ops::flash_attn::FlashAttnParams;
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let q = tensor(&ctx, GgmlType::F32, [64, 4, 2, 2]);
    let k = tensor(&ctx, GgmlType::F16, [64, 32, 1, 2]);
    let v = tensor(&ctx, GgmlType::F16, [64, 32, 1, 2]);
    let params = FlashAttnParams::scaled(0.125);
    for mask_ne in [[32, 4, 1, 0], [32, 4, 1, 3]] {
        let mask = tensor(&ctx, GgmlType::F16, mask_ne);
        let err = ctx.flash_attn_ext(&q, &k, &v, Some(&mask), None, params).unwrap_err();
        assert!(
            matches!(&err, BackendError::InvalidOperands(m) if m.contains("mask")),
            "{mask_ne:?}: {err}"
        );
    }
    // One mask for both sequences is fine.
    let shared = tensor(&ctx, GgmlType::F16, [32, 4, 1, 1]);
    ctx.flash_attn_ext(&q, &k, &v, Some(&shared), None, params).unwrap();
    // K and V seen with a zero element stride: every element the same bytes.
    for (name, strided) in [("K", &k), ("V", &v)] {
        let mut layout = *strided.layout();
        layout.nb[0] = 0;
        let view = strided.view(layout).unwrap();
        let (kk, vv) = if name == "K" { (&view, &v) } else { (&k, &view) };
        let err = ctx.flash_attn_ext(&q, kk, vv, None, None, params).unwrap_err();
        assert!(
            matches!(&err, BackendError::InvalidOperands(m) if m.contains(&format!("{name}'s rows"))),
            "{name}: {err}"
        );
    }
    ctx.synchronize().unwrap();
}

/// An op whose dst shares bytes with one of its inputs is refused, naming both: a kernel that
/// writes what it reads gives garbage, and Dawn's validation (off) would be the only other check.
#[test]
fn a_dst_overlapping_an_input_is_refused() {
    use ggml_dawn::ops::flash_attn::{FlashAttnOperands, FlashAttnParams};
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let a = tensor(&ctx, GgmlType::F32, [64, 64, 1, 1]);
    let b = tensor(&ctx, GgmlType::F32, [64, 8, 1, 1]);
    // dst over a's first 64 x 8 floats, then over b itself.
    let inside_a = a
        .view(Layout::contiguous(GgmlType::F32, [64, 8, 1, 1]).unwrap())
        .unwrap();
    let err = ctx.mul_mat_into(&a, &b, &inside_a).unwrap_err();
    assert!(
        matches!(&err, BackendError::Overlap(m) if m.contains("overlaps a")),
        "{err}"
    );
    let err = ctx.mul_mat_into(&a, &b, &b).unwrap_err();
    assert!(
        matches!(&err, BackendError::Overlap(m) if m.contains("overlaps b")),
        "{err}"
    );
    // A dst of its own is fine.
    let c = tensor(&ctx, GgmlType::F32, [64, 8, 1, 1]);
    ctx.mul_mat_into(&a, &b, &c).unwrap();

    let q = tensor(&ctx, GgmlType::F32, [64, 4, 2, 1]);
    let k = tensor(&ctx, GgmlType::F16, [64, 32, 1, 1]);
    let v = tensor(&ctx, GgmlType::F16, [64, 32, 1, 1]);
    let dst_in_q = q
        .view(Layout::contiguous(GgmlType::F32, [64, 2, 4, 1]).unwrap())
        .unwrap();
    let ops = FlashAttnOperands {
        q: &q,
        k: &k,
        v: &v,
        mask: None,
        sinks: None,
        dst: &dst_in_q,
    };
    let err = ctx
        .flash_attn_ext_into(&ops, FlashAttnParams::scaled(0.125))
        .unwrap_err();
    assert!(
        matches!(&err, BackendError::Overlap(m) if m.contains("overlaps Q")),
        "{err}"
    );
    ctx.synchronize().unwrap();
}

/// Parameters that make no sense are refused: a NaN or infinite scale, a negative ALiBi bias.
#[test]
fn attention_parameters_must_be_finite() {
    use ggml_dawn::ops::flash_attn::FlashAttnParams;
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let q = tensor(&ctx, GgmlType::F32, [64, 1, 2, 1]);
    let k = tensor(&ctx, GgmlType::F16, [64, 32, 1, 1]);
    for params in [
        FlashAttnParams::scaled(f32::NAN),
        FlashAttnParams::scaled(f32::INFINITY),
        FlashAttnParams {
            max_bias: -1.0,
            ..FlashAttnParams::scaled(0.125)
        },
        FlashAttnParams {
            logit_softcap: f32::NAN,
            ..FlashAttnParams::scaled(0.125)
        },
    ] {
        let err = ctx.flash_attn_ext(&q, &k, &k, None, None, params).unwrap_err();
        assert!(
            matches!(&err, BackendError::InvalidOperands(m) if m.contains("finite")),
            "{params:?}: {err}"
        );
    }
}

/// ggml skips the strides of one-element dimensions when it asks whether a tensor is
/// contiguous, so a one-position slot of a larger tensor is a valid MUL_MAT dst.
#[test]
fn mul_mat_writes_a_one_position_slot_of_a_larger_tensor() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let values: Vec<f32> = (0..64 * 16).map(|i| ((i * 3 % 11) as f32 - 5.0) / 4.0).collect();
    let a_host = HostTensor::from_f32(GgmlType::F16, [64, 16, 1, 1], &values).unwrap();
    let x_host = HostTensor::from_f32(GgmlType::F32, [64, 1, 1, 1], &values[..64]).unwrap();
    let (a, x) = (ctx.upload(&a_host).unwrap(), ctx.upload(&x_host).unwrap());
    let cache = ctx
        .filled(Layout::contiguous(GgmlType::F32, [16, 8, 1, 1]).unwrap(), 0xFF)
        .unwrap();
    let slot = cache.narrow(1, 5, 1).unwrap();
    ctx.mul_mat_into(&a, &x, &slot).unwrap();
    let got = ctx.read_f32(&slot).unwrap();
    let expected = ggml_dawn::reference::mul_mat(&a_host, &x_host).unwrap();
    assert!(ggml_dawn::reference::metric::nmse(&expected, &got) < 1e-6);
    // The other positions are untouched.
    let all = ctx.read_f32(&cache).unwrap();
    assert!(all[..16 * 5].iter().chain(&all[16 * 6..]).all(|v| v.is_nan()));
}

/// Adapters are listed and chosen without `unsafe`: by index or by a part of the device name; a
/// choice that matches nothing names the adapters there are.
#[test]
fn adapters_are_listed_and_chosen_by_index_or_name() {
    let all = ggml_dawn::adapters().unwrap();
    assert!(!all.is_empty());
    let first = &all[0].device;
    for choice in [
        ggml_dawn::AdapterChoice::Index(0),
        first.to_uppercase().parse().unwrap(),
    ] {
        let ctx = GpuContext::new(ContextOptions {
            adapter: Some(choice.clone()),
            ..ContextOptions::default()
        })
        .unwrap();
        assert_eq!(&ctx.capabilities().info.device, first, "{choice}");
    }
    let err = GpuContext::new(ContextOptions {
        adapter: Some(ggml_dawn::AdapterChoice::Index(all.len())),
        ..ContextOptions::default()
    })
    .unwrap_err();
    assert!(matches!(err, ggml_dawn::ContextError::NoSuchAdapter { .. }), "{err}");
    assert!(err.to_string().contains(first.as_str()), "{err}");
}

/// One error type with kinds a program can match on, and `?` from every error a public function
/// returns (the context's too).
#[test]
fn errors_have_kinds_to_match_on() -> ggml_dawn::Result<()> {
    use ggml_dawn::ErrorKind;
    let ctx = GpuContext::new(ContextOptions::default())?;
    let a = tensor(&ctx, GgmlType::F32, [64, 8, 1, 1]);
    let b = tensor(&ctx, GgmlType::F32, [32, 2, 1, 1]);
    assert_eq!(ctx.mul_mat(&a, &b).unwrap_err().kind(), ErrorKind::Shape);
    let view = a
        .view(Layout {
            offset: 64,
            ..*a.layout()
        })
        .unwrap_err();
    assert_eq!(view.kind(), ErrorKind::OutOfBounds, "{view}");
    let inside = a.view(Layout::contiguous(GgmlType::F32, [8, 2, 1, 1])?)?;
    let c = tensor(&ctx, GgmlType::F32, [64, 2, 1, 1]);
    assert_eq!(
        ctx.mul_mat_into(&a, &c, &inside).unwrap_err().kind(),
        ErrorKind::Overlap
    );
    let k = tensor(&ctx, GgmlType::I32, [64, 32, 1, 1]);
    let q = tensor(&ctx, GgmlType::F32, [64, 1, 1, 1]);
    let params = ggml_dawn::ops::flash_attn::FlashAttnParams::scaled(0.125);
    assert_eq!(
        ctx.flash_attn_ext(&q, &k, &k, None, None, params).unwrap_err().kind(),
        ErrorKind::Unsupported
    );
    let max = ctx.capabilities().limits.max_buffer_size;
    let huge = ctx.empty(GgmlType::F32, [usize::try_from(max / 4 + 1).unwrap(), 1, 1, 1]);
    assert_eq!(huge.unwrap_err().kind(), ErrorKind::TooLarge);
    let none = GpuContext::new(ContextOptions {
        adapter: Some(ggml_dawn::AdapterChoice::Name("no such adapter".into())),
        ..ContextOptions::default()
    });
    let err: ggml_dawn::Error = none.unwrap_err().into();
    assert_eq!(err.kind(), ErrorKind::NoDevice);
    // A lost device: every later op says so.
    // SAFETY: the device is only destroyed; nothing of it is used in ways its toggles leave
    // unchecked, and no buffer of it is mapped.
    unsafe { ctx.device() }.destroy()?;
    let lost = ctx.mul_mat(&a, &c).and_then(|_| ctx.synchronize());
    assert_eq!(lost.unwrap_err().kind(), ErrorKind::DeviceLost);
    Ok(())
}

/// Forgetting to permute Q (heads second, as a projection gives them, instead of third) gets an
/// error that says what to do.
#[test]
fn an_unpermuted_query_gets_a_hint() {
    use ggml_dawn::ops::flash_attn::FlashAttnParams;
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    // 4 heads of 16 for 1 token, as a projection lays them out: [16, 4, 1, 1].
    let q = tensor(&ctx, GgmlType::F32, [16, 4, 1, 1]);
    let k = tensor(&ctx, GgmlType::F16, [16, 8, 2, 1]);
    let err = ctx
        .flash_attn_ext(&q, &k, &k, None, None, FlashAttnParams::scaled(0.25))
        .unwrap_err();
    assert!(err.to_string().contains("permute([0, 2, 1, 3])"), "{err}");
}
