//! The device as the planners see it: one vocabulary for every op. [`DeviceFacts`] is plain
//! data taken once from a context's capabilities ([`DeviceFacts::of`]), so plans are pure
//! functions of (problem, facts, tuning), testable without a GPU and for devices one does not
//! have.

use dawn::{ComponentType, SubgroupMatrixConfig};

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

impl MatrixConfig {
    /// The config the kernels use when none is forced: the first of the adapter's `reported`
    /// configs with f16 components (the kernels' left and right matrices are f16).
    pub fn default_choice(reported: &[SubgroupMatrixConfig]) -> Option<&SubgroupMatrixConfig> {
        reported.iter().find(|c| c.component == ComponentType::F16)
    }

    /// `chosen`'s shape with the result types the adapter offers for f16 components of that
    /// shape among `reported` (a Vulkan driver may list f16 and f32 results as two configs;
    /// Metal offers f16 components with f16 results only).
    pub fn of(chosen: &SubgroupMatrixConfig, reported: &[SubgroupMatrixConfig]) -> MatrixConfig {
        let offers = |result: ComponentType| {
            (chosen.component == ComponentType::F16 && chosen.result == result)
                || reported.iter().any(|o| {
                    (o.m, o.n, o.k) == (chosen.m, chosen.n, chosen.k)
                        && o.component == ComponentType::F16
                        && o.result == result
                })
        };
        MatrixConfig {
            m: chosen.m,
            n: chosen.n,
            k: chosen.k,
            f32_result: offers(ComponentType::F32),
            f16_result: offers(ComponentType::F16),
        }
    }
}

impl DeviceFacts {
    /// The facts of a context's device.
    pub fn of(caps: &Capabilities) -> DeviceFacts {
        let limits = &caps.limits;
        DeviceFacts {
            shader_f16: caps.shader_f16,
            subgroups: caps.subgroups,
            subgroup_min_size: caps.info.subgroup_min_size,
            subgroup_max_size: caps.info.subgroup_max_size,
            subgroup_matrix: caps
                .subgroup_matrix
                .map(|c| MatrixConfig::of(&c, &caps.info.subgroup_matrix_configs)),
            max_workgroup_storage: limits.max_compute_workgroup_storage_size,
            max_invocations: limits.max_compute_invocations_per_workgroup,
            max_workgroup_size_x: limits.max_compute_workgroup_size_x,
            max_workgroups_per_dim: limits.max_compute_workgroups_per_dimension,
            max_storage_binding: limits.max_storage_buffer_binding_size,
            cpu: caps.info.adapter_type == dawn::AdapterType::Cpu,
        }
    }

    /// Fails, naming the first fact, unless these facts claim nothing the device `actual`
    /// describes lacks: features and limits at most the device's, the same subgroup sizes (the
    /// kernels size workgroup arrays by them), and no subgroup-matrix shape or result type but
    /// the device's. Plans for such facts only use what the device has: what an op run with facts
    /// of its own (`mul_mat_with`, `flash_attn_ext_with`) must check, since the backend's device
    /// runs without the validation and robustness that would otherwise catch a kernel the device
    /// cannot run.
    pub fn check_within(&self, actual: &DeviceFacts) -> Result<(), String> {
        let claim = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(format!("{what} ({self:?}, device {actual:?})"))
            }
        };
        claim(
            !self.shader_f16 || actual.shader_f16,
            "shader_f16 on a device without it",
        )?;
        claim(
            !self.subgroups || actual.subgroups,
            "subgroups on a device without them",
        )?;
        claim(
            (self.subgroup_min_size, self.subgroup_max_size) == (actual.subgroup_min_size, actual.subgroup_max_size),
            "subgroup sizes other than the device's",
        )?;
        if let Some(c) = self.subgroup_matrix {
            let ok = actual.subgroup_matrix.is_some_and(|a| {
                (c.m, c.n, c.k) == (a.m, a.n, a.k) && (!c.f32_result || a.f32_result) && (!c.f16_result || a.f16_result)
            });
            claim(ok, "a subgroup-matrix config the device does not use")?;
        }
        claim(
            self.max_workgroup_storage <= actual.max_workgroup_storage,
            "more workgroup storage than the device's",
        )?;
        claim(
            self.max_invocations <= actual.max_invocations && self.max_workgroup_size_x <= actual.max_workgroup_size_x,
            "larger workgroups than the device's",
        )?;
        claim(
            self.max_workgroups_per_dim <= actual.max_workgroups_per_dim,
            "more workgroups per dimension than the device's",
        )?;
        claim(
            self.max_storage_binding <= actual.max_storage_binding,
            "larger bindings than the device's",
        )
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
