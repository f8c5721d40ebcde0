//! SET_ROWS on the CPU: ggml's scatter of f32/f16 rows into a tensor of any type (the KV cache),
//! at i32 or i64 row ids.

use super::copy::bytes_mut;
use super::cpu_quant;
use super::elements::index;
use super::{ReferenceError, Result, row, shape_error};
use crate::ggml_type::GgmlType;
use crate::tensor::HostTensor;

const OP: &str = "SET_ROWS";

/// ggml's SET_ROWS: for every row `i` of `src` (`[n, r, b2, b3]`, f32 or f16, any layout),
/// `dst[:, ids[i, i2 mod c1, i3 mod c2], i2, i3] = src[:, i, i2, i3]` converted to `dst`'s type
/// (as ggml's CPU `from_float` of that type: the [`crate::format`] module's quantizers, and
/// for iq4_nl the single pass of `quantize_row_iq4_nl_ref`).
///
/// - `dst` `[n, m, b2, b3]` with whole rows (`nb0` the type's size; rows of a quantized type
///   whole blocks); rows not named by an id keep their bytes;
/// - `ids` i32 or i64 `[r, c1, c2, 1]` with `c1 | b2`, `c2 | b3`, any strides. An id outside
///   `0..m` is an error (ggml asserts). When two ids are equal, the later row wins (ggml's order).
///
/// Returns `dst` with the rows written.
pub fn set_rows(dst: &HostTensor, src: &HostTensor, ids: &HostTensor) -> Result<HostTensor> {
    let [n, m, b2, b3] = dst.layout.ne;
    let [sn, r, s2, s3] = src.layout.ne;
    let [ir, c1, c2, c3] = ids.layout.ne;
    if !matches!(src.layout.ty, GgmlType::F32 | GgmlType::F16) {
        return shape_error(OP, format!("src must be f32 or f16, not {}", src.layout.ty));
    }
    if sn != n || s2 != b2 || s3 != b3 {
        return shape_error(
            OP,
            format!(
                "src {:?} does not match dst {:?} in dims 0, 2, 3",
                src.layout.ne, dst.layout.ne
            ),
        );
    }
    if ir != r || c3 != 1 || c1 == 0 || c2 == 0 || !b2.is_multiple_of(c1) || !b3.is_multiple_of(c2) {
        return shape_error(
            OP,
            format!(
                "ids {:?} do not index src's {r} rows broadcast over [{b2}, {b3}]",
                ids.layout.ne
            ),
        );
    }
    let ty = dst.layout.ty;
    if !dst.layout.has_contiguous_rows() {
        return shape_error(OP, "dst rows must be contiguous");
    }
    let row_bytes = ty.row_bytes(n).ok_or_else(|| ReferenceError::Shape {
        op: OP,
        reason: format!("rows of {n} are not whole {ty} blocks"),
    })?;
    let mut out = dst.clone();
    for i3 in 0..b3 {
        for i2 in 0..b2 {
            for i in 0..r {
                let id = index(OP, "ids", ids, [i, i2 % c1, i3 % c2, 0])?;
                let Some(id) = usize::try_from(id).ok().filter(|&id| id < m) else {
                    return shape_error(
                        OP,
                        format!("ids[{i}, {}, {}] = {id} is not a row of dst's {m}", i2 % c1, i3 % c2),
                    );
                };
                let values = row(OP, "src", src, i, i2, i3)?;
                let bytes = cpu_quant::from_float(ty, &values).map_err(|source| ReferenceError::Format {
                    op: OP,
                    tensor: "dst",
                    source,
                })?;
                let at = dst.layout.row_offset(id, i2, i3).map_err(|e| ReferenceError::Shape {
                    op: OP,
                    reason: format!("dst: {e}"),
                })?;
                bytes_mut(OP, "dst", &mut out.data, at, row_bytes)?.copy_from_slice(&bytes);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format;
    use crate::tensor::Layout;

    fn t(ty: GgmlType, ne: [usize; 4], values: &[f32]) -> HostTensor {
        HostTensor::from_f32(ty, ne, values).unwrap()
    }

    fn ids<T: Copy>(ty: GgmlType, ne: [usize; 4], values: &[T], bytes: fn(T) -> Vec<u8>) -> HostTensor {
        HostTensor {
            layout: Layout::contiguous(ty, ne).unwrap(),
            data: values.iter().flat_map(|&v| bytes(v)).collect(),
        }
    }

    fn i64_ids(ne: [usize; 4], values: &[i64]) -> HostTensor {
        ids(GgmlType::I64, ne, values, |v| v.to_le_bytes().to_vec())
    }

    #[test]
    fn scatters_rows_and_keeps_the_others() {
        // dst 4 rows of 2 (all 9); src rows [1, 2] and [3, 4] go to rows 3 and 0.
        let dst = t(GgmlType::F32, [2, 4, 1, 1], &[9.0; 8]);
        let src = t(GgmlType::F32, [2, 2, 1, 1], &[1.0, 2.0, 3.0, 4.0]);
        let out = set_rows(&dst, &src, &i64_ids([2, 1, 1, 1], &[3, 0])).unwrap();
        assert_eq!(out.to_f32().unwrap(), vec![3.0, 4.0, 9.0, 9.0, 9.0, 9.0, 1.0, 2.0]);
        // i32 ids give the same; f16 dst rounds.
        let i32_ids = ids(GgmlType::I32, [2, 1, 1, 1], &[3i32, 0], |v| v.to_le_bytes().to_vec());
        let h = t(GgmlType::F16, [2, 4, 1, 1], &[9.0; 8]);
        let third = t(GgmlType::F32, [2, 2, 1, 1], &[1.0 / 3.0, 2.0, 3.0, 4.0]);
        let out = set_rows(&h, &third, &i32_ids).unwrap().to_f32().unwrap();
        assert_eq!(out[6], half::f16::from_f32(1.0 / 3.0).to_f32());
    }

    #[test]
    fn ids_broadcast_over_batches() {
        // dst [1, 2, 2, 1], src [1, 1, 2, 1], one id for both batches (c1 = 1).
        let dst = t(GgmlType::F32, [1, 2, 2, 1], &[0.0; 4]);
        let src = t(GgmlType::F32, [1, 1, 2, 1], &[5.0, 6.0]);
        let out = set_rows(&dst, &src, &i64_ids([1, 1, 1, 1], &[1])).unwrap();
        assert_eq!(out.to_f32().unwrap(), vec![0.0, 5.0, 0.0, 6.0]);
    }

    #[test]
    fn quantized_rows_are_quantized() {
        let values: Vec<f32> = (0..32).map(|k| (k as f32 - 16.0) / 4.0).collect();
        let dst = t(GgmlType::Q4_0, [32, 2, 1, 1], &[0.0; 64]);
        let src = t(GgmlType::F32, [32, 1, 1, 1], &values);
        let out = set_rows(&dst, &src, &i64_ids([1, 1, 1, 1], &[1])).unwrap();
        assert_eq!(out.data[18..], format::quantize(GgmlType::Q4_0, &values).unwrap()[..]);
        assert_eq!(out.data[..18], dst.data[..18]);
    }

    #[test]
    fn bad_ids_and_shapes_are_errors() {
        let dst = t(GgmlType::F32, [2, 4, 1, 1], &[0.0; 8]);
        let src = t(GgmlType::F32, [2, 1, 1, 1], &[0.0; 2]);
        for bad in [-1, 4] {
            assert!(set_rows(&dst, &src, &i64_ids([1, 1, 1, 1], &[bad])).is_err());
        }
        assert!(set_rows(&dst, &src, &i64_ids([2, 1, 1, 1], &[0, 0])).is_err());
        let f_ids = t(GgmlType::F32, [1, 1, 1, 1], &[0.0]);
        assert!(set_rows(&dst, &src, &f_ids).is_err());
        let q = t(GgmlType::Q8_0, [32, 1, 1, 1], &[0.0; 32]);
        assert!(set_rows(&dst, &q, &i64_ids([1, 1, 1, 1], &[0])).is_err());
        // Rows that are not whole blocks of the dst type.
        let q_dst = HostTensor {
            layout: Layout {
                ne: [2, 1, 1, 1],
                ..Layout::contiguous(GgmlType::Q8_0, [32, 1, 1, 1]).unwrap()
            },
            data: vec![0; 34],
        };
        assert!(set_rows(&q_dst, &src, &i64_ids([1, 1, 1, 1], &[0])).is_err());
    }
}
