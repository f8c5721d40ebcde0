// SCALE: y = x·scale + bias (one fused multiply-add, as ggml's CPU), elementwise.
//
// Defines: WG_SIZE; FLAT (x and dst contiguous: unit u at x_start + u and dst_start + u) or
// not (one element a thread at its 4-D index, through each one's strides); VEC4 (FLAT with
// 16-byte units); INPLACE (x is dst). X_BINDING, DST_BINDING, PARAMS_BINDING.
//
// What it touches: units u < n (grid threads past it return): FLAT x[x_start + u],
// dst[dst_start + u]; else element (i0, i1, i2, i3) of u through ne0..ne2 at x_start + Σ iₖ·x_nbₖ
// and dst's likewise (elements). `ops::scale` checks that these lie in the layouts bound.

#ifdef VEC4
alias V = vec4<f32>;
#else
alias V = f32;
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
    ne0: u32,
    ne1: u32,
    ne2: u32,
    n: u32,
    row_stride: u32,
    scale: f32,
    bias: f32,
}

#ifndef INPLACE
@group(0) @binding(X_BINDING) var<storage, read> x: array<V>;
#define SRC x
#else
#define SRC dst
#endif
@group(0) @binding(DST_BINDING) var<storage, read_write> dst: array<V>;
@group(0) @binding(PARAMS_BINDING) var<uniform> params: Params;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = params;
    let u = gid.y * p.row_stride + gid.x;
    if (u >= p.n) {
        return;
    }
#ifdef FLAT
    dst[p.dst_start + u] = fma(SRC[p.x_start + u], V(p.scale), V(p.bias));
#else
    let i0 = u % p.ne0;
    let i1 = (u / p.ne0) % p.ne1;
    let i2 = (u / (p.ne0 * p.ne1)) % p.ne2;
    let i3 = u / (p.ne0 * p.ne1 * p.ne2);
    let xi = p.x_start + i0 * p.x_nb0 + i1 * p.x_nb1 + i2 * p.x_nb2 + i3 * p.x_nb3;
    let di = p.dst_start + i0 * p.dst_nb0 + i1 * p.dst_nb1 + i2 * p.dst_nb2 + i3 * p.dst_nb3;
    dst[di] = fma(SRC[xi], p.scale, p.bias);
#endif
}
