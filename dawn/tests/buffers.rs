//! Buffers: creation limits, mapping into typed slices, unmapping, destruction, async mapping.

mod common;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

use dawn::{BufferDescriptor, BufferUsage, DeviceDescriptor, Error, MapMode};

fn desc(size: u64, usage: BufferUsage) -> BufferDescriptor<'static> {
    BufferDescriptor {
        label: Some("test"),
        size,
        usage,
    }
}

#[test]
fn write_then_map_for_reading_gives_typed_slices() {
    let device = common::device();
    let values: Vec<f32> = (0..1024).map(|i| i as f32 * 0.5 - 3.0).collect();
    let buffer = device
        .create_buffer(&desc(4096, BufferUsage::MAP_READ | BufferUsage::COPY_DST))
        .unwrap();
    device.write_buffer(&buffer, 0, &values).unwrap();
    let mapping = buffer.map(MapMode::Read, 0, 4096).wait().unwrap();
    assert!(buffer.is_mapped());
    assert_eq!(mapping.as_slice::<f32>().unwrap(), values.as_slice());
    let halves: Vec<half::f16> = mapping.to_vec::<half::f16>().unwrap();
    assert_eq!(halves.len(), 2048);
    drop(mapping);
    assert!(!buffer.is_mapped());
    // Mapping again after the unmap works.
    let again = buffer.map(MapMode::Read, 8, 16).wait().unwrap();
    assert_eq!(again.as_slice::<f32>().unwrap(), &values[2..6]);
    again.unmap();
}

#[test]
fn map_for_writing_then_copy_and_read_back() {
    let device = common::device();
    let upload = device
        .create_buffer(&desc(64, BufferUsage::MAP_WRITE | BufferUsage::COPY_SRC))
        .unwrap();
    {
        let mut mapping = upload.map(MapMode::Write, 0, 64).wait().unwrap();
        let slice = mapping.as_mut_slice::<u32>().unwrap();
        for (i, v) in slice.iter_mut().enumerate() {
            *v = 1000 + i as u32;
        }
    }
    let storage = device
        .create_buffer(&desc(
            64,
            BufferUsage::STORAGE | BufferUsage::COPY_DST | BufferUsage::COPY_SRC,
        ))
        .unwrap();
    let mut encoder = device.create_command_encoder(None).unwrap();
    encoder.copy_buffer_to_buffer(&upload, 0, &storage, 0, 64).unwrap();
    device.submit([encoder.finish().unwrap()]).unwrap();
    let back: Vec<u32> = device.read_buffer(&storage, 0, 64).unwrap();
    assert_eq!(back, (1000..1016).collect::<Vec<u32>>());
}

/// A staged read keeps its staging buffer for the next read of that size or less, makes a larger
/// one when it must, and refuses a source without COPY_SRC.
#[test]
fn staged_reads_keep_their_staging_buffer() {
    let device = common::device();
    let values: Vec<u32> = (0..64).collect();
    let storage = device
        .create_buffer(&desc(
            256,
            BufferUsage::STORAGE | BufferUsage::COPY_DST | BufferUsage::COPY_SRC,
        ))
        .unwrap();
    device.write_buffer(&storage, 0, &values).unwrap();
    let timeout = std::time::Duration::from_secs(60);
    let mut staging = None;
    let first: Vec<u32> = device
        .read_buffer_staged(&storage, 0, 64, &mut staging, timeout)
        .unwrap();
    assert_eq!(first, values[..16]);
    let kept = staging.as_ref().unwrap().as_raw();
    let second: Vec<u32> = device
        .read_buffer_staged(&storage, 16, 32, &mut staging, timeout)
        .unwrap();
    assert_eq!(second, values[4..12]);
    assert_eq!(staging.as_ref().unwrap().as_raw(), kept, "a smaller read made a buffer");
    let whole: Vec<u32> = device
        .read_buffer_staged(&storage, 0, 256, &mut staging, timeout)
        .unwrap();
    assert_eq!(whole, values);
    assert_eq!(staging.as_ref().unwrap().size(), 256);
    let no_copy = device.create_buffer(&desc(64, BufferUsage::STORAGE)).unwrap();
    assert!(matches!(
        device.read_buffer_staged::<u32>(&no_copy, 0, 64, &mut staging, timeout),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn a_read_mapping_cannot_be_written() {
    let device = common::device();
    let buffer = device
        .create_buffer(&desc(16, BufferUsage::MAP_READ | BufferUsage::COPY_DST))
        .unwrap();
    let mut mapping = buffer.map(MapMode::Read, 0, 16).wait().unwrap();
    assert!(matches!(mapping.bytes_mut(), Err(Error::InvalidArgument(_))));
    assert!(matches!(mapping.as_mut_slice::<u32>(), Err(Error::InvalidArgument(_))));
}

#[test]
fn mapping_without_map_usage_is_an_error() {
    let device = common::device();
    let buffer = device.create_buffer(&desc(16, BufferUsage::STORAGE)).unwrap();
    let err = buffer.map(MapMode::Read, 0, 16).wait().unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(!buffer.is_mapped(), "a refused map leaves the buffer unmapped");
    assert!(matches!(
        buffer.map(MapMode::Write, 0, 16).wait(),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn bad_map_ranges_and_double_maps_are_errors() {
    let device = common::device();
    let buffer = device
        .create_buffer(&desc(64, BufferUsage::MAP_READ | BufferUsage::COPY_DST))
        .unwrap();
    assert!(
        matches!(buffer.map(MapMode::Read, 4, 16).wait(), Err(Error::InvalidArgument(_))),
        "offset not multiple of 8"
    );
    assert!(
        matches!(buffer.map(MapMode::Read, 0, 6).wait(), Err(Error::InvalidArgument(_))),
        "size not multiple of 4"
    );
    assert!(
        matches!(buffer.map(MapMode::Read, 32, 64).wait(), Err(Error::InvalidArgument(_))),
        "past the end"
    );
    let first = buffer.map(MapMode::Read, 0, 64).wait().unwrap();
    assert!(matches!(buffer.map(MapMode::Read, 0, 64).wait(), Err(Error::Map(_))));
    // Destroying a mapped buffer or its device would pull the memory from under `first`.
    assert!(buffer.destroy().is_err());
    assert!(device.destroy().is_err());
    drop(first);
    buffer.destroy().unwrap();
}

#[test]
fn buffers_over_the_limits_are_errors() {
    let device = common::device();
    let too_big = device.limits().max_buffer_size + 4;
    let err = device.create_buffer(&desc(too_big, BufferUsage::STORAGE)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    // Usages WebGPU forbids together are caught by Dawn and come back as values.
    let err = device
        .create_buffer(&desc(16, BufferUsage::MAP_READ | BufferUsage::MAP_WRITE))
        .unwrap_err();
    assert!(matches!(err, Error::Validation(_)), "{err}");
    // write_buffer past the end.
    let small = device.create_buffer(&desc(16, BufferUsage::COPY_DST)).unwrap();
    assert!(matches!(
        device.write_buffer(&small, 8, &[0u32; 4]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        device.write_buffer(&small, 2, &[0u32]),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn dropping_a_pending_map_cancels_it() {
    let device = common::device();
    let buffer = device
        .create_buffer(&desc(16, BufferUsage::MAP_READ | BufferUsage::COPY_DST))
        .unwrap();
    drop(buffer.map(MapMode::Read, 0, 16));
    assert!(!buffer.is_mapped());
    let mapping = buffer.map(MapMode::Read, 0, 16).wait().unwrap();
    assert_eq!(mapping.bytes().len(), 16);
}

/// A minimal executor: polls a future, parking the thread between wake-ups. Shows that the
/// futures work with no runtime at all.
fn block_on<F: Future>(future: F) -> F::Output {
    struct ThreadWaker(Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return value;
        }
        std::thread::park();
    }
}

#[test]
fn handle_count_counts_the_clones() {
    let device = common::device();
    let buffer = device.create_buffer(&desc(64, BufferUsage::STORAGE)).unwrap();
    assert_eq!(buffer.handle_count(), 1);
    let clone = buffer.clone();
    assert_eq!((buffer.handle_count(), clone.handle_count()), (2, 2));
    drop(clone);
    assert_eq!(buffer.handle_count(), 1);
}

/// A map future polled to its result, then waited on as well, is an error rather than a panic.
#[test]
fn a_map_future_resolves_once() {
    let device = common::device();
    let buffer = device
        .create_buffer(&desc(64, BufferUsage::MAP_READ | BufferUsage::COPY_DST))
        .unwrap();
    let mut future = buffer.map(MapMode::Read, 0, 64);
    let mapping = block_on(&mut future).unwrap();
    assert!(matches!(block_on(&mut future), Err(Error::Map(_))));
    assert!(matches!(future.wait(), Err(Error::Map(_))));
    assert_eq!(mapping.bytes().len(), 64);
    drop(mapping);
    assert!(!buffer.is_mapped());
}

#[test]
fn futures_can_be_awaited_without_a_runtime() {
    let device = common::device();
    let values: Vec<u32> = (0..256).collect();
    let buffer = device
        .create_buffer(&desc(1024, BufferUsage::MAP_READ | BufferUsage::COPY_DST))
        .unwrap();
    device.write_buffer(&buffer, 0, &values).unwrap();
    let read = block_on(async {
        device.on_submitted_work_done().await?;
        let mapping = buffer.map(MapMode::Read, 0, 1024).await?;
        mapping.to_vec::<u32>()
    })
    .unwrap();
    assert_eq!(read, values);
}

#[test]
fn a_mapping_outlives_every_device_handle() {
    let lost = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&lost);
    let adapter = common::adapter();
    let device_desc = DeviceDescriptor {
        on_device_lost: Some(Arc::new(move |_| seen.store(true, Ordering::SeqCst))),
        ..Default::default()
    };
    let device = adapter.request_device(&device_desc).wait().unwrap();
    let instance = adapter.instance().clone();
    let values: Vec<u32> = (0..16 * 1024).map(|i| i * 7 + 3).collect();
    let buffer = device
        .create_buffer(&desc(64 * 1024, BufferUsage::MAP_READ | BufferUsage::COPY_DST))
        .unwrap();
    device.write_buffer(&buffer, 0, &values).unwrap();
    let mapping = buffer.map(MapMode::Read, 0, 64 * 1024).wait().unwrap();

    // Drop every handle to the device, its queue and its adapter: Dawn destroys a device (and
    // unmaps its buffers) when the last one goes, unless the buffer holds one.
    let queue = device.queue().clone();
    drop(queue);
    drop(device);
    drop(adapter);
    instance.process_events();
    assert!(
        !lost.load(Ordering::SeqCst),
        "the device was destroyed while a mapping of one of its buffers was alive"
    );
    assert_eq!(mapping.as_slice::<u32>().unwrap(), values.as_slice());
    assert!(buffer.is_mapped());

    // Once the mapping and the buffer are gone, nothing keeps the device any more.
    drop(mapping);
    drop(buffer);
    instance.process_events();
    assert!(
        lost.load(Ordering::SeqCst),
        "the device is destroyed with its last handle"
    );
}

#[test]
fn destroying_a_buffer_with_a_map_in_flight_fails_the_map() {
    let device = common::device();
    let buffer = device
        .create_buffer(&desc(64, BufferUsage::MAP_READ | BufferUsage::COPY_DST))
        .unwrap();
    let pending = buffer.map(MapMode::Read, 0, 64);
    buffer.destroy().unwrap();
    assert!(
        pending.wait().is_err(),
        "a map cannot resolve into memory the destroy freed"
    );
    assert!(!buffer.is_mapped());
    assert!(matches!(buffer.map(MapMode::Read, 0, 64).wait(), Err(Error::Map(_))));
    buffer.destroy().unwrap();
}

#[test]
fn a_destroyed_device_refuses_new_mappings() {
    let device = common::device();
    let buffer = device
        .create_buffer(&desc(64, BufferUsage::MAP_READ | BufferUsage::COPY_DST))
        .unwrap();
    let pending = buffer.map(MapMode::Read, 0, 64);
    device.destroy().unwrap();
    assert!(pending.wait().is_err());
    assert!(buffer.map(MapMode::Read, 0, 64).wait().is_err());
    assert!(
        device
            .create_buffer_init(None, BufferUsage::STORAGE, &[1u32, 2])
            .unwrap_err()
            .is_device_lost()
    );
}

/// `create_buffer_init` rounds the size up to whole words; the padding past the data is zero
/// even where Dawn does not clear buffers mapped at creation
/// (`disable_lazy_clear_for_mapped_at_creation_buffer`), so no byte of the buffer is read before
/// it is written.
#[test]
fn create_buffer_init_zeroes_its_padding() {
    // SAFETY: every buffer this device makes is created by `create_buffer_init`, which writes
    // each byte of it (the promise of that toggle); the device runs no shader.
    let toggles = unsafe {
        dawn::Toggles::new().enable_unsafe(dawn::Toggle::new("disable_lazy_clear_for_mapped_at_creation_buffer"))
    };
    let device = common::device_with(toggles);
    let usage = BufferUsage::STORAGE | BufferUsage::COPY_SRC;
    for round in 0..64 {
        // Memory of earlier buffers, full of 0xFF, is what a recycled allocation would show.
        for _ in 0..8 {
            drop(device.create_buffer_init(None, usage, &[0xFFu8; 4096]).unwrap());
        }
        for len in [0usize, 1, 2, 3, 5, 4093] {
            let data: Vec<u8> = (0..len).map(|i| i as u8 % 7 + 1).collect();
            let buffer = device.create_buffer_init(None, usage, &data).unwrap();
            let size = buffer.size();
            assert_eq!(size, (len as u64).next_multiple_of(4).max(4));
            let back: Vec<u8> = device.read_buffer(&buffer, 0, size).unwrap();
            assert_eq!(&back[..len], &data[..], "round {round}, {len} bytes");
            assert!(
                back[len..].iter().all(|&b| b == 0),
                "round {round}, {len} bytes: padding {:?}",
                &back[len..]
            );
        }
    }
}
