// K and V rows read in chunks of 8 consecutive elements, converted to f16 and packed two per
// u32 (the memory layout of 8 f16 values), for staging into workgroup memory.
//
// Included once per operand, like formats.wgsl, after defining:
//   FMT       the prefix (k or v),
//   FMT_BUF   the storage buffer,
//   FMT_TYPE  the ggml type id (TYPE_* from common.wgsl),
//   FMT_VEC   1: FMT_BUF is array<vec4<u32>> and every chunk is 16-byte aligned (f16, bf16 and
//             f32 only); 0: FMT_BUF is array<u32>, rows start at even bytes (formats.wgsl is
//             included for the block readers).
// Provides FMT##_chunk(row_byte, e0) -> vec4<u32>: elements e0..e0+7 (e0 a multiple of 8, so a
// chunk never straddles a block) of the row that starts at byte row_byte. The dequantization
// follows ggml's (value = q·d, q·d + m, ...) in f32, then rounds to f16.
// Also FMT##_raw(row_byte, e0) -> vec4<u32> and FMT##_dec(raw) -> Dec8 for the vec kernel: the
// loads of a chunk, and their decoding to f32, separable so that a thread can issue many loads
// before it uses any. q8_0 and q4_0 keep their int values (with d apart, no f16 round trip) and
// read words without branches, so that lanes on blocks of either alignment do not diverge.
// Needs fa_bf16x2, fa_i8x2, fa_q4x2, fa_i8x4, fa_f16_dec8 and Dec8 (flash_attn_common.wgsl).
//
// Bytes touched: with FMT_VEC, whole 16-byte words of a row (rows are whole words:
// `vec_layout`, `kv_binding` in ops/flash_attn/encode.rs); else the row's chunk of 8 elements
// (its block's bytes), read as the aligned words holding them, inside the word-rounded binding.

#if FMT_VEC
#if FMT_TYPE == TYPE_F16
fn FMT##_chunk(row_byte: u32, e0: u32) -> vec4<u32> {
    return FMT_BUF[(row_byte + e0 * 2u) >> 4u];
}
#elif FMT_TYPE == TYPE_BF16
fn FMT##_chunk(row_byte: u32, e0: u32) -> vec4<u32> {
    let w = FMT_BUF[(row_byte + e0 * 2u) >> 4u];
    return vec4<u32>(fa_bf16x2(w.x), fa_bf16x2(w.y), fa_bf16x2(w.z), fa_bf16x2(w.w));
}
#elif FMT_TYPE == TYPE_F32
fn FMT##_chunk(row_byte: u32, e0: u32) -> vec4<u32> {
    let i = (row_byte + e0 * 4u) >> 4u;
    let a = bitcast<vec4<f32>>(FMT_BUF[i]);
    let b = bitcast<vec4<f32>>(FMT_BUF[i + 1u]);
    return vec4<u32>(pack2x16float(a.xy), pack2x16float(a.zw), pack2x16float(b.xy), pack2x16float(b.zw));
}
#endif
#else
#include "formats.wgsl"

// The u32 at an even byte address (two words funnel-shifted when it straddles them).
fn FMT##_w(byte: u32) -> u32 {
    let i = byte >> 2u;
    if ((byte & 2u) == 0u) {
        return FMT_BUF[i];
    }
    return (FMT_BUF[i] >> 16u) | (FMT_BUF[i + 1u] << 16u);
}

#if FMT_TYPE == TYPE_F16
fn FMT##_chunk(row_byte: u32, e0: u32) -> vec4<u32> {
    let b = row_byte + e0 * 2u;
    return vec4<u32>(FMT##_w(b), FMT##_w(b + 4u), FMT##_w(b + 8u), FMT##_w(b + 12u));
}
#elif FMT_TYPE == TYPE_BF16
fn FMT##_chunk(row_byte: u32, e0: u32) -> vec4<u32> {
    let b = row_byte + e0 * 2u;
    return vec4<u32>(fa_bf16x2(FMT##_w(b)), fa_bf16x2(FMT##_w(b + 4u)), fa_bf16x2(FMT##_w(b + 8u)),
        fa_bf16x2(FMT##_w(b + 12u)));
}
#elif FMT_TYPE == TYPE_F32
fn FMT##_f32x2(b: u32) -> u32 {
    return pack2x16float(vec2<f32>(bitcast<f32>(FMT##_w(b)), bitcast<f32>(FMT##_w(b + 4u))));
}
fn FMT##_chunk(row_byte: u32, e0: u32) -> vec4<u32> {
    let b = row_byte + e0 * 4u;
    return vec4<u32>(FMT##_f32x2(b), FMT##_f32x2(b + 8u), FMT##_f32x2(b + 16u), FMT##_f32x2(b + 24u));
}
#elif FMT_TYPE == TYPE_Q8_0
// d, qs[32] (int8): value = q·d.
fn FMT##_chunk(row_byte: u32, e0: u32) -> vec4<u32> {
    let bb = row_byte + (e0 >> 5u) * 34u;
    let i = e0 & 31u;
    let d = unpack2x16float(FMT##_w(bb)).x;
    let lo = FMT##_w(bb + 2u + i);
    let hi = FMT##_w(bb + 6u + i);
    return vec4<u32>(fa_i8x2(lo, 0u, d), fa_i8x2(lo, 16u, d), fa_i8x2(hi, 0u, d), fa_i8x2(hi, 16u, d));
}
#elif FMT_TYPE == TYPE_Q4_0
// d, qs[16]: element j < 16 the low nibble of byte j, j + 16 the high one; value = (q - 8)·d.
fn FMT##_chunk(row_byte: u32, e0: u32) -> vec4<u32> {
    let bb = row_byte + (e0 >> 5u) * 18u;
    let i = e0 & 31u;
    let d = unpack2x16float(FMT##_w(bb)).x;
    let q = bb + 2u + (i & 15u);
    let lo = FMT##_w(q);
    let hi = FMT##_w(q + 4u);
    let s = select(0u, 4u, i >= 16u);
    let m = -8.0 * d;
    return vec4<u32>(fa_q4x2(lo, s, d, m), fa_q4x2(lo, s + 16u, d, m), fa_q4x2(hi, s, d, m),
        fa_q4x2(hi, s + 16u, d, m));
}
#elif FMT_TYPE == TYPE_Q4_1
// d, m, qs[16]: value = q·d + m.
fn FMT##_chunk(row_byte: u32, e0: u32) -> vec4<u32> {
    let bb = row_byte + (e0 >> 5u) * 20u;
    let i = e0 & 31u;
    let dm = unpack2x16float(FMT##_w(bb));
    let q = bb + 4u + (i & 15u);
    let lo = FMT##_w(q);
    let hi = FMT##_w(q + 4u);
    let s = select(0u, 4u, i >= 16u);
    return vec4<u32>(fa_q4x2(lo, s, dm.x, dm.y), fa_q4x2(lo, s + 16u, dm.x, dm.y), fa_q4x2(hi, s, dm.x, dm.y),
        fa_q4x2(hi, s + 16u, dm.x, dm.y));
}
#elif FMT_TYPE == TYPE_Q5_0 || FMT_TYPE == TYPE_Q5_1
// q5_0: d, qh (u32, bit j: the 5th bit of element j), qs[16]; value = (q - 16)·d.
// q5_1: d, m, qh, qs[16]; value = q·d + m.
fn FMT##_chunk(row_byte: u32, e0: u32) -> vec4<u32> {
#if FMT_TYPE == TYPE_Q5_0
    let bb = row_byte + (e0 >> 5u) * 22u;
    let d = unpack2x16float(FMT##_w(bb)).x;
    let m = -16.0 * d;
    let qh_at = bb + 2u;
#else
    let bb = row_byte + (e0 >> 5u) * 24u;
    let dm = unpack2x16float(FMT##_w(bb));
    let d = dm.x;
    let m = dm.y;
    let qh_at = bb + 4u;
#endif
    let i = e0 & 31u;
    let qh = FMT##_w(qh_at) >> i;
    let q = qh_at + 4u + (i & 15u);
    let s = select(0u, 4u, i >= 16u);
    let w = array<u32, 2>(FMT##_w(q), FMT##_w(q + 4u));
    var out: array<u32, 4>;
    for (var p = 0u; p < 4u; p += 1u) {
        let word = w[p / 2u];
        let b0 = (p % 2u) * 16u;
        let q0 = ((word >> (b0 + s)) & 15u) | (((qh >> (2u * p)) & 1u) << 4u);
        let q1 = ((word >> (b0 + 8u + s)) & 15u) | (((qh >> (2u * p + 1u)) & 1u) << 4u);
        out[p] = pack2x16float(vec2<f32>(f32(q0), f32(q1)) * d + m);
    }
    return vec4<u32>(out[0], out[1], out[2], out[3]);
}
#elif FMT_TYPE == TYPE_IQ4_NL
// d, qs[16] (nibbles as q4_0's): value = d·kvalues_iq4nl[q].
fn FMT##_chunk(row_byte: u32, e0: u32) -> vec4<u32> {
    let bb = row_byte + (e0 >> 5u) * 18u;
    let i = e0 & 31u;
    let d = unpack2x16float(FMT##_w(bb)).x;
    let q = bb + 2u + (i & 15u);
    let w = array<u32, 2>(FMT##_w(q), FMT##_w(q + 4u));
    let s = select(0u, 4u, i >= 16u);
    var out: array<u32, 4>;
    for (var p = 0u; p < 4u; p += 1u) {
        let word = w[p / 2u];
        let b0 = (p % 2u) * 16u;
        let a = f32(fmt_kv(KVALUES_IQ4NL, (word >> (b0 + s)) & 15u));
        let b = f32(fmt_kv(KVALUES_IQ4NL, (word >> (b0 + 8u + s)) & 15u));
        out[p] = pack2x16float(vec2<f32>(a, b) * d);
    }
    return vec4<u32>(out[0], out[1], out[2], out[3]);
}
#else
// Every other format: element by element through formats.wgsl.
fn FMT##_chunk(row_byte: u32, e0: u32) -> vec4<u32> {
    let bb = row_byte + (e0 / FMT##_block) * FMT##_block_bytes;
    let i = e0 % FMT##_block;
    var out: array<u32, 4>;
    for (var p = 0u; p < 4u; p += 1u) {
        out[p] = pack2x16float(vec2<f32>(FMT##_value(bb, i + 2u * p), FMT##_value(bb, i + 2u * p + 1u)));
    }
    return vec4<u32>(out[0], out[1], out[2], out[3]);
}
#endif
#endif

#if !FMT_VEC && (FMT_TYPE == TYPE_Q8_0 || FMT_TYPE == TYPE_Q4_0)
// The 8 bytes from an even byte address (a funnel shift of three words when it is not aligned).
fn FMT##_w8(byte: u32) -> vec2<u32> {
    let i = byte >> 2u;
    let odd = (byte & 2u) != 0u;
    let w0 = FMT_BUF[i];
    let w1 = FMT_BUF[i + 1u];
    let w2 = FMT_BUF[select(i + 1u, i + 2u, odd)];
    return select(vec2<u32>(w0, w1), vec2<u32>((w0 >> 16u) | (w1 << 16u), (w1 >> 16u) | (w2 << 16u)), odd);
}

// The f16 bits at an even byte address.
fn FMT##_h(byte: u32) -> u32 {
    return (FMT_BUF[byte >> 2u] >> ((byte & 2u) * 8u)) & 0xffffu;
}

#if FMT_TYPE == TYPE_Q8_0
// (d, 4 int8, 4 int8, -).
fn FMT##_raw(row_byte: u32, e0: u32) -> vec4<u32> {
    let bb = row_byte + (e0 >> 5u) * 34u;
    let q = FMT##_w8(bb + 2u + (e0 & 31u));
    return vec4<u32>(FMT##_h(bb), q.x, q.y, 0u);
}

fn FMT##_dec(r: vec4<u32>) -> Dec8 {
    return Dec8(fa_i8x4(r.y), fa_i8x4(r.z), unpack2x16float(r.x).x);
}
#else
// (d, bytes of 4 nibbles, bytes of the next 4, nibble shift).
fn FMT##_raw(row_byte: u32, e0: u32) -> vec4<u32> {
    let bb = row_byte + (e0 >> 5u) * 18u;
    let i = e0 & 31u;
    let q = FMT##_w8(bb + 2u + (i & 15u));
    return vec4<u32>(FMT##_h(bb), q.x, q.y, select(0u, 4u, i >= 16u));
}

fn FMT##_dec(r: vec4<u32>) -> Dec8 {
    // The nibbles at shift r.w of each byte, as bytes, to floats minus q4_0's zero point 8.
    let lo = u8x4_f32((r.y >> r.w) & 0x0f0f0f0fu, 8.0);
    let hi = u8x4_f32((r.z >> r.w) & 0x0f0f0f0fu, 8.0);
    return Dec8(lo, hi, unpack2x16float(r.x).x);
}
#endif
#else
fn FMT##_raw(row_byte: u32, e0: u32) -> vec4<u32> {
    return FMT##_chunk(row_byte, e0);
}

fn FMT##_dec(r: vec4<u32>) -> Dec8 {
    return fa_f16_dec8(r);
}
#endif
