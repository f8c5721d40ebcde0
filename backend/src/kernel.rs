//! Compiled kernels: one compute pipeline per shader variant, cached per device.
//!
//! Every kernel has an explicit layout: its storage buffers in binding order (read-only inputs,
//! then read-write outputs), then a uniform parameter block with a dynamic offset, so one bind
//! group serves every dispatch whose buffers are the same. Kernels of the grid formats also bind
//! the lookup-table buffer (`format::wgsl_tables`), which the stream supplies.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
pub struct Pipeline {
    pub variant: ShaderVariant,
    pub pipeline: ComputePipeline,
    pub layout: BindGroupLayout,
    /// The storage bindings, in order (the parameter block follows them).
    pub storage: Vec<Access>,
    /// Whether the shader reads the lookup-table buffer (bound at `TABLES_BINDING`).
    pub reads_tables: bool,
}

/// How many plans a [`PlanMemo`] remembers (the most recently used).
pub const PLAN_MEMO_ENTRIES: usize = 64;

/// The compiled kernels of recent op plans. An op that repeats (every layer of every token)
/// finds its kernels by comparing plans, instead of rebuilding its variants' defines and
/// hashing them on every record, which took over a third of the host's time per dispatch.
/// A plan's kernels are a function of the plan alone, so a hit is always the right answer.
#[derive(Debug)]
pub struct PlanMemo<P, V> {
    entries: Mutex<VecDeque<(P, V)>>,
}

impl<P, V> Default for PlanMemo<P, V> {
    fn default() -> Self {
        PlanMemo {
            entries: Mutex::new(VecDeque::new()),
        }
    }
}

impl<P: PartialEq + Clone, V: Clone> PlanMemo<P, V> {
    /// The value remembered for `plan`, or `make`'s (remembered when it succeeds).
    pub fn get_or_try_insert(&self, plan: &P, make: impl FnOnce() -> Result<V>) -> Result<V> {
        {
            let mut entries = self.entries.lock();
            if let Some(i) = entries.iter().position(|(p, _)| p == plan) {
                if i > 0
                    && let Some(hit) = entries.remove(i)
                {
                    entries.push_front(hit);
                }
                return Ok(entries[0].1.clone());
            }
        }
        // Made unlocked: it may compile, and `make` may use other memos.
        let value = make()?;
        let mut entries = self.entries.lock();
        entries.push_front((plan.clone(), value.clone()));
        entries.truncate(PLAN_MEMO_ENTRIES);
        Ok(value)
    }

    /// How many plans are remembered.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether no plan is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The kernels of one device, by variant.
#[derive(Debug, Default)]
pub struct PipelineCache {
    kernels: Mutex<HashMap<ShaderVariant, Arc<Pipeline>>>,
    /// Time spent compiling them, all together.
    compiling: Mutex<Duration>,
}

impl PipelineCache {
    /// The kernel for `variant`, compiling it on first use. Compilation errors name the variant.
    /// A compilation is logged (`log` crate, target `ggml_dawn::kernel`, level info) with its
    /// time: on a fresh driver cache the first use of a shape can take seconds.
    pub fn get(&self, device: &Device, variant: &ShaderVariant, storage: &[Access]) -> Result<Arc<Pipeline>> {
        if let Some(kernel) = self.kernels.lock().get(variant) {
            return Ok(Arc::clone(kernel));
        }
        let started = Instant::now();
        let kernel = Arc::new(compile(device, variant, storage)?);
        let took = started.elapsed();
        *self.compiling.lock() += took;
        log::info!("compiled kernel `{variant}` in {:.1} ms", took.as_secs_f64() * 1e3);
        self.kernels.lock().insert(variant.clone(), Arc::clone(&kernel));
        Ok(kernel)
    }

    /// The time spent compiling the kernels so far.
    pub fn compile_time(&self) -> Duration {
        *self.compiling.lock()
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

fn compile(device: &Device, variant: &ShaderVariant, storage: &[Access]) -> Result<Pipeline> {
    let wgsl = variant.render().map_err(|e| BackendError::Shader {
        variant: variant.to_string(),
        message: e.to_string(),
    })?;
    compile_wgsl(device, variant, &wgsl, storage)
}

/// Compiles `wgsl` (entry point `main`) with the explicit layout of the module's doc: `storage`
/// in binding order, then the dynamic-offset parameter block. Errors name `variant`.
pub(crate) fn compile_wgsl(
    device: &Device,
    variant: &ShaderVariant,
    wgsl: &str,
    storage: &[Access],
) -> Result<Pipeline> {
    let key = variant.to_string();
    let shader_error = |message: String| BackendError::Shader {
        variant: key.clone(),
        message,
    };
    let module = device
        .create_shader_module(Some(&key), wgsl)
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
    let reads_tables = wgsl_tables::reads_tables(wgsl);
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
    Ok(Pipeline {
        variant: variant.clone(),
        pipeline,
        layout,
        storage: storage.to_vec(),
        reads_tables,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_memo_remembers_successes_most_recent_first_and_forgets_failures() {
        let memo: PlanMemo<u32, u32> = PlanMemo::default();
        let made = std::cell::Cell::new(0);
        let make = |v: u32| {
            made.set(made.get() + 1);
            Ok(v * 10)
        };
        assert_eq!(memo.get_or_try_insert(&1, || make(1)).unwrap(), 10);
        assert_eq!(memo.get_or_try_insert(&1, || make(99)).unwrap(), 10);
        assert_eq!(made.get(), 1);
        let failed = memo.get_or_try_insert(&2, || Err(BackendError::InvalidOperands("no".into())));
        assert!(failed.is_err());
        assert_eq!(memo.len(), 1);
        assert_eq!(memo.get_or_try_insert(&2, || make(2)).unwrap(), 20);
        // Fill past the capacity while plan 1 keeps being used: it stays, plan 2 goes.
        for p in 3..3 + PLAN_MEMO_ENTRIES as u32 {
            memo.get_or_try_insert(&p, || make(p)).unwrap();
            memo.get_or_try_insert(&1, || make(99)).unwrap();
        }
        assert_eq!(memo.len(), PLAN_MEMO_ENTRIES);
        assert_eq!(memo.get_or_try_insert(&1, || make(99)).unwrap(), 10);
        assert_eq!(memo.get_or_try_insert(&2, || make(7)).unwrap(), 70);
    }
}
