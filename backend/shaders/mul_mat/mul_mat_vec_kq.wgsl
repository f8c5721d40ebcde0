// The K-quant integer mat-vec's view of a (included by mul_mat_vec.wgsl when B_Q8K is defined,
// after mul_mat_vec_q8.wgsl for its word loaders). A lane takes one slot: 16 elements of a
// 256-element block, the four runs of 4 at positions 32j + 4i (j = 0..3) of half h of the
// row, i = 0..7. In every K-quant those four runs sit in the same one or two words of the
// block (the formats interleave their sub-blocks that way), so consecutive lanes read
// consecutive words of a row, and b's 8-bit layout (mul_mat_quantize_b.wgsl with B_Q8K) gives
// the lane the matching 16 bytes of b, and the scales of their four 32-element blocks, as two
// 16-byte loads:
//
//   sum over the slot of a·b = Σ_j xd_j · (f_j · Σ v_j·q_j - o_j · Σ q_j)
//
// v_j: the run's quants as bytes (signed where the format has a fixed offset, q3_K and q6_K,
// so that o is 0; unsigned below 128 otherwise), f_j: d times the run's scale, o_j: dmin
// times its min (q2_K, q4_K, q5_K).
//
// Bytes touched: a's 256-element blocks of rows below m as mul_mat_operands.wgsl states; b is
// the context's scratch written by mul_mat_quantize_b.wgsl with B_Q8K (k a multiple of 128).

#if A_TYPE == TYPE_Q2_K || A_TYPE == TYPE_Q4_K || A_TYPE == TYPE_Q5_K
#define KQ_MINS 1
#endif

struct Kq {
    v: vec4<u32>,
    f: vec4<f32>,
#ifdef KQ_MINS
    o: vec4<f32>,
#endif
}

// Bytes 0 and 2 of `w` (after shifting it right by 8·hi) as two values.
fn kq_bytes02(w: u32, hi: u32) -> vec2<u32> {
    let x = w >> (8u * hi);
    return vec2<u32>(x & 0xffu, (x >> 16u) & 0xffu);
}

// The sum of each of the four words' signed bytes.
fn kq_sums(q: vec4<u32>) -> vec4<i32> {
    let one = 0x01010101u;
    return vec4<i32>(dot4I8Packed(q.x, one), dot4I8Packed(q.y, one), dot4I8Packed(q.z, one), dot4I8Packed(q.w, one));
}

fn kq_dot(w: Kq, xq: vec4<u32>, xd: vec4<f32>
#ifdef KQ_MINS
          , xs: vec4<f32>
#endif
) -> f32 {
    let dots = vec4<f32>(vec4<i32>(dot4I8Packed(w.v.x, xq.x), dot4I8Packed(w.v.y, xq.y),
                                   dot4I8Packed(w.v.z, xq.z), dot4I8Packed(w.v.w, xq.w)));
#ifdef KQ_MINS
    return dot(dots, w.f * xd) - dot(w.o, xs);
#else
    return dot(dots, w.f * xd);
#endif
}

#if A_TYPE == TYPE_Q2_K
// scales[16] (low nibble scale, high nibble min, per 16 elements), qs[64], d, dmin. Element
// 128n + 32j + l is 2-bit field j of qs[32n + l], with scale byte 8n + 2j + l / 16.
fn kq_load(row: u32, h: u32, i: u32) -> Kq {
    let bb = row + (h / 2u) * 84u;
    let n = h % 2u;
    let hi = u32(i >= 4u);
    let q = w_word(bb + 16u + 32u * n + 4u * i);
    let v = (vec4<u32>(q) >> vec4<u32>(0u, 2u, 4u, 6u)) & vec4<u32>(0x03030303u);
    let s01 = kq_bytes02(w_word(bb + 8u * n), hi);
    let s23 = kq_bytes02(w_word(bb + 8u * n + 4u), hi);
    let s = vec4<u32>(s01, s23);
    let dd = unpack2x16float(w_word(bb + 80u));
    return Kq(v, dd.x * vec4<f32>(s & vec4<u32>(15u)), dd.y * vec4<f32>(s >> vec4<u32>(4u)));
}
#elif A_TYPE == TYPE_Q3_K
// hmask[32], qs[64], scales[12] (16 packed 6-bit scales, offset 32), d. Element 128n + 32j + l
// is 2-bit field j of qs[32n + l], minus 4 unless bit 4n + j of hmask[l] is set; its
// scale is number t = 8n + 2j + l / 16: low nibble of byte t % 8 (high nibble when t >= 8),
// high two bits at 2·(t / 4) of byte 8 + t % 4.
fn kq_load(row: u32, h: u32, i: u32) -> Kq {
    let bb = row + (h / 2u) * 110u;
    let n = h % 2u;
    let hi = u32(i >= 4u);
    let q = w_word(bb + 32u + 32u * n + 4u * i);
    let hm = w_word(bb + 4u * i) >> (4u * n);
    let sh = vec4<u32>(0u, 1u, 2u, 3u);
    let v = ((vec4<u32>(q) >> (2u * sh)) & vec4<u32>(0x03030303u)) | (((vec4<u32>(hm) >> sh) & vec4<u32>(0x01010101u)) << vec4<u32>(2u));
    let lo = vec4<u32>(kq_bytes02(w_word(bb + 96u), hi), kq_bytes02(w_word(bb + 100u), hi)) >> vec4<u32>(4u * n);
    let hb = kq_bytes02(w_word(bb + 104u), hi);
    let up = (vec4<u32>(hb, hb) >> vec4<u32>(4u * n, 4u * n, 4u * n + 2u, 4u * n + 2u)) & vec4<u32>(3u);
    let s = vec4<i32>((lo & vec4<u32>(15u)) | (up << vec4<u32>(4u))) - vec4<i32>(32);
    return Kq(signed_bytes(v, 4u), a_f16(bb + 108u) * vec4<f32>(s));
}
#elif A_TYPE == TYPE_Q4_K || A_TYPE == TYPE_Q5_K
// d, dmin, scales[12] (8 packed 6-bit scale/min pairs), [q5_K: qh[32]], qs[128]. Element
// 128n + 32j + l is nibble j % 2 of qs[64n + 32(j / 2) + l] [with bit 4n + j of qh[l] as its
// fifth bit], in sub-block 4n + j.
#if A_TYPE == TYPE_Q4_K
const KQ_BYTES: u32 = 144u;
const KQ_QS: u32 = 16u;
#else
const KQ_BYTES: u32 = 176u;
const KQ_QS: u32 = 48u;
#endif
fn kq_load(row: u32, h: u32, i: u32) -> Kq {
    let bb = row + (h / 2u) * KQ_BYTES;
    let n = h % 2u;
    let q0 = w_word(bb + KQ_QS + 64u * n + 4u * i);
    let q1 = w_word(bb + KQ_QS + 64u * n + 32u + 4u * i);
    var v = (vec4<u32>(q0, q0, q1, q1) >> vec4<u32>(0u, 4u, 0u, 4u)) & vec4<u32>(NIB);
#if A_TYPE == TYPE_Q5_K
    let qh = w_word(bb + 16u + 4u * i) >> (4u * n);
    v |= ((vec4<u32>(qh) >> vec4<u32>(0u, 1u, 2u, 3u)) & vec4<u32>(0x01010101u)) << vec4<u32>(4u);
#endif
    // Sub-blocks 0..3 keep their 6 bits whole in bytes 0..3 (scales) and 4..7 (mins); 4..7
    // have their low 4 bits in bytes 8..11 and their top 2 in the top bits of bytes 0..7.
    let s0 = w_word(bb + 4u);
    let s1 = w_word(bb + 8u);
    let s2 = w_word(bb + 12u);
    let sc = select(s0 & 0x3f3f3f3fu, (s2 & NIB) | ((s0 >> 2u) & 0x30303030u), n == 1u);
    let mn = select(s1 & 0x3f3f3f3fu, ((s2 >> 4u) & NIB) | ((s1 >> 2u) & 0x30303030u), n == 1u);
    let dd = unpack2x16float(w_word(bb));
    return Kq(v, dd.x * vec4<f32>(unpack4xU8(sc)), dd.y * vec4<f32>(unpack4xU8(mn)));
}
#elif A_TYPE == TYPE_Q6_K
// ql[128], qh[64], scales[16] (int8), d. Element 128n + 32j + l is nibble j / 2 of
// ql[64n + 32(j % 2) + l] with 2-bit field j of qh[32n + l] above it, minus 32; its scale is
// byte 8n + 2j + l / 16.
fn kq_load(row: u32, h: u32, i: u32) -> Kq {
    let bb = row + (h / 2u) * 210u;
    let n = h % 2u;
    let hi = u32(i >= 4u);
    let l0 = w_word(bb + 64u * n + 4u * i);
    let l1 = w_word(bb + 64u * n + 32u + 4u * i);
    let qh = w_word(bb + 128u + 32u * n + 4u * i);
    let lo = (vec4<u32>(l0, l1, l0, l1) >> vec4<u32>(0u, 0u, 4u, 4u)) & vec4<u32>(NIB);
    let up = (vec4<u32>(qh) >> vec4<u32>(0u, 2u, 4u, 6u)) & vec4<u32>(0x03030303u);
    let v = lo | (up << vec4<u32>(4u));
    let s01 = kq_bytes02(w_word(bb + 192u + 8u * n), hi);
    let s23 = kq_bytes02(w_word(bb + 196u + 8u * n), hi);
    // Signed scale bytes.
    let s = (bitcast<vec4<i32>>(vec4<u32>(s01, s23) << vec4<u32>(24u))) >> vec4<u32>(24u);
    return Kq(signed_bytes(v, 32u), a_f16(bb + 208u) * vec4<f32>(s));
}
#endif
