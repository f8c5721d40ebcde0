//! Plain values shared by several objects: features, backends, limits, usages.

use std::fmt;

use dawn_sys as sys;

/// A device feature (`WGPUFeatureName`). The constants are those GPU compute cares about; any
/// other value Dawn reports is kept as is and printed by number.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Feature(pub(crate) sys::WGPUFeatureName);

impl Feature {
    /// f16 in shaders.
    pub const SHADER_F16: Feature = Feature(sys::WGPUFeatureName::ShaderF16);
    /// Subgroup operations in shaders.
    pub const SUBGROUPS: Feature = Feature(sys::WGPUFeatureName::Subgroups);
    /// Timestamp queries.
    pub const TIMESTAMP_QUERY: Feature = Feature(sys::WGPUFeatureName::TimestampQuery);
    /// Calls on one device from several threads at once (Dawn serialises them).
    pub const IMPLICIT_DEVICE_SYNCHRONIZATION: Feature = Feature(sys::WGPUFeatureName::ImplicitDeviceSynchronization);
    /// Dawn's experimental subgroup matrices (cooperative matrices); needs `allow_unsafe_apis`.
    pub const SUBGROUP_MATRIX: Feature = Feature(sys::WGPUFeatureName::ChromiumExperimentalSubgroupMatrix);
    /// Timestamps inside passes.
    pub const TIMESTAMP_QUERY_INSIDE_PASSES: Feature =
        Feature(sys::WGPUFeatureName::ChromiumExperimentalTimestampQueryInsidePasses);
    /// Dawn's internal usages.
    pub const DAWN_INTERNAL_USAGES: Feature = Feature(sys::WGPUFeatureName::DawnInternalUsages);
    /// Mappable buffers with other usages (storage, uniform, …).
    pub const BUFFER_MAP_EXTENDED_USAGES: Feature = Feature(sys::WGPUFeatureName::BufferMapExtendedUsages);
    /// Shader subgroup-size control.
    pub const SUBGROUP_SIZE_CONTROL: Feature = Feature(sys::WGPUFeatureName::SubgroupSizeControl);
    /// Core WebGPU features and limits (not compatibility mode).
    pub const CORE_FEATURES_AND_LIMITS: Feature = Feature(sys::WGPUFeatureName::CoreFeaturesAndLimits);
    /// Dawn-specific limits such as `maxSubgroupSize` can be queried.
    pub const DAWN_NATIVE: Feature = Feature(sys::WGPUFeatureName::DawnNative);

    /// The feature's name as Dawn's header spells it (`ShaderF16`), if this Dawn knows it.
    pub fn name(self) -> Option<&'static str> {
        sys::feature_name(self.0.0)
    }
}

impl Feature {
    /// The raw value.
    pub fn to_raw(self) -> sys::WGPUFeatureName {
        self.0
    }
}

impl fmt::Debug for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "Feature({:#x})", self.0.0),
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// An instance feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InstanceFeature {
    /// `WaitAny` with a non-zero timeout. Always enabled by [`crate::Instance::new`].
    TimedWaitAny,
    /// Shader modules may use SPIR-V (not needed for WGSL).
    ShaderSourceSpirv,
    /// Several instances may share one adapter.
    MultipleDevicesPerAdapter,
}

impl InstanceFeature {
    pub(crate) fn to_raw(self) -> sys::WGPUInstanceFeatureName {
        match self {
            InstanceFeature::TimedWaitAny => sys::WGPUInstanceFeatureName::TimedWaitAny,
            InstanceFeature::ShaderSourceSpirv => sys::WGPUInstanceFeatureName::ShaderSourceSPIRV,
            InstanceFeature::MultipleDevicesPerAdapter => sys::WGPUInstanceFeatureName::MultipleDevicesPerAdapter,
        }
    }
}

/// The native API under an adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendType {
    /// Dawn's null backend: accepts calls but runs nothing (for testing).
    Null,
    /// Another WebGPU implementation underneath (as in a browser via Emscripten).
    WebGpu,
    /// Direct3D 11.
    D3D11,
    /// Direct3D 12.
    D3D12,
    /// Apple's Metal.
    Metal,
    /// Vulkan.
    Vulkan,
    /// Desktop OpenGL.
    OpenGl,
    /// OpenGL ES.
    OpenGles,
    /// A value this crate does not know.
    Other(u32),
}

impl BackendType {
    pub(crate) fn from_raw(raw: sys::WGPUBackendType) -> Self {
        use sys::WGPUBackendType as B;
        match raw {
            B::Null => Self::Null,
            B::WebGPU => Self::WebGpu,
            B::D3D11 => Self::D3D11,
            B::D3D12 => Self::D3D12,
            B::Metal => Self::Metal,
            B::Vulkan => Self::Vulkan,
            B::OpenGL => Self::OpenGl,
            B::OpenGLES => Self::OpenGles,
            other => Self::Other(other.0),
        }
    }

    pub(crate) fn to_raw(self) -> sys::WGPUBackendType {
        use sys::WGPUBackendType as B;
        match self {
            Self::Null => B::Null,
            Self::WebGpu => B::WebGPU,
            Self::D3D11 => B::D3D11,
            Self::D3D12 => B::D3D12,
            Self::Metal => B::Metal,
            Self::Vulkan => B::Vulkan,
            Self::OpenGl => B::OpenGL,
            Self::OpenGles => B::OpenGLES,
            Self::Other(v) => sys::WGPUBackendType(v),
        }
    }

    /// The native backends, in the order [`crate::Instance::enumerate_adapters`] asks for them.
    /// Not Dawn's WebGPU-on-WebGPU backend, which a plain request cannot select (Dawn warns that
    /// it needs options of its own), nor the Null backend, which computes nothing.
    pub(crate) const ALL: [BackendType; 6] = [
        Self::Vulkan,
        Self::Metal,
        Self::D3D12,
        Self::D3D11,
        Self::OpenGl,
        Self::OpenGles,
    ];
}

/// What kind of processor an adapter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdapterType {
    /// A GPU with its own memory.
    DiscreteGpu,
    /// A GPU that shares memory with the CPU.
    IntegratedGpu,
    /// A software implementation, such as lavapipe.
    Cpu,
    /// Dawn does not say.
    Unknown,
}

impl AdapterType {
    pub(crate) fn from_raw(raw: sys::WGPUAdapterType) -> Self {
        match raw {
            sys::WGPUAdapterType::DiscreteGPU => Self::DiscreteGpu,
            sys::WGPUAdapterType::IntegratedGPU => Self::IntegratedGpu,
            sys::WGPUAdapterType::CPU => Self::Cpu,
            _ => Self::Unknown,
        }
    }
}

/// Which adapter to prefer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PowerPreference {
    /// No preference; Dawn chooses.
    #[default]
    Undefined,
    /// Prefer a power-saving adapter, such as an integrated GPU.
    LowPower,
    /// Prefer a fast adapter, such as a discrete GPU.
    HighPerformance,
}

impl PowerPreference {
    pub(crate) fn to_raw(self) -> sys::WGPUPowerPreference {
        match self {
            Self::Undefined => sys::WGPUPowerPreference::Undefined,
            Self::LowPower => sys::WGPUPowerPreference::LowPower,
            Self::HighPerformance => sys::WGPUPowerPreference::HighPerformance,
        }
    }
}

/// The element type of a subgroup matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ComponentType {
    /// 32-bit float.
    F32,
    /// 16-bit float.
    F16,
    /// 32-bit unsigned integer.
    U32,
    /// 32-bit signed integer.
    I32,
    /// 8-bit unsigned integer.
    U8,
    /// 8-bit signed integer.
    I8,
    /// A value this crate does not know.
    Other(u32),
}

impl ComponentType {
    pub(crate) fn from_raw(raw: sys::WGPUSubgroupMatrixComponentType) -> Self {
        use sys::WGPUSubgroupMatrixComponentType as C;
        match raw {
            C::F32 => Self::F32,
            C::F16 => Self::F16,
            C::U32 => Self::U32,
            C::I32 => Self::I32,
            C::U8 => Self::U8,
            C::I8 => Self::I8,
            other => Self::Other(other.0),
        }
    }
}

impl fmt::Display for ComponentType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::F32 => f.write_str("f32"),
            Self::F16 => f.write_str("f16"),
            Self::U32 => f.write_str("u32"),
            Self::I32 => f.write_str("i32"),
            Self::U8 => f.write_str("u8"),
            Self::I8 => f.write_str("i8"),
            Self::Other(v) => write!(f, "component-{v:#x}"),
        }
    }
}

/// One shape and type combination an adapter's subgroup matrices support: a left matrix of
/// `m`×`k` and a right matrix of `k`×`n` `component`s give an `m`×`n` result of `result`s.
///
/// In WGSL the type parameters list columns before rows: `subgroup_matrix_left<T, K, M>`,
/// `subgroup_matrix_right<T, N, K>`, `subgroup_matrix_result<R, N, M>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubgroupMatrixConfig {
    /// Rows of the left matrix and of the result.
    pub m: u32,
    /// Columns of the right matrix and of the result.
    pub n: u32,
    /// Columns of the left matrix and rows of the right matrix.
    pub k: u32,
    /// The element type of the left and right matrices.
    pub component: ComponentType,
    /// The element type of the result matrix.
    pub result: ComponentType,
}

impl fmt::Display for SubgroupMatrixConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}x{}x{} {}->{}",
            self.m, self.n, self.k, self.component, self.result
        )
    }
}

macro_rules! limits {
    ($($(#[$doc:meta])* $field:ident: $ty:ty = $raw:ident,)*) => {
        /// Resource limits of an adapter or device (`WGPULimits`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct Limits {
            $($(#[$doc])* pub $field: $ty,)*
        }

        impl Limits {
            pub(crate) fn from_raw(raw: &sys::WGPULimits) -> Self {
                Limits { $($field: raw.$raw,)* }
            }

            pub(crate) fn to_raw(self) -> sys::WGPULimits {
                sys::WGPULimits { nextInChain: std::ptr::null_mut(), $($raw: self.$field,)* }
            }

            /// Every limit as (WebGPU name, value), for printing.
            pub fn entries(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($raw), u64::from(self.$field)),)*]
            }
        }
    };
}

limits! {
    /// The largest width of a 1D texture.
    max_texture_dimension_1d: u32 = maxTextureDimension1D,
    /// The largest width and height of a 2D texture.
    max_texture_dimension_2d: u32 = maxTextureDimension2D,
    /// The largest width, height and depth of a 3D texture.
    max_texture_dimension_3d: u32 = maxTextureDimension3D,
    /// The most array layers of a texture.
    max_texture_array_layers: u32 = maxTextureArrayLayers,
    /// The most bind groups a pipeline layout may have.
    max_bind_groups: u32 = maxBindGroups,
    /// The most bind groups and vertex buffers a render pipeline may use together.
    max_bind_groups_plus_vertex_buffers: u32 = maxBindGroupsPlusVertexBuffers,
    /// Binding numbers in a bind group layout must be below this.
    max_bindings_per_bind_group: u32 = maxBindingsPerBindGroup,
    /// The most uniform bindings with dynamic offsets in a pipeline layout.
    max_dynamic_uniform_buffers_per_pipeline_layout: u32 = maxDynamicUniformBuffersPerPipelineLayout,
    /// The most storage bindings with dynamic offsets in a pipeline layout.
    max_dynamic_storage_buffers_per_pipeline_layout: u32 = maxDynamicStorageBuffersPerPipelineLayout,
    /// The most sampled textures one shader stage may use.
    max_sampled_textures_per_shader_stage: u32 = maxSampledTexturesPerShaderStage,
    /// The most samplers one shader stage may use.
    max_samplers_per_shader_stage: u32 = maxSamplersPerShaderStage,
    /// The most storage buffers one shader stage may use.
    max_storage_buffers_per_shader_stage: u32 = maxStorageBuffersPerShaderStage,
    /// The most storage textures one shader stage may use.
    max_storage_textures_per_shader_stage: u32 = maxStorageTexturesPerShaderStage,
    /// The most uniform buffers one shader stage may use.
    max_uniform_buffers_per_shader_stage: u32 = maxUniformBuffersPerShaderStage,
    /// The largest range of a buffer one uniform binding can cover.
    max_uniform_buffer_binding_size: u64 = maxUniformBufferBindingSize,
    /// The largest range of a buffer one storage binding can cover.
    max_storage_buffer_binding_size: u64 = maxStorageBufferBindingSize,
    /// Uniform bindings must start at a multiple of this.
    min_uniform_buffer_offset_alignment: u32 = minUniformBufferOffsetAlignment,
    /// Storage bindings must start at a multiple of this.
    min_storage_buffer_offset_alignment: u32 = minStorageBufferOffsetAlignment,
    /// The most vertex buffers a render pipeline may use.
    max_vertex_buffers: u32 = maxVertexBuffers,
    /// The largest buffer.
    max_buffer_size: u64 = maxBufferSize,
    /// The most vertex attributes of a render pipeline, over all its vertex buffers.
    max_vertex_attributes: u32 = maxVertexAttributes,
    /// The largest stride between elements of a vertex buffer.
    max_vertex_buffer_array_stride: u32 = maxVertexBufferArrayStride,
    /// The most variables passed from the vertex to the fragment stage.
    max_inter_stage_shader_variables: u32 = maxInterStageShaderVariables,
    /// The most color attachments of a render pass.
    max_color_attachments: u32 = maxColorAttachments,
    /// The most bytes one sample may take over all color attachments.
    max_color_attachment_bytes_per_sample: u32 = maxColorAttachmentBytesPerSample,
    /// Bytes of `var<workgroup>` memory one workgroup may use.
    max_compute_workgroup_storage_size: u32 = maxComputeWorkgroupStorageSize,
    /// The most invocations in one workgroup (the product of its `@workgroup_size`).
    max_compute_invocations_per_workgroup: u32 = maxComputeInvocationsPerWorkgroup,
    /// The largest x of `@workgroup_size`.
    max_compute_workgroup_size_x: u32 = maxComputeWorkgroupSizeX,
    /// The largest y of `@workgroup_size`.
    max_compute_workgroup_size_y: u32 = maxComputeWorkgroupSizeY,
    /// The largest z of `@workgroup_size`.
    max_compute_workgroup_size_z: u32 = maxComputeWorkgroupSizeZ,
    /// The largest workgroup count of one dispatch, per dimension.
    max_compute_workgroups_per_dimension: u32 = maxComputeWorkgroupsPerDimension,
    /// Bytes of immediate data (push constants) a pipeline may use.
    max_immediate_size: u32 = maxImmediateSize,
}

/// How a buffer may be used (`WGPUBufferUsage` bit flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BufferUsage(pub(crate) u64);

impl BufferUsage {
    /// The buffer can be mapped for reading (only together with COPY_DST, unless
    /// [`Feature::BUFFER_MAP_EXTENDED_USAGES`] is enabled).
    pub const MAP_READ: Self = Self(sys::WGPUBufferUsage_MapRead);
    /// The buffer can be mapped for writing (only together with COPY_SRC, unless
    /// [`Feature::BUFFER_MAP_EXTENDED_USAGES`] is enabled).
    pub const MAP_WRITE: Self = Self(sys::WGPUBufferUsage_MapWrite);
    /// The buffer can be the source of a copy.
    pub const COPY_SRC: Self = Self(sys::WGPUBufferUsage_CopySrc);
    /// The buffer can be the destination of a copy or of [`crate::Device::write_buffer`].
    pub const COPY_DST: Self = Self(sys::WGPUBufferUsage_CopyDst);
    /// The buffer can be an index buffer (render pipelines).
    pub const INDEX: Self = Self(sys::WGPUBufferUsage_Index);
    /// The buffer can be a vertex buffer (render pipelines).
    pub const VERTEX: Self = Self(sys::WGPUBufferUsage_Vertex);
    /// The buffer can be bound as `var<uniform>`.
    pub const UNIFORM: Self = Self(sys::WGPUBufferUsage_Uniform);
    /// The buffer can be bound as `var<storage>`.
    pub const STORAGE: Self = Self(sys::WGPUBufferUsage_Storage);
    /// The buffer can hold the arguments of an indirect dispatch.
    pub const INDIRECT: Self = Self(sys::WGPUBufferUsage_Indirect);
    /// The buffer can receive resolved query results.
    pub const QUERY_RESOLVE: Self = Self(sys::WGPUBufferUsage_QueryResolve);

    /// Whether every bit of `other` is set in `self`.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for BufferUsage {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for BufferUsage {
    fn bitor_assign(&mut self, rhs: Self) {
        self.0 |= rhs.0;
    }
}

/// Whether a mapping is for reading or for writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MapMode {
    /// Map for reading (needs [`BufferUsage::MAP_READ`]).
    Read,
    /// Map for writing (needs [`BufferUsage::MAP_WRITE`]).
    Write,
}

impl MapMode {
    pub(crate) fn to_raw(self) -> sys::WGPUMapMode {
        match self {
            MapMode::Read => sys::WGPUMapMode_Read,
            MapMode::Write => sys::WGPUMapMode_Write,
        }
    }
}
