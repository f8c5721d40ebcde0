//! Executing kernels: dispatches are recorded, then encoded many to a compute pass and one
//! command buffer per submit. Each dispatch's parameters take a slot of one uniform buffer
//! (bound with a dynamic offset), written once per submit. Bind groups are cached by their
//! buffers, so repeated ops create none, and let go at the next submit once nothing but the cache
//! holds one of their buffers. At most [`MAX_IN_FLIGHT`] submits run unawaited.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::time::Duration;

use dawn::{BindGroup, BindGroupEntry, Buffer, BufferDescriptor, BufferUsage, Device, GpuFuture};

use crate::error::{BackendError, Result};
use crate::format::wgsl_tables;
use crate::kernel::{PARAMS_BYTES, Pipeline};
use crate::memory::Binding;
use crate::params::KernelParams;
use crate::profile::{Profile, ProfileMode, Profiler};
use crate::shader_lib::ShaderVariant;

/// Dispatches per submit at most (also the parameter buffer's slot count).
pub const MAX_DISPATCHES: usize = 512;
/// Dispatches of the first submit after a stream starts or synchronizes, by default
/// ([`SubmitPolicy`]).
pub const FIRST_SUBMIT_DISPATCHES: usize = 8;
/// Submits that may be in flight before the next one waits for the oldest.
pub const MAX_IN_FLIGHT: usize = 8;
/// Threads per workgroup of the kernel that copies staged host bytes into a view.
pub const WRITE_WG_SIZE: u32 = 256;
/// How long a stream waits for an earlier submit at most, unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// How many recorded dispatches a stream hands to the GPU at a time. The first submit after the
/// stream starts or waits holds `first`; each later one may hold twice as many as the one before,
/// up to `max`: the GPU starts after a few dispatches instead of idling while hundreds are
/// encoded, and long runs still get big submits. A smaller `max` leaves less work to run after
/// the host has recorded the last op of a step (what a single-token step waits for), at the cost
/// of more submits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmitPolicy {
    /// Dispatches of the first submit.
    pub first: usize,
    /// Dispatches of a submit at most (at most [`MAX_DISPATCHES`]).
    pub max: usize,
}

impl Default for SubmitPolicy {
    fn default() -> Self {
        SubmitPolicy {
            first: FIRST_SUBMIT_DISPATCHES,
            max: MAX_DISPATCHES,
        }
    }
}

impl SubmitPolicy {
    /// Fails unless `1 <= first <= max <= MAX_DISPATCHES`.
    pub fn check(&self) -> Result<()> {
        if self.first == 0 || self.first > self.max || self.max > MAX_DISPATCHES {
            return Err(BackendError::InvalidOperands(format!(
                "submit policy: first {} and max {} dispatches must satisfy 1 <= first <= max <= {MAX_DISPATCHES}",
                self.first, self.max
            )));
        }
        Ok(())
    }
}

/// One storage binding of a dispatch.
#[derive(Debug, Clone)]
pub struct BufferRange {
    pub buffer: Buffer,
    pub offset: u64,
    pub size: u64,
}

impl BufferRange {
    pub fn new(buffer: &Buffer, binding: Binding) -> Self {
        BufferRange {
            buffer: buffer.clone(),
            offset: binding.offset,
            size: binding.size,
        }
    }
}

/// A recorded dispatch.
struct Recorded {
    kernel: Arc<Pipeline>,
    group: BindGroup,
    params_slot: u32,
    workgroups: [u32; 3],
}

type GroupKey = (usize, Vec<(usize, u64, u64)>);

/// What a stream has recorded and submitted so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamCounts {
    pub dispatches: u64,
    pub submits: u64,
}

/// Records and submits work on one device.
pub struct Stream {
    device: Device,
    params: Buffer,
    slot_bytes: u64,
    arena: Vec<u8>,
    recorded: Vec<Recorded>,
    groups: FxHashMap<GroupKey, BindGroup>,
    /// One handle to each buffer the cached bind groups bind, by raw handle: a buffer whose only
    /// handle is this one is held by nothing but the cache, and its bind groups are let go at
    /// the next submit ([`Stream::sweep`]).
    held: FxHashMap<usize, Buffer>,
    /// The lookup tables of the grid formats, made when a kernel first needs them.
    tables: Option<Buffer>,
    in_flight: VecDeque<GpuFuture<()>>,
    /// Dispatches after which `dispatch` submits (grows from `policy.first` to `policy.max`).
    submit_at: usize,
    policy: SubmitPolicy,
    /// Dispatches and submits since the stream was made.
    counts: StreamCounts,
    /// The longest wait for an earlier submit.
    timeout: Duration,
    /// Why the stream stopped: set by a wait that failed (a lost device, an error Dawn
    /// reported), after which every call fails fast instead of waiting again. A timeout is not
    /// a failure: the work goes on.
    failed: Option<String>,
    /// Set while the stream profiles ([`Stream::start_profile`]).
    profiler: Option<Profiler>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("recorded", &self.recorded.len())
            .finish_non_exhaustive()
    }
}

impl Stream {
    /// A stream whose waits for earlier submits take at most [`DEFAULT_TIMEOUT`].
    pub fn new(device: &Device) -> Result<Stream> {
        Stream::with_timeout(device, DEFAULT_TIMEOUT)
    }

    /// A stream whose waits for earlier submits take at most `timeout`.
    pub fn with_timeout(device: &Device, timeout: Duration) -> Result<Stream> {
        Stream::with_policy(device, timeout, SubmitPolicy::default())
    }

    /// A stream whose waits for earlier submits take at most `timeout`, submitting as `policy`
    /// says.
    pub fn with_policy(device: &Device, timeout: Duration, policy: SubmitPolicy) -> Result<Stream> {
        policy.check()?;
        let slot_bytes = PARAMS_BYTES.next_multiple_of(u64::from(device.limits().min_uniform_buffer_offset_alignment));
        let params = device.create_buffer(&BufferDescriptor {
            label: Some("dispatch parameters"),
            size: slot_bytes * MAX_DISPATCHES as u64,
            usage: BufferUsage::UNIFORM | BufferUsage::COPY_DST,
        })?;
        Ok(Stream {
            device: device.clone(),
            params,
            slot_bytes,
            arena: Vec::new(),
            recorded: Vec::new(),
            groups: FxHashMap::default(),
            held: FxHashMap::default(),
            tables: None,
            in_flight: VecDeque::new(),
            submit_at: policy.first,
            policy,
            counts: StreamCounts::default(),
            timeout,
            failed: None,
            profiler: None,
        })
    }

    /// Records one dispatch of `kernel` over `buffers` (in the kernel's binding order) with
    /// its parameter block `params` (at most 256 bytes) and `workgroups`. Counts over the device's
    /// per-dimension limit are refused here, so callers split grids in 2-D. Only the backend's
    /// op encoders dispatch: they bind what their checked tensors allow, on the stream's device.
    pub(crate) fn dispatch(
        &mut self,
        kernel: &Arc<Pipeline>,
        buffers: &[BufferRange],
        params: &impl KernelParams,
        workgroups: [u32; 3],
    ) -> Result<()> {
        self.check()?;
        let params = params.words();
        if buffers.len() != kernel.storage.len() {
            return Err(BackendError::InvalidOperands(format!(
                "kernel `{}` takes {} buffers, got {}",
                kernel.variant,
                kernel.storage.len(),
                buffers.len()
            )));
        }
        // A kernel of this device must never bind another device's memory: without validation
        // nothing else would stop it. The ops check their operands against their context and the
        // context against the stream (`GpuContext::check_stream`); this holds for every binding.
        if buffers.iter().any(|b| !self.is_on(b.buffer.device())) {
            return Err(BackendError::InvalidOperands(format!(
                "kernel `{}`: a buffer of another device than the stream's",
                kernel.variant
            )));
        }
        if params.len() * 4 > PARAMS_BYTES as usize {
            return Err(BackendError::InvalidOperands(format!(
                "{} parameter words exceed the 64-word block",
                params.len()
            )));
        }
        let max = self.device.limits().max_compute_workgroups_per_dimension;
        if workgroups.iter().any(|&w| w > max) {
            return Err(BackendError::TooLarge {
                what: format!("a dispatch of {workgroups:?} workgroups for `{}`", kernel.variant),
                bytes: u64::from(*workgroups.iter().max().unwrap_or(&0)),
                limit: u64::from(max),
                limit_name: "maxComputeWorkgroupsPerDimension",
            });
        }
        if self.recorded.len() >= self.submit_at {
            self.flush()?;
            self.submit_at = (self.submit_at * 2).min(self.policy.max);
        }
        let group = self.bind_group(kernel, buffers)?;
        let slot = self.recorded.len() as u32;
        let start = self.arena.len();
        self.arena.resize(start + self.slot_bytes as usize, 0);
        for (i, word) in params.iter().enumerate() {
            self.arena[start + i * 4..start + i * 4 + 4].copy_from_slice(&word.to_le_bytes());
        }
        self.counts.dispatches += 1;
        self.recorded.push(Recorded {
            kernel: Arc::clone(kernel),
            group,
            params_slot: slot,
            workgroups,
        });
        Ok(())
    }

    /// Makes room for `dispatches` dispatches in the current submit, submitting what is recorded
    /// first if they would not fit: the dispatches an op records next then go to the GPU in one
    /// submit. Ops call it before dispatches that pass data through the context's scratch, which
    /// the context's other streams use too: in one submit, no other stream's work can run between
    /// the producer and its consumer.
    pub(crate) fn reserve(&mut self, dispatches: usize) -> Result<()> {
        self.check()?;
        if dispatches > MAX_DISPATCHES {
            return Err(BackendError::InvalidOperands(format!(
                "{dispatches} dispatches cannot share one submit (at most {MAX_DISPATCHES})"
            )));
        }
        while self.recorded.len() + dispatches > self.submit_at {
            if self.recorded.is_empty() {
                self.submit_at = dispatches;
            } else {
                self.flush()?;
                self.submit_at = (self.submit_at * 2).min(self.policy.max.max(dispatches));
            }
        }
        Ok(())
    }

    /// Writes `bytes` into `buffer` at `offset` after everything recorded so far: what is
    /// recorded is submitted first, and the queue orders the write after it (a queue write is
    /// ordered against submits, not against dispatches still being recorded); dispatches recorded
    /// later see the new bytes. `offset` and the length must be multiples of 4 bytes.
    pub(crate) fn write_after_recorded(&mut self, buffer: &Buffer, offset: u64, bytes: &[u8]) -> Result<()> {
        if !offset.is_multiple_of(4) || !bytes.len().is_multiple_of(4) {
            return Err(BackendError::InvalidOperands(format!(
                "a queue write of {} bytes at {offset} is not whole 4-byte words",
                bytes.len()
            )));
        }
        if offset
            .checked_add(bytes.len() as u64)
            .is_none_or(|end| end > buffer.size())
        {
            return Err(BackendError::InvalidOperands(format!(
                "a write of {} bytes at {offset} passes the end of a {}-byte buffer",
                bytes.len(),
                buffer.size()
            )));
        }
        if !self.is_on(buffer.device()) {
            return Err(BackendError::InvalidOperands(
                "a write into a buffer of another device than the stream's".into(),
            ));
        }
        self.flush()?;
        self.device.write_buffer(buffer, offset, bytes)?;
        Ok(())
    }

    fn bind_group(&mut self, kernel: &Arc<Pipeline>, buffers: &[BufferRange]) -> Result<BindGroup> {
        let key: GroupKey = (
            Arc::as_ptr(kernel) as usize,
            buffers
                .iter()
                .map(|b| (b.buffer.as_raw() as usize, b.offset, b.size))
                .collect(),
        );
        if let Some(group) = self.groups.get(&key) {
            return Ok(group.clone());
        }
        let tables = if kernel.reads_tables {
            Some(self.tables()?)
        } else {
            None
        };
        // The cache keeps its buffers alive; bound it so it cannot grow without limit.
        if self.groups.len() >= 4096 {
            self.groups.clear();
            self.held.clear();
        }
        let mut entries: Vec<BindGroupEntry<'_>> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| BindGroupEntry {
                binding: i as u32,
                buffer: &b.buffer,
                offset: b.offset,
                size: Some(b.size),
            })
            .collect();
        entries.push(BindGroupEntry {
            binding: buffers.len() as u32,
            buffer: &self.params,
            offset: 0,
            size: Some(PARAMS_BYTES),
        });
        if let Some(tables) = &tables {
            entries.push(BindGroupEntry {
                binding: wgsl_tables::TABLES_BINDING,
                buffer: tables,
                offset: 0,
                size: None,
            });
        }
        let group = self
            .device
            .create_bind_group(Some(&kernel.variant.to_string()), &kernel.layout, &entries)?;
        for b in buffers {
            self.held
                .entry(b.buffer.as_raw() as usize)
                .or_insert_with(|| b.buffer.clone());
        }
        self.groups.insert(key, group.clone());
        Ok(group)
    }

    /// The lookup-table buffer of the grid formats, made on first use.
    fn tables(&mut self) -> Result<Buffer> {
        if let Some(tables) = &self.tables {
            return Ok(tables.clone());
        }
        let words = wgsl_tables::table_words();
        let tables = self
            .device
            .create_buffer_init(Some("format tables"), BufferUsage::STORAGE, &words)?;
        self.tables = Some(tables.clone());
        Ok(tables)
    }

    /// The failure that stopped the stream, as an error.
    fn check(&self) -> Result<()> {
        match &self.failed {
            Some(why) => Err(BackendError::StreamFailed(why.clone())),
            None => Ok(()),
        }
    }

    /// Records `error` as the reason the stream stopped and returns it.
    fn stop(&mut self, error: BackendError) -> BackendError {
        self.recorded.clear();
        self.arena.clear();
        self.in_flight.clear();
        self.failed = Some(error.to_string());
        error
    }

    /// Whether the stream records on `device`.
    pub(crate) fn is_on(&self, device: &Device) -> bool {
        self.device.as_raw() == device.as_raw()
    }

    /// Whether a failure (a lost device, an error Dawn reported) stopped the stream (it then
    /// refuses all work).
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Lets go of the cached bind groups that bind a buffer nothing but the cache holds any more
    /// (its tensors were dropped): the cache must not keep every earlier call's tensors alive
    /// when an op runs again and again on fresh ones. Recorded dispatches hold their own bind
    /// groups, and submitted work is kept alive by Dawn, so nothing in use goes.
    fn sweep(&mut self) {
        let dropped: Vec<usize> = self
            .held
            .iter()
            .filter(|(_, buffer)| buffer.handle_count() == 1)
            .map(|(&raw, _)| raw)
            .collect();
        if dropped.is_empty() {
            return;
        }
        self.groups
            .retain(|(_, bound), _| bound.iter().all(|(raw, _, _)| !dropped.contains(raw)));
        for raw in &dropped {
            self.held.remove(raw);
        }
    }

    /// Encodes and submits everything recorded, without waiting for it (beyond the oldest of
    /// more than [`MAX_IN_FLIGHT`] submits, at most the stream's timeout). Cached bind groups
    /// of buffers nothing else holds are let go first.
    pub fn flush(&mut self) -> Result<()> {
        self.check()?;
        self.sweep();
        if self.recorded.is_empty() {
            return Ok(());
        }
        self.device.write_buffer(&self.params, 0, &self.arena)?;
        let mut encoder = self.device.create_command_encoder(Some("ops"))?;
        let per_kernel = self.profiler.as_ref().is_some_and(|p| p.mode == ProfileMode::Kernels);
        if let (Some(profiler), true) = (&self.profiler, per_kernel) {
            // A pass per dispatch, timestamped at its begin and end.
            for (i, r) in self.recorded.iter().enumerate() {
                let mut pass = encoder.begin_compute_pass(Some("ops"), Some(profiler.pass(i)));
                pass.set_pipeline(&r.kernel.pipeline);
                pass.set_bind_group(0, &r.group, &[r.params_slot * self.slot_bytes as u32]);
                let [x, y, z] = r.workgroups;
                pass.dispatch(x, y, z)?;
            }
            profiler.resolve(&mut encoder, self.recorded.len())?;
        } else {
            // One pass; timestamped at its begin and end when profiling by submit.
            let stamps = self.profiler.as_ref().map(Profiler::whole_pass);
            let mut pass = encoder.begin_compute_pass(Some("ops"), stamps);
            let mut current: Option<*const Pipeline> = None;
            for r in &self.recorded {
                if current != Some(Arc::as_ptr(&r.kernel)) {
                    pass.set_pipeline(&r.kernel.pipeline);
                    current = Some(Arc::as_ptr(&r.kernel));
                }
                pass.set_bind_group(0, &r.group, &[r.params_slot * self.slot_bytes as u32]);
                let [x, y, z] = r.workgroups;
                pass.dispatch(x, y, z)?;
            }
        }
        if let (Some(profiler), false) = (&self.profiler, per_kernel) {
            profiler.resolve(&mut encoder, 1)?;
        }
        self.device.submit([encoder.finish()?])?;
        self.counts.submits += 1;
        let kernels: Vec<&'static str> = if per_kernel {
            self.recorded.iter().map(|r| r.kernel.variant.file).collect()
        } else {
            Vec::new()
        };
        self.recorded.clear();
        self.arena.clear();
        if let Some(profiler) = &mut self.profiler {
            let collected = match profiler.mode {
                ProfileMode::Kernels => profiler.collect(&self.device, &kernels, self.timeout),
                ProfileMode::Submits => profiler.collect_span(&self.device, self.timeout),
            };
            match collected {
                Ok(()) => {}
                Err(e @ BackendError::Dawn(dawn::Error::Timeout(_))) => return Err(e),
                Err(e) => return Err(self.stop(e)),
            }
        }
        self.in_flight.push_back(self.device.on_submitted_work_done());
        self.wait_in_flight(MAX_IN_FLIGHT, self.timeout)
    }

    /// Waits, at most `timeout` each, for the oldest submits until at most `keep` are in
    /// flight. A timeout leaves them in flight (the work goes on; a later wait takes it up), so
    /// only a failure (a lost device, an error Dawn reported) stops the stream.
    fn wait_in_flight(&mut self, keep: usize, timeout: Duration) -> Result<()> {
        while self.in_flight.len() > keep {
            let Some(oldest) = self.in_flight.front_mut() else {
                break;
            };
            match oldest.wait_for(timeout) {
                Ok(()) => {
                    self.in_flight.pop_front();
                }
                Err(e @ dawn::Error::Timeout(_)) => return Err(e.into()),
                Err(e) => return Err(self.stop(e.into())),
            }
        }
        Ok(())
    }

    /// Submits what is recorded, then tells without blocking whether all work submitted on
    /// this stream has finished (a failure found meanwhile is an error).
    pub fn poll(&mut self) -> Result<bool> {
        self.flush()?;
        match self.wait_in_flight(0, Duration::ZERO) {
            Ok(()) => Ok(true),
            Err(BackendError::Dawn(dawn::Error::Timeout(_))) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Submits what is recorded and waits for all work, at most `timeout`. A lost device or an
    /// error Dawn reported meanwhile is returned as an error and stops the stream; a timeout
    /// ([`dawn::Error::Timeout`]) does not: the work goes on, and a later wait or
    /// [`Stream::poll`] takes it up.
    pub fn synchronize(&mut self, timeout: Duration) -> Result<()> {
        self.flush()?;
        self.submit_at = self.policy.first;
        match self.device.synchronize(timeout) {
            Ok(()) => {
                self.in_flight.clear();
                Ok(())
            }
            Err(e @ dawn::Error::Timeout(_)) => Err(e.into()),
            Err(e) => Err(self.stop(e.into())),
        }
    }

    /// Submits what is recorded, then runs `read`, a copy out of the device that the queue
    /// orders after those submits, and waits for it alone: when its bytes arrive every earlier
    /// submit has run (Dawn completes a queue's submits in order), so one round trip to the GPU
    /// does what [`Stream::synchronize`] then a read would do in two. A lost device or an error
    /// Dawn reported stops the stream, as there; a timeout does not.
    pub(crate) fn read_through<T>(&mut self, read: impl FnOnce() -> Result<T>) -> Result<T> {
        self.flush()?;
        self.submit_at = self.policy.first;
        let value = match read() {
            Ok(value) => value,
            // The read's own failure (a timeout, a refused copy) leaves the stream as it is,
            // unless the device was lost meanwhile.
            Err(e) if self.device.check_lost().is_ok() => return Err(e),
            Err(e) => return Err(self.stop(e)),
        };
        if let Err(e) = self.device.check_lost() {
            return Err(self.stop(e.into()));
        }
        if let Some(e) = self.device.take_uncaptured_errors().into_iter().next() {
            return Err(self.stop(e.into()));
        }
        self.in_flight.clear();
        Ok(value)
    }

    /// Starts timing the work on the GPU, by kernel or by submit (see [`crate::profile`]): what
    /// is recorded is submitted first, and from then on each submit is waited for. Fails where
    /// the device has no timestamp queries.
    pub fn start_profile(&mut self, mode: ProfileMode) -> Result<()> {
        self.flush()?;
        match &mut self.profiler {
            Some(p) => p.mode = mode,
            None => self.profiler = Some(Profiler::new(&self.device, mode)?),
        }
        Ok(())
    }

    /// Submits what is recorded, stops profiling and returns what was measured since
    /// [`Stream::start_profile`] (an empty profile if the stream was not profiling).
    pub fn finish_profile(&mut self) -> Result<Profile> {
        self.flush()?;
        Ok(self.profiler.take().map(|mut p| p.take()).unwrap_or_default())
    }

    /// Dispatches recorded and submits made since the stream was made (what a step of a model
    /// costs the host, beside its time).
    pub fn counts(&self) -> StreamCounts {
        self.counts
    }

    /// Dispatches recorded and not yet submitted.
    pub fn pending(&self) -> usize {
        self.recorded.len()
    }

    /// The dispatches recorded and not yet submitted, in order: each kernel's shader variant and
    /// workgroup counts (what a plan's encoder did, for checking it against the plan).
    pub fn pending_dispatches(&self) -> Vec<(ShaderVariant, [u32; 3])> {
        self.recorded
            .iter()
            .map(|r| (r.kernel.variant.clone(), r.workgroups))
            .collect()
    }

    /// Bind groups the stream keeps for reuse (each keeps its buffers alive until the next submit
    /// after the last of their tensors is dropped).
    pub fn cached_bind_groups(&self) -> usize {
        self.groups.len()
    }
}

/// Splits `groups` workgroups into an (x, y) grid within the per-dimension `max`; kernels
/// recover the linear index as `y * x_count + x` and skip indices past the end.
pub fn grid_2d(groups: u32, max: u32) -> [u32; 3] {
    if groups <= max {
        [groups.max(1), 1, 1]
    } else {
        let y = groups.div_ceil(max);
        [groups.div_ceil(y), y, 1]
    }
}

#[cfg(test)]
mod tests {
    use super::grid_2d;

    #[test]
    fn grids_split_in_two_dimensions() {
        assert_eq!(grid_2d(10, 65535), [10, 1, 1]);
        assert_eq!(grid_2d(0, 65535), [1, 1, 1]);
        let [x, y, _] = grid_2d(200_000, 65535);
        assert!(x <= 65535 && x * y >= 200_000 && x * (y - 1) < 200_000);
    }
}
