//! Devices: creation with features, limits and toggles; loss and uncaptured errors delivered as
//! Rust values; error scopes.

use std::ffi::c_void;
use std::sync::Arc;
use std::time::Duration;

use dawn_sys as sys;
use parking_lot::Mutex;

use crate::adapter::Adapter;
use crate::error::{DeviceLostReason, Error, Result};
use crate::future::{self, GpuFuture};
use crate::handle::{device_child_is_thread_safe, handle};
use crate::instance::Instance;
use crate::queue::Queue;
use crate::strings;
use crate::toggles::{RawToggles, Toggles};
use crate::types::{Feature, Limits};

handle!(
    /// The raw device reference held by [`Device`].
    RawDevice,
    sys::WGPUDevice,
    sys::wgpuDeviceAddRef,
    sys::wgpuDeviceRelease
);
// The device: object creation, error scopes, destroy and getters.
device_child_is_thread_safe!(RawDevice);

/// A callback receiving errors as values: uncaptured errors, or the loss of the device.
pub type ErrorCallback = Arc<dyn Fn(Error) + Send + Sync>;

/// Which limits a device asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RequiredLimits {
    /// WebGPU's defaults.
    #[default]
    Default,
    /// Everything the adapter offers (what GPU compute usually wants).
    AdapterMaximum,
    /// These limits.
    Custom(Limits),
}

/// How long a device's own waits take at most unless its descriptor says otherwise
/// ([`DeviceDescriptor::wait_timeout`]).
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// What to create a device with.
#[derive(Clone)]
pub struct DeviceDescriptor {
    /// A name for debugging and error messages.
    pub label: Option<String>,
    /// Features to enable; `ImplicitDeviceSynchronization` is added automatically.
    pub required_features: Vec<Feature>,
    /// The limits to ask for (WebGPU's defaults unless set).
    pub required_limits: RequiredLimits,
    /// Device toggles, for example [`crate::Toggle::SKIP_VALIDATION`].
    pub toggles: Toggles,
    /// Called with each error no error scope caught. Errors are also kept for
    /// [`Device::take_uncaptured_errors`] either way.
    pub on_uncaptured_error: Option<ErrorCallback>,
    /// Called once when the device is lost, with an [`Error::DeviceLost`].
    pub on_device_lost: Option<ErrorCallback>,
    /// When errors of frequent calls (buffers, bind groups, finishing command buffers) are
    /// reported; see [`ErrorChecking`].
    pub error_checking: ErrorChecking,
    /// How long the waits this crate makes on its own take at most: the error scopes around
    /// each checked creation, and a shader's compilation messages. Dawn answers them at once on
    /// its native backends; one that does not come in time is [`Error::Timeout`], not a hang.
    /// Default: [`DEFAULT_WAIT_TIMEOUT`].
    pub wait_timeout: Duration,
}

impl Default for DeviceDescriptor {
    fn default() -> Self {
        DeviceDescriptor {
            label: None,
            required_features: Vec::new(),
            required_limits: RequiredLimits::default(),
            toggles: Toggles::default(),
            on_uncaptured_error: None,
            on_device_lost: None,
            error_checking: ErrorChecking::default(),
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
        }
    }
}

/// When Dawn's errors for the frequent calls (creating buffers and bind groups, finishing
/// command buffers) come back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ErrorChecking {
    /// Each call returns its own errors (it waits on error scopes: a few microseconds).
    #[default]
    EveryCall,
    /// Calls return at once; their errors arrive as uncaptured errors, read with
    /// [`Device::take_uncaptured_errors`] (and reported by [`Device::synchronize`]). For hot
    /// paths. Shader modules, pipelines and layouts are always checked at creation.
    ///
    /// A failed call then returns an invalid object as if it were valid. With validation on,
    /// its uses fail too; with `skip_validation` (see [`crate::Toggles::enable_unsafe`]) they
    /// reach the driver, so a device with that toggle should check every call.
    Deferred,
}

impl std::fmt::Debug for DeviceDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceDescriptor")
            .field("label", &self.label)
            .field("required_features", &self.required_features)
            .field("required_limits", &self.required_limits)
            .field("toggles", &self.toggles)
            .field("error_checking", &self.error_checking)
            .field("wait_timeout", &self.wait_timeout)
            .finish_non_exhaustive()
    }
}

impl DeviceDescriptor {
    /// Asks for every limit the adapter offers.
    pub fn with_adapter_limits(mut self) -> Self {
        self.required_limits = RequiredLimits::AdapterMaximum;
        self
    }

    /// Adds a feature.
    pub fn with_feature(mut self, feature: Feature) -> Self {
        self.required_features.push(feature);
        self
    }

    /// Sets the device toggles.
    pub fn with_toggles(mut self, toggles: Toggles) -> Self {
        self.toggles = toggles;
        self
    }
}

/// State shared by a device's clones and its callbacks.
pub(crate) struct DeviceShared {
    lost: Mutex<Option<Error>>,
    uncaptured: Mutex<Vec<Error>>,
    on_uncaptured_error: Option<ErrorCallback>,
    on_device_lost: Option<ErrorCallback>,
    /// Whether `destroy` was called, and how many host views of buffer memory are alive. One
    /// lock for both, so that taking a view and destroying the device cannot interleave.
    lifecycle: Mutex<Lifecycle>,
    error_checking: ErrorChecking,
    /// [`DeviceDescriptor::wait_timeout`].
    wait_timeout: Duration,
}

#[derive(Debug, Default)]
struct Lifecycle {
    /// Set (for good) by the first `Device::destroy` that goes ahead.
    destroyed: bool,
    /// Live [`HostAccess`] tokens: buffer mappings, and buffers being filled at creation.
    host_views: usize,
}

/// Proof that the device will not be destroyed (by [`Device::destroy`]) while this lives: held by
/// everything that lends out host memory of a buffer, which `wgpuDeviceDestroy` would unmap.
#[derive(Debug)]
pub(crate) struct HostAccess {
    shared: Arc<DeviceShared>,
}

impl DeviceShared {
    /// Takes a [`HostAccess`] token, or fails if the device was destroyed. Checking and counting
    /// happen under one lock, which `Device::destroy` also takes: either the token is counted
    /// before destroy looks (and destroy is refused), or destroy has started (and this fails).
    pub(crate) fn host_access(self: &Arc<Self>) -> Result<HostAccess> {
        let mut lifecycle = self.lifecycle.lock();
        if lifecycle.destroyed {
            return Err(Error::DeviceLost {
                reason: DeviceLostReason::Destroyed,
                message: "the device was destroyed".into(),
            });
        }
        lifecycle.host_views += 1;
        Ok(HostAccess {
            shared: Arc::clone(self),
        })
    }
}

impl Drop for HostAccess {
    fn drop(&mut self) {
        self.shared.lifecycle.lock().host_views -= 1;
    }
}

impl std::fmt::Debug for DeviceShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceShared")
            .field("lost", &*self.lost.lock())
            .finish_non_exhaustive()
    }
}

/// A logical device. Cheap to clone; clones share the device.
#[derive(Clone)]
pub struct Device {
    raw: RawDevice,
    shared: Arc<DeviceShared>,
    adapter: Adapter,
    queue: Queue,
    limits: Limits,
    features: Arc<[Feature]>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("raw", &self.raw).finish_non_exhaustive()
    }
}

/// A device request in flight: what the request callback needs to build the [`Device`].
pub(crate) struct PendingDevice {
    adapter: Adapter,
    shared: Arc<DeviceShared>,
}

/// The C descriptor of a device request, with the storage it points into.
pub(crate) struct PreparedDevice {
    _toggles: RawToggles,
    _features: Vec<sys::WGPUFeatureName>,
    _limits: Box<sys::WGPULimits>,
    _label: Option<String>,
    descriptor: Box<sys::WGPUDeviceDescriptor>,
}

impl PreparedDevice {
    pub(crate) fn descriptor(&mut self) -> *const sys::WGPUDeviceDescriptor {
        &*self.descriptor
    }
}

impl PendingDevice {
    pub(crate) fn new(adapter: Adapter, desc: &DeviceDescriptor) -> Arc<Self> {
        let shared = Arc::new(DeviceShared {
            lost: Mutex::new(None),
            uncaptured: Mutex::new(Vec::new()),
            on_uncaptured_error: desc.on_uncaptured_error.clone(),
            on_device_lost: desc.on_device_lost.clone(),
            lifecycle: Mutex::new(Lifecycle::default()),
            error_checking: desc.error_checking,
            wait_timeout: desc.wait_timeout,
        });
        Arc::new(PendingDevice { adapter, shared })
    }

    /// The C descriptor of `desc`; fails for toggles given through the wrong door
    /// ([`Toggles::check`]).
    pub(crate) fn prepare(&self, desc: &DeviceDescriptor) -> Result<PreparedDevice> {
        let mut toggles = desc.toggles.to_raw()?;
        let mut features: Vec<sys::WGPUFeatureName> = desc.required_features.iter().map(|f| f.0).collect();
        features.push(Feature::IMPLICIT_DEVICE_SYNCHRONIZATION.0);
        features.sort_by_key(|f| f.0);
        features.dedup();
        let limits = Box::new(match desc.required_limits {
            RequiredLimits::Default => sys::WGPULimits::default(),
            RequiredLimits::AdapterMaximum => self.adapter.limits().to_raw(),
            RequiredLimits::Custom(limits) => limits.to_raw(),
        });
        let label = desc.label.clone();
        // Dawn keeps a reference to the shared state for the device-lost callback (reclaimed
        // there, called exactly once) and borrows it for uncaptured errors, which stop once the
        // device is lost.
        let lost_data = Arc::into_raw(Arc::clone(&self.shared)).cast_mut().cast();
        let error_data = Arc::as_ptr(&self.shared).cast_mut().cast();
        let descriptor = Box::new(sys::WGPUDeviceDescriptor {
            nextInChain: if desc.toggles.is_empty() {
                std::ptr::null_mut()
            } else {
                toggles.chain()
            },
            label: strings::to_view(label.as_deref()),
            requiredFeatureCount: features.len(),
            requiredFeatures: features.as_ptr(),
            requiredLimits: if desc.required_limits == RequiredLimits::Default {
                std::ptr::null()
            } else {
                &*limits
            },
            defaultQueue: sys::WGPUQueueDescriptor::default(),
            deviceLostCallbackInfo: sys::WGPUDeviceLostCallbackInfo {
                nextInChain: std::ptr::null_mut(),
                mode: sys::WGPUCallbackMode::AllowSpontaneous,
                callback: Some(on_device_lost),
                userdata1: lost_data,
                userdata2: std::ptr::null_mut(),
            },
            uncapturedErrorCallbackInfo: sys::WGPUUncapturedErrorCallbackInfo {
                nextInChain: std::ptr::null_mut(),
                callback: Some(on_uncaptured_error),
                userdata1: error_data,
                userdata2: std::ptr::null_mut(),
            },
        });
        Ok(PreparedDevice {
            _toggles: toggles,
            _features: features,
            _limits: limits,
            _label: label,
            descriptor,
        })
    }
}

pub(crate) unsafe extern "C" fn on_request_device(
    status: sys::WGPURequestDeviceStatus,
    device: sys::WGPUDevice,
    message: sys::WGPUStringView,
    userdata1: *mut c_void,
    userdata2: *mut c_void,
) {
    future::guard(|| {
        // SAFETY: `userdata2` came from `Arc::into_raw` in `Adapter::request_device`; reclaimed once.
        let pending = unsafe { Arc::from_raw(userdata2.cast_const().cast::<PendingDevice>()) };
        let result = match status {
            sys::WGPURequestDeviceStatus::Success if !device.is_null() => Ok(Device::from_raw(device, &pending)),
            sys::WGPURequestDeviceStatus::CallbackCancelled => Err(Error::Cancelled(strings::from_view(message))),
            _ => Err(Error::RequestDevice(strings::from_view(message))),
        };
        // SAFETY: `userdata1` came from `future::slot::<Device>()`; Dawn calls this once.
        unsafe { future::complete(userdata1, result) };
    });
}

unsafe extern "C" fn on_device_lost(
    _device: *const sys::WGPUDevice,
    reason: sys::WGPUDeviceLostReason,
    message: sys::WGPUStringView,
    userdata1: *mut c_void,
    _userdata2: *mut c_void,
) {
    future::guard(|| {
        // SAFETY: the reference `PendingDevice::prepare` leaked for this callback; called once.
        let shared = unsafe { Arc::from_raw(userdata1.cast_const().cast::<DeviceShared>()) };
        let reason = match reason {
            sys::WGPUDeviceLostReason::Destroyed => DeviceLostReason::Destroyed,
            sys::WGPUDeviceLostReason::FailedCreation => DeviceLostReason::FailedCreation,
            sys::WGPUDeviceLostReason::CallbackCancelled => DeviceLostReason::CallbackCancelled,
            _ => DeviceLostReason::Unknown,
        };
        let error = Error::DeviceLost {
            reason,
            message: strings::from_view(message),
        };
        *shared.lost.lock() = Some(error.clone());
        if let Some(callback) = &shared.on_device_lost {
            callback(error);
        }
    });
}

unsafe extern "C" fn on_uncaptured_error(
    _device: *const sys::WGPUDevice,
    kind: sys::WGPUErrorType,
    message: sys::WGPUStringView,
    userdata1: *mut c_void,
    _userdata2: *mut c_void,
) {
    future::guard(|| {
        // SAFETY: the device-lost callback's reference keeps the shared state alive until that
        // callback runs, and Dawn reports uncaptured errors only while the device is alive (its
        // `HandleError` checks, under the device lock), that is before the loss is delivered.
        // Every `Device` handle holds a reference too.
        let shared = unsafe { &*userdata1.cast_const().cast::<DeviceShared>() };
        let Some(error) = error_from(kind, strings::from_view(message)) else {
            return;
        };
        // Logged first, so a panicking user callback cannot lose the error.
        shared.uncaptured.lock().push(error.clone());
        if let Some(callback) = &shared.on_uncaptured_error {
            callback(error);
        }
    });
}

/// The error of a Dawn error type and message (`None` for "no error").
pub(crate) fn error_from(kind: sys::WGPUErrorType, message: String) -> Option<Error> {
    match kind {
        sys::WGPUErrorType::NoError => None,
        sys::WGPUErrorType::Validation => Some(Error::Validation(message)),
        sys::WGPUErrorType::OutOfMemory => Some(Error::OutOfMemory(message)),
        sys::WGPUErrorType::Internal => Some(Error::Internal(message)),
        _ => Some(Error::Internal(format!("unknown error: {message}"))),
    }
}

/// Which errors an error scope catches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorFilter {
    /// Validation errors ([`Error::Validation`]).
    Validation,
    /// Out-of-memory errors ([`Error::OutOfMemory`]).
    OutOfMemory,
    /// Internal errors ([`Error::Internal`]).
    Internal,
}

impl Device {
    fn from_raw(raw: sys::WGPUDevice, pending: &PendingDevice) -> Self {
        let raw = RawDevice::from_raw(raw);
        let mut limits = sys::WGPULimits::default();
        // SAFETY: a valid device; `limits` is valid for writes.
        unsafe { sys::wgpuDeviceGetLimits(raw.as_raw(), &mut limits) };
        let mut supported = sys::WGPUSupportedFeatures::default();
        // SAFETY: as above; freed right after copying.
        let features: Arc<[Feature]> = unsafe {
            sys::wgpuDeviceGetFeatures(raw.as_raw(), &mut supported);
            let list = if supported.features.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(supported.features, supported.featureCount)
                    .iter()
                    .map(|&f| Feature(f))
                    .collect()
            };
            sys::wgpuSupportedFeaturesFreeMembers(supported);
            list.into()
        };
        // SAFETY: a valid device; GetQueue returns a new reference, which `Queue` takes.
        let queue = unsafe { sys::wgpuDeviceGetQueue(raw.as_raw()) };
        let queue = Queue::from_raw(queue);
        Device {
            raw,
            shared: Arc::clone(&pending.shared),
            adapter: pending.adapter.clone(),
            queue,
            limits: Limits::from_raw(&limits),
            features,
        }
    }

    /// The raw handle, owned by `self`.
    pub fn as_raw(&self) -> sys::WGPUDevice {
        self.raw.as_raw()
    }

    /// The adapter the device came from.
    pub fn adapter(&self) -> &Adapter {
        &self.adapter
    }

    /// The instance the device belongs to.
    pub fn instance(&self) -> &Instance {
        self.adapter.instance()
    }

    /// The device's queue.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// The limits the device was created with.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The enabled features.
    pub fn features(&self) -> &[Feature] {
        &self.features
    }

    /// Whether `feature` is enabled.
    pub fn has_feature(&self, feature: Feature) -> bool {
        self.features.contains(&feature)
    }

    /// When the frequent calls report their errors (as the device was created with).
    pub fn error_checking(&self) -> ErrorChecking {
        self.shared.error_checking
    }

    /// How long the device's own waits take at most (as the device was created with).
    pub fn wait_timeout(&self) -> Duration {
        self.shared.wait_timeout
    }

    /// The loss of the device, if it is lost.
    pub fn lost(&self) -> Option<Error> {
        self.shared.lost.lock().clone()
    }

    /// Fails with [`Error::DeviceLost`] if the device is lost.
    pub fn check_lost(&self) -> Result<()> {
        match self.lost() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Errors that no error scope caught since the last call.
    pub fn take_uncaptured_errors(&self) -> Vec<Error> {
        std::mem::take(&mut *self.shared.uncaptured.lock())
    }

    /// Destroys the device now: its resources are freed and every later use fails with
    /// [`Error::DeviceLost`]. Refused while a buffer of the device is mapped (destroying would
    /// unmap it under the mapping's slices); a map that resolves after this call fails.
    pub fn destroy(&self) -> Result<()> {
        {
            let mut lifecycle = self.shared.lifecycle.lock();
            if lifecycle.host_views > 0 {
                return Err(Error::InvalidArgument(
                    "cannot destroy a device while one of its buffers is mapped".into(),
                ));
            }
            // From here on no host view can be taken (`DeviceShared::host_access` fails), and
            // none exists: nothing can point into memory the destroy below frees.
            lifecycle.destroyed = true;
        }
        // SAFETY: a valid device; no host view of its buffers exists or can appear (above).
        unsafe { sys::wgpuDeviceDestroy(self.as_raw()) };
        // Destroy fires the lost callback; make sure it ran before we return.
        self.instance().process_events();
        Ok(())
    }

    /// Starts catching errors of one kind.
    pub fn push_error_scope(&self, filter: ErrorFilter) {
        let raw = match filter {
            ErrorFilter::Validation => sys::WGPUErrorFilter::Validation,
            ErrorFilter::OutOfMemory => sys::WGPUErrorFilter::OutOfMemory,
            ErrorFilter::Internal => sys::WGPUErrorFilter::Internal,
        };
        // SAFETY: a valid device.
        unsafe { sys::wgpuDevicePushErrorScope(self.as_raw(), raw) };
    }

    /// Ends the innermost error scope; resolves to the first error it caught, if any.
    /// Popping with no scope pushed resolves to an error.
    pub fn pop_error_scope(&self) -> GpuFuture<Option<Error>> {
        let (slot, userdata) = future::slot::<Option<Error>>();
        let callback = sys::WGPUPopErrorScopeCallbackInfo {
            nextInChain: std::ptr::null_mut(),
            mode: sys::WGPUCallbackMode::AllowSpontaneous,
            callback: Some(on_pop_error_scope),
            userdata1: userdata,
            userdata2: std::ptr::null_mut(),
        };
        // SAFETY: a valid device; the callback gets `userdata` back exactly once.
        let id = unsafe { sys::wgpuDevicePopErrorScope(self.as_raw(), callback) };
        GpuFuture::new(self.instance(), id, slot)
    }

    /// Runs `create` inside error scopes for every kind of error and returns its value, or the
    /// first error Dawn reported for it. This is how object creation returns errors as values.
    pub(crate) fn scoped<T>(&self, create: impl FnOnce() -> Result<T>) -> Result<T> {
        match self.capture(create)? {
            (value, None) => Ok(value),
            (_, Some(error)) => Err(error),
        }
    }

    /// Like [`Device::scoped`], but returns the value together with the error, for objects whose
    /// error state can still be queried (a shader module's compilation messages).
    pub(crate) fn capture<T>(&self, create: impl FnOnce() -> Result<T>) -> Result<(T, Option<Error>)> {
        self.check_lost()?;
        for filter in [ErrorFilter::Internal, ErrorFilter::OutOfMemory, ErrorFilter::Validation] {
            self.push_error_scope(filter);
        }
        let value = create();
        let mut first = None;
        for _ in 0..3 {
            match self.pop_error_scope().wait_timeout(self.shared.wait_timeout) {
                Ok(None) => {}
                Ok(Some(error)) | Err(error) => {
                    first.get_or_insert(error);
                }
            }
        }
        self.check_lost()?;
        Ok((value?, first))
    }

    /// Like [`Device::scoped`] for the frequent calls: without error scopes when the device
    /// defers its error checking.
    pub(crate) fn scoped_frequent<T>(&self, create: impl FnOnce() -> Result<T>) -> Result<T> {
        match self.shared.error_checking {
            ErrorChecking::EveryCall => self.scoped(create),
            ErrorChecking::Deferred => {
                self.check_lost()?;
                create()
            }
        }
    }

    pub(crate) fn shared(&self) -> &Arc<DeviceShared> {
        &self.shared
    }
}

unsafe extern "C" fn on_pop_error_scope(
    status: sys::WGPUPopErrorScopeStatus,
    kind: sys::WGPUErrorType,
    message: sys::WGPUStringView,
    userdata1: *mut c_void,
    _userdata2: *mut c_void,
) {
    future::guard(|| {
        let message = strings::from_view(message);
        let result = match status {
            sys::WGPUPopErrorScopeStatus::Success => Ok(error_from(kind, message)),
            sys::WGPUPopErrorScopeStatus::CallbackCancelled => Err(Error::Cancelled(message)),
            _ => Err(Error::Validation(format!("popping an error scope failed: {message}"))),
        };
        // SAFETY: `userdata1` came from `future::slot::<Option<Error>>()`; called once.
        unsafe { future::complete(userdata1, result) };
    });
}
