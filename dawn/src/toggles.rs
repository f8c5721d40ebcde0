//! Dawn toggles as typed values, and the sets of them given to an instance, adapter or device.
//!
//! Most toggles are workarounds and debugging aids. A few take away a guarantee WebGPU makes
//! (validation, bounds-checked shaders, zeroed memory): with them on (or, for some, off), a
//! mistake in the program is no longer an error but undefined behaviour. Those can be set only
//! through the `unsafe` [`Toggles::enable_unsafe`] and [`Toggles::disable_unsafe`]; given to
//! [`Toggles::enable`] or [`Toggles::disable`], they make the request fail with
//! [`Error::UnsafeToggle`].

use std::borrow::Cow;
use std::ffi::{CString, c_char};
use std::fmt;

use dawn_sys::{WGPUChainedStruct, WGPUDawnTogglesDescriptor, WGPUSType};

use crate::error::{Error, Result};

/// Toggles that turn a misuse into undefined behaviour when forced on.
const UNSAFE_TO_ENABLE: &[&str] = &[
    // Dawn stops refusing entry points and parameter combinations it does not yet consider
    // secure, and offers experimental features (subgroup matrices among them) whose validation
    // is incomplete. Honoured at every stage: instance, adapter and device.
    "allow_unsafe_apis",
    // Invalid calls reach the driver: out-of-range copies and bindings, submits using mapped or
    // destroyed buffers (the GPU then writes memory the host reads, or that is freed).
    "skip_validation",
    // Shaders' out-of-bounds accesses are no longer clamped: they read and write other memory.
    "disable_robustness",
    // Tint's clamping is dropped in favour of the driver's robustness, which the adapter may not
    // have (Dawn enables these only where it does).
    "vulkan_use_buffer_robust_access_2",
    "vulkan_use_image_robust_access_2",
    "vulkan_use_cooperative_matrix_robust_access",
    // The stride of cooperative-matrix loads and stores is read in another unit than the one
    // the driver uses (Dawn sets it per driver): the accesses leave the range robustness checked.
    "vulkan_cooperative_matrix_stride_is_matrix_elements",
    // Workgroup memory starts with whatever an earlier workgroup (or process) left there.
    "disable_workgroup_init",
    // Integer division or remainder by zero (and MIN / -1) become undefined in the driver.
    "disable_polyfills_on_integer_div_and_mod",
    // Buffers mapped at creation are not zeroed: old memory of other resources shows through.
    "disable_lazy_clear_for_mapped_at_creation_buffer",
    // Dawn's backend waits then run without the device lock, which only some backends support.
    "wait_is_thread_safe",
    // Copies between buffers and textures skip alignments the driver may need (D3D12).
    "d3d12_relax_buffer_texture_copy_pitch_and_offset_alignment",
    // An imported image larger than its memory is no longer refused (Android).
    "ignore_imported_ahardwarebuffer_vulkan_image_size",
];

/// Toggles that turn a misuse into undefined behaviour when forced off.
const UNSAFE_TO_DISABLE: &[&str] = &[
    // New resources are not zeroed: reading before writing sees other resources' old memory.
    "lazy_clear_resource_on_first_use",
    // As when forced on: on a driver that needs it, strides are read in the wrong unit.
    "vulkan_cooperative_matrix_stride_is_matrix_elements",
];

/// A toggle name as Dawn would match it, for comparing with the lists above whatever its case
/// or separators.
fn normalized(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '\0')
        .map(|c| {
            if c == '-' || c == ' ' {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// Where a toggle belongs: Dawn reads each toggle at one stage (an instance's, an adapter's or a
/// device's descriptor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ToggleStage {
    /// Set on the instance ([`crate::InstanceDescriptor::toggles`]).
    Instance,
    /// Set when requesting the adapter ([`crate::RequestAdapterOptions::toggles`]).
    Adapter,
    /// Set when requesting the device ([`crate::DeviceDescriptor::toggles`]).
    Device,
}

impl fmt::Display for ToggleStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToggleStage::Instance => "instance",
            ToggleStage::Adapter => "adapter",
            ToggleStage::Device => "device",
        })
    }
}

/// One Dawn toggle, by name. The constants cover the ones this project relies on; any other
/// name Dawn knows works too (`Toggle::new("dump_shaders")`). Dawn ignores a name it does not
/// know without a word: [`Toggle::stage`] says whether it knows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Toggle(Cow<'static, str>);

impl Toggle {
    /// Instance: exposes experimental features such as subgroup matrices. Unsafe to enable
    /// ([`Toggles::enable_unsafe`]; [`crate::InstanceDescriptor::allow_unsafe_apis`]).
    pub const ALLOW_UNSAFE_APIS: Toggle = Toggle::from_static("allow_unsafe_apis");
    /// Adapter: lets Dawn expose `ShaderF16` (and f16 subgroup-matrix configs) on NVIDIA Vulkan.
    pub const VULKAN_ENABLE_F16_ON_NVIDIA: Toggle = Toggle::from_static("vulkan_enable_f16_on_nvidia");
    /// Adapter: compile for the Vulkan memory model (subgroup matrices on Vulkan need it).
    pub const USE_VULKAN_MEMORY_MODEL: Toggle = Toggle::from_static("use_vulkan_memory_model");
    /// Device: skip WebGPU validation of API calls. Unsafe to enable
    /// ([`Toggles::enable_unsafe`]).
    pub const SKIP_VALIDATION: Toggle = Toggle::from_static("skip_validation");
    /// Device: no bounds clamping of shader memory accesses. Unsafe to enable
    /// ([`Toggles::enable_unsafe`]).
    pub const DISABLE_ROBUSTNESS: Toggle = Toggle::from_static("disable_robustness");
    /// Device: no zero-initialisation of workgroup memory. Unsafe to enable
    /// ([`Toggles::enable_unsafe`]).
    pub const DISABLE_WORKGROUP_INIT: Toggle = Toggle::from_static("disable_workgroup_init");
    /// Device: no polyfills for integer division and modulo. Unsafe to enable
    /// ([`Toggles::enable_unsafe`]).
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

    /// The stage Dawn reads this toggle at, or `None` for a name Dawn does not know (which it
    /// would ignore). Names match exactly, as in Dawn (`skip_validation`, not `SKIP_VALIDATION`).
    /// The list is that of the Dawn revision this crate was written against (see the README);
    /// a newer Dawn may know more.
    pub fn stage(&self) -> Option<ToggleStage> {
        crate::toggle_names::KNOWN
            .iter()
            .find(|(name, _)| *name == self.name())
            .map(|&(_, stage)| stage)
    }

    /// Whether Dawn knows this toggle ([`Toggle::stage`] is `Some`).
    pub fn is_known(&self) -> bool {
        self.stage().is_some()
    }

    /// Whether forcing this toggle on removes a WebGPU guarantee (so needs
    /// [`Toggles::enable_unsafe`]).
    pub fn is_unsafe_to_enable(&self) -> bool {
        UNSAFE_TO_ENABLE.contains(&normalized(self.name()).as_str())
    }

    /// Whether forcing this toggle off removes a WebGPU guarantee (so needs
    /// [`Toggles::disable_unsafe`]).
    pub fn is_unsafe_to_disable(&self) -> bool {
        UNSAFE_TO_DISABLE.contains(&normalized(self.name()).as_str())
    }
}

impl fmt::Display for Toggle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Toggles to force on and to force off.
///
/// The public lists take only toggles that keep WebGPU's guarantees; the others go through
/// [`Toggles::enable_unsafe`] / [`Toggles::disable_unsafe`], whose callers promise what the
/// toggle no longer checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Toggles {
    /// Toggles to force on. One that [`Toggle::is_unsafe_to_enable`] makes the request fail with
    /// [`Error::UnsafeToggle`].
    pub enabled: Vec<Toggle>,
    /// Toggles to force off. One that [`Toggle::is_unsafe_to_disable`] makes the request fail
    /// with [`Error::UnsafeToggle`].
    pub disabled: Vec<Toggle>,
    /// Forced on through `enable_unsafe`.
    unsafe_enabled: Vec<Toggle>,
    /// Forced off through `disable_unsafe`.
    unsafe_disabled: Vec<Toggle>,
}

impl Toggles {
    /// No toggles.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a toggle to force on. A toggle that removes a WebGPU guarantee
    /// ([`Toggle::is_unsafe_to_enable`]) is refused when the toggles are used, with
    /// [`Error::UnsafeToggle`]; it needs [`Toggles::enable_unsafe`].
    pub fn enable(mut self, toggle: Toggle) -> Self {
        self.enabled.push(toggle);
        self
    }

    /// Adds a toggle to force off. A toggle whose absence removes a WebGPU guarantee
    /// ([`Toggle::is_unsafe_to_disable`]) is refused when the toggles are used, with
    /// [`Error::UnsafeToggle`]; it needs [`Toggles::disable_unsafe`].
    pub fn disable(mut self, toggle: Toggle) -> Self {
        self.disabled.push(toggle);
        self
    }

    /// Adds a toggle to force on, including one that removes a WebGPU guarantee
    /// ([`Toggle::ALLOW_UNSAFE_APIS`], [`Toggle::SKIP_VALIDATION`], [`Toggle::DISABLE_ROBUSTNESS`],
    /// [`Toggle::DISABLE_WORKGROUP_INIT`], [`Toggle::DISABLE_POLYFILLS_ON_INTEGER_DIV_AND_MOD`], …;
    /// see [`Toggle::is_unsafe_to_enable`]).
    ///
    /// # Safety
    /// With such a toggle, Dawn no longer turns the corresponding mistakes into errors; they
    /// become undefined behaviour of the whole process (the GPU reading or writing memory it
    /// does not own, including host memory a [`crate::BufferMapping`] lends out). For every
    /// instance, adapter or device created with these toggles, the caller promises, for as long
    /// as it (or anything made from it) is used, by any code that can reach it, that:
    /// - `allow_unsafe_apis`: the entry points, parameter combinations and experimental
    ///   features it unlocks (subgroup matrices, among others) are used only as their
    ///   specifications define them: subgroup-matrix operations with a config the adapter
    ///   reports, in subgroup-uniform control flow, loading and storing inside the bound arrays;
    ///   nothing Dawn would refuse without the toggle is relied on to be refused;
    /// - `skip_validation`: every call would pass WebGPU's validation: copies, bindings and
    ///   dispatches stay inside their buffers and usages, no submitted work uses a buffer that
    ///   is mapped or destroyed, or runs while one it uses gets mapped, and no object whose
    ///   creation failed is used (with [`crate::ErrorChecking::Deferred`] such an object comes
    ///   back as if valid: use [`crate::ErrorChecking::EveryCall`]);
    /// - `disable_robustness` (and the `vulkan_use_*_robust_access*` toggles on adapters without
    ///   the matching driver robustness): no shader reads or writes outside the buffer range
    ///   bound to it;
    /// - `vulkan_cooperative_matrix_stride_is_matrix_elements`: the driver reads
    ///   cooperative-matrix strides in matrix elements (or no shader uses subgroup matrices);
    /// - `disable_workgroup_init`: no shader reads workgroup memory it has not written;
    /// - `disable_polyfills_on_integer_div_and_mod`: no shader divides an integer by zero, or
    ///   the most negative integer by -1;
    /// - `disable_lazy_clear_for_mapped_at_creation_buffer`: nothing reads bytes of a buffer
    ///   mapped at creation that were not written first;
    /// - `wait_is_thread_safe`: the backend's waits are thread-safe without the device lock;
    /// - `d3d12_relax_buffer_texture_copy_pitch_and_offset_alignment`: the driver accepts
    ///   unaligned buffer-texture copies; `ignore_imported_ahardwarebuffer_vulkan_image_size`:
    ///   every imported image fits its memory.
    ///
    /// Safe toggles may be given here too; they behave as with [`Toggles::enable`].
    pub unsafe fn enable_unsafe(mut self, toggle: Toggle) -> Self {
        self.unsafe_enabled.push(toggle);
        self
    }

    /// Adds a toggle to force off, including one whose absence removes a WebGPU guarantee (see
    /// [`Toggle::is_unsafe_to_disable`]).
    ///
    /// # Safety
    /// - `lazy_clear_resource_on_first_use`: new buffers are no longer zeroed, so the caller
    ///   promises that neither the GPU nor the host (through a mapping or a read-back) reads any
    ///   byte of a buffer before it was written.
    /// - `vulkan_cooperative_matrix_stride_is_matrix_elements`: the driver reads
    ///   cooperative-matrix strides in pointee elements (or no shader uses subgroup matrices).
    ///
    /// Safe toggles may be given here too; they behave as with [`Toggles::disable`].
    pub unsafe fn disable_unsafe(mut self, toggle: Toggle) -> Self {
        self.unsafe_disabled.push(toggle);
        self
    }

    /// Whether `toggle` is forced on, through either door.
    pub fn contains_enabled(&self, toggle: &Toggle) -> bool {
        self.enabled.contains(toggle) || self.unsafe_enabled.contains(toggle)
    }

    /// Whether no toggle is forced either way.
    pub fn is_empty(&self) -> bool {
        self.enabled.is_empty()
            && self.disabled.is_empty()
            && self.unsafe_enabled.is_empty()
            && self.unsafe_disabled.is_empty()
    }

    /// Fails with [`Error::UnsafeToggle`] if a toggle that removes a WebGPU guarantee was given
    /// through the safe lists ([`Toggles::enable`], [`Toggles::disable`] or the public fields),
    /// and with [`Error::InvalidArgument`] for a name with a NUL byte.
    pub fn check(&self) -> Result<()> {
        let mut all = self
            .enabled
            .iter()
            .chain(&self.disabled)
            .chain(&self.unsafe_enabled)
            .chain(&self.unsafe_disabled);
        if let Some(bad) = all.find(|t| t.name().contains('\0')) {
            return Err(Error::InvalidArgument(format!(
                "toggle name {:?} has a NUL byte",
                bad.name()
            )));
        }
        if let Some(bad) = self.enabled.iter().find(|t| t.is_unsafe_to_enable()) {
            return Err(Error::UnsafeToggle(format!(
                "enabling `{bad}` removes a WebGPU safety guarantee; use the unsafe `Toggles::enable_unsafe`"
            )));
        }
        if let Some(bad) = self.disabled.iter().find(|t| t.is_unsafe_to_disable()) {
            return Err(Error::UnsafeToggle(format!(
                "disabling `{bad}` removes a WebGPU safety guarantee; use the unsafe `Toggles::disable_unsafe`"
            )));
        }
        Ok(())
    }

    /// The C descriptor, with storage that must stay alive (and unmoved) while Dawn reads it.
    /// Fails as [`Toggles::check`] does.
    pub(crate) fn to_raw(&self) -> Result<RawToggles> {
        self.check()?;
        let names = |lists: [&[Toggle]; 2]| -> Vec<CString> {
            lists
                .into_iter()
                .flatten()
                // `check` refused names with a NUL byte.
                .filter_map(|t| CString::new(t.name()).ok())
                .collect()
        };
        let enabled = names([&self.enabled, &self.unsafe_enabled]);
        let disabled = names([&self.disabled, &self.unsafe_disabled]);
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
        Ok(RawToggles {
            _enabled: enabled,
            _disabled: disabled,
            _enabled_ptrs: enabled_ptrs,
            _disabled_ptrs: disabled_ptrs,
            descriptor,
        })
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
