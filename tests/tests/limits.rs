//! Tensors past the device's limits give clear errors, never wrong results.

use ggml_dawn::error::BackendError;
use ggml_dawn::memory::{self, DeviceTensor};
use ggml_dawn::{ContextOptions, GgmlType, GpuContext, Layout, Tuning};

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
        .create_buffer(&dawn::BufferDescriptor {
            label: None,
            size: 6,
            usage: dawn::BufferUsage::STORAGE | dawn::BufferUsage::COPY_DST,
        })
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
    let params = FlashAttnParams {
        scale: 0.125,
        max_bias: 0.0,
        logit_softcap: 0.0,
    };
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
    let params = FlashAttnParams {
        scale: 0.125,
        max_bias: 0.0,
        logit_softcap: 0.0,
    };
    let ctx = ctx
        .with_tuning(Tuning {
            flash_attn: flash_attn::parse_knobs("path=simple").unwrap(),
            ..Tuning::default()
        })
        .unwrap();
    let mut stream = ctx.stream().unwrap();
    let mut counts = Vec::new();
    for _ in 0..6 {
        flash_attn::flash_attn_ext(&ctx, &mut stream, &ops, params).unwrap();
        counts.push(stream.cached_bind_groups());
    }
    stream.synchronize(std::time::Duration::from_secs(600)).unwrap();
    assert!(counts.windows(2).all(|w| w[0] == w[1]), "bind groups grew: {counts:?}");
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

/// Knobs out of range are refused where a context takes them.
#[test]
fn contexts_refuse_invalid_knobs() {
    let mut tuning = Tuning::default();
    tuning.mul_mat.vec_wg = 100;
    let options = ContextOptions {
        tuning,
        ..ContextOptions::default()
    };
    assert!(GpuContext::new(options).is_err());
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    assert!(ctx.with_tuning(tuning).is_err());
}
