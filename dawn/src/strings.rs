//! Conversions between Rust strings and `WGPUStringView`.

use std::ffi::CStr;

use dawn_sys::{WGPU_STRLEN, WGPUStringView};

/// Copies a string Dawn handed us into a Rust `String` (lossily, should it not be UTF-8).
pub(crate) fn from_view(view: WGPUStringView) -> String {
    if view.data.is_null() {
        return String::new();
    }
    let bytes = if view.length == WGPU_STRLEN {
        // SAFETY: Dawn's convention: with WGPU_STRLEN the data is NUL-terminated.
        unsafe { CStr::from_ptr(view.data) }.to_bytes()
    } else {
        // SAFETY: Dawn guarantees `length` readable bytes at `data` during the call.
        unsafe { std::slice::from_raw_parts(view.data.cast::<u8>(), view.length) }
    };
    String::from_utf8_lossy(bytes).into_owned()
}

/// A view of a Rust string, or the null view for `None`. Valid while `s` is.
pub(crate) fn to_view(s: Option<&str>) -> WGPUStringView {
    s.map_or_else(WGPUStringView::null, WGPUStringView::new)
}
