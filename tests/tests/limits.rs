//! Tensors past the device's limits give clear errors, never wrong results.

use ggml_dawn::error::BackendError;
use ggml_dawn::exec::Stream;
use ggml_dawn::memory::{self, DeviceTensor};
use ggml_dawn::{ContextOptions, GgmlType, GpuContext, Layout};

fn tensor(ctx: &GpuContext, ty: GgmlType, ne: [usize; 4]) -> DeviceTensor {
    let layout = Layout::contiguous(ty, ne).unwrap();
    let bytes = layout.span_bytes() as u64;
    let buffer = memory::create_storage(&ctx.device, "test", bytes).unwrap();
    DeviceTensor {
        layout,
        buffer,
        base: 0,
        storage_bytes: bytes,
    }
}

#[test]
fn a_tensor_over_the_binding_limit_is_an_error() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let max = ctx.capabilities.limits.max_storage_buffer_binding_size;
    // src0 one row longer than what one binding may cover.
    let k = 4096;
    let rows = (max as usize / (k * 4)) + 1;
    let a = tensor(&ctx, GgmlType::F32, [k, rows, 1, 1]);
    let b = tensor(&ctx, GgmlType::F32, [k, 1, 1, 1]);
    let dst = tensor(&ctx, GgmlType::F32, [rows, 1, 1, 1]);
    let mut stream = Stream::new(&ctx.device).unwrap();
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
    let too_big = ctx.capabilities.limits.max_buffer_size + 16;
    let err = memory::create_storage(&ctx.device, "huge", too_big).unwrap_err();
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
    let mut stream = Stream::new(&ctx.device).unwrap();
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
