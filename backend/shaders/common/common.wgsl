// Shared declarations of the backend's shaders.
//
// ggml type ids (as in GGUF files), for `#if FMT_TYPE == TYPE_Q4_0` and the like.
#define TYPE_F32 0
#define TYPE_F16 1
#define TYPE_Q4_0 2
#define TYPE_Q4_1 3
#define TYPE_Q5_0 6
#define TYPE_Q5_1 7
#define TYPE_Q8_0 8
#define TYPE_Q2_K 10
#define TYPE_Q3_K 11
#define TYPE_Q4_K 12
#define TYPE_Q5_K 13
#define TYPE_Q6_K 14
#define TYPE_IQ2_XXS 16
#define TYPE_IQ2_XS 17
#define TYPE_IQ3_XXS 18
#define TYPE_IQ1_S 19
#define TYPE_IQ4_NL 20
#define TYPE_IQ3_S 21
#define TYPE_IQ2_S 22
#define TYPE_IQ4_XS 23
#define TYPE_IQ1_M 29
#define TYPE_BF16 30
#define TYPE_TQ1_0 34
#define TYPE_TQ2_0 35
#define TYPE_MXFP4 39
#define TYPE_NVFP4 40
#define TYPE_Q1_0 41

// The four bytes of `x` as exact floats minus `off`: each byte in the low mantissa bits of 2^23,
// then one subtraction that also removes a zero point. Full-rate arithmetic, where int-to-float
// conversions run at a quarter of the rate on NVIDIA GPUs (the bound of a dequantizing loop).
fn u8x4_f32(x: u32, off: f32) -> vec4<f32> {
    let v = vec4<u32>(x & 0xffu, (x >> 8u) & 0xffu, (x >> 16u) & 0xffu, x >> 24u);
    return bitcast<vec4<f32>>(v | vec4<u32>(0x4b000000u)) - vec4<f32>(8388608.0 + off);
}

// Four words moved down by half a word: word i becomes the high half of w[i] below the low half
// of w[i + 1] (`next` after the last), the words at a byte offset 2 past w's.
fn half_word_down(w: vec4<u32>, next: u32) -> vec4<u32> {
    return (w >> vec4<u32>(16u)) | (vec4<u32>(w.yzw, next) << vec4<u32>(16u));
}

// f32 -> f16 bits, round to nearest even in integer arithmetic (half's from_f32; NaN stays NaN,
// overflow is inf): WGSL leaves the rounding of pack2x16float to the implementation.
fn f16_bits(x: f32) -> u32 {
    let u = bitcast<u32>(x);
    let sign = (u >> 16u) & 0x8000u;
    let exp = (u >> 23u) & 0xffu;
    let man = u & 0x7fffffu;
    if (exp == 0xffu) {
        return sign | 0x7c00u | select(0u, 0x200u | (man >> 13u), man != 0u);
    }
    let e = i32(exp) - 127 + 15;
    if (e >= 31) {
        return sign | 0x7c00u;
    }
    if (e <= 0) {
        if (e < -10) {
            return sign;
        }
        let m = man | 0x800000u;
        let shift = u32(14 - e);
        let half_bits = m >> shift;
        let rem = m & ((1u << shift) - 1u);
        let halfway = 1u << (shift - 1u);
        let round_up = rem > halfway || (rem == halfway && (half_bits & 1u) == 1u);
        return sign | (half_bits + select(0u, 1u, round_up));
    }
    let half_bits = (u32(e) << 10u) | (man >> 13u);
    let rem = man & 0x1fffu;
    let round_up = rem > 0x1000u || (rem == 0x1000u && (half_bits & 1u) == 1u);
    // A carry out of the mantissa rounds up the exponent (to inf at the top), as it should.
    return sign | (half_bits + select(0u, 1u, round_up));
}
