//! Reference-counted Dawn handles: `Clone` is `AddRef`, `Drop` is `Release`.
//!
//! Every live wrapper is also counted per type ([`live_handles`]), so tests can show that the
//! wrapper releases exactly what it acquires.

use std::sync::atomic::{AtomicIsize, Ordering};

/// The number of wrapper-held references to Dawn objects that are alive right now, over all
/// types. Creating or cloning a handle adds one; dropping one subtracts one.
pub fn live_handles() -> isize {
    LIVE.load(Ordering::Relaxed)
}

pub(crate) static LIVE: AtomicIsize = AtomicIsize::new(0);

/// Defines a handle type over a raw Dawn pointer type with its AddRef/Release functions.
///
/// The type is neither `Send` nor `Sync` by itself (it holds a raw pointer): each use of the
/// macro says, next to it, whether and why the Dawn object may be shared between threads.
/// `Clone` and `Drop` are thread-safe for every type: Dawn's reference counts are atomic.
macro_rules! handle {
    ($(#[$meta:meta])* $name:ident, $raw:ty, $add_ref:path, $release:path) => {
        $(#[$meta])*
        pub struct $name {
            raw: $raw,
        }

        impl $name {
            /// Takes ownership of one reference. `raw` must be a valid, non-null handle.
            pub(crate) fn from_raw(raw: $raw) -> Self {
                debug_assert!(!raw.is_null());
                $crate::handle::LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Self { raw }
            }

            /// Takes ownership of one reference Dawn just returned; a null handle (which Dawn
            /// gives for no valid input, but check anyway) is an error.
            #[allow(dead_code)]
            pub(crate) fn wrap(raw: $raw) -> $crate::error::Result<Self> {
                if raw.is_null() {
                    return Err($crate::error::Error::Internal(concat!("Dawn returned no ", stringify!($name)).into()));
                }
                Ok(Self::from_raw(raw))
            }

            /// The raw handle, still owned by `self`.
            pub fn as_raw(&self) -> $raw {
                self.raw
            }
        }

        impl Clone for $name {
            fn clone(&self) -> Self {
                // SAFETY: `self.raw` is a valid handle we hold a reference to.
                unsafe { $add_ref(self.raw) };
                Self::from_raw(self.raw)
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                $crate::handle::LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                // SAFETY: we own exactly one reference, released exactly once here.
                unsafe { $release(self.raw) };
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!(stringify!($name), "({:p})"), self.raw)
            }
        }
    };
}
pub(crate) use handle;

/// Declares a handle to a device child `Send + Sync`, with the one justification that holds for
/// all of them (only for types whose every method is a device-child call other than encoding).
macro_rules! device_child_is_thread_safe {
    ($name:ident) => {
        // SAFETY: every device is created with the `ImplicitDeviceSynchronization` feature
        // (`Adapter::request_device` adds it, and refuses adapters without it). Under it, Dawn
        // makes every call on a device and on its children thread-safe, except command encoding
        // (docs/dawn/features/implicit_device_synchronization.md in Dawn): calls take the device
        // lock, or (those Dawn marks "no autolock": buffer mapping, object creation, getters)
        // synchronise internally or only read state fixed at creation. This type is not an
        // encoder, its reference count is atomic, and it has no thread affinity, so it may be
        // used, cloned and dropped from any thread, also concurrently.
        unsafe impl Send for $name {}
        // SAFETY: as for `Send`: `&self` methods make only the thread-safe calls above.
        unsafe impl Sync for $name {}
    };
}
pub(crate) use device_child_is_thread_safe;
