//! ggml's FP4 formats: 4-bit E2M1 values with per-group scales.
//!
//! - mxfp4 (OCP microscaling; 32 elements, 17 bytes): `e` (E8M0 exponent byte), then 16 bytes
//!   of 4-bit codes (element `j` low nibble of byte `j`, element `j + 16` high nibble). ggml
//!   stores the E2M1 levels doubled (`KVALUES_MXFP4`) and halves the scale to match: value =
//!   kvalues[q] · 2^(e − 128).
//! - nvfp4 (64 elements, 36 bytes): four UE4M3 scale bytes (unsigned E4M3, bias 7; one per 16
//!   elements), then 32 bytes of codes, 8 per 16-element group (element `j` of the group low
//!   nibble of byte `j`, element `j + 8` high nibble); value = kvalues[q] · ue4m3(d)/2.

/// ggml's `kvalues_mxfp4`: E2M1 values times two, indexed by the 4-bit code (bit 3 = sign).
pub(super) const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// ggml's `ggml_e8m0_to_fp32_half`: 2^(e − 128), i.e. half the E8M0 scale (subnormal for e < 2).
pub(super) fn e8m0_to_f32_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        ((e as u32) - 1) << 23
    };
    f32::from_bits(bits)
}

pub(super) fn dequantize_mxfp4(b: &[u8], y: &mut [f32]) {
    let d = e8m0_to_f32_half(b[0]);
    for j in 0..16 {
        let q = b[1 + j];
        y[j] = KVALUES_MXFP4[(q & 0xF) as usize] as f32 * d;
        y[j + 16] = KVALUES_MXFP4[(q >> 4) as usize] as f32 * d;
    }
}

/// The code whose level times `d` is nearest to `x` (first one on ties), as ggml's
/// `best_index_mxfp4`.
pub(super) fn best_index_mxfp4(x: f32, d: f32) -> u8 {
    let mut best = 0;
    let mut best_err = (KVALUES_MXFP4[0] as f32 * d - x).abs();
    for (i, &k) in KVALUES_MXFP4.iter().enumerate().skip(1) {
        let err = (k as f32 * d - x).abs();
        if err < best_err {
            best = i;
            best_err = err;
        }
    }
    best as u8
}

/// ggml's `quantize_row_mxfp4_ref`: exponent floor(log2(max|x|)) − 2 (so the largest value maps
/// near the top level 6), then each value to its nearest level.
pub(super) fn quantize_mxfp4(x: &[f32], b: &mut [u8]) {
    let amax = x.iter().fold(0.0f32, |a, &v| if a < v.abs() { v.abs() } else { a });
    // C: (uint8_t)(floorf(log2f(amax)) - 2 + 127); the float is in 0..=255 for finite inputs.
    let e = if amax > 0.0 {
        (amax.log2().floor() - 2.0 + 127.0) as i32 as u8
    } else {
        0
    };
    let d = e8m0_to_f32_half(e);
    b[0] = e;
    for j in 0..16 {
        let x0 = best_index_mxfp4(x[j], d);
        let x1 = best_index_mxfp4(x[j + 16], d);
        b[1 + j] = x0 | (x1 << 4);
    }
}

// ---------------------------------------------------------------------------------------------
// nvfp4

/// ggml's `ggml_ue4m3_to_fp32`: half the value of an unsigned E4M3 byte (0x7F, the NaN code,
/// decodes to 0). Every result is exact in f32.
fn ue4m3_to_f32_half(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let exp = ((x >> 3) & 0xF) as i32;
    let man = (x & 7) as f32;
    let raw = if exp == 0 {
        man * 2f32.powi(-9)
    } else {
        (1.0 + man / 8.0) * 2f32.powi(exp - 7)
    };
    raw * 0.5
}

/// ggml's `ggml_fp32_to_ue4m3`: positive values to unsigned E4M3 (saturating at 0x7E = 448,
/// rounding half up on the first dropped mantissa bit; subnormals by `(int)(x·512 + 0.5)`).
fn f32_to_ue4m3(x: f32) -> u8 {
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    let x = x.min(448.0);
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xFF) as i32 - 127 + 7;
    if exp <= 0 {
        let man = ((x * 512.0 + 0.5) as i32).min(7);
        return if man < 1 { 0 } else { man as u8 };
    }
    if exp >= 15 {
        return 0x7E;
    }
    let mut exp = exp;
    let mut man = ((bits >> 20) & 7) as i32 + ((bits >> 19) & 1) as i32;
    if man > 7 {
        man = 0;
        exp += 1;
        if exp >= 15 {
            return 0x7E;
        }
    }
    ((exp << 3) | man) as u8
}

pub(super) fn dequantize_nvfp4(b: &[u8], y: &mut [f32]) {
    for s in 0..4 {
        let d = ue4m3_to_f32_half(b[s]);
        for j in 0..8 {
            let q = b[4 + 8 * s + j];
            y[16 * s + j] = KVALUES_MXFP4[(q & 0xF) as usize] as f32 * d;
            y[16 * s + j + 8] = KVALUES_MXFP4[(q >> 4) as usize] as f32 * d;
        }
    }
}

/// ggml's `quantize_row_nvfp4_ref`: per 16 elements a UE4M3 scale of max|x|/6 (6 being the
/// largest E2M1 value), then each value to its nearest level.
pub(super) fn quantize_nvfp4(x: &[f32], b: &mut [u8]) {
    for s in 0..4 {
        let xb = &x[16 * s..16 * s + 16];
        let amax = xb.iter().fold(0.0f32, |a, &v| if a < v.abs() { v.abs() } else { a });
        let ue = f32_to_ue4m3(amax / 6.0);
        b[s] = ue;
        let d = ue4m3_to_f32_half(ue);
        for j in 0..8 {
            b[4 + 8 * s + j] = best_index_mxfp4(xb[j], d) | (best_index_mxfp4(xb[j + 8], d) << 4);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ue4m3_codes_round_trip() {
        // ggml's encoder never writes exponent 15 but for 0x7E (448): larger values saturate.
        for code in (1..0x78u8).chain([0x7E]) {
            let v = 2.0 * ue4m3_to_f32_half(code);
            assert_eq!(f32_to_ue4m3(v), code, "code {code:#x} = {v}");
        }
        assert_eq!(f32_to_ue4m3(300.0), 0x7E);
        assert_eq!(ue4m3_to_f32_half(0x7F), 0.0);
        assert_eq!(f32_to_ue4m3(1e9), 0x7E);
        assert_eq!(f32_to_ue4m3(-1.0), 0);
        assert_eq!(f32_to_ue4m3(f32::NAN), 0);
    }

    #[test]
    fn e8m0_half_is_a_power_of_two() {
        assert_eq!(e8m0_to_f32_half(128), 1.0);
        assert_eq!(e8m0_to_f32_half(127), 0.5);
        assert_eq!(e8m0_to_f32_half(2), 2f32.powi(-126));
        assert_eq!(e8m0_to_f32_half(1), f32::from_bits(0x0040_0000)); // 2^-127, subnormal
        assert_eq!(e8m0_to_f32_half(0), f32::from_bits(0x0020_0000)); // 2^-128
    }
}
