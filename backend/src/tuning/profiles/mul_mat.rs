//! MUL_MAT's defaults per class of device.

use crate::facts::DeviceClass;
use crate::tuning::MulMatTuning;

/// MUL_MAT's defaults for `class`.
pub fn mul_mat(class: DeviceClass) -> MulMatTuning {
    let _ = class;
    MulMatTuning::default()
}
