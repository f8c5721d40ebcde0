//! Tensors as ggml describes them: a type, four extents `ne` (innermost first) and four byte
//! strides `nb`, at a byte offset into some storage. Views, permutations and non-contiguous
//! tensors are just other `ne`/`nb`/offset values over the same bytes.

use crate::format::{self, FormatError};
use crate::ggml_type::GgmlType;

/// The shape and memory layout of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layout {
    pub ty: GgmlType,
    /// Elements per dimension, innermost first (ggml's `ne`).
    pub ne: [usize; 4],
    /// Bytes between consecutive indices per dimension (ggml's `nb`). `nb[0]` is the type size;
    /// for quantized types dimension 0 steps whole blocks.
    pub nb: [usize; 4],
    /// Byte offset of element (0,0,0,0) in the storage.
    pub offset: usize,
}

/// Why a layout is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("{ty}: a row of {ne0} elements is not a whole number of {block}-element blocks")]
    PartialBlock { ty: GgmlType, ne0: usize, block: usize },
    #[error("permutation {0:?} is not a permutation of 0..4")]
    BadPermutation([usize; 4]),
    #[error("a view of {needed} bytes at offset {offset} does not fit in {available} bytes")]
    OutOfBounds {
        needed: usize,
        offset: usize,
        available: usize,
    },
}

impl Layout {
    /// A contiguous tensor of extents `ne`.
    pub fn contiguous(ty: GgmlType, ne: [usize; 4]) -> Result<Layout, LayoutError> {
        let block = ty.block_size();
        if !ne[0].is_multiple_of(block) {
            return Err(LayoutError::PartialBlock { ty, ne0: ne[0], block });
        }
        let nb0 = ty.type_size();
        let nb1 = nb0 * (ne[0] / block);
        let nb2 = nb1 * ne[1];
        let nb3 = nb2 * ne[2];
        Ok(Layout {
            ty,
            ne,
            nb: [nb0, nb1, nb2, nb3],
            offset: 0,
        })
    }

    /// Number of elements.
    pub fn elements(&self) -> usize {
        self.ne.iter().product()
    }

    /// Number of rows (`ne[1] * ne[2] * ne[3]`).
    pub fn rows(&self) -> usize {
        self.ne[1] * self.ne[2] * self.ne[3]
    }

    /// Bytes spanned from the first to past the last element, as ggml's `ggml_nbytes` counts.
    pub fn span_bytes(&self) -> usize {
        if self.elements() == 0 {
            return 0;
        }
        let block = self.ty.block_size();
        let mut bytes = self.ne[0] / block * self.nb[0];
        if block == 1 {
            bytes = self.ty.type_size() + (self.ne[0] - 1) * self.nb[0];
        }
        bytes + (1..4).map(|i| (self.ne[i] - 1) * self.nb[i]).sum::<usize>()
    }

    /// Whether the elements are densely packed in the natural order.
    pub fn is_contiguous(&self) -> bool {
        Layout::contiguous(self.ty, self.ne).is_ok_and(|c| c.nb == self.nb)
    }

    /// Whether each row is densely packed (rows themselves may be anywhere).
    pub fn has_contiguous_rows(&self) -> bool {
        self.nb[0] == self.ty.type_size()
    }

    /// The same data with dimensions reordered like ggml's `ggml_permute(a, axes…)`: source
    /// dimension `i` becomes dimension `axes[i]`.
    pub fn permute(&self, axes: [usize; 4]) -> Result<Layout, LayoutError> {
        let mut seen = [false; 4];
        for &a in &axes {
            if a >= 4 || seen[a] {
                return Err(LayoutError::BadPermutation(axes));
            }
            seen[a] = true;
        }
        let mut ne = [0; 4];
        let mut nb = [0; 4];
        for i in 0..4 {
            ne[axes[i]] = self.ne[i];
            nb[axes[i]] = self.nb[i];
        }
        Ok(Layout { ne, nb, ..*self })
    }

    /// Byte offset of the row `(i1, i2, i3)` from the start of the storage.
    pub fn row_offset(&self, i1: usize, i2: usize, i3: usize) -> usize {
        self.offset + i1 * self.nb[1] + i2 * self.nb[2] + i3 * self.nb[3]
    }

    /// Checks that the view lies inside `available` bytes of storage.
    pub fn check_fits(&self, available: usize) -> Result<(), LayoutError> {
        let needed = self.span_bytes();
        if self.offset.checked_add(needed).is_none_or(|end| end > available) {
            return Err(LayoutError::OutOfBounds {
                needed,
                offset: self.offset,
                available,
            });
        }
        Ok(())
    }
}

/// A tensor in host memory: a layout over a byte buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    pub layout: Layout,
    pub data: Vec<u8>,
}

impl HostTensor {
    /// A contiguous tensor holding `values` converted (or quantized) to `ty`.
    pub fn from_f32(ty: GgmlType, ne: [usize; 4], values: &[f32]) -> Result<HostTensor, FormatError> {
        let layout = Layout::contiguous(ty, ne).map_err(|e| FormatError::Layout(e.to_string()))?;
        if values.len() != layout.elements() {
            return Err(FormatError::Length {
                expected: layout.elements(),
                got: values.len(),
            });
        }
        let data = format::quantize(ty, values)?;
        Ok(HostTensor { layout, data })
    }

    /// One row (`ne[0]` elements at `(i1, i2, i3)`) as f32. Rows must be contiguous.
    pub fn row_f32(&self, i1: usize, i2: usize, i3: usize) -> Result<Vec<f32>, FormatError> {
        let l = &self.layout;
        if !l.has_contiguous_rows() {
            return self.strided_row_f32(i1, i2, i3);
        }
        let start = l.row_offset(i1, i2, i3);
        let bytes =
            l.ty.row_bytes(l.ne[0])
                .ok_or_else(|| FormatError::Layout("partial block".into()))?;
        let src = self.data.get(start..start + bytes).ok_or(FormatError::Length {
            expected: start + bytes,
            got: self.data.len(),
        })?;
        let mut out = vec![0.0; l.ne[0]];
        format::dequantize(l.ty, src, &mut out)?;
        Ok(out)
    }

    /// A row whose elements are not adjacent (plain types only).
    fn strided_row_f32(&self, i1: usize, i2: usize, i3: usize) -> Result<Vec<f32>, FormatError> {
        let l = &self.layout;
        if l.ty.is_quantized() {
            return Err(FormatError::Layout(format!("{} rows must be contiguous", l.ty)));
        }
        let size = l.ty.type_size();
        let base = l.row_offset(i1, i2, i3);
        (0..l.ne[0])
            .map(|i0| {
                let at = base + i0 * l.nb[0];
                let src = self.data.get(at..at + size).ok_or(FormatError::Length {
                    expected: at + size,
                    got: self.data.len(),
                })?;
                let mut v = [0.0f32];
                format::dequantize(l.ty, src, &mut v)?;
                Ok(v[0])
            })
            .collect()
    }

    /// All elements as f32, in logical order (`i0` fastest).
    pub fn to_f32(&self) -> Result<Vec<f32>, FormatError> {
        let ne = self.layout.ne;
        let mut out = Vec::with_capacity(self.layout.elements());
        for i3 in 0..ne[3] {
            for i2 in 0..ne[2] {
                for i1 in 0..ne[1] {
                    out.extend(self.row_f32(i1, i2, i3)?);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_strides_and_size() {
        let l = Layout::contiguous(GgmlType::Q4_0, [64, 3, 2, 1]).unwrap();
        assert_eq!(l.nb, [18, 36, 108, 216]);
        assert_eq!(l.span_bytes(), 216);
        assert!(l.is_contiguous());
        assert!(Layout::contiguous(GgmlType::Q4_0, [48, 1, 1, 1]).is_err());
    }

    #[test]
    fn permutation_moves_extents_and_strides() {
        let l = Layout::contiguous(GgmlType::F32, [4, 3, 2, 1]).unwrap();
        let p = l.permute([0, 2, 1, 3]).unwrap();
        assert_eq!(p.ne, [4, 2, 3, 1]);
        assert_eq!(p.nb, [4, 48, 16, 96]);
        assert!(!p.is_contiguous());
        assert_eq!(p.span_bytes(), l.span_bytes());
        assert!(l.permute([0, 0, 1, 2]).is_err());
    }
}
