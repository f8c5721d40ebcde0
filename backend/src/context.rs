//! Device setup as ggml's WebGPU backend does it, and the capability probe.
//!
//! Instance: `allow_unsafe_apis` (subgroup matrices are experimental). Adapter:
//! `vulkan_enable_f16_on_nvidia` and `use_vulkan_memory_model`. Device: every adapter limit, and
//! the toggles that drop WebGPU's safety nets (`skip_validation`, `disable_robustness`,
//! `disable_workgroup_init`, `disable_polyfills_on_integer_div_and_mod`) with
//! `timestamp_quantization` off — unless [`ContextOptions::safe_mode`] keeps them on.

use std::sync::Arc;
use std::time::Duration;

use dawn::{
    Adapter, AdapterInfo, BackendType, ComponentType, Device, DeviceDescriptor, ErrorChecking, Feature, Instance,
    InstanceDescriptor, RequestAdapterOptions, SubgroupMatrixConfig, Toggle, Toggles,
};
use parking_lot::Mutex;

use crate::error::Result;
pub use crate::error::{AdapterChoice, ContextError};
use crate::exec::{DEFAULT_TIMEOUT, Stream, SubmitPolicy};
pub use crate::facts::Capabilities;
use crate::facts::{DeviceFacts, MatrixConfig};
use crate::kernel::PipelineCache;
use crate::memory::DeviceTensor;
use crate::scratch::Scratch;
use crate::tuning::{Overrides, Tuning};

/// How to set up the device, and how the context runs.
#[derive(Debug, Clone)]
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
    /// Changes to the planners' knobs, applied on top of the device's profile when the context
    /// is made ([`crate::tuning::profiles`]).
    pub tuning: Overrides,
    /// How long a wait for the device may take (synchronize, reads, a full queue) before it
    /// returns a timeout error (the work goes on).
    pub timeout: Duration,
    /// [`GpuContext::new`]: only an adapter of this Dawn backend. `None` lets Dawn choose, and
    /// refuses Dawn's Null backend, which computes nothing ([`check_default_adapter`]); naming
    /// `BackendType::Null` here is the one way to get it.
    pub backend: Option<BackendType>,
    /// [`GpuContext::new`]: the adapter to use, among those [`adapters`] lists (by its index
    /// there, or by a part of its device name); `None` lets Dawn choose. A choice that matches
    /// no adapter is [`ContextError::NoSuchAdapter`], naming those there are.
    pub adapter: Option<AdapterChoice>,
    /// Bytes the ops' scratch buffers may hold together (b quantized for the integer mat-vec,
    /// f16 copies for prefill, attention's split partials); an op that needs more is an error.
    /// `None`: each purpose's buffer up to the device's largest binding.
    /// [`GpuContext::release_scratch`] gives them back.
    pub scratch_budget: Option<u64>,
    /// How many dispatches the context's streams hand to the GPU at a time.
    pub submit: SubmitPolicy,
}

impl Default for ContextOptions {
    fn default() -> Self {
        ContextOptions {
            safe_mode: false,
            no_subgroup_matrix: false,
            force_config: None,
            enable_toggles: Vec::new(),
            disable_toggles: Vec::new(),
            tuning: Overrides::none(),
            timeout: DEFAULT_TIMEOUT,
            backend: None,
            adapter: None,
            scratch_budget: None,
            submit: SubmitPolicy::default(),
        }
    }
}

/// A device set up for the backend, with what runs on it: compiled kernels, scratch memory, the
/// tuning and a stream that batches the ops' dispatches until [`GpuContext::synchronize`].
///
/// Cloning is cheap and shares all of it. The device itself is reachable only through the
/// `unsafe` [`GpuContext::device`]: the backend's own device runs without Dawn's validation
/// and robustness, which only the backend's kernels and checks make safe.
#[derive(Debug, Clone)]
pub struct GpuContext {
    adapter: Adapter,
    pub(crate) device: Device,
    capabilities: Capabilities,
    facts: DeviceFacts,
    options: ContextOptions,
    /// The device's profile with `options.tuning` applied.
    tuning: Tuning,
    /// Compiled kernels of this device.
    kernels: Arc<PipelineCache>,
    /// The kernels of the ops' recent plans (an index into `kernels`).
    plan_kernels: Arc<crate::ops::PlanKernelMemos>,
    /// Scratch buffers the ops use between their own dispatches.
    scratch: Arc<Scratch>,
    /// The stream of the context's own ops (`GpuContext::mul_mat` and the like).
    pub(crate) stream: Arc<Mutex<Stream>>,
    /// The buffer [`GpuContext::read`] copies into and maps, kept from read to read.
    pub(crate) readback: Arc<Mutex<Option<dawn::Buffer>>>,
    /// Whether the context made its device with Dawn's validation and robustness on (safe mode,
    /// no toggle forced on); unknown, so false, for a device the caller made.
    pub(crate) robust: bool,
}

impl ContextOptions {
    /// Fails with [`ContextError::UnknownToggle`] for a toggle forced by name
    /// ([`ContextOptions::enable_toggles`], [`ContextOptions::disable_toggles`]) that Dawn does
    /// not know (`dawn::Toggle::stage`): Dawn ignores such a name, so a typo would go unnoticed.
    pub fn check_toggles(&self) -> Result<(), ContextError> {
        for name in self.enable_toggles.iter().chain(&self.disable_toggles) {
            if Toggle::new(name.as_str()).is_known() {
                continue;
            }
            // The name as Dawn spells toggles, and the known names it starts or ends.
            let spelt = name.trim().to_ascii_lowercase().replace(['-', ' '], "_");
            let near = dawn::Toggle::new(spelt.as_str());
            let hint = if near.is_known() {
                format!(" (Dawn spells it `{spelt}`)")
            } else {
                " (Dawn's names are lower case with underscores, e.g. `dump_shaders`; \
                 `src/dawn/native/Toggles.cpp` lists them)"
                    .to_owned()
            };
            return Err(ContextError::UnknownToggle {
                name: name.clone(),
                hint,
            });
        }
        Ok(())
    }
}

/// Waits for an adapter or device request, at most `timeout`: a driver that never answers is
/// [`ContextError::Timeout`] naming `what`, not a hang.
fn wait_request<T>(future: dawn::GpuFuture<T>, what: &'static str, timeout: Duration) -> Result<T, ContextError> {
    match future.wait_timeout(timeout) {
        Err(dawn::Error::Timeout(after)) => Err(ContextError::Timeout { what, after }),
        other => Ok(other?),
    }
}

/// The instance of [`GpuContext::new`]: unsafe APIs allowed, for subgroup matrices.
///
/// With [`device_toggles`], one of the two places where the backend vouches for settings that
/// remove WebGPU's guarantees; both promises are kept by the same checks.
fn backend_instance() -> dawn::Result<Instance> {
    // SAFETY: of what `allow_unsafe_apis` unlocks, the backend uses only the subgroup-matrix
    // feature, as its specification defines it: the kernels use the one config `pick_config`
    // took from those the adapter reports (or none), call the subgroup-matrix builtins in
    // subgroup-uniform control flow (whole workgroups run each tile loop the same number of
    // times), and load and store inside their bindings (the tensor layouts are checked against
    // their buffers as for `disable_robustness` in `device_toggles`). Nothing relies on Dawn
    // refusing another unsafe API: the backend calls none. The instance and its adapter are
    // reachable only through the `unsafe` `GpuContext::instance` and `GpuContext::adapter`
    // (and the device through the `unsafe` `GpuContext::device`), whose callers take this
    // promise on for whatever they make from them.
    let desc = unsafe { InstanceDescriptor::compute() };
    Instance::new(&desc)
}

/// The toggles that remove a WebGPU guarantee (`dawn::Toggles::enable_unsafe`) that the backend
/// may enable: it upholds what each stops Dawn from checking (see `device_toggles`).
const UPHELD_WHEN_ENABLED: &[&str] = &[
    "skip_validation",
    "disable_robustness",
    "disable_workgroup_init",
    "disable_polyfills_on_integer_div_and_mod",
    "disable_lazy_clear_for_mapped_at_creation_buffer",
];

/// The toggles whose absence removes a WebGPU guarantee (`dawn::Toggles::disable_unsafe`) that
/// the backend may disable (see `device_toggles`).
const UPHELD_WHEN_DISABLED: &[&str] = &["lazy_clear_resource_on_first_use"];

/// The mode's device toggles (upstream's unless [`ContextOptions::safe_mode`]), with the forced
/// ones of [`ContextOptions::enable_toggles`] / [`ContextOptions::disable_toggles`] on top.
///
/// The one place where the backend vouches for toggles that remove WebGPU's guarantees: every
/// toggle, the mode's and those forced by name (`backend-ops --toggle NAME`) alike, goes
/// through here, and only those listed in [`UPHELD_WHEN_ENABLED`] / [`UPHELD_WHEN_DISABLED`]
/// are vouched for; any other unsafe one makes the device request fail, and a name Dawn does not
/// know is refused ([`ContextOptions::check_toggles`]).
fn device_toggles(options: &ContextOptions) -> Result<Toggles, ContextError> {
    options.check_toggles()?;
    let (mut enable, mut disable): (Vec<Toggle>, Vec<Toggle>) = if options.safe_mode {
        (vec![], vec![])
    } else {
        (
            vec![
                Toggle::SKIP_VALIDATION,
                Toggle::DISABLE_ROBUSTNESS,
                Toggle::DISABLE_WORKGROUP_INIT,
                Toggle::DISABLE_POLYFILLS_ON_INTEGER_DIV_AND_MOD,
            ],
            vec![Toggle::TIMESTAMP_QUANTIZATION],
        )
    };
    for name in &options.enable_toggles {
        disable.retain(|t| t.name() != name);
        enable.push(Toggle::new(name.as_str()));
    }
    for name in &options.disable_toggles {
        enable.retain(|t| t.name() != name);
        disable.push(Toggle::new(name.as_str()));
    }
    // The backend vouches only for the toggles it upholds; any other goes through the safe door,
    // where an unsafe one is refused (`dawn::Error::UnsafeToggle`) when the device is requested.
    let (vouched_on, safe_on): (Vec<Toggle>, Vec<Toggle>) = enable
        .into_iter()
        .partition(|t| UPHELD_WHEN_ENABLED.contains(&t.name()));
    let (vouched_off, safe_off): (Vec<Toggle>, Vec<Toggle>) = disable
        .into_iter()
        .partition(|t| UPHELD_WHEN_DISABLED.contains(&t.name()));
    let mut toggles = Toggles::new();
    for toggle in safe_on {
        toggles = toggles.enable(toggle);
    }
    for toggle in safe_off {
        toggles = toggles.disable(toggle);
    }
    // SAFETY: the backend's device runs the backend's kernels, dispatched by its op encoders, and
    // they keep the promises of `Toggles::enable_unsafe` / `disable_unsafe` for each toggle
    // vouched for here:
    // - `disable_robustness`: no kernel access leaves its binding. Every tensor view is checked
    //   against its buffer before dispatch (`Layout::check_fits` in `DeviceTensor::view` and
    //   `memory::upload`), each binding covers the whole view and is capped at the buffer's end
    //   (`DeviceTensor::binding`), and the kernels index only elements inside the extents and
    //   strides the op encoders pass them from those same checked layouts.
    // - `skip_validation`: every call is one `dawn` and the backend check already (ranges,
    //   alignments, usages and limits in `dawn`; operand counts, parameter sizes and grid limits
    //   in `Stream::dispatch`); no submitted work uses a mapped or destroyed buffer (the backend
    //   maps only the staging buffers of `Device::read_buffer`, which no kernel binds, and
    //   destroys no buffer); and no object whose creation failed is used (the device checks
    //   every creation, `ErrorChecking::EveryCall`, so a failure is an error where it happens).
    // - `disable_workgroup_init`: the kernels write workgroup memory before reading it.
    // - `disable_polyfills_on_integer_div_and_mod`: the kernels divide only `u32`s (so never the
    //   most negative integer by -1), by tensor extents, block sizes and split counts, which the
    //   encoders pass non-zero.
    // - `disable_lazy_clear_for_mapped_at_creation_buffer`: buffers created mapped are written
    //   whole before use (`Device::create_buffer_init`).
    // - `lazy_clear_resource_on_first_use` off: no byte is read before it is written (inputs are
    //   uploaded whole, outputs poisoned before the kernel runs, kernels read inside the views).
    // Toggles forced by name (`backend-ops --toggle NAME`) get this promise only when listed in
    // `UPHELD_WHEN_ENABLED` / `UPHELD_WHEN_DISABLED`. The promise covers the backend's own use of
    // the device: the device is reachable only through the `unsafe` `GpuContext::device`, whose
    // callers take the promise on, and device tensors reach only kernels whose context checked
    // that their buffers belong to its device (`GpuContext::check_operands`), recorded only on a
    // stream of that same device (`GpuContext::check_stream`, and `Stream::dispatch` for every
    // binding).
    unsafe {
        for toggle in vouched_on {
            toggles = toggles.enable_unsafe(toggle);
        }
        for toggle in vouched_off {
            toggles = toggles.disable_unsafe(toggle);
        }
    }
    Ok(toggles)
}

/// The f16 subgroup-matrix config the kernels use on this adapter: the one forced by the
/// options, else the first the adapter reports; none when masked off or absent.
fn pick_config(
    info: &AdapterInfo,
    has_feature: bool,
    options: &ContextOptions,
) -> Result<Option<SubgroupMatrixConfig>, ContextError> {
    if options.no_subgroup_matrix || !has_feature {
        return Ok(None);
    }
    let f16 = |c: &&SubgroupMatrixConfig| c.component == ComponentType::F16;
    match options.force_config {
        Some((m, n, k)) => Ok(Some(
            *info
                .subgroup_matrix_configs
                .iter()
                .filter(f16)
                .find(|c| (c.m, c.n, c.k) == (m, n, k))
                .ok_or_else(|| {
                    let list: Vec<String> = info.subgroup_matrix_configs.iter().map(|c| c.to_string()).collect();
                    ContextError::NoSuchConfig(m, n, k, list.join(", "))
                })?,
        )),
        None => Ok(MatrixConfig::default_choice(&info.subgroup_matrix_configs).copied()),
    }
}

/// Whether the adapter [`GpuContext::new`] got may be used: Dawn's Null backend (what Dawn
/// falls back to without a driver: every call succeeds, nothing is computed, and timings are of
/// nothing) only when `requested` names it. Software adapters that do compute, such as lavapipe
/// (`AdapterInfo::is_software`), are accepted: they are slow, not wrong.
pub fn check_default_adapter(info: &AdapterInfo, requested: Option<BackendType>) -> Result<(), ContextError> {
    if info.is_null_backend() && requested != Some(BackendType::Null) {
        return Err(ContextError::NullBackend {
            device: info.device.clone(),
        });
    }
    Ok(())
}

/// The adapters the backend can run on, in a stable order ([`AdapterChoice::Index`] counts in
/// it): every backend and power preference Dawn offers, the fallback CPU adapter included, each
/// once. No `unsafe` is needed: the instance's unsafe APIs are the backend's own promise.
pub fn adapters() -> Result<Vec<AdapterInfo>, ContextError> {
    Ok(enumerate(&backend_instance()?).iter().map(Adapter::info).collect())
}

fn enumerate(instance: &Instance) -> Vec<Adapter> {
    instance.enumerate_adapters(&RequestAdapterOptions::compute().toggles)
}

/// The adapter `choice` names among `infos` (their index).
pub fn choose_adapter(infos: &[AdapterInfo], choice: &AdapterChoice) -> Result<usize, ContextError> {
    let found = match choice {
        AdapterChoice::Index(i) => (*i < infos.len()).then_some(*i),
        AdapterChoice::Name(name) => {
            let name = name.to_ascii_lowercase();
            infos.iter().position(|i| i.device.to_ascii_lowercase().contains(&name))
        }
    };
    found.ok_or_else(|| ContextError::NoSuchAdapter {
        choice: choice.clone(),
        known: if infos.is_empty() {
            "none".to_owned()
        } else {
            infos
                .iter()
                .enumerate()
                .map(|(i, a)| format!("#{i} {} ({:?}, {:?})", a.device, a.backend, a.adapter_type))
                .collect::<Vec<_>>()
                .join("; ")
        },
    })
}

impl GpuContext {
    /// Creates an instance, the default adapter and its device, set up as ggml's WebGPU backend
    /// sets up its own (see the module's documentation).
    ///
    /// Each request (the adapter, the device) waits at most [`ContextOptions::timeout`]
    /// ([`ContextError::Timeout`]); a toggle name Dawn does not know is refused first
    /// ([`ContextError::UnknownToggle`]). Dawn's Null backend is refused unless
    /// [`ContextOptions::backend`] names it ([`ContextError::NullBackend`]).
    pub fn new(options: ContextOptions) -> Result<GpuContext, ContextError> {
        options.check_toggles()?;
        let instance = backend_instance()?;
        if let Some(choice) = &options.adapter {
            let found = enumerate(&instance);
            let infos: Vec<AdapterInfo> = found.iter().map(Adapter::info).collect();
            let index = choose_adapter(&infos, choice)?;
            return GpuContext::with_adapter(&found[index], options);
        }
        let request = instance.request_adapter(&RequestAdapterOptions {
            backend: options.backend,
            ..RequestAdapterOptions::compute()
        });
        let adapter = wait_request(request, "the adapter request", options.timeout)?;
        check_default_adapter(&adapter.info(), options.backend)?;
        GpuContext::with_adapter(&adapter, options)
    }

    /// Creates the backend's device on an adapter the caller chose (from
    /// `Instance::enumerate_adapters`, or requested with its own options). The instance should
    /// allow unsafe APIs (the `unsafe` `InstanceDescriptor::compute`, whose promise the caller
    /// makes) for subgroup matrices to be offered.
    /// Dawn lets an adapter make one device: the adapter is spent afterwards.
    pub fn with_adapter(adapter: &Adapter, options: ContextOptions) -> Result<GpuContext, ContextError> {
        let info = adapter.info();
        let adapter_features = adapter.features();
        let has = |f: Feature| adapter_features.contains(&f);
        let subgroup_matrix = pick_config(&info, has(Feature::SUBGROUP_MATRIX), &options)?;
        let mut features = vec![];
        for f in [Feature::SHADER_F16, Feature::SUBGROUPS, Feature::TIMESTAMP_QUERY] {
            if has(f) {
                features.push(f);
            }
        }
        if subgroup_matrix.is_some() {
            features.push(Feature::SUBGROUP_MATRIX);
        }
        let toggles = device_toggles(&options)?;
        let desc = DeviceDescriptor {
            label: Some("ggml-dawn".into()),
            required_features: features,
            toggles,
            // Every creation is checked where it happens, in every mode: without validation, a
            // buffer, bind group or command buffer whose creation failed (out of memory) would
            // reach the driver through its next use as if it were valid (Dawn checks for error
            // objects only in its validation), so deferring the error would break the promise
            // of `skip_validation` below.
            error_checking: ErrorChecking::EveryCall,
            // The error scopes of every creation wait no longer than the context's other waits.
            wait_timeout: options.timeout,
            ..Default::default()
        }
        .with_adapter_limits();
        let device = wait_request(adapter.request_device(&desc), "the device request", options.timeout)?;
        let robust = options.safe_mode && options.enable_toggles.is_empty();
        GpuContext::assemble(adapter.clone(), device, info, subgroup_matrix, options, robust)
    }

    /// Runs the backend on a device the caller made, with the features and limits it has
    /// (`shader_f16`, `subgroups` and `subgroup_matrix` enable the fast paths). The device keeps
    /// the toggles it was made with: Dawn's validation stays on unless the caller switched it off
    /// itself. Of `options`, the device's own settings (`safe_mode`, the toggles) do not apply.
    pub fn from_device(device: Device, options: ContextOptions) -> Result<GpuContext, ContextError> {
        let adapter = device.adapter().clone();
        let info = adapter.info();
        let subgroup_matrix = pick_config(&info, device.has_feature(Feature::SUBGROUP_MATRIX), &options)?;
        GpuContext::assemble(adapter, device, info, subgroup_matrix, options, false)
    }

    fn assemble(
        adapter: Adapter,
        device: Device,
        info: AdapterInfo,
        subgroup_matrix: Option<SubgroupMatrixConfig>,
        options: ContextOptions,
        robust: bool,
    ) -> Result<GpuContext, ContextError> {
        let capabilities = Capabilities {
            limits: *device.limits(),
            features: device.features().to_vec(),
            adapter_features: adapter.features(),
            shader_f16: device.has_feature(Feature::SHADER_F16),
            subgroups: device.has_feature(Feature::SUBGROUPS),
            timestamp_query: device.has_feature(Feature::TIMESTAMP_QUERY),
            subgroup_matrix,
            info,
        };
        let facts = DeviceFacts::of(&capabilities);
        let tuning = Tuning::with_overrides(&facts, &options.tuning)?;
        let stream = Stream::with_policy(&device, options.timeout, options.submit)?;
        let scratch = Arc::new(Scratch::with_budget(options.scratch_budget));
        Ok(GpuContext {
            adapter,
            facts,
            tuning,
            device,
            capabilities,
            options,
            kernels: Arc::default(),
            plan_kernels: Arc::default(),
            scratch,
            stream: Arc::new(Mutex::new(stream)),
            readback: Arc::default(),
            robust,
        })
    }

    /// The same device, kernels, scratch and stream, planned with the device's profile and
    /// `overrides` (instead of the context's own).
    pub fn with_tuning(&self, overrides: Overrides) -> Result<GpuContext> {
        let mut ctx = self.clone();
        ctx.tuning = Tuning::with_overrides(&self.facts, &overrides)?;
        ctx.options.tuning = overrides;
        Ok(ctx)
    }

    /// The device.
    ///
    /// # Safety
    ///
    /// Unless the context was made with [`ContextOptions::safe_mode`] or
    /// [`GpuContext::from_device`], the device runs without Dawn's validation and robustness
    /// (and with the other toggles `backend-ops info` lists). The caller must keep, for all it
    /// does with the device, the promises of `dawn::Toggles::enable_unsafe` for each of those
    /// toggles: among them, never to destroy a buffer that submitted or recorded work uses, and
    /// never to submit a kernel that reads or writes outside its bindings or reads workgroup
    /// memory before writing it.
    pub unsafe fn device(&self) -> &Device {
        &self.device
    }

    /// The adapter the device belongs to (what it offers is in [`GpuContext::capabilities`]).
    ///
    /// # Safety
    ///
    /// The adapter's instance (`Adapter::instance`) allows Dawn's unsafe APIs when
    /// [`GpuContext::new`] made it: adapters and devices the caller makes from it carry the
    /// `allow_unsafe_apis` toggle, and the caller makes its promise for them (that of the
    /// `unsafe` `dawn::InstanceDescriptor::allow_unsafe_apis`).
    pub unsafe fn adapter(&self) -> &Adapter {
        &self.adapter
    }

    /// The instance of the adapter.
    ///
    /// # Safety
    ///
    /// As for [`GpuContext::adapter`]: the caller makes the promise of `allow_unsafe_apis` for
    /// every adapter and device it makes from the instance.
    pub unsafe fn instance(&self) -> &Instance {
        self.adapter.instance()
    }

    /// What the device can do.
    pub fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The device as the planners see it.
    pub fn facts(&self) -> DeviceFacts {
        self.facts
    }

    /// The options the context was made with.
    pub fn options(&self) -> &ContextOptions {
        &self.options
    }

    /// The planners' knobs: the device's profile with the context's overrides.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// A new stream on this device, whose waits take at most the context's timeout, for
    /// recording ops apart from the context's own stream (`ops::mul_mat::mul_mat` and the like).
    pub fn stream(&self) -> Result<Stream> {
        Stream::with_policy(&self.device, self.options.timeout, self.options.submit)
    }

    /// Kernels compiled so far on this device.
    pub fn compiled_kernels(&self) -> usize {
        self.kernels.len()
    }

    /// The time spent compiling this device's kernels so far (each is compiled on its first use
    /// and logged then, `log` target `ggml_dawn::kernel`).
    pub fn compile_time(&self) -> Duration {
        self.kernels.compile_time()
    }

    /// What the ops need of this context ([`crate::ops::Env`]), borrowed from it.
    pub fn env(&self) -> crate::ops::Env<'_> {
        crate::ops::Env::new(
            &self.device,
            &self.capabilities.limits,
            self.facts,
            &self.tuning,
            &self.kernels,
            &self.scratch,
            &self.plan_kernels,
        )
    }

    /// Bytes of scratch memory the context holds now.
    pub fn scratch_bytes(&self) -> u64 {
        self.scratch.held_bytes()
    }

    /// Gives the context's scratch buffers back to the device (work recorded or in flight keeps
    /// what it uses until it is done); the next op that needs scratch allocates it anew.
    pub fn release_scratch(&self) {
        self.scratch.release();
    }

    /// Refuses tensors whose buffer belongs to another device ([`crate::ops::Env`] says why).
    pub(crate) fn check_operands(&self, tensors: &[&DeviceTensor]) -> Result<()> {
        self.env().check_operands(tensors)
    }

    /// Refuses a stream of another device ([`crate::ops::Env`] says why).
    pub(crate) fn check_stream(&self, stream: &Stream) -> Result<()> {
        self.env().check_stream(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dawn::AdapterType;

    fn options(enable: &[&str], disable: &[&str]) -> ContextOptions {
        ContextOptions {
            enable_toggles: enable.iter().map(|s| s.to_string()).collect(),
            disable_toggles: disable.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_default_toggles_are_vouched_for() {
        device_toggles(&ContextOptions::default()).unwrap().check().unwrap();
        device_toggles(&ContextOptions {
            safe_mode: true,
            ..Default::default()
        })
        .unwrap()
        .check()
        .unwrap();
    }

    /// Dawn ignores a toggle name it does not know; the backend refuses it, naming it, before
    /// any adapter is requested.
    #[test]
    fn unknown_toggle_names_are_errors_naming_them() {
        for (enable, disable, name, hint) in [
            (&["dump_shaderz"][..], &[][..], "dump_shaderz", "lower case"),
            (&[], &["timestamp_quantisation"], "timestamp_quantisation", "lower case"),
            (&["Dump-Shaders"], &[], "Dump-Shaders", "`dump_shaders`"),
            (&[""], &[], "", "lower case"),
        ] {
            let opts = options(enable, disable);
            let err = device_toggles(&opts).unwrap_err();
            assert!(
                matches!(&err, ContextError::UnknownToggle { name: n, .. } if n == name),
                "{name}: {err}"
            );
            let text = err.to_string();
            assert!(text.contains(&format!("`{name}`")) && text.contains(hint), "{text}");
            let err = GpuContext::new(opts).unwrap_err();
            assert!(matches!(err, ContextError::UnknownToggle { .. }), "{err}");
        }
        options(&["dump_shaders"], &["timestamp_quantization"])
            .check_toggles()
            .unwrap();
    }

    /// The adapter and device requests are bounded by the context's timeout: a request that
    /// does not answer in time is `ContextError::Timeout`, naming it (Dawn answers lavapipe's at
    /// once, so here both succeed even with no time at all, or time out; neither hangs).
    #[test]
    fn requests_wait_at_most_the_timeout() {
        let instance = backend_instance().unwrap();
        let request = instance.request_adapter(&RequestAdapterOptions::compute());
        match wait_request(request, "the adapter request", Duration::ZERO) {
            Ok(_) => {}
            Err(ContextError::Timeout { what, after }) => {
                assert_eq!((what, after), ("the adapter request", Duration::ZERO))
            }
            Err(e) => panic!("{e}"),
        }
        let err = ContextError::Timeout {
            what: "the device request",
            after: Duration::from_secs(3),
        };
        assert_eq!(
            err.to_string(),
            "the device request timed out after 3s: the GPU driver does not answer"
        );
        let ctx = GpuContext::new(ContextOptions {
            timeout: Duration::from_secs(5),
            ..Default::default()
        })
        .unwrap();
        // SAFETY: only read.
        assert_eq!(unsafe { ctx.device() }.wait_timeout(), Duration::from_secs(5));
    }

    fn adapter(backend: BackendType, adapter_type: AdapterType, device: &str) -> AdapterInfo {
        AdapterInfo {
            vendor: String::new(),
            architecture: String::new(),
            device: device.into(),
            description: String::new(),
            backend,
            adapter_type,
            vendor_id: 0,
            device_id: 0,
            subgroup_min_size: 4,
            subgroup_max_size: 128,
            subgroup_matrix_configs: Vec::new(),
        }
    }

    /// Dawn's Null backend computes nothing: as the default adapter it is an error naming it;
    /// asked for by name, it is given. Software that computes (lavapipe) and GPUs are accepted.
    #[test]
    fn the_null_backend_is_refused_unless_named() {
        let null = adapter(BackendType::Null, AdapterType::Cpu, "Null backend");
        let err = check_default_adapter(&null, None).unwrap_err();
        assert!(matches!(&err, ContextError::NullBackend { device } if device == "Null backend"));
        assert!(err.to_string().contains("Null backend"), "{err}");
        assert!(check_default_adapter(&null, Some(BackendType::Vulkan)).is_err());
        check_default_adapter(&null, Some(BackendType::Null)).unwrap();
        let lavapipe = adapter(
            BackendType::Vulkan,
            AdapterType::Cpu,
            "llvmpipe (LLVM 19.1.7, 256 bits)",
        );
        assert!(lavapipe.is_software() && !lavapipe.is_null_backend());
        check_default_adapter(&lavapipe, None).unwrap();
        check_default_adapter(&adapter(BackendType::Vulkan, AdapterType::DiscreteGpu, "H100"), None).unwrap();
        // For real: the Null backend, asked for by name, makes a context that says what it is.
        match GpuContext::new(ContextOptions {
            backend: Some(BackendType::Null),
            ..Default::default()
        }) {
            Ok(ctx) => assert!(ctx.capabilities().info.is_null_backend()),
            // A Dawn built without it has no such adapter: an error, never another adapter.
            Err(e) => assert!(matches!(e, ContextError::Dawn(_)), "{e}"),
        }
    }

    #[test]
    fn toggles_forced_by_name_go_through_the_same_promise() {
        // Upheld by the backend: accepted, also in safe mode.
        let upheld = ContextOptions {
            safe_mode: true,
            ..options(&["disable_robustness"], &["lazy_clear_resource_on_first_use"])
        };
        device_toggles(&upheld).unwrap().check().unwrap();
        // Safe toggles: accepted.
        device_toggles(&options(&["dump_shaders"], &["skip_validation"]))
            .unwrap()
            .check()
            .unwrap();
        // Unsafe, and not upheld by the backend: refused when the device is requested.
        for name in [
            "wait_is_thread_safe",
            "vulkan_use_buffer_robust_access_2",
            "allow_unsafe_apis",
        ] {
            let err = device_toggles(&options(&[name], &[])).unwrap().check().unwrap_err();
            assert!(matches!(err, dawn::Error::UnsafeToggle(_)), "{name}: {err}");
        }
    }
}
