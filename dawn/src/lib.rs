//! A safe Rust API over [Dawn](https://dawn.googlesource.com/dawn), Google's WebGPU
//! implementation, for GPU compute: no `unsafe` needed (except to switch off Dawn's own safety
//! checks), errors as values, typed buffer data.
//!
//! ```no_run
//! use dawn::{Instance, InstanceDescriptor, RequestAdapterOptions, DeviceDescriptor};
//! # fn main() -> dawn::Result<()> {
//! // SAFETY: this program uses no experimental feature and no unsafe API.
//! let instance = Instance::new(&unsafe { InstanceDescriptor::compute() })?;
//! let adapter = instance.request_adapter(&RequestAdapterOptions::compute()).wait()?;
//! let device = adapter.request_device(&DeviceDescriptor::default().with_adapter_limits()).wait()?;
//! println!("{}: {:?}", adapter.info().device, adapter.info().subgroup_matrix_configs);
//! # Ok(()) }
//! ```
//!
//! # Objects and lifetimes
//! One module per WebGPU object. Handles are reference counted: `Clone` adds a reference
//! (`AddRef`), `Drop` releases one; [`live_handles`] counts the references this crate holds.
//!
//! # Threads
//! Every handle is `Send + Sync` except the encoders, which are `Send` and record only through
//! `&mut self`. For device objects that is sound because every device is created with Dawn's
//! `ImplicitDeviceSynchronization` feature, under which Dawn makes every call on a device and
//! its children thread-safe except command encoding; [`Adapter::request_device`] adds the
//! feature itself and fails with [`Error::MissingFeature`] on an adapter without it. Instances
//! and adapters are outside that feature: their calls are either thread-safe in Dawn (waiting,
//! processing events, reading adapter properties) or serialised by a lock of the instance
//! (requesting adapters and devices). Each `unsafe impl Send/Sync` says which case it relies on.
//!
//! # Mappings and lifetimes
//! A [`BufferMapping`] borrows its buffer, a buffer holds its device, and destroying a mapped
//! buffer or the device of one is refused: the memory a mapping lends out stays valid while it
//! lives, whatever other threads do. Map, unmap and destroy are transitions of one state per
//! buffer (and one per device), taken under a lock, never checked and then acted on.
//!
//! # Toggles
//! Toggles that remove a WebGPU guarantee (`allow_unsafe_apis`, `skip_validation`,
//! `disable_robustness`, `disable_workgroup_init`, …) are set only through the `unsafe`
//! [`Toggles::enable_unsafe`] and [`Toggles::disable_unsafe`] (or
//! [`InstanceDescriptor::allow_unsafe_apis`]); through the safe methods they fail with
//! [`Error::UnsafeToggle`]. [`Toggle::stage`] says whether Dawn knows a toggle's name at all.
//!
//! # Asynchronous operations
//! They return a [`GpuFuture`]: call [`GpuFuture::wait`] (or `wait_timeout`) from blocking code,
//! or `.await` it from any async runtime. Callbacks never unwind into Dawn: a panic inside one
//! is caught and reported.
//!
//! # Errors
//! Object creation runs inside error scopes, so Dawn's validation, out-of-memory and internal
//! errors come back as [`Error`] values; requests this crate can tell are wrong (sizes over
//! limits, missing usages) fail before Dawn sees them. Work on a lost or destroyed device fails
//! with [`Error::DeviceLost`].

#![warn(missing_docs)]

mod adapter;
mod binding;
mod buffer;
mod command;
mod device;
mod error;
mod future;
mod handle;
mod instance;
mod pipeline;
mod query;
mod queue;
mod shader;
mod strings;
mod toggle_names;
mod toggles;
mod types;

pub use adapter::{Adapter, AdapterInfo, RequestAdapterOptions};
pub use binding::{
    BindGroup, BindGroupEntry, BindGroupLayout, BindGroupLayoutEntry, BufferBindingType, PipelineLayout,
};
pub use buffer::{Buffer, BufferDescriptor, BufferMapping, MapFuture};
pub use command::{CommandBuffer, CommandEncoder, ComputePass, PassTimestamps};
pub use device::{
    DEFAULT_WAIT_TIMEOUT, Device, DeviceDescriptor, ErrorCallback, ErrorChecking, ErrorFilter, RequiredLimits,
};
pub use error::{CompilationMessage, DeviceLostReason, Error, MessageKind, Result};
pub use future::GpuFuture;
pub use handle::live_handles;
pub use instance::{Instance, InstanceDescriptor};
pub use pipeline::{ComputePipeline, ComputePipelineDescriptor};
pub use query::{QuerySet, elapsed};
pub use queue::Queue;
pub use shader::ShaderModule;
pub use toggles::{Toggle, ToggleStage, Toggles};
pub use types::{
    AdapterType, BackendType, BufferUsage, ComponentType, Feature, InstanceFeature, Limits, MapMode, PowerPreference,
    SubgroupMatrixConfig,
};

/// The raw bindings, for what this crate does not cover.
pub use dawn_sys as sys;
