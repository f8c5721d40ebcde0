//! Kernels of one's own, recorded on the context's stream in order with the backend's ops.
//!
//! A [`CustomKernel`] is WGSL with entry point `main` and this interface: storage bindings
//! `@group(0) @binding(i)`, one per tensor, `var<storage, read>` or `var<storage, read_write>` as
//! its [`Access`] says; then `@group(0) @binding(N) var<uniform> params: P;` (N = the number of
//! tensors). The backend fills the block: first one `u32` per tensor, the byte offset of the
//! tensor's element (0, 0, 0, 0) from the start of its binding (a tensor is bound from its
//! first byte rounded down to the device's binding alignment up to its last byte rounded up to
//! 4 bytes), then the caller's words. At most 64 words in all.

use std::sync::Arc;

use crate::context::GpuContext;
use crate::error::{BackendError, Result};
use crate::exec::BufferRange;
use crate::kernel::{Access, PARAMS_BYTES, Pipeline};
use crate::memory::{Binding, DeviceTensor};
use crate::params::KernelParams;

/// A kernel compiled from the caller's WGSL ([`GpuContext::compile_kernel`]).
#[derive(Debug, Clone)]
pub struct CustomKernel {
    name: String,
    kernel: Arc<Pipeline>,
}

impl CustomKernel {
    /// The name given at compilation (it names the kernel in errors).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tensors' accesses, in binding order.
    pub fn bindings(&self) -> &[Access] {
        &self.kernel.storage
    }
}

/// The parameter block as the stream uploads it: the tensors' starts, then the caller's words.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct CustomWords([u32; (PARAMS_BYTES / 4) as usize]);

impl KernelParams for CustomWords {
    const SHADER: &'static str = "";
    const FIELDS: &'static [(&'static str, &'static str)] = &[];
}

impl GpuContext {
    /// Compiles a kernel of one's own: `wgsl` with entry point `main` and the interface of
    /// [`CustomKernel`]'s module (`bindings` are its tensors' accesses, in binding order). A
    /// WGSL error is a [`BackendError::Shader`] naming the kernel (`custom,NAME=<name>`) with
    /// the compiler's messages.
    ///
    /// ```
    /// use ggml_dawn::kernel::Access;
    /// use ggml_dawn::{GgmlType, GpuContext};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = GpuContext::new(Default::default())?;
    /// let wgsl = r#"
    ///     @group(0) @binding(0) var<storage, read_write> y: array<f32>;
    ///     struct Params { y_start: u32, n: u32 }
    ///     @group(0) @binding(1) var<uniform> params: Params;
    ///     @compute @workgroup_size(64)
    ///     fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ///         if (gid.x < params.n) { y[params.y_start / 4u + gid.x] = f32(gid.x); }
    ///     }
    /// "#;
    /// let iota = ctx.compile_kernel("iota", wgsl, &[Access::ReadWrite])?;
    /// let y = ctx.zeros(GgmlType::F32, [5, 1, 1, 1])?;
    /// // SAFETY: invocations below n = 5 write y's 5 elements, from y's start; no other access.
    /// unsafe { ctx.record_kernel(&iota, &[&y], &[5], [1, 1, 1])? };
    /// assert_eq!(ctx.read_f32(&y)?, [0., 1., 2., 3., 4.]);
    /// assert!(ctx.compile_kernel("broken", "fn main( {", &[]).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn compile_kernel(&self, name: &str, wgsl: &str, bindings: &[Access]) -> Result<CustomKernel> {
        let variant = crate::variants::custom_kernel_key(name);
        let kernel = crate::kernel::compile_wgsl(&self.device, &variant, wgsl, bindings)?;
        Ok(CustomKernel {
            name: name.to_owned(),
            kernel: Arc::new(kernel),
        })
    }

    /// The bindings of `tensors` for `kernel`, checked: one per binding, of this device, and no
    /// read-write binding sharing bytes with any other (WebGPU forbids it in one dispatch).
    fn custom_bindings(&self, kernel: &CustomKernel, tensors: &[&DeviceTensor], words: usize) -> Result<Vec<Binding>> {
        let name = &kernel.name;
        let access = kernel.bindings();
        if tensors.len() != access.len() {
            return Err(BackendError::InvalidOperands(format!(
                "kernel `{name}` binds {} tensors, got {}",
                access.len(),
                tensors.len()
            )));
        }
        if tensors.len() + words > (PARAMS_BYTES / 4) as usize {
            return Err(BackendError::InvalidOperands(format!(
                "kernel `{name}`: {} starts and {words} parameter words pass the 64-word block",
                tensors.len()
            )));
        }
        self.check_operands(tensors)?;
        let limits = &self.capabilities().limits;
        let align = u64::from(limits.min_storage_buffer_offset_alignment);
        let bindings = tensors
            .iter()
            .map(|t| t.binding(align, limits.max_storage_buffer_binding_size))
            .collect::<Result<Vec<_>>>()?;
        for (i, (t, b)) in tensors.iter().zip(&bindings).enumerate() {
            if access[i] != Access::ReadWrite {
                continue;
            }
            for (j, (u, c)) in tensors.iter().zip(&bindings).enumerate() {
                let same_buffer = t.buffer().as_raw() == u.buffer().as_raw();
                let overlap = b.offset < c.offset + c.size && c.offset < b.offset + b.size;
                if i != j && same_buffer && overlap {
                    return Err(BackendError::Overlap(format!(
                        "kernel `{name}`: read-write binding {i} shares bytes with binding {j}"
                    )));
                }
            }
        }
        Ok(bindings)
    }

    fn record_custom(
        &self,
        kernel: &CustomKernel,
        tensors: &[&DeviceTensor],
        params: &[u32],
        grid: [u32; 3],
    ) -> Result<()> {
        let bindings = self.custom_bindings(kernel, tensors, params.len())?;
        let mut words = CustomWords([0; (PARAMS_BYTES / 4) as usize]);
        for (slot, b) in words.0.iter_mut().zip(&bindings) {
            *slot =
                u32::try_from(b.start_byte).map_err(|_| BackendError::InvalidOperands("a start past 2^32".into()))?;
        }
        words.0[bindings.len()..bindings.len() + params.len()].copy_from_slice(params);
        let buffers: Vec<BufferRange> = tensors
            .iter()
            .zip(&bindings)
            .map(|(t, b)| BufferRange::new(t.buffer(), *b))
            .collect();
        self.stream.lock().dispatch(&kernel.kernel, &buffers, &words, grid)
    }

    /// Records `kernel` over `tensors` (in binding order) with the caller's parameter words
    /// `params` (after the tensors' starts, see [`CustomKernel`]) and `grid` workgroups, on the
    /// context's stream after the ops recorded so far. The checks here: the tensor count, the
    /// parameter block's size, the tensors' device, each binding within its buffer and
    /// `maxStorageBufferBindingSize`, no read-write binding overlapping another, the grid within
    /// `maxComputeWorkgroupsPerDimension`.
    ///
    /// # Safety
    ///
    /// The device may run without Dawn's validation and robustness (the default, see
    /// [`GpuContext::device`]): nothing checks what the kernel does. The caller promises that
    /// for every invocation of `grid`:
    /// - every read of binding `i` lies inside that binding: from its start (the tensor's
    ///   `start` word back, see [`CustomKernel`]) to its end, which is what `arrayLength` gives;
    /// - every write lies inside the bytes of its own tensor (its element span, from `start`):
    ///   the bytes before `start` and after the span's end in the binding may belong to other
    ///   tensors;
    /// - the WGSL declares each binding with the access given at compilation (`read` where
    ///   [`Access::Read`]), the parameter block as a `uniform` at binding N, and reads no more of
    ///   it than 64 words;
    /// - every index into a workgroup, private or function array is inside it, and no workgroup
    ///   memory is read before an invocation of the workgroup wrote it (it is not zeroed);
    /// - the kernel finishes (a hung dispatch loses the device).
    pub unsafe fn record_kernel(
        &self,
        kernel: &CustomKernel,
        tensors: &[&DeviceTensor],
        params: &[u32],
        grid: [u32; 3],
    ) -> Result<()> {
        self.record_custom(kernel, tensors, params, grid)
    }

    /// [`GpuContext::record_kernel`] without `unsafe`, for a context in safe mode
    /// ([`crate::ContextOptions::safe_mode`], no toggle forced on, made by [`GpuContext::new`]
    /// or [`GpuContext::with_adapter`]): Dawn's validation refuses mismatched declarations and
    /// its robustness keeps every access inside its binding (a stray write may still change
    /// bytes of the binding outside the tensor). Anywhere else an error.
    pub fn record_kernel_checked(
        &self,
        kernel: &CustomKernel,
        tensors: &[&DeviceTensor],
        params: &[u32],
        grid: [u32; 3],
    ) -> Result<()> {
        if !self.robust {
            return Err(BackendError::Unsupported(format!(
                "kernel `{}`: recording without `unsafe` needs a context in safe mode",
                kernel.name
            )));
        }
        self.record_custom(kernel, tensors, params, grid)
    }
}
