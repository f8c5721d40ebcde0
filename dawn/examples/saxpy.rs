//! SAXPY (`y = a·x + y`) on the GPU, checked on the CPU.
//!
//! Run: `cargo run -p webgpu-dawn --example saxpy` (inside the sid root: `cargo xtask shell -- …`).

use dawn::{
    BindGroupEntry, BufferUsage, ComputePipelineDescriptor, DeviceDescriptor, Instance, InstanceDescriptor,
    RequestAdapterOptions,
};

const SHADER: &str = "
override a: f32;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3u) {
    if (id.x < arrayLength(&y)) {
        y[id.x] = a * x[id.x] + y[id.x];
    }
}";

fn main() -> dawn::Result<()> {
    let instance = Instance::new(&InstanceDescriptor::default())?;
    let adapter = instance.request_adapter(&RequestAdapterOptions::default()).wait()?;
    let device = adapter.request_device(&DeviceDescriptor::default()).wait()?;
    println!("adapter: {}", adapter.info().device);

    let n = 1_000_000usize;
    let a = 2.5f32;
    let x: Vec<f32> = (0..n).map(|i| (i % 100) as f32 / 10.0).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();

    let x_buf = device.create_buffer_init(Some("x"), BufferUsage::STORAGE, &x)?;
    let y_buf = device.create_buffer_init(Some("y"), BufferUsage::STORAGE | BufferUsage::COPY_SRC, &y)?;
    let module = device.create_shader_module(Some("saxpy"), SHADER)?;
    let pipeline = device.create_compute_pipeline(&ComputePipelineDescriptor {
        label: Some("saxpy"),
        layout: None,
        module: &module,
        entry_point: "main",
        constants: &[("a", f64::from(a))],
    })?;
    let group = device.create_bind_group(
        Some("saxpy"),
        &pipeline.bind_group_layout(&device, 0)?,
        &[BindGroupEntry::whole(0, &x_buf), BindGroupEntry::whole(1, &y_buf)],
    )?;

    let mut encoder = device.create_command_encoder(Some("saxpy"))?;
    {
        let mut pass = encoder.begin_compute_pass(Some("saxpy"), None);
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch((n as u32).div_ceil(256), 1, 1)?;
    }
    device.submit([encoder.finish()?])?;

    let result: Vec<f32> = device.read_buffer(&y_buf, 0, y_buf.size())?;
    let wrong = result
        .iter()
        .zip(x.iter().zip(&y))
        .filter(|(r, (x, y))| **r != a * **x + **y)
        .count();
    if wrong > 0 {
        eprintln!("{wrong} of {n} elements differ from the CPU");
        std::process::exit(1);
    }
    println!("saxpy over {n} elements: all match the CPU");
    Ok(())
}
