//! The dequantize kernel's shape, apart from the op so that the shader variants can name it
//! without the op: the types it reads and its workgroup size.

use crate::ggml_type::GgmlType;

/// Threads per workgroup (one element each).
pub(crate) const WG_SIZE: u32 = 256;

/// The types `formats.wgsl` reads.
pub fn supports(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        ty,
        F32 | F16
            | BF16
            | Q4_0
            | Q4_1
            | Q5_0
            | Q5_1
            | Q8_0
            | Q2_K
            | Q3_K
            | Q4_K
            | Q5_K
            | Q6_K
            | IQ4_NL
            | IQ4_XS
            | MXFP4
            | NVFP4
            | Q1_0
            | TQ1_0
            | TQ2_0
            | IQ2_XXS
            | IQ2_XS
            | IQ2_S
            | IQ3_XXS
            | IQ3_S
            | IQ1_S
            | IQ1_M
    )
}
