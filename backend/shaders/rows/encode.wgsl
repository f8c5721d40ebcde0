// Writing ggml's element formats bit for bit as ggml's CPU writes them: f16 (common.wgsl's
// `f16_bits`) and bf16 rounded to nearest even in integer arithmetic (WGSL leaves the rounding of
// f32 -> f16 to the implementation), and the quantizers of q4_0, q4_1, q5_0, q5_1, q8_0, q1_0 and iq4_nl operation for
// operation as ggml's CPU from_float (`quantize_row_*_ref`; the references' `cpu_quant`): divisions correctly rounded
// (WGSL's `/` may be off by 2.5 ulp), products never contracted into an fma with the sum that
// follows (`opaque`), C's truncating casts and `roundf` (ties away from zero).
//
// Before including, define ENC_ZERO: an expression the compiler cannot see through that is 0u
// (a uniform), and ENC_TYPE: the ggml type id written.

// `x` unchanged, but opaque to the compiler: a product passed through it is rounded on its own.
fn opaque(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) ^ ENC_ZERO);
}

// x*y exactly as hi + lo (Dekker's product with Veltkamp's split; no fma needed).
fn two_product(x: f32, y: f32) -> vec2<f32> {
    let p = opaque(x * y);
    let cx = opaque(x * 4097.0);
    let xh = opaque(cx - opaque(cx - x));
    let xl = opaque(x - xh);
    let cy = opaque(y * 4097.0);
    let yh = opaque(cy - opaque(cy - y));
    let yl = opaque(y - yh);
    let err = opaque(opaque(opaque(opaque(opaque(xh * yh) - p) + opaque(xh * yl)) + opaque(xl * yh)) + opaque(xl * yl));
    return vec2<f32>(p, err);
}

// |a − b·q| measured exactly enough to compare candidates: a − b·q as (hi, lo) collapsed.
fn residual(a: f32, b: f32, q: f32) -> f32 {
    let p = two_product(b, q);
    return opaque(opaque(a - p.x) - p.y);
}

// a / b correctly rounded (finite, normal operands): the hardware quotient and its neighbours,
// the one with the smallest exact residual.
fn div_rn(a: f32, b: f32) -> f32 {
    let q = a / b;
    if (q == 0.0 || abs(q) > 3.0e38 || b == 0.0) {
        return q;
    }
    let up = bitcast<f32>(bitcast<u32>(q) + 1u);
    let down = bitcast<f32>(bitcast<u32>(q) - 1u);
    var best = q;
    var r = abs(residual(a, b, q));
    let ru = abs(residual(a, b, up));
    if (ru < r) {
        best = up;
        r = ru;
    }
    let rd = abs(residual(a, b, down));
    if (rd < r) {
        best = down;
    }
    return best;
}

// f32 -> bf16 bits, round to nearest even (half's from_f32: NaN keeps its sign, quieted).
fn bf16_bits(x: f32) -> u32 {
    let u = bitcast<u32>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (u >> 16u) | 0x40u;
    }
    return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}

// C's (int)f for the in-range values the quantizers make.
fn trunc_i(f: f32) -> i32 {
    return i32(trunc(f));
}

// C's roundf: halves away from zero.
fn round_away(v: f32) -> f32 {
    let t = trunc(v);
    return select(t, t + sign(v), abs(v - t) >= 0.5);
}

// The block's bytes, packed little-endian into words.
struct Block {
    w: array<u32, 9>,
}

fn put_byte(b: ptr<function, Block>, at: u32, v: u32) {
    (*b).w[at >> 2u] |= (v & 0xffu) << ((at & 3u) * 8u);
}

fn put_u16(b: ptr<function, Block>, at: u32, v: u32) {
    put_byte(b, at, v);
    put_byte(b, at + 1u, v >> 8u);
}

fn put_u32(b: ptr<function, Block>, at: u32, v: u32) {
    put_u16(b, at, v);
    put_u16(b, at + 2u, v >> 16u);
}

#if ENC_TYPE == TYPE_Q4_0 || ENC_TYPE == TYPE_Q4_1 || ENC_TYPE == TYPE_Q5_0 || ENC_TYPE == TYPE_Q5_1 || ENC_TYPE == TYPE_Q8_0 || ENC_TYPE == TYPE_IQ4_NL || ENC_TYPE == TYPE_Q1_0
#define ENC_QUANT 1
#endif
#if ENC_TYPE == TYPE_Q1_0
#define ENC_QK 128u
#else
#define ENC_QK 32u
#endif
#if ENC_TYPE == TYPE_Q4_0 || ENC_TYPE == TYPE_IQ4_NL || ENC_TYPE == TYPE_Q1_0
const ENC_BLOCK_BYTES: u32 = 18u;
#elif ENC_TYPE == TYPE_Q4_1
const ENC_BLOCK_BYTES: u32 = 20u;
#elif ENC_TYPE == TYPE_Q5_0
const ENC_BLOCK_BYTES: u32 = 22u;
#elif ENC_TYPE == TYPE_Q5_1
const ENC_BLOCK_BYTES: u32 = 24u;
#elif ENC_TYPE == TYPE_Q8_0
const ENC_BLOCK_BYTES: u32 = 34u;
#endif

#if ENC_TYPE == TYPE_Q4_0 || ENC_TYPE == TYPE_Q5_0
fn quantize_block(x: ptr<function, array<f32, ENC_QK>>) -> Block {
    var b: Block;
    var amax = 0.0;
    var vmax = 0.0;
    for (var j = 0u; j < 32u; j++) {
        let v = (*x)[j];
        if (abs(v) > amax) {
            amax = abs(v);
            vmax = v;
        }
    }
#if ENC_TYPE == TYPE_Q4_0
    let d = div_rn(vmax, -8.0);
    let bias = 8.5;
    let top = 15;
    let qs = 2u;
#else
    let d = div_rn(vmax, -16.0);
    let bias = 16.5;
    let top = 31;
    let qs = 6u;
    var qh = 0u;
#endif
    let id = select(0.0, div_rn(1.0, d), d != 0.0);
    put_u16(&b, 0u, f16_bits(d));
    for (var j = 0u; j < 16u; j++) {
        let xi0 = u32(min(top, (trunc_i(opaque((*x)[j] * id) + bias) << 24u) >> 24u));
        let xi1 = u32(min(top, (trunc_i(opaque((*x)[j + 16u] * id) + bias) << 24u) >> 24u));
        put_byte(&b, qs + j, (xi0 & 15u) | ((xi1 & 15u) << 4u));
#if ENC_TYPE == TYPE_Q5_0
        qh |= ((xi0 >> 4u) & 1u) << j;
        qh |= ((xi1 >> 4u) & 1u) << (j + 16u);
#endif
    }
#if ENC_TYPE == TYPE_Q5_0
    put_u32(&b, 2u, qh);
#endif
    return b;
}
#elif ENC_TYPE == TYPE_Q4_1 || ENC_TYPE == TYPE_Q5_1
fn quantize_block(x: ptr<function, array<f32, ENC_QK>>) -> Block {
    var b: Block;
    var mn = bitcast<f32>(0x7f7fffffu);
    var mx = -bitcast<f32>(0x7f7fffffu);
    for (var j = 0u; j < 32u; j++) {
        let v = (*x)[j];
        if (v < mn) {
            mn = v;
        }
        if (v > mx) {
            mx = v;
        }
    }
#if ENC_TYPE == TYPE_Q4_1
    let d = div_rn(mx - mn, 15.0);
    let qs = 4u;
#else
    let d = div_rn(mx - mn, 31.0);
    let qs = 8u;
    var qh = 0u;
#endif
    let id = select(0.0, div_rn(1.0, d), d != 0.0);
    put_u16(&b, 0u, f16_bits(d));
    put_u16(&b, 2u, f16_bits(mn));
    for (var j = 0u; j < 16u; j++) {
#if ENC_TYPE == TYPE_Q4_1
        let xi0 = u32(min(15, (trunc_i(opaque(((*x)[j] - mn) * id) + 0.5) << 24u) >> 24u));
        let xi1 = u32(min(15, (trunc_i(opaque(((*x)[j + 16u] - mn) * id) + 0.5) << 24u) >> 24u));
#else
        let xi0 = u32(trunc_i(opaque(((*x)[j] - mn) * id) + 0.5)) & 0xffu;
        let xi1 = u32(trunc_i(opaque(((*x)[j + 16u] - mn) * id) + 0.5)) & 0xffu;
        qh |= ((xi0 >> 4u) & 1u) << j;
        qh |= ((xi1 >> 4u) & 1u) << (j + 16u);
#endif
        put_byte(&b, qs + j, (xi0 & 15u) | ((xi1 & 15u) << 4u));
    }
#if ENC_TYPE == TYPE_Q5_1
    put_u32(&b, 4u, qh);
#endif
    return b;
}
#elif ENC_TYPE == TYPE_Q8_0
fn quantize_block(x: ptr<function, array<f32, ENC_QK>>) -> Block {
    var b: Block;
    var amax = 0.0;
    for (var j = 0u; j < 32u; j++) {
        amax = max(amax, abs((*x)[j]));
    }
    let d = div_rn(amax, 127.0);
    let id = select(0.0, div_rn(1.0, d), d != 0.0);
    put_u16(&b, 0u, f16_bits(d));
    for (var j = 0u; j < 32u; j++) {
        put_byte(&b, 2u + j, u32(i32(round_away(opaque((*x)[j] * id)))));
    }
    return b;
}
#elif ENC_TYPE == TYPE_Q1_0
// d = mean |x|; bit j set for x_j >= 0.
fn quantize_block(x: ptr<function, array<f32, ENC_QK>>) -> Block {
    var b: Block;
    var sum_abs = 0.0;
    for (var j = 0u; j < 128u; j++) {
        sum_abs = sum_abs + abs((*x)[j]);
    }
    put_u16(&b, 0u, f16_bits(div_rn(sum_abs, 128.0)));
    for (var j = 0u; j < 128u; j++) {
        if ((*x)[j] >= 0.0) {
            put_byte(&b, 2u + j / 8u, 1u << (j % 8u));
        }
    }
    return b;
}
#elif ENC_TYPE == TYPE_IQ4_NL
const IQ4NL_LEVELS = array<i32, 16>(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);

// ggml's best_index_int8: the nearest level, midpoints going up.
fn iq4_index(x: f32) -> u32 {
    let x2 = x + x;
    var idx = 0u;
    var step = 8u;
    loop {
        if (step == 0u) {
            break;
        }
        let j = idx + step;
        if (x2 >= f32(IQ4NL_LEVELS[j - 1u] + IQ4NL_LEVELS[j])) {
            idx = j;
        }
        step >>= 1u;
    }
    return idx;
}

// One pass, as ggml's CPU from_float (quantize_row_iq4_nl_ref): levels from the scale
// max/−127, then the least-squares scale Σw·q·x / Σw·q² (w = x²) for those levels.
fn quantize_block(x: ptr<function, array<f32, ENC_QK>>) -> Block {
    var b: Block;
    var amax = 0.0;
    var vmax = 0.0;
    for (var j = 0u; j < 32u; j++) {
        let v = (*x)[j];
        if (abs(v) > amax) {
            amax = abs(v);
            vmax = v;
        }
    }
    var levels: array<u32, 32>;
    var d = 0.0;
    if (amax >= 1e-15) {
        let id = div_rn(1.0, div_rn(vmax, -127.0));
        var sumqx = 0.0;
        var sumq2 = 0.0;
        for (var j = 0u; j < 32u; j++) {
            let v = (*x)[j];
            let i = iq4_index(opaque(id * v));
            levels[j] = i;
            let q = f32(IQ4NL_LEVELS[i]);
            let w = opaque(v * v);
            sumqx = sumqx + opaque(opaque(w * q) * v);
            sumq2 = sumq2 + opaque(opaque(w * q) * q);
        }
        d = select(0.0, div_rn(sumqx, sumq2), sumq2 > 0.0);
    }
    put_u16(&b, 0u, f16_bits(d));
    for (var j = 0u; j < 16u; j++) {
        put_byte(&b, 2u + j, levels[j] | (levels[j + 16u] << 4u));
    }
    return b;
}
#endif
