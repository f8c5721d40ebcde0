//! tq1_0 and tq2_0: the ternary formats (values −d, 0, d), with ggml's quantizers.

use crate::format::{get_f16, put_f16};

const POW3: [u8; 6] = [1, 3, 9, 27, 81, 243];

/// The ternary digit (0, 1 or 2) that a tq1_0 byte holds at position `n` (0 = most significant).
fn trit(byte: u8, n: usize) -> i32 {
    let q = byte.wrapping_mul(POW3[n]);
    ((q as u16 * 3) >> 8) as i32
}

pub(in crate::format) fn dequantize_tq1_0(b: &[u8], y: &mut [f32]) {
    let qs = &b[0..48];
    let qh = &b[48..52];
    let d = get_f16(b, 52);
    let mut out = y.iter_mut();
    let mut emit = |t: i32| {
        if let Some(v) = out.next() {
            *v = (t - 1) as f32 * d;
        }
    };
    for n in 0..5 {
        for &q in &qs[0..32] {
            emit(trit(q, n));
        }
    }
    for n in 0..5 {
        for &q in &qs[32..48] {
            emit(trit(q, n));
        }
    }
    for n in 0..4 {
        for &q in qh {
            emit(trit(q, n));
        }
    }
}

/// ggml's ternary rounding: `lroundf(v·id) + 1` (0, 1 or 2 for inputs within the block's range).
fn ternary(v: f32, id: f32) -> i32 {
    (v * id).round() as i32 + 1
}

pub(in crate::format) fn quantize_tq1_0(x: &[f32], b: &mut [u8]) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(b, 52, d);
    // Packs trits, most significant first, then maps the base-3 number to a byte by ceil(q·256/243).
    let pack = |vals: &mut dyn Iterator<Item = f32>, extra_shift: bool| {
        let mut q = 0u8;
        for v in vals {
            q = q.wrapping_mul(3).wrapping_add(ternary(v, id) as u8);
        }
        if extra_shift {
            q = q.wrapping_mul(3);
        }
        (q as u16 * 256).div_ceil(243) as u8
    };
    for m in 0..32 {
        b[m] = pack(&mut (0..5).map(|n| x[m + 32 * n]), false);
    }
    for m in 0..16 {
        b[32 + m] = pack(&mut (0..5).map(|n| x[160 + m + 16 * n]), false);
    }
    for j in 0..4 {
        b[48 + j] = pack(&mut (0..4).map(|m| x[240 + j + 4 * m]), true);
    }
}

pub(in crate::format) fn dequantize_tq2_0(b: &[u8], y: &mut [f32]) {
    let d = get_f16(b, 64);
    for (e, v) in y.iter_mut().enumerate() {
        let j = 32 * (e / 128);
        let l = (e % 128) / 32;
        let m = e % 32;
        let q = ((b[j + m] >> (2 * l)) & 3) as i32;
        *v = (q - 1) as f32 * d;
    }
}

pub(in crate::format) fn quantize_tq2_0(x: &[f32], b: &mut [u8]) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(b, 64, d);
    for j in (0..64).step_by(32) {
        for m in 0..32 {
            let mut q = 0u8;
            for n in 0..4 {
                let xi = ternary(x[4 * j + m + 32 * n], id);
                q = q.wrapping_add(((xi & 3) << (2 * n)) as u8);
            }
            b[j + m] = q;
        }
    }
}
