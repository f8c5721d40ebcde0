//! GET_ROWS, SET_ROWS and CPY as ggml defines them: moving rows or elements between tensors,
//! converting between types on the way (dequantized from every type MUL_MAT reads, rounded to
//! f16/bf16, quantized to the KV-cache types with ggml's exact rounding, or copied as bytes).
//!
//! Ids outside the rows they index are ggml's undefined behaviour; here they never touch memory
//! outside the operands: GET_ROWS writes a row of zeros for such an id, SET_ROWS skips its row.
//! When SET_ROWS names one row twice, either source row may land (ggml's CPU keeps the later).
//!
//! [`plan`] decides the kernel's unit and store form; [`encode`] binds and dispatches it.

pub mod encode;
pub mod plan;

use crate::error::{BackendError, Result};
use crate::exec::Stream;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::Env;
use crate::tensor::Layout;

pub use plan::{Problem, RowsOp, RowsPlan, reads, writes};

fn plain(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
}

fn invalid(op: RowsOp, what: impl std::fmt::Display) -> BackendError {
    BackendError::InvalidOperands(format!("{op}: {what}"))
}

fn unsupported(op: RowsOp, what: impl std::fmt::Display) -> BackendError {
    BackendError::Unsupported(format!("{op}: {what}"))
}

/// 32-bit indexing: element counts the kernel counts in u32.
fn check_count(op: RowsOp, l: &Layout, name: &str) -> Result<()> {
    if l.checked_elements().is_none_or(|n| n > u32::MAX as usize) {
        return Err(unsupported(op, format!("{name} has more than 2^32 elements")));
    }
    Ok(())
}

/// A quantized tensor's rows must be whole blocks stepped by `nb0` (the kernel addresses blocks).
fn check_blocks(op: RowsOp, l: &Layout, name: &str) -> Result<()> {
    if l.ty.is_quantized() && (!l.has_contiguous_rows() || !l.ne[0].is_multiple_of(l.ty.block_size())) {
        return Err(invalid(
            op,
            format!("{name} ({}) needs rows of whole, packed blocks, is {l:?}", l.ty),
        ));
    }
    Ok(())
}

fn problem(op: RowsOp, src: &Layout, dst: &Layout, ids_i64: bool, dst_start: u64) -> Problem {
    let iter = if op == RowsOp::SetRows { src } else { dst };
    Problem {
        op,
        src_type: src.ty,
        dst_type: dst.ty,
        ids_i64,
        elements: iter.elements() as u64,
        ne0: iter.ne[0] as u64,
        src_ne0: src.ne[0] as u64,
        src_packed: src.nb[0] == src.ty.type_size(),
        dst_packed: dst.nb[0] == dst.ty.type_size(),
        dst_rows_aligned: dst_start.is_multiple_of(4) && dst.nb[1..].iter().all(|&nb| nb.is_multiple_of(4)),
        dst_nb0: dst.nb[0] as u64,
        transposed_tiles: if op == RowsOp::Cpy {
            transposed_tiles(src, dst)
        } else {
            None
        },
    }
}

/// The 32×32 tiles (times the batches of dims 2 and 3) that cover a CPY whose src is dst
/// transposed in dims 0 and 1: the same extents, src packed along dim 1 and not along dim 0, dst
/// packed along dim 0; `None` otherwise (or where the count passes 32 bits).
fn transposed_tiles(src: &Layout, dst: &Layout) -> Option<u64> {
    let elem = src.ty.type_size();
    let transposed = src.ne == dst.ne
        && src.ne[0] > 1
        && src.ne[1] > 1
        && src.nb[1] == elem
        && src.nb[0] != elem
        && dst.nb[0] == elem;
    if !transposed {
        return None;
    }
    let tile = plan::TILE as usize;
    let tiles = (src.ne[0].div_ceil(tile) * src.ne[1].div_ceil(tile)).checked_mul(src.ne[2] * src.ne[3])?;
    u32::try_from(tiles).ok().map(u64::from)
}

/// Why GET_ROWS of `src` at `ids` into `dst` cannot run, if it cannot: `src` `[n, m, b1, b2]` of
/// any type [`reads`] (quantized rows packed), `ids` i32 `[r, b1, b2, 1]` (any strides), `dst`
/// `[n, r, b1, b2]` f32 (i32 for an i32 `src`), any strides.
pub fn check_get_rows(src: &Layout, ids: &Layout, dst: &Layout) -> Result<Problem> {
    let op = RowsOp::GetRows;
    if !reads(src.ty) {
        return Err(unsupported(op, format!("src of type {}", src.ty)));
    }
    if ids.ty != GgmlType::I32 {
        return Err(invalid(op, format!("ids must be i32, not {}", ids.ty)));
    }
    let want_dst = if src.ty == GgmlType::I32 {
        GgmlType::I32
    } else {
        GgmlType::F32
    };
    if dst.ty != want_dst {
        return Err(invalid(
            op,
            format!("dst must be {want_dst} for a {} src, is {}", src.ty, dst.ty),
        ));
    }
    let [n, _, b1, b2] = src.ne;
    let [r, i1, i2, i3] = ids.ne;
    if (i1, i2, i3) != (b1, b2, 1) {
        return Err(invalid(
            op,
            format!("ids {:?} must be [r, {b1}, {b2}, 1] (src's batches)", ids.ne),
        ));
    }
    if dst.ne != [n, r, b1, b2] {
        return Err(invalid(op, format!("dst {:?} must be [{n}, {r}, {b1}, {b2}]", dst.ne)));
    }
    check_blocks(op, src, "src")?;
    for (name, l) in [("src", src), ("ids", ids), ("dst", dst)] {
        check_count(op, l, name)?;
    }
    Ok(problem(op, src, dst, false, dst.offset as u64))
}

/// Why SET_ROWS of `src` into `dst` at `ids` cannot run, if it cannot: `dst` `[n, m, b2, b3]` of
/// a type [`writes`] (rows packed), `src` f32 or f16 `[n, r, b2, b3]` (any strides), `ids` i32 or
/// i64 `[r, c1, c2, 1]` with `c1 | b2`, `c2 | b3` (broadcast, any strides).
pub fn check_set_rows(dst: &Layout, src: &Layout, ids: &Layout) -> Result<Problem> {
    let op = RowsOp::SetRows;
    if !matches!(src.ty, GgmlType::F32 | GgmlType::F16) {
        return Err(invalid(op, format!("src must be f32 or f16, not {}", src.ty)));
    }
    if !writes(dst.ty) {
        return Err(unsupported(op, format!("dst of type {}", dst.ty)));
    }
    if !matches!(ids.ty, GgmlType::I32 | GgmlType::I64) {
        return Err(invalid(op, format!("ids must be i32 or i64, not {}", ids.ty)));
    }
    let [n, _, b2, b3] = dst.ne;
    let [sn, r, s2, s3] = src.ne;
    if (sn, s2, s3) != (n, b2, b3) {
        return Err(invalid(
            op,
            format!("src {:?} must match dst {:?} in dims 0, 2 and 3", src.ne, dst.ne),
        ));
    }
    let [ir, c1, c2, c3] = ids.ne;
    if ir != r || c3 != 1 || c1 == 0 || c2 == 0 || !b2.is_multiple_of(c1) || !b3.is_multiple_of(c2) {
        return Err(invalid(
            op,
            format!("ids {:?} must be [{r}, c1, c2, 1] with c1 | {b2} and c2 | {b3}", ids.ne),
        ));
    }
    if !dst.has_contiguous_rows() || !n.is_multiple_of(dst.ty.block_size()) {
        return Err(invalid(
            op,
            format!("dst ({}) needs packed rows of whole blocks, is {dst:?}", dst.ty),
        ));
    }
    for (name, l) in [("src", src), ("ids", ids), ("dst", dst)] {
        check_count(op, l, name)?;
    }
    Ok(problem(op, src, dst, ids.ty == GgmlType::I64, dst.offset as u64))
}

/// Why CPY of `src` into `dst` cannot run, if it cannot: the same number of elements, any
/// layouts; types as ggml's CPU copies them: the same type (bytes; a quantized type's rows whole
/// packed blocks), f32/f16/bf16 to each other, f32 to and from i32, f32/f16/bf16 to a type
/// [`writes`] (dst contiguous, src rows whole blocks), any type [`reads`] to f32.
pub fn check_cpy(src: &Layout, dst: &Layout) -> Result<Problem> {
    let op = RowsOp::Cpy;
    let (st, dt) = (src.ty, dst.ty);
    if src.elements() != dst.elements() {
        return Err(invalid(
            op,
            format!(
                "src {:?} and dst {:?} hold different numbers of elements",
                src.ne, dst.ne
            ),
        ));
    }
    let same = st == dt && (reads(st) || st == GgmlType::I32);
    let convert = (plain(st) && plain(dt))
        || (st == GgmlType::F32 && dt == GgmlType::I32)
        || (st == GgmlType::I32 && dt == GgmlType::F32)
        || (st.is_quantized() && reads(st) && dt == GgmlType::F32);
    let quantize = plain(st) && dt.is_quantized() && writes(dt);
    if !(same || convert || quantize) {
        return Err(unsupported(op, format!("from {st} to {dt}")));
    }
    check_blocks(op, src, "src")?;
    check_blocks(op, dst, "dst")?;
    if dt.is_quantized() && st != dt {
        if !dst.is_contiguous() {
            return Err(invalid(op, format!("a {dt} dst must be contiguous")));
        }
        if !src.ne[0].is_multiple_of(dt.block_size()) {
            return Err(invalid(
                op,
                format!(
                    "src rows of {} are not whole {dt} blocks of {}",
                    src.ne[0],
                    dt.block_size()
                ),
            ));
        }
    }
    for (name, l) in [("src", src), ("dst", dst)] {
        check_count(op, l, name)?;
    }
    Ok(problem(op, src, dst, false, dst.offset as u64))
}

/// The checks every op makes of tensors it binds: the context's device, the stream's, dst
/// disjoint from the inputs.
fn check_tensors(
    env: &Env,
    stream: &Stream,
    op: RowsOp,
    dst: &DeviceTensor,
    inputs: &[(&str, &DeviceTensor)],
) -> Result<()> {
    let mut all: Vec<&DeviceTensor> = inputs.iter().map(|(_, t)| *t).collect();
    all.push(dst);
    env.check_operands(&all)?;
    env.check_stream(stream)?;
    crate::memory::check_output_disjoint(&op.to_string(), dst, inputs)
}

/// The problem with dst's start as bound (its offset within its binding decides alignment).
fn bound_problem(env: &Env, mut p: Problem, dst: &DeviceTensor) -> Result<Problem> {
    let limits = env.limits();
    let b = dst.binding(
        u64::from(limits.min_storage_buffer_offset_alignment),
        limits.max_storage_buffer_binding_size,
    )?;
    let l = dst.layout();
    p.dst_rows_aligned = b.start_byte.is_multiple_of(4) && l.nb[1..].iter().all(|&nb| nb.is_multiple_of(4));
    Ok(p)
}

/// Records `dst[:, i, j, k] = f32(src[:, ids[i, j, k], j, k])` (see [`check_get_rows`]); returns
/// the plan it followed. An id outside `0..src.ne[1]` gives a row of zeros.
pub fn get_rows(
    env: &Env,
    stream: &mut Stream,
    src: &DeviceTensor,
    ids: &DeviceTensor,
    dst: &DeviceTensor,
) -> Result<RowsPlan> {
    let p = check_get_rows(src.layout(), ids.layout(), dst.layout())?;
    check_tensors(env, stream, RowsOp::GetRows, dst, &[("src", src), ("ids", ids)])?;
    let plan = plan::plan(&bound_problem(env, p, dst)?, &env.facts());
    encode::encode(
        env,
        stream,
        &encode::Operands {
            src,
            ids: Some(ids),
            dst,
        },
        &plan,
    )?;
    Ok(plan)
}

/// Records `dst[:, ids[i, j mod c1, k mod c2], j, k] = src[:, i, j, k]` converted to dst's type
/// (see [`check_set_rows`]); returns the plan it followed. Rows not named keep their bytes; an
/// id outside `0..dst.ne[1]` writes nothing.
pub fn set_rows(
    env: &Env,
    stream: &mut Stream,
    dst: &DeviceTensor,
    src: &DeviceTensor,
    ids: &DeviceTensor,
) -> Result<RowsPlan> {
    let p = check_set_rows(dst.layout(), src.layout(), ids.layout())?;
    check_tensors(env, stream, RowsOp::SetRows, dst, &[("src", src), ("ids", ids)])?;
    let plan = plan::plan(&bound_problem(env, p, dst)?, &env.facts());
    encode::encode(
        env,
        stream,
        &encode::Operands {
            src,
            ids: Some(ids),
            dst,
        },
        &plan,
    )?;
    Ok(plan)
}

/// Records `dst = src` element for element in logical order, converted (see [`check_cpy`]);
/// returns the plan it followed.
pub fn cpy(env: &Env, stream: &mut Stream, src: &DeviceTensor, dst: &DeviceTensor) -> Result<RowsPlan> {
    let p = check_cpy(src.layout(), dst.layout())?;
    check_tensors(env, stream, RowsOp::Cpy, dst, &[("src", src)])?;
    let plan = plan::plan(&bound_problem(env, p, dst)?, &env.facts());
    encode::encode(env, stream, &encode::Operands { src, ids: None, dst }, &plan)?;
    Ok(plan)
}
