//! ggml's element formats on the CPU: conversion of f32 to every type (quantization) and back
//! (dequantization), byte-exact with ggml's block layouts.
//!
//! - `legacy`: the 32-element formats q4_0, q4_1, q5_0, q5_1, q8_0, q8_1, and the 1-bit q1_0.
//! - `kquants`: the 256-element K-quants q2_K … q6_K and q8_K.
//! - `iquants`: iq4_nl, iq4_xs, the ternary tq1_0/tq2_0 and the grid formats iq2_xxs … iq1_m.
//! - `fp4`: mxfp4 and nvfp4.
//!
//! Dequantization reproduces ggml's `dequantize_row_*` bit for bit. Quantization reproduces what
//! ggml's `ggml_quantize_chunk` writes without an importance matrix (the `quantize_row_*_ref`
//! quantizers; for iq4_nl the search with `ntry = 7` that `quantize_iq4_nl` runs), byte for
//! byte. The grid formats (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m) dequantize only:
//! [`quantize`] answers [`FormatError::Unsupported`] for them (see [`can_quantize`]).

mod fp4;
mod iquants;
mod kquants;
mod legacy;
pub(crate) mod wgsl_tables;

use crate::ggml_type::GgmlType;

/// Converts one block of a type: its bytes to its `block_size` values.
type BlockDequant = fn(&[u8], &mut [f32]);
/// Converts one block of a type: `block_size` values to its bytes (all zero on entry).
type BlockQuant = fn(&[f32], &mut [u8]);

/// The block converters of a quantized type, if this module has them.
fn block_codec(ty: GgmlType) -> Option<(BlockDequant, Option<BlockQuant>)> {
    use GgmlType as T;
    Some(match ty {
        T::Q4_0 => (legacy::dequantize_q4_0, Some(legacy::quantize_q4_0)),
        T::Q4_1 => (legacy::dequantize_q4_1, Some(legacy::quantize_q4_1)),
        T::Q5_0 => (legacy::dequantize_q5_0, Some(legacy::quantize_q5_0)),
        T::Q5_1 => (legacy::dequantize_q5_1, Some(legacy::quantize_q5_1)),
        T::Q8_0 => (legacy::dequantize_q8_0, Some(legacy::quantize_q8_0)),
        T::Q8_1 => (legacy::dequantize_q8_1, Some(legacy::quantize_q8_1)),
        T::Q2_K => (kquants::dequantize_q2_k, Some(kquants::quantize_q2_k)),
        T::Q3_K => (kquants::dequantize_q3_k, Some(kquants::quantize_q3_k)),
        T::Q4_K => (kquants::dequantize_q4_k, Some(kquants::quantize_q4_k)),
        T::Q5_K => (kquants::dequantize_q5_k, Some(kquants::quantize_q5_k)),
        T::Q6_K => (kquants::dequantize_q6_k, Some(kquants::quantize_q6_k)),
        T::Q8_K => (kquants::dequantize_q8_k, Some(kquants::quantize_q8_k)),
        T::IQ4_NL => (iquants::dequantize_iq4_nl, Some(iquants::quantize_iq4_nl)),
        T::IQ4_XS => (iquants::dequantize_iq4_xs, Some(iquants::quantize_iq4_xs)),
        T::TQ1_0 => (iquants::dequantize_tq1_0, Some(iquants::quantize_tq1_0)),
        T::TQ2_0 => (iquants::dequantize_tq2_0, Some(iquants::quantize_tq2_0)),
        T::MXFP4 => (fp4::dequantize_mxfp4, Some(fp4::quantize_mxfp4)),
        T::NVFP4 => (fp4::dequantize_nvfp4, Some(fp4::quantize_nvfp4)),
        T::Q1_0 => (legacy::dequantize_q1_0, Some(legacy::quantize_q1_0)),
        T::IQ2_XXS => (iquants::dequantize_iq2_xxs, None),
        T::IQ2_XS => (iquants::dequantize_iq2_xs, None),
        T::IQ2_S => (iquants::dequantize_iq2_s, None),
        T::IQ3_XXS => (iquants::dequantize_iq3_xxs, None),
        T::IQ3_S => (iquants::dequantize_iq3_s, None),
        T::IQ1_S => (iquants::dequantize_iq1_s, None),
        T::IQ1_M => (iquants::dequantize_iq1_m, None),
        _ => return None,
    })
}

/// Whether [`dequantize`] supports `ty`.
pub fn can_dequantize(ty: GgmlType) -> bool {
    is_plain(ty) || block_codec(ty).is_some()
}

/// Types stored one value per element.
fn is_plain(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(ty, F32 | F16 | BF16 | I8 | I16 | I32 | I64 | F64)
}

/// Whether [`quantize`] supports `ty`.
pub fn can_quantize(ty: GgmlType) -> bool {
    is_plain(ty) || block_codec(ty).is_some_and(|(_, q)| q.is_some())
}

/// Why a conversion failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("{0} is not supported by the CPU conversions yet")]
    Unsupported(GgmlType),
    #[error("expected {expected} values or bytes, got {got}")]
    Length { expected: usize, got: usize },
    #[error("layout: {0}")]
    Layout(String),
}

/// Converts `dst.len()` elements stored as `ty` in `src` to f32.
pub fn dequantize(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), FormatError> {
    let expected = ty
        .row_bytes(dst.len())
        .ok_or(FormatError::Layout(format!("{} elements of {ty}", dst.len())))?;
    if src.len() != expected {
        return Err(FormatError::Length {
            expected,
            got: src.len(),
        });
    }
    match ty {
        GgmlType::F32 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *d = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
            }
        }
        GgmlType::F16 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = half::f16::from_le_bytes([s[0], s[1]]).to_f32();
            }
        }
        GgmlType::BF16 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = half::bf16::from_le_bytes([s[0], s[1]]).to_f32();
            }
        }
        // Integer and f64 tensors convert by value (as ggml's get_f32 does).
        GgmlType::I8 => dst.iter_mut().zip(src).for_each(|(d, s)| *d = f32::from(*s as i8)),
        GgmlType::I16 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = f32::from(i16::from_le_bytes([s[0], s[1]]));
            }
        }
        GgmlType::I32 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *d = i32::from_le_bytes([s[0], s[1], s[2], s[3]]) as f32;
            }
        }
        GgmlType::I64 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(8)) {
                *d = i64::from_le_bytes(s.try_into().expect("8 bytes")) as f32;
            }
        }
        GgmlType::F64 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(8)) {
                *d = f64::from_le_bytes(s.try_into().expect("8 bytes")) as f32;
            }
        }
        other => {
            let (dequant, _) = block_codec(other).ok_or(FormatError::Unsupported(other))?;
            let (block, size) = (other.block_size(), other.type_size());
            for (b, y) in src.chunks_exact(size).zip(dst.chunks_exact_mut(block)) {
                dequant(b, y);
            }
        }
    }
    Ok(())
}

/// Converts f32 values to `ty`: for quantized types the bytes ggml's reference quantizer writes
/// (without an importance matrix). Grid i-quants are [`FormatError::Unsupported`].
pub fn quantize(ty: GgmlType, src: &[f32]) -> Result<Vec<u8>, FormatError> {
    let bytes = ty
        .row_bytes(src.len())
        .ok_or(FormatError::Layout(format!("{} elements of {ty}", src.len())))?;
    match ty {
        GgmlType::F32 => Ok(src.iter().flat_map(|v| v.to_le_bytes()).collect()),
        GgmlType::F16 => Ok(src.iter().flat_map(|v| half::f16::from_f32(*v).to_le_bytes()).collect()),
        GgmlType::BF16 => Ok(src
            .iter()
            .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
            .collect()),
        // To integers as ggml's set_f32 does: truncation toward zero (saturating here).
        GgmlType::I8 => Ok(src.iter().map(|v| *v as i8 as u8).collect()),
        GgmlType::I16 => Ok(src.iter().flat_map(|v| (*v as i16).to_le_bytes()).collect()),
        GgmlType::I32 => Ok(src.iter().flat_map(|v| (*v as i32).to_le_bytes()).collect()),
        GgmlType::I64 => Ok(src.iter().flat_map(|v| (*v as i64).to_le_bytes()).collect()),
        GgmlType::F64 => Ok(src.iter().flat_map(|v| f64::from(*v).to_le_bytes()).collect()),
        other => {
            let quant = block_codec(other)
                .and_then(|(_, q)| q)
                .ok_or(FormatError::Unsupported(other))?;
            let (block, size) = (other.block_size(), other.type_size());
            let mut out = vec![0u8; bytes];
            for (x, b) in src.chunks_exact(block).zip(out.chunks_exact_mut(size)) {
                quant(x, b);
            }
            Ok(out)
        }
    }
}

/// The f16 at byte `off` of `b`, as f32.
fn get_f16(b: &[u8], off: usize) -> f32 {
    half::f16::from_le_bytes([b[off], b[off + 1]]).to_f32()
}

/// Stores `v` rounded to f16 (to nearest, ties to even, as ggml's `GGML_FP32_TO_FP16`) at byte
/// `off` of `b`.
fn put_f16(b: &mut [u8], off: usize, v: f32) {
    b[off..off + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
}

/// ggml's `nearest_int`: round to nearest, ties to even, through the 1.5·2²³ float trick (for
/// |v| ≤ 2²² that is exact rounding; beyond, it wraps the way ggml's does).
fn nearest_int(v: f32) -> i32 {
    let val = v + 12_582_912.0;
    (val.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// The largest |x| and the signed value that has it (the first one on ties), as ggml's
/// quantizers find it.
fn abs_max_signed(x: &[f32]) -> (f32, f32) {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (amax, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgufFile;
    use std::path::{Path, PathBuf};

    /// Uniform values in [-1, 1) from SplitMix64 (as the test bench's `Rng` makes them).
    fn random_values(seed: u64, n: usize) -> Vec<f32> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                -1.0 + 2.0 * ((z >> 40) as f32 / (1u64 << 24) as f32)
            })
            .collect()
    }

    #[test]
    fn integer_and_f64_tensors_convert_by_value() {
        let values = [-3.7f32, -1.0, 0.0, 2.9, 127.0, 1000.5];
        for (ty, expect) in [
            (GgmlType::I8, vec![-3.0, -1.0, 0.0, 2.0, 127.0, 127.0]),
            (GgmlType::I16, vec![-3.0, -1.0, 0.0, 2.0, 127.0, 1000.0]),
            (GgmlType::I32, vec![-3.0, -1.0, 0.0, 2.0, 127.0, 1000.0]),
            (GgmlType::I64, vec![-3.0, -1.0, 0.0, 2.0, 127.0, 1000.0]),
            (GgmlType::F64, values.to_vec()),
        ] {
            let bytes = quantize(ty, &values).unwrap();
            assert_eq!(bytes.len(), values.len() * ty.type_size());
            let mut back = vec![0.0; values.len()];
            dequantize(ty, &bytes, &mut back).unwrap();
            assert_eq!(back, expect, "{ty}");
        }
    }

    /// Σ(x−y)² / Σx².
    fn nmse(x: &[f32], y: &[f32]) -> f64 {
        let err: f64 = x.iter().zip(y).map(|(&a, &b)| (a as f64 - b as f64).powi(2)).sum();
        let norm: f64 = x.iter().map(|&a| (a as f64).powi(2)).sum();
        err / norm
    }

    fn round_trip(ty: GgmlType, x: &[f32]) -> Vec<f32> {
        let q = quantize(ty, x).unwrap_or_else(|e| panic!("{ty}: quantize: {e}"));
        assert_eq!(q.len(), ty.row_bytes(x.len()).unwrap(), "{ty}: quantized size");
        let mut y = vec![0.0; x.len()];
        dequantize(ty, &q, &mut y).unwrap_or_else(|e| panic!("{ty}: dequantize: {e}"));
        y
    }

    /// Types with a quantizer, and the NMSE bound for uniform [-1, 1] data (a few times what each
    /// achieves, which is set by its bits per value).
    const ROUND_TRIP_BOUNDS: &[(GgmlType, f64)] = &[
        (GgmlType::Q8_0, 1e-4),
        (GgmlType::Q8_1, 1e-4),
        (GgmlType::Q8_K, 1e-4),
        (GgmlType::Q6_K, 1e-3),
        (GgmlType::Q5_0, 3e-3),
        (GgmlType::Q5_1, 3e-3),
        (GgmlType::Q5_K, 3e-3),
        (GgmlType::Q4_0, 1e-2),
        (GgmlType::Q4_1, 1e-2),
        (GgmlType::Q4_K, 1e-2),
        (GgmlType::IQ4_NL, 1e-2),
        (GgmlType::IQ4_XS, 1e-2),
        (GgmlType::MXFP4, 3e-2),
        (GgmlType::NVFP4, 3e-2),
        (GgmlType::Q3_K, 4e-2),
        (GgmlType::Q2_K, 0.1),
        (GgmlType::TQ2_0, 0.3),
        (GgmlType::TQ1_0, 0.3),
        (GgmlType::Q1_0, 0.3),
    ];

    /// Types whose quantizer is not implemented (lattice searches; some need an importance matrix).
    const DEQUANTIZE_ONLY: &[GgmlType] = &[
        GgmlType::IQ2_XXS,
        GgmlType::IQ2_XS,
        GgmlType::IQ2_S,
        GgmlType::IQ3_XXS,
        GgmlType::IQ3_S,
        GgmlType::IQ1_S,
        GgmlType::IQ1_M,
    ];

    #[test]
    fn nearest_int_rounds_ties_to_even() {
        let cases = [
            (0.5, 0),
            (1.5, 2),
            (2.5, 2),
            (-0.5, 0),
            (-1.5, -2),
            (0.49, 0),
            (-3.7, -4),
            (31.5, 32),
        ];
        for (v, want) in cases {
            assert_eq!(nearest_int(v), want, "{v}");
        }
    }

    #[test]
    fn round_trip_nmse_within_bounds() {
        let mut report = Vec::new();
        for (i, &(ty, bound)) in ROUND_TRIP_BOUNDS.iter().enumerate() {
            let x = random_values(0x5EED_0000 + i as u64, 16 * 256);
            let y = round_trip(ty, &x);
            let e = nmse(&x, &y);
            report.push(format!("{ty}: {e:.3e} (bound {bound:.0e})"));
            assert!(e < bound, "{ty}: NMSE {e:.3e} ≥ {bound:.0e}");
        }
        eprintln!("round-trip NMSE: {}", report.join(", "));
    }

    #[test]
    fn every_quantized_type_is_covered() {
        for &ty in GgmlType::ALL.iter().filter(|t| t.is_quantized()) {
            let round_trips = ROUND_TRIP_BOUNDS.iter().any(|&(t, _)| t == ty);
            assert!(can_dequantize(ty), "{ty} cannot be dequantized");
            assert_eq!(can_quantize(ty), round_trips, "{ty}");
            assert_eq!(can_quantize(ty), !DEQUANTIZE_ONLY.contains(&ty), "{ty}");
        }
        for &ty in DEQUANTIZE_ONLY {
            assert_eq!(quantize(ty, &[0.0; 256]), Err(FormatError::Unsupported(ty)));
        }
    }

    #[test]
    fn zeros_stay_zeros() {
        for &(ty, _) in ROUND_TRIP_BOUNDS {
            let n = ty.block_size() * 2;
            let y = round_trip(ty, &vec![0.0; n]);
            assert!(y.iter().all(|&v| v == 0.0), "{ty}: {y:?}");
        }
    }

    #[test]
    fn length_mismatches_are_errors() {
        for &ty in GgmlType::ALL.iter().filter(|&&t| can_dequantize(t)) {
            let (block, size) = (ty.block_size(), ty.type_size());
            let mut dst = vec![0.0f32; 2 * block];
            for bad in [0, size, 2 * size - 1, 2 * size + 1, 3 * size] {
                assert_eq!(
                    dequantize(ty, &vec![0u8; bad], &mut dst),
                    Err(FormatError::Length {
                        expected: 2 * size,
                        got: bad
                    }),
                    "{ty}: {bad} bytes"
                );
            }
            assert!(dequantize(ty, &[], &mut []).is_ok(), "{ty}: empty");
            if block > 1 {
                let mut partial = vec![0.0f32; block + 1];
                assert!(
                    matches!(
                        dequantize(ty, &vec![0u8; size], &mut partial),
                        Err(FormatError::Layout(_))
                    ),
                    "{ty}: partial block"
                );
                if can_quantize(ty) {
                    for n in [1, block - 1, block + 1] {
                        assert!(
                            matches!(quantize(ty, &vec![0.5; n]), Err(FormatError::Layout(_))),
                            "{ty}: {n} values"
                        );
                    }
                }
            }
            if can_quantize(ty) {
                assert_eq!(quantize(ty, &[]), Ok(Vec::new()), "{ty}: empty");
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Golden files: ggml's own quantization and dequantization of the same inputs.

    /// The folder of the `QUANT` golden files: the repository's copy, else the shared one beside it.
    fn golden_dir() -> PathBuf {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let candidates = [
            root.join("tests/data/golden/quant"),
            root.join("../shared/golden/quant"),
        ];
        candidates
            .iter()
            .find(|p| p.is_dir())
            .cloned()
            .unwrap_or_else(|| panic!("no golden quant folder among {candidates:?}"))
    }

    struct Golden {
        /// The `ggml_type` id of `quantized`.
        type_id: u32,
        input: Vec<f32>,
        quantized: Vec<u8>,
        dequantized: Vec<f32>,
    }

    fn f32s(bytes: &[u8]) -> Vec<f32> {
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    fn load_golden(name: &str) -> Golden {
        let path = golden_dir().join(format!("{name}.gguf"));
        let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(file.metadata().get_str("golden.op"), Some("QUANT"), "{name}");
        assert_eq!(file.metadata().get_str("golden.case"), Some(name), "{name}");
        let tensor = |t: &str| {
            file.tensor_data(t)
                .unwrap_or_else(|e| panic!("{name}: tensor {t}: {e}"))
                .to_vec()
        };
        let info = file.header.tensor_info("quantized").expect("quantized tensor");
        assert_eq!(info.ne, [1024, 4, 1, 1], "{name}: quantized shape");
        let g = Golden {
            type_id: info.ty,
            input: f32s(&tensor("input")),
            quantized: tensor("quantized"),
            dequantized: f32s(&tensor("dequantized")),
        };
        assert_eq!(g.input.len(), 4096, "{name}: input");
        assert_eq!(g.dequantized.len(), 4096, "{name}: dequantized");
        g
    }

    /// Index and values of the first position where `a` and `b` differ in their bits.
    fn first_bit_difference(a: &[f32], b: &[f32]) -> Option<(usize, f32, f32)> {
        a.iter()
            .zip(b)
            .position(|(x, y)| x.to_bits() != y.to_bits())
            .map(|i| (i, a[i], b[i]))
    }

    /// The golden types this crate knows.
    fn golden_types() -> Vec<GgmlType> {
        let mut types: Vec<GgmlType> = std::fs::read_dir(golden_dir())
            .expect("golden folder")
            .filter_map(|e| {
                let path = e.ok()?.path();
                (path.extension()? == "gguf").then(|| path.file_stem()?.to_str()?.parse().ok())?
            })
            .collect();
        types.sort();
        types
    }

    #[test]
    fn golden_dequantize_is_bit_exact() {
        let types = golden_types();
        assert!(types.len() >= 20, "only {} golden types found: {types:?}", types.len());
        let mut failures = Vec::new();
        for &ty in &types {
            let g = load_golden(ty.name());
            assert_eq!(g.type_id, ty.gguf_id(), "{ty}: type of `quantized`");
            let mut y = vec![0.0; 4096];
            if let Err(e) = dequantize(ty, &g.quantized, &mut y) {
                failures.push(format!("{ty}: {e}"));
            } else if let Some((i, ours, theirs)) = first_bit_difference(&y, &g.dequantized) {
                failures.push(format!("{ty}: element {i}: {ours:e} vs ggml's {theirs:e}"));
            }
        }
        assert!(
            failures.is_empty(),
            "dequantization differs from ggml:\n{}",
            failures.join("\n")
        );
    }

    /// Types whose quantizer reproduces ggml's bytes exactly from the golden inputs.
    const QUANTIZE_BYTE_EXACT: &[GgmlType] = &[
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::IQ4_NL,
        GgmlType::IQ4_XS,
        GgmlType::MXFP4,
        GgmlType::NVFP4,
        GgmlType::TQ1_0,
        GgmlType::TQ2_0,
        GgmlType::Q1_0,
    ];

    #[test]
    fn golden_quantize_is_byte_exact() {
        let mut failures = Vec::new();
        for &ty in QUANTIZE_BYTE_EXACT {
            let g = load_golden(ty.name());
            let q = quantize(ty, &g.input).unwrap_or_else(|e| panic!("{ty}: {e}"));
            if q != g.quantized {
                let size = ty.type_size();
                let diff = q.iter().zip(&g.quantized).filter(|(a, b)| a != b).count();
                let first = q.iter().zip(&g.quantized).position(|(a, b)| a != b).unwrap_or(0);
                failures.push(format!(
                    "{ty}: {diff} of {} bytes differ, first in block {} (byte {})",
                    q.len(),
                    first / size,
                    first % size
                ));
            }
            // Whatever the bytes, the dequantized result must be as close as ggml's.
            let mut y = vec![0.0; 4096];
            dequantize(ty, &q, &mut y).unwrap();
            let (ours, theirs) = (nmse(&g.input, &y), nmse(&g.input, &g.dequantized));
            assert!(
                ours <= theirs * 1.05 + 1e-12,
                "{ty}: NMSE {ours:e} vs ggml's {theirs:e}"
            );
        }
        assert!(
            failures.is_empty(),
            "quantization differs from ggml:\n{}",
            failures.join("\n")
        );
    }
}
