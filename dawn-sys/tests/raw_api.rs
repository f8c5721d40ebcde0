//! The raw bindings against a real adapter (lavapipe in CI): toggles, subgroup-matrix configs,
//! and one compute pass whose output is read back and checked.
//!
//! Written against the C API directly, so that it checks `webgpu-dawn-sys` on its own.

use std::ffi::{CStr, c_void};
use std::ptr;

use dawn_sys::*;

const NO_TIMEOUT: u64 = u64::MAX;

fn string(view: WGPUStringView) -> String {
    if view.data.is_null() {
        return String::new();
    }
    let len = if view.length == WGPU_STRLEN {
        // SAFETY: Dawn gives NUL-terminated strings when the length is WGPU_STRLEN.
        unsafe { CStr::from_ptr(view.data) }.to_bytes().len()
    } else {
        view.length
    };
    // SAFETY: Dawn guarantees `len` readable bytes at `data` for the duration of the call.
    let bytes = unsafe { std::slice::from_raw_parts(view.data.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
}

fn toggles(enabled: &[&CStr]) -> (Vec<*const std::ffi::c_char>, WGPUDawnTogglesDescriptor) {
    let names: Vec<_> = enabled.iter().map(|t| t.as_ptr()).collect();
    let desc = WGPUDawnTogglesDescriptor {
        chain: WGPUChainedStruct {
            next: ptr::null_mut(),
            sType: WGPUSType::DawnTogglesDescriptor,
        },
        enabledToggleCount: names.len(),
        enabledToggles: names.as_ptr(),
        disabledToggleCount: 0,
        disabledToggles: ptr::null(),
    };
    (names, desc)
}

/// Waits for one future with `WaitAny`, panicking (this is a test) on anything but success.
fn wait(instance: WGPUInstance, future: WGPUFuture) {
    let mut info = WGPUFutureWaitInfo { future, completed: 0 };
    // SAFETY: `info` is a valid array of one element for the duration of the call.
    let status = unsafe { wgpuInstanceWaitAny(instance, 1, &mut info, NO_TIMEOUT) };
    assert_eq!(status, WGPUWaitStatus::Success);
    assert_eq!(info.completed, 1);
}

/// Stores the handle a request callback delivers, or the error message.
unsafe extern "C" fn on_adapter(
    status: WGPURequestAdapterStatus,
    adapter: WGPUAdapter,
    message: WGPUStringView,
    slot: *mut c_void,
    _: *mut c_void,
) {
    // SAFETY: `slot` points at the Result the test keeps alive until the future completes.
    let slot = unsafe { &mut *slot.cast::<Result<WGPUAdapter, String>>() };
    *slot = if status == WGPURequestAdapterStatus::Success {
        Ok(adapter)
    } else {
        Err(string(message))
    };
}

unsafe extern "C" fn on_device(
    status: WGPURequestDeviceStatus,
    device: WGPUDevice,
    message: WGPUStringView,
    slot: *mut c_void,
    _: *mut c_void,
) {
    // SAFETY: as in `on_adapter`.
    let slot = unsafe { &mut *slot.cast::<Result<WGPUDevice, String>>() };
    *slot = if status == WGPURequestDeviceStatus::Success {
        Ok(device)
    } else {
        Err(string(message))
    };
}

unsafe extern "C" fn on_map(status: WGPUMapAsyncStatus, message: WGPUStringView, slot: *mut c_void, _: *mut c_void) {
    // SAFETY: as in `on_adapter`.
    let slot = unsafe { &mut *slot.cast::<Result<(), String>>() };
    *slot = if status == WGPUMapAsyncStatus::Success {
        Ok(())
    } else {
        Err(string(message))
    };
}

struct Gpu {
    instance: WGPUInstance,
    adapter: WGPUAdapter,
}

/// An instance with `allow_unsafe_apis` and `TimedWaitAny`, and the default adapter requested with
/// the toggles upstream ggml uses.
fn instance_and_adapter() -> Gpu {
    let (_names, instance_toggles) = toggles(&[toggles::ALLOW_UNSAFE_APIS]);
    let features = [WGPUInstanceFeatureName::TimedWaitAny];
    let desc = WGPUInstanceDescriptor {
        nextInChain: &instance_toggles.chain as *const _ as *mut _,
        requiredFeatureCount: features.len(),
        requiredFeatures: features.as_ptr(),
        requiredLimits: ptr::null(),
    };
    // SAFETY: the descriptor and everything it points to outlive the call.
    let instance = unsafe { wgpuCreateInstance(&desc) };
    assert!(!instance.is_null(), "wgpuCreateInstance failed");

    let (_names, adapter_toggles) = toggles(&[toggles::VULKAN_ENABLE_F16_ON_NVIDIA, toggles::USE_VULKAN_MEMORY_MODEL]);
    let options = WGPURequestAdapterOptions {
        nextInChain: &adapter_toggles.chain as *const _ as *mut _,
        ..Default::default()
    };
    let mut slot: Result<WGPUAdapter, String> = Err("callback never ran".into());
    let callback = WGPURequestAdapterCallbackInfo {
        mode: WGPUCallbackMode::WaitAnyOnly,
        callback: Some(on_adapter),
        userdata1: (&mut slot as *mut Result<WGPUAdapter, String>).cast(),
        ..Default::default()
    };
    // SAFETY: options and slot outlive the wait below, which completes the callback.
    let future = unsafe { wgpuInstanceRequestAdapter(instance, &options, callback) };
    wait(instance, future);
    Gpu {
        instance,
        adapter: slot.expect("no adapter"),
    }
}

#[test]
fn adapter_reports_subgroup_matrix_configs() {
    let gpu = instance_and_adapter();
    // SAFETY: a valid adapter handle.
    let has_feature =
        unsafe { wgpuAdapterHasFeature(gpu.adapter, WGPUFeatureName::ChromiumExperimentalSubgroupMatrix) } != 0;
    assert!(
        has_feature,
        "allow_unsafe_apis should expose ChromiumExperimentalSubgroupMatrix"
    );

    let mut configs = WGPUAdapterPropertiesSubgroupMatrixConfigs {
        chain: WGPUChainedStruct {
            next: ptr::null_mut(),
            sType: WGPUSType::AdapterPropertiesSubgroupMatrixConfigs,
        },
        configCount: 0,
        configs: ptr::null(),
    };
    let mut info = WGPUAdapterInfo {
        nextInChain: &mut configs.chain,
        ..Default::default()
    };
    // SAFETY: `info` and the chained struct are valid for writes.
    let status = unsafe { wgpuAdapterGetInfo(gpu.adapter, &mut info) };
    assert_eq!(status, WGPUStatus::Success);
    // SAFETY: Dawn filled `configs` with `configCount` elements.
    let list = unsafe { std::slice::from_raw_parts(configs.configs, configs.configCount) };
    let description = string(info.device);
    eprintln!("adapter: {description}; configs: {list:?}");
    assert!(!list.is_empty());
    let f16 = WGPUSubgroupMatrixComponentType::F16;
    if description.contains("llvmpipe") {
        assert!(
            list.iter()
                .any(|c| c.M == 8 && c.N == 8 && c.K == 8 && c.componentType == f16),
            "lavapipe reports 8x8x8 f16"
        );
    }
    // SAFETY: frees what GetInfo allocated, once each; then releases our references.
    unsafe {
        wgpuAdapterPropertiesSubgroupMatrixConfigsFreeMembers(configs);
        wgpuAdapterInfoFreeMembers(info);
        wgpuAdapterRelease(gpu.adapter);
        wgpuInstanceRelease(gpu.instance);
    }
}

#[test]
fn compute_pass_writes_a_known_pattern() {
    const N: u32 = 4096;
    let gpu = instance_and_adapter();
    let (_names, device_toggles) = toggles(&[toggles::SKIP_VALIDATION, toggles::DISABLE_ROBUSTNESS]);
    let desc = WGPUDeviceDescriptor {
        nextInChain: &device_toggles.chain as *const _ as *mut _,
        ..Default::default()
    };
    let mut slot: Result<WGPUDevice, String> = Err("callback never ran".into());
    let callback = WGPURequestDeviceCallbackInfo {
        mode: WGPUCallbackMode::WaitAnyOnly,
        callback: Some(on_device),
        userdata1: (&mut slot as *mut Result<WGPUDevice, String>).cast(),
        ..Default::default()
    };
    // SAFETY: descriptor and slot outlive the wait.
    let future = unsafe { wgpuAdapterRequestDevice(gpu.adapter, &desc, callback) };
    wait(gpu.instance, future);
    let device = slot.expect("no device");

    let wgsl = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n\
                @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3u) {\n\
                  out[id.x] = id.x * 2654435761u + 12345u;\n}";
    let source = WGPUShaderSourceWGSL {
        chain: WGPUChainedStruct {
            next: ptr::null_mut(),
            sType: WGPUSType::ShaderSourceWGSL,
        },
        code: WGPUStringView::new(wgsl),
    };
    let size = u64::from(N) * 4;
    // SAFETY: every descriptor below outlives the call it is passed to; handles are valid.
    unsafe {
        let module = wgpuDeviceCreateShaderModule(
            device,
            &WGPUShaderModuleDescriptor {
                nextInChain: &source.chain as *const _ as *mut _,
                label: WGPUStringView::null(),
            },
        );
        let pipeline = wgpuDeviceCreateComputePipeline(
            device,
            &WGPUComputePipelineDescriptor {
                compute: WGPUComputeState {
                    module,
                    entryPoint: WGPUStringView::new("main"),
                    ..Default::default()
                },
                ..Default::default()
            },
        );
        let storage = wgpuDeviceCreateBuffer(
            device,
            &WGPUBufferDescriptor {
                usage: WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc,
                size,
                ..Default::default()
            },
        );
        let readback = wgpuDeviceCreateBuffer(
            device,
            &WGPUBufferDescriptor {
                usage: WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst,
                size,
                ..Default::default()
            },
        );
        let layout = wgpuComputePipelineGetBindGroupLayout(pipeline, 0);
        let queue = wgpuDeviceGetQueue(device);
        let entry = WGPUBindGroupEntry {
            binding: 0,
            buffer: storage,
            offset: 0,
            size,
            ..Default::default()
        };
        let bind_group = wgpuDeviceCreateBindGroup(
            device,
            &WGPUBindGroupDescriptor {
                layout,
                entryCount: 1,
                entries: &entry,
                ..Default::default()
            },
        );
        let encoder = wgpuDeviceCreateCommandEncoder(device, ptr::null());
        let pass = wgpuCommandEncoderBeginComputePass(encoder, ptr::null());
        wgpuComputePassEncoderSetPipeline(pass, pipeline);
        wgpuComputePassEncoderSetBindGroup(pass, 0, bind_group, 0, ptr::null());
        wgpuComputePassEncoderDispatchWorkgroups(pass, N / 64, 1, 1);
        wgpuComputePassEncoderEnd(pass);
        wgpuCommandEncoderCopyBufferToBuffer(encoder, storage, 0, readback, 0, size);
        let commands = wgpuCommandEncoderFinish(encoder, ptr::null());
        wgpuQueueSubmit(queue, 1, &commands);

        let mut mapped: Result<(), String> = Err("callback never ran".into());
        let future = wgpuBufferMapAsync(
            readback,
            WGPUMapMode_Read,
            0,
            size as usize,
            WGPUBufferMapCallbackInfo {
                mode: WGPUCallbackMode::WaitAnyOnly,
                callback: Some(on_map),
                userdata1: (&mut mapped as *mut Result<(), String>).cast(),
                ..Default::default()
            },
        );
        wait(gpu.instance, future);
        mapped.expect("map failed");
        let data = wgpuBufferGetConstMappedRange(readback, 0, size as usize).cast::<u32>();
        let values = std::slice::from_raw_parts(data, N as usize);
        for (i, &v) in values.iter().enumerate() {
            assert_eq!(
                v,
                (i as u32).wrapping_mul(2654435761).wrapping_add(12345),
                "element {i}"
            );
        }
        wgpuBufferUnmap(readback);
        wgpuCommandBufferRelease(commands);
        wgpuComputePassEncoderRelease(pass);
        wgpuCommandEncoderRelease(encoder);
        wgpuBindGroupRelease(bind_group);
        wgpuBindGroupLayoutRelease(layout);
        wgpuQueueRelease(queue);
        wgpuBufferRelease(readback);
        wgpuBufferRelease(storage);
        wgpuComputePipelineRelease(pipeline);
        wgpuShaderModuleRelease(module);
        wgpuDeviceRelease(device);
        wgpuAdapterRelease(gpu.adapter);
        wgpuInstanceRelease(gpu.instance);
    }
}
