//! Devices: features, limits, toggles, loss, uncaptured errors and error scopes as values.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dawn::{
    BufferDescriptor, BufferUsage, DeviceDescriptor, DeviceLostReason, Error, ErrorFilter, Feature, RequiredLimits,
    Toggle, Toggles,
};

#[test]
fn device_gets_the_adapter_limits_and_requested_features() {
    let adapter = common::adapter();
    let desc = DeviceDescriptor::default()
        .with_adapter_limits()
        .with_feature(Feature::SHADER_F16);
    let device = adapter.request_device(&desc).wait().unwrap();
    let (a, d) = (adapter.limits(), *device.limits());
    assert_eq!(d.max_storage_buffer_binding_size, a.max_storage_buffer_binding_size);
    assert_eq!(
        d.max_compute_workgroup_storage_size,
        a.max_compute_workgroup_storage_size
    );
    assert_eq!(d.max_buffer_size, a.max_buffer_size);
    assert!(device.has_feature(Feature::SHADER_F16));
    assert!(
        device.has_feature(Feature::IMPLICIT_DEVICE_SYNCHRONIZATION),
        "always enabled"
    );

    // An adapter gives one device: a second request is an error value.
    assert!(matches!(
        adapter.request_device(&DeviceDescriptor::default()).wait(),
        Err(Error::RequestDevice(_))
    ));
    // Default limits are WebGPU's, at most the adapter's.
    let plain = common::adapter()
        .request_device(&DeviceDescriptor::default())
        .wait()
        .unwrap();
    assert!(plain.limits().max_storage_buffer_binding_size <= a.max_storage_buffer_binding_size);
}

#[test]
fn custom_limits_above_the_adapter_are_an_error() {
    let adapter = common::adapter();
    let mut limits = adapter.limits();
    limits.max_compute_workgroup_storage_size += 1 << 20;
    let desc = DeviceDescriptor {
        required_limits: RequiredLimits::Custom(limits),
        ..Default::default()
    };
    let err = adapter.request_device(&desc).wait().unwrap_err();
    assert!(matches!(err, Error::RequestDevice(_)), "{err}");
}

#[test]
fn devices_take_the_toggles_upstream_uses() {
    // SAFETY: this device only runs `create_buffer_init` and `read_buffer`: validated-by-the-
    // wrapper copies of whole buffers, no shader, no mapped buffer in a submit, nothing read
    // before it is written.
    let toggles = unsafe {
        Toggles::new()
            .enable_unsafe(Toggle::SKIP_VALIDATION)
            .enable_unsafe(Toggle::DISABLE_ROBUSTNESS)
            .enable_unsafe(Toggle::DISABLE_WORKGROUP_INIT)
            .enable_unsafe(Toggle::DISABLE_POLYFILLS_ON_INTEGER_DIV_AND_MOD)
    }
    .disable(Toggle::TIMESTAMP_QUANTIZATION);
    let device = common::device_with(toggles);
    let buffer = device
        .create_buffer_init(
            Some("x"),
            BufferUsage::STORAGE | BufferUsage::COPY_SRC,
            &[1u32, 2, 3, 4],
        )
        .unwrap();
    assert_eq!(device.read_buffer::<u32>(&buffer, 0, 16).unwrap(), [1, 2, 3, 4]);
}

#[test]
fn toggles_that_remove_guarantees_are_refused_through_the_safe_path() {
    let unsafe_on = [
        Toggle::ALLOW_UNSAFE_APIS,
        Toggle::new("vulkan_use_image_robust_access_2"),
        Toggle::SKIP_VALIDATION,
        Toggle::DISABLE_ROBUSTNESS,
        Toggle::DISABLE_WORKGROUP_INIT,
        Toggle::DISABLE_POLYFILLS_ON_INTEGER_DIV_AND_MOD,
        Toggle::new("disable_lazy_clear_for_mapped_at_creation_buffer"),
        // However it is spelt.
        Toggle::new("SKIP_VALIDATION"),
        Toggle::new("disable-robustness"),
    ];
    for toggle in unsafe_on {
        assert!(toggle.is_unsafe_to_enable(), "{toggle}");
        // Through the builder and through the public list alike.
        let mut by_field = Toggles::new();
        by_field.enabled.push(toggle.clone());
        for toggles in [Toggles::new().enable(toggle.clone()), by_field] {
            assert!(matches!(toggles.check(), Err(Error::UnsafeToggle(_))), "{toggle}");
            let desc = DeviceDescriptor::default().with_toggles(toggles.clone());
            let err = common::adapter().request_device(&desc).wait().unwrap_err();
            assert!(matches!(err, Error::UnsafeToggle(_)), "{toggle}: {err}");
            // Instance and adapter toggles go through the same check.
            let instance = dawn::InstanceDescriptor {
                toggles: toggles.clone(),
                ..Default::default()
            };
            assert!(matches!(dawn::Instance::new(&instance), Err(Error::UnsafeToggle(_))));
            let options = dawn::RequestAdapterOptions {
                toggles,
                ..Default::default()
            };
            let err = common::instance().request_adapter(&options).wait().unwrap_err();
            assert!(matches!(err, Error::UnsafeToggle(_)), "{toggle}: {err}");
        }
    }
    // Forcing off the zeroing of new resources is unsafe too.
    let lazy_clear = Toggle::new("lazy_clear_resource_on_first_use");
    assert!(lazy_clear.is_unsafe_to_disable() && !lazy_clear.is_unsafe_to_enable());
    let desc = DeviceDescriptor::default().with_toggles(Toggles::new().disable(lazy_clear));
    let err = common::adapter().request_device(&desc).wait().unwrap_err();
    assert!(matches!(err, Error::UnsafeToggle(_)), "{err}");
    // A NUL byte cannot smuggle a name past the check.
    let smuggled = Toggles::new().enable(Toggle::new("skip\0_validation"));
    assert!(smuggled.check().is_err());
    // Everything else stays safe.
    let fine = Toggles::new()
        .enable(Toggle::new("dump_shaders"))
        .disable(Toggle::TIMESTAMP_QUANTIZATION)
        .disable(Toggle::DISABLE_ROBUSTNESS);
    fine.check().unwrap();
    let desc = DeviceDescriptor::default().with_toggles(fine);
    common::adapter().request_device(&desc).wait().unwrap();
}

#[test]
fn missing_features_are_reported_before_the_request() {
    let adapter = common::adapter();
    let bogus = DeviceDescriptor::default()
        .with_feature(Feature::DAWN_INTERNAL_USAGES)
        .with_feature(Feature::SHADER_F16);
    // Either the adapter has both (then a device), or the missing one is named.
    match adapter.request_device(&bogus).wait() {
        Ok(device) => assert!(device.has_feature(Feature::SHADER_F16)),
        Err(err) => assert!(matches!(err, Error::MissingFeature(_)), "{err}"),
    }
}

#[test]
fn destroy_delivers_device_lost_as_a_value_and_later_work_fails() {
    let adapter = common::adapter();
    let lost = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&lost);
    let desc = DeviceDescriptor {
        on_device_lost: Some(Arc::new(move |e: Error| {
            assert!(e.is_device_lost());
            seen.fetch_add(1, Ordering::SeqCst);
        })),
        ..Default::default()
    };
    let device = adapter.request_device(&desc).wait().unwrap();
    let buffer = device
        .create_buffer(&BufferDescriptor::new(16, BufferUsage::COPY_DST))
        .unwrap();
    device.destroy().unwrap();
    assert_eq!(lost.load(Ordering::SeqCst), 1);
    let reason = match device.lost() {
        Some(Error::DeviceLost { reason, .. }) => reason,
        other => panic!("expected a lost device, got {other:?}"),
    };
    assert_eq!(reason, DeviceLostReason::Destroyed);

    // Work on a destroyed device: error values, the process keeps running.
    let encoder = device.create_command_encoder(None);
    assert!(matches!(encoder, Err(Error::DeviceLost { .. })));
    assert!(matches!(device.submit([]), Err(Error::DeviceLost { .. })));
    assert!(matches!(
        device.write_buffer(&buffer, 0, &[1u32]),
        Err(Error::DeviceLost { .. })
    ));
    assert!(
        device
            .create_buffer(&BufferDescriptor::new(4, BufferUsage::COPY_DST))
            .is_err()
    );
    assert!(device.on_submitted_work_done().wait().is_err());
    assert!(device.synchronize(std::time::Duration::from_secs(1)).is_err());
}

#[test]
fn error_scopes_return_errors_as_values() {
    let device = common::device();
    let buffer = device
        .create_buffer(&BufferDescriptor::new(16, BufferUsage::COPY_DST))
        .unwrap();
    buffer.destroy().unwrap();

    device.push_error_scope(ErrorFilter::Validation);
    device.write_buffer(&buffer, 0, &[1u32, 2]).unwrap(); // Dawn rejects writes to a destroyed buffer.
    let caught = device.pop_error_scope().wait().unwrap();
    assert!(matches!(caught, Some(Error::Validation(_))), "{caught:?}");

    device.push_error_scope(ErrorFilter::OutOfMemory);
    assert_eq!(device.pop_error_scope().wait().unwrap(), None);

    // Popping an empty stack is itself an error value.
    assert!(device.pop_error_scope().wait().is_err());
    assert!(device.take_uncaptured_errors().is_empty());
}

#[test]
fn uncaptured_errors_reach_the_callback_and_the_log() {
    let adapter = common::adapter();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    let desc = DeviceDescriptor {
        on_uncaptured_error: Some(Arc::new(move |e: Error| {
            assert!(matches!(e, Error::Validation(_)));
            seen.fetch_add(1, Ordering::SeqCst);
        })),
        ..Default::default()
    };
    let device = adapter.request_device(&desc).wait().unwrap();
    let buffer = device
        .create_buffer(&BufferDescriptor::new(16, BufferUsage::COPY_DST))
        .unwrap();
    buffer.destroy().unwrap();
    device.write_buffer(&buffer, 0, &[7u32]).unwrap();
    device.on_submitted_work_done().wait().unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let log = device.take_uncaptured_errors();
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(device.take_uncaptured_errors().is_empty());
}

#[test]
fn a_panicking_callback_does_not_unwind_into_dawn() {
    let adapter = common::adapter();
    let desc = DeviceDescriptor {
        on_uncaptured_error: Some(Arc::new(|_e: Error| panic!("user callback panics"))),
        ..Default::default()
    };
    let device = adapter.request_device(&desc).wait().unwrap();
    let buffer = device
        .create_buffer(&BufferDescriptor::new(16, BufferUsage::COPY_DST))
        .unwrap();
    buffer.destroy().unwrap();
    device.write_buffer(&buffer, 0, &[7u32]).unwrap();
    device.on_submitted_work_done().wait().unwrap();
    // The process survives, the error was still logged, and the device still works.
    assert_eq!(device.take_uncaptured_errors().len(), 1);
    let ok = device
        .create_buffer_init(None, BufferUsage::STORAGE | BufferUsage::COPY_SRC, &[5u32])
        .unwrap();
    assert_eq!(device.read_buffer::<u32>(&ok, 0, 4).unwrap(), [5]);
}

#[test]
fn deferred_checking_reports_errors_at_synchronize() {
    use dawn::{BindGroupEntry, BindGroupLayoutEntry, BufferBindingType, ErrorChecking};
    let adapter = common::adapter();
    let desc = DeviceDescriptor {
        error_checking: ErrorChecking::Deferred,
        ..Default::default()
    };
    let device = adapter.request_device(&desc).wait().unwrap();
    let layout = device
        .create_bind_group_layout(None, &[BindGroupLayoutEntry::buffer(0, BufferBindingType::Storage)])
        .unwrap();
    let uniform = device
        .create_buffer(&BufferDescriptor::new(256, BufferUsage::UNIFORM))
        .unwrap();
    // Returns at once; Dawn's validation error arrives later.
    let group = device.create_bind_group(None, &layout, &[BindGroupEntry::whole(0, &uniform)]);
    assert!(group.is_ok());
    let err = device.synchronize(std::time::Duration::from_secs(10)).unwrap_err();
    assert!(matches!(err, Error::Validation(_)), "{err}");
    // The log was drained: the next synchronize is clean.
    device.synchronize(std::time::Duration::from_secs(10)).unwrap();
}

/// The waits the crate makes on its own (the error scopes of each checked creation) are bounded
/// by the device's `wait_timeout`: with none at all, a creation either gets its answer at once
/// (Dawn answers error scopes immediately on its native backends) or is `Error::Timeout`; it
/// never waits without end.
#[test]
fn error_scope_waits_are_bounded_by_the_device_timeout() {
    assert_eq!(DeviceDescriptor::default().wait_timeout, dawn::DEFAULT_WAIT_TIMEOUT);
    let desc = DeviceDescriptor {
        wait_timeout: std::time::Duration::ZERO,
        ..Default::default()
    };
    let device = common::adapter().request_device(&desc).wait().unwrap();
    assert_eq!(device.wait_timeout(), std::time::Duration::ZERO);
    for _ in 0..16 {
        let made = device.create_buffer(&dawn::BufferDescriptor::new(256, BufferUsage::STORAGE));
        match made {
            Ok(_) | Err(Error::Timeout(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
}
