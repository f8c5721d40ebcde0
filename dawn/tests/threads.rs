//! Handles are Send + Sync (every device runs with ImplicitDeviceSynchronization): one device
//! used from several threads at once.

mod common;

use dawn::{Adapter, Buffer, BufferUsage, ComputePipeline, Device, Instance, Queue, ShaderModule};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn handles_are_send_and_sync() {
    assert_send_sync::<Instance>();
    assert_send_sync::<Adapter>();
    assert_send_sync::<Device>();
    assert_send_sync::<Queue>();
    assert_send_sync::<Buffer>();
    assert_send_sync::<ShaderModule>();
    assert_send_sync::<ComputePipeline>();
}

#[test]
fn one_device_many_threads() {
    let device = common::device();
    std::thread::scope(|scope| {
        for t in 0..4u32 {
            let device = device.clone();
            scope.spawn(move || {
                for round in 0..8u32 {
                    let values: Vec<u32> = (0..64).map(|i| t * 1_000_000 + round * 1000 + i).collect();
                    let buffer = device
                        .create_buffer_init(None, BufferUsage::STORAGE | BufferUsage::COPY_SRC, &values)
                        .unwrap();
                    assert_eq!(device.read_buffer::<u32>(&buffer, 0, 256).unwrap(), values);
                }
            });
        }
    });
}
