//! The instance: the entry point, owner of the event loop that completes every future.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::Duration;

use dawn_sys as sys;
use parking_lot::{Mutex, ReentrantMutex, ReentrantMutexGuard};

use crate::adapter::{Adapter, RequestAdapterOptions};
use crate::error::{Error, Result};
use crate::future::{self, GpuFuture};
use crate::handle::handle;
use crate::strings;
use crate::toggles::{Toggle, Toggles};
use crate::types::{BackendType, InstanceFeature, PowerPreference};

handle!(
    /// The raw instance reference held by [`Instance`].
    RawInstance,
    sys::WGPUInstance,
    sys::wgpuInstanceAddRef,
    sys::wgpuInstanceRelease
);

// SAFETY: Dawn does not lock instance calls (the instance has no device; dawn.json marks it
// "no autolock"), so each call this crate makes is accounted for: ProcessEvents and WaitAny are
// thread-safe in Dawn (its EventManager keeps its state behind a mutex, and ProcessEvents ticks
// each device under that device's lock); RequestAdapter is not (it connects backends lazily in
// unsynchronised members), and every call of it goes through `Instance::dawn_calls`, a lock all
// clones share. Creation happens before any sharing; AddRef/Release are atomic.
unsafe impl Send for RawInstance {}
// SAFETY: as for `Send`: `&self` reaches only the calls listed there, each thread-safe or locked.
unsafe impl Sync for RawInstance {}

/// What to create an instance with.
#[derive(Debug, Clone, Default)]
pub struct InstanceDescriptor {
    /// Instance toggles (adapter toggles go in [`RequestAdapterOptions`]). `allow_unsafe_apis`
    /// goes through [`InstanceDescriptor::allow_unsafe_apis`] (or [`Toggles::enable_unsafe`]).
    pub toggles: Toggles,
    /// Instance features besides `TimedWaitAny`, which is always enabled.
    pub features: Vec<InstanceFeature>,
}

impl InstanceDescriptor {
    /// Allows Dawn's unsafe APIs (the `allow_unsafe_apis` toggle): experimental features such
    /// as subgroup matrices are offered, and entry points Dawn does not yet consider secure are
    /// no longer refused.
    ///
    /// # Safety
    /// The caller makes the promise of [`Toggles::enable_unsafe`] for `allow_unsafe_apis`: for
    /// as long as the instance, its adapters and their devices are used, by any code that can
    /// reach them, what the toggle unlocks is used only as its specification defines it
    /// (subgroup-matrix operations with a config the adapter reports, in subgroup-uniform
    /// control flow, loading and storing inside the bound arrays), and nothing Dawn would refuse
    /// without the toggle is relied on to be refused.
    pub unsafe fn allow_unsafe_apis(mut self) -> Self {
        if !self.toggles.contains_enabled(&Toggle::ALLOW_UNSAFE_APIS) {
            // SAFETY: the caller makes this toggle's promise (this function's contract).
            self.toggles = unsafe { self.toggles.enable_unsafe(Toggle::ALLOW_UNSAFE_APIS) };
        }
        self
    }

    /// The descriptor GPU compute usually wants: unsafe APIs allowed (subgroup matrices).
    ///
    /// # Safety
    /// As for [`InstanceDescriptor::allow_unsafe_apis`].
    pub unsafe fn compute() -> Self {
        // SAFETY: the caller makes the promise (this function's contract).
        unsafe { InstanceDescriptor::default().allow_unsafe_apis() }
    }
}

/// A Dawn instance. Cheap to clone (clones share the instance).
#[derive(Clone, Debug)]
pub struct Instance {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    raw: RawInstance,
    pump: EventPump,
    /// Serialises the Dawn calls on the instance and its adapters that Dawn does not make
    /// thread-safe: requesting adapters (it connects backends and discovers physical devices
    /// lazily, in unsynchronised members of the instance) and requesting devices. Reentrant, so a
    /// callback Dawn runs inside one of these calls may make another on the same thread.
    dawn_calls: ReentrantMutex<()>,
}

impl Instance {
    /// Creates an instance. `TimedWaitAny` is always enabled: every blocking wait relies on it.
    pub fn new(desc: &InstanceDescriptor) -> Result<Instance> {
        let mut raw_toggles = desc.toggles.to_raw()?;
        let mut features: Vec<sys::WGPUInstanceFeatureName> = vec![sys::WGPUInstanceFeatureName::TimedWaitAny];
        features.extend(desc.features.iter().map(|f| f.to_raw()));
        features.dedup();
        let descriptor = sys::WGPUInstanceDescriptor {
            nextInChain: raw_toggles.chain(),
            requiredFeatureCount: features.len(),
            requiredFeatures: features.as_ptr(),
            requiredLimits: std::ptr::null(),
        };
        // SAFETY: the descriptor and all it points to live until the call returns.
        let raw = unsafe { sys::wgpuCreateInstance(&descriptor) };
        if raw.is_null() {
            return Err(Error::Internal(
                "wgpuCreateInstance failed (an unsupported instance feature?)".into(),
            ));
        }
        Ok(Instance {
            inner: Arc::new(Inner {
                raw: RawInstance::from_raw(raw),
                pump: EventPump::default(),
                dawn_calls: ReentrantMutex::new(()),
            }),
        })
    }

    /// The raw handle, owned by `self`.
    pub fn as_raw(&self) -> sys::WGPUInstance {
        self.inner.raw.as_raw()
    }

    /// Requests an adapter matching `options`.
    pub fn request_adapter(&self, options: &RequestAdapterOptions) -> GpuFuture<Adapter> {
        let mut raw_toggles = match options.toggles.to_raw() {
            Ok(raw) => raw,
            Err(error) => return GpuFuture::ready(self, Err(error)),
        };
        let raw_options = sys::WGPURequestAdapterOptions {
            nextInChain: if options.toggles.is_empty() {
                std::ptr::null_mut()
            } else {
                raw_toggles.chain()
            },
            featureLevel: sys::WGPUFeatureLevel::Core,
            powerPreference: options.power_preference.to_raw(),
            forceFallbackAdapter: u32::from(options.force_fallback_adapter),
            backendType: options
                .backend
                .map_or(sys::WGPUBackendType::Undefined, BackendType::to_raw),
            compatibleSurface: std::ptr::null_mut(),
        };
        let (slot, userdata) = future::slot::<Adapter>();
        let callback = sys::WGPURequestAdapterCallbackInfo {
            nextInChain: std::ptr::null_mut(),
            mode: sys::WGPUCallbackMode::AllowSpontaneous,
            callback: Some(on_adapter),
            userdata1: userdata,
            userdata2: Arc::into_raw(Arc::clone(&self.inner)).cast_mut().cast(),
        };
        let _serial = self.dawn_calls();
        // SAFETY: the options live until the call returns; the callback gets both userdata
        // pointers back exactly once; `_serial` keeps other threads out of the instance's
        // unsynchronised state (its lazily connected backends) during the call.
        let id = unsafe { sys::wgpuInstanceRequestAdapter(self.as_raw(), &raw_options, callback) };
        GpuFuture::new(self, id, slot)
    }

    /// Every adapter Dawn offers: one request per backend and power preference, plus the
    /// fallback (CPU) adapter, without duplicates. WebGPU has no enumeration call; this is it.
    pub fn enumerate_adapters(&self, toggles: &Toggles) -> Vec<Adapter> {
        let mut found: Vec<Adapter> = Vec::new();
        let mut seen = Vec::new();
        for backend in BackendType::ALL {
            for (power, fallback) in [
                (PowerPreference::HighPerformance, false),
                (PowerPreference::LowPower, false),
                (PowerPreference::Undefined, true),
            ] {
                let options = RequestAdapterOptions {
                    backend: Some(backend),
                    power_preference: power,
                    force_fallback_adapter: fallback,
                    toggles: toggles.clone(),
                };
                let Ok(adapter) = self.request_adapter(&options).wait() else {
                    continue;
                };
                let info = adapter.info();
                let key = (
                    info.backend,
                    info.vendor_id,
                    info.device_id,
                    info.description.clone(),
                    info.device.clone(),
                );
                if !seen.contains(&key) {
                    seen.push(key);
                    found.push(adapter);
                }
            }
        }
        found
    }

    /// Processes pending events: runs the callbacks of completed operations.
    pub fn process_events(&self) {
        // SAFETY: a valid instance.
        unsafe { sys::wgpuInstanceProcessEvents(self.as_raw()) };
    }

    /// Waits until at least one of `futures` completes, or `timeout` passes. Returns the index of
    /// one completed future; its result is then available without blocking.
    pub fn wait_any<T>(&self, futures: &[&GpuFuture<T>], timeout: Duration) -> Result<usize> {
        if let Some(i) = futures.iter().position(|f| f.is_ready()) {
            return Ok(i);
        }
        let mut infos: Vec<sys::WGPUFutureWaitInfo> = futures
            .iter()
            .map(|f| sys::WGPUFutureWaitInfo {
                future: f.raw(),
                completed: 0,
            })
            .collect();
        let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: `infos` is a valid array of `infos.len()` elements for the call.
        let status = unsafe { sys::wgpuInstanceWaitAny(self.as_raw(), infos.len(), infos.as_mut_ptr(), nanos) };
        match status {
            sys::WGPUWaitStatus::Success => infos
                .iter()
                .position(|i| i.completed != 0)
                .ok_or_else(|| Error::Wait("no future completed".into())),
            sys::WGPUWaitStatus::TimedOut => Err(Error::Timeout(timeout)),
            other => Err(Error::Wait(format!("WaitAny returned status {}", other.0))),
        }
    }

    /// The lock that serialises the instance's and adapters' Dawn calls Dawn leaves unsynchronised.
    pub(crate) fn dawn_calls(&self) -> ReentrantMutexGuard<'_, ()> {
        self.inner.dawn_calls.lock()
    }

    /// Called by a future that starts waiting asynchronously.
    pub(crate) fn pump_acquire(&self) {
        self.inner.pump.acquire(Arc::downgrade(&self.inner));
    }

    /// Called by that future when it is dropped.
    pub(crate) fn pump_release(&self) {
        self.inner.pump.pending.fetch_sub(1, Ordering::AcqRel);
    }

    /// An `Instance` from the raw reference an adapter callback received.
    ///
    /// # Safety
    /// `ptr` must come from the `Arc::into_raw` in `request_adapter`, and be used once.
    pub(crate) unsafe fn from_inner_ptr(ptr: *mut std::ffi::c_void) -> Instance {
        // SAFETY: per the contract, this reclaims the reference leaked for the callback.
        let inner = unsafe { Arc::from_raw(ptr.cast_const().cast::<Inner>()) };
        Instance { inner }
    }
}

unsafe extern "C" fn on_adapter(
    status: sys::WGPURequestAdapterStatus,
    adapter: sys::WGPUAdapter,
    message: sys::WGPUStringView,
    userdata1: *mut std::ffi::c_void,
    userdata2: *mut std::ffi::c_void,
) {
    future::guard(|| {
        // SAFETY: `userdata2` is the reference `request_adapter` leaked; Dawn calls this once.
        let instance = unsafe { Instance::from_inner_ptr(userdata2) };
        let result = match status {
            sys::WGPURequestAdapterStatus::Success if !adapter.is_null() => Ok(Adapter::from_raw(adapter, instance)),
            sys::WGPURequestAdapterStatus::CallbackCancelled => Err(Error::Cancelled(strings::from_view(message))),
            _ => Err(Error::NoAdapter(strings::from_view(message))),
        };
        // SAFETY: `userdata1` came from `future::slot::<Adapter>()`; Dawn calls this once.
        unsafe { future::complete(userdata1, result) };
    });
}

/// Drives Dawn's events for futures that are awaited rather than waited on: a thread that calls
/// `ProcessEvents` while at least one such future is pending, and sleeps otherwise.
#[derive(Debug, Default)]
struct EventPump {
    pending: AtomicUsize,
    thread: Mutex<Option<thread::Thread>>,
}

impl EventPump {
    fn acquire(&self, instance: Weak<Inner>) {
        if self.pending.fetch_add(1, Ordering::AcqRel) > 0 {
            return;
        }
        let mut thread = self.thread.lock();
        match thread.as_ref() {
            Some(t) => t.unpark(),
            None => {
                let spawned = thread::Builder::new()
                    .name("dawn-events".into())
                    .spawn(move || pump(instance));
                // Without a thread, awaited futures would never complete; blocking waits still work.
                match spawned {
                    Ok(handle) => *thread = Some(handle.thread().clone()),
                    Err(err) => eprintln!("webgpu-dawn: could not start the event thread: {err}"),
                }
            }
        }
    }
}

fn pump(instance: Weak<Inner>) {
    loop {
        let Some(inner) = instance.upgrade() else {
            return;
        };
        if inner.pump.pending.load(Ordering::Acquire) == 0 {
            drop(inner);
            thread::park_timeout(Duration::from_millis(100));
            continue;
        }
        // SAFETY: `inner` keeps the instance alive during the call.
        unsafe { sys::wgpuInstanceProcessEvents(inner.raw.as_raw()) };
        drop(inner);
        thread::sleep(Duration::from_micros(100));
    }
}
