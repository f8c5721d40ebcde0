//! Instances, adapters, toggles and the subgroup-matrix configs.

mod common;

use std::time::Duration;

use dawn::{
    AdapterType, BackendType, ComponentType, Feature, Instance, InstanceDescriptor, InstanceFeature,
    RequestAdapterOptions, Toggle, Toggles,
};

#[test]
fn allow_unsafe_apis_is_an_explicit_opt_in_for_subgroup_matrices() {
    let plain = Instance::new(&InstanceDescriptor::default()).unwrap();
    let adapter = plain.request_adapter(&RequestAdapterOptions::compute()).wait().unwrap();
    assert!(
        !adapter.has_feature(Feature::SUBGROUP_MATRIX),
        "experimental features must stay hidden by default"
    );
    assert!(adapter.info().subgroup_matrix_configs.is_empty());

    // SAFETY: the adapter is only asked what it offers; nothing is made from it.
    let unsafe_ok = Instance::new(&unsafe { InstanceDescriptor::compute() }).unwrap();
    let adapter = unsafe_ok
        .request_adapter(&RequestAdapterOptions::compute())
        .wait()
        .unwrap();
    if common::is_lavapipe(&adapter) {
        assert!(adapter.has_feature(Feature::SUBGROUP_MATRIX));
    }
}

#[test]
fn instance_features_and_toggles_are_accepted() {
    let desc = InstanceDescriptor {
        // SAFETY: the adapter is only asked what it offers; nothing is made from it.
        toggles: unsafe { Toggles::new().enable_unsafe(Toggle::new("allow_unsafe_apis")) },
        features: vec![InstanceFeature::TimedWaitAny, InstanceFeature::ShaderSourceSpirv],
    };
    let instance = Instance::new(&desc).unwrap();
    let adapter = instance
        .request_adapter(&RequestAdapterOptions::default())
        .wait()
        .unwrap();
    // The toggle given by name has the same effect as `InstanceDescriptor::allow_unsafe_apis`.
    if common::is_lavapipe(&adapter) {
        assert!(adapter.has_feature(Feature::SUBGROUP_MATRIX));
    }
}

/// `allow_unsafe_apis` unlocks APIs Dawn does not consider secure: from safe code, at any stage,
/// it is refused, and it is set only through an `unsafe` call.
#[test]
fn allow_unsafe_apis_is_set_only_through_an_unsafe_call() {
    let toggle = Toggle::ALLOW_UNSAFE_APIS;
    assert!(toggle.is_unsafe_to_enable());
    let mut by_field = Toggles::new();
    by_field.enabled.push(toggle.clone());
    for toggles in [Toggles::new().enable(toggle.clone()), by_field] {
        let desc = InstanceDescriptor {
            toggles: toggles.clone(),
            ..Default::default()
        };
        let err = Instance::new(&desc).unwrap_err();
        assert!(
            matches!(err, dawn::Error::UnsafeToggle(_)) && err.to_string().contains("allow_unsafe_apis"),
            "{err}"
        );
        let options = RequestAdapterOptions {
            toggles: toggles.clone(),
            ..Default::default()
        };
        let err = common::instance().request_adapter(&options).wait().unwrap_err();
        assert!(matches!(err, dawn::Error::UnsafeToggle(_)), "{err}");
        let device = dawn::DeviceDescriptor::default().with_toggles(toggles);
        let err = common::adapter().request_device(&device).wait().unwrap_err();
        assert!(matches!(err, dawn::Error::UnsafeToggle(_)), "{err}");
    }
    // The unsafe door: the descriptor carries the toggle once, however often it is asked for.
    // SAFETY: nothing is made from these descriptors.
    let desc = unsafe { InstanceDescriptor::default().allow_unsafe_apis().allow_unsafe_apis() };
    assert!(desc.toggles.contains_enabled(&toggle) && desc.toggles.check().is_ok());
    assert!(!InstanceDescriptor::default().toggles.contains_enabled(&toggle));
}

#[test]
fn toggle_names_and_stages_are_known() {
    use dawn::ToggleStage;
    assert_eq!(Toggle::ALLOW_UNSAFE_APIS.stage(), Some(ToggleStage::Instance));
    assert_eq!(Toggle::USE_VULKAN_MEMORY_MODEL.stage(), Some(ToggleStage::Adapter));
    for device in [
        Toggle::SKIP_VALIDATION,
        Toggle::DISABLE_ROBUSTNESS,
        Toggle::DISABLE_WORKGROUP_INIT,
        Toggle::DISABLE_POLYFILLS_ON_INTEGER_DIV_AND_MOD,
        Toggle::TIMESTAMP_QUANTIZATION,
        Toggle::new("dump_shaders"),
        Toggle::new("lazy_clear_resource_on_first_use"),
    ] {
        assert_eq!(device.stage(), Some(ToggleStage::Device), "{device}");
    }
    // Dawn matches names exactly, and ignores the others.
    for unknown in ["skip_validaton", "SKIP_VALIDATION", "", "dump-shaders"] {
        assert!(!Toggle::new(unknown).is_known(), "{unknown}");
    }
}

#[test]
fn adapter_info_limits_and_features() {
    let adapter = common::adapter();
    let info = adapter.info();
    assert!(!info.device.is_empty());
    assert!(info.subgroup_min_size >= 1 && info.subgroup_min_size <= info.subgroup_max_size);
    let limits = adapter.limits();
    assert!(limits.max_compute_invocations_per_workgroup >= 256);
    assert!(limits.max_storage_buffer_binding_size >= 128 << 20);
    let features = adapter.features();
    assert!(features.contains(&Feature::IMPLICIT_DEVICE_SYNCHRONIZATION));
    assert!(features.iter().all(|f| adapter.has_feature(*f)));
    if common::is_lavapipe(&adapter) {
        assert_eq!(info.backend, BackendType::Vulkan);
        assert_eq!(info.adapter_type, AdapterType::Cpu);
        assert_eq!((info.subgroup_min_size, info.subgroup_max_size), (8, 8));
        assert!(features.contains(&Feature::SHADER_F16) && features.contains(&Feature::SUBGROUPS));
    }
}

#[test]
fn lavapipe_reports_8x8x8_f16_subgroup_matrices() {
    let adapter = common::adapter();
    let configs = adapter.info().subgroup_matrix_configs;
    if !common::is_lavapipe(&adapter) {
        eprintln!("not lavapipe; configs: {configs:?}");
        return;
    }
    let has = |result| {
        configs
            .iter()
            .any(|c| (c.m, c.n, c.k) == (8, 8, 8) && c.component == ComponentType::F16 && c.result == result)
    };
    assert!(
        has(ComponentType::F16) && has(ComponentType::F32),
        "configs: {configs:?}"
    );
    assert_eq!(
        configs
            .iter()
            .find(|c| c.component == ComponentType::F16)
            .unwrap()
            .to_string(),
        "8x8x8 f16->f16"
    );
}

#[test]
fn adapter_options_select_backend_and_fallback() {
    let instance = common::instance();
    let vulkan = RequestAdapterOptions {
        backend: Some(BackendType::Vulkan),
        ..RequestAdapterOptions::compute()
    };
    let adapter = instance.request_adapter(&vulkan).wait().unwrap();
    assert_eq!(adapter.info().backend, BackendType::Vulkan);

    // No such backend on Linux: an error value, not a panic.
    let metal = RequestAdapterOptions {
        backend: Some(BackendType::Metal),
        ..Default::default()
    };
    if cfg!(target_os = "linux") {
        assert!(instance.request_adapter(&metal).wait().is_err());
    }
}

#[test]
fn enumeration_finds_each_adapter_once() {
    let instance = common::instance();
    let adapters = instance.enumerate_adapters(&Toggles::new());
    assert!(!adapters.is_empty());
    let infos: Vec<_> = adapters.iter().map(|a| a.info()).collect();
    for (i, a) in infos.iter().enumerate() {
        for b in &infos[i + 1..] {
            assert!(a != b, "duplicate adapter {a:?}");
        }
    }
}

#[test]
fn wait_any_reports_timeouts_and_completion() {
    let device = common::device();
    let instance = device.instance().clone();
    let done = device.on_submitted_work_done();
    let index = instance.wait_any(&[&done], Duration::from_secs(10)).unwrap();
    assert_eq!(index, 0);
    assert!(done.wait_timeout(Duration::ZERO).is_ok());
    instance.process_events();
}

#[test]
fn toggles_are_typed_values() {
    assert_eq!(Toggle::SKIP_VALIDATION.name(), "skip_validation");
    assert_eq!(Toggle::DISABLE_ROBUSTNESS.to_string(), "disable_robustness");
    assert_eq!(Toggle::new("dump_shaders").name(), "dump_shaders");
    for t in [
        Toggle::DISABLE_WORKGROUP_INIT,
        Toggle::DISABLE_POLYFILLS_ON_INTEGER_DIV_AND_MOD,
        Toggle::TIMESTAMP_QUANTIZATION,
        Toggle::ALLOW_UNSAFE_APIS,
        Toggle::USE_VULKAN_MEMORY_MODEL,
        Toggle::VULKAN_ENABLE_F16_ON_NVIDIA,
    ] {
        assert!(
            !t.name().is_empty()
                && t.name()
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
        );
    }
}
