//! ROPE (forward) as ggml defines it: normal and NeoX pairs, the multi-section modes (M-RoPE,
//! interleaved M-RoPE, vision), frequency factors, YaRN's ramp and magnitude, `n_offs`; f32 or
//! f16 rows of any layout, i32 positions, in place or into a tensor of src's extents.
//! [`crate::reference::rope()`] is the definition; the kernel computes each angle as its CPU
//! order does.

pub mod encode;
pub mod plan;

use crate::error::{BackendError, Result};
use crate::exec::Stream;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::Env;
use crate::reference::{RopeMode, RopeParams};
use crate::tensor::Layout;

pub use plan::{Problem, RopePlan};

use crate::ops::rows::{self, RowsPlan};

fn invalid(what: impl std::fmt::Display) -> BackendError {
    BackendError::InvalidOperands(format!("ROPE: {what}"))
}

/// Why ROPE of `x` at `pos` (with `ff`) into `dst` cannot run, if it cannot: `x` f32 or f16
/// `[ne0, heads, tokens, seqs]` (any strides), `pos` i32 holding `tokens` positions (`4·tokens`
/// for the multi-section modes), `ff` f32 with one factor per rotated pair, `dst` f32 or f16 of
/// x's extents (any strides); the parameters finite, `freq_base` and `freq_scale` positive,
/// `n_dims` and `n_offs` even and inside the row, sections that fit.
pub fn check(x: &Layout, pos: &Layout, ff: Option<&Layout>, dst: &Layout, params: &RopeParams) -> Result<Problem> {
    for (name, l) in [("x", x), ("dst", dst)] {
        if !matches!(l.ty, GgmlType::F32 | GgmlType::F16) {
            return Err(invalid(format!("{name} must be f32 or f16, not {}", l.ty)));
        }
    }
    if dst.ne != x.ne {
        return Err(invalid(format!("dst {:?} must have x's extents {:?}", dst.ne, x.ne)));
    }
    for (name, v) in [
        ("freq_base", params.freq_base),
        ("freq_scale", params.freq_scale),
        ("ext_factor", params.ext_factor),
        ("attn_factor", params.attn_factor),
        ("beta_fast", params.beta_fast),
        ("beta_slow", params.beta_slow),
    ] {
        if !v.is_finite() {
            return Err(invalid(format!("{name} = {v} is not finite")));
        }
    }
    if params.freq_base <= 0.0 || params.freq_scale <= 0.0 {
        return Err(invalid("freq_base and freq_scale must be positive"));
    }
    let ne0 = x.ne[0];
    let (n_dims, n_offs) = (params.n_dims, params.n_offs);
    if n_dims == 0 || !n_dims.is_multiple_of(2) || !n_offs.is_multiple_of(2) {
        return Err(invalid(format!(
            "n_dims = {n_dims} and n_offs = {n_offs} must be even, n_dims > 0"
        )));
    }
    if n_dims.checked_add(n_offs).is_none_or(|end| end > ne0) {
        return Err(invalid(format!(
            "n_offs + n_dims = {n_offs} + {n_dims} exceed the row of {ne0}"
        )));
    }
    let multi = params.mode.is_multi();
    if multi {
        let s = params.sections;
        let total = s.iter().try_fold(0usize, |a, &v| a.checked_add(v));
        if s[..3].iter().all(|&v| v == 0) || total.is_none_or(|t| t > ne0) {
            return Err(invalid(format!("sections {s:?} do not fit rows of {ne0}")));
        }
    }
    if params.mode == RopeMode::Vision && (n_dims * 2 != ne0 || n_offs != 0) {
        return Err(invalid(format!(
            "vision needs n_dims = ne0/2 ({ne0}/2) and n_offs = 0, not {n_dims}"
        )));
    }
    let pairs = if params.mode == RopeMode::Vision {
        ne0 / 2
    } else {
        n_dims / 2
    };
    if pos.ty != GgmlType::I32 {
        return Err(invalid(format!("pos must be i32, not {}", pos.ty)));
    }
    let needed = x.ne[2].saturating_mul(if multi { 4 } else { 1 });
    if pos.ne[1..] != [1, 1, 1] || pos.ne[0] < needed || pos.nb[0] != 4 {
        return Err(invalid(format!(
            "pos {:?} must be a packed vector of at least {needed} positions",
            pos.ne
        )));
    }
    if let Some(f) = ff
        && (f.ty != GgmlType::F32 || f.ne[0] < pairs || f.nb[0] != 4)
    {
        return Err(invalid(format!(
            "freq_factors must be packed f32 with at least {pairs} values, is {:?} {:?}",
            f.ty, f.ne
        )));
    }
    if x.checked_elements().is_none_or(|n| n > u32::MAX as usize) {
        return Err(BackendError::Unsupported("ROPE: more than 2^32 elements".into()));
    }
    Ok(Problem {
        src_type: x.ty,
        dst_type: dst.ty,
        mode: params.mode,
        freq_factors: ff.is_some(),
        in_place: false,
        ne0: ne0 as u64,
        rows: (x.ne[1] * x.ne[2] * x.ne[3]) as u64,
        heads: x.ne[1] as u64,
        pairs: pairs as u64,
        // The start's alignment is the caller's to add (`rope`): the layout does not hold it.
        dst_words: dst.ty == GgmlType::F16
            && dst.nb[0] == 2
            && dst.nb[1..].iter().all(|nb| nb.is_multiple_of(4))
            && pairs.is_multiple_of(2)
            && n_offs.is_multiple_of(2)
            && ne0.is_multiple_of(2),
        // Likewise the start's alignment (`rope`).
        src_words: x.ty == GgmlType::F16 && x.nb[0] == 2 && x.nb[1..].iter().all(|nb| nb.is_multiple_of(4)),
        rows_out: None,
        ids_i64: false,
    })
}

/// Records ROPE of `x` into `dst` (see [`check`]); `dst` may be `x` itself (the same bytes and
/// layout: ggml's in-place form), otherwise it must not share bytes with any input. Returns the
/// plan it followed.
pub fn rope(
    env: &Env,
    stream: &mut Stream,
    x: &DeviceTensor,
    pos: &DeviceTensor,
    freq_factors: Option<&DeviceTensor>,
    dst: &DeviceTensor,
    params: &RopeParams,
) -> Result<RopePlan> {
    let mut p = check(
        x.layout(),
        pos.layout(),
        freq_factors.map(|f| f.layout()),
        dst.layout(),
        params,
    )?;
    let in_place = x.layout() == dst.layout() && x.byte_span()? == dst.byte_span()? && x.overlaps(dst)?;
    if in_place && x.layout().ty != dst.layout().ty {
        return Err(invalid("in place needs dst of x's type"));
    }
    p.in_place = in_place;
    p.dst_words = p.dst_words && dst.byte_span()?.start.is_multiple_of(4);
    p.src_words = p.src_words && x.byte_span()?.start.is_multiple_of(4);
    let mut all = vec![x, pos, dst];
    all.extend(freq_factors);
    env.check_operands(&all)?;
    env.check_stream(stream)?;
    let mut inputs = vec![("pos", pos)];
    if !in_place {
        inputs.push(("x", x));
    }
    if let Some(f) = freq_factors {
        inputs.push(("freq_factors", f));
    }
    crate::memory::check_output_disjoint("ROPE", dst, &inputs)?;
    let plan = plan::plan(&p, &env.facts());
    encode::encode(env, stream, x, pos, freq_factors, dst, params, &plan)?;
    Ok(plan)
}

/// What [`rope_set_rows`] ran: one fused dispatch, or ROPE then SET_ROWS where the fused
/// kernel does not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeSetRowsPlan {
    Fused(RopePlan),
    Separate(RopePlan, RowsPlan),
}

impl std::fmt::Display for RopeSetRowsPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RopeSetRowsPlan::Fused(p) => write!(f, "{p}"),
            RopeSetRowsPlan::Separate(r, s) => write!(f, "{r}; then SET_ROWS: {s}"),
        }
    }
}

/// Whether a token's `rows` (f32 `[n, tokens]`) lie in the same storage as `x` (f32 `[d, heads,
/// tokens, 1]`), each token's row inside that token's stretch of x's token stride, so the
/// workgroup that ropes a token's heads may store its row without another workgroup's
/// elements: the fused kernel's condition on the operands' layouts.
fn rows_follow_tokens(x: &DeviceTensor, rows: &DeviceTensor) -> Result<bool> {
    let (lx, lr) = (x.layout(), rows.layout());
    if !x.same_storage(rows) || lx.ty != GgmlType::F32 || lr.ty != GgmlType::F32 || lx.ne.contains(&0) {
        return Ok(false);
    }
    let stride = lx.nb[2];
    // x's token: its heads' elements inside one stride from the token's first byte.
    let token_span = (lx.ne[0] - 1) * lx.nb[0] + (lx.ne[1] - 1) * lx.nb[1] + 4;
    let Some(from) = lr.offset.checked_sub(lx.offset) else {
        return Ok(false);
    };
    Ok(lx.ne[3] == 1
        && lr.ne[1] == lx.ne[2]
        && lr.ne[2] == 1
        && lr.ne[3] == 1
        && lr.nb[0] == 4
        && lr.nb[1] == stride
        && token_span <= stride
        && from.checked_add(lr.ne[0] * 4).is_some_and(|end| end <= stride))
}

/// ROPE of `x` in place, then SET_ROWS of `rows` into `dst` at `ids` (see [`check`] and
/// [`rows::check_set_rows`]): a decoder's rotary embedding and KV-cache write. One dispatch when
/// x is f32 `[d, heads, tokens, 1]` on the shared path (a workgroup a token), `rows` f32
/// `[n, tokens]` in x's storage with each token's row inside its token's stretch (for instance the
/// keys and values beside the roped queries and keys of one projection), `dst` f32 or f16 rows
/// `[n, cells]` (word-aligned for f16) and `ids` packed i32 or i64; otherwise the two ops one after
/// the other, with the same result. Returns what ran.
#[allow(clippy::too_many_arguments)]
pub fn rope_set_rows(
    env: &Env,
    stream: &mut Stream,
    x: &DeviceTensor,
    pos: &DeviceTensor,
    freq_factors: Option<&DeviceTensor>,
    params: &RopeParams,
    rows: &DeviceTensor,
    dst: &DeviceTensor,
    ids: &DeviceTensor,
) -> Result<RopeSetRowsPlan> {
    let mut p = check(
        x.layout(),
        pos.layout(),
        freq_factors.map(|f| f.layout()),
        x.layout(),
        params,
    )?;
    rows::check_set_rows(dst.layout(), rows.layout(), ids.layout())?;
    // In place; the word paths are f16's, and the fused kernel takes f32 only.
    p.in_place = true;
    let (ld, li) = (dst.layout(), ids.layout());
    let cache_words = ld.ty == GgmlType::F32
        || (ld.ty == GgmlType::F16
            && rows.layout().ne[0].is_multiple_of(2)
            && ld.nb[1].is_multiple_of(4)
            && dst.byte_span()?.start.is_multiple_of(4));
    let fusable = matches!(ld.ty, GgmlType::F32 | GgmlType::F16)
        && cache_words
        && ld.ne[2] == 1
        && ld.ne[3] == 1
        && ((li.ty == GgmlType::I32 && li.nb[0] == 4) || (li.ty == GgmlType::I64 && li.nb[0] == 8))
        && ids.byte_span()?.start.is_multiple_of(4)
        && rows_follow_tokens(x, rows)?;
    let fused = plan::plan(
        &Problem {
            rows_out: Some(ld.ty),
            ids_i64: li.ty == GgmlType::I64,
            ..p
        },
        &env.facts(),
    );
    // Both ops' operand checks before anything is recorded, on either path: a SET_ROWS the
    // separate path would refuse must not leave its ROPE recorded.
    let mut all = vec![x, pos, rows, dst, ids];
    all.extend(freq_factors);
    env.check_operands(&all)?;
    env.check_stream(stream)?;
    let mut inputs = vec![("pos", pos), ("ids", ids)];
    if let Some(f) = freq_factors {
        inputs.push(("freq_factors", f));
    }
    crate::memory::check_output_disjoint("ROPE", x, &inputs)?;
    inputs.push(("rows", rows));
    inputs.push(("x", x));
    crate::memory::check_output_disjoint("SET_ROWS", dst, &inputs)?;
    let limits = env.limits();
    let hull = if fusable && fused.shared {
        encode::hull_binding(
            x,
            rows,
            u64::from(limits.min_storage_buffer_offset_alignment),
            limits.max_storage_buffer_binding_size,
        )?
    } else {
        None
    };
    let Some(hull) = hull else {
        let r = rope(env, stream, x, pos, freq_factors, x, params)?;
        let s = rows::set_rows(env, stream, dst, rows, ids)?;
        return Ok(RopeSetRowsPlan::Separate(r, s));
    };
    encode::encode_set_rows(env, stream, hull, x, pos, freq_factors, params, rows, dst, ids, &fused)?;
    Ok(RopeSetRowsPlan::Fused(fused))
}
