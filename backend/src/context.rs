//! Device setup as ggml's WebGPU backend does it, and the capability probe.
//!
//! Instance: `allow_unsafe_apis` (subgroup matrices are experimental). Adapter:
//! `vulkan_enable_f16_on_nvidia` and `use_vulkan_memory_model`. Device: every adapter limit, and
//! the toggles that drop WebGPU's safety nets (`skip_validation`, `disable_robustness`,
//! `disable_workgroup_init`, `disable_polyfills_on_integer_div_and_mod`) with
//! `timestamp_quantization` off — unless [`ContextOptions::safe_mode`] keeps them on.

use std::sync::Arc;

use dawn::{
    Adapter, AdapterInfo, ComponentType, Device, DeviceDescriptor, ErrorChecking, Feature, Instance,
    InstanceDescriptor, Limits, RequestAdapterOptions, SubgroupMatrixConfig, Toggle, Toggles,
};

use crate::kernel::KernelCache;
use crate::scratch::Scratch;

/// How to set up the device.
#[derive(Debug, Clone, Default)]
pub struct ContextOptions {
    /// Keep validation and robustness on (slower; for debugging).
    pub safe_mode: bool,
    /// Behave as if the adapter had no subgroup matrices (tests the fallback paths).
    pub no_subgroup_matrix: bool,
    /// Use this subgroup-matrix shape (M, N, K) instead of the first f16 one reported.
    pub force_config: Option<(u32, u32, u32)>,
    /// Device toggles to force on, on top of the mode's (by Dawn name).
    pub enable_toggles: Vec<String>,
    /// Device toggles to force off (by Dawn name), overriding the mode's.
    pub disable_toggles: Vec<String>,
}

/// What the device can do, as the kernels need to know it.
#[derive(Debug, Clone)]
pub struct Capabilities {
    pub info: AdapterInfo,
    pub limits: Limits,
    pub features: Vec<Feature>,
    pub shader_f16: bool,
    pub subgroups: bool,
    pub timestamp_query: bool,
    /// The f16 subgroup-matrix config the kernels use, if any (and not masked off).
    pub subgroup_matrix: Option<SubgroupMatrixConfig>,
}

/// An instance, adapter and device set up for the backend.
#[derive(Debug, Clone)]
pub struct GpuContext {
    pub instance: Instance,
    pub adapter: Adapter,
    pub device: Device,
    pub capabilities: Capabilities,
    pub options: ContextOptions,
    /// Compiled kernels of this device.
    pub kernels: Arc<KernelCache>,
    /// Scratch buffers the ops use between their own dispatches.
    pub scratch: Arc<Scratch>,
}

/// Why the context could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    #[error(transparent)]
    Dawn(#[from] dawn::Error),
    #[error("the adapter has no subgroup-matrix config {0}x{1}x{2} with f16 inputs; it has: {3}")]
    NoSuchConfig(u32, u32, u32, String),
}

impl GpuContext {
    /// Creates the instance, the default adapter and its device.
    pub fn new(options: ContextOptions) -> Result<GpuContext, ContextError> {
        let instance = Instance::new(&InstanceDescriptor::compute())?;
        let adapter = instance.request_adapter(&RequestAdapterOptions::compute()).wait()?;
        let info = adapter.info();
        let adapter_features = adapter.features();
        let has = |f: Feature| adapter_features.contains(&f);

        let subgroup_matrix = if options.no_subgroup_matrix || !has(Feature::SUBGROUP_MATRIX) {
            None
        } else {
            let f16 = |c: &&SubgroupMatrixConfig| c.component == ComponentType::F16;
            match options.force_config {
                Some((m, n, k)) => Some(
                    *info
                        .subgroup_matrix_configs
                        .iter()
                        .filter(f16)
                        .find(|c| (c.m, c.n, c.k) == (m, n, k))
                        .ok_or_else(|| {
                            let list: Vec<String> =
                                info.subgroup_matrix_configs.iter().map(|c| c.to_string()).collect();
                            ContextError::NoSuchConfig(m, n, k, list.join(", "))
                        })?,
                ),
                None => info.subgroup_matrix_configs.iter().find(f16).copied(),
            }
        };

        let mut features = vec![];
        for f in [Feature::SHADER_F16, Feature::SUBGROUPS, Feature::TIMESTAMP_QUERY] {
            if has(f) {
                features.push(f);
            }
        }
        if subgroup_matrix.is_some() {
            features.push(Feature::SUBGROUP_MATRIX);
        }
        let mut toggles = if options.safe_mode {
            Toggles::new()
        } else {
            Toggles::new()
                .enable(Toggle::SKIP_VALIDATION)
                .enable(Toggle::DISABLE_ROBUSTNESS)
                .enable(Toggle::DISABLE_WORKGROUP_INIT)
                .enable(Toggle::DISABLE_POLYFILLS_ON_INTEGER_DIV_AND_MOD)
                .disable(Toggle::TIMESTAMP_QUANTIZATION)
        };
        for name in &options.enable_toggles {
            toggles.disabled.retain(|t| t.name() != name);
            toggles = toggles.enable(Toggle::new(name.as_str()));
        }
        for name in &options.disable_toggles {
            toggles.enabled.retain(|t| t.name() != name);
            toggles = toggles.disable(Toggle::new(name.as_str()));
        }
        let desc = DeviceDescriptor {
            label: Some("ggml-dawn".into()),
            required_features: features,
            toggles,
            // Validation errors of hot calls surface at synchronize; safe mode checks each call.
            error_checking: if options.safe_mode {
                ErrorChecking::EveryCall
            } else {
                ErrorChecking::Deferred
            },
            ..Default::default()
        }
        .with_adapter_limits();
        let device = adapter.request_device(&desc).wait()?;
        let capabilities = Capabilities {
            limits: *device.limits(),
            features: device.features().to_vec(),
            shader_f16: device.has_feature(Feature::SHADER_F16),
            subgroups: device.has_feature(Feature::SUBGROUPS),
            timestamp_query: device.has_feature(Feature::TIMESTAMP_QUERY),
            subgroup_matrix,
            info,
        };
        Ok(GpuContext {
            instance,
            adapter,
            device,
            capabilities,
            options,
            kernels: Arc::default(),
            scratch: Arc::default(),
        })
    }
}
