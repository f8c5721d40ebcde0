//! Shaders, pipelines, bind groups, command encoding, dispatches and timestamps.

mod common;

use dawn::{
    BindGroupEntry, BindGroupLayoutEntry, BufferBindingType, BufferDescriptor, BufferUsage, ComputePipelineDescriptor,
    Device, Error, Feature, MessageKind, PassTimestamps, ShaderModule,
};

const DOUBLE: &str = "
override factor: f32 = 2.0;
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
    if (id.x < arrayLength(&data)) { data[id.x] = data[id.x] * factor; }
}";

fn pipeline_desc<'a>(module: &'a ShaderModule, constants: &'a [(&'a str, f64)]) -> ComputePipelineDescriptor<'a> {
    ComputePipelineDescriptor {
        label: Some("double"),
        layout: None,
        module,
        entry_point: "main",
        constants,
    }
}

/// Runs the DOUBLE shader over `input` with `factor` and returns the result.
fn run_double(device: &Device, input: &[f32], factor: f64, asynchronously: bool) -> Vec<f32> {
    let module = device.create_shader_module(Some("double"), DOUBLE).unwrap();
    let constants = [("factor", factor)];
    let desc = pipeline_desc(&module, &constants);
    let pipeline = if asynchronously {
        device.create_compute_pipeline_async(&desc).wait().unwrap()
    } else {
        device.create_compute_pipeline(&desc).unwrap()
    };
    let buffer = device
        .create_buffer_init(None, BufferUsage::STORAGE | BufferUsage::COPY_SRC, input)
        .unwrap();
    let layout = pipeline.bind_group_layout(device, 0).unwrap();
    let group = device
        .create_bind_group(None, &layout, &[BindGroupEntry::whole(0, &buffer)])
        .unwrap();
    let mut encoder = device.create_command_encoder(None).unwrap();
    {
        let mut pass = encoder.begin_compute_pass(Some("double"), None);
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch((input.len() as u32).div_ceil(64), 1, 1).unwrap();
        pass.end();
    }
    device.submit([encoder.finish().unwrap()]).unwrap();
    device.read_buffer(&buffer, 0, buffer.size()).unwrap()
}

#[test]
fn sync_and_async_pipelines_with_override_constants() {
    let device = common::device();
    let input: Vec<f32> = (0..1000).map(|i| i as f32 - 500.0).collect();
    let tripled = run_double(&device, &input, 3.0, false);
    assert!(tripled.iter().zip(&input).all(|(o, i)| *o == i * 3.0));
    let halved = run_double(&device, &input, 0.5, true);
    assert!(halved.iter().zip(&input).all(|(o, i)| *o == i * 0.5));
}

#[test]
fn wgsl_syntax_errors_come_back_with_line_and_column() {
    let device = common::device();
    let source = "@compute @workgroup_size(1)\nfn main() {\n    let x: u32 = ;\n}\n";
    let err = device.create_shader_module(Some("broken"), source).unwrap_err();
    let Error::ShaderCompilation { label, messages } = &err else {
        panic!("expected a compilation error, got {err}")
    };
    assert_eq!(label, "broken");
    let first = messages
        .iter()
        .find(|m| m.kind == MessageKind::Error)
        .expect("an error message");
    assert_eq!(first.line, 3, "{err}");
    assert!(first.column > 0);
    assert!(err.to_string().contains("3:"), "{err}");
    // The device is still usable afterwards.
    assert_eq!(run_double(&device, &[1.0, 2.0], 2.0, false)[..2], [2.0, 4.0]);
}

#[test]
fn pipeline_errors_are_values() {
    let device = common::device();
    let module = device.create_shader_module(None, DOUBLE).unwrap();
    let missing_entry = ComputePipelineDescriptor {
        entry_point: "nope",
        ..pipeline_desc(&module, &[])
    };
    assert!(matches!(
        device.create_compute_pipeline(&missing_entry),
        Err(Error::Validation(_))
    ));
    assert!(device.create_compute_pipeline_async(&missing_entry).wait().is_err());
    let unknown_override = [("no_such_constant", 1.0)];
    assert!(
        device
            .create_compute_pipeline(&pipeline_desc(&module, &unknown_override))
            .is_err()
    );
    // A workgroup larger than the device allows.
    let huge = "@compute @workgroup_size(1024, 1024) fn main() {}";
    let module = device.create_shader_module(None, huge).unwrap();
    assert!(device.create_compute_pipeline(&pipeline_desc(&module, &[])).is_err());
}

#[test]
fn explicit_layouts_and_bind_group_checks() {
    let device = common::device();
    let bgl = device
        .create_bind_group_layout(
            Some("one buffer"),
            &[BindGroupLayoutEntry::buffer(0, BufferBindingType::Storage)],
        )
        .unwrap();
    let layout = device.create_pipeline_layout(Some("explicit"), &[&bgl]).unwrap();
    let module = device.create_shader_module(None, DOUBLE).unwrap();
    let desc = ComputePipelineDescriptor {
        layout: Some(&layout),
        ..pipeline_desc(&module, &[])
    };
    let pipeline = device.create_compute_pipeline(&desc).unwrap();
    let buffer = device
        .create_buffer_init(None, BufferUsage::STORAGE | BufferUsage::COPY_SRC, &[1.5f32; 64])
        .unwrap();
    let group = device
        .create_bind_group(None, &bgl, &[BindGroupEntry::whole(0, &buffer)])
        .unwrap();
    let mut encoder = device.create_command_encoder(None).unwrap();
    {
        let mut pass = encoder.begin_compute_pass(None, None);
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch(1, 1, 1).unwrap();
    }
    device.submit([encoder.finish().unwrap()]).unwrap();
    assert_eq!(device.read_buffer::<f32>(&buffer, 0, 256).unwrap(), vec![3.0; 64]);

    // Ranges outside the buffer or misaligned offsets are refused before Dawn sees them.
    let past_end = BindGroupEntry {
        binding: 0,
        buffer: &buffer,
        offset: 128,
        size: Some(256),
    };
    assert!(matches!(
        device.create_bind_group(None, &bgl, &[past_end]),
        Err(Error::InvalidArgument(_))
    ));
    let misaligned = BindGroupEntry {
        binding: 0,
        buffer: &buffer,
        offset: 4,
        size: Some(16),
    };
    assert!(matches!(
        device.create_bind_group(None, &bgl, &[misaligned]),
        Err(Error::InvalidArgument(_))
    ));
    // A uniform buffer where storage is expected: Dawn's validation, as a value.
    let uniform = device
        .create_buffer(&BufferDescriptor::new(256, BufferUsage::UNIFORM))
        .unwrap();
    assert!(matches!(
        device.create_bind_group(None, &bgl, &[BindGroupEntry::whole(0, &uniform)]),
        Err(Error::Validation(_))
    ));
}

#[test]
fn dispatches_over_the_limits_are_errors() {
    let device = common::device();
    let max = device.limits().max_compute_workgroups_per_dimension;
    let mut encoder = device.create_command_encoder(None).unwrap();
    let mut pass = encoder.begin_compute_pass(None, None);
    let err = pass.dispatch(max + 1, 1, 1).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(pass.dispatch(1, 1, max + 1).is_err());
    pass.end();
    // Finishing a pass with no pipeline set and no dispatch is fine.
    assert!(encoder.finish().is_ok());
}

#[test]
fn a_dispatch_without_a_pipeline_fails_at_finish() {
    let device = common::device();
    let mut encoder = device.create_command_encoder(None).unwrap();
    {
        let mut pass = encoder.begin_compute_pass(None, None);
        pass.dispatch(1, 1, 1).unwrap();
    }
    assert!(matches!(encoder.finish(), Err(Error::Validation(_))));
}

#[test]
fn indirect_dispatch_clear_and_copy() {
    let device = common::device();
    let module = device.create_shader_module(None, DOUBLE).unwrap();
    let pipeline = device.create_compute_pipeline(&pipeline_desc(&module, &[])).unwrap();
    let data = device
        .create_buffer_init(
            None,
            BufferUsage::STORAGE | BufferUsage::COPY_SRC | BufferUsage::COPY_DST,
            &[1.0f32; 256],
        )
        .unwrap();
    let args = device
        .create_buffer_init(None, BufferUsage::INDIRECT, &[2u32, 1, 1])
        .unwrap();
    let group = device
        .create_bind_group(
            None,
            &pipeline.bind_group_layout(&device, 0).unwrap(),
            &[BindGroupEntry::whole(0, &data)],
        )
        .unwrap();
    let mut encoder = device.create_command_encoder(None).unwrap();
    encoder.clear_buffer(&data, 0, Some(16)).unwrap();
    {
        let mut pass = encoder.begin_compute_pass(None, None);
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch_indirect(&args, 0).unwrap();
        assert!(pass.dispatch_indirect(&data, 0).is_err(), "no INDIRECT usage");
    }
    device.submit([encoder.finish().unwrap()]).unwrap();
    let out: Vec<f32> = device.read_buffer(&data, 0, 1024).unwrap();
    assert_eq!(&out[..4], &[0.0; 4], "cleared");
    assert!(out[4..128].iter().all(|v| *v == 2.0), "two workgroups of 64 doubled");
    assert!(out[128..].iter().all(|v| *v == 1.0), "the rest untouched");
}

#[test]
fn pass_timestamps_resolve_to_durations() {
    let device = common::device();
    if !device.has_feature(Feature::TIMESTAMP_QUERY) {
        eprintln!("adapter without timestamp queries: nothing to test");
        return;
    }
    let queries = device.create_timestamp_queries(Some("pass"), 2).unwrap();
    let module = device.create_shader_module(None, DOUBLE).unwrap();
    let pipeline = device.create_compute_pipeline(&pipeline_desc(&module, &[])).unwrap();
    let data = device
        .create_buffer_init(None, BufferUsage::STORAGE, &vec![1.0f32; 1 << 16])
        .unwrap();
    let group = device
        .create_bind_group(
            None,
            &pipeline.bind_group_layout(&device, 0).unwrap(),
            &[BindGroupEntry::whole(0, &data)],
        )
        .unwrap();
    let resolved = device
        .create_buffer(&BufferDescriptor::new(
            256,
            BufferUsage::QUERY_RESOLVE | BufferUsage::COPY_SRC,
        ))
        .unwrap();
    let mut encoder = device.create_command_encoder(None).unwrap();
    {
        let stamps = PassTimestamps {
            query_set: &queries,
            beginning_index: Some(0),
            end_index: Some(1),
        };
        let mut pass = encoder.begin_compute_pass(None, Some(stamps));
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch(1024, 1, 1).unwrap();
    }
    encoder.resolve_query_set(&queries, 0, 2, &resolved, 0).unwrap();
    assert!(
        encoder.resolve_query_set(&queries, 1, 2, &resolved, 0).is_err(),
        "past the set"
    );
    // A range whose end overflows is an error too, not a panic.
    assert!(encoder.resolve_query_set(&queries, 1, u32::MAX, &resolved, 0).is_err());
    device.submit([encoder.finish().unwrap()]).unwrap();
    let stamps: Vec<u64> = device.read_buffer(&resolved, 0, 16).unwrap();
    let elapsed = dawn::elapsed(stamps[0], stamps[1]);
    assert!(stamps[1] >= stamps[0], "{stamps:?}");
    assert!(elapsed < std::time::Duration::from_secs(60), "{elapsed:?}");
}
