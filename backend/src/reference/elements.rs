//! What the per-op references share: integer ids read exactly from any layout, values rounded to
//! a destination type as ggml stores them, parameters checked, broadcasting indices.

use super::{ReferenceError, Result, shape_error};
use crate::ggml_type::GgmlType;
use crate::tensor::HostTensor;

/// Element `(i0, i1, i2, i3)` of an i32 or i64 tensor (row ids, positions), read from its bytes
/// through its strides: exact, unlike a read through f32.
pub(crate) fn index(op: &'static str, tensor: &'static str, t: &HostTensor, at: [usize; 4]) -> Result<i64> {
    let l = &t.layout;
    let size = match l.ty {
        GgmlType::I32 => 4,
        GgmlType::I64 => 8,
        other => return shape_error(op, format!("{tensor} must be i32 or i64, not {other}")),
    };
    let out_of_range = || ReferenceError::Shape {
        op,
        reason: format!("{tensor}: element {at:?} lies outside its {} bytes", t.data.len()),
    };
    if at.iter().zip(&l.ne).any(|(&i, &n)| i >= n) {
        return Err(out_of_range());
    }
    let offset = at
        .iter()
        .zip(&l.nb)
        .try_fold(l.offset, |acc, (&i, &nb)| acc.checked_add(i.checked_mul(nb)?))
        .ok_or_else(out_of_range)?;
    let bytes = offset
        .checked_add(size)
        .and_then(|end| t.data.get(offset..end))
        .ok_or_else(out_of_range)?;
    Ok(match size {
        4 => i64::from(i32::from_le_bytes(bytes.try_into().expect("4 bytes"))),
        _ => i64::from_le_bytes(bytes.try_into().expect("8 bytes")),
    })
}

/// `v` as a tensor of type `ty` holds it: rounded to nearest even for f16 and bf16 (ggml's
/// `GGML_FP32_TO_FP16` and `GGML_FP32_TO_BF16`), unchanged for f32.
pub(crate) fn round_to(ty: GgmlType, v: f32) -> f32 {
    match ty {
        GgmlType::F16 => half::f16::from_f32(v).to_f32(),
        GgmlType::BF16 => half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// The types an op may write its floating-point result as (ggml's `dst` of unary and binary ops).
pub(crate) fn float_dst(op: &'static str, tensor: &'static str, ty: GgmlType) -> Result<()> {
    match ty {
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => Ok(()),
        other => shape_error(op, format!("{tensor} must be f32, f16 or bf16, not {other}")),
    }
}

/// Refuses a parameter that is NaN or infinite.
pub(crate) fn finite(op: &'static str, name: &'static str, v: f32) -> Result<()> {
    if v.is_finite() {
        Ok(())
    } else {
        shape_error(op, format!("{name} = {v} is not a finite number"))
    }
}

/// Whether `small` repeats a whole number of times over `big` in every dimension (ggml's
/// `ggml_can_repeat`).
pub(crate) fn can_repeat(small: [usize; 4], big: [usize; 4]) -> bool {
    small.iter().zip(&big).all(|(&s, &b)| s > 0 && b.is_multiple_of(s))
}

/// Every row index `(i1, i2, i3)` of extents `ne`, `i1` fastest.
pub(crate) fn rows(ne: [usize; 4]) -> impl Iterator<Item = (usize, usize, usize)> {
    (0..ne[3]).flat_map(move |i3| (0..ne[2]).flat_map(move |i2| (0..ne[1]).map(move |i1| (i1, i2, i3))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Layout;

    #[test]
    fn indices_read_exactly_through_strides() {
        // i64 ids beyond f32's exact range, in a view that skips every other element.
        let big = (1i64 << 40) + 1;
        let data: Vec<u8> = [7i64, -1, big, -1].iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = HostTensor {
            layout: Layout {
                ne: [2, 1, 1, 1],
                nb: [16, 32, 32, 32],
                ..Layout::contiguous(GgmlType::I64, [2, 1, 1, 1]).unwrap()
            },
            data,
        };
        assert_eq!(index("OP", "ids", &t, [0, 0, 0, 0]), Ok(7));
        assert_eq!(index("OP", "ids", &t, [1, 0, 0, 0]), Ok(big));
        assert!(index("OP", "ids", &t, [2, 0, 0, 0]).is_err());
        let f = HostTensor::from_f32(GgmlType::F32, [1, 1, 1, 1], &[1.0]).unwrap();
        assert!(index("OP", "ids", &f, [0, 0, 0, 0]).is_err());
        // Data shorter than the layout says: an error, not a panic.
        let short = HostTensor {
            layout: Layout::contiguous(GgmlType::I32, [4, 1, 1, 1]).unwrap(),
            data: vec![0; 8],
        };
        assert!(index("OP", "ids", &short, [3, 0, 0, 0]).is_err());
    }

    #[test]
    fn rounding_follows_the_type() {
        assert_eq!(round_to(GgmlType::F32, 0.1), 0.1);
        assert_eq!(round_to(GgmlType::F16, 1.0 + 1.0 / 4096.0), 1.0); // below half an f16 ulp
        assert_eq!(round_to(GgmlType::BF16, 1.0 + 1.0 / 64.0), 1.015625);
        assert!(can_repeat([2, 1, 3, 1], [4, 5, 3, 2]));
        assert!(!can_repeat([3, 1, 1, 1], [4, 1, 1, 1]));
        assert!(!can_repeat([0, 1, 1, 1], [0, 1, 1, 1]));
        let r: Vec<_> = rows([9, 2, 1, 2]).collect();
        assert_eq!(r, vec![(0, 0, 0), (1, 0, 0), (0, 0, 1), (1, 0, 1)]);
    }
}
