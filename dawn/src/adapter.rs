//! Adapters: one physical device (or software implementation) as Dawn presents it.

use std::sync::Arc;

use dawn_sys as sys;

use crate::device::{Device, DeviceDescriptor};
use crate::error::Error;
use crate::future::{self, GpuFuture};
use crate::handle::handle;
use crate::instance::Instance;
use crate::strings;
use crate::toggles::{Toggle, Toggles};
use crate::types::{AdapterType, BackendType, ComponentType, Feature, Limits, PowerPreference, SubgroupMatrixConfig};

handle!(
    /// The raw adapter reference held by [`Adapter`].
    RawAdapter,
    sys::WGPUAdapter,
    sys::wgpuAdapterAddRef,
    sys::wgpuAdapterRelease
);

// SAFETY: Dawn does not lock adapter calls (dawn.json marks adapters "no autolock"), so each
// call this crate makes is accounted for: GetInfo, GetLimits, GetFeatures and HasFeature only
// read what the adapter was created with; RequestDevice changes adapter and instance state and
// goes through `Instance::dawn_calls`, the lock of the adapter's instance. AddRef/Release are
// atomic.
unsafe impl Send for RawAdapter {}
// SAFETY: as for `Send`: `&self` reaches only the calls listed there, each read-only or locked.
unsafe impl Sync for RawAdapter {}

/// Which adapter to request.
#[derive(Debug, Clone, Default)]
pub struct RequestAdapterOptions {
    /// Only adapters of this backend (for example Vulkan); `None` lets Dawn choose.
    pub backend: Option<BackendType>,
    /// Whether to prefer a low-power or a high-performance adapter.
    pub power_preference: PowerPreference,
    /// Ask for the fallback adapter: a CPU implementation such as lavapipe or SwiftShader.
    pub force_fallback_adapter: bool,
    /// Adapter toggles, for example [`Toggle::VULKAN_ENABLE_F16_ON_NVIDIA`].
    pub toggles: Toggles,
}

impl RequestAdapterOptions {
    /// The adapter toggles GPU compute wants: f16 on NVIDIA Vulkan, and the Vulkan memory model
    /// (both needed for f16 subgroup matrices there; harmless elsewhere).
    pub fn compute() -> Self {
        RequestAdapterOptions {
            toggles: Toggles::new()
                .enable(Toggle::VULKAN_ENABLE_F16_ON_NVIDIA)
                .enable(Toggle::USE_VULKAN_MEMORY_MODEL),
            ..Default::default()
        }
    }
}

/// Facts about an adapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterInfo {
    /// The vendor's name (may be empty).
    pub vendor: String,
    /// The GPU architecture or family (may be empty).
    pub architecture: String,
    /// The device's name.
    pub device: String,
    /// The driver's description (may be empty).
    pub description: String,
    /// The native API the adapter runs on.
    pub backend: BackendType,
    /// Discrete GPU, integrated GPU or CPU.
    pub adapter_type: AdapterType,
    /// The PCI vendor ID (0 when unknown).
    pub vendor_id: u32,
    /// The PCI device ID (0 when unknown).
    pub device_id: u32,
    /// The smallest subgroup size shaders may run with.
    pub subgroup_min_size: u32,
    /// The largest; a subgroup-matrix shader's workgroup x size must be a multiple of it.
    pub subgroup_max_size: u32,
    /// Subgroup-matrix shapes and types (empty without the subgroup-matrix feature).
    pub subgroup_matrix_configs: Vec<SubgroupMatrixConfig>,
}

impl AdapterInfo {
    /// Whether this is Dawn's Null backend: it accepts every call and computes nothing (Dawn
    /// offers it when it finds no driver).
    pub fn is_null_backend(&self) -> bool {
        self.backend == BackendType::Null
    }

    /// Whether the adapter is software on the CPU rather than a GPU: a CPU implementation such
    /// as lavapipe or SwiftShader, or the Null backend.
    pub fn is_software(&self) -> bool {
        self.adapter_type == AdapterType::Cpu || self.is_null_backend()
    }
}

/// An adapter. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Adapter {
    raw: RawAdapter,
    instance: Instance,
}

impl Adapter {
    pub(crate) fn from_raw(raw: sys::WGPUAdapter, instance: Instance) -> Self {
        Adapter {
            raw: RawAdapter::from_raw(raw),
            instance,
        }
    }

    /// The raw handle, owned by `self`.
    pub fn as_raw(&self) -> sys::WGPUAdapter {
        self.raw.as_raw()
    }

    /// The instance this adapter came from.
    pub fn instance(&self) -> &Instance {
        &self.instance
    }

    /// Vendor, device, backend, subgroup sizes and subgroup-matrix configs.
    pub fn info(&self) -> AdapterInfo {
        let has_matrices = self.has_feature(Feature::SUBGROUP_MATRIX);
        let mut configs = sys::WGPUAdapterPropertiesSubgroupMatrixConfigs {
            chain: sys::WGPUChainedStruct {
                next: std::ptr::null_mut(),
                sType: sys::WGPUSType::AdapterPropertiesSubgroupMatrixConfigs,
            },
            configCount: 0,
            configs: std::ptr::null(),
        };
        let mut raw = sys::WGPUAdapterInfo {
            nextInChain: if has_matrices {
                &mut configs.chain
            } else {
                std::ptr::null_mut()
            },
            ..Default::default()
        };
        // SAFETY: `raw` and the chained struct are valid for writes during the call.
        let status = unsafe { sys::wgpuAdapterGetInfo(self.as_raw(), &mut raw) };
        let subgroup_matrix_configs = if status == sys::WGPUStatus::Success && !configs.configs.is_null() {
            // SAFETY: Dawn filled `configs` with `configCount` elements.
            unsafe { std::slice::from_raw_parts(configs.configs, configs.configCount) }
                .iter()
                .map(|c| SubgroupMatrixConfig {
                    m: c.M,
                    n: c.N,
                    k: c.K,
                    component: ComponentType::from_raw(c.componentType),
                    result: ComponentType::from_raw(c.resultComponentType),
                })
                .collect()
        } else {
            Vec::new()
        };
        let info = AdapterInfo {
            vendor: strings::from_view(raw.vendor),
            architecture: strings::from_view(raw.architecture),
            device: strings::from_view(raw.device),
            description: strings::from_view(raw.description),
            backend: BackendType::from_raw(raw.backendType),
            adapter_type: AdapterType::from_raw(raw.adapterType),
            vendor_id: raw.vendorID,
            device_id: raw.deviceID,
            subgroup_min_size: raw.subgroupMinSize,
            subgroup_max_size: raw.subgroupMaxSize,
            subgroup_matrix_configs,
        };
        if status == sys::WGPUStatus::Success {
            // SAFETY: frees what GetInfo allocated, exactly once; we copied everything out.
            unsafe {
                if has_matrices {
                    sys::wgpuAdapterPropertiesSubgroupMatrixConfigsFreeMembers(configs);
                }
                sys::wgpuAdapterInfoFreeMembers(raw);
            }
        }
        info
    }

    /// The adapter's limits (the most a device of it may ask for).
    pub fn limits(&self) -> Limits {
        let mut raw = sys::WGPULimits::default();
        // SAFETY: `raw` is valid for writes.
        let status = unsafe { sys::wgpuAdapterGetLimits(self.as_raw(), &mut raw) };
        debug_assert_eq!(status, sys::WGPUStatus::Success);
        Limits::from_raw(&raw)
    }

    /// The features a device of this adapter may ask for.
    pub fn features(&self) -> Vec<Feature> {
        let mut raw = sys::WGPUSupportedFeatures::default();
        // SAFETY: `raw` is valid for writes; freed below.
        unsafe { sys::wgpuAdapterGetFeatures(self.as_raw(), &mut raw) };
        let features = if raw.features.is_null() {
            Vec::new()
        } else {
            // SAFETY: Dawn filled `featureCount` elements.
            unsafe { std::slice::from_raw_parts(raw.features, raw.featureCount) }
                .iter()
                .map(|&f| Feature(f))
                .collect()
        };
        // SAFETY: frees what GetFeatures allocated, once.
        unsafe { sys::wgpuSupportedFeaturesFreeMembers(raw) };
        features
    }

    /// Whether the adapter has `feature`.
    pub fn has_feature(&self, feature: Feature) -> bool {
        // SAFETY: a valid adapter.
        unsafe { sys::wgpuAdapterHasFeature(self.as_raw(), feature.0) != 0 }
    }

    /// Requests a device. An adapter gives one device; request another adapter for a second.
    /// `ImplicitDeviceSynchronization` is always added: it is what makes
    /// this crate's handles safe to share between threads (see the crate documentation).
    pub fn request_device(&self, desc: &DeviceDescriptor) -> GpuFuture<Device> {
        if !self.has_feature(Feature::IMPLICIT_DEVICE_SYNCHRONIZATION) {
            return GpuFuture::ready(
                &self.instance,
                Err(Error::MissingFeature(
                    "implicit-device-synchronization (required for thread-safe handles)".into(),
                )),
            );
        }
        if let Some(missing) = desc.required_features.iter().find(|f| !self.has_feature(**f)) {
            return GpuFuture::ready(&self.instance, Err(Error::MissingFeature(missing.to_string())));
        }
        let pending = crate::device::PendingDevice::new(self.clone(), desc);
        let mut prepared = match pending.prepare(desc) {
            Ok(prepared) => prepared,
            Err(error) => return GpuFuture::ready(&self.instance, Err(error)),
        };
        let (slot, userdata) = future::slot::<Device>();
        let request_data = Arc::into_raw(Arc::clone(&pending)).cast_mut().cast();
        let callback = sys::WGPURequestDeviceCallbackInfo {
            nextInChain: std::ptr::null_mut(),
            mode: sys::WGPUCallbackMode::AllowSpontaneous,
            callback: Some(crate::device::on_request_device),
            userdata1: userdata,
            userdata2: request_data,
        };
        // Dawn does not synchronise adapter and instance calls (they are not device calls); this
        // lock serialises the ones that change state (see `Instance::dawn_calls`).
        let _serial = self.instance.dawn_calls();
        // SAFETY: the descriptor (and the storage `prepared` owns) lives until the call returns;
        // the callback receives both userdata pointers back exactly once; `_serial` keeps other
        // threads out of the adapter's and instance's unsynchronised state during the call.
        let id = unsafe { sys::wgpuAdapterRequestDevice(self.as_raw(), prepared.descriptor(), callback) };
        GpuFuture::new(&self.instance, id, slot)
    }
}
