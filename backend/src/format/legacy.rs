//! ggml's "legacy" block formats: q4_0, q4_1, q5_0, q5_1, q8_0 and q8_1 (32 elements), and the
//! 1-bit q1_0 (128 elements).
//!
//! Every function here converts exactly one block: `x`/`y` hold its values and `b` holds the
//! block's bytes (`GgmlType::type_size`). Quantizers follow ggml's reference (`*_ref`) quantizers
//! operation for operation, so that their f32 rounding, and therefore their bytes, are the same.
//!
//! Layouts (little-endian, f16 scales):
//! - q4_0 (18 bytes): `d`, 16 bytes of nibbles; element `j` is the low nibble of byte `j`, element
//!   `j + 16` the high nibble; value = (q − 8)·d.
//! - q4_1 (20 bytes): `d`, `m`, 16 bytes of nibbles as q4_0; value = q·d + m.
//! - q5_0 (22 bytes): `d`, `qh` (u32, bit `j` is the 5th bit of element `j`), 16 bytes of low
//!   nibbles as q4_0; value = (q − 16)·d.
//! - q5_1 (24 bytes): `d`, `m`, `qh`, nibbles; value = q·d + m.
//! - q8_0 (34 bytes): `d`, 32 × i8; value = q·d.
//! - q8_1 (36 bytes): `d`, `s` = d·Σq, 32 × i8; value = q·d.
//! - q1_0 (128 elements, 18 bytes): `d` (the mean |x|), 16 bytes of sign bits (bit `j%8` of byte
//!   `j/8` set for x ≥ 0); value = ±d.

use super::{abs_max_signed, get_f16, put_f16};

/// Elements per block of every format in this file.
pub(super) const QK: usize = 32;

// ---------------------------------------------------------------------------------------------
// q4_0

pub(super) fn dequantize_q4_0(b: &[u8], y: &mut [f32]) {
    let d = get_f16(b, 0);
    let qs = &b[2..18];
    for j in 0..QK / 2 {
        let x0 = (qs[j] & 0x0F) as i32 - 8;
        let x1 = (qs[j] >> 4) as i32 - 8;
        y[j] = x0 as f32 * d;
        y[j + QK / 2] = x1 as f32 * d;
    }
}

pub(super) fn quantize_q4_0(x: &[f32], b: &mut [u8]) {
    let (_, max) = abs_max_signed(x);
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(b, 0, d);
    for j in 0..QK / 2 {
        let x0 = x[j] * id;
        let x1 = x[j + QK / 2] * id;
        // C: MIN(15, (int8_t)(x + 8.5f)), a truncating conversion.
        let xi0 = (trunc_i8(x0 + 8.5) as i32).min(15) as u8;
        let xi1 = (trunc_i8(x1 + 8.5) as i32).min(15) as u8;
        b[2 + j] = xi0 | (xi1 << 4);
    }
}

// ---------------------------------------------------------------------------------------------
// q4_1

pub(super) fn dequantize_q4_1(b: &[u8], y: &mut [f32]) {
    let d = get_f16(b, 0);
    let m = get_f16(b, 2);
    let qs = &b[4..20];
    for j in 0..QK / 2 {
        let x0 = (qs[j] & 0x0F) as f32;
        let x1 = (qs[j] >> 4) as f32;
        y[j] = x0 * d + m;
        y[j + QK / 2] = x1 * d + m;
    }
}

pub(super) fn quantize_q4_1(x: &[f32], b: &mut [u8]) {
    let (min, max) = min_max(x);
    let d = (max - min) / 15.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(b, 0, d);
    put_f16(b, 2, min);
    for j in 0..QK / 2 {
        let x0 = (x[j] - min) * id;
        let x1 = (x[j + QK / 2] - min) * id;
        let xi0 = (trunc_i8(x0 + 0.5) as i32).min(15) as u8;
        let xi1 = (trunc_i8(x1 + 0.5) as i32).min(15) as u8;
        b[4 + j] = xi0 | (xi1 << 4);
    }
}

// ---------------------------------------------------------------------------------------------
// q5_0

pub(super) fn dequantize_q5_0(b: &[u8], y: &mut [f32]) {
    let d = get_f16(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    for j in 0..QK / 2 {
        let xh0 = (((qh >> j) << 4) & 0x10) as u8;
        let xh1 = ((qh >> (j + 12)) & 0x10) as u8;
        let x0 = ((qs[j] & 0x0F) | xh0) as i32 - 16;
        let x1 = ((qs[j] >> 4) | xh1) as i32 - 16;
        y[j] = x0 as f32 * d;
        y[j + QK / 2] = x1 as f32 * d;
    }
}

pub(super) fn quantize_q5_0(x: &[f32], b: &mut [u8]) {
    let (_, max) = abs_max_signed(x);
    let d = max / -16.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(b, 0, d);
    let mut qh = 0u32;
    for j in 0..QK / 2 {
        let x0 = x[j] * id;
        let x1 = x[j + QK / 2] * id;
        let xi0 = (trunc_i8(x0 + 16.5) as i32).min(31) as u8;
        let xi1 = (trunc_i8(x1 + 16.5) as i32).min(31) as u8;
        b[6 + j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
        qh |= (((xi0 & 0x10) >> 4) as u32) << j;
        qh |= (((xi1 & 0x10) >> 4) as u32) << (j + QK / 2);
    }
    b[2..6].copy_from_slice(&qh.to_le_bytes());
}

// ---------------------------------------------------------------------------------------------
// q5_1

pub(super) fn dequantize_q5_1(b: &[u8], y: &mut [f32]) {
    let d = get_f16(b, 0);
    let m = get_f16(b, 2);
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let qs = &b[8..24];
    for j in 0..QK / 2 {
        let xh0 = (((qh >> j) << 4) & 0x10) as u8;
        let xh1 = ((qh >> (j + 12)) & 0x10) as u8;
        let x0 = ((qs[j] & 0x0F) | xh0) as f32;
        let x1 = ((qs[j] >> 4) | xh1) as f32;
        y[j] = x0 * d + m;
        y[j + QK / 2] = x1 * d + m;
    }
}

pub(super) fn quantize_q5_1(x: &[f32], b: &mut [u8]) {
    let (min, max) = min_max(x);
    let d = (max - min) / 31.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(b, 0, d);
    put_f16(b, 2, min);
    let mut qh = 0u32;
    for j in 0..QK / 2 {
        let x0 = (x[j] - min) * id;
        let x1 = (x[j + QK / 2] - min) * id;
        // C: (uint8_t)(x + 0.5f), no clamp.
        let xi0 = trunc_u8(x0 + 0.5);
        let xi1 = trunc_u8(x1 + 0.5);
        b[8 + j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
        qh |= (((xi0 & 0x10) >> 4) as u32) << j;
        qh |= (((xi1 & 0x10) >> 4) as u32) << (j + QK / 2);
    }
    b[4..8].copy_from_slice(&qh.to_le_bytes());
}

// ---------------------------------------------------------------------------------------------
// q8_0 and q8_1

pub(super) fn dequantize_q8_0(b: &[u8], y: &mut [f32]) {
    let d = get_f16(b, 0);
    for (v, &q) in y.iter_mut().zip(&b[2..34]) {
        *v = q as i8 as f32 * d;
    }
}

pub(super) fn quantize_q8_0(x: &[f32], b: &mut [u8]) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(b, 0, d);
    for (q, &v) in b[2..34].iter_mut().zip(x) {
        *q = (v * id).round() as i8 as u8;
    }
}

pub(super) fn dequantize_q8_1(b: &[u8], y: &mut [f32]) {
    let d = get_f16(b, 0);
    for (v, &q) in y.iter_mut().zip(&b[4..36]) {
        *v = q as i8 as f32 * d;
    }
}

pub(super) fn quantize_q8_1(x: &[f32], b: &mut [u8]) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(b, 0, d);
    let mut sum = 0i32;
    for (q, &v) in b[4..36].iter_mut().zip(x) {
        let qi = (v * id).round() as i8;
        *q = qi as u8;
        sum += qi as i32;
    }
    put_f16(b, 2, sum as f32 * d);
}

// ---------------------------------------------------------------------------------------------
// q1_0

pub(super) fn dequantize_q1_0(b: &[u8], y: &mut [f32]) {
    let d = get_f16(b, 0);
    for (j, v) in y.iter_mut().enumerate() {
        *v = if (b[2 + j / 8] >> (j % 8)) & 1 != 0 { d } else { -d };
    }
}

pub(super) fn quantize_q1_0(x: &[f32], b: &mut [u8]) {
    let mut sum_abs = 0.0f32;
    for v in x {
        sum_abs += v.abs();
    }
    put_f16(b, 0, sum_abs / x.len() as f32);
    for (j, &v) in x.iter().enumerate() {
        if v >= 0.0 {
            b[2 + j / 8] |= 1 << (j % 8);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// helpers

fn min_max(x: &[f32]) -> (f32, f32) {
    let mut min = f32::MAX;
    let mut max = -f32::MAX;
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// C's `(int8_t)f`: truncation toward zero (values here are always in range; out-of-range inputs
/// wrap like x86's conversion through a 32-bit integer instead of being undefined).
fn trunc_i8(f: f32) -> i8 {
    f as i32 as i8
}

/// C's `(uint8_t)f` for the in-range values the quantizers produce.
fn trunc_u8(f: f32) -> u8 {
    f as i32 as u8
}
