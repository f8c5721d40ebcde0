//! ggml's element types: names, GGUF ids, block sizes and byte sizes.

use std::fmt;
use std::str::FromStr;

macro_rules! ggml_types {
    ($($(#[$doc:meta])* $variant:ident = $id:literal, $name:literal, block $block:literal, bytes $bytes:literal;)*) => {
        /// A ggml tensor element type. Quantized types store `block_size` elements in
        /// `type_size` bytes, in ggml's exact block layout (so GGUF data loads as is).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(non_camel_case_types)]
        pub enum GgmlType {
            $($(#[$doc])* $variant,)*
        }

        impl GgmlType {
            /// Every type this crate knows.
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$variant,)*];

            /// ggml's name (`q4_K`, `f16`, …), as in case strings and GGUF files.
            pub fn name(self) -> &'static str {
                match self { $(GgmlType::$variant => $name,)* }
            }

            /// The `ggml_type` number, as stored in GGUF files.
            pub fn gguf_id(self) -> u32 {
                match self { $(GgmlType::$variant => $id,)* }
            }

            /// The type with this `ggml_type` number.
            pub fn from_gguf_id(id: u32) -> Option<GgmlType> {
                match id { $($id => Some(GgmlType::$variant),)* _ => None }
            }

            /// Elements per block (1 for plain types).
            pub fn block_size(self) -> usize {
                match self { $(GgmlType::$variant => $block,)* }
            }

            /// Bytes per block (per element for plain types).
            pub fn type_size(self) -> usize {
                match self { $(GgmlType::$variant => $bytes,)* }
            }
        }
    };
}

ggml_types! {
    F32 = 0, "f32", block 1, bytes 4;
    F16 = 1, "f16", block 1, bytes 2;
    Q4_0 = 2, "q4_0", block 32, bytes 18;
    Q4_1 = 3, "q4_1", block 32, bytes 20;
    Q5_0 = 6, "q5_0", block 32, bytes 22;
    Q5_1 = 7, "q5_1", block 32, bytes 24;
    Q8_0 = 8, "q8_0", block 32, bytes 34;
    Q8_1 = 9, "q8_1", block 32, bytes 36;
    Q2_K = 10, "q2_K", block 256, bytes 84;
    Q3_K = 11, "q3_K", block 256, bytes 110;
    Q4_K = 12, "q4_K", block 256, bytes 144;
    Q5_K = 13, "q5_K", block 256, bytes 176;
    Q6_K = 14, "q6_K", block 256, bytes 210;
    Q8_K = 15, "q8_K", block 256, bytes 292;
    IQ2_XXS = 16, "iq2_xxs", block 256, bytes 66;
    IQ2_XS = 17, "iq2_xs", block 256, bytes 74;
    IQ3_XXS = 18, "iq3_xxs", block 256, bytes 98;
    IQ1_S = 19, "iq1_s", block 256, bytes 50;
    IQ4_NL = 20, "iq4_nl", block 32, bytes 18;
    IQ3_S = 21, "iq3_s", block 256, bytes 110;
    IQ2_S = 22, "iq2_s", block 256, bytes 82;
    IQ4_XS = 23, "iq4_xs", block 256, bytes 136;
    I8 = 24, "i8", block 1, bytes 1;
    I16 = 25, "i16", block 1, bytes 2;
    I32 = 26, "i32", block 1, bytes 4;
    I64 = 27, "i64", block 1, bytes 8;
    F64 = 28, "f64", block 1, bytes 8;
    IQ1_M = 29, "iq1_m", block 256, bytes 56;
    BF16 = 30, "bf16", block 1, bytes 2;
    TQ1_0 = 34, "tq1_0", block 256, bytes 54;
    TQ2_0 = 35, "tq2_0", block 256, bytes 66;
    MXFP4 = 39, "mxfp4", block 32, bytes 17;
    /// e2m1 values with fp8 (e4m3) scales per 16 elements: 4 scale bytes and 32 value bytes.
    NVFP4 = 40, "nvfp4", block 64, bytes 36;
    /// One bit per weight with an f16 scale.
    Q1_0 = 41, "q1_0", block 128, bytes 18;
}

impl GgmlType {
    /// Whether the type is a block-quantized format.
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes taken by `elements` elements (which must be a whole number of blocks).
    pub fn row_bytes(self, elements: usize) -> Option<usize> {
        elements
            .is_multiple_of(self.block_size())
            .then(|| elements / self.block_size() * self.type_size())
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown type name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown ggml type `{0}`")]
pub struct UnknownType(pub String);

impl FromStr for GgmlType {
    type Err = UnknownType;

    fn from_str(s: &str) -> Result<Self, UnknownType> {
        GgmlType::ALL
            .iter()
            .copied()
            .find(|t| t.name() == s)
            .ok_or_else(|| UnknownType(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_round_trip() {
        for &t in GgmlType::ALL {
            assert_eq!(t.name().parse::<GgmlType>(), Ok(t));
            assert_eq!(GgmlType::from_gguf_id(t.gguf_id()), Some(t));
        }
        assert!("q9_9".parse::<GgmlType>().is_err());
    }

    #[test]
    fn row_bytes_needs_whole_blocks() {
        assert_eq!(GgmlType::Q4_0.row_bytes(64), Some(36));
        assert_eq!(GgmlType::Q4_K.row_bytes(256), Some(144));
        assert_eq!(GgmlType::Q4_0.row_bytes(48), None);
        assert_eq!(GgmlType::F16.row_bytes(3), Some(6));
    }
}
