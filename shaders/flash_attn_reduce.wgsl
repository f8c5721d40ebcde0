// FLASH_ATTN_EXT's split reduce: each split left, per output row, O_s (relative to its max
// m_s) and the sum l_s. With M = max(m_s, sink): out = Σ O_s·e^(m_s−M) / (Σ l_s·e^(m_s−M) + e^(sink−M)),
// 0 when the denominator is 0 (every key masked and no sink). One workgroup per output row:
// C4 lanes over the row's vec4 columns times WG / C4 groups over the splits, with four
// independent accumulators each so that the loads overlap.
//
// Host defines: HSV (a multiple of 4).
#include "common.wgsl"

#define WG 128u
#define MAX_SPLIT 512u

const C4: u32 = min(HSV / 4u, WG);      // lanes over columns
const SPL: u32 = WG / C4;               // split groups
const CPT: u32 = (HSV / 4u + C4 - 1u) / C4; // vec4 columns per thread

@group(0) @binding(0) var<storage, read> part: array<vec4<f32>>; // [split][row][HSV / 4]
@group(0) @binding(1) var<storage, read> stats: array<vec2<f32>>; // [split][row] (m, l)
@group(0) @binding(2) var<storage, read> sinks: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

struct Params {
    n_rows: u32,
    n_heads: u32,
    n_split: u32,
    dst_start: u32,   // elements
    sinks_start: u32, // elements
    has_sinks: u32,
    groups_x: u32,
}
@group(0) @binding(4) var<uniform> params: Params;

const MASKED: f32 = -3.4028234663852886e38;

var<workgroup> weight: array<f32, MAX_SPLIT>;
var<workgroup> red: array<f32, WG>;
var<workgroup> acc_sh: array<vec4<f32>, SPL * HSV / 4u>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let p = params;
    let row = wg.y * p.groups_x + wg.x;
    if (row >= p.n_rows) {
        return;
    }
    let h = row % p.n_heads;
    var mx = MASKED;
    for (var s = tid; s < p.n_split; s += WG) {
        mx = max(mx, stats[s * p.n_rows + row].x);
    }
    red[tid] = mx;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (tid < stride) {
            red[tid] = max(red[tid], red[tid + stride]);
        }
        workgroupBarrier();
    }
    var m = red[0];
    var sink_term = 0.0;
    if (p.has_sinks != 0u) {
        let sink = sinks[p.sinks_start + h];
        m = max(m, sink);
        sink_term = exp(sink - m);
    }
    workgroupBarrier();
    var l = 0.0;
    for (var s = tid; s < p.n_split; s += WG) {
        let ml = stats[s * p.n_rows + row];
        let f = exp(ml.x - m);
        weight[s] = f;
        l += ml.y * f;
    }
    red[tid] = l;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (tid < stride) {
            red[tid] += red[tid + stride];
        }
        workgroupBarrier();
    }
    let total = red[0] + sink_term;
    let inv = select(0.0, 1.0 / total, total > 0.0);

    let c4 = tid % C4;
    let sg = tid / C4;
    let stride = p.n_rows * (HSV / 4u);
    for (var k = 0u; k < CPT; k += 1u) {
        let c = c4 + k * C4;
        if (c < HSV / 4u && sg < SPL) {
            var a0 = vec4<f32>(0.0);
            var a1 = vec4<f32>(0.0);
            var a2 = vec4<f32>(0.0);
            var a3 = vec4<f32>(0.0);
            let base = row * (HSV / 4u) + c;
            var s = sg;
            for (; s + 3u * SPL < p.n_split; s += 4u * SPL) {
                a0 += part[s * stride + base] * weight[s];
                a1 += part[(s + SPL) * stride + base] * weight[s + SPL];
                a2 += part[(s + 2u * SPL) * stride + base] * weight[s + 2u * SPL];
                a3 += part[(s + 3u * SPL) * stride + base] * weight[s + 3u * SPL];
            }
            for (; s < p.n_split; s += SPL) {
                a0 += part[s * stride + base] * weight[s];
            }
            acc_sh[sg * (HSV / 4u) + c] = (a0 + a1) + (a2 + a3);
        }
    }
    workgroupBarrier();
    for (var c = tid; c < HSV / 4u; c += WG) {
        var o = vec4<f32>(0.0);
        for (var g = 0u; g < SPL; g += 1u) {
            o += acc_sh[g * (HSV / 4u) + c];
        }
        o *= inv;
        let at = p.dst_start + row * HSV + 4u * c;
        dst[at] = o.x;
        dst[at + 1u] = o.y;
        dst[at + 2u] = o.z;
        dst[at + 3u] = o.w;
    }
}
