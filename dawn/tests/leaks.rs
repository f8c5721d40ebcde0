//! Every reference the wrapper takes is released: after a workload and a drop of everything,
//! the count of live handles is back where it started. (Its own test binary, so no other test
//! runs concurrently and moves the global count.)

mod common;

use dawn::{BindGroupEntry, BufferUsage, ComputePipelineDescriptor, MapMode, live_handles};

#[test]
fn handles_are_released() {
    let before = live_handles();
    {
        let device = common::device();
        let module = device
            .create_shader_module(
                None,
                "@group(0) @binding(0) var<storage, read_write> d: array<u32>;\n\
                 @compute @workgroup_size(1) fn main() { d[0] = d[0] + 1u; }",
            )
            .unwrap();
        let desc = ComputePipelineDescriptor {
            label: None,
            layout: None,
            module: &module,
            entry_point: "main",
            constants: &[],
        };
        let pipeline = device.create_compute_pipeline(&desc).unwrap();
        let pipeline2 = device.create_compute_pipeline_async(&desc).wait().unwrap();
        let buffer = device
            .create_buffer_init(None, BufferUsage::STORAGE | BufferUsage::COPY_SRC, &[41u32])
            .unwrap();
        let clones: Vec<_> = (0..10).map(|_| buffer.clone()).collect();
        for p in [&pipeline, &pipeline2] {
            // Each automatic layout is its own: one bind group per pipeline.
            let layout = p.bind_group_layout(&device, 0).unwrap();
            let group = device
                .create_bind_group(None, &layout, &[BindGroupEntry::whole(0, &buffer)])
                .unwrap();
            let mut encoder = device.create_command_encoder(None).unwrap();
            {
                let mut pass = encoder.begin_compute_pass(None, None);
                pass.set_pipeline(p);
                pass.set_bind_group(0, &group, &[]);
                pass.dispatch(1, 1, 1).unwrap();
            }
            device.submit([encoder.finish().unwrap()]).unwrap();
        }
        assert_eq!(device.read_buffer::<u32>(&clones[3], 0, 4).unwrap(), [43]);
        let staging = device.create_buffer(&dawn::BufferDescriptor::new(
            4,
            BufferUsage::MAP_READ | BufferUsage::COPY_DST,
        ));
        drop(staging.unwrap().map(MapMode::Read, 0, 4).wait());
        assert!(live_handles() > before);
    }
    assert_eq!(live_handles(), before, "every handle the wrapper created was released");
}
