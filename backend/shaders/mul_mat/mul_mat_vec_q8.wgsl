// The integer mat-vec's view of a (included by mul_mat_vec.wgsl when B_Q8 is defined): one
// 32-element unit of a row as 32 bytes for packed 4x8-bit dot products against b's 8-bit blocks
// (mul_mat_quantize_b.wgsl), with the scale and offset of each 16-element half:
//
//   sum over the unit of a·b = x.d · (f.x · Σ_lo v·q + f.y · Σ_hi v·q) + o.x · x.s_lo + o.y · x.s_hi
//
// where v are the unit's bytes (the format's unsigned quants, or q8_0's signed ones), q and x.d
// b's bytes and scale, x.s_lo/x.s_hi = x.d · Σq over each half. The formats' zero points and
// mins go into o, so every v fits a signed byte. Units of 256-element formats are their
// 32-element sub-blocks; lanes take consecutive units, so a warp reads consecutive bytes of a row.
//
// Needs A_ALIGN2 (the planner sees to it), but for mxfp4, whose 17-byte blocks are read at any
// byte. W_ALIGN4: the unit's words are 4-byte aligned.
//
// Bytes touched: a's rows as mul_mat_operands.wgsl states (mxfp4's 17-byte blocks from the two
// aligned words holding each one, inside the word-rounded binding); b is the context's scratch
// written by mul_mat_quantize_b.wgsl (`QuantizeB::scratch_bytes`, `int_scratch_bytes`).

#if defined(A_ALIGN4) && (A_TYPE == TYPE_Q4_1 || A_TYPE == TYPE_Q5_1 || A_TYPE == TYPE_Q2_K || A_TYPE == TYPE_Q4_K || A_TYPE == TYPE_Q5_K || A_TYPE == TYPE_NVFP4 || A_TYPE == TYPE_IQ4_XS)
#define W_ALIGN4 1
#endif

// Unsigned bytes below 2^(8 - 1) minus `off` (a byte value), as signed bytes: adding 128 - off
// never carries, and flipping the top bit subtracts 128.
fn signed_bytes(v: vec4<u32>, off: u32) -> vec4<u32> {
    let add = (128u - off) * 0x01010101u;
    return (v + vec4<u32>(add)) ^ vec4<u32>(0x80808080u);
}

struct Wq {
    v0: vec4<u32>,
    v1: vec4<u32>,
    f: vec2<f32>,
    o: vec2<f32>,
}

// b's block: 32 signed bytes, then (d, d·Σq[0, 16), d·Σq[16, 32), 0).
struct Xq {
    q0: vec4<u32>,
    q1: vec4<u32>,
    s: vec4<f32>,
}

fn dot16(v: vec4<u32>, q: vec4<u32>) -> i32 {
    return dot4I8Packed(v.x, q.x) + dot4I8Packed(v.y, q.y) + dot4I8Packed(v.z, q.z) + dot4I8Packed(v.w, q.w);
}

fn w_dot(w: Wq, x: Xq) -> f32 {
    let lo = f32(dot16(w.v0, x.q0));
    let hi = f32(dot16(w.v1, x.q1));
    return fma(x.s.x, fma(w.f.x, lo, w.f.y * hi), fma(w.o.x, x.s.y, w.o.y * x.s.z));
}

// Four words at byte `byte` (even). Unaligned spans are rebuilt from five aligned words; the
// fifth is clamped to the binding (it only matters when it overlaps the span).
fn w_words4(byte: u32) -> vec4<u32> {
    let i = byte >> 2u;
    let w = vec4<u32>(a[i], a[i + 1u], a[i + 2u], a[i + 3u]);
#ifdef W_ALIGN4
    return w;
#else
    let next = a[min(i + 4u, a_last())];
    return select(w, half_word_down(w, next), (byte & 2u) != 0u);
#endif
}

// One word at byte `byte` (even).
fn w_word(byte: u32) -> u32 {
    let i = byte >> 2u;
#ifdef W_ALIGN4
    return a[i];
#else
    return select(a[i], (a[i] >> 16u) | (a[min(i + 1u, a_last())] << 16u), (byte & 2u) != 0u);
#endif
}

const NIB: u32 = 0x0f0f0f0fu;

// The four bits of `h` at 4k.. as bit 4 of each byte of word k (q5's fifth bit).
fn w_high4(h: u32, k: u32) -> u32 {
    return spread_bits4((h >> (4u * k)) & 15u) << 4u;
}

#if A_TYPE == TYPE_Q4_0
// d, qs[16]: element i < 16 is the low nibble of qs[i], i >= 16 the high nibble of qs[i - 16].
fn w_load(row: u32, u: u32) -> Wq {
    let bb = row + u * 18u;
    let d = a_f16(bb);
    let q = w_words4(bb + 2u);
    return Wq(q & vec4<u32>(NIB), (q >> vec4<u32>(4u)) & vec4<u32>(NIB), vec2<f32>(d), vec2<f32>(-8.0 * d));
}
#elif A_TYPE == TYPE_Q4_1
// d, m, qs[16].
fn w_load(row: u32, u: u32) -> Wq {
    let bb = row + u * 20u;
    let dm = unpack2x16float(w_word(bb));
    let q = w_words4(bb + 4u);
    return Wq(q & vec4<u32>(NIB), (q >> vec4<u32>(4u)) & vec4<u32>(NIB), vec2<f32>(dm.x), vec2<f32>(dm.y));
}
#elif A_TYPE == TYPE_Q5_0 || A_TYPE == TYPE_Q5_1
// [q5_0] d, qh, qs[16] / [q5_1] d, m, qh, qs[16]: element i's fifth bit is bit i of qh.
#if A_TYPE == TYPE_Q5_0
const W_BYTES: u32 = 22u;
const W_QH: u32 = 2u;
#else
const W_BYTES: u32 = 24u;
const W_QH: u32 = 4u;
#endif
fn w_load(row: u32, u: u32) -> Wq {
    let bb = row + u * W_BYTES;
    let h = w_word(bb + W_QH);
    let q = w_words4(bb + W_QH + 4u);
    let lo = vec4<u32>(w_high4(h, 0u), w_high4(h, 1u), w_high4(h, 2u), w_high4(h, 3u));
    let hi = vec4<u32>(w_high4(h, 4u), w_high4(h, 5u), w_high4(h, 6u), w_high4(h, 7u));
    let v0 = (q & vec4<u32>(NIB)) | lo;
    let v1 = ((q >> vec4<u32>(4u)) & vec4<u32>(NIB)) | hi;
#if A_TYPE == TYPE_Q5_0
    let d = a_f16(bb);
    return Wq(v0, v1, vec2<f32>(d), vec2<f32>(-16.0 * d));
#else
    let dm = unpack2x16float(w_word(bb));
    return Wq(v0, v1, vec2<f32>(dm.x), vec2<f32>(dm.y));
#endif
}
#elif A_TYPE == TYPE_Q8_0
// d, qs[32] (signed).
fn w_load(row: u32, u: u32) -> Wq {
    let bb = row + u * 34u;
    let d = a_f16(bb);
    return Wq(w_words4(bb + 2u), w_words4(bb + 18u), vec2<f32>(d), vec2<f32>(0.0));
}
#elif A_TYPE == TYPE_IQ4_NL || A_TYPE == TYPE_IQ4_XS || A_TYPE == TYPE_MXFP4 || A_TYPE == TYPE_NVFP4
// [iq4_nl] d, qs[16] as q4_0's, each nibble the index of one of 16 signed levels
// (KVALUES_IQ4NL, packed bytes); [iq4_xs] d, scales_h, scales_l[4], qs[128]: a unit is one of
// the 8 sub-blocks, its 16 bytes of qs as iq4_nl's, its scale d·(ls - 32) with ls 6 bits
// (nibble j of scales_l, bits 2j.. of scales_h above it); [mxfp4] e (E8M0), qs[16] likewise,
// the levels the E2M1 values doubled (KVALUES_MXFP4) and the scale 2^(e - 128); [nvfp4] d[4] (UE4M3, halved as the
// levels are doubled, one per 16 elements), qs[32] (per 16 elements 8 bytes: element j the low
// nibble of byte j, element j + 8 the high one), the levels mxfp4's: a unit is half a block,
// its two 16-element groups with their scales. The unit's bytes are the levels themselves, so
// no zero point.
#if A_TYPE == TYPE_IQ4_NL || A_TYPE == TYPE_IQ4_XS
const W_LEVELS: vec4<u32> = KVALUES_IQ4NL;
#else
const W_LEVELS: vec4<u32> = KVALUES_MXFP4;
#endif
fn w_level(c: u32) -> u32 {
    return (W_LEVELS[c >> 2u] >> (8u * (c & 3u))) & 0xffu;
}

#ifdef W_LUT
// A byte of codes holds two 4-bit level indices; the workgroup's table maps a byte to both
// levels at once (the low nibble's in bits 0-7, the high one's in bits 16-23), so a word of
// codes costs four table reads instead of eight picks out of the constant vector (arithmetic
// on every byte). W_LUT is the planner's (`vec_int_lut`), with the 1 KiB it counts.
var<workgroup> w_lut: array<u32, 256>;

// Every lane of the workgroup calls it, then a barrier, before the first w_load.
fn w_lut_fill(lid: u32) {
    for (var v = lid; v < 256u; v += WG_SIZE) {
        w_lut[v] = w_level(v & 15u) | (w_level(v >> 4u) << 16u);
    }
}

// The levels of a word's four low nibbles (x) and of its four high nibbles (y), in byte order.
fn w_levels2(codes: u32) -> vec2<u32> {
    let p01 = w_lut[codes & 0xffu] | (w_lut[(codes >> 8u) & 0xffu] << 8u);
    let p23 = w_lut[(codes >> 16u) & 0xffu] | (w_lut[codes >> 24u] << 8u);
    // p01: bytes low 0, low 1, high 0, high 1; p23 likewise for bytes 2 and 3.
    return vec2<u32>((p01 & 0xffffu) | (p23 << 16u), (p01 >> 16u) | (p23 & 0xffff0000u));
}
#else
// The levels of four codes, one a byte.
fn w_levels4(codes: u32) -> u32 {
    var r = 0u;
#for I in 0..4
    r |= w_level((codes >> (8u * I##u)) & 15u) << (8u * I##u);
#endfor
    return r;
}

fn w_levels2(codes: u32) -> vec2<u32> {
    return vec2<u32>(w_levels4(codes & NIB), w_levels4((codes >> 4u) & NIB));
}
#endif

// A unit's 16 bytes of codes as iq4_nl and mxfp4 order them: element i < 16 the low nibble of
// byte i, element i + 16 the high one.
fn w_levels_unit(q: vec4<u32>) -> array<vec4<u32>, 2> {
    let x = w_levels2(q.x);
    let y = w_levels2(q.y);
    let z = w_levels2(q.z);
    let w = w_levels2(q.w);
    return array<vec4<u32>, 2>(vec4<u32>(x.x, y.x, z.x, w.x), vec4<u32>(x.y, y.y, z.y, w.y));
}

#if A_TYPE == TYPE_IQ4_NL
fn w_load(row: u32, u: u32) -> Wq {
    let bb = row + u * 18u;
    let d = a_f16(bb);
    let v = w_levels_unit(w_words4(bb + 2u));
    return Wq(v[0], v[1], vec2<f32>(d), vec2<f32>(0.0));
}
#elif A_TYPE == TYPE_IQ4_XS
fn w_load(row: u32, u: u32) -> Wq {
    let bb = row + (u / 8u) * 136u;
    let j = u % 8u;
    let dh = w_word(bb);
    let ls = ((w_word(bb + 4u) >> (4u * j)) & 15u) | (((dh >> (16u + 2u * j)) & 3u) << 4u);
    let d = unpack2x16float(dh).x * (f32(ls) - 32.0);
    let v = w_levels_unit(w_words4(bb + 8u + 16u * j));
    return Wq(v[0], v[1], vec2<f32>(d), vec2<f32>(0.0));
}
#elif A_TYPE == TYPE_NVFP4
fn w_load(row: u32, u: u32) -> Wq {
    let bb = row + (u / 2u) * 36u;
    let h = u % 2u;
    let sc = w_word(bb) >> (16u * h);
    // Groups 2h (words x, y) and 2h + 1 (z, w): low nibbles first, then high ones.
    // w_levels_unit gives each word's low nibbles' levels, then its high ones'.
    let v = w_levels_unit(w_words4(bb + 4u + 16u * h));
    let v0 = vec4<u32>(v[0].xy, v[1].xy);
    let v1 = vec4<u32>(v[0].zw, v[1].zw);
    return Wq(v0, v1, vec2<f32>(fmt_ue4m3_half(sc & 0xffu), fmt_ue4m3_half((sc >> 8u) & 0xffu)), vec2<f32>(0.0));
}
#else
// The 16 bytes at `byte` (any offset): five aligned words shifted down by its offset in a word;
// the fifth is clamped to the binding (it only matters when it overlaps the span).
fn w_bytes16(byte: u32) -> vec4<u32> {
    let i = byte >> 2u;
    let w = vec4<u32>(a[i], a[i + 1u], a[i + 2u], a[i + 3u]);
    let sh = (byte & 3u) * 8u;
    let up = vec4<u32>(w.yzw, a[min(i + 4u, a_last())]);
    // (A shift by 32 - sh is a shift by 0 when sh = 0: the select keeps w then.)
    return select((w >> vec4<u32>(sh)) | (up << vec4<u32>(32u - sh)), w, sh == 0u);
}

fn w_load(row: u32, u: u32) -> Wq {
    let bb = row + u * 17u;
    let e = a_u8(bb);
    // 2^(e - 128) from its bits; the two smallest scales, subnormal (which GPUs may flush),
    // count as zero: their blocks' values lie below 2^-124.
    let d = select(0.0, bitcast<f32>((e - 1u) << 23u), e >= 2u);
    let v = w_levels_unit(w_bytes16(bb + 1u));
    return Wq(v[0], v[1], vec2<f32>(d), vec2<f32>(0.0));
}
#endif
#elif A_TYPE == TYPE_Q2_K
// scales[16] (low nibble scale, high nibble min, per 16 elements), qs[64], d, dmin. Sub-block
// 4n + j is 2-bit field j of qs[32n, 32n + 32): a unit is half n, its four sub-blocks.
#define W_SUBS 4u
struct Wraw {
    q0: vec4<u32>,
    q1: vec4<u32>,
    sc: vec2<u32>,
    dd: vec2<f32>,
}

fn w_raw(row: u32, u: u32) -> Wraw {
    let bb = row + (u / 2u) * 84u;
    let n = u % 2u;
    return Wraw(w_words4(bb + 16u + 32u * n), w_words4(bb + 32u + 32u * n),
                vec2<u32>(w_word(bb + 8u * n), w_word(bb + 8u * n + 4u)), unpack2x16float(w_word(bb + 80u)));
}

fn w_sub(r: Wraw, j: u32) -> Wq {
    let sh = vec4<u32>(2u * j);
    let m = vec4<u32>(0x03030303u);
    let sc = r.sc[j / 2u] >> (16u * (j % 2u));
    let s = vec2<u32>(sc & 0xffu, (sc >> 8u) & 0xffu);
    return Wq((r.q0 >> sh) & m, (r.q1 >> sh) & m, r.dd.x * vec2<f32>(s & vec2<u32>(15u)),
              -r.dd.y * vec2<f32>(s >> vec2<u32>(4u)));
}
#elif A_TYPE == TYPE_Q3_K
// hmask[32], qs[64], scales[12] (16 packed 6-bit scales, offset 32), d. Sub-block 4n + j is
// 2-bit field j of qs[32n, 32n + 32), plus 4 unless bit 4n + j of hmask[l] is set: a unit is
// half n, its four sub-blocks.
#define W_SUBS 4u
struct Wraw {
    q0: vec4<u32>,
    q1: vec4<u32>,
    h0: vec4<u32>,
    h1: vec4<u32>,
    // d · scale of its eight 16-element halves.
    f: array<f32, 8>,
}

fn w_scale3(bb: u32, t: u32) -> f32 {
    let low = select(fmt_u8(bb + 96u + t) & 15u, fmt_u8(bb + 88u + t) >> 4u, t >= 8u);
    let high = (fmt_u8(bb + 104u + (t % 4u)) >> (2u * (t / 4u))) & 3u;
    return f32(i32(low | (high << 4u)) - 32);
}

fn w_raw(row: u32, u: u32) -> Wraw {
    let bb = row + (u / 2u) * 110u;
    let n = u % 2u;
    let hs = vec4<u32>(4u * n);
    var r: Wraw;
    r.q0 = w_words4(bb + 32u + 32u * n);
    r.q1 = w_words4(bb + 48u + 32u * n);
    r.h0 = w_words4(bb) >> hs;
    r.h1 = w_words4(bb + 16u) >> hs;
    let d = a_f16(bb + 108u);
#for T in 0..8
    r.f[T##u] = d * w_scale3(bb, 8u * n + T##u);
#endfor
    return r;
}

fn w_sub(r: Wraw, j: u32) -> Wq {
    let sh = vec4<u32>(2u * j);
    let m = vec4<u32>(0x03030303u);
    let hb = vec4<u32>(0x01010101u);
    let v0 = ((r.q0 >> sh) & m) | (((r.h0 >> vec4<u32>(j)) & hb) << vec4<u32>(2u));
    let v1 = ((r.q1 >> sh) & m) | (((r.h1 >> vec4<u32>(j)) & hb) << vec4<u32>(2u));
    let f = vec2<f32>(r.f[2u * j], r.f[2u * j + 1u]);
    return Wq(v0, v1, f, -4.0 * f);
}
#elif A_TYPE == TYPE_Q4_K || A_TYPE == TYPE_Q5_K
// d, dmin, scales[12] (8 packed 6-bit scale/min pairs), [q5_K: qh[32]], qs[128]. Sub-block
// 2g + t is nibble t of qs[32g, 32g + 32) [with bit 2g + t of qh[l] as the fifth bit]: a unit
// is group g, its two sub-blocks.
#define W_SUBS 2u
#if A_TYPE == TYPE_Q4_K
const W_BYTES: u32 = 144u;
const W_QS: u32 = 16u;
#else
const W_BYTES: u32 = 176u;
const W_QS: u32 = 48u;
#endif
struct Wraw {
    q0: vec4<u32>,
    q1: vec4<u32>,
#if A_TYPE == TYPE_Q5_K
    h0: vec4<u32>,
    h1: vec4<u32>,
#endif
    // d·scale and dmin·min of the two sub-blocks.
    dm: vec4<f32>,
}

#ifdef A_VEC4
// Byte i of the block's scales (bytes 4..16 of its first 16-byte word h).
fn w_scale_byte(h: vec4<u32>, i: u32) -> u32 {
    return (h[1u + i / 4u] >> (8u * (i % 4u))) & 0xffu;
}

// Scale and min j of the block whose first 16-byte word is h (as fmt_scale_min).
fn w_scale_min(h: vec4<u32>, j: u32) -> vec2<u32> {
    let lo = vec2<u32>(w_scale_byte(h, j % 4u), w_scale_byte(h, j % 4u + 4u)) & vec2<u32>(63u);
    let x = w_scale_byte(h, (j % 4u) + 8u);
    let hi = vec2<u32>(x & 15u, x >> 4u) | ((vec2<u32>(w_scale_byte(h, j % 4u), w_scale_byte(h, j % 4u + 4u)) >> vec2<u32>(6u)) << vec2<u32>(4u));
    return select(lo, hi, j >= 4u);
}

// With A_VEC4 (blocks at 16-byte offsets: 144 and 176 bytes are whole words) a unit is three
// 16-byte loads (five for q5_K): the block's head (d, dmin, scales) and the group's 32 bytes.
fn w_raw(row: u32, u: u32) -> Wraw {
    let w = (row + (u / 4u) * W_BYTES) >> 4u;
    let g = u % 4u;
    let head = a4[w];
    var r: Wraw;
    r.q0 = a4[w + W_QS / 16u + 2u * g];
    r.q1 = a4[w + W_QS / 16u + 2u * g + 1u];
#if A_TYPE == TYPE_Q5_K
    r.h0 = a4[w + 1u] >> vec4<u32>(2u * g);
    r.h1 = a4[w + 2u] >> vec4<u32>(2u * g);
#endif
    let dd = unpack2x16float(head.x);
    let s0 = w_scale_min(head, 2u * g);
    let s1 = w_scale_min(head, 2u * g + 1u);
    r.dm = vec4<f32>(dd.x * f32(s0.x), dd.y * f32(s0.y), dd.x * f32(s1.x), dd.y * f32(s1.y));
    return r;
}
#else
fn w_raw(row: u32, u: u32) -> Wraw {
    let bb = row + (u / 4u) * W_BYTES;
    let g = u % 4u;
    var r: Wraw;
    r.q0 = w_words4(bb + W_QS + 32u * g);
    r.q1 = w_words4(bb + W_QS + 16u + 32u * g);
#if A_TYPE == TYPE_Q5_K
    r.h0 = w_words4(bb + 16u) >> vec4<u32>(2u * g);
    r.h1 = w_words4(bb + 32u) >> vec4<u32>(2u * g);
#endif
    let dd = unpack2x16float(w_word(bb));
    let s0 = fmt_scale_min(bb, 2u * g);
    let s1 = fmt_scale_min(bb, 2u * g + 1u);
    r.dm = vec4<f32>(dd.x * f32(s0.x), dd.y * f32(s0.y), dd.x * f32(s1.x), dd.y * f32(s1.y));
    return r;
}
#endif

fn w_sub(r: Wraw, t: u32) -> Wq {
    let sh = vec4<u32>(4u * t);
    var v0 = (r.q0 >> sh) & vec4<u32>(NIB);
    var v1 = (r.q1 >> sh) & vec4<u32>(NIB);
#if A_TYPE == TYPE_Q5_K
    let hb = vec4<u32>(0x01010101u);
    v0 |= ((r.h0 >> vec4<u32>(t)) & hb) << vec4<u32>(4u);
    v1 |= ((r.h1 >> vec4<u32>(t)) & hb) << vec4<u32>(4u);
#endif
    let dm = select(r.dm.xy, r.dm.zw, t == 1u);
    return Wq(v0, v1, vec2<f32>(dm.x), vec2<f32>(-dm.y));
}
#elif A_TYPE == TYPE_Q6_K
// ql[128], qh[64], scales[16] (int8), d. Sub-block 4n + j is nibble j / 2 of
// ql[64n + 32(j % 2), +32) with 2-bit field j of qh[32n, +32) above it, offset 32: a unit is
// half n, its four sub-blocks.
#define W_SUBS 4u
struct Wraw {
    l0: array<vec4<u32>, 2>,
    l1: array<vec4<u32>, 2>,
    h: array<vec4<u32>, 2>,
    sc: vec2<u32>,
    d: f32,
}

#ifdef A_VEC4
// The 16 bytes at byte o (even, < 16) of the 32 bytes x, y: a shift by two words, then by one
// (o / 4), then by half a word (o % 4 = 2), each a select, so that lanes at blocks of any of the
// eight 16-byte phases of 210-byte blocks run the same instructions.
fn w_at(x: vec4<u32>, y: vec4<u32>, o: u32) -> vec4<u32> {
    let by2 = (o & 8u) != 0u;
    let e = select(x, vec4<u32>(x.zw, y.xy), by2);
    let e45 = select(y.xy, y.zw, by2);
    let by1 = (o & 4u) != 0u;
    let d = select(e, vec4<u32>(e.yzw, e45.x), by1);
    let d4 = select(e45.x, e45.y, by1);
    return select(d, half_word_down(d, d4), (o & 2u) != 0u);
}

// With A_VEC4 (rows at 16-byte offsets, k a multiple of 2048, so every row is whole 16-byte
// words) a unit is ten 16-byte loads instead of 35 4-byte ones: the words that hold its ql (5),
// qh (3) and the block's scales and d (2), realigned by the block's phase (w_at). Every word
// loaded holds a byte of the block, so none lies past the row.
fn w_raw(row: u32, u: u32) -> Wraw {
    let bb = row + (u / 2u) * 210u;
    let n = u % 2u;
    let w = bb >> 4u;
    let o = bb & 15u;
    let l = w + 4u * n;
    let x0 = a4[l];
    let x1 = a4[l + 1u];
    let x2 = a4[l + 2u];
    let x3 = a4[l + 3u];
    let x4 = a4[l + 4u];
    let h = w + 8u + 2u * n;
    let h0 = a4[h];
    let h1 = a4[h + 1u];
    let h2 = a4[h + 2u];
    // Bytes 192..224 of the block's phase: scales at 8n, d at 16.
    let p0 = a4[w + 12u];
    let p1 = a4[w + 13u];
    let t = 8u * n + o;
    let sc = w_at(select(p0, p1, t >= 16u), p1, t & 15u);
    let d = unpack2x16float(p1[o >> 2u] >> (8u * (o & 2u))).x;
    return Wraw(array<vec4<u32>, 2>(w_at(x0, x1, o), w_at(x1, x2, o)),
                array<vec4<u32>, 2>(w_at(x2, x3, o), w_at(x3, x4, o)),
                array<vec4<u32>, 2>(w_at(h0, h1, o), w_at(h1, h2, o)),
                sc.xy, d);
}
#else
fn w_raw(row: u32, u: u32) -> Wraw {
    let bb = row + (u / 2u) * 210u;
    let n = u % 2u;
    let ql = bb + 64u * n;
    let qh = bb + 128u + 32u * n;
    let sc = bb + 192u + 8u * n;
    return Wraw(array<vec4<u32>, 2>(w_words4(ql), w_words4(ql + 16u)),
                array<vec4<u32>, 2>(w_words4(ql + 32u), w_words4(ql + 48u)),
                array<vec4<u32>, 2>(w_words4(qh), w_words4(qh + 16u)),
                vec2<u32>(w_word(sc), w_word(sc + 4u)), a_f16(bb + 208u));
}
#endif

fn w_sub(r: Wraw, j: u32) -> Wq {
    let ls = vec4<u32>(4u * (j / 2u));
    let hs = vec4<u32>(2u * j);
    let m = vec4<u32>(0x03030303u);
    var l = r.l0;
    if (j % 2u == 1u) {
        l = r.l1;
    }
    let v0 = ((l[0] >> ls) & vec4<u32>(NIB)) | (((r.h[0] >> hs) & m) << vec4<u32>(4u));
    let v1 = ((l[1] >> ls) & vec4<u32>(NIB)) | (((r.h[1] >> hs) & m) << vec4<u32>(4u));
    // Signed scale bytes 2j and 2j + 1 of the eight.
    let w = bitcast<i32>(r.sc[j / 2u]);
    let sh = 16u * (j % 2u);
    let f = r.d * vec2<f32>(f32((w << (24u - sh)) >> 24u), f32((w << (16u - sh)) >> 24u));
    return Wq(v0, v1, f, -32.0 * f);
}
#endif

#if defined(A_VEC4) && (A_TYPE == TYPE_Q4_0 || A_TYPE == TYPE_Q8_0)
// With A_VEC4 (rows at 16-byte offsets) a unit is 4 blocks, 72 (q4_0) or 136 (q8_0) bytes; two
// units are whole 16-byte words (144 or 272 bytes). A unit is 5 or 9 16-byte loads (instead of
// 24 or 44 4-byte ones); the second unit of a pair starts 8 bytes into its first word, so its
// words are shifted down by 8 bytes (one select each). Units come in whole pairs (W_PAIRED),
// so every word loaded lies within the row's whole words; blocks past the row's last pair are
// read one by one (w_load, W_WIDE).
#define W_SUBS 4u
#define W_WIDE 1
#define W_PAIRED 1
#if A_TYPE == TYPE_Q4_0
#define W_WORDS 5
const W_PAIR_WORDS: u32 = 9u;
const W_BB: u32 = 18u;
#else
#define W_WORDS 9
const W_PAIR_WORDS: u32 = 17u;
const W_BB: u32 = 34u;
#endif
struct Wraw {
    w: array<vec4<u32>, W_WORDS>,
}

fn w_raw(row: u32, u: u32) -> Wraw {
    let odd = (u & 1u) != 0u;
    // The odd unit starts at byte 4·W_BB = 16·(W_WORDS - 1) + 8 of the pair.
    let base = (row >> 4u) + (u >> 1u) * W_PAIR_WORDS + select(0u, W_WORDS##u - 1u, odd);
    var x: array<vec4<u32>, W_WORDS>;
#for I in 0..W_WORDS
    x[I] = a4[base + I##u];
#endfor
    var r: Wraw;
#for I in 0..W_WORDS
#if I + 1 < W_WORDS
    r.w[I] = select(x[I], vec4<u32>(x[I].zw, x[I + 1].xy), odd);
#else
    r.w[I] = select(x[I], vec4<u32>(x[I].zw, x[I].zw), odd);
#endif
#endfor
    return r;
}

// 4-byte word i of the unit.
fn w_unit_word(r: Wraw, i: u32) -> u32 {
    return r.w[i / 4u][i % 4u];
}

// Four words at byte `byte` (even) of the unit.
fn w_unit_words4(r: Wraw, byte: u32) -> vec4<u32> {
    let i = byte / 4u;
    let w = vec4<u32>(w_unit_word(r, i), w_unit_word(r, i + 1u), w_unit_word(r, i + 2u), w_unit_word(r, i + 3u));
    if (byte % 4u == 0u) {
        return w;
    }
    let next = w_unit_word(r, i + 4u);
    return half_word_down(w, next);
}

// Block s of the unit (s is a constant of the unrolled loop, so the byte offsets fold).
fn w_sub(r: Wraw, s: u32) -> Wq {
    let o = s * W_BB;
    let d = unpack2x16float(w_unit_word(r, o / 4u))[(o % 4u) / 2u];
#if A_TYPE == TYPE_Q4_0
    let q = w_unit_words4(r, o + 2u);
    return Wq(q & vec4<u32>(NIB), (q >> vec4<u32>(4u)) & vec4<u32>(NIB), vec2<f32>(d), vec2<f32>(-8.0 * d));
#else
    return Wq(w_unit_words4(r, o + 2u), w_unit_words4(r, o + 18u), vec2<f32>(d), vec2<f32>(0.0));
#endif
}
#endif

#ifndef W_SUBS
// One sub-block a unit.
#define W_SUBS 1u
alias Wraw = Wq;

fn w_raw(row: u32, u: u32) -> Wraw {
    return w_load(row, u);
}

fn w_sub(r: Wraw, s: u32) -> Wq {
    return r;
}
#endif
