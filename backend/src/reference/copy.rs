//! CPY on the CPU: ggml's copy between types and views, element `k` of the source (in its
//! logical order) to element `k` of the destination.

use super::{ReferenceError, Result, cpu_quant, shape_error};
use crate::format::{self, FormatError};
use crate::ggml_type::GgmlType;
use crate::tensor::{HostTensor, Layout};

const OP: &str = "CPY";

/// Byte offset of unit `u` (an element, or a block of a quantized type) of `l` in logical order,
/// `i0` fastest; `None` on overflow.
pub(crate) fn unit_offset(l: &Layout, u: usize) -> Option<usize> {
    let units0 = l.ne[0] / l.ty.block_size();
    let (u0, rest) = (u % units0, u / units0);
    let (i1, rest) = (rest % l.ne[1], rest / l.ne[1]);
    let (i2, i3) = (rest % l.ne[2], rest / l.ne[2]);
    let row = l.row_offset(i1, i2, i3).ok()?;
    row.checked_add(u0.checked_mul(l.nb[0])?)
}

/// The bytes of `len` at `at` in `t`'s storage, or an error naming the tensor.
pub(crate) fn bytes_mut<'a>(
    op: &'static str,
    tensor: &'static str,
    t: &'a mut [u8],
    at: usize,
    len: usize,
) -> Result<&'a mut [u8]> {
    let total = t.len();
    at.checked_add(len)
        .and_then(|end| t.get_mut(at..end))
        .ok_or_else(|| ReferenceError::Format {
            op,
            tensor,
            source: FormatError::Length {
                expected: at.saturating_add(len),
                got: total,
            },
        })
}

fn format_error(tensor: &'static str) -> impl Fn(FormatError) -> ReferenceError {
    move |source| ReferenceError::Format { op: OP, tensor, source }
}

/// ggml's CPY of `src` into `dst` (both any layout: views, permutations, strided rows): the
/// elements of `src` in logical order (`i0` fastest) go to the elements of `dst` in its logical
/// order, so only the counts must agree. Returns `dst` with those elements written; bytes the view
/// does not cover keep their values.
///
/// - Same type: the bytes are copied (blocks of a quantized type as they are).
/// - f32, f16, bf16 to each other, f32 to i32 and i32 to f32: each value converted
///   (to f16/bf16 rounded to nearest even, to i32 truncated).
/// - f32, f16, bf16 to a quantized type: `dst` must be contiguous and `src`'s rows whole blocks;
///   the values are quantized as ggml's CPU `from_float` does (the [`format`] module's
///   quantizers; for iq4_nl the single pass of `quantize_row_iq4_nl_ref`).
/// - A quantized type to f32: dequantized.
///
/// Other pairs are refused, as ggml's CPU aborts on them.
pub fn cpy(src: &HostTensor, dst: &HostTensor) -> Result<HostTensor> {
    let (st, dt) = (src.layout.ty, dst.layout.ty);
    if src.layout.elements() != dst.layout.elements() {
        return shape_error(
            OP,
            format!(
                "src {:?} and dst {:?} hold different numbers of elements",
                src.layout.ne, dst.layout.ne
            ),
        );
    }
    for (name, t) in [("src", src), ("dst", dst)] {
        t.layout
            .check_fits(t.data.len())
            .map_err(|e| format_error(name)(FormatError::Layout(e.to_string())))?;
    }
    let plain = |t: GgmlType| matches!(t, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16);
    let allowed = st == dt
        || (plain(st) && plain(dt))
        || (st == GgmlType::F32 && dt == GgmlType::I32)
        || (st == GgmlType::I32 && dt == GgmlType::F32)
        || (plain(st) && dt.is_quantized())
        || (st.is_quantized() && dt == GgmlType::F32);
    if !allowed {
        return shape_error(OP, format!("no copy from {st} to {dt} (ggml's CPU has none)"));
    }
    let mut out = dst.clone();
    if st == dt {
        // Unit for unit: elements, or whole blocks.
        let size = st.type_size();
        let units = src.layout.elements() / st.block_size();
        for u in 0..units {
            let from = unit_offset(&src.layout, u).ok_or_else(|| overflow("src"))?;
            let to = unit_offset(&dst.layout, u).ok_or_else(|| overflow("dst"))?;
            let bytes = from
                .checked_add(size)
                .and_then(|end| src.data.get(from..end))
                .ok_or_else(|| overflow("src"))?;
            bytes_mut(OP, "dst", &mut out.data, to, size)?.copy_from_slice(bytes);
        }
        return Ok(out);
    }
    let values = src.to_f32().map_err(format_error("src"))?;
    if dt.is_quantized() {
        if !contiguous(&dst.layout) {
            return shape_error(OP, format!("a {dt} dst must be contiguous"));
        }
        if !src.layout.ne[0].is_multiple_of(dt.block_size()) {
            return shape_error(
                OP,
                format!(
                    "src rows of {} are not whole {dt} blocks of {}",
                    src.layout.ne[0],
                    dt.block_size()
                ),
            );
        }
        let bytes = cpu_quant::from_float(dt, &values).map_err(format_error("dst"))?;
        bytes_mut(OP, "dst", &mut out.data, dst.layout.offset, bytes.len())?.copy_from_slice(&bytes);
        return Ok(out);
    }
    let size = dt.type_size();
    for (k, &v) in values.iter().enumerate() {
        let to = unit_offset(&dst.layout, k).ok_or_else(|| overflow("dst"))?;
        let bytes = format::quantize(dt, &[v]).map_err(format_error("dst"))?;
        bytes_mut(OP, "dst", &mut out.data, to, size)?.copy_from_slice(&bytes);
    }
    Ok(out)
}

/// Whether `l` is contiguous as ggml's `ggml_is_contiguous` counts it: whole rows packed, and
/// every dimension of extent above 1 stepping the one below it.
fn contiguous(l: &Layout) -> bool {
    let mut next = l.ty.type_size();
    for i in 0..4 {
        let extent = if i == 0 { l.ne[0] / l.ty.block_size() } else { l.ne[i] };
        if extent != 1 {
            if l.nb[i] != next {
                return false;
            }
            next = next.saturating_mul(extent);
        }
    }
    true
}

fn overflow(tensor: &'static str) -> ReferenceError {
    ReferenceError::Shape {
        op: OP,
        reason: format!("{tensor}: an element lies outside its storage"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ty: GgmlType, ne: [usize; 4], values: &[f32]) -> HostTensor {
        HostTensor::from_f32(ty, ne, values).unwrap()
    }

    #[test]
    fn converts_between_plain_types() {
        let src = t(GgmlType::F32, [3, 1, 1, 1], &[1.0 / 3.0, -2.5, 70000.0]);
        let h = cpy(&src, &t(GgmlType::F16, [3, 1, 1, 1], &[0.0; 3])).unwrap();
        let want: Vec<f32> = [1.0f32 / 3.0, -2.5, 70000.0]
            .iter()
            .map(|v| half::f16::from_f32(*v).to_f32())
            .collect();
        assert_eq!(h.to_f32().unwrap(), want);
        assert_eq!(want[2], f32::INFINITY); // past f16's range
        let b = cpy(&src, &t(GgmlType::BF16, [3, 1, 1, 1], &[0.0; 3])).unwrap();
        assert_eq!(b.to_f32().unwrap()[1], -2.5);
        let i = cpy(
            &t(GgmlType::F32, [2, 1, 1, 1], &[-2.7, 3.9]),
            &t(GgmlType::I32, [2, 1, 1, 1], &[0.0; 2]),
        )
        .unwrap();
        assert_eq!(i.to_f32().unwrap(), vec![-2.0, 3.0]);
    }

    #[test]
    fn transposed_source_and_reshaped_destination() {
        // src [2, 3] transposed to [3, 2]: its logical order is 1 3 5 2 4 6; dst is [6].
        let stored = t(GgmlType::F32, [2, 3, 1, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let src = HostTensor {
            layout: stored.layout.permute([1, 0, 2, 3]).unwrap(),
            data: stored.data,
        };
        let out = cpy(&src, &t(GgmlType::F32, [6, 1, 1, 1], &[0.0; 6])).unwrap();
        assert_eq!(out.to_f32().unwrap(), vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
    }

    #[test]
    fn strided_destination_keeps_the_gaps() {
        // dst: the first 2 of 4 rows... as upstream's dst_alloc: a [2, 2] view with rows 3 apart.
        let storage = t(GgmlType::F32, [3, 2, 1, 1], &[9.0; 6]);
        let dst = HostTensor {
            layout: Layout {
                ne: [2, 2, 1, 1],
                ..storage.layout
            },
            data: storage.data,
        };
        let src = t(GgmlType::F32, [2, 2, 1, 1], &[1.0, 2.0, 3.0, 4.0]);
        let out = cpy(&src, &dst).unwrap();
        let whole = HostTensor {
            layout: Layout::contiguous(GgmlType::F32, [3, 2, 1, 1]).unwrap(),
            data: out.data.clone(),
        };
        assert_eq!(whole.to_f32().unwrap(), vec![1.0, 2.0, 9.0, 3.0, 4.0, 9.0]);
        assert_eq!(out.to_f32().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn quantized_both_ways() {
        let values: Vec<f32> = (0..64).map(|k| (k as f32 - 31.5) / 8.0).collect();
        let src = t(GgmlType::F32, [64, 1, 1, 1], &values);
        let q = cpy(&src, &t(GgmlType::Q8_0, [64, 1, 1, 1], &[0.0; 64])).unwrap();
        // The same bytes as quantizing directly (ggml's quantize_row_q8_0).
        assert_eq!(q.data, format::quantize(GgmlType::Q8_0, &values).unwrap());
        let back = cpy(&q, &t(GgmlType::F32, [64, 1, 1, 1], &[0.0; 64])).unwrap();
        let err: f32 = back
            .to_f32()
            .unwrap()
            .iter()
            .zip(&values)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(err < 4.0 / 127.0 / 2.0 + 1e-3, "{err}");
        // Same-type quantized copies move blocks: a [32, 2] q4_0 into [64, 1].
        let q4 = t(GgmlType::Q4_0, [32, 2, 1, 1], &values);
        let moved = cpy(&q4, &t(GgmlType::Q4_0, [64, 1, 1, 1], &[0.0; 64])).unwrap();
        assert_eq!(moved.data, q4.data);
    }

    #[test]
    fn refused_pairs_and_shapes() {
        let f = t(GgmlType::F32, [32, 1, 1, 1], &[0.0; 32]);
        let q = t(GgmlType::Q4_0, [32, 1, 1, 1], &[0.0; 32]);
        let h = t(GgmlType::F16, [32, 1, 1, 1], &[0.0; 32]);
        assert!(cpy(&q, &h).is_err()); // quantized to f16: not in ggml's CPU
        assert!(cpy(&q, &t(GgmlType::Q8_0, [32, 1, 1, 1], &[0.0; 32])).is_err());
        assert!(cpy(&f, &t(GgmlType::F32, [31, 1, 1, 1], &[0.0; 31])).is_err());
        // A quantized dst must be contiguous as ggml counts it: dims of extent 1 have any stride.
        let mut one_row = t(GgmlType::Q4_0, [32, 2, 1, 1], &[0.0; 64]);
        one_row.layout.ne = [32, 1, 1, 1];
        one_row.layout.nb[1] = 36;
        assert!(cpy(&f, &one_row).is_ok());
        let mut gap = t(GgmlType::Q4_0, [32, 4, 1, 1], &[0.0; 128]);
        gap.layout.ne = [32, 2, 1, 1];
        gap.layout.nb[1] = 36;
        let f2 = t(GgmlType::F32, [32, 2, 1, 1], &[0.0; 64]);
        assert!(cpy(&f2, &gap).is_err());
    }
}
