//! Compiled kernels: one compute pipeline per shader variant, cached per device.
//!
//! Every kernel has an explicit layout: its storage buffers in binding order (read-only inputs,
//! then read-write outputs), then a uniform parameter block with a dynamic offset, so one bind
//! group serves every dispatch whose buffers are the same. Kernels of the grid formats also bind
//! the lookup-table buffer (`format::wgsl_tables`), which the stream supplies.

use std::collections::HashMap;
use std::sync::Arc;

use dawn::{
    BindGroupLayout, BindGroupLayoutEntry, BufferBindingType, ComputePipeline, ComputePipelineDescriptor, Device,
};
use parking_lot::Mutex;

use crate::error::{BackendError, Result};
use crate::format::wgsl_tables;
use crate::shader_lib::ShaderVariant;

/// Bytes of the uniform parameter window each dispatch sees.
pub const PARAMS_BYTES: u64 = 256;

/// How a kernel uses one storage binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// `var<storage, read>`.
    Read,
    /// `var<storage, read_write>`.
    ReadWrite,
}

/// A compiled shader variant.
#[derive(Debug)]
pub struct Kernel {
    pub variant: ShaderVariant,
    pub pipeline: ComputePipeline,
    pub layout: BindGroupLayout,
    /// The storage bindings, in order (the parameter block follows them).
    pub storage: Vec<Access>,
    /// Whether the shader reads the lookup-table buffer (bound at `TABLES_BINDING`).
    pub reads_tables: bool,
}

/// The kernels of one device, by variant.
#[derive(Debug, Default)]
pub struct KernelCache {
    kernels: Mutex<HashMap<ShaderVariant, Arc<Kernel>>>,
}

impl KernelCache {
    /// The kernel for `variant`, compiling it on first use. Compilation errors name the variant.
    pub fn get(&self, device: &Device, variant: &ShaderVariant, storage: &[Access]) -> Result<Arc<Kernel>> {
        if let Some(kernel) = self.kernels.lock().get(variant) {
            return Ok(Arc::clone(kernel));
        }
        let kernel = Arc::new(compile(device, variant, storage)?);
        self.kernels.lock().insert(variant.clone(), Arc::clone(&kernel));
        Ok(kernel)
    }

    /// How many kernels are compiled.
    pub fn len(&self) -> usize {
        self.kernels.lock().len()
    }

    /// Whether no kernel is compiled yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn compile(device: &Device, variant: &ShaderVariant, storage: &[Access]) -> Result<Kernel> {
    let key = variant.to_string();
    let shader_error = |message: String| BackendError::Shader {
        variant: key.clone(),
        message,
    };
    let wgsl = variant.render().map_err(|e| shader_error(e.to_string()))?;
    let module = device
        .create_shader_module(Some(&key), &wgsl)
        .map_err(|e| shader_error(e.to_string()))?;
    let mut entries: Vec<BindGroupLayoutEntry> = storage
        .iter()
        .enumerate()
        .map(|(i, access)| {
            let ty = match access {
                Access::Read => BufferBindingType::ReadOnlyStorage,
                Access::ReadWrite => BufferBindingType::Storage,
            };
            BindGroupLayoutEntry::buffer(i as u32, ty)
        })
        .collect();
    entries.push(BindGroupLayoutEntry {
        binding: storage.len() as u32,
        ty: BufferBindingType::Uniform,
        has_dynamic_offset: true,
        min_binding_size: 0,
    });
    let reads_tables = wgsl_tables::reads_tables(&wgsl);
    if reads_tables {
        entries.push(BindGroupLayoutEntry::buffer(
            wgsl_tables::TABLES_BINDING,
            BufferBindingType::ReadOnlyStorage,
        ));
    }
    let layout = device
        .create_bind_group_layout(Some(&key), &entries)
        .map_err(|e| shader_error(e.to_string()))?;
    let pipeline_layout = device
        .create_pipeline_layout(Some(&key), &[&layout])
        .map_err(|e| shader_error(e.to_string()))?;
    let pipeline = device
        .create_compute_pipeline(&ComputePipelineDescriptor {
            label: Some(&key),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: "main",
            constants: &[],
        })
        .map_err(|e| shader_error(e.to_string()))?;
    Ok(Kernel {
        variant: variant.clone(),
        pipeline,
        layout,
        storage: storage.to_vec(),
        reads_tables,
    })
}
