//! A kernel of one's own on the backend's stream, between the backend's ops: a fused
//! "add a bias, then clamp" written in WGSL, recorded after an ADD and before a SWIGLU, with
//! the input rewritten in place between two runs (as a KV cache or an input buffer is), and the
//! result checked against the same steps on the CPU.
//!
//! ```sh
//! cargo xtask shell -- cargo run -p ggml-dawn --example custom_kernel
//! ```
//!
//! The kernel's interface (see `ggml_dawn::CustomKernel`): one storage binding per tensor, in
//! order, then the parameter block, which starts with each tensor's byte offset inside its
//! binding (a view need not start where its binding does) and goes on with our own words.

use ggml_dawn::kernel::Access;
use ggml_dawn::ops::glu::{GluOp, GluParams};
use ggml_dawn::reference::{self, BinaryOp, metric};
use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor};

/// Row length of the activations (the GLU halves it) and rows.
const WIDTH: usize = 256;
const ROWS: usize = 8;

const BIAS_CLAMP: &str = r#"
@group(0) @binding(0) var<storage, read> bias: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;

struct Params {
    bias_start: u32, // bytes, filled by the backend
    x_start: u32,    // bytes, filled by the backend
    width: u32,      // our words from here on
    count: u32,
    limit: f32,
}
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= params.count) {
        return;
    }
    let at = params.x_start / 4u + i;
    let b = bias[params.bias_start / 4u + i % params.width];
    x[at] = clamp(x[at] + b, -params.limit, params.limit);
}
"#;

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 31 + seed * 17) % 97) as f32 - 48.0) / 24.0)
        .collect()
}

/// The CPU's version of the whole sequence for input `x`.
fn expected(
    x: &HostTensor,
    residual: &HostTensor,
    bias: &[f32],
    limit: f32,
) -> Result<Vec<f32>, Box<dyn std::error::Error>> {
    let sum = reference::binary(BinaryOp::Add, x, residual)?;
    let clamped: Vec<f32> = sum
        .iter()
        .enumerate()
        .map(|(i, v)| (v + bias[i % WIDTH]).clamp(-limit, limit))
        .collect();
    let h = HostTensor::from_f32(GgmlType::F32, [WIDTH, ROWS, 1, 1], &clamped)?;
    Ok(reference::glu(&h, None, &GluParams::new(GluOp::Swiglu))?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = GpuContext::new(ContextOptions::default())?;
    let kernel = ctx.compile_kernel("bias_clamp", BIAS_CLAMP, &[Access::Read, Access::ReadWrite])?;
    let limit = 1.5f32;
    let bias = values(WIDTH, 3);
    let x_host = HostTensor::from_f32(GgmlType::F32, [WIDTH, ROWS, 1, 1], &values(WIDTH * ROWS, 1))?;
    let residual_host = HostTensor::from_f32(GgmlType::F32, [WIDTH, ROWS, 1, 1], &values(WIDTH * ROWS, 2))?;
    let (x, residual) = (ctx.upload(&x_host)?, ctx.upload(&residual_host)?);
    let bias_dev = ctx.from_f32(GgmlType::F32, [WIDTH, 1, 1, 1], &bias)?;
    let h = ctx.empty(GgmlType::F32, [WIDTH, ROWS, 1, 1])?;

    // The sequence, recorded twice with a new input written in place in between: nothing waits
    // for the GPU until the reads at the end.
    let run = |out: &ggml_dawn::DeviceTensor| -> Result<(), Box<dyn std::error::Error>> {
        ctx.binary_into(BinaryOp::Add, &x, &residual, &h)?;
        let words = [WIDTH as u32, (WIDTH * ROWS) as u32, limit.to_bits()];
        let groups = (WIDTH * ROWS).div_ceil(256) as u32;
        // SAFETY: the kernel reads bias[bias_start/4 + i % WIDTH] (bias has WIDTH elements) and
        // writes h[x_start/4 + i] for i < WIDTH·ROWS (h's elements, h contiguous); it declares
        // bias read-only and h read-write as given, uses no workgroup memory, and finishes.
        unsafe { ctx.record_kernel(&kernel, &[&bias_dev, &h], &words, [groups, 1, 1])? };
        ctx.glu_into(&h, None, out, &GluParams::new(GluOp::Swiglu))?;
        Ok(())
    };
    let first = ctx.empty(GgmlType::F32, [WIDTH / 2, ROWS, 1, 1])?;
    run(&first)?;
    let x2_host = HostTensor::from_f32(GgmlType::F32, [WIDTH, ROWS, 1, 1], &values(WIDTH * ROWS, 5))?;
    let path = ctx.write(&x, &x2_host)?;
    let second = ctx.empty(GgmlType::F32, [WIDTH / 2, ROWS, 1, 1])?;
    run(&second)?;

    for (name, out, input) in [("first", &first, &x_host), ("second", &second, &x2_host)] {
        let want = expected(input, &residual_host, &bias, limit)?;
        let got = ctx.read_f32(out)?;
        let nmse = metric::nmse(&want, &got);
        println!("{name} run: nmse {nmse:.2e} against the CPU");
        if nmse.is_nan() || nmse >= 1e-6 {
            return Err(format!("the {name} run differs from the CPU (nmse {nmse})").into());
        }
    }
    println!(
        "input rewritten between the runs by {path:?}; custom kernel `{}` ok",
        kernel.name()
    );
    Ok(())
}
