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
/// Handles are `Send + Sync`: every device is created with `ImplicitDeviceSynchronization`,
/// under which Dawn serialises calls on a device and its children internally.
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

        // SAFETY: see the macro's documentation: Dawn objects are reference counted atomically,
        // and devices run with ImplicitDeviceSynchronization, making their children thread-safe.
        unsafe impl Send for $name {}
        // SAFETY: as above.
        unsafe impl Sync for $name {}
    };
}
pub(crate) use handle;
