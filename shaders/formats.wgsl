// Reading ggml's element formats from a storage buffer viewed as `array<u32>`, byte-addressed
// (blocks such as q4_0's 18 bytes are not 4-byte aligned).
//
// Before including, define:
//   FMT_BUF   the `array<u32>` storage buffer to read,
//   FMT_TYPE  the ggml type id (TYPE_* from common.wgsl).
// Provides `fmt_value(block_byte, i) -> f32`: element `i` of the block that starts at byte
// `block_byte`, with FMT_BLOCK elements per block and FMT_BLOCK_BYTES bytes per block. The
// arithmetic follows ggml's CPU dequantization step by step, so results match it bit for bit.

fn fmt_u8(byte: u32) -> u32 {
    return (FMT_BUF[byte >> 2u] >> ((byte & 3u) * 8u)) & 0xffu;
}

fn fmt_i8(byte: u32) -> i32 {
    return (i32(fmt_u8(byte)) << 24u) >> 24u;
}

fn fmt_u16(byte: u32) -> u32 {
    return fmt_u8(byte) | (fmt_u8(byte + 1u) << 8u);
}

fn fmt_u32(byte: u32) -> u32 {
    return fmt_u16(byte) | (fmt_u16(byte + 2u) << 16u);
}

fn fmt_f16(byte: u32) -> f32 {
    return unpack2x16float(fmt_u16(byte)).x;
}

#if FMT_TYPE == TYPE_F32
#define FMT_BLOCK 1u
#define FMT_BLOCK_BYTES 4u
fn fmt_value(block_byte: u32, i: u32) -> f32 {
    return bitcast<f32>(FMT_BUF[block_byte >> 2u]);
}
#elif FMT_TYPE == TYPE_F16
#define FMT_BLOCK 1u
#define FMT_BLOCK_BYTES 2u
fn fmt_value(block_byte: u32, i: u32) -> f32 {
    return fmt_f16(block_byte);
}
#elif FMT_TYPE == TYPE_BF16
#define FMT_BLOCK 1u
#define FMT_BLOCK_BYTES 2u
fn fmt_value(block_byte: u32, i: u32) -> f32 {
    return bitcast<f32>(fmt_u16(block_byte) << 16u);
}
#elif FMT_TYPE == TYPE_Q4_0
#define FMT_BLOCK 32u
#define FMT_BLOCK_BYTES 18u
fn fmt_value(block_byte: u32, i: u32) -> f32 {
    let q = fmt_u8(block_byte + 2u + (i & 15u));
    let nibble = select(q & 15u, q >> 4u, i >= 16u);
    return f32(i32(nibble) - 8) * fmt_f16(block_byte);
}
#elif FMT_TYPE == TYPE_Q4_1
#define FMT_BLOCK 32u
#define FMT_BLOCK_BYTES 20u
fn fmt_value(block_byte: u32, i: u32) -> f32 {
    let q = fmt_u8(block_byte + 4u + (i & 15u));
    let nibble = select(q & 15u, q >> 4u, i >= 16u);
    return f32(nibble) * fmt_f16(block_byte) + fmt_f16(block_byte + 2u);
}
#elif FMT_TYPE == TYPE_Q5_0
#define FMT_BLOCK 32u
#define FMT_BLOCK_BYTES 22u
fn fmt_value(block_byte: u32, i: u32) -> f32 {
    let high = (fmt_u32(block_byte + 2u) >> i) & 1u;
    let q = fmt_u8(block_byte + 6u + (i & 15u));
    let nibble = select(q & 15u, q >> 4u, i >= 16u);
    return f32(i32(nibble | (high << 4u)) - 16) * fmt_f16(block_byte);
}
#elif FMT_TYPE == TYPE_Q5_1
#define FMT_BLOCK 32u
#define FMT_BLOCK_BYTES 24u
fn fmt_value(block_byte: u32, i: u32) -> f32 {
    let high = (fmt_u32(block_byte + 4u) >> i) & 1u;
    let q = fmt_u8(block_byte + 8u + (i & 15u));
    let nibble = select(q & 15u, q >> 4u, i >= 16u);
    return f32(nibble | (high << 4u)) * fmt_f16(block_byte) + fmt_f16(block_byte + 2u);
}
#elif FMT_TYPE == TYPE_Q8_0
#define FMT_BLOCK 32u
#define FMT_BLOCK_BYTES 34u
fn fmt_value(block_byte: u32, i: u32) -> f32 {
    return f32(fmt_i8(block_byte + 2u + i)) * fmt_f16(block_byte);
}
#elif FMT_TYPE == TYPE_Q2_K
#define FMT_BLOCK 256u
#define FMT_BLOCK_BYTES 84u
// scales[16] (low nibble: scale, high: min), qs[64], d, dmin.
fn fmt_value(block_byte: u32, i: u32) -> f32 {
    let n = i / 128u;
    let r = i % 128u;
    let j = r / 32u;
    let half = (r % 32u) / 16u;
    let sc = fmt_u8(block_byte + n * 8u + j * 2u + half);
    let q = fmt_u8(block_byte + 16u + n * 32u + half * 16u + (r % 16u));
    let d = fmt_f16(block_byte + 80u);
    let dmin = fmt_f16(block_byte + 82u);
    let dl = d * f32(sc & 15u);
    let ml = dmin * f32(sc >> 4u);
    return dl * f32((q >> (2u * j)) & 3u) - ml;
}
#elif FMT_TYPE == TYPE_Q3_K
#define FMT_BLOCK 256u
#define FMT_BLOCK_BYTES 110u
// hmask[32], qs[64], scales[12] (16 packed 6-bit scales), d.
fn fmt_value(block_byte: u32, i: u32) -> f32 {
    let n = i / 128u;
    let r = i % 128u;
    let j = r / 32u;
    let half = (r % 32u) / 16u;
    let l = r % 32u;
    let s = n * 8u + j * 2u + half;
    let low = select(fmt_u8(block_byte + 96u + s) & 15u, fmt_u8(block_byte + 96u + s - 8u) >> 4u, s >= 8u);
    let high = (fmt_u8(block_byte + 96u + 8u + (s % 4u)) >> (2u * (s / 4u))) & 3u;
    let scale = i32(low | (high << 4u)) - 32;
    let q = i32((fmt_u8(block_byte + 32u + n * 32u + l) >> (2u * j)) & 3u);
    let h = (fmt_u8(block_byte + l) >> (n * 4u + j)) & 1u;
    let dl = fmt_f16(block_byte + 108u) * f32(scale);
    return dl * f32(q - select(4, 0, h != 0u));
}
#elif FMT_TYPE == TYPE_Q4_K || FMT_TYPE == TYPE_Q5_K
#if FMT_TYPE == TYPE_Q4_K
#define FMT_BLOCK 256u
#define FMT_BLOCK_BYTES 144u
#define FMT_QS 16u
#else
#define FMT_BLOCK 256u
#define FMT_BLOCK_BYTES 176u
#define FMT_QS 48u
#endif
// d, dmin, scales[12] (8 packed 6-bit scale/min pairs), [q5_K: qh[32]], qs[128].
fn fmt_scale_min(block_byte: u32, j: u32) -> vec2<u32> {
    let s = block_byte + 4u;
    if (j < 4u) {
        return vec2<u32>(fmt_u8(s + j) & 63u, fmt_u8(s + j + 4u) & 63u);
    }
    let a = fmt_u8(s + j + 4u);
    return vec2<u32>((a & 15u) | ((fmt_u8(s + j - 4u) >> 6u) << 4u), (a >> 4u) | ((fmt_u8(s + j) >> 6u) << 4u));
}

fn fmt_value(block_byte: u32, i: u32) -> f32 {
    let g = i / 64u;
    let hi = (i % 64u) / 32u;
    let l = i % 32u;
    let sm = fmt_scale_min(block_byte, 2u * g + hi);
    let q = fmt_u8(block_byte + FMT_QS + g * 32u + l);
    var v = select(q & 15u, q >> 4u, hi == 1u);
#if FMT_TYPE == TYPE_Q5_K
    v = v + 16u * ((fmt_u8(block_byte + 16u + l) >> (2u * g + hi)) & 1u);
#endif
    let d = fmt_f16(block_byte) * f32(sm.x);
    let m = fmt_f16(block_byte + 2u) * f32(sm.y);
    return d * f32(v) - m;
}
#elif FMT_TYPE == TYPE_Q6_K
#define FMT_BLOCK 256u
#define FMT_BLOCK_BYTES 210u
// ql[128], qh[64], scales[16] (int8), d.
fn fmt_value(block_byte: u32, i: u32) -> f32 {
    let n = i / 128u;
    let r = i % 128u;
    let quarter = r / 32u;
    let l = r % 32u;
    let low = fmt_u8(block_byte + n * 64u + l + (quarter & 1u) * 32u);
    let nibble = select(low & 15u, low >> 4u, quarter >= 2u);
    let bits = (fmt_u8(block_byte + 128u + n * 32u + l) >> (2u * quarter)) & 3u;
    let q = i32(nibble | (bits << 4u)) - 32;
    let scale = fmt_i8(block_byte + 192u + n * 8u + l / 16u + 2u * quarter);
    return fmt_f16(block_byte + 208u) * f32(scale) * f32(q);
}
#endif
