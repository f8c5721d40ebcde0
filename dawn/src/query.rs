//! Query sets: GPU timestamps, turned into durations.

use std::time::Duration;

use dawn_sys as sys;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::handle::{device_child_is_thread_safe, handle};
use crate::strings;
use crate::types::Feature;

handle!(
    /// The raw query set reference held by [`QuerySet`].
    RawQuerySet,
    sys::WGPUQuerySet,
    sys::wgpuQuerySetAddRef,
    sys::wgpuQuerySetRelease
);
// Immutable once created; only named in encoder calls.
device_child_is_thread_safe!(RawQuerySet);

/// A set of timestamp queries.
#[derive(Debug, Clone)]
pub struct QuerySet {
    raw: RawQuerySet,
    count: u32,
}

impl Device {
    /// Creates `count` timestamp queries. Needs the `timestamp-query` feature.
    pub fn create_timestamp_queries(&self, label: Option<&str>, count: u32) -> Result<QuerySet> {
        if !self.has_feature(Feature::TIMESTAMP_QUERY) {
            return Err(Error::MissingFeature(
                "timestamp-query (request it when creating the device)".into(),
            ));
        }
        let desc = sys::WGPUQuerySetDescriptor {
            nextInChain: std::ptr::null_mut(),
            label: strings::to_view(label),
            type_: sys::WGPUQueryType::Timestamp,
            count,
        };
        let raw = self.scoped(|| {
            // SAFETY: a valid device; the descriptor lives during the call.
            RawQuerySet::wrap(unsafe { sys::wgpuDeviceCreateQuerySet(self.as_raw(), &desc) })
        })?;
        Ok(QuerySet { raw, count })
    }
}

impl QuerySet {
    /// The raw handle, owned by `self`.
    pub fn as_raw(&self) -> sys::WGPUQuerySet {
        self.raw.as_raw()
    }

    /// The number of queries.
    pub fn count(&self) -> u32 {
        self.count
    }
}

/// The time between two resolved timestamps.
///
/// WebGPU resolves timestamps to nanoseconds: Dawn has already applied the queue's timestamp
/// period (and, unless the `timestamp_quantization` toggle is off, rounded them coarsely). A
/// later timestamp smaller than an earlier one (a clock reset) gives zero.
pub fn elapsed(begin: u64, end: u64) -> Duration {
    Duration::from_nanos(end.saturating_sub(begin))
}
