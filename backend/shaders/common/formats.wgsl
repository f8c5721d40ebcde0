// Reading ggml's element formats from a storage buffer viewed as `array<u32>`, byte-addressed
// (blocks such as q4_0's 18 bytes are not 4-byte aligned).
//
// Before including, define:
//   FMT_BUF   the `array<u32>` storage buffer to read,
//   FMT_TYPE  the ggml type id (TYPE_* from common.wgsl),
//   FMT       a name prefix (default `fmt`), so the file can be included once per operand
//             (e.g. `k` and `v`, with `#undef`/`#define` of the three in between).
// Provides `<FMT>_value(block_byte, i) -> f32`: element `i` of the block that starts at byte
// `block_byte`, with the constants `<FMT>_block` elements and `<FMT>_block_bytes` bytes per
// block. The arithmetic follows ggml's CPU dequantization step by step, so results match it bit
// for bit. The branches of the formats with lookup tables include format_tables.wgsl (generated
// from the CPU tables; it compiles only the tables of FMT_TYPE, each once).
#ifndef FMT
#define FMT fmt
#endif

fn FMT##_u8(byte: u32) -> u32 {
    return (FMT_BUF[byte >> 2u] >> ((byte & 3u) * 8u)) & 0xffu;
}

fn FMT##_i8(byte: u32) -> i32 {
    return (i32(FMT##_u8(byte)) << 24u) >> 24u;
}

fn FMT##_u16(byte: u32) -> u32 {
    return FMT##_u8(byte) | (FMT##_u8(byte + 1u) << 8u);
}

fn FMT##_u32(byte: u32) -> u32 {
    return FMT##_u16(byte) | (FMT##_u16(byte + 2u) << 16u);
}

fn FMT##_f16(byte: u32) -> f32 {
    return unpack2x16float(FMT##_u16(byte)).x;
}

#if FMT_TYPE == TYPE_F32
const FMT##_block: u32 = 1u;
const FMT##_block_bytes: u32 = 4u;
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    return bitcast<f32>(FMT_BUF[block_byte >> 2u]);
}
#elif FMT_TYPE == TYPE_F16
const FMT##_block: u32 = 1u;
const FMT##_block_bytes: u32 = 2u;
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    return FMT##_f16(block_byte);
}
#elif FMT_TYPE == TYPE_BF16
const FMT##_block: u32 = 1u;
const FMT##_block_bytes: u32 = 2u;
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    return bitcast<f32>(FMT##_u16(block_byte) << 16u);
}
#elif FMT_TYPE == TYPE_Q4_0
const FMT##_block: u32 = 32u;
const FMT##_block_bytes: u32 = 18u;
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let q = FMT##_u8(block_byte + 2u + (i & 15u));
    let nibble = select(q & 15u, q >> 4u, i >= 16u);
    return f32(i32(nibble) - 8) * FMT##_f16(block_byte);
}
#elif FMT_TYPE == TYPE_Q4_1
const FMT##_block: u32 = 32u;
const FMT##_block_bytes: u32 = 20u;
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let q = FMT##_u8(block_byte + 4u + (i & 15u));
    let nibble = select(q & 15u, q >> 4u, i >= 16u);
    return f32(nibble) * FMT##_f16(block_byte) + FMT##_f16(block_byte + 2u);
}
#elif FMT_TYPE == TYPE_Q5_0
const FMT##_block: u32 = 32u;
const FMT##_block_bytes: u32 = 22u;
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let high = (FMT##_u32(block_byte + 2u) >> i) & 1u;
    let q = FMT##_u8(block_byte + 6u + (i & 15u));
    let nibble = select(q & 15u, q >> 4u, i >= 16u);
    return f32(i32(nibble | (high << 4u)) - 16) * FMT##_f16(block_byte);
}
#elif FMT_TYPE == TYPE_Q5_1
const FMT##_block: u32 = 32u;
const FMT##_block_bytes: u32 = 24u;
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let high = (FMT##_u32(block_byte + 4u) >> i) & 1u;
    let q = FMT##_u8(block_byte + 8u + (i & 15u));
    let nibble = select(q & 15u, q >> 4u, i >= 16u);
    return f32(nibble | (high << 4u)) * FMT##_f16(block_byte) + FMT##_f16(block_byte + 2u);
}
#elif FMT_TYPE == TYPE_Q8_0
const FMT##_block: u32 = 32u;
const FMT##_block_bytes: u32 = 34u;
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    return f32(FMT##_i8(block_byte + 2u + i)) * FMT##_f16(block_byte);
}
#elif FMT_TYPE == TYPE_Q2_K
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 84u;
// scales[16] (low nibble: scale, high: min), qs[64], d, dmin.
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let n = i / 128u;
    let r = i % 128u;
    let j = r / 32u;
    let half = (r % 32u) / 16u;
    let sc = FMT##_u8(block_byte + n * 8u + j * 2u + half);
    let q = FMT##_u8(block_byte + 16u + n * 32u + half * 16u + (r % 16u));
    let d = FMT##_f16(block_byte + 80u);
    let dmin = FMT##_f16(block_byte + 82u);
    let dl = d * f32(sc & 15u);
    let ml = dmin * f32(sc >> 4u);
    return dl * f32((q >> (2u * j)) & 3u) - ml;
}
#elif FMT_TYPE == TYPE_Q3_K
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 110u;
// hmask[32], qs[64], scales[12] (16 packed 6-bit scales), d.
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let n = i / 128u;
    let r = i % 128u;
    let j = r / 32u;
    let half = (r % 32u) / 16u;
    let l = r % 32u;
    let s = n * 8u + j * 2u + half;
    let low = select(FMT##_u8(block_byte + 96u + s) & 15u, FMT##_u8(block_byte + 96u + s - 8u) >> 4u, s >= 8u);
    let high = (FMT##_u8(block_byte + 96u + 8u + (s % 4u)) >> (2u * (s / 4u))) & 3u;
    let scale = i32(low | (high << 4u)) - 32;
    let q = i32((FMT##_u8(block_byte + 32u + n * 32u + l) >> (2u * j)) & 3u);
    let h = (FMT##_u8(block_byte + l) >> (n * 4u + j)) & 1u;
    let dl = FMT##_f16(block_byte + 108u) * f32(scale);
    return dl * f32(q - select(4, 0, h != 0u));
}
#elif FMT_TYPE == TYPE_Q4_K || FMT_TYPE == TYPE_Q5_K
#if FMT_TYPE == TYPE_Q4_K
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 144u;
const FMT##_qs: u32 = 16u;
#else
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 176u;
const FMT##_qs: u32 = 48u;
#endif
// d, dmin, scales[12] (8 packed 6-bit scale/min pairs), [q5_K: qh[32]], qs[128].
fn FMT##_scale_min(block_byte: u32, j: u32) -> vec2<u32> {
    let s = block_byte + 4u;
    if (j < 4u) {
        return vec2<u32>(FMT##_u8(s + j) & 63u, FMT##_u8(s + j + 4u) & 63u);
    }
    let a = FMT##_u8(s + j + 4u);
    return vec2<u32>((a & 15u) | ((FMT##_u8(s + j - 4u) >> 6u) << 4u), (a >> 4u) | ((FMT##_u8(s + j) >> 6u) << 4u));
}

fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let g = i / 64u;
    let hi = (i % 64u) / 32u;
    let l = i % 32u;
    let sm = FMT##_scale_min(block_byte, 2u * g + hi);
    let q = FMT##_u8(block_byte + FMT##_qs + g * 32u + l);
    var v = select(q & 15u, q >> 4u, hi == 1u);
#if FMT_TYPE == TYPE_Q5_K
    v = v + 16u * ((FMT##_u8(block_byte + 16u + l) >> (2u * g + hi)) & 1u);
#endif
    let d = FMT##_f16(block_byte) * f32(sm.x);
    let m = FMT##_f16(block_byte + 2u) * f32(sm.y);
    return d * f32(v) - m;
}
#elif FMT_TYPE == TYPE_Q6_K
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 210u;
// ql[128], qh[64], scales[16] (int8), d.
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let n = i / 128u;
    let r = i % 128u;
    let quarter = r / 32u;
    let l = r % 32u;
    let low = FMT##_u8(block_byte + n * 64u + l + (quarter & 1u) * 32u);
    let nibble = select(low & 15u, low >> 4u, quarter >= 2u);
    let bits = (FMT##_u8(block_byte + 128u + n * 32u + l) >> (2u * quarter)) & 3u;
    let q = i32(nibble | (bits << 4u)) - 32;
    let scale = FMT##_i8(block_byte + 192u + n * 8u + l / 16u + 2u * quarter);
    return FMT##_f16(block_byte + 208u) * f32(scale) * f32(q);
}
#elif FMT_TYPE == TYPE_IQ4_NL
const FMT##_block: u32 = 32u;
const FMT##_block_bytes: u32 = 18u;
#include "format_tables.wgsl"
// d, qs[16] (nibbles as q4_0's, indexing kvalues_iq4nl).
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let q = FMT##_u8(block_byte + 2u + (i & 15u));
    let nibble = select(q & 15u, q >> 4u, i >= 16u);
    return FMT##_f16(block_byte) * f32(fmt_kv(KVALUES_IQ4NL, nibble));
}
#elif FMT_TYPE == TYPE_IQ4_XS
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 136u;
#include "format_tables.wgsl"
// d, scales_h (u16, 2 bits per 32 elements), scales_l[4] (nibbles), qs[128] (iq4_nl's nibbles
// per 32 elements).
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let ib = i / 32u;
    let j = i % 32u;
    let low = (FMT##_u8(block_byte + 4u + ib / 2u) >> (4u * (ib % 2u))) & 15u;
    let ls = i32(low | (((FMT##_u16(block_byte + 2u) >> (2u * ib)) & 3u) << 4u));
    let dl = FMT##_f16(block_byte) * f32(ls - 32);
    let q = FMT##_u8(block_byte + 8u + 16u * ib + (j & 15u));
    let nibble = select(q & 15u, q >> 4u, j >= 16u);
    return dl * f32(fmt_kv(KVALUES_IQ4NL, nibble));
}
#elif FMT_TYPE == TYPE_MXFP4
const FMT##_block: u32 = 32u;
const FMT##_block_bytes: u32 = 17u;
#include "format_tables.wgsl"
// e (E8M0), qs[16] (nibbles as q4_0's, indexing kvalues_mxfp4).
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let e = FMT##_u8(block_byte);
    let q = FMT##_u8(block_byte + 1u + (i & 15u));
    let nibble = select(q & 15u, q >> 4u, i >= 16u);
    let kv = f32(fmt_kv(KVALUES_MXFP4, nibble));
    if (e < 2u) {
        // ggml's scale 2^(e - 128) (ggml_e8m0_to_fp32_half) is subnormal here, and GPUs may
        // flush subnormal operands and results to zero (WGSL allows it; lavapipe does). The
        // product kv * 2^(e - 128) is exact, so it is built without them: below 2^-125 an f32's
        // bits count units of 2^-149 (|kv| << (21 + e)), above it the product of normal numbers
        // 2^(e - 104) and 2^-24 is exact.
        let m = u32(abs(kv));
        if ((m << e) < 8u) {
            return bitcast<f32>((m << (21u + e)) | select(0u, 0x80000000u, kv < 0.0));
        }
        return kv * bitcast<f32>((e + 23u) << 23u) * 0x1p-24f;
    }
    // ggml_e8m0_to_fp32_half: 2^(e - 128), from its bits.
    return kv * bitcast<f32>((e - 1u) << 23u);
}
#elif FMT_TYPE == TYPE_NVFP4
const FMT##_block: u32 = 64u;
const FMT##_block_bytes: u32 = 36u;
#include "format_tables.wgsl"
// d[4] (UE4M3, one per 16 elements), qs[32] (per 16 elements 8 bytes: element j the low nibble
// of byte j, element j + 8 the high nibble).
fn FMT##_ue4m3_half(x: u32) -> f32 {
    if (x == 0u || x == 0x7fu) {
        return 0.0;
    }
    let e = (x >> 3u) & 15u;
    let man = f32(x & 7u);
    var raw: f32;
    if (e == 0u) {
        raw = man * 0.001953125; // 2^-9
    } else {
        // man / 8 and 2^(e - 7) are exact, as on the CPU.
        raw = (1.0 + man * 0.125) * bitcast<f32>((e + 120u) << 23u);
    }
    return raw * 0.5;
}

fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let s = i / 16u;
    let j = i % 16u;
    let q = FMT##_u8(block_byte + 4u + 8u * s + (j & 7u));
    let nibble = select(q & 15u, q >> 4u, j >= 8u);
    return f32(fmt_kv(KVALUES_MXFP4, nibble)) * FMT##_ue4m3_half(FMT##_u8(block_byte + s));
}
#elif FMT_TYPE == TYPE_Q1_0
const FMT##_block: u32 = 128u;
const FMT##_block_bytes: u32 = 18u;
// d, qs[16] (bit i: the sign of element i, set for +d).
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let d = FMT##_f16(block_byte);
    let bit = (FMT##_u8(block_byte + 2u + i / 8u) >> (i % 8u)) & 1u;
    return select(-d, d, bit != 0u);
}
#elif FMT_TYPE == TYPE_TQ1_0
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 54u;
// qs[48] (5 trits per byte as a fraction of 3^5: elements 0..160 from qs[0..32], 160..240 from
// qs[32..48]), qh[4] (4 trits per byte: elements 240..256), d.
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    var byte: u32;
    var n: u32;
    if (i < 160u) {
        byte = block_byte + i % 32u;
        n = i / 32u;
    } else if (i < 240u) {
        byte = block_byte + 32u + (i - 160u) % 16u;
        n = (i - 160u) / 16u;
    } else {
        byte = block_byte + 48u + (i - 240u) % 4u;
        n = (i - 240u) / 4u;
    }
    // Trit n (most significant first): (uint8_t)(q * 3^n) * 3 >> 8.
    var q = FMT##_u8(byte);
    for (var k = 0u; k < n; k += 1u) {
        q = (q * 3u) & 255u;
    }
    let t = i32((q * 3u) >> 8u);
    return f32(t - 1) * FMT##_f16(block_byte + 52u);
}
#elif FMT_TYPE == TYPE_TQ2_0
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 66u;
// qs[64] (2 bits per element: per 128 elements 32 bytes, 4 rows of 32), d.
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let q = (FMT##_u8(block_byte + 32u * (i / 128u) + i % 32u) >> (2u * ((i % 128u) / 32u))) & 3u;
    return f32(i32(q) - 1) * FMT##_f16(block_byte + 64u);
}
#elif FMT_TYPE == TYPE_IQ2_XXS
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 66u;
#define FMT_IQ2_GRID IQ2XXS_GRID
#include "format_tables.wgsl"
// d, then per 32 elements two u32: four grid indices (bytes), and four 7-bit sign indices
// with a 4-bit scale on top.
fn FMT##_grid_unit(block_byte: u32, ib32: u32, l: u32) -> FmtGridUnit {
    let off = block_byte + 2u + 8u * ib32;
    let aux1 = FMT##_u32(off + 4u);
    let db = FMT##_f16(block_byte) * (0.5 + f32(aux1 >> 28u)) * 0.25;
    return FmtGridUnit(FMT##_u8(off + l), 0u, fmt_ksigns((aux1 >> (7u * l)) & 127u), db, 0.0);
}
#elif FMT_TYPE == TYPE_IQ2_XS
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 74u;
#define FMT_IQ2_GRID IQ2XS_GRID
#include "format_tables.wgsl"
// d, qs[32] (u16: 9-bit grid index, 7-bit sign index), scales[8] (a nibble per 16 elements).
fn FMT##_grid_unit(block_byte: u32, ib32: u32, l: u32) -> FmtGridUnit {
    let sc = FMT##_u8(block_byte + 66u + ib32);
    let db = FMT##_f16(block_byte) * (0.5 + f32(select(sc & 15u, sc >> 4u, l >= 2u))) * 0.25;
    let q = FMT##_u16(block_byte + 2u + 2u * (4u * ib32 + l));
    return FmtGridUnit(q & 511u, 0u, fmt_ksigns(q >> 9u), db, 0.0);
}
#elif FMT_TYPE == TYPE_IQ2_S
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 82u;
#define FMT_IQ2_GRID IQ2S_GRID
#include "format_tables.wgsl"
// d, qs[32] (grid index low bits), signs[32], qh[8] (2 high index bits per 8 elements),
// scales[8] (a nibble per 16 elements).
fn FMT##_grid_unit(block_byte: u32, ib32: u32, l: u32) -> FmtGridUnit {
    let sc = FMT##_u8(block_byte + 74u + ib32);
    let db = FMT##_f16(block_byte) * (0.5 + f32(select(sc & 15u, sc >> 4u, l >= 2u))) * 0.25;
    let qh = FMT##_u8(block_byte + 66u + ib32);
    let index = FMT##_u8(block_byte + 2u + 4u * ib32 + l) | ((qh << (8u - 2u * l)) & 0x300u);
    return FmtGridUnit(index, 0u, FMT##_u8(block_byte + 34u + 4u * ib32 + l), db, 0.0);
}
#elif FMT_TYPE == TYPE_IQ3_XXS
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 98u;
#include "format_tables.wgsl"
// d, qs[64] (grid indices, 4 elements each), then per 32 elements a u32: four 7-bit sign
// indices and a 4-bit scale.
fn FMT##_grid_unit(block_byte: u32, ib32: u32, l: u32) -> FmtGridUnit {
    let aux = FMT##_u32(block_byte + 66u + 4u * ib32);
    let db = FMT##_f16(block_byte) * (0.5 + f32(aux >> 28u)) * 0.5;
    let q = block_byte + 2u + 8u * ib32 + 2u * l;
    return FmtGridUnit(FMT##_u8(q), FMT##_u8(q + 1u), fmt_ksigns((aux >> (7u * l)) & 127u), db, 0.0);
}
#elif FMT_TYPE == TYPE_IQ3_S
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 110u;
#include "format_tables.wgsl"
// d, qs[64] (grid index low bits, 4 elements each), qh[8] (9th index bits), signs[32],
// scales[4] (a nibble per 32 elements).
fn FMT##_grid_unit(block_byte: u32, ib32: u32, l: u32) -> FmtGridUnit {
    let nibble = (FMT##_u8(block_byte + 106u + ib32 / 2u) >> (4u * (ib32 % 2u))) & 15u;
    let db = FMT##_f16(block_byte) * f32(1 + 2 * i32(nibble));
    let qh = FMT##_u8(block_byte + 66u + ib32);
    let q = block_byte + 2u + 8u * ib32 + 2u * l;
    let index0 = FMT##_u8(q) | ((qh << (8u - 2u * l)) & 256u);
    let index1 = FMT##_u8(q + 1u) | ((qh << (7u - 2u * l)) & 256u);
    return FmtGridUnit(index0, index1, FMT##_u8(block_byte + 74u + 4u * ib32 + l), db, 0.0);
}
#elif FMT_TYPE == TYPE_IQ1_S
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 50u;
#include "format_tables.wgsl"
// d, qs[32] (grid index low bits), qh[8] (u16 per 32 elements: 3 high index bits per 8
// elements, a 3-bit scale, the delta's sign).
fn FMT##_grid_unit(block_byte: u32, ib: u32, l: u32) -> FmtGridUnit {
    let qh = FMT##_u16(block_byte + 34u + 2u * ib);
    let dl = FMT##_f16(block_byte) * f32(i32(2u * ((qh >> 12u) & 7u)) + 1);
    let delta = select(0.125, -0.125, (qh & 0x8000u) != 0u);
    let index = FMT##_u8(block_byte + 2u + 4u * ib + l) | (((qh >> (3u * l)) & 7u) << 8u);
    return FmtGridUnit(index, 0u, 0u, dl, delta);
}
#elif FMT_TYPE == TYPE_IQ1_M
const FMT##_block: u32 = 256u;
const FMT##_block_bytes: u32 = 56u;
#include "format_tables.wgsl"
// qs[32] (grid index low bits), qh[16] (per 8 elements 3 high index bits and the delta's sign),
// scales: 4 u16 of 3-bit scales, with the f16 super-scale in their top nibbles.
fn FMT##_grid_unit(block_byte: u32, ib: u32, l: u32) -> FmtGridUnit {
    let sc = block_byte + 48u;
    let bits = (FMT##_u16(sc) >> 12u) | ((FMT##_u16(sc + 2u) >> 8u) & 0x00f0u) | ((FMT##_u16(sc + 4u) >> 4u) & 0x0f00u) |
        (FMT##_u16(sc + 6u) & 0xf000u);
    let d = unpack2x16float(bits).x;
    let s = FMT##_u16(sc + 2u * (ib / 2u));
    let dl = d * f32(i32(2u * ((s >> (6u * (ib % 2u) + select(0u, 3u, l >= 2u))) & 7u)) + 1);
    let h = FMT##_u8(block_byte + 32u + 2u * ib + l / 2u);
    let odd = (l % 2u) == 1u;
    let index = FMT##_u8(block_byte + 4u * ib + l) | ((h << select(8u, 4u, odd)) & 0x700u);
    let delta = select(0.125, -0.125, (h & select(0x08u, 0x80u, odd)) != 0u);
    return FmtGridUnit(index, 0u, 0u, dl, delta);
}
#endif

// The grid formats: per 8 elements (l = 0..3 of 32-element block ib32) one unit of the block,
// FMT##_grid_unit, decoded once: a grid index (iq3: two, for elements 0-3 and 4-7), 8 sign bits
// (a set bit negates), the scale, and iq1's delta. The grids are in fmt_tables
// (format_tables.wgsl): the 8-byte ones as 2-bit codes into a levels table, two entries per u32
// (entry `index` in the half `index % 2` of word `index / 2`, byte j at bit 2j of that half);
// the 4-byte iq3 ones as plain words. `<FMT>_value` follows ggml's dequantization element by
// element; `<FMT>_unit8(block_byte, i)` (i a multiple of 8) gives elements i..i+8 at once.
#if FMT_TYPE == TYPE_IQ2_XXS || FMT_TYPE == TYPE_IQ2_XS || FMT_TYPE == TYPE_IQ2_S || FMT_TYPE == TYPE_IQ3_XXS || FMT_TYPE == TYPE_IQ3_S || FMT_TYPE == TYPE_IQ1_S || FMT_TYPE == TYPE_IQ1_M
#ifndef HAVE_FMT_GRID_UNIT
#define HAVE_FMT_GRID_UNIT 1
struct FmtGridUnit {
    index: u32,
    index2: u32,
    signs: u32,
    d: f32,
    delta: f32,
}
#endif
#endif

#if FMT_TYPE == TYPE_IQ2_XXS || FMT_TYPE == TYPE_IQ2_XS || FMT_TYPE == TYPE_IQ2_S
// The 16 bits of codes of entry `index` of the type's grid (FMT_IQ2_GRID).
fn FMT##_iq2_codes(index: u32) -> u32 {
    return fmt_tables[FMT_IQ2_GRID + index / 2u] >> (16u * (index % 2u));
}

fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let u = FMT##_grid_unit(block_byte, i / 32u, (i % 32u) / 8u);
    let j = i % 8u;
    let grid = u32(fmt_kv(IQ2_GRID_LEVELS, (FMT##_iq2_codes(u.index) >> (2u * j)) & 3u));
    return u.d * f32(grid) * select(1.0, -1.0, (u.signs & (1u << j)) != 0u);
}

fn FMT##_unit8(block_byte: u32, i: u32) -> array<vec4<f32>, 2> {
    let u = FMT##_grid_unit(block_byte, i / 32u, (i % 32u) / 8u);
    let codes = FMT##_iq2_codes(u.index);
    return array<vec4<f32>, 2>(fmt_grid4(IQ2_GRID_LEVELS, codes) * fmt_signs4(u.signs) * u.d,
                               fmt_grid4(IQ2_GRID_LEVELS, codes >> 8u) * fmt_signs4(u.signs >> 4u) * u.d);
}
#elif FMT_TYPE == TYPE_IQ3_XXS || FMT_TYPE == TYPE_IQ3_S
#if FMT_TYPE == TYPE_IQ3_XXS
#define FMT_IQ3_GRID IQ3XXS_GRID
#else
#define FMT_IQ3_GRID IQ3S_GRID
#endif
fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let u = FMT##_grid_unit(block_byte, i / 32u, (i % 32u) / 8u);
    let j = i % 8u;
    let index = select(u.index, u.index2, j >= 4u);
    let grid = (fmt_tables[FMT_IQ3_GRID + index] >> (8u * (j % 4u))) & 255u;
    return u.d * f32(grid) * select(1.0, -1.0, (u.signs & (1u << j)) != 0u);
}

fn FMT##_unit8(block_byte: u32, i: u32) -> array<vec4<f32>, 2> {
    let u = FMT##_grid_unit(block_byte, i / 32u, (i % 32u) / 8u);
    return array<vec4<f32>, 2>(fmt_bytes4(fmt_tables[FMT_IQ3_GRID + u.index]) * fmt_signs4(u.signs) * u.d,
                               fmt_bytes4(fmt_tables[FMT_IQ3_GRID + u.index2]) * fmt_signs4(u.signs >> 4u) * u.d);
}
#undef FMT_IQ3_GRID
#elif FMT_TYPE == TYPE_IQ1_S || FMT_TYPE == TYPE_IQ1_M
// The 16 bits of codes of entry `index` of iq1s_grid.
fn FMT##_iq1_codes(index: u32) -> u32 {
    return fmt_tables[IQ1S_GRID + index / 2u] >> (16u * (index % 2u));
}

fn FMT##_value(block_byte: u32, i: u32) -> f32 {
    let u = FMT##_grid_unit(block_byte, i / 32u, (i % 32u) / 8u);
    let j = i % 8u;
    let grid = fmt_kv(IQ1S_GRID_LEVELS, (FMT##_iq1_codes(u.index) >> (2u * j)) & 3u);
    return u.d * (f32(grid) + u.delta);
}

fn FMT##_unit8(block_byte: u32, i: u32) -> array<vec4<f32>, 2> {
    let u = FMT##_grid_unit(block_byte, i / 32u, (i % 32u) / 8u);
    let codes = FMT##_iq1_codes(u.index);
    return array<vec4<f32>, 2>((fmt_grid4(IQ1S_GRID_LEVELS, codes) + u.delta) * u.d,
                               (fmt_grid4(IQ1S_GRID_LEVELS, codes >> 8u) + u.delta) * u.d);
}
#endif
