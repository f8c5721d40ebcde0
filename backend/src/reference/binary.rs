//! ADD, SUB, MUL and DIV on the CPU, with ggml's broadcasting: `b` repeats over `a`.

use std::fmt;

use super::elements::{can_repeat, float_dst, round_to, rows};
use super::{Result, row, shape_error};
use crate::tensor::HostTensor;

/// One of ggml's element-wise binary ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl BinaryOp {
    /// Every binary op, in ggml's order.
    pub const ALL: [BinaryOp; 4] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div];

    /// ggml's op name (`ADD`, …), as it starts a case string.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "ADD",
            BinaryOp::Sub => "SUB",
            BinaryOp::Mul => "MUL",
            BinaryOp::Div => "DIV",
        }
    }

    /// The op on two f32 values, in f32 as ggml's CPU computes it.
    pub fn apply(self, x: f32, y: f32) -> f32 {
        match self {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
        }
    }
}

impl fmt::Display for BinaryOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// ggml's ADD/SUB/MUL/DIV: `dst[i] = a[i] op b[i mod b.ne]` per dimension, where each of `b`'s
/// extents divides `a`'s (ggml's `ggml_can_repeat(b, a)`, dimension 0 included).
///
/// Both may have any layout (views, permutations, overlapping storage). The values are computed in
/// f32 and rounded to `a`'s type (ggml's dst is a tensor like `a`: f32, f16 or bf16). The result
/// is contiguous with `a`'s extents.
pub fn binary(op: BinaryOp, a: &HostTensor, b: &HostTensor) -> Result<Vec<f32>> {
    let name = op.name();
    float_dst(name, "a", a.layout.ty)?;
    let (ne, ne_b) = (a.layout.ne, b.layout.ne);
    if !can_repeat(ne_b, ne) {
        return shape_error(name, format!("b {ne_b:?} does not repeat over a {ne:?}"));
    }
    let mut out = Vec::with_capacity(a.layout.elements());
    for (i1, i2, i3) in rows(ne) {
        let x = row(name, "a", a, i1, i2, i3)?;
        let y = row(name, "b", b, i1 % ne_b[1], i2 % ne_b[2], i3 % ne_b[3])?;
        out.extend(
            x.iter()
                .enumerate()
                .map(|(i0, &v)| round_to(a.layout.ty, op.apply(v, y[i0 % y.len()]))),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ggml_type::GgmlType;
    use crate::reference::ReferenceError;

    fn f32_tensor(ne: [usize; 4], values: &[f32]) -> HostTensor {
        HostTensor::from_f32(GgmlType::F32, ne, values).unwrap()
    }

    #[test]
    fn each_op_on_equal_shapes() {
        let a = f32_tensor([3, 1, 1, 1], &[6.0, -2.0, 1.5]);
        let b = f32_tensor([3, 1, 1, 1], &[2.0, 4.0, -0.5]);
        assert_eq!(binary(BinaryOp::Add, &a, &b).unwrap(), vec![8.0, 2.0, 1.0]);
        assert_eq!(binary(BinaryOp::Sub, &a, &b).unwrap(), vec![4.0, -6.0, 2.0]);
        assert_eq!(binary(BinaryOp::Mul, &a, &b).unwrap(), vec![12.0, -8.0, -0.75]);
        assert_eq!(binary(BinaryOp::Div, &a, &b).unwrap(), vec![3.0, -0.5, -3.0]);
        let zero = f32_tensor([3, 1, 1, 1], &[0.0, 0.0, 0.0]);
        let q = binary(BinaryOp::Div, &a, &zero).unwrap();
        assert_eq!(q[0], f32::INFINITY);
        assert_eq!(q[1], f32::NEG_INFINITY);
    }

    #[test]
    fn b_repeats_in_every_dimension() {
        // a [4, 2, 2, 1] counts 0..16; b [2, 1, 2, 1] = [100, 200 | 300, 400] per i2.
        let a = f32_tensor([4, 2, 2, 1], &(0..16).map(|i| i as f32).collect::<Vec<_>>());
        let b = f32_tensor([2, 1, 2, 1], &[100.0, 200.0, 300.0, 400.0]);
        let out = binary(BinaryOp::Add, &a, &b).unwrap();
        let want: Vec<f32> = (0..16)
            .map(|i| {
                let (i0, i2) = (i % 4, i / 8);
                i as f32 + [100.0, 200.0, 300.0, 400.0][i2 * 2 + i0 % 2]
            })
            .collect();
        assert_eq!(out, want);
        // b's extents must divide a's.
        let c = f32_tensor([3, 1, 1, 1], &[1.0; 3]);
        assert!(matches!(
            binary(BinaryOp::Mul, &a, &c),
            Err(ReferenceError::Shape { .. })
        ));
    }

    #[test]
    fn permuted_b_and_f16_results() {
        // b stored [2, 3] and permuted to [3, 2]: b[i0, i1] = stored[i1, i0].
        let stored = f32_tensor([2, 3, 1, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = HostTensor {
            layout: stored.layout.permute([1, 0, 2, 3]).unwrap(),
            data: stored.data.clone(),
        };
        let a = f32_tensor([3, 2, 1, 1], &[0.0; 6]);
        assert_eq!(
            binary(BinaryOp::Add, &a, &b).unwrap(),
            vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]
        );
        // An f16 a gives f16 results: 1 + 2^-12 rounds back to 1.
        let h = HostTensor::from_f32(GgmlType::F16, [1, 1, 1, 1], &[1.0]).unwrap();
        let tiny = f32_tensor([1, 1, 1, 1], &[1.0 / 4096.0]);
        assert_eq!(binary(BinaryOp::Add, &h, &tiny).unwrap(), vec![1.0]);
        let q = HostTensor::from_f32(GgmlType::Q8_0, [32, 1, 1, 1], &[0.0; 32]).unwrap();
        assert!(binary(BinaryOp::Add, &q, &tiny).is_err());
    }

    #[test]
    fn overlapping_views_of_one_storage() {
        // Upstream's src_overlap: a and b view the same bytes, b one row further on.
        let t = f32_tensor([2, 3, 1, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let mut a = t.clone();
        a.layout.ne = [2, 2, 1, 1];
        let mut b = a.clone();
        b.layout.offset = 8;
        assert_eq!(binary(BinaryOp::Mul, &a, &b).unwrap(), vec![3.0, 8.0, 15.0, 24.0]);
    }
}
