//! An f16 matrix product with subgroup matrices (`subgroupMatrixLoad`,
//! `subgroupMatrixMultiplyAccumulate`, `subgroupMatrixStore`), checked on the CPU.
//!
//! Uses the adapter's first f16 config with f32 results (8x8x8 on lavapipe and Apple GPUs;
//! 16x16x16 or 16x8x16 on NVIDIA). Each workgroup is one subgroup computing one M×N tile of C.
//! Run: `cargo run -p webgpu-dawn --example subgroup_matrix` (inside the sid root).

use dawn::{
    BindGroupEntry, BufferUsage, ComponentType, ComputePipelineDescriptor, DeviceDescriptor, Feature, Instance,
    InstanceDescriptor, RequestAdapterOptions,
};
use half::f16;

/// The kernel for one config. Matrix sizes are constants in WGSL's subgroup-matrix types, so the
/// source is generated. Type parameters list columns first: left<T, K, M>, right<T, N, K>,
/// result<T, N, M>.
fn shader(m: u32, n: u32, k: u32, subgroup_size: u32, cols: u32, depth: u32) -> String {
    format!(
        "enable f16;
enable chromium_experimental_subgroup_matrix;
@group(0) @binding(0) var<storage, read> a: array<f16>;      // rows x depth, row-major
@group(0) @binding(1) var<storage, read> b: array<f16>;      // depth x cols, row-major
@group(0) @binding(2) var<storage, read_write> c: array<f32>; // rows x cols, row-major
@compute @workgroup_size({subgroup_size})
fn main(@builtin(workgroup_id) tile: vec3u) {{
    let row0 = tile.y * {m}u;
    let col0 = tile.x * {n}u;
    var acc = subgroup_matrix_result<f32, {n}, {m}>();
    for (var kk = 0u; kk < {depth}u; kk += {k}u) {{
        let l = subgroupMatrixLoad<subgroup_matrix_left<f16, {k}, {m}>, row_major>(&a, row0 * {depth}u + kk, {depth}u);
        let r = subgroupMatrixLoad<subgroup_matrix_right<f16, {n}, {k}>, row_major>(&b, kk * {cols}u + col0, {cols}u);
        acc = subgroupMatrixMultiplyAccumulate(l, r, acc);
    }}
    subgroupMatrixStore<row_major>(&c, row0 * {cols}u + col0, acc, {cols}u);
}}"
    )
}

fn main() -> dawn::Result<()> {
    // SAFETY: what `allow_unsafe_apis` unlocks is used only by the kernel below, as the
    // subgroup-matrix specification defines it: with a config the adapter reports (picked from
    // `subgroup_matrix_configs`), every builtin in uniform control flow (each workgroup is one
    // subgroup and runs the same loop), and each load and store inside its array (the
    // workgroup grid covers the tiles of rows x cols exactly, and `kk` stays below `depth`).
    // The device keeps Dawn's validation and robustness.
    let instance = Instance::new(&unsafe { InstanceDescriptor::compute() })?;
    let adapter = instance.request_adapter(&RequestAdapterOptions::compute()).wait()?;
    let info = adapter.info();
    let Some(config) = info
        .subgroup_matrix_configs
        .iter()
        .find(|c| c.component == ComponentType::F16 && c.result == ComponentType::F32)
        .copied()
    else {
        eprintln!(
            "{} has no f16 subgroup-matrix config with f32 results; nothing to run",
            info.device
        );
        std::process::exit(2);
    };
    println!(
        "adapter: {}, config {config}, subgroup size {}",
        info.device, info.subgroup_max_size
    );
    let device = adapter
        .request_device(
            &DeviceDescriptor::default()
                .with_feature(Feature::SHADER_F16)
                .with_feature(Feature::SUBGROUPS)
                .with_feature(Feature::SUBGROUP_MATRIX),
        )
        .wait()?;

    // C (rows x cols) = A (rows x depth) · B (depth x cols), several tiles each way.
    let (rows, cols, depth) = (config.m * 4, config.n * 3, config.k * 8);
    let a: Vec<f16> = (0..rows * depth)
        .map(|i| f16::from_f32(((i * 7 % 13) as f32 - 6.0) / 8.0))
        .collect();
    let b: Vec<f16> = (0..depth * cols)
        .map(|i| f16::from_f32(((i * 5 % 11) as f32 - 5.0) / 4.0))
        .collect();

    let wgsl = shader(config.m, config.n, config.k, info.subgroup_max_size, cols, depth);
    let module = device.create_shader_module(Some("subgroup-matrix matmul"), &wgsl)?;
    let pipeline = device.create_compute_pipeline(&ComputePipelineDescriptor {
        label: Some("matmul"),
        layout: None,
        module: &module,
        entry_point: "main",
        constants: &[],
    })?;
    let a_buf = device.create_buffer_init(Some("a"), BufferUsage::STORAGE, &a)?;
    let b_buf = device.create_buffer_init(Some("b"), BufferUsage::STORAGE, &b)?;
    let c_bytes = u64::from(rows * cols) * 4;
    let c_buf = device.create_buffer(&dawn::BufferDescriptor {
        label: Some("c"),
        size: c_bytes,
        usage: BufferUsage::STORAGE | BufferUsage::COPY_SRC,
    })?;
    let group = device.create_bind_group(
        None,
        &pipeline.bind_group_layout(&device, 0)?,
        &[
            BindGroupEntry::whole(0, &a_buf),
            BindGroupEntry::whole(1, &b_buf),
            BindGroupEntry::whole(2, &c_buf),
        ],
    )?;
    let mut encoder = device.create_command_encoder(None)?;
    {
        let mut pass = encoder.begin_compute_pass(None, None);
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch(cols / config.n, rows / config.m, 1)?;
    }
    device.submit([encoder.finish()?])?;
    let c: Vec<f32> = device.read_buffer(&c_buf, 0, c_bytes)?;

    let (rows, cols, depth) = (rows as usize, cols as usize, depth as usize);
    let mut worst = 0.0f64;
    for i in 0..rows {
        for j in 0..cols {
            let want: f64 = (0..depth)
                .map(|p| f64::from(a[i * depth + p].to_f32()) * f64::from(b[p * cols + j].to_f32()))
                .sum();
            worst = worst.max((f64::from(c[i * cols + j]) - want).abs());
        }
    }
    // Inputs are exact in f16 and products accumulate in f32: only rounding of f32 sums differs.
    if worst > 1e-3 {
        eprintln!("C differs from the CPU product by up to {worst}");
        std::process::exit(1);
    }
    println!("{rows}x{depth} · {depth}x{cols} with subgroup matrices: matches the CPU (max error {worst:.2e})");
    Ok(())
}
