//! Bind group layouts, bind groups and pipeline layouts, for compute buffers.

use dawn_sys as sys;

use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::handle::{device_child_is_thread_safe, handle};
use crate::strings;

handle!(
    /// The layout of one bind group.
    BindGroupLayout,
    sys::WGPUBindGroupLayout,
    sys::wgpuBindGroupLayoutAddRef,
    sys::wgpuBindGroupLayoutRelease
);
// Immutable once created; only passed to other creation calls.
device_child_is_thread_safe!(BindGroupLayout);
handle!(
    /// A set of buffers bound together.
    BindGroup,
    sys::WGPUBindGroup,
    sys::wgpuBindGroupAddRef,
    sys::wgpuBindGroupRelease
);
// Immutable once created; only passed to `ComputePass::set_bind_group`.
device_child_is_thread_safe!(BindGroup);
handle!(
    /// The bind group layouts of a pipeline.
    PipelineLayout,
    sys::WGPUPipelineLayout,
    sys::wgpuPipelineLayoutAddRef,
    sys::wgpuPipelineLayoutRelease
);
// Immutable once created; only passed to pipeline creation.
device_child_is_thread_safe!(PipelineLayout);

/// How a compute shader sees a buffer binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferBindingType {
    /// `var<uniform>`.
    Uniform,
    /// `var<storage, read_write>`.
    Storage,
    /// `var<storage, read>`.
    ReadOnlyStorage,
}

/// One entry of a bind group layout (visible to compute shaders).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindGroupLayoutEntry {
    /// The binding number, matching `@binding(n)` in the shader.
    pub binding: u32,
    /// How the shader sees the buffer.
    pub ty: BufferBindingType,
    /// Whether the offset is given when the bind group is set rather than in the bind group.
    pub has_dynamic_offset: bool,
    /// The smallest buffer range the binding accepts (0: no minimum).
    pub min_binding_size: u64,
}

impl BindGroupLayoutEntry {
    /// A plain buffer binding of `ty` at `binding`.
    pub fn buffer(binding: u32, ty: BufferBindingType) -> Self {
        BindGroupLayoutEntry {
            binding,
            ty,
            has_dynamic_offset: false,
            min_binding_size: 0,
        }
    }
}

/// One buffer range bound at `binding`.
#[derive(Debug, Clone, Copy)]
pub struct BindGroupEntry<'a> {
    /// The binding number, matching `@binding(n)` in the shader.
    pub binding: u32,
    /// The buffer to bind.
    pub buffer: &'a Buffer,
    /// Start of the range in bytes; a multiple of the device's offset alignment limits.
    pub offset: u64,
    /// `None`: to the end of the buffer.
    pub size: Option<u64>,
}

impl<'a> BindGroupEntry<'a> {
    /// The whole of `buffer` at `binding`.
    pub fn whole(binding: u32, buffer: &'a Buffer) -> Self {
        BindGroupEntry {
            binding,
            buffer,
            offset: 0,
            size: None,
        }
    }
}

impl Device {
    /// Creates a bind group layout for compute buffers.
    pub fn create_bind_group_layout(
        &self,
        label: Option<&str>,
        entries: &[BindGroupLayoutEntry],
    ) -> Result<BindGroupLayout> {
        let raw_entries: Vec<sys::WGPUBindGroupLayoutEntry> = entries
            .iter()
            .map(|e| sys::WGPUBindGroupLayoutEntry {
                binding: e.binding,
                visibility: sys::WGPUShaderStage_Compute,
                buffer: sys::WGPUBufferBindingLayout {
                    nextInChain: std::ptr::null_mut(),
                    type_: match e.ty {
                        BufferBindingType::Uniform => sys::WGPUBufferBindingType::Uniform,
                        BufferBindingType::Storage => sys::WGPUBufferBindingType::Storage,
                        BufferBindingType::ReadOnlyStorage => sys::WGPUBufferBindingType::ReadOnlyStorage,
                    },
                    hasDynamicOffset: u32::from(e.has_dynamic_offset),
                    minBindingSize: e.min_binding_size,
                },
                ..Default::default()
            })
            .collect();
        let desc = sys::WGPUBindGroupLayoutDescriptor {
            nextInChain: std::ptr::null_mut(),
            label: strings::to_view(label),
            entryCount: raw_entries.len(),
            entries: raw_entries.as_ptr(),
        };
        self.scoped(|| {
            // SAFETY: a valid device; the descriptor and entries live during the call.
            BindGroupLayout::wrap(unsafe { sys::wgpuDeviceCreateBindGroupLayout(self.as_raw(), &desc) })
        })
    }

    /// Creates a bind group. Ranges are checked against the buffers' sizes, the storage binding
    /// size limit and the offset alignments before Dawn sees them.
    pub fn create_bind_group(
        &self,
        label: Option<&str>,
        layout: &BindGroupLayout,
        entries: &[BindGroupEntry<'_>],
    ) -> Result<BindGroup> {
        let limits = self.limits();
        let mut raw_entries = Vec::with_capacity(entries.len());
        for e in entries {
            let size = e.size.unwrap_or_else(|| e.buffer.size().saturating_sub(e.offset));
            if e.offset.checked_add(size).is_none_or(|end| end > e.buffer.size()) {
                return Err(Error::InvalidArgument(format!(
                    "binding {}: {size} bytes at offset {} overrun a buffer of {} bytes",
                    e.binding,
                    e.offset,
                    e.buffer.size()
                )));
            }
            // The entry does not say whether it is a storage or a uniform binding (the layout
            // does), so only the looser of the two alignments is checked here; Dawn checks the
            // exact one.
            let align = u64::from(
                limits
                    .min_storage_buffer_offset_alignment
                    .min(limits.min_uniform_buffer_offset_alignment),
            );
            if align > 0 && e.offset % align != 0 {
                return Err(Error::InvalidArgument(format!(
                    "binding {}: offset {} is not a multiple of the offset alignment {align}",
                    e.binding, e.offset
                )));
            }
            if size > limits.max_storage_buffer_binding_size {
                return Err(Error::InvalidArgument(format!(
                    "binding {}: {size} bytes exceed max_storage_buffer_binding_size ({})",
                    e.binding, limits.max_storage_buffer_binding_size
                )));
            }
            raw_entries.push(sys::WGPUBindGroupEntry {
                binding: e.binding,
                buffer: e.buffer.as_raw(),
                offset: e.offset,
                size,
                ..Default::default()
            });
        }
        let desc = sys::WGPUBindGroupDescriptor {
            nextInChain: std::ptr::null_mut(),
            label: strings::to_view(label),
            layout: layout.as_raw(),
            entryCount: raw_entries.len(),
            entries: raw_entries.as_ptr(),
        };
        self.scoped_frequent(|| {
            // SAFETY: a valid device; the descriptor, entries and the handles they name live during the call.
            BindGroup::wrap(unsafe { sys::wgpuDeviceCreateBindGroup(self.as_raw(), &desc) })
        })
    }

    /// Creates a pipeline layout from bind group layouts (group 0, 1, …).
    pub fn create_pipeline_layout(&self, label: Option<&str>, groups: &[&BindGroupLayout]) -> Result<PipelineLayout> {
        let raw: Vec<sys::WGPUBindGroupLayout> = groups.iter().map(|g| g.as_raw()).collect();
        let desc = sys::WGPUPipelineLayoutDescriptor {
            nextInChain: std::ptr::null_mut(),
            label: strings::to_view(label),
            bindGroupLayoutCount: raw.len(),
            bindGroupLayouts: raw.as_ptr(),
            immediateSize: 0,
        };
        self.scoped(|| {
            // SAFETY: a valid device; the descriptor and layouts live during the call.
            PipelineLayout::wrap(unsafe { sys::wgpuDeviceCreatePipelineLayout(self.as_raw(), &desc) })
        })
    }
}
