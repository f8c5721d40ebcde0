// RMS_NORM of each row, times an optional weight and plus an optional bias that repeat over the
// rows as ggml's MUL and ADD broadcast (RMS_NORM_MUL_ADD in one pass):
// y = x / sqrt(mean(x²) + eps) · w[i0 % w_ne0, i1 % w_ne1, …] + b[…].
// With HAS_R, x is first the sum x + r, which is also written to `sum` (a decoder's residual
// ADD and the RMS_NORM after it in one pass).
//
// Defines: WG_SIZE, GROUP_SIZE (threads a row), VEC4 (every operand as 16-byte vectors: units
// are vec4<f32>), USE_SUBGROUPS, INPLACE (x is dst: only dst is bound), HAS_W, HAS_B, HAS_R, and
// the bindings' numbers X_BINDING, R_BINDING, W_BINDING, B_BINDING, DST_BINDING, SUM_BINDING,
// PARAMS_BINDING.
//
// What it touches (units: elements, or vectors with VEC4; starts and strides in units): for
// rows r < n_rows with (i1, i2, i3) below (ne1, ne2, n_rows / (ne1·ne2)), x at
// x_start + i·x_nb0 + i1·x_nb1 + i2·x_nb2 + i3·x_nb3 for i < ne0, dst likewise with its own
// strides, r and sum likewise with theirs (HAS_R), w at w_start + (i % w_ne0) + (i1 % w_ne1)·w_nb1
// + (i2 % w_ne2)·w_nb2 + (i3 % w_ne3)·w_nb3, b likewise: exactly the elements of each operand's
// layout, which the encoder binds whole (`ops::norm` checks shapes, strides and alignment).

#ifdef USE_SUBGROUPS
enable subgroups;
#endif

#include "row_reduce.wgsl"

#ifdef VEC4
alias V = vec4<f32>;
fn hsum(v: V) -> f32 {
    return (v.x + v.y) + (v.z + v.w);
}
#else
alias V = f32;
fn hsum(v: V) -> f32 {
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
    w_start: u32,
    w_ne0: u32,
    w_ne1: u32,
    w_ne2: u32,
    w_ne3: u32,
    w_nb1: u32,
    w_nb2: u32,
    w_nb3: u32,
    b_start: u32,
    b_ne0: u32,
    b_ne1: u32,
    b_ne2: u32,
    b_ne3: u32,
    b_nb1: u32,
    b_nb2: u32,
    b_nb3: u32,
    // Units a row, and elements a row (the mean's divisor).
    ne0: u32,
    n_elements: u32,
    ne1: u32,
    ne2: u32,
    n_rows: u32,
    groups_x: u32,
    r_start: u32,
    r_nb0: u32,
    r_nb1: u32,
    r_nb2: u32,
    r_nb3: u32,
    sum_start: u32,
    sum_nb0: u32,
    sum_nb1: u32,
    sum_nb2: u32,
    sum_nb3: u32,
    eps: f32,
}

#ifndef INPLACE
@group(0) @binding(X_BINDING) var<storage, read> x: array<V>;
#define SRC x
#else
#define SRC dst
#endif
#ifdef HAS_R
@group(0) @binding(R_BINDING) var<storage, read> res: array<V>;
@group(0) @binding(SUM_BINDING) var<storage, read_write> sum_out: array<V>;
#endif
#ifdef HAS_W
@group(0) @binding(W_BINDING) var<storage, read> w: array<V>;
#endif
#ifdef HAS_B
@group(0) @binding(B_BINDING) var<storage, read> b: array<V>;
#endif
@group(0) @binding(DST_BINDING) var<storage, read_write> dst: array<V>;
@group(0) @binding(PARAMS_BINDING) var<uniform> params: Params;

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
    let i2 = (r / p.ne1) % p.ne2;
    let i3 = r / (p.ne1 * p.ne2);
    let xb = p.x_start + i1 * p.x_nb1 + i2 * p.x_nb2 + i3 * p.x_nb3;
#ifdef HAS_R
    let rb = p.r_start + i1 * p.r_nb1 + i2 * p.r_nb2 + i3 * p.r_nb3;
    let sb = p.sum_start + i1 * p.sum_nb1 + i2 * p.sum_nb2 + i3 * p.sum_nb3;
#endif
    var acc = V(0.0);
    if (valid) {
        for (var i = lane; i < p.ne0; i += GROUP_SIZE) {
#ifdef HAS_R
            let v = SRC[xb + i * p.x_nb0] + res[rb + i * p.r_nb0];
            sum_out[sb + i * p.sum_nb0] = v;
#else
            let v = SRC[xb + i * p.x_nb0];
#endif
            acc += v * v;
        }
    }
    let sum = row_sum(hsum(acc), l);
    let scale = 1.0 / sqrt(sum / f32(p.n_elements) + p.eps);
    if (!valid) {
        return;
    }
    let db = p.dst_start + i1 * p.dst_nb1 + i2 * p.dst_nb2 + i3 * p.dst_nb3;
#ifdef HAS_W
    let wb = p.w_start + (i1 % p.w_ne1) * p.w_nb1 + (i2 % p.w_ne2) * p.w_nb2 + (i3 % p.w_ne3) * p.w_nb3;
#endif
#ifdef HAS_B
    let bb = p.b_start + (i1 % p.b_ne1) * p.b_nb1 + (i2 % p.b_ne2) * p.b_nb2 + (i3 % p.b_ne3) * p.b_nb3;
#endif
    for (var i = lane; i < p.ne0; i += GROUP_SIZE) {
#ifdef HAS_R
        // The same sum again (not read back from sum_out: no barrier needed).
        var y = (SRC[xb + i * p.x_nb0] + res[rb + i * p.r_nb0]) * scale;
#else
        var y = SRC[xb + i * p.x_nb0] * scale;
#endif
#ifdef HAS_W
        y = y * w[wb + i % p.w_ne0];
#endif
#ifdef HAS_B
        y = y + b[bb + i % p.b_ne0];
#endif
        dst[db + i * p.dst_nb0] = y;
    }
}
