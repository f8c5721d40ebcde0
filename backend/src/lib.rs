//! ggml's tensor operations on Dawn: quantized matrix products (`MUL_MAT`) and attention
//! (`FLASH_ATTN_EXT`) on the GPU, with subgroup matrices where the adapter has them, checked
//! against a CPU reference of ggml's definitions.
//!
//! A [`GpuContext`] holds a device set up for the backend (from defaults, an adapter of your
//! choice or your own `dawn::Device`), its compiled kernels and a stream. Tensors live on the
//! device as [`DeviceTensor`]s: made empty, zeroed, from host data of any ggml type (f32 values
//! are quantized on the CPU), or loaded from a GGUF file ([`GpuContext::load_gguf`]); views,
//! permutations and reshapes copy nothing. The ops record their dispatches on the context's
//! stream and run when you synchronize or read, waiting at most the timeout you choose.
//!
//! ```
//! use std::time::Duration;
//!
//! use ggml_dawn::ops::flash_attn::FlashAttnParams;
//! use ggml_dawn::reference::{self, metric};
//! use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = GpuContext::new(ContextOptions {
//!     timeout: Duration::from_secs(60),
//!     ..ContextOptions::default()
//! })?;
//!
//! // A weight matrix quantized to q4_0 (k = 256 inputs, m = 64 outputs) times 8 columns.
//! let (k, m, n) = (256, 64, 8);
//! let values = |count: usize, seed: usize| -> Vec<f32> {
//!     (0..count).map(|i| (((i * 7 + seed) % 23) as f32 - 11.0) / 16.0).collect()
//! };
//! let w_host = HostTensor::from_f32(GgmlType::Q4_0, [k, m, 1, 1], &values(k * m, 1))?;
//! let x_host = HostTensor::from_f32(GgmlType::F32, [k, n, 1, 1], &values(k * n, 2))?;
//! let w = ctx.upload(&w_host)?;
//! let x = ctx.upload(&x_host)?;
//! let y = ctx.mul_mat(&w, &x)?; // [m, n] in f32; recorded, not run yet
//!
//! // The CPU reference of the same product, on the same quantized weights.
//! let expected = reference::mul_mat(&w_host, &x_host)?;
//! let got = ctx.read_f32(&y)?; // runs what was recorded, then reads back
//! assert!(metric::nmse(&expected, &got) < metric::MUL_MAT_MAX_NMSE);
//!
//! // Attention over views of y, without copies: 4 heads of 16 dimensions, 8 positions.
//! let heads = y.reshape([16, 4, n, 1])?.permute([0, 2, 1, 3])?; // [16, n, 4, 1]
//! let out = ctx.flash_attn_ext(
//!     &heads,
//!     &heads,
//!     &heads,
//!     None,
//!     None,
//!     FlashAttnParams::scaled(0.25),
//! )?; // [16, 4, n, 1]
//! ctx.synchronize_timeout(Duration::from_secs(30))?;
//! assert_eq!(ctx.read_f32(&out)?.len(), 16 * 4 * n);
//!
//! // The plan an op followed: every decision its encoder took.
//! let plan = ctx.mul_mat_into(&w, &x, &y)?;
//! println!("{plan}");
//! # Ok(())
//! # }
//! ```
//!
//! Start with `use ggml_dawn::prelude::*;` and the [`shapes`] page (ggml's shape order,
//! views, and the attention example). The modules:
//!
//! - [`context`]: device setup as ggml's WebGPU backend does it; [`ContextOptions`] (tuning,
//!   timeout, safe mode, the adapter, a scratch budget); [`adapters`] lists the adapters;
//!   [`GpuContext::from_device`] and [`GpuContext::with_adapter`] take one of your own.
//! - [`ops`]: the ops, each a plan and an encoder, taking an [`ops::Env`];
//!   [`GpuContext`]'s methods run them on the context's stream. [`facts`] (the device and its
//!   class) and [`tuning`] (the knobs and the measured profiles) are the planners' vocabulary.
//! - [`ggml_type`], [`tensor`], [`format`](mod@format): ggml's types, layouts and block formats,
//!   on the CPU; [`gguf`] reads and writes GGUF; [`weights`] loads it onto the device.
//! - [`reference`](mod@reference): the CPU reference of each op, for your own checks.
//! - [`error`]: the one [`Error`] type and its [`ErrorKind`]s.
//! - [`exec`]: streams ([`exec::Stream`]) that batch dispatches into submits, and [`memory`]:
//!   device tensors and their bindings. The kernels' own machinery (compiled pipelines, the
//!   WGSL preprocessor, parameter blocks, the shader-variant enumerator, scratch memory) is not
//!   part of the documented API.
//!
//! Soundness: the backend's device runs without Dawn's validation and robustness (as ggml's
//! WebGPU backend does); every tensor is checked against its buffer and every op against its
//! operands before anything is recorded, and the device is reachable only through the
//! `unsafe` [`GpuContext::device`].

pub mod context;
mod context_ops;
pub mod error;
pub mod exec;
pub mod facts;
pub mod format;
#[doc = include_str!("../docs/shapes.md")]
pub mod shapes {}
pub mod ggml_type;
pub mod gguf;
pub mod input_file;
#[doc(hidden)]
pub mod kernel;
pub mod memory;
pub mod ops;
#[doc(hidden)]
pub mod params;
pub mod profile;
pub mod reference;
#[doc(hidden)]
pub mod scratch;
#[doc(hidden)]
pub mod shader_lib;
pub mod tensor;
pub mod tuning;
#[doc(hidden)]
pub mod variants;
pub mod weights;

pub use context::{AdapterChoice, Capabilities, ContextError, ContextOptions, GpuContext, adapters};
pub use context_ops::WarmUp;
pub use context_ops::custom::CustomKernel;
/// The safe Dawn API this crate is built on (`webgpu-dawn`), for what the backend does not wrap.
pub use dawn;
pub use error::{Error, ErrorKind, Result};
pub use facts::DeviceFacts;
pub use ggml_type::GgmlType;
pub use memory::DeviceTensor;
pub use tensor::{HostTensor, Layout};
pub use tuning::Tuning;
pub use weights::Weights;

/// The names most programs use: `use ggml_dawn::prelude::*;`.
pub mod prelude {
    pub use crate::exec::Stream;
    pub use crate::ops::flash_attn::FlashAttnParams;
    pub use crate::{
        AdapterChoice, ContextOptions, DeviceTensor, Error, ErrorKind, GgmlType, GpuContext, HostTensor, Layout,
        Result, WarmUp, Weights,
    };
}
