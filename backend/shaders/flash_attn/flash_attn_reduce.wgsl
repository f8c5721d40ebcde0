// FLASH_ATTN_EXT's split reduce: each split left, per output row, O_s (relative to its max
// m_s) and the sum l_s. With M = max(m_s, sink): out = Σ O_s·e^(m_s−M) / (Σ l_s·e^(m_s−M) + e^(sink−M)),
// 0 when the denominator is 0 (every key masked and no sink). One workgroup per output row:
// C4 lanes over the row's vec4 columns times SPL = WG / C4 groups over the splits. A group
// merges its splits online (statistics and partials loaded together, four splits at a time),
// then the groups merge through workgroup memory: one pass over memory and one barrier.
//
// Host defines: HSV (a multiple of 4).
//
// Bytes touched: part and stats, the context's split scratch as the plan sized it
// (`FlashAttnPlan::scratch_bytes`, `stats_offset` in ops/flash_attn/plan/mod.rs); sinks, n_heads
// f32 from sinks_start; dst's rows < n_rows of HSV f32 from dst_start (the contiguous dst
// `flash_attn::check` requires, bound by `DeviceTensor::binding`).
#include "common.wgsl"

#define WG 256u

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

var<workgroup> gm: array<f32, SPL>;
var<workgroup> gl: array<f32, SPL>;
var<workgroup> gacc: array<vec4<f32>, SPL * CPT * C4>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let p = params;
    let row = wg.y * p.groups_x + wg.x;
    if (row >= p.n_rows) {
        return;
    }
    let c4 = tid % C4;
    let sg = tid / C4;
    let stride = p.n_rows * (HSV / 4u);

    var m = MASKED;
    var l = 0.0;
    var acc: array<vec4<f32>, CPT>;
    for (var k = 0u; k < CPT; k += 1u) {
        acc[k] = vec4<f32>(0.0);
    }
    for (var s0 = sg; s0 < p.n_split; s0 += 4u * SPL) {
        // Four splits' statistics and partials (missing splits weigh nothing).
        var ml: array<vec2<f32>, 4>;
        var pa: array<vec4<f32>, 4 * CPT>;
        for (var i = 0u; i < 4u; i += 1u) {
            let s = min(s0 + i * SPL, p.n_split - 1u);
            ml[i] = stats[s * p.n_rows + row];
            if (s0 + i * SPL >= p.n_split) {
                ml[i] = vec2<f32>(MASKED, 0.0);
            }
            for (var k = 0u; k < CPT; k += 1u) {
                let c = min(c4 + k * C4, HSV / 4u - 1u);
                pa[i * CPT + k] = part[s * stride + row * (HSV / 4u) + c];
            }
        }
        let mn = max(max(m, max(ml[0].x, ml[1].x)), max(ml[2].x, ml[3].x));
        let a = exp(m - mn);
        var f: array<f32, 4>;
        for (var i = 0u; i < 4u; i += 1u) {
            f[i] = select(exp(ml[i].x - mn), 0.0, ml[i].y == 0.0);
        }
        l = l * a + (ml[0].y * f[0] + ml[1].y * f[1]) + (ml[2].y * f[2] + ml[3].y * f[3]);
        for (var k = 0u; k < CPT; k += 1u) {
            acc[k] = acc[k] * a + (pa[k] * f[0] + pa[CPT + k] * f[1]) + (pa[2u * CPT + k] * f[2] + pa[3u * CPT + k] * f[3]);
        }
        m = mn;
    }
    // (Threads past C4·SPL, when C4 does not divide WG, only wait.)
    if (sg < SPL) {
        if (c4 == 0u) {
            gm[sg] = m;
            gl[sg] = l;
        }
        for (var k = 0u; k < CPT; k += 1u) {
            gacc[(sg * CPT + k) * C4 + c4] = acc[k];
        }
    }
    workgroupBarrier();

    var mm = MASKED;
    for (var g = 0u; g < SPL; g += 1u) {
        mm = max(mm, gm[g]);
    }
    var sink_term = 0.0;
    if (p.has_sinks != 0u) {
        let sink = sinks[p.sinks_start + row % p.n_heads];
        mm = max(mm, sink);
        sink_term = exp(sink - mm);
    }
    var total = sink_term;
    for (var g = 0u; g < SPL; g += 1u) {
        total += gl[g] * exp(gm[g] - mm);
    }
    let inv = select(0.0, 1.0 / total, total > 0.0);
    for (var e = tid; e < HSV / 4u; e += WG) {
        let k = e / C4;
        let c = e % C4;
        var o = vec4<f32>(0.0);
        for (var g = 0u; g < SPL; g += 1u) {
            o += gacc[(g * CPT + k) * C4 + c] * exp(gm[g] - mm);
        }
        o *= inv;
        let at = p.dst_start + row * HSV + 4u * e;
        dst[at] = o.x;
        dst[at + 1u] = o.y;
        dst[at + 2u] = o.z;
        dst[at + 3u] = o.w;
    }
}
