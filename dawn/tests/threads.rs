//! Handles are Send + Sync (every device runs with ImplicitDeviceSynchronization): one device
//! used from several threads at once.

mod common;

use std::sync::Barrier;
use std::time::Duration;

use dawn::{
    Adapter, Buffer, BufferDescriptor, BufferMapping, BufferUsage, CommandEncoder, ComputePipeline, Device, Error,
    Instance, MapMode, Queue, ShaderModule,
};

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
    assert_send_sync::<CommandEncoder>();
    assert_send_sync::<BufferMapping<'static>>();
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

/// Rounds of each race below: each round races one destroy against one map on a new buffer.
const ROUNDS: u32 = 64;

fn pattern(round: u32) -> Vec<u32> {
    (0..1024).map(|i| round.wrapping_mul(0x9e37_79b9) ^ i).collect()
}

/// Maps `buffer` and, if that works, checks the mapped bytes several times while another thread
/// may be trying to destroy the buffer or its device: they must stay the written values.
fn map_and_check(buffer: &Buffer, expected: &[u32]) -> bool {
    match buffer.map(MapMode::Read, 0, buffer.size()).wait() {
        Ok(mapping) => {
            for _ in 0..32 {
                assert_eq!(mapping.as_slice::<u32>().unwrap(), expected, "a live mapping changed");
                assert!(buffer.is_mapped());
                std::thread::yield_now();
            }
            true
        }
        // The destroy came first: the map fails, with an error value.
        Err(error) => {
            assert!(
                matches!(error, Error::Map(_) | Error::Cancelled(_) | Error::DeviceLost { .. }),
                "{error}"
            );
            false
        }
    }
}

#[test]
fn buffer_destroy_races_with_map() {
    let device = common::device();
    let (mut mapped, mut refused) = (0, 0);
    for round in 0..ROUNDS {
        let values = pattern(round);
        let buffer = device
            .create_buffer(
                &BufferDescriptor::new(4096, BufferUsage::MAP_READ | BufferUsage::COPY_DST).with_label("race"),
            )
            .unwrap();
        device.write_buffer(&buffer, 0, &values).unwrap();
        device.synchronize(Duration::from_secs(60)).unwrap();
        let start = Barrier::new(2);
        std::thread::scope(|scope| {
            let mapper = scope.spawn(|| {
                start.wait();
                map_and_check(&buffer, &values)
            });
            let destroyer = scope.spawn(|| {
                start.wait();
                // Keeps trying until the destroy goes ahead: refused only while mapped.
                let mut refusals = 0;
                loop {
                    match buffer.destroy() {
                        Ok(()) => return refusals,
                        Err(Error::InvalidArgument(_)) => refusals += 1,
                        Err(other) => panic!("unexpected: {other}"),
                    }
                    std::thread::yield_now();
                }
            });
            if mapper.join().unwrap() {
                mapped += 1;
            }
            refused += destroyer.join().unwrap();
        });
        assert!(!buffer.is_mapped());
        assert!(buffer.map(MapMode::Read, 0, 4096).wait().is_err(), "destroyed for good");
    }
    eprintln!("{mapped} of {ROUNDS} maps won the race; destroy was refused {refused} times meanwhile");
}

#[test]
fn device_destroy_races_with_map() {
    let (mut mapped, mut refused) = (0, 0);
    for round in 0..ROUNDS / 4 {
        let device = common::device();
        let values = pattern(round);
        let buffer = device
            .create_buffer(
                &BufferDescriptor::new(4096, BufferUsage::MAP_READ | BufferUsage::COPY_DST).with_label("race"),
            )
            .unwrap();
        device.write_buffer(&buffer, 0, &values).unwrap();
        device.synchronize(Duration::from_secs(60)).unwrap();
        let start = Barrier::new(3);
        std::thread::scope(|scope| {
            let mapper = scope.spawn(|| {
                start.wait();
                map_and_check(&buffer, &values)
            });
            // Buffers filled at creation are host views too: destroy must wait for them.
            let filler = scope.spawn(|| {
                start.wait();
                let big: Vec<u32> = (0..1 << 20).collect();
                match device.create_buffer_init(None, BufferUsage::STORAGE | BufferUsage::COPY_SRC, &big) {
                    Ok(_) | Err(Error::DeviceLost { .. }) => {}
                    Err(other) => panic!("unexpected: {other}"),
                }
            });
            let destroyer = scope.spawn(|| {
                start.wait();
                let mut refusals = 0;
                loop {
                    match device.destroy() {
                        Ok(()) => return refusals,
                        Err(Error::InvalidArgument(_)) => refusals += 1,
                        Err(other) => panic!("unexpected: {other}"),
                    }
                    std::thread::yield_now();
                }
            });
            if mapper.join().unwrap() {
                mapped += 1;
            }
            filler.join().unwrap();
            refused += destroyer.join().unwrap();
        });
        assert!(device.lost().is_some());
        assert!(buffer.map(MapMode::Read, 0, 4096).wait().is_err());
    }
    eprintln!(
        "{mapped} of {} maps won the race; destroy was refused {refused} times meanwhile",
        ROUNDS / 4
    );
}
