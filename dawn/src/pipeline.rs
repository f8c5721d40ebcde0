//! Compute pipelines, created synchronously or asynchronously, with override constants.

use std::ffi::c_void;

use dawn_sys as sys;

use crate::binding::{BindGroupLayout, PipelineLayout};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::future::{self, GpuFuture};
use crate::handle::{device_child_is_thread_safe, handle};
use crate::shader::ShaderModule;
use crate::strings;

handle!(
    /// A compute pipeline.
    ComputePipeline,
    sys::WGPUComputePipeline,
    sys::wgpuComputePipelineAddRef,
    sys::wgpuComputePipelineRelease
);
// Immutable once created; GetBindGroupLayout ("no autolock") only reads the layout it was
// created with.
device_child_is_thread_safe!(ComputePipeline);

/// What to build a compute pipeline from.
#[derive(Debug, Clone)]
pub struct ComputePipelineDescriptor<'a> {
    /// A name for debugging and error messages.
    pub label: Option<&'a str>,
    /// `None`: derive the layout from the shader ("auto" layout).
    pub layout: Option<&'a PipelineLayout>,
    /// The shader module holding the entry point.
    pub module: &'a ShaderModule,
    /// The name of the `@compute` function to run.
    pub entry_point: &'a str,
    /// Values for the shader's `override` declarations, by name (or numeric id).
    pub constants: &'a [(&'a str, f64)],
}

/// The C descriptor with the storage it points into.
struct RawPipelineDescriptor {
    _constants: Vec<sys::WGPUConstantEntry>,
    desc: sys::WGPUComputePipelineDescriptor,
}

fn raw_descriptor(d: &ComputePipelineDescriptor<'_>) -> RawPipelineDescriptor {
    let constants: Vec<sys::WGPUConstantEntry> = d
        .constants
        .iter()
        .map(|(key, value)| sys::WGPUConstantEntry {
            nextInChain: std::ptr::null_mut(),
            key: sys::WGPUStringView::new(key),
            value: *value,
        })
        .collect();
    let desc = sys::WGPUComputePipelineDescriptor {
        nextInChain: std::ptr::null_mut(),
        label: strings::to_view(d.label),
        layout: d.layout.map_or(std::ptr::null_mut(), |l| l.as_raw()),
        compute: sys::WGPUComputeState {
            nextInChain: std::ptr::null_mut(),
            module: d.module.as_raw(),
            entryPoint: sys::WGPUStringView::new(d.entry_point),
            constantCount: constants.len(),
            constants: constants.as_ptr(),
        },
    };
    RawPipelineDescriptor {
        _constants: constants,
        desc,
    }
}

impl Device {
    /// Creates a compute pipeline, blocking until it is ready. Errors (a missing entry point,
    /// an unknown override, a workgroup size over the limits, …) come back as values.
    pub fn create_compute_pipeline(&self, desc: &ComputePipelineDescriptor<'_>) -> Result<ComputePipeline> {
        let raw = raw_descriptor(desc);
        self.scoped(|| {
            // SAFETY: a valid device; the descriptor and its storage live during the call.
            ComputePipeline::wrap(unsafe { sys::wgpuDeviceCreateComputePipeline(self.as_raw(), &raw.desc) })
        })
    }

    /// Creates a compute pipeline without blocking; compilation may run on Dawn's threads.
    pub fn create_compute_pipeline_async(&self, desc: &ComputePipelineDescriptor<'_>) -> GpuFuture<ComputePipeline> {
        if let Err(error) = self.check_lost() {
            return GpuFuture::ready(self.instance(), Err(error));
        }
        let raw = raw_descriptor(desc);
        let (slot, userdata) = future::slot::<ComputePipeline>();
        let callback = sys::WGPUCreateComputePipelineAsyncCallbackInfo {
            nextInChain: std::ptr::null_mut(),
            mode: sys::WGPUCallbackMode::AllowSpontaneous,
            callback: Some(on_pipeline),
            userdata1: userdata,
            userdata2: std::ptr::null_mut(),
        };
        // SAFETY: a valid device; the descriptor lives during the call; the callback gets
        // `userdata` back exactly once.
        let id = unsafe { sys::wgpuDeviceCreateComputePipelineAsync(self.as_raw(), &raw.desc, callback) };
        GpuFuture::new(self.instance(), id, slot)
    }
}

unsafe extern "C" fn on_pipeline(
    status: sys::WGPUCreatePipelineAsyncStatus,
    pipeline: sys::WGPUComputePipeline,
    message: sys::WGPUStringView,
    userdata1: *mut c_void,
    _: *mut c_void,
) {
    future::guard(|| {
        let message = strings::from_view(message);
        let result = match status {
            sys::WGPUCreatePipelineAsyncStatus::Success if !pipeline.is_null() => {
                Ok(ComputePipeline::from_raw(pipeline))
            }
            sys::WGPUCreatePipelineAsyncStatus::ValidationError => Err(Error::Validation(message)),
            sys::WGPUCreatePipelineAsyncStatus::CallbackCancelled => Err(Error::Cancelled(message)),
            _ => Err(Error::Internal(message)),
        };
        // SAFETY: `userdata1` came from `future::slot`; called once.
        unsafe { future::complete(userdata1, result) };
    });
}

impl ComputePipeline {
    /// The layout of bind group `index` (for pipelines with an automatic layout).
    pub fn bind_group_layout(&self, device: &Device, index: u32) -> Result<BindGroupLayout> {
        device.scoped(|| {
            // SAFETY: a valid pipeline; GetBindGroupLayout returns a new reference.
            BindGroupLayout::wrap(unsafe { sys::wgpuComputePipelineGetBindGroupLayout(self.as_raw(), index) })
        })
    }
}
