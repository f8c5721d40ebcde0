//! The ops the decoder graph is built from, as one trait: the graph in [`crate::decoder`] is
//! written once against it, and each backend maps it onto its own ops (the CPU reference in
//! [`crate::cpu`]; a GPU context records the same calls into its stream and submits once per
//! step).
//!
//! Tensors follow ggml's conventions: extents `ne` innermost first, MUL_MAT computing
//! `a·bᵀ` per batch, FLASH_ATTN_EXT returning `[d_v, n_head, n_q, 1]`.

use ggml_dawn::reference::RopeParams;
use ggml_dawn::{GgmlType, HostTensor, Layout};

use crate::error::Result;

/// Device memory a backend holds, by purpose (what `bench -v` prints).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceBytes {
    /// Buffers of the activation pool, the weights among them.
    pub pool: u64,
    /// Tensors made by [`Ops::zeros`]: the KV cache.
    pub zeroed: u64,
    /// The backend's scratch (f16 copies for prefill, 8-bit b, attention's split partials).
    pub scratch: u64,
}

/// The ops of llama.cpp's `llama` graph, on some backend's tensors.
pub trait Ops {
    /// A tensor on this backend: weights, activations, the KV cache.
    type Tensor: std::fmt::Debug;

    /// What this backend is, for messages (`cpu`, the GPU's name).
    fn name(&self) -> String;

    /// A host tensor (a weight, an input) on this backend, in its own type.
    fn upload(&self, t: &HostTensor) -> Result<Self::Tensor>;
    /// A zeroed contiguous tensor (the KV cache).
    fn zeros(&self, ty: GgmlType, ne: [usize; 4]) -> Result<Self::Tensor>;
    /// The tensor's layout.
    fn layout(&self, t: &Self::Tensor) -> Layout;
    /// The same storage seen through `layout` (views, permutations, reshapes).
    fn view(&self, t: &Self::Tensor, layout: Layout) -> Result<Self::Tensor>;

    /// GET_ROWS: rows of `src` gathered by the i32 `ids`, as f32.
    fn get_rows(&self, src: &Self::Tensor, ids: &Self::Tensor) -> Result<Self::Tensor>;
    /// RMS_NORM of each row of `x`, times `weight` (fused RMS_NORM·MUL).
    fn rms_norm_mul(&self, x: &Self::Tensor, weight: &Self::Tensor, eps: f32) -> Result<Self::Tensor>;
    /// `a + b` and its RMS_NORM times `weight`: a decoder's residual ADD and the norm after it
    /// (fused into one op where the backend has it).
    fn add_rms_norm_mul(
        &self,
        a: &Self::Tensor,
        b: &Self::Tensor,
        weight: &Self::Tensor,
        eps: f32,
    ) -> Result<(Self::Tensor, Self::Tensor)> {
        let sum = self.add(a, b)?;
        let normed = self.rms_norm_mul(&sum, weight, eps)?;
        Ok((sum, normed))
    }
    /// MUL_MAT: `a·bᵀ` per batch, f32 `[a.ne1, b.ne1, b.ne2, b.ne3]`.
    fn mul_mat(&self, a: &Self::Tensor, b: &Self::Tensor) -> Result<Self::Tensor>;
    /// `a × (rms_norm(x) · weight)`: a decoder's norm and the projection after it
    /// ([`Ops::rms_norm_mul`], then [`Ops::mul_mat`]). A backend may do both in one step.
    fn rms_norm_mul_mat(
        &self,
        a: &Self::Tensor,
        x: &Self::Tensor,
        weight: &Self::Tensor,
        eps: f32,
    ) -> Result<Self::Tensor> {
        self.mul_mat(a, &self.rms_norm_mul(x, weight, eps)?)
    }
    /// `x + residual`, and `a × (rms_norm(x + residual) · weight)`: a decoder's residual ADD,
    /// the norm after it and the projection after that ([`Ops::add_rms_norm_mul`], then
    /// [`Ops::mul_mat`]). A backend may do them in one step.
    fn add_rms_norm_mul_mat(
        &self,
        a: &Self::Tensor,
        x: &Self::Tensor,
        residual: &Self::Tensor,
        weight: &Self::Tensor,
        eps: f32,
    ) -> Result<(Self::Tensor, Self::Tensor)> {
        let (sum, normed) = self.add_rms_norm_mul(x, residual, weight, eps)?;
        Ok((sum, self.mul_mat(a, &normed)?))
    }
    /// ADD with `b` repeated over `a`.
    fn add(&self, a: &Self::Tensor, b: &Self::Tensor) -> Result<Self::Tensor>;
    /// ROPE of `x` `[d, heads, tokens, 1]` at the i32 positions `pos`.
    fn rope(
        &self,
        x: &Self::Tensor,
        pos: &Self::Tensor,
        freq_factors: Option<&Self::Tensor>,
        params: &RopeParams,
    ) -> Result<Self::Tensor>;
    /// SWIGLU: `silu(gate) · up`, split (two tensors) or, with `up` left out, over the halves
    /// of each row of `gate` (gate first, ggml's fused form).
    fn swiglu(&self, gate: &Self::Tensor, up: Option<&Self::Tensor>) -> Result<Self::Tensor>;
    /// `a × swiglu(gate_up)` ([`Ops::swiglu`]'s fused form, then [`Ops::mul_mat`]): a
    /// feed-forward's activation and down projection. A backend may do both in one step.
    fn mul_mat_swiglu(&self, a: &Self::Tensor, gate_up: &Self::Tensor) -> Result<Self::Tensor> {
        self.mul_mat(a, &self.swiglu(gate_up, None)?)
    }
    /// ROPE in place: the elements of `t` that `view` (a layout over `t`'s storage, f32,
    /// `[d, heads, tokens, 1]`) selects, roped at the i32 positions `pos` and written back where
    /// they were.
    fn rope_in_place(
        &self,
        t: &mut Self::Tensor,
        view: Layout,
        pos: &Self::Tensor,
        freq_factors: Option<&Self::Tensor>,
        params: &RopeParams,
    ) -> Result<()>;
    /// SET_ROWS: the rows of `src` written at the i32 `ids` into the rows of `dst` that `view`
    /// (a layout over `dst`'s storage) selects, converted to its type.
    fn set_rows(&self, dst: &mut Self::Tensor, view: Layout, src: &Self::Tensor, ids: &Self::Tensor) -> Result<()>;
    /// A decoder's rotary embedding and KV-cache write: ROPE in place of the elements of `t`
    /// that `view` selects ([`Ops::rope_in_place`]), then SET_ROWS of the rows of `t` that `rows`
    /// selects (f32 `[n, tokens]`, roped elements among them) into the rows of `dst` that
    /// `dst_view` selects, at `ids` ([`Ops::set_rows`]). A backend may do both in one step.
    #[allow(clippy::too_many_arguments)]
    fn rope_set_rows(
        &self,
        t: &mut Self::Tensor,
        view: Layout,
        pos: &Self::Tensor,
        freq_factors: Option<&Self::Tensor>,
        params: &RopeParams,
        rows: Layout,
        dst: &mut Self::Tensor,
        dst_view: Layout,
        ids: &Self::Tensor,
    ) -> Result<()> {
        self.rope_in_place(t, view, pos, freq_factors, params)?;
        let rows = self.view(t, rows)?;
        self.set_rows(dst, dst_view, &rows, ids)
    }
    /// A decoder's q/k/v projection with the steps around it: `a ×` the RMS norm of `x` (plus
    /// `residual`, whose sum it returns too) times `weight` ([`Ops::rms_norm_mul_mat`],
    /// [`Ops::add_rms_norm_mul_mat`]), then the rotary embedding and KV-cache write of that
    /// result ([`Ops::rope_set_rows`]) as `rope` lays them out. A backend may do them in one
    /// step.
    #[allow(clippy::too_many_arguments)]
    fn norm_mul_mat_rope_set_rows(
        &self,
        a: &Self::Tensor,
        x: &Self::Tensor,
        residual: Option<&Self::Tensor>,
        weight: &Self::Tensor,
        eps: f32,
        rope: &QkvRope<'_, Self::Tensor>,
        cache: &mut Self::Tensor,
        cache_view: Layout,
    ) -> Result<(Option<Self::Tensor>, Self::Tensor)> {
        norm_mul_mat_then_rope_set_rows(self, a, x, residual, weight, eps, rope, cache, cache_view)
    }
    /// FLASH_ATTN_EXT: `softmax(q·kᵀ·scale + mask)·v`, `[d_v, n_head, n_q, 1]`; no mask: every
    /// key is attended to.
    fn flash_attn(
        &self,
        q: &Self::Tensor,
        k: &Self::Tensor,
        v: &Self::Tensor,
        mask: Option<&Self::Tensor>,
        scale: f32,
    ) -> Result<Self::Tensor>;
    /// ARGMAX of each row; runs the recorded work and reads back only the ids.
    fn argmax(&self, x: &Self::Tensor) -> Result<Vec<i32>>;
    /// All of `x` as f32; runs the recorded work.
    fn read_f32(&self, x: &Self::Tensor) -> Result<Vec<f32>>;

    /// GPU dispatches recorded so far, where the backend has them (the host's work per step).
    fn dispatches(&self) -> Option<u64> {
        None
    }

    /// Device memory the backend holds, where it counts it.
    fn device_bytes(&self) -> Option<DeviceBytes> {
        None
    }

    /// Starts timing the work on the device, by kernel or by submit, where the backend can
    /// (false where it cannot).
    fn start_profile(&self, _mode: ggml_dawn::profile::ProfileMode) -> Result<bool> {
        Ok(false)
    }

    /// Stops timing and returns the device time per kernel since [`Ops::start_profile`].
    fn finish_profile(&self) -> Result<Option<ggml_dawn::profile::Profile>> {
        Ok(None)
    }
}

/// How [`Ops::norm_mul_mat_rope_set_rows`] ropes a q/k/v projection's result and writes the
/// KV cache: each token's column holds `heads` heads of `head_dim` f32 values (q's, then k's)
/// roped in place at the i32 positions `pos`, and from row `kv_start` the row (k's and v's
/// values side by side) that goes to the cache at the i32 `ids`.
#[derive(Debug)]
pub struct QkvRope<'a, T> {
    pub heads: usize,
    pub head_dim: usize,
    pub kv_start: usize,
    pub pos: &'a T,
    pub freq_factors: Option<&'a T>,
    pub params: &'a RopeParams,
    pub ids: &'a T,
}

impl<T> QkvRope<'_, T> {
    /// The heads `[head_dim, heads, tokens, 1]` and the cache rows `[width, tokens]` within a
    /// result of layout `y` (f32 `[rows, tokens]`).
    pub fn views(&self, y: &Layout, width: usize) -> (Layout, Layout) {
        let (row, n) = (y.nb[1], y.ne[1]);
        let heads = Layout {
            ty: y.ty,
            ne: [self.head_dim, self.heads, n, 1],
            nb: [4, self.head_dim * 4, row, row * n],
            offset: y.offset,
        };
        let rows = Layout {
            ty: y.ty,
            ne: [width, n, 1, 1],
            nb: [4, row, row * n, row * n],
            offset: y.offset + self.kv_start * 4,
        };
        (heads, rows)
    }
}

/// [`Ops::norm_mul_mat_rope_set_rows`] as its steps: the norm with the projection, then the
/// rotary embedding with the KV-cache write (each fused where `ops` fuses it).
#[allow(clippy::too_many_arguments)]
pub fn norm_mul_mat_then_rope_set_rows<O: Ops + ?Sized>(
    ops: &O,
    a: &O::Tensor,
    x: &O::Tensor,
    residual: Option<&O::Tensor>,
    weight: &O::Tensor,
    eps: f32,
    rope: &QkvRope<'_, O::Tensor>,
    cache: &mut O::Tensor,
    cache_view: Layout,
) -> Result<(Option<O::Tensor>, O::Tensor)> {
    let (sum, mut y) = match residual {
        Some(r) => {
            let (sum, y) = ops.add_rms_norm_mul_mat(a, x, r, weight, eps)?;
            (Some(sum), y)
        }
        None => (None, ops.rms_norm_mul_mat(a, x, weight, eps)?),
    };
    let (heads, rows) = rope.views(&ops.layout(&y), cache_view.ne[0]);
    ops.rope_set_rows(
        &mut y,
        heads,
        rope.pos,
        rope.freq_factors,
        rope.params,
        rows,
        cache,
        cache_view,
        rope.ids,
    )?;
    Ok((sum, y))
}

/// An i32 host vector (token ids, positions, cache rows) as a `[n, 1, 1, 1]` tensor.
pub fn i32_tensor(values: &[i32]) -> HostTensor {
    HostTensor {
        layout: Layout {
            ty: GgmlType::I32,
            ne: [values.len(), 1, 1, 1],
            nb: [4, 4 * values.len(), 4 * values.len(), 4 * values.len()],
            offset: 0,
        },
        data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}
