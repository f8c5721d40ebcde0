//! Names of Dawn toggles, as Dawn spells them in `WGPUDawnTogglesDescriptor`.
//!
//! Toggles are plain strings to Dawn; these constants only spare typos. Which ones belong on the
//! instance, the adapter or the device is documented by Dawn (`src/dawn/native/Toggles.cpp`).
//! Unknown names are ignored by Dawn with a warning.

use std::ffi::CStr;

/// Instance/adapter: exposes experimental features such as subgroup matrices.
pub const ALLOW_UNSAFE_APIS: &CStr = c"allow_unsafe_apis";
/// Adapter: lets Dawn expose `ShaderF16` (and so f16 subgroup-matrix configs) on NVIDIA Vulkan.
pub const VULKAN_ENABLE_F16_ON_NVIDIA: &CStr = c"vulkan_enable_f16_on_nvidia";
/// Adapter: compiles shaders for the Vulkan memory model (needed by subgroup matrices on Vulkan).
pub const USE_VULKAN_MEMORY_MODEL: &CStr = c"use_vulkan_memory_model";
/// Device: skips WebGPU validation of API calls.
pub const SKIP_VALIDATION: &CStr = c"skip_validation";
/// Device: no bounds clamping of shader memory accesses.
pub const DISABLE_ROBUSTNESS: &CStr = c"disable_robustness";
/// Device: no zero-initialisation of workgroup memory.
pub const DISABLE_WORKGROUP_INIT: &CStr = c"disable_workgroup_init";
/// Device: no polyfills for integer division and modulo by zero or overflow.
pub const DISABLE_POLYFILLS_ON_INTEGER_DIV_AND_MOD: &CStr = c"disable_polyfills_on_integer_div_and_mod";
/// Device: rounds timestamp queries to a coarse quantum (on by default; turn off for profiling).
pub const TIMESTAMP_QUANTIZATION: &CStr = c"timestamp_quantization";
