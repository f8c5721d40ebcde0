//! MUL_MAT on the CPU: ggml's `dst = a·bᵀ` per batch, with broadcasting of `a` over `b`'s batches.

use super::{ReferenceError, Result, dot, matrix, parallel_map, row, shape_error};
use crate::tensor::HostTensor;

const OP: &str = "MUL_MAT";

/// ggml's MUL_MAT: `dst[m, n, i2, i3] = Σ_k a[k, m, i2/r2, i3/r3] · b[k, n, i2, i3]`, where
/// `r2 = b.ne2/a.ne2` and `r3 = b.ne3/a.ne3` (a's batches are broadcast over b's).
///
/// Any layouts the tensors' types allow (views, permutations, strided rows of plain types) are
/// read through [`HostTensor::row_f32`]; products are summed in f64 and rounded once. The result
/// is contiguous f32 `[a.ne1, b.ne1, b.ne2, b.ne3]` (ggml's dst), `m` fastest.
pub fn mul_mat(a: &HostTensor, b: &HostTensor) -> Result<Vec<f32>> {
    let [k, m, a2, a3] = a.layout.ne;
    let [kb, n, b2, b3] = b.layout.ne;
    if k != kb {
        return shape_error(OP, format!("a has rows of {k} elements, b of {kb}"));
    }
    if a2 == 0 || a3 == 0 || !b2.is_multiple_of(a2) || !b3.is_multiple_of(a3) {
        return shape_error(
            OP,
            format!("b's batches [{b2}, {b3}] are not whole multiples of a's [{a2}, {a3}]"),
        );
    }
    let (r2, r3) = (b2 / a2, b3 / a3);
    let len = m * n * b2 * b3;
    if k == 0 || len == 0 {
        return Ok(vec![0.0; len]);
    }
    // a's matrices, dequantized once: a_mats[i3 * a2 + i2] holds m rows of k values.
    let a_mats = parallel_map(a2 * a3, |i| matrix(OP, "a", a, i % a2, i / a2))?;
    // One task per dst column (a row of b): m outputs.
    let columns = parallel_map(n * b2 * b3, |i| {
        let (j, batch) = (i % n, i / n);
        let (i2, i3) = (batch % b2, batch / b2);
        let a_mat = &a_mats[(i3 / r3) * a2 + i2 / r2];
        let b_row = row(OP, "b", b, j, i2, i3)?;
        Ok(a_mat
            .chunks_exact(k)
            .map(|a_row| dot(a_row, &b_row) as f32)
            .collect::<Vec<f32>>())
    })?;
    let out = columns.concat();
    if out.len() != len {
        return Err(ReferenceError::Shape {
            op: OP,
            reason: format!("computed {} values, expected {len}", out.len()),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ggml_type::GgmlType;

    #[test]
    fn two_by_two() {
        // a rows: [1, 2], [3, 4]; b rows: [5, 6], [7, 8]. dst[i, j] = a_i · b_j.
        let a = HostTensor::from_f32(GgmlType::F32, [2, 2, 1, 1], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        let b = HostTensor::from_f32(GgmlType::F32, [2, 2, 1, 1], &[5.0, 6.0, 7.0, 8.0]).unwrap();
        assert_eq!(mul_mat(&a, &b).unwrap(), vec![17.0, 39.0, 23.0, 53.0]);
    }

    #[test]
    fn shape_errors_are_values() {
        let a = HostTensor::from_f32(GgmlType::F32, [2, 1, 2, 1], &[0.0; 4]).unwrap();
        let b = HostTensor::from_f32(GgmlType::F32, [3, 1, 2, 1], &[0.0; 6]).unwrap();
        assert!(matches!(mul_mat(&a, &b), Err(ReferenceError::Shape { .. })));
        let b = HostTensor::from_f32(GgmlType::F32, [2, 1, 3, 1], &[0.0; 6]).unwrap();
        assert!(matches!(mul_mat(&a, &b), Err(ReferenceError::Shape { .. })));
    }

    #[test]
    fn unsupported_types_are_errors() {
        let t = HostTensor {
            layout: crate::tensor::Layout::contiguous(GgmlType::IQ2_XXS, [256, 1, 1, 1]).unwrap(),
            data: vec![0; 66],
        };
        let b = HostTensor::from_f32(GgmlType::F32, [256, 1, 1, 1], &[0.0; 256]).unwrap();
        match mul_mat(&t, &b) {
            // Another engineer may have implemented iq2_xxs by now: then it just works.
            Ok(v) => assert_eq!(v.len(), 1),
            Err(e) => assert!(matches!(e, ReferenceError::Format { tensor: "a", .. }), "{e}"),
        }
    }
}
