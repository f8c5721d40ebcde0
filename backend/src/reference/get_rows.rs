//! GET_ROWS on the CPU: ggml's gather of whole rows by i32 id, dequantized to f32.

use super::elements::index;
use super::{Result, row, shape_error};
use crate::ggml_type::GgmlType;
use crate::tensor::HostTensor;

const OP: &str = "GET_ROWS";

/// ggml's GET_ROWS: `dst[:, i10, i11, i12] = src[:, ids[i10, i11, i12], i11, i12]`.
///
/// - `src` `[n, m, b1, b2]` of any type [`HostTensor::row_f32`] reads (every type MUL_MAT reads,
///   the plain types, i32), any layout it reads;
/// - `ids` i32 `[r, b1, b2, 1]`, any strides (a view of longer rows included).
///
/// The result is contiguous `[n, r, b1, b2]`, f32 as ggml's dst (ggml keeps i32 for an i32 `src`;
/// its values come back here as f32, exact up to 2²⁴). An id outside `0..m` is an error (ggml
/// asserts).
pub fn get_rows(src: &HostTensor, ids: &HostTensor) -> Result<Vec<f32>> {
    let [n, m, b1, b2] = src.layout.ne;
    let [r, i1n, i2n, i3n] = ids.layout.ne;
    if ids.layout.ty != GgmlType::I32 {
        return shape_error(OP, format!("ids must be i32, not {}", ids.layout.ty));
    }
    if i1n != b1 || i2n != b2 || i3n != 1 {
        return shape_error(
            OP,
            format!("ids {:?} do not match src's batches [{b1}, {b2}]", ids.layout.ne),
        );
    }
    let mut out = Vec::with_capacity(n * r * b1 * b2);
    for i12 in 0..b2 {
        for i11 in 0..b1 {
            for i10 in 0..r {
                let id = index(OP, "ids", ids, [i10, i11, i12, 0])?;
                let Some(id) = usize::try_from(id).ok().filter(|&id| id < m) else {
                    return shape_error(OP, format!("ids[{i10}, {i11}, {i12}] = {id} is not a row of src's {m}"));
                };
                out.extend(row(OP, "src", src, id, i11, i12)?);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::ReferenceError;
    use crate::tensor::Layout;

    fn ids(ne: [usize; 4], values: &[i32]) -> HostTensor {
        HostTensor {
            layout: Layout::contiguous(GgmlType::I32, ne).unwrap(),
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    #[test]
    fn gathers_rows_per_batch() {
        // Two batches of three rows of two values: row j of batch b is [10b + j, -(10b + j)].
        let values: Vec<f32> = (0..2)
            .flat_map(|b| (0..3).flat_map(move |j| [(10 * b + j) as f32, -((10 * b + j) as f32)]))
            .collect();
        let src = HostTensor::from_f32(GgmlType::F32, [2, 3, 2, 1], &values).unwrap();
        let out = get_rows(&src, &ids([2, 2, 1, 1], &[2, 0, 1, 1])).unwrap();
        assert_eq!(out, vec![2.0, -2.0, 0.0, 0.0, 11.0, -11.0, 11.0, -11.0]);
    }

    #[test]
    fn quantized_rows_are_dequantized() {
        // Two q4_0 rows, gathered in the other order: each comes back as the format's own
        // dequantization of that row (checked bit for bit against ggml in `format`).
        let values: Vec<f32> = (0..64).map(|k| ((k * 37) % 64) as f32 / 32.0 - 1.0).collect();
        let q = HostTensor::from_f32(GgmlType::Q4_0, [32, 2, 1, 1], &values).unwrap();
        let whole = q.to_f32().unwrap();
        let out = get_rows(&q, &ids([3, 1, 1, 1], &[1, 0, 1])).unwrap();
        let want: Vec<f32> = [&whole[32..], &whole[..32], &whole[32..]].concat();
        assert_eq!(out, want);
        assert_ne!(whole[..32], whole[32..]);
    }

    #[test]
    fn strided_ids_and_bad_ids() {
        let src = HostTensor::from_f32(GgmlType::F16, [1, 4, 1, 1], &[5.0, 6.0, 7.0, 8.0]).unwrap();
        // A view of the first 2 of 4 ids per row (upstream's `v=1`).
        let mut view = ids([4, 1, 1, 1], &[3, 1, 0, 0]);
        view.layout.ne = [2, 1, 1, 1];
        assert_eq!(get_rows(&src, &view).unwrap(), vec![8.0, 6.0]);
        for bad in [-1, 4] {
            assert!(matches!(
                get_rows(&src, &ids([1, 1, 1, 1], &[bad])),
                Err(ReferenceError::Shape { .. })
            ));
        }
        let batches = ids([1, 2, 1, 1], &[0, 0]);
        assert!(get_rows(&src, &batches).is_err());
        let f32_ids = HostTensor::from_f32(GgmlType::F32, [1, 1, 1, 1], &[0.0]).unwrap();
        assert!(get_rows(&src, &f32_ids).is_err());
    }
}
