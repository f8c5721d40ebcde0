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
    /// The kind of device, for the measured defaults ([`crate::tuning::profiles`]).
    pub class: DeviceClass,
}

/// The kind of device a tuning profile is for: the vendor and, for NVIDIA, the generation,
/// taken from the adapter's info as ggml-vulkan classifies its devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceClass {
    /// H100, H200, GH200.
    NvidiaHopper,
    /// B200, RTX 50.
    NvidiaBlackwell,
    /// RTX 40, L4, L40.
    NvidiaAda,
    /// A100, RTX 30.
    NvidiaAmpere,
    /// Turing and before.
    NvidiaOlder,
    Amd,
    Intel,
    Apple,
    /// A software adapter (lavapipe, SwiftShader): few threads, so few splits of long work.
    Cpu,
    /// Any other vendor.
    Other,
}

/// PCI vendor ids.
const NVIDIA: u32 = 0x10de;
const AMD: u32 = 0x1002;
const INTEL: u32 = 0x8086;
const APPLE: u32 = 0x106b;

impl DeviceClass {
    /// The class of an adapter: CPU adapters by their type, then the PCI vendor id (or, on
    /// Metal, which reports none, Apple's family names), NVIDIA's generation from Dawn's
    /// architecture name (`gpu_info.json`: "ampere", "lovelace", "blackwell") or else from the
    /// device id's upper byte (Dawn names no architecture for Hopper's 0x23xx or the data-centre
    /// Blackwell's 0x29xx).
    pub fn classify(info: &dawn::AdapterInfo) -> DeviceClass {
        let arch = info.architecture.to_ascii_lowercase();
        if info.adapter_type == dawn::AdapterType::Cpu {
            return DeviceClass::Cpu;
        }
        match info.vendor_id {
            NVIDIA => match arch.as_str() {
                "hopper" => DeviceClass::NvidiaHopper,
                "blackwell" => DeviceClass::NvidiaBlackwell,
                "lovelace" => DeviceClass::NvidiaAda,
                "ampere" => DeviceClass::NvidiaAmpere,
                _ => match info.device_id & 0xff00 {
                    0x2300 => DeviceClass::NvidiaHopper,
                    0x2900 | 0x2b00 | 0x2c00 | 0x2d00 | 0x2f00 => DeviceClass::NvidiaBlackwell,
                    0x2600..=0x2800 => DeviceClass::NvidiaAda,
                    0x2000 | 0x2200 | 0x2400 | 0x2500 => DeviceClass::NvidiaAmpere,
                    _ => DeviceClass::NvidiaOlder,
                },
            },
            AMD => DeviceClass::Amd,
            INTEL => DeviceClass::Intel,
            APPLE => DeviceClass::Apple,
            _ if arch.starts_with("common-") || arch.starts_with("apple") || arch.starts_with("metal-") => {
                DeviceClass::Apple
            }
            _ => DeviceClass::Other,
        }
    }

    /// A software adapter.
    pub fn is_cpu(self) -> bool {
        self == DeviceClass::Cpu
    }
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
            class: DeviceClass::classify(&caps.info),
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

    /// A software adapter (lavapipe): little parallelism, so few splits of long work.
    pub fn cpu(&self) -> bool {
        self.class.is_cpu()
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

/// The devices tests plan for, as their adapters describe them.
#[doc(hidden)]
pub mod presets {
    use super::{DeviceClass, DeviceFacts, MatrixConfig};

    fn nvidia(class: DeviceClass, (m, n, k): (u32, u32, u32)) -> DeviceFacts {
        DeviceFacts {
            shader_f16: true,
            subgroups: true,
            subgroup_min_size: 32,
            subgroup_max_size: 32,
            subgroup_matrix: Some(MatrixConfig {
                m,
                n,
                k,
                f32_result: true,
                f16_result: true,
            }),
            max_workgroup_storage: 49152,
            max_invocations: 1024,
            max_workgroup_size_x: 1024,
            max_workgroups_per_dim: 65535,
            max_storage_binding: 2147483644,
            class,
        }
    }

    /// An H100 on Vulkan: 16x8x16 f16 subgroup matrices (f16 and f32 results), 32-wide
    /// subgroups, 48 KiB of workgroup memory.
    pub fn h100() -> DeviceFacts {
        nvidia(DeviceClass::NvidiaHopper, (16, 8, 16))
    }

    /// An H200 on Vulkan: as the H100, with the 16x16x16 config.
    pub fn h200() -> DeviceFacts {
        nvidia(DeviceClass::NvidiaHopper, (16, 16, 16))
    }

    /// Mesa's lavapipe: 8x8x8 subgroup matrices, 8-wide subgroups, 32 KiB, 128 MiB bindings.
    pub fn lavapipe() -> DeviceFacts {
        DeviceFacts {
            subgroup_min_size: 8,
            subgroup_max_size: 8,
            max_workgroup_storage: 32768,
            max_storage_binding: 1 << 27,
            class: DeviceClass::Cpu,
            ..with_config(h100(), (8, 8, 8))
        }
    }

    /// An Apple GPU on Metal (Apple7 and later): 8x8x8 f16 subgroup matrices with f16 results
    /// only, 32-wide SIMD groups, 32 KiB of threadgroup memory.
    pub fn apple() -> DeviceFacts {
        DeviceFacts {
            subgroup_matrix: Some(MatrixConfig {
                m: 8,
                n: 8,
                k: 8,
                f32_result: false,
                f16_result: true,
            }),
            max_workgroup_storage: 32768,
            max_storage_binding: 1 << 31,
            class: DeviceClass::Apple,
            ..h100()
        }
    }

    /// `d` without subgroup matrices.
    pub fn without_subgroup_matrix(d: DeviceFacts) -> DeviceFacts {
        DeviceFacts {
            subgroup_matrix: None,
            ..d
        }
    }

    /// `d` with an f16 subgroup-matrix config of shape (M, N, K), f16 and f32 results.
    pub fn with_config(d: DeviceFacts, (m, n, k): (u32, u32, u32)) -> DeviceFacts {
        DeviceFacts {
            subgroup_matrix: Some(MatrixConfig {
                m,
                n,
                k,
                f32_result: true,
                f16_result: true,
            }),
            ..d
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(adapter_type: dawn::AdapterType, vendor_id: u32, device_id: u32, architecture: &str) -> dawn::AdapterInfo {
        dawn::AdapterInfo {
            vendor: String::new(),
            architecture: architecture.to_owned(),
            device: String::new(),
            description: String::new(),
            backend: dawn::BackendType::Vulkan,
            adapter_type,
            vendor_id,
            device_id,
            subgroup_min_size: 32,
            subgroup_max_size: 32,
            subgroup_matrix_configs: Vec::new(),
        }
    }

    #[test]
    fn adapters_are_classified_by_type_vendor_and_generation() {
        use DeviceClass as C;
        use dawn::AdapterType::{Cpu, DiscreteGpu, IntegratedGpu};
        for (t, vendor, device, arch, class) in [
            (DiscreteGpu, NVIDIA, 0x2330, "", C::NvidiaHopper),    // H100 SXM
            (DiscreteGpu, NVIDIA, 0x2335, "", C::NvidiaHopper),    // H200
            (DiscreteGpu, NVIDIA, 0x2901, "", C::NvidiaBlackwell), // B200
            (DiscreteGpu, NVIDIA, 0x2b85, "blackwell", C::NvidiaBlackwell), // RTX 5090
            (DiscreteGpu, NVIDIA, 0x2684, "lovelace", C::NvidiaAda), // RTX 4090
            (DiscreteGpu, NVIDIA, 0x26b9, "", C::NvidiaAda),       // L40S
            (DiscreteGpu, NVIDIA, 0x20b0, "ampere", C::NvidiaAmpere), // A100
            (DiscreteGpu, NVIDIA, 0x1e04, "turing", C::NvidiaOlder),
            (DiscreteGpu, NVIDIA, 0x0000, "hopper", C::NvidiaHopper),
            (DiscreteGpu, AMD, 0x744c, "rdna-3", C::Amd),
            (IntegratedGpu, INTEL, 0x7d55, "xe-lpg", C::Intel),
            (IntegratedGpu, APPLE, 0, "common-3", C::Apple),
            (IntegratedGpu, 0, 0, "metal-3", C::Apple),
            (Cpu, 0x10005, 0, "software", C::Cpu), // lavapipe
            (Cpu, 0x1ae0, 0xc0de, "swiftshader", C::Cpu),
            (Cpu, NVIDIA, 0x2330, "", C::Cpu),
            (DiscreteGpu, 0x5143, 0x43050a01, "adreno-7xx", C::Other),
        ] {
            assert_eq!(
                DeviceClass::classify(&info(t, vendor, device, arch)),
                class,
                "{vendor:#x} {device:#x} {arch}"
            );
        }
    }

    #[test]
    fn presets_describe_their_devices() {
        use presets::*;
        assert!(lavapipe().cpu() && !h100().cpu() && !apple().cpu());
        assert_eq!(h100().subgroup_matrix.map(|c| (c.m, c.n, c.k)), Some((16, 8, 16)));
        assert_eq!(h200().subgroup_matrix.map(|c| (c.m, c.n, c.k)), Some((16, 16, 16)));
        assert_eq!(lavapipe().subgroup_matrix.map(|c| (c.m, c.n, c.k)), Some((8, 8, 8)));
        assert_eq!(
            (lavapipe().subgroup_max_size, lavapipe().max_workgroup_storage),
            (8, 32768)
        );
        assert!(!apple().subgroup_matrix.unwrap().f32_result);
        assert!(without_subgroup_matrix(h100()).subgroup_matrix.is_none());
        // Every preset claims no more than itself.
        for d in [h100(), h200(), lavapipe(), apple()] {
            d.check_within(&d).unwrap();
        }
    }
}
