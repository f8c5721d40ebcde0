//! Dawn toggles as typed values, and the sets of them given to an instance, adapter or device.

use std::borrow::Cow;
use std::ffi::{CString, c_char};
use std::fmt;

use dawn_sys::{WGPUChainedStruct, WGPUDawnTogglesDescriptor, WGPUSType};

/// One Dawn toggle, by name. The constants cover the ones this project relies on; any other
/// name Dawn knows works too (`Toggle::new("dump_shaders")`). Dawn ignores unknown names, with a
/// warning.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Toggle(Cow<'static, str>);

impl Toggle {
    /// Instance: exposes experimental features such as subgroup matrices.
    pub const ALLOW_UNSAFE_APIS: Toggle = Toggle::from_static("allow_unsafe_apis");
    /// Adapter: lets Dawn expose `ShaderF16` (and f16 subgroup-matrix configs) on NVIDIA Vulkan.
    pub const VULKAN_ENABLE_F16_ON_NVIDIA: Toggle = Toggle::from_static("vulkan_enable_f16_on_nvidia");
    /// Adapter: compile for the Vulkan memory model (subgroup matrices on Vulkan need it).
    pub const USE_VULKAN_MEMORY_MODEL: Toggle = Toggle::from_static("use_vulkan_memory_model");
    /// Device: skip WebGPU validation of API calls.
    pub const SKIP_VALIDATION: Toggle = Toggle::from_static("skip_validation");
    /// Device: no bounds clamping of shader memory accesses.
    pub const DISABLE_ROBUSTNESS: Toggle = Toggle::from_static("disable_robustness");
    /// Device: no zero-initialisation of workgroup memory.
    pub const DISABLE_WORKGROUP_INIT: Toggle = Toggle::from_static("disable_workgroup_init");
    /// Device: no polyfills for integer division and modulo.
    pub const DISABLE_POLYFILLS_ON_INTEGER_DIV_AND_MOD: Toggle =
        Toggle::from_static("disable_polyfills_on_integer_div_and_mod");
    /// Device: round timestamps to a coarse quantum (on by default; disable for profiling).
    pub const TIMESTAMP_QUANTIZATION: Toggle = Toggle::from_static("timestamp_quantization");

    /// A toggle by its Dawn name.
    pub fn new(name: impl Into<String>) -> Self {
        Toggle(Cow::Owned(name.into()))
    }

    const fn from_static(name: &'static str) -> Self {
        Toggle(Cow::Borrowed(name))
    }

    /// The toggle's Dawn name.
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Toggle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Toggles to force on and to force off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Toggles {
    /// Toggles to force on.
    pub enabled: Vec<Toggle>,
    /// Toggles to force off.
    pub disabled: Vec<Toggle>,
}

impl Toggles {
    /// No toggles.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a toggle to force on.
    pub fn enable(mut self, toggle: Toggle) -> Self {
        self.enabled.push(toggle);
        self
    }

    /// Adds a toggle to force off.
    pub fn disable(mut self, toggle: Toggle) -> Self {
        self.disabled.push(toggle);
        self
    }

    /// Whether no toggle is forced either way.
    pub fn is_empty(&self) -> bool {
        self.enabled.is_empty() && self.disabled.is_empty()
    }

    /// The C descriptor, with storage that must stay alive (and unmoved) while Dawn reads it.
    pub(crate) fn to_raw(&self) -> RawToggles {
        let names = |list: &[Toggle]| -> Vec<CString> {
            // Interior NULs cannot name a real toggle; dropping them cannot enable a wrong one.
            list.iter()
                .map(|t| CString::new(t.name().replace('\0', "")).unwrap_or_default())
                .collect()
        };
        let enabled = names(&self.enabled);
        let disabled = names(&self.disabled);
        let enabled_ptrs: Vec<*const c_char> = enabled.iter().map(|s| s.as_ptr()).collect();
        let disabled_ptrs: Vec<*const c_char> = disabled.iter().map(|s| s.as_ptr()).collect();
        let descriptor = Box::new(WGPUDawnTogglesDescriptor {
            chain: WGPUChainedStruct {
                next: std::ptr::null_mut(),
                sType: WGPUSType::DawnTogglesDescriptor,
            },
            enabledToggleCount: enabled_ptrs.len(),
            enabledToggles: enabled_ptrs.as_ptr(),
            disabledToggleCount: disabled_ptrs.len(),
            disabledToggles: disabled_ptrs.as_ptr(),
        });
        RawToggles {
            _enabled: enabled,
            _disabled: disabled,
            _enabled_ptrs: enabled_ptrs,
            _disabled_ptrs: disabled_ptrs,
            descriptor,
        }
    }
}

/// A `WGPUDawnTogglesDescriptor` with the strings it points to. The vectors' heap buffers do not
/// move when this struct moves, and the descriptor is boxed, so chain pointers stay valid.
pub(crate) struct RawToggles {
    _enabled: Vec<CString>,
    _disabled: Vec<CString>,
    _enabled_ptrs: Vec<*const c_char>,
    _disabled_ptrs: Vec<*const c_char>,
    descriptor: Box<WGPUDawnTogglesDescriptor>,
}

impl RawToggles {
    /// The chain link to put in a descriptor's `nextInChain`.
    pub(crate) fn chain(&mut self) -> *mut WGPUChainedStruct {
        &mut self.descriptor.chain
    }
}
