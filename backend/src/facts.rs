//! The device as the planners see it: one vocabulary for every op. [`DeviceFacts`] is plain
//! data taken once from a context's capabilities ([`DeviceFacts::of`]), so plans are pure
//! functions of (problem, facts, tuning), testable without a GPU and for devices one does not
//! have.

use dawn::ComponentType;

use crate::context::Capabilities;

/// A subgroup-matrix shape with f16 inputs (rows of the left and result, columns of the right
/// and result, depth), and the result types the adapter offers for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatrixConfig {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    /// The adapter offers this shape with f32 results (in a plan: the kernel accumulates in f32).
    pub f32_result: bool,
    /// The adapter offers this shape with f16 results.
    pub f16_result: bool,
}

/// What the planners need to know about the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceFacts {
    pub shader_f16: bool,
    pub subgroups: bool,
    pub subgroup_min_size: u32,
    pub subgroup_max_size: u32,
    /// The f16 subgroup-matrix config the kernels use, if any (and not masked off).
    pub subgroup_matrix: Option<MatrixConfig>,
    /// maxComputeWorkgroupStorageSize.
    pub max_workgroup_storage: u32,
    /// maxComputeInvocationsPerWorkgroup.
    pub max_invocations: u32,
    /// maxComputeWorkgroupSizeX.
    pub max_workgroup_size_x: u32,
    /// maxComputeWorkgroupsPerDimension.
    pub max_workgroups_per_dim: u32,
    /// maxStorageBufferBindingSize.
    pub max_storage_binding: u64,
    /// A CPU adapter (lavapipe): little parallelism, so few splits of long work.
    pub cpu: bool,
}

impl DeviceFacts {
    /// The facts of a context's device.
    pub fn of(caps: &Capabilities) -> DeviceFacts {
        let limits = &caps.limits;
        let offers = |c: &dawn::SubgroupMatrixConfig, result: ComponentType| {
            c.result == result
                || caps.info.subgroup_matrix_configs.iter().any(|o| {
                    (o.m, o.n, o.k) == (c.m, c.n, c.k) && o.component == ComponentType::F16 && o.result == result
                })
        };
        DeviceFacts {
            shader_f16: caps.shader_f16,
            subgroups: caps.subgroups,
            subgroup_min_size: caps.info.subgroup_min_size,
            subgroup_max_size: caps.info.subgroup_max_size,
            subgroup_matrix: caps.subgroup_matrix.map(|c| MatrixConfig {
                m: c.m,
                n: c.n,
                k: c.k,
                f32_result: offers(&c, ComponentType::F32),
                f16_result: offers(&c, ComponentType::F16),
            }),
            max_workgroup_storage: limits.max_compute_workgroup_storage_size,
            max_invocations: limits.max_compute_invocations_per_workgroup,
            max_workgroup_size_x: limits.max_compute_workgroup_size_x,
            max_workgroups_per_dim: limits.max_compute_workgroups_per_dimension,
            max_storage_binding: limits.max_storage_buffer_binding_size,
            cpu: caps.info.adapter_type == dawn::AdapterType::Cpu,
        }
    }

    /// The smallest subgroup size, at least 1.
    pub fn subgroup_min(&self) -> u32 {
        self.subgroup_min_size.max(1)
    }

    /// The largest subgroup size, at least the smallest and 1.
    pub fn subgroup_max(&self) -> u32 {
        self.subgroup_max_size.max(self.subgroup_min_size).max(1)
    }

    /// Threads a one-dimensional workgroup may have.
    pub fn max_threads(&self) -> u32 {
        self.max_invocations.min(self.max_workgroup_size_x)
    }
}
