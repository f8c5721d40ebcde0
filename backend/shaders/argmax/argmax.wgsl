// ARGMAX of each row as ggml's CPU loop finds it (`reference::argmax`): the last index of the
// row's maximum; with NaNs, the last maximum of the last run of non-NaN values (0 when the row
// is all NaN). Values compare as ordered integer keys (−0 as +0), NaNs by their bits: exact,
// whatever the compiler assumes of floats.
//
// Pass 1 finds the last index of the max over the non-NaN values, the last NaN and the last
// non-NaN value. Without NaNs that is the answer; otherwise pass 2 finds the last NaN before
// the last non-NaN value and pass 3 the max of the run between them. Passes 2 and 3 run for
// every row (empty where not needed): their reductions hold barriers.
//
// Defines: WG_SIZE, GROUP_SIZE, VEC4 (x as 16-byte vectors: units of 4), USE_SUBGROUPS.
// What it touches: rows r < n_rows: x at x_start + i·x_nb0 + r·x_nb1 (units) for i < ne0
// (units), element e of a row at its unit's component; dst (i32) at dst_start + r. The encoder
// binds each operand's layout whole (`ops::argmax` checks it).

#ifdef USE_SUBGROUPS
enable subgroups;
#endif

#include "row_reduce.wgsl"

#ifdef VEC4
alias V = vec4<f32>;
#else
alias V = f32;
#endif

struct Params {
    x_start: u32,
    x_nb0: u32,
    x_nb1: u32,
    dst_start: u32,
    // Units a row, and elements a row.
    ne0: u32,
    n: u32,
    n_rows: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<storage, read> x: array<V>;
@group(0) @binding(1) var<storage, read_write> dst: array<i32>;
@group(0) @binding(2) var<uniform> params: Params;

// Element e of the row at xb.
fn elem(xb: u32, e: u32) -> f32 {
#ifdef VEC4
    return x[xb + (e / 4u) * params.x_nb0][e % 4u];
#else
    return x[xb + e * params.x_nb0];
#endif
}

fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// An order-preserving key of a non-NaN value (−0 and +0 equal, as `==` has them); never 0.
fn key(v: f32) -> u32 {
    var b = bitcast<u32>(v);
    if (b == 0x80000000u) {
        b = 0u;
    }
    if ((b & 0x80000000u) != 0u) {
        return ~b;
    }
    return b | 0x80000000u;
}

// The running (key, index + 1) of the last maximum after element e (elements come in order).
fn take(best: vec2<u32>, v: f32, e: u32) -> vec2<u32> {
    let k = key(v);
    if (k >= best.x) {
        return vec2<u32>(k, e + 1u);
    }
    return best;
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
    let xb = p.x_start + select(0u, row, valid) * p.x_nb1;
    // Indices are kept plus one: 0 is "none".
    var best = vec2<u32>(0u, 0u);
    var last_nan = 0u;
    var last_ok = 0u;
    if (valid) {
        for (var i = lane; i < p.ne0; i += GROUP_SIZE) {
#ifdef VEC4
            let v = x[xb + i * p.x_nb0];
            for (var c = 0u; c < 4u; c += 1u) {
                let e = 4u * i + c;
                if (is_nan(v[c])) {
                    last_nan = e + 1u;
                } else {
                    best = take(best, v[c], e);
                    last_ok = e + 1u;
                }
            }
#else
            let v = x[xb + i * p.x_nb0];
            if (is_nan(v)) {
                last_nan = i + 1u;
            } else {
                best = take(best, v, i);
                last_ok = i + 1u;
            }
#endif
        }
    }
    let top = row_max_u32(best.x, l);
    var at = row_max_u32(select(0u, best.y, best.x == top), l);
    let nan_end = row_max_u32(last_nan, l);
    let ok_end = row_max_u32(last_ok, l);
    // The run of the answer: elements [start, end).
    let slow = nan_end != 0u && ok_end != 0u;
    var start = nan_end;
    let end = ok_end;
    // Pass 2, only where the row ends in NaNs: the last NaN before `end`.
    var before = 0u;
    if (slow && nan_end > ok_end) {
        for (var e = lane; e < end; e += GROUP_SIZE) {
            if (is_nan(elem(xb, e))) {
                before = e + 1u;
            }
        }
    }
    let run_start = row_max_u32(before, l);
    if (nan_end > ok_end) {
        start = run_start;
    }
    // Pass 3: the last maximum of [start, end).
    var best3 = vec2<u32>(0u, 0u);
    if (slow) {
        for (var e = start + lane; e < end; e += GROUP_SIZE) {
            best3 = take(best3, elem(xb, e), e);
        }
    }
    let top3 = row_max_u32(best3.x, l);
    let at3 = row_max_u32(select(0u, best3.y, best3.x == top3), l);
    if (slow) {
        at = at3;
    }
    if (valid && lane == 0u) {
        // All NaN: `at` is 0, index 0 (ggml's start).
        dst[p.dst_start + row] = i32(max(at, 1u) - 1u);
    }
}
