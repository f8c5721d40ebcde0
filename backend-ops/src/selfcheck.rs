//! A quick end-to-end check of the device: one compute pass whose result is verified on the CPU.

use dawn::{BindGroupEntry, BufferUsage, ComputePipelineDescriptor, Device};
use ggml_dawn::GpuContext;

const SHADER: &str = "
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
    let i = id.x;
    if (i < arrayLength(&y)) {
        y[i] = 3.0 * x[i] + y[i];
    }
}";

/// How long the check waits for the device at most (a second or less on any adapter).
pub const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs `y = 3x + y` over `n` elements on the GPU and compares every element with the CPU.
/// Returns the number of elements checked. Waits at most [`TIMEOUT`] for the device.
pub fn saxpy(device: &Device, n: u32) -> dawn::Result<usize> {
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.25 - 7.0).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 37) as f32 - 11.5).collect();
    let xb = device.create_buffer_init(Some("x"), BufferUsage::STORAGE, &x)?;
    let yb = device.create_buffer_init(Some("y"), BufferUsage::STORAGE | BufferUsage::COPY_SRC, &y)?;
    let module = device.create_shader_module(Some("saxpy"), SHADER)?;
    let pipeline = device.create_compute_pipeline(&ComputePipelineDescriptor {
        label: Some("saxpy"),
        layout: None,
        module: &module,
        entry_point: "main",
        constants: &[],
    })?;
    let layout = pipeline.bind_group_layout(device, 0)?;
    let group = device.create_bind_group(
        None,
        &layout,
        &[BindGroupEntry::whole(0, &xb), BindGroupEntry::whole(1, &yb)],
    )?;
    let mut encoder = device.create_command_encoder(Some("saxpy"))?;
    {
        let mut pass = encoder.begin_compute_pass(None, None);
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch(n.div_ceil(64), 1, 1)?;
    }
    device.submit([encoder.finish()?])?;
    let out: Vec<f32> = device.read_buffer_timeout(&yb, 0, u64::from(n) * 4, TIMEOUT)?;
    for (i, ((&got, &xi), &yi)) in out.iter().zip(&x).zip(&y).enumerate() {
        let want = 3.0 * xi + yi;
        if got != want {
            return Err(dawn::Error::Internal(format!(
                "saxpy element {i}: GPU gave {got}, CPU {want}"
            )));
        }
    }
    Ok(out.len())
}

/// [`saxpy`] on the backend's own device (set up as the context says, toggles and all).
pub fn on_context(ctx: &GpuContext, n: u32) -> dawn::Result<usize> {
    // SAFETY: saxpy keeps the promises of the device's unsafe toggles: its kernel reads and
    // writes only indices below `arrayLength(&y)`, and `x` has as many elements as `y`; it
    // declares no workgroup memory and divides nothing; its buffers are created initialised
    // (`create_buffer_init`), mapped only for the read-back after the work is done (by
    // `read_buffer`), and never destroyed.
    let device = unsafe { ctx.device() };
    saxpy(device, n)
}
