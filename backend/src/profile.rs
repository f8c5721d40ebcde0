//! GPU time from timestamp queries, in one of two modes ([`ProfileMode`]). By kernel: each
//! dispatch runs in a compute pass of its own whose begin and end the GPU timestamps; that costs
//! a pass per dispatch, so it answers "which kernels, how many", not "how fast is a step". By
//! submit: each submit's one pass is timestamped at its begin and end, so the dispatches run as
//! they always do and the spans add up to the GPU's time for the work (barriers included). Either
//! way each submit is waited for and its timestamps read back.

use std::collections::BTreeMap;
use std::time::Duration;

use dawn::{Buffer, BufferDescriptor, BufferUsage, CommandEncoder, Device, PassTimestamps, QuerySet};

use crate::error::{BackendError, Result};
use crate::exec::MAX_DISPATCHES;

/// The GPU time of one kernel's dispatches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelTime {
    /// Dispatches timed.
    pub dispatches: u64,
    /// Their passes' time, begin to end, summed.
    pub time: Duration,
}

/// What a stream's profile holds: time per kernel (by shader file), and the GPU's time from the
/// first pass's begin to the last pass's end of each submit, summed (the kernels' time plus the
/// gaps between them: barriers, pass changes, idle waits within a submit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    /// Time per kernel, by shader file (`mul_mat_vec_int`, `rms_norm`, ...).
    pub kernels: BTreeMap<&'static str, KernelTime>,
    /// The submits' GPU spans, summed.
    pub span: Duration,
    /// Submits timed.
    pub submits: u64,
}

impl Profile {
    /// The kernels' time, summed.
    pub fn busy(&self) -> Duration {
        self.kernels.values().map(|k| k.time).sum()
    }

    /// Dispatches timed, summed over the kernels.
    pub fn dispatches(&self) -> u64 {
        self.kernels.values().map(|k| k.dispatches).sum()
    }
}

/// What a profiling stream times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileMode {
    /// Each dispatch in a pass of its own: time per kernel, and the submits' spans.
    Kernels,
    /// Each submit's pass as it is: the submits' spans only ([`Profile::kernels`] stays empty).
    Submits,
}

/// The queries and resolve buffer of a profiling stream, and what it has measured.
pub(crate) struct Profiler {
    queries: QuerySet,
    resolve: Buffer,
    profile: Profile,
    pub(crate) mode: ProfileMode,
}

impl Profiler {
    /// Timestamp queries for a full submit; fails where the device has no `timestamp-query`.
    pub(crate) fn new(device: &Device, mode: ProfileMode) -> Result<Profiler> {
        let count = 2 * MAX_DISPATCHES as u32;
        let queries = device
            .create_timestamp_queries(Some("profile"), count)
            .map_err(|e| BackendError::Unsupported(format!("profiling needs timestamp queries: {e}")))?;
        let resolve = device.create_buffer(&BufferDescriptor {
            label: Some("profile timestamps"),
            size: u64::from(count) * 8,
            usage: BufferUsage::QUERY_RESOLVE | BufferUsage::COPY_SRC,
        })?;
        Ok(Profiler {
            queries,
            resolve,
            profile: Profile::default(),
            mode,
        })
    }

    /// The timestamps a submit's one pass writes at its begin and end ([`ProfileMode::Submits`]).
    pub(crate) fn whole_pass(&self) -> PassTimestamps<'_> {
        self.pass(0)
    }

    /// Reads back a submit's span ([`ProfileMode::Submits`]; waits at most `timeout`).
    pub(crate) fn collect_span(&mut self, device: &Device, timeout: Duration) -> Result<()> {
        let stamps: Vec<u64> = device.read_buffer_timeout(&self.resolve, 0, 16, timeout)?;
        self.profile.span += dawn::elapsed(stamps[0], stamps[1]);
        self.profile.submits += 1;
        Ok(())
    }

    /// The timestamps dispatch `i` of a submit writes at its pass's begin and end.
    pub(crate) fn pass(&self, i: usize) -> PassTimestamps<'_> {
        PassTimestamps {
            query_set: &self.queries,
            beginning_index: Some(2 * i as u32),
            end_index: Some(2 * i as u32 + 1),
        }
    }

    /// Resolves the timestamps of `n` dispatches into the resolve buffer (at the end of the
    /// submit's encoder).
    pub(crate) fn resolve(&self, encoder: &mut CommandEncoder, n: usize) -> Result<()> {
        encoder.resolve_query_set(&self.queries, 0, 2 * n as u32, &self.resolve, 0)?;
        Ok(())
    }

    /// Reads back the submitted timestamps of `kernels` (one shader file per dispatch, in order)
    /// and adds them to the profile (waits for the submit, at most `timeout`).
    pub(crate) fn collect(&mut self, device: &Device, kernels: &[&'static str], timeout: Duration) -> Result<()> {
        let n = kernels.len();
        if n == 0 {
            return Ok(());
        }
        let stamps: Vec<u64> = device.read_buffer_timeout(&self.resolve, 0, 16 * n as u64, timeout)?;
        for (i, &kernel) in kernels.iter().enumerate() {
            let entry = self.profile.kernels.entry(kernel).or_default();
            entry.dispatches += 1;
            entry.time += dawn::elapsed(stamps[2 * i], stamps[2 * i + 1]);
        }
        self.profile.span += dawn::elapsed(stamps[0], stamps[2 * n - 1]);
        self.profile.submits += 1;
        Ok(())
    }

    /// What was measured since the last take, leaving an empty profile.
    pub(crate) fn take(&mut self) -> Profile {
        std::mem::take(&mut self.profile)
    }
}
