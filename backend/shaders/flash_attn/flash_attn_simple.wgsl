// FLASH_ATTN_EXT, the simplest correct way, over f32 K and V (other types are converted to f32
// first). One workgroup per (query row, head, sequence): a first pass over the keys finds the
// maximum score, a second accumulates softmax weights times values, in chunks staged in
// workgroup memory. Any head size up to WG_SIZE * MAX_DV_PER_THREAD, any KV length.
//
// Semantics as ggml: s = q·k·scale (or cap·tanh(q·k·scale/cap)), s += slope·mask, softmax with
// an optional sink in the max and the denominator, out = Σ p·v / Σ p; a row masked entirely
// gives zeros. dst is [hsv, n_heads, n_queries, n_seq].
//
// Bytes touched: k and v are contiguous f32 copies in the context's scratch (dequantized first,
// ops/flash_attn/encode.rs); q, mask, sinks and dst as flash_attn_common.wgsl states (bindings
// from `Bound::new`, shapes by `flash_attn::check`); tested by tests/tests/guards.rs.
#include "common.wgsl"

#define WG_SIZE 64u
#define CHUNK 64u
#define MAX_DV_PER_THREAD 16u

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;   // contiguous [hsk, kv, kv_heads, n_seq]
@group(0) @binding(2) var<storage, read> v: array<f32>;   // contiguous [hsv, kv, kv_heads, n_seq]
@group(0) @binding(3) var<storage, read> mask: array<u32>; // f16 [kv, >= n_queries, 1, mask_ne3]
@group(0) @binding(4) var<storage, read> sinks: array<f32>;
@group(0) @binding(5) var<storage, read_write> dst: array<f32>;

struct Params {
    q_start: u32,     // elements
    q_nb1: u32,       // element strides of q
    q_nb2: u32,
    q_nb3: u32,
    k_start: u32,     // elements
    v_start: u32,
    mask_start: u32,  // bytes
    mask_nb1: u32,    // bytes
    mask_nb3: u32,
    mask_ne3: u32,    // 0: no mask
    sinks_start: u32, // elements
    has_sinks: u32,
    dst_start: u32,   // elements
    hsk: u32,
    hsv: u32,
    kv: u32,
    n_queries: u32,
    n_heads: u32,
    kv_heads: u32,
    n_seq: u32,
    scale: f32,
    softcap: f32,
    max_bias: f32,
    n_head_log2: u32,
    m0: f32,
    m1: f32,
    groups_x: u32,    // workgroups per grid row
}
@group(0) @binding(6) var<uniform> params: Params;

var<workgroup> reduce: array<f32, WG_SIZE>;
var<workgroup> weights: array<f32, CHUNK>;

fn mask_value(j: u32, iq: u32, i3: u32) -> f32 {
    let p = params;
    let byte = p.mask_start + j * 2u + iq * p.mask_nb1 + (i3 % p.mask_ne3) * p.mask_nb3;
    let word = mask[byte >> 2u];
    return unpack2x16float(select(word, word >> 16u, (byte & 2u) != 0u)).x;
}

fn score(j: u32, q_row: u32, k_base: u32, iq: u32, i3: u32, slope: f32) -> f32 {
    let p = params;
    var dot = 0.0;
    let k_row = k_base + j * p.hsk;
    for (var d = 0u; d < p.hsk; d += 1u) {
        dot += q[q_row + d] * k[k_row + d];
    }
    var s = dot * p.scale;
    if (p.softcap != 0.0) {
        s = p.softcap * tanh(s);
    }
    if (p.mask_ne3 != 0u) {
        s += slope * mask_value(j, iq, i3);
    }
    return s;
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let p = params;
    let item = wg.y * p.groups_x + wg.x;
    if (item >= p.n_queries * p.n_heads * p.n_seq) {
        return;
    }
    let h = item % p.n_heads;
    let iq = (item / p.n_heads) % p.n_queries;
    let i3 = item / (p.n_heads * p.n_queries);
    let kv_head = h / (p.n_heads / p.kv_heads);
    let q_row = p.q_start + iq * p.q_nb1 + h * p.q_nb2 + i3 * p.q_nb3;
    let k_base = p.k_start + (i3 * p.kv_heads + kv_head) * p.kv * p.hsk;
    let v_base = p.v_start + (i3 * p.kv_heads + kv_head) * p.kv * p.hsv;
    var slope = 1.0;
    if (p.max_bias > 0.0) {
        let n2 = p.n_head_log2;
        slope = select(pow(p.m1, f32(2u * (h - n2) + 1u)), pow(p.m0, f32(h + 1u)), h < n2);
    }
    // Pass 1: the maximum score (and the sink).
    var m = bitcast<f32>(0xff7fffffu); // the lowest finite f32
    for (var j = tid; j < p.kv; j += WG_SIZE) {
        m = max(m, score(j, q_row, k_base, iq, i3, slope));
    }
    reduce[tid] = m;
    workgroupBarrier();
    for (var stride = WG_SIZE / 2u; stride > 0u; stride /= 2u) {
        if (tid < stride) {
            reduce[tid] = max(reduce[tid], reduce[tid + stride]);
        }
        workgroupBarrier();
    }
    var row_max = reduce[0];
    workgroupBarrier();
    if (p.has_sinks != 0u) {
        row_max = max(row_max, sinks[p.sinks_start + h]);
    }
    // Pass 2: weights of a chunk of keys, then each thread accumulates its value dimensions.
    var acc: array<f32, MAX_DV_PER_THREAD>;
    var total = 0.0;
    for (var j0 = 0u; j0 < p.kv; j0 += CHUNK) {
        let j = j0 + tid;
        var w = 0.0;
        if (tid < CHUNK && j < p.kv) {
            let s = score(j, q_row, k_base, iq, i3, slope);
            // A masked key scores -inf, so its weight is 0; a row masked entirely keeps total = 0
            // (row_max stays finite: it starts at the lowest finite f32).
            w = exp(s - row_max);
        }
        if (tid < CHUNK) {
            weights[tid] = w;
        }
        workgroupBarrier();
        let count = min(CHUNK, p.kv - j0);
        for (var c = 0u; c < count; c += 1u) {
            let wc = weights[c];
            total += wc;
            for (var r = 0u; r < MAX_DV_PER_THREAD; r += 1u) {
                let d = tid + r * WG_SIZE;
                if (d < p.hsv) {
                    acc[r] += wc * v[v_base + (j0 + c) * p.hsv + d];
                }
            }
        }
        workgroupBarrier();
    }
    if (p.has_sinks != 0u) {
        total += exp(sinks[p.sinks_start + h] - row_max);
    }
    let inv = select(1.0 / total, 0.0, total == 0.0);
    let out_row = p.dst_start + ((i3 * p.n_queries + iq) * p.n_heads + h) * p.hsv;
    for (var r = 0u; r < MAX_DV_PER_THREAD; r += 1u) {
        let d = tid + r * WG_SIZE;
        if (d < p.hsv) {
            dst[out_row + d] = acc[r] * inv;
        }
    }
}
