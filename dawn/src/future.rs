//! Dawn's asynchronous operations as futures usable from blocking code (`wait`) and from async
//! Rust (`.await`) without any particular runtime.
//!
//! Every operation is started with `CallbackMode::AllowSpontaneous`: its callback may run on any
//! thread, as soon as Dawn knows the result. The callback stores the result in a shared slot and
//! wakes the task awaiting it. Blocking waits use `WaitAny` with a timeout; async waits rely on the
//! instance's event pump, a thread that calls `ProcessEvents` only while some future is polled.

use std::ffi::c_void;
use std::future::Future;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dawn_sys::{WGPUFuture, WGPUFutureWaitInfo, WGPUWaitStatus};
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::instance::Instance;

/// Where a callback leaves its result.
pub(crate) struct Slot<T> {
    state: Mutex<SlotState<T>>,
}

struct SlotState<T> {
    value: Option<Result<T>>,
    waker: Option<Waker>,
}

impl<T> Slot<T> {
    fn new(value: Option<Result<T>>) -> Arc<Self> {
        Arc::new(Slot {
            state: Mutex::new(SlotState { value, waker: None }),
        })
    }

    fn take(&self) -> Option<Result<T>> {
        self.state.lock().value.take()
    }
}

/// A new empty slot and the `userdata` pointer to give Dawn with the callback, which must call
/// [`complete`] with it exactly once (Dawn calls every callback exactly once).
pub(crate) fn slot<T>() -> (Arc<Slot<T>>, *mut c_void) {
    let slot = Slot::new(None);
    let userdata = Arc::into_raw(Arc::clone(&slot)).cast_mut().cast();
    (slot, userdata)
}

/// Stores a callback's result and wakes whoever waits.
///
/// # Safety
/// `userdata` must come from [`slot::<T>`] and be passed here exactly once.
pub(crate) unsafe fn complete<T>(userdata: *mut c_void, value: Result<T>) {
    // SAFETY: per the contract, this reclaims the reference `slot` leaked for Dawn.
    let slot = unsafe { Arc::from_raw(userdata.cast_const().cast::<Slot<T>>()) };
    let waker = {
        let mut state = slot.state.lock();
        state.value = Some(value);
        state.waker.take()
    };
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// Runs a callback body so that a panic never unwinds into Dawn's C code: it is reported on
/// standard error and swallowed. Nothing here can panic in turn: the panic's payload is leaked
/// rather than dropped (its `Drop` could panic), and the report ignores write errors (where
/// `eprintln!` would panic).
pub(crate) fn guard(body: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(body)) {
        std::mem::forget(payload);
        let _ = writeln!(
            std::io::stderr(),
            "webgpu-dawn: a callback panicked; the panic was stopped at the FFI boundary"
        );
    }
}

/// The result of an asynchronous Dawn operation.
///
/// Wait for it with [`GpuFuture::wait`] / [`GpuFuture::wait_timeout`], or `.await` it.
#[must_use = "a GpuFuture does nothing unless waited for or awaited"]
pub struct GpuFuture<T> {
    instance: Instance,
    id: WGPUFuture,
    slot: Arc<Slot<T>>,
    registered: bool,
}

impl<T> std::fmt::Debug for GpuFuture<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuFuture")
            .field("id", &self.id.id)
            .finish_non_exhaustive()
    }
}

impl<T> GpuFuture<T> {
    pub(crate) fn new(instance: &Instance, id: WGPUFuture, slot: Arc<Slot<T>>) -> Self {
        GpuFuture {
            instance: instance.clone(),
            id,
            slot,
            registered: false,
        }
    }

    /// A future that is already resolved (used for requests rejected before reaching Dawn).
    pub(crate) fn ready(instance: &Instance, value: Result<T>) -> Self {
        GpuFuture {
            instance: instance.clone(),
            id: WGPUFuture { id: 0 },
            slot: Slot::new(Some(value)),
            registered: false,
        }
    }

    /// Blocks until the operation completes.
    pub fn wait(self) -> Result<T> {
        self.wait_timeout(Duration::MAX)
    }

    /// Blocks until the operation completes or `timeout` passes ([`Error::Timeout`]).
    pub fn wait_timeout(mut self, timeout: Duration) -> Result<T> {
        self.wait_for(timeout)
    }

    /// Like [`GpuFuture::wait_timeout`], but the future is kept: after an [`Error::Timeout`]
    /// the operation is still pending, and the same future can be waited for (or polled with a
    /// zero timeout) again. Once it has returned the result, it returns an error.
    pub fn wait_for(&mut self, timeout: Duration) -> Result<T> {
        if let Some(value) = self.slot.take() {
            return value;
        }
        let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        let mut info = WGPUFutureWaitInfo {
            future: self.id,
            completed: 0,
        };
        // SAFETY: `info` is a valid one-element array for the duration of the call.
        let status = unsafe { dawn_sys::wgpuInstanceWaitAny(self.instance.as_raw(), 1, &mut info, nanos) };
        match status {
            WGPUWaitStatus::Success => {}
            WGPUWaitStatus::TimedOut => return Err(Error::Timeout(timeout)),
            other => return Err(Error::Wait(format!("WaitAny returned status {}", other.0))),
        }
        self.slot
            .take()
            .unwrap_or_else(|| Err(Error::Wait("the future completed without a result".into())))
    }

    /// The raw future, for [`Instance::wait_any`].
    pub(crate) fn raw(&self) -> WGPUFuture {
        self.id
    }

    /// Whether the result has arrived.
    pub fn is_ready(&self) -> bool {
        self.slot.state.lock().value.is_some()
    }
}

impl<T> Future for GpuFuture<T> {
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        {
            let mut state = self.slot.state.lock();
            if let Some(value) = state.value.take() {
                return Poll::Ready(value);
            }
            state.waker = Some(cx.waker().clone());
        }
        if !self.registered {
            self.registered = true;
            self.instance.pump_acquire();
        }
        Poll::Pending
    }
}

impl<T> Drop for GpuFuture<T> {
    fn drop(&mut self) {
        if self.registered {
            self.instance.pump_release();
        }
    }
}

// GpuFuture is Unpin: it holds no self-references.
impl<T> Unpin for GpuFuture<T> {}
