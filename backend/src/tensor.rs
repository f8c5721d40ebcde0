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
    #[error("{ty} {ne:?} with strides {nb:?} at offset {offset}: the byte extent overflows")]
    Overflow {
        ty: GgmlType,
        ne: [usize; 4],
        nb: [usize; 4],
        offset: usize,
    },
    /// A contiguous tensor whose strides or size in bytes do not fit `usize` (no strides were
    /// given: they are what overflows).
    #[error("{ty} {ne:?}: the contiguous tensor's size in bytes overflows")]
    SizeOverflow { ty: GgmlType, ne: [usize; 4] },
    #[error("{ty}: dimension 0 must step whole {size}-byte blocks, not {nb0} bytes")]
    BlockStride { ty: GgmlType, nb0: usize, size: usize },
    #[error("a view of {needed} bytes at offset {offset} does not fit in {available} bytes")]
    OutOfBounds {
        needed: usize,
        offset: usize,
        available: usize,
    },
    #[error("{what} needs a contiguous tensor, not one of {ne:?} elements with strides {nb:?}")]
    NotContiguous {
        what: &'static str,
        ne: [usize; 4],
        nb: [usize; 4],
    },
    #[error("cannot reshape {from:?} to {to:?}: the element counts differ")]
    ElementCount { from: [usize; 4], to: [usize; 4] },
    #[error("narrow({dim}, {start}, {len}) of a tensor of {ne:?} elements")]
    Narrow {
        dim: usize,
        start: usize,
        len: usize,
        ne: [usize; 4],
    },
}

impl Layout {
    /// A contiguous tensor of extents `ne`.
    pub fn contiguous(ty: GgmlType, ne: [usize; 4]) -> Result<Layout, LayoutError> {
        let block = ty.block_size();
        if !ne[0].is_multiple_of(block) {
            return Err(LayoutError::PartialBlock { ty, ne0: ne[0], block });
        }
        let overflow = || LayoutError::SizeOverflow { ty, ne };
        let nb0 = ty.type_size();
        let nb1 = nb0.checked_mul(ne[0] / block).ok_or_else(overflow)?;
        let nb2 = nb1.checked_mul(ne[1]).ok_or_else(overflow)?;
        let nb3 = nb2.checked_mul(ne[2]).ok_or_else(overflow)?;
        nb3.checked_mul(ne[3]).ok_or_else(overflow)?;
        Ok(Layout {
            ty,
            ne,
            nb: [nb0, nb1, nb2, nb3],
            offset: 0,
        })
    }

    /// Number of elements (`usize::MAX` when the product overflows: such a layout never passes
    /// [`Layout::check_fits`]).
    pub fn elements(&self) -> usize {
        self.checked_elements().unwrap_or(usize::MAX)
    }

    /// Number of elements, `None` when the product overflows.
    pub fn checked_elements(&self) -> Option<usize> {
        if self.ne.contains(&0) {
            return Some(0);
        }
        self.ne.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n))
    }

    /// Number of rows (`ne[1] * ne[2] * ne[3]`; `usize::MAX` when that overflows).
    pub fn rows(&self) -> usize {
        if self.ne[1..].contains(&0) {
            return 0;
        }
        self.ne[1..]
            .iter()
            .try_fold(1usize, |acc, &n| acc.checked_mul(n))
            .unwrap_or(usize::MAX)
    }

    fn overflow(&self) -> LayoutError {
        LayoutError::Overflow {
            ty: self.ty,
            ne: self.ne,
            nb: self.nb,
            offset: self.offset,
        }
    }

    /// Bytes spanned from the first to past the last element, as ggml's `ggml_nbytes` counts;
    /// an error when that does not fit `usize`.
    pub fn span_bytes(&self) -> Result<usize, LayoutError> {
        if self.ne.contains(&0) {
            return Ok(0);
        }
        let block = self.ty.block_size();
        let of = || self.overflow();
        let mut bytes = if block == 1 {
            (self.ne[0] - 1)
                .checked_mul(self.nb[0])
                .and_then(|b| b.checked_add(self.ty.type_size()))
                .ok_or_else(of)?
        } else {
            (self.ne[0] / block).checked_mul(self.nb[0]).ok_or_else(of)?
        };
        for i in 1..4 {
            let step = (self.ne[i] - 1).checked_mul(self.nb[i]).ok_or_else(of)?;
            bytes = bytes.checked_add(step).ok_or_else(of)?;
        }
        Ok(bytes)
    }

    /// `offset + span_bytes()`: the bytes of storage the view needs; an error on overflow.
    pub fn end_bytes(&self) -> Result<usize, LayoutError> {
        self.offset
            .checked_add(self.span_bytes()?)
            .ok_or_else(|| self.overflow())
    }

    /// Whether the elements are densely packed in the natural order.
    ///
    /// As ggml's `ggml_is_contiguous`, the stride of a dimension of one element is not looked
    /// at (it never moves an address): a one-position slot of a larger tensor is contiguous.
    pub fn is_contiguous(&self) -> bool {
        let mut next = self.ty.type_size();
        for i in 0..4 {
            if self.ne[i] != 1 && self.nb[i] != next {
                return false;
            }
            let count = if i == 0 {
                self.ne[0] / self.ty.block_size()
            } else {
                self.ne[i]
            };
            match next.checked_mul(count) {
                Some(n) => next = n,
                None => return false,
            }
        }
        true
    }

    /// The same bytes seen with other extents of the same element count (ggml's
    /// `ggml_reshape`): the layout must be contiguous.
    pub fn reshape(&self, ne: [usize; 4]) -> Result<Layout, LayoutError> {
        if !self.is_contiguous() {
            return Err(LayoutError::NotContiguous {
                what: "reshape",
                ne: self.ne,
                nb: self.nb,
            });
        }
        let layout = Layout {
            offset: self.offset,
            ..Layout::contiguous(self.ty, ne)?
        };
        if layout.checked_elements() != self.checked_elements() {
            return Err(LayoutError::ElementCount { from: self.ne, to: ne });
        }
        Ok(layout)
    }

    /// Elements `start..start + len` of dimension `dim` (ggml's `ggml_view` along one
    /// dimension; whole blocks along dimension 0 of a quantized type).
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Layout, LayoutError> {
        if dim >= 4 || start.checked_add(len).is_none_or(|end| end > self.ne[dim]) {
            return Err(LayoutError::Narrow {
                dim,
                start,
                len,
                ne: self.ne,
            });
        }
        let block = if dim == 0 { self.ty.block_size() } else { 1 };
        if !start.is_multiple_of(block) || !len.is_multiple_of(block) {
            return Err(LayoutError::PartialBlock {
                ty: self.ty,
                ne0: if start.is_multiple_of(block) { len } else { start },
                block,
            });
        }
        let offset = (start / block)
            .checked_mul(self.nb[dim])
            .and_then(|skip| self.offset.checked_add(skip))
            .ok_or_else(|| self.overflow())?;
        let mut ne = self.ne;
        ne[dim] = len;
        Ok(Layout { ne, offset, ..*self })
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

    /// Byte offset of the row `(i1, i2, i3)` from the start of the storage; an error on
    /// overflow.
    pub fn row_offset(&self, i1: usize, i2: usize, i3: usize) -> Result<usize, LayoutError> {
        [(i1, self.nb[1]), (i2, self.nb[2]), (i3, self.nb[3])]
            .iter()
            .try_fold(self.offset, |acc, &(i, nb)| acc.checked_add(i.checked_mul(nb)?))
            .ok_or_else(|| self.overflow())
    }

    /// Checks that the view is well formed (whole blocks in dimension 0, block-sized steps for
    /// quantized types, no overflow) and lies inside `available` bytes of storage.
    pub fn check_fits(&self, available: usize) -> Result<(), LayoutError> {
        let block = self.ty.block_size();
        if !self.ne[0].is_multiple_of(block) {
            return Err(LayoutError::PartialBlock {
                ty: self.ty,
                ne0: self.ne[0],
                block,
            });
        }
        if block > 1 && self.nb[0] != self.ty.type_size() && self.ne[0] > block {
            return Err(LayoutError::BlockStride {
                ty: self.ty,
                nb0: self.nb[0],
                size: self.ty.type_size(),
            });
        }
        let end = self.end_bytes()?;
        if end > available {
            return Err(LayoutError::OutOfBounds {
                needed: self.span_bytes()?,
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
        let start = l
            .row_offset(i1, i2, i3)
            .map_err(|e| FormatError::Layout(e.to_string()))?;
        let bytes =
            l.ty.row_bytes(l.ne[0])
                .ok_or_else(|| FormatError::Layout("partial block".into()))?;
        let end = start.checked_add(bytes).ok_or(FormatError::Length {
            expected: usize::MAX,
            got: self.data.len(),
        })?;
        let src = self.data.get(start..end).ok_or(FormatError::Length {
            expected: end,
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
        let base = l
            .row_offset(i1, i2, i3)
            .map_err(|e| FormatError::Layout(e.to_string()))?;
        (0..l.ne[0])
            .map(|i0| {
                let at = i0
                    .checked_mul(l.nb[0])
                    .and_then(|x| x.checked_add(base))
                    .filter(|at| at.checked_add(size).is_some())
                    .ok_or(FormatError::Length {
                        expected: usize::MAX,
                        got: self.data.len(),
                    })?;
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

    /// The same bytes seen through `layout` (checked against them): a view, as
    /// [`crate::DeviceTensor::view`] on the device. The bytes are cloned.
    pub fn view(&self, layout: Layout) -> Result<HostTensor, LayoutError> {
        layout.check_fits(self.data.len())?;
        Ok(HostTensor {
            layout,
            data: self.data.clone(),
        })
    }

    /// [`Layout::reshape`] of this tensor (contiguous; same element count).
    pub fn reshape(&self, ne: [usize; 4]) -> Result<HostTensor, LayoutError> {
        self.view(self.layout.reshape(ne)?)
    }

    /// [`Layout::narrow`] of this tensor: elements `start..start + len` of dimension `dim`.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<HostTensor, LayoutError> {
        self.view(self.layout.narrow(dim, start, len)?)
    }

    /// [`Layout::permute`] of this tensor (ggml's `ggml_permute`).
    pub fn permute(&self, axes: [usize; 4]) -> Result<HostTensor, LayoutError> {
        self.view(self.layout.permute(axes)?)
    }

    /// All elements as f32, in logical order (`i0` fastest).
    pub fn to_f32(&self) -> Result<Vec<f32>, FormatError> {
        self.layout
            .check_fits(self.data.len())
            .map_err(|e| FormatError::Layout(e.to_string()))?;
        let ne = self.layout.ne;
        let mut out = Vec::new();
        out.try_reserve_exact(self.layout.elements())
            .map_err(|_| FormatError::Length {
                expected: self.layout.elements(),
                got: self.data.len(),
            })?;
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
    #[test]
    fn one_element_dimensions_do_not_break_contiguity() {
        // A one-position slot of a [64, 8] cache: [64, 1] with the cache's row stride.
        let cache = Layout::contiguous(GgmlType::F32, [64, 8, 1, 1]).unwrap();
        let slot = cache.narrow(1, 3, 1).unwrap();
        assert_eq!((slot.offset, slot.nb), (3 * 256, cache.nb));
        assert!(slot.is_contiguous());
        // Two positions of a permuted layout are not.
        let t = cache.permute([1, 0, 2, 3]).unwrap();
        assert!(!t.is_contiguous());
        assert!(!cache.narrow(0, 0, 32).unwrap().is_contiguous());
        assert!(cache.narrow(1, 2, 4).unwrap().is_contiguous());
    }

    #[test]
    fn narrow_and_reshape_check_their_arguments() {
        let l = Layout::contiguous(GgmlType::Q4_0, [64, 4, 2, 1]).unwrap();
        assert_eq!(l.narrow(0, 32, 32).unwrap().offset, 18);
        assert!(matches!(
            l.narrow(0, 16, 32),
            Err(LayoutError::PartialBlock { block: 32, .. })
        ));
        assert!(matches!(l.narrow(2, 1, 2), Err(LayoutError::Narrow { dim: 2, .. })));
        assert!(matches!(l.narrow(4, 0, 1), Err(LayoutError::Narrow { dim: 4, .. })));
        let r = l.reshape([128, 4, 1, 1]).unwrap();
        assert_eq!((r.ne, r.nb), ([128, 4, 1, 1], [18, 72, 288, 288]));
        assert!(matches!(
            l.reshape([64, 4, 1, 1]),
            Err(LayoutError::ElementCount { .. })
        ));
        let e = l.permute([0, 2, 1, 3]).unwrap().reshape([64, 8, 1, 1]).unwrap_err();
        assert!(matches!(e, LayoutError::NotContiguous { what: "reshape", .. }), "{e}");
        assert!(e.to_string().contains("[64, 2, 4, 1]"), "{e}");
    }

    #[test]
    fn host_tensors_have_the_views_device_tensors_have() {
        let values: Vec<f32> = (0..24).map(|i| i as f32).collect();
        let t = HostTensor::from_f32(GgmlType::F32, [4, 3, 2, 1], &values).unwrap();
        assert_eq!(
            t.narrow(1, 1, 2).unwrap().to_f32().unwrap(),
            [4., 5., 6., 7., 8., 9., 10., 11., 16., 17., 18., 19., 20., 21., 22., 23.]
        );
        assert_eq!(t.reshape([12, 2, 1, 1]).unwrap().to_f32().unwrap(), values);
        let p = t.permute([1, 0, 2, 3]).unwrap();
        assert_eq!(p.layout.ne, [3, 4, 2, 1]);
        assert_eq!(&p.to_f32().unwrap()[..4], &[0., 4., 8., 1.]);
        assert!(t.view(Layout { offset: 4, ..t.layout }).is_err());
    }

    use super::*;

    #[test]
    fn contiguous_strides_and_size() {
        let l = Layout::contiguous(GgmlType::Q4_0, [64, 3, 2, 1]).unwrap();
        assert_eq!(l.nb, [18, 36, 108, 216]);
        assert_eq!(l.span_bytes().unwrap(), 216);
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
        assert!(p.check_fits(216).is_ok());
        assert!(l.permute([0, 0, 1, 2]).is_err());
    }

    #[test]
    fn layout_arithmetic_overflow_is_an_error() {
        let huge = usize::MAX / 2;
        // A contiguous tensor too large: the message names the extents asked for, and no
        // strides (none were given).
        for ne in [[huge, 4, 1, 1], [1 << 20, 1 << 20, 1 << 20, 1 << 20]] {
            let err = Layout::contiguous(GgmlType::F32, ne).unwrap_err();
            assert_eq!(err, LayoutError::SizeOverflow { ty: GgmlType::F32, ne });
            let text = err.to_string();
            assert!(text.contains(&format!("{ne:?}")) && !text.contains("strides"), "{text}");
        }
        let l = Layout {
            nb: [4, huge + 1, 4, 4],
            ..Layout::contiguous(GgmlType::F32, [2, 3, 1, 1]).unwrap()
        };
        assert!(matches!(l.span_bytes(), Err(LayoutError::Overflow { .. })));
        // A view's overflow names the strides it was given.
        let text = l.span_bytes().unwrap_err().to_string();
        assert!(text.contains(&format!("strides {:?}", [4, huge + 1, 4, 4])), "{text}");
        assert!(matches!(l.check_fits(usize::MAX), Err(LayoutError::Overflow { .. })));
        assert!(l.row_offset(2, 0, 0).is_err());
        let at_end = Layout {
            offset: usize::MAX - 4,
            ..Layout::contiguous(GgmlType::F32, [2, 1, 1, 1]).unwrap()
        };
        assert!(matches!(
            at_end.check_fits(usize::MAX),
            Err(LayoutError::Overflow { .. })
        ));
        assert_eq!(
            Layout {
                ne: [usize::MAX, 2, 1, 1],
                ..l
            }
            .elements(),
            usize::MAX
        );
    }

    #[test]
    fn malformed_views_do_not_fit() {
        let l = Layout::contiguous(GgmlType::Q4_0, [64, 2, 1, 1]).unwrap();
        assert!(l.check_fits(72).is_ok());
        assert!(matches!(l.check_fits(71), Err(LayoutError::OutOfBounds { .. })));
        assert!(matches!(
            Layout { offset: 1, ..l }.check_fits(72),
            Err(LayoutError::OutOfBounds { .. })
        ));
        // A partial block, or a quantized row that does not step whole blocks.
        assert!(matches!(
            Layout { ne: [48, 2, 1, 1], ..l }.check_fits(1000),
            Err(LayoutError::PartialBlock { .. })
        ));
        assert!(matches!(
            Layout {
                nb: [4, 36, 72, 72],
                ..l
            }
            .check_fits(1000),
            Err(LayoutError::BlockStride { .. })
        ));
        // Host tensors with layouts past their data are errors, not panics.
        let t = HostTensor {
            layout: Layout::contiguous(GgmlType::F32, [4, 4, 1, 1]).unwrap(),
            data: vec![0; 60],
        };
        assert!(t.to_f32().is_err());
        let t = HostTensor {
            layout: Layout {
                nb: [4, usize::MAX / 2, 4, 4],
                ..Layout::contiguous(GgmlType::F32, [4, 4, 1, 1]).unwrap()
            },
            data: vec![0; 64],
        };
        assert!(t.to_f32().is_err());
        assert!(t.row_f32(3, 0, 0).is_err());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn any_type() -> impl Strategy<Value = GgmlType> {
            prop::sample::select(vec![
                GgmlType::F32,
                GgmlType::F16,
                GgmlType::Q4_0,
                GgmlType::Q8_0,
                GgmlType::Q4_K,
            ])
        }

        /// Extents and strides from small to huge, so products both fit and overflow.
        fn any_size() -> impl Strategy<Value = usize> {
            prop_oneof![
                0usize..8,
                0usize..100_000,
                Just(usize::MAX),
                any::<usize>(),
                (0u32..64).prop_map(|s| 1usize << s)
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn layout_arithmetic_never_panics(
                ty in any_type(),
                ne in prop::array::uniform4(any_size()),
                nb in prop::array::uniform4(any_size()),
                offset in any_size(),
                available in any_size(),
            ) {
                let _ = Layout::contiguous(ty, ne);
                let l = Layout { ty, ne, nb, offset };
                let _ = (l.elements(), l.rows(), l.span_bytes(), l.end_bytes(), l.is_contiguous());
                let _ = l.row_offset(ne[1].saturating_sub(1), ne[2].saturating_sub(1), ne[3].saturating_sub(1));
                if l.check_fits(available).is_ok() && l.elements() > 0 {
                    // The last element's bytes lie inside the storage.
                    let last = l.row_offset(ne[1] - 1, ne[2] - 1, ne[3] - 1).unwrap();
                    let row = if ty.block_size() == 1 {
                        (ne[0] - 1) * nb[0] + ty.type_size()
                    } else {
                        ne[0] / ty.block_size() * nb[0]
                    };
                    prop_assert!(last + row <= available);
                }
            }

            #[test]
            fn contiguous_layouts_fit_their_span(ty in any_type(), ne in prop::array::uniform4(0usize..300)) {
                if let Ok(l) = Layout::contiguous(ty, ne) {
                    let bytes = l.span_bytes().unwrap();
                    prop_assert!(l.check_fits(bytes).is_ok());
                    if bytes > 0 {
                        prop_assert!(l.check_fits(bytes - 1).is_err());
                    }
                }
            }
        }
    }
}
