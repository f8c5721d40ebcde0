//! Shared setup for the tests: the default adapter, requested the way GPU compute wants it.

#![allow(dead_code)]

use dawn::{Adapter, Device, DeviceDescriptor, Feature, Instance, InstanceDescriptor, RequestAdapterOptions, Toggles};

pub fn instance() -> Instance {
    // SAFETY: of what `allow_unsafe_apis` unlocks, these tests only read what the adapter offers
    // (features, subgroup-matrix configs) and request the feature; no shader of theirs uses an
    // experimental builtin, and none relies on Dawn refusing an unsafe API.
    Instance::new(&unsafe { InstanceDescriptor::compute() }).expect("instance")
}

pub fn adapter() -> Adapter {
    instance()
        .request_adapter(&RequestAdapterOptions::compute())
        .wait()
        .expect("adapter")
}

/// A device with every adapter limit, timestamps where available, and the given toggles.
pub fn device_with(toggles: Toggles) -> Device {
    let adapter = adapter();
    let mut desc = DeviceDescriptor::default().with_adapter_limits().with_toggles(toggles);
    if adapter.has_feature(Feature::TIMESTAMP_QUERY) {
        desc = desc.with_feature(Feature::TIMESTAMP_QUERY);
    }
    adapter.request_device(&desc).wait().expect("device")
}

/// A device with validation on (the default toggles), so bad input reaches Dawn's checks too.
pub fn device() -> Device {
    device_with(Toggles::new())
}

/// Whether the adapter is Mesa's lavapipe (the CPU Vulkan driver CI runs on).
pub fn is_lavapipe(adapter: &Adapter) -> bool {
    adapter.info().device.contains("llvmpipe")
}
