//! ARGMAX on the CPU: the index of each row's largest value.

use super::{Result, row, shape_error};
use crate::ggml_type::GgmlType;
use crate::tensor::HostTensor;

const OP: &str = "ARGMAX";

/// ggml's ARGMAX of an f32 matrix `[n, rows, 1, 1]` (any strides): for each row, the index of
/// its largest value, as ggml's CPU loop finds it (`ggml_vec_argmax_f32`): a running
/// `max = MAX(max, x_i)` from −∞, and the index moves to every `i` where `x_i == max`. So on
/// ties the **last** of the equal maxima wins; a NaN resets the running max to the next value.
/// The result is one i32 per row.
pub fn argmax(x: &HostTensor) -> Result<Vec<i32>> {
    let [n, rows, n2, n3] = x.layout.ne;
    if x.layout.ty != GgmlType::F32 {
        return shape_error(OP, format!("x must be f32, not {}", x.layout.ty));
    }
    if n2 != 1 || n3 != 1 {
        return shape_error(OP, format!("x {:?} is not a matrix", x.layout.ne));
    }
    if i32::try_from(n).is_err() {
        return shape_error(OP, format!("rows of {n} elements overflow an i32 index"));
    }
    (0..rows)
        .map(|i1| {
            let r = row(OP, "x", x, i1, 0, 0)?;
            let (mut max, mut idx) = (f32::NEG_INFINITY, 0usize);
            for (i, &v) in r.iter().enumerate() {
                // C's MAX(a, b): a > b ? a : b.
                max = if max > v { max } else { v };
                if max == v {
                    idx = i;
                }
            }
            Ok(idx as i32)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Layout;

    fn t(ne: [usize; 4], values: &[f32]) -> HostTensor {
        HostTensor::from_f32(GgmlType::F32, ne, values).unwrap()
    }

    #[test]
    fn index_of_the_max_per_row() {
        let x = t([4, 2, 1, 1], &[1.0, 5.0, -2.0, 3.0, -7.0, -1.0, -3.0, -9.0]);
        assert_eq!(argmax(&x).unwrap(), vec![1, 1]);
        // Ties: the last equal maximum (ggml's loop), not the first.
        let ties = t([4, 1, 1, 1], &[2.0, 7.0, 7.0, 1.0]);
        assert_eq!(argmax(&ties).unwrap(), vec![2]);
        // All −∞: every element equals the running max, so the last index.
        let inf = t([3, 1, 1, 1], &[f32::NEG_INFINITY; 3]);
        assert_eq!(argmax(&inf).unwrap(), vec![2]);
        // A NaN is skipped over: the max restarts from the value after it.
        let nan = t([4, 1, 1, 1], &[9.0, f32::NAN, 1.0, 2.0]);
        assert_eq!(argmax(&nan).unwrap(), vec![3]);
    }

    #[test]
    fn strided_rows_and_bad_shapes() {
        // The first 2 of 3 values per row: [1, 4] and [6, 2]; the 9s are outside the view.
        let x = HostTensor {
            layout: Layout {
                ne: [2, 2, 1, 1],
                ..Layout::contiguous(GgmlType::F32, [3, 2, 1, 1]).unwrap()
            },
            data: t([3, 2, 1, 1], &[1.0, 4.0, 9.0, 6.0, 2.0, 9.0]).data,
        };
        assert_eq!(argmax(&x).unwrap(), vec![1, 0]);
        assert!(argmax(&t([2, 1, 2, 1], &[0.0; 4])).is_err());
        let h = HostTensor::from_f32(GgmlType::F16, [2, 1, 1, 1], &[0.0; 2]).unwrap();
        assert!(argmax(&h).is_err());
    }
}
