//! What the element-wise ops (binary, GLU) share: a tensor seen as an array of units (one
//! element, or a vector of them) from its binding, and the checks that make every unit index a
//! kernel computes land inside the tensor's binding.

use crate::error::{BackendError, Result};
use crate::ggml_type::GgmlType;
use crate::memory::{Binding, DeviceTensor};

/// A tensor as a kernel indexes it: its first element and strides in units of `width`
/// elements, from the start of its binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Units {
    pub start: u32,
    pub nb: [u32; 4],
}

/// The float types the element-wise kernels read and write (as WGSL `f32` and `f16` arrays).
pub(crate) fn float_type(op: &str, operand: &str, ty: GgmlType) -> Result<()> {
    match ty {
        GgmlType::F32 | GgmlType::F16 => Ok(()),
        other => Err(BackendError::Unsupported(format!(
            "{op}: {operand} is {other}; the GPU kernel takes f32 or f16"
        ))),
    }
}

/// `t` in units of `width` elements from its binding `b`, or `None` where its start or a stride
/// is not a whole number of units, or (for `width` > 1) its rows are not contiguous: dimension
/// 0 then moves one unit at a time. Strides of dimensions of extent one never move an address
/// and are passed as 0. Unit indices fit a kernel's u32 (the binding's units do).
pub(crate) fn units(t: &DeviceTensor, b: &Binding, width: usize) -> Option<Units> {
    let l = t.layout();
    let size = l.ty.type_size() as u64;
    let unit = size * width as u64;
    if !b.start_byte.is_multiple_of(unit) || u32::try_from(b.size / unit).is_err() {
        return None;
    }
    let start = u32::try_from(b.start_byte / unit).ok()?;
    let mut nb = [0u32; 4];
    for i in 0..4 {
        if l.ne[i] == 1 && (i > 0 || width == 1) {
            continue;
        }
        if i == 0 && width > 1 {
            if l.nb[0] as u64 != size || !l.ne[0].is_multiple_of(width) {
                return None;
            }
            nb[0] = 1;
            continue;
        }
        if !(l.nb[i] as u64).is_multiple_of(unit) {
            return None;
        }
        nb[i] = u32::try_from(l.nb[i] as u64 / unit).ok()?;
    }
    Some(Units { start, nb })
}

/// Facts of a device for the planners' unit tests: f16 as told, `max_groups` workgroups per
/// grid dimension, the rest of no concern to element-wise plans.
#[cfg(test)]
pub(crate) fn test_facts(shader_f16: bool, max_groups: u32) -> crate::facts::DeviceFacts {
    crate::facts::DeviceFacts {
        shader_f16,
        subgroups: true,
        subgroup_min_size: 32,
        subgroup_max_size: 32,
        subgroup_matrix: None,
        max_workgroup_storage: 32768,
        max_invocations: 1024,
        max_workgroup_size_x: 1024,
        max_workgroups_per_dim: max_groups,
        max_storage_binding: 1 << 30,
        class: crate::facts::DeviceClass::Other,
    }
}
