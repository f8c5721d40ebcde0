// SOFT_MAX of each row (ggml's soft_max_ext): s = x·scale + slope_h·mask, then
// y = exp(s − M) / (Σ exp(s − M) + exp(sink_h − M)), M the row's max (the sink's included).
// With CACHED (the row is at most CACHED_UNITS units a thread), each thread holds its units in
// registers: one read, the group's max, one exponential each, the group's sum, the write.
// Otherwise one pass keeps a running max and sum per thread (the sum rescaled when the max
// grows), the group merges them, a second pass reads the row again and writes.
//
// Defines: WG_SIZE, GROUP_SIZE, CACHED, CACHED_UNITS, VEC4 (x, dst and the mask as 16-byte (f32) or 8-byte (f16)
// vectors: units of 4 elements), USE_SUBGROUPS, INPLACE (x is dst), HAS_MASK, MASK_F16,
// HAS_SINKS, and the bindings' numbers X_BINDING, MASK_BINDING, SINKS_BINDING, DST_BINDING,
// PARAMS_BINDING.
//
// What it touches (units as above; starts and strides in units): rows r < n_rows, (i1, h, i3)
// below (ne1, ne2, n_rows / (ne1·ne2)): x at x_start + i·x_nb0 + i1·x_nb1 + h·x_nb2 + i3·x_nb3
// for i < ne0, dst likewise; the mask at mask_start + i + i1·mask_nb1 + (h % mask_ne2)·mask_nb2
// + (i3 % mask_ne3)·mask_nb3 (an f16 mask without VEC4: the word of that half); sink
// sinks_start + h. `ops::soft_max` checks that these lie in each operand's layout, which the
// encoder binds whole.

#ifdef USE_SUBGROUPS
enable subgroups;
#endif

#include "row_reduce.wgsl"

#ifdef VEC4
alias V = vec4<f32>;
fn hsum(v: V) -> f32 {
    return (v.x + v.y) + (v.z + v.w);
}
fn hmax(v: V) -> f32 {
    return max(max(v.x, v.y), max(v.z, v.w));
}
#else
alias V = f32;
fn hsum(v: V) -> f32 {
    return v;
}
fn hmax(v: V) -> f32 {
    return v;
}
#endif

struct Params {
    x_start: u32,
    x_nb0: u32,
    x_nb1: u32,
    x_nb2: u32,
    x_nb3: u32,
    dst_start: u32,
    dst_nb0: u32,
    dst_nb1: u32,
    dst_nb2: u32,
    dst_nb3: u32,
    mask_start: u32,
    mask_nb1: u32,
    mask_nb2: u32,
    mask_nb3: u32,
    mask_ne2: u32,
    mask_ne3: u32,
    sinks_start: u32,
    ne0: u32,
    ne1: u32,
    ne2: u32,
    n_rows: u32,
    groups_x: u32,
    scale: f32,
    max_bias: f32,
    n_head_log2: u32,
    m0: f32,
    m1: f32,
}

#ifndef INPLACE
@group(0) @binding(X_BINDING) var<storage, read> x: array<V>;
#define SRC x
#else
#define SRC dst
#endif
#ifdef HAS_MASK
#ifdef MASK_F16
#ifdef VEC4
@group(0) @binding(MASK_BINDING) var<storage, read> mask: array<vec2<u32>>;
#else
@group(0) @binding(MASK_BINDING) var<storage, read> mask: array<u32>;
#endif
#else
@group(0) @binding(MASK_BINDING) var<storage, read> mask: array<V>;
#endif
#endif
#ifdef HAS_SINKS
@group(0) @binding(SINKS_BINDING) var<storage, read> sinks: array<f32>;
#endif
@group(0) @binding(DST_BINDING) var<storage, read_write> dst: array<V>;
@group(0) @binding(PARAMS_BINDING) var<uniform> params: Params;

const NEG_INF_BITS = 0xff800000u;

#ifdef HAS_MASK
fn mask_at(i: u32) -> V {
#ifdef MASK_F16
#ifdef VEC4
    let w = mask[i];
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
#else
    return unpack2x16float(mask[i / 2u])[i & 1u];
#endif
#else
    return mask[i];
#endif
}
#endif

// ALiBi slope of head h (1 without max_bias), as FLASH_ATTN_EXT's.
fn slope(h: u32) -> f32 {
    let p = params;
    if (p.max_bias <= 0.0) {
        return 1.0;
    }
    if (h < p.n_head_log2) {
        return pow(p.m0, f32(h + 1u));
    }
    return pow(p.m1, f32(2u * (h - p.n_head_log2) + 1u));
}

// The running (max, sum of exp(v − max)) after one more value.
fn online(st: vec2<f32>, v: f32) -> vec2<f32> {
    if (v > st.x) {
        return vec2<f32>(v, st.y * exp(st.x - v) + 1.0);
    }
    if (bitcast<u32>(v) == NEG_INF_BITS) {
        return st;
    }
    return vec2<f32>(st.x, st.y + exp(v - st.x));
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
#ifdef USE_SUBGROUPS
        @builtin(subgroup_invocation_id) sg_lane: u32,
        @builtin(subgroup_size) sg_size: u32,
#endif
) {
#ifdef USE_SUBGROUPS
    let l = Lane(lid, sg_lane, sg_size);
#else
    let l = Lane(lid, 0u, 1u);
#endif
    let p = params;
    let row = row_of(wid, p.groups_x, lid);
    let lane = lid % GROUP_SIZE;
    let valid = row < p.n_rows;
    let r = select(0u, row, valid);
    let i1 = r % p.ne1;
    let h = (r / p.ne1) % p.ne2;
    let i3 = r / (p.ne1 * p.ne2);
    let xb = p.x_start + i1 * p.x_nb1 + h * p.x_nb2 + i3 * p.x_nb3;
#ifdef HAS_MASK
    let mb = p.mask_start + i1 * p.mask_nb1 + (h % p.mask_ne2) * p.mask_nb2 + (i3 % p.mask_ne3) * p.mask_nb3;
    let sl = slope(h);
#endif
    // −∞ from a runtime value: WGSL refuses it as a constant.
    let neg_inf = bitcast<f32>(NEG_INF_BITS | (p.n_rows & 0u));
#ifdef CACHED
    // The thread's units of the row, read once (−∞ past its end): the max, then each
    // element's exponential once, kept for the write.
    var vals: array<V, CACHED_UNITS>;
    var mx = V(neg_inf);
    for (var k = 0u; k < CACHED_UNITS; k += 1u) {
        let i = lane + k * GROUP_SIZE;
        var s = V(neg_inf);
        if (valid && i < p.ne0) {
            s = SRC[xb + i * p.x_nb0] * p.scale;
#ifdef HAS_MASK
            s += sl * mask_at(mb + i);
#endif
        }
        vals[k] = s;
        mx = max(mx, s);
    }
    var m = row_max(hmax(mx), l);
#ifdef HAS_SINKS
    let sink = sinks[p.sinks_start + h];
    m = max(m, sink);
#endif
    var part = V(0.0);
    for (var k = 0u; k < CACHED_UNITS; k += 1u) {
        let e = exp(vals[k] - V(m));
        vals[k] = e;
        part += e;
    }
    var sum = row_sum(hsum(part), l);
#ifdef HAS_SINKS
    sum += exp(sink - m);
#endif
    if (!valid) {
        return;
    }
    let db = p.dst_start + i1 * p.dst_nb1 + h * p.dst_nb2 + i3 * p.dst_nb3;
    for (var k = 0u; k < CACHED_UNITS; k += 1u) {
        let i = lane + k * GROUP_SIZE;
        if (i < p.ne0) {
            dst[db + i * p.dst_nb0] = vals[k] / sum;
        }
    }
#else
    var st = vec2<f32>(neg_inf, 0.0);
    if (valid) {
        for (var i = lane; i < p.ne0; i += GROUP_SIZE) {
            var s = SRC[xb + i * p.x_nb0] * p.scale;
#ifdef HAS_MASK
            s += sl * mask_at(mb + i);
#endif
#ifdef VEC4
            st = online(st, s.x);
            st = online(st, s.y);
            st = online(st, s.z);
            st = online(st, s.w);
#else
            st = online(st, s);
#endif
        }
    }
    var m = row_max(st.x, l);
#ifdef HAS_SINKS
    let sink = sinks[p.sinks_start + h];
    m = max(m, sink);
#endif
    // A thread that saw nothing (or only −∞) adds nothing, without exp(−∞ − −∞).
    var part = 0.0;
    if (st.y > 0.0) {
        part = st.y * exp(st.x - m);
    }
    var sum = row_sum(part, l);
#ifdef HAS_SINKS
    sum += exp(sink - m);
#endif
    if (!valid) {
        return;
    }
    let db = p.dst_start + i1 * p.dst_nb1 + h * p.dst_nb2 + i3 * p.dst_nb3;
    for (var i = lane; i < p.ne0; i += GROUP_SIZE) {
        var s = SRC[xb + i * p.x_nb0] * p.scale;
#ifdef HAS_MASK
        s += sl * mask_at(mb + i);
#endif
        dst[db + i * p.dst_nb0] = exp(s - V(m)) / sum;
    }
#endif
}
