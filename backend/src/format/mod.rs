//! ggml's element formats on the CPU: conversion of f32 to every type (quantization) and back
//! (dequantization), byte-exact with ggml's block layouts.

use crate::ggml_type::GgmlType;

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
        other => return Err(FormatError::Unsupported(other)),
    }
    Ok(())
}

/// Converts f32 values to `ty` (for quantized types, ggml's reference quantizer).
pub fn quantize(ty: GgmlType, src: &[f32]) -> Result<Vec<u8>, FormatError> {
    ty.row_bytes(src.len())
        .ok_or(FormatError::Layout(format!("{} elements of {ty}", src.len())))?;
    match ty {
        GgmlType::F32 => Ok(src.iter().flat_map(|v| v.to_le_bytes()).collect()),
        GgmlType::F16 => Ok(src.iter().flat_map(|v| half::f16::from_f32(*v).to_le_bytes()).collect()),
        GgmlType::BF16 => Ok(src
            .iter()
            .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
            .collect()),
        other => Err(FormatError::Unsupported(other)),
    }
}
