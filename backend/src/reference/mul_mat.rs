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
    use crate::cases::MulMatCase;
    use crate::ggml_type::GgmlType;

    /// Deterministic values in [-1, 1).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// The naive definition over logical (contiguous-order) values.
    fn naive(a: &[f32], ane: [usize; 4], b: &[f32], bne: [usize; 4]) -> Vec<f32> {
        let [k, m, a2, a3] = ane;
        let [_, n, b2, b3] = bne;
        let mut out = Vec::new();
        for i3 in 0..b3 {
            for i2 in 0..b2 {
                for j in 0..n {
                    for i in 0..m {
                        let (ia2, ia3) = (i2 / (b2 / a2), i3 / (b3 / a3));
                        let mut s = 0.0f64;
                        for l in 0..k {
                            let av = a[((ia3 * a2 + ia2) * m + i) * k + l];
                            let bv = b[((i3 * b2 + i2) * n + j) * k + l];
                            s += f64::from(av) * f64::from(bv);
                        }
                        out.push(s as f32);
                    }
                }
            }
        }
        out
    }

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

    /// Every case layout (broadcast, permutation, k_v view, overlap) agrees with the naive
    /// computation over the logical values.
    #[test]
    fn case_layouts_agree_with_naive() {
        let specs = [
            "MUL_MAT(type_a=f32,type_b=f32,m=7,n=5,k=12,bs=[2,3],nr=[2,2])",
            "MUL_MAT(type_a=f16,type_b=f32,m=6,n=3,k=8,bs=[3,2],nr=[1,2],per=[0,2,1,3])",
            "MUL_MAT(type_a=f32,type_b=f16,m=4,n=9,k=16,bs=[2,3],nr=[2,1],per=[0,1,3,2])",
            "MUL_MAT(type_a=bf16,type_b=f32,m=5,n=2,k=6,bs=[3,2],per=[0,3,2,1])",
            "MUL_MAT(type_a=f32,type_b=f32,m=6,n=3,k=10,bs=[2,1],nr=[1,1],per=[1,0,2,3])",
            "MUL_MAT(type_a=f16,type_b=f32,m=4,n=1,k=33,bs=[2,1],k_v=66)",
            "MUL_MAT(type_a=f32,type_b=f32,m=8,n=4,k=16,bs=[3,2],src_overlap=1)",
        ];
        for (s, spec) in specs.iter().enumerate() {
            let case: MulMatCase = spec.parse().unwrap();
            let t = case.tensors().unwrap();
            let a_vals = values(t.a.storage.elements(), 2 * s as u64 + 1);
            let b_vals = values(t.b.storage.elements(), 2 * s as u64 + 2);
            let a = t.a.host(&a_vals).unwrap();
            let b = if t.b_aliases_a {
                t.b.host(&a_vals)
            } else {
                t.b.host(&b_vals)
            }
            .unwrap();
            if case.per != [0, 1, 2, 3] {
                assert!(!a.layout.is_contiguous(), "{spec}");
            }
            let got = mul_mat(&a, &b).unwrap();
            // The logical values, read back in contiguous order through the views.
            let want = naive(&a.to_f32().unwrap(), a.layout.ne, &b.to_f32().unwrap(), b.layout.ne);
            assert_eq!(got.len(), t.dst.elements(), "{spec}");
            assert_eq!(got, want, "{spec}");
        }
    }

    /// A permuted view gives the same product as the same logical values stored contiguously.
    #[test]
    fn permuted_equals_contiguous() {
        let case: MulMatCase = "MUL_MAT(type_a=f32,type_b=f32,m=5,n=4,k=6,bs=[3,2],nr=[2,1],per=[0,2,1,3])"
            .parse()
            .unwrap();
        let t = case.tensors().unwrap();
        let a = t.a.host(&values(t.a.storage.elements(), 7)).unwrap();
        let b = t.b.host(&values(t.b.storage.elements(), 8)).unwrap();
        let ac = HostTensor::from_f32(GgmlType::F32, a.layout.ne, &a.to_f32().unwrap()).unwrap();
        let bc = HostTensor::from_f32(GgmlType::F32, b.layout.ne, &b.to_f32().unwrap()).unwrap();
        assert_eq!(mul_mat(&a, &b).unwrap(), mul_mat(&ac, &bc).unwrap());
    }
}
