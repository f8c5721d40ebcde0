// The GLU family: dst = act(x) · g, x and g from the halves of one tensor's rows (fused; both
// bindings then view the same tensor) or from two tensors (split). One thread per dst element.
// Defines: OP (0 REGLU, 1 GEGLU, 2 SWIGLU, 3 SWIGLU_OAI, 4 GEGLU_ERF, 5 GEGLU_QUICK), F16 (the
// tensors are f16 instead of f32), WG_SIZE.
//
// Bytes touched (proven in Rust, `ops/glu/mod.rs`): x reads elements x_start + i0 + Σ i_k·x_nb_k
// for i0 < n and i_k < ne_k, inside the x binding (a's span; its first or second half of each
// row in the fused form); g likewise in its binding; dst writes dst_start + i0 + Σ i_k·dst_nb_k
// inside dst's span.
#if F16
enable f16;
#define SCALAR f16
#else
#define SCALAR f32
#endif
#define WG_SIZE 256u

struct Params {
    x_start: u32,   // elements from each binding's start to the first x, g and dst element
    g_start: u32,
    dst_start: u32,
    count: u32,     // dst elements
    row_stride: u32, // threads per grid row (the grid may be split in 2-D)
    n: u32,         // dst's extents
    ne1: u32,
    ne2: u32,
    x_nb1: u32,     // element strides (dimension 0 is contiguous in all three)
    x_nb2: u32,
    x_nb3: u32,
    g_nb1: u32,
    g_nb2: u32,
    g_nb3: u32,
    dst_nb1: u32,
    dst_nb2: u32,
    dst_nb3: u32,
    alpha: f32,     // SWIGLU_OAI
    limit: f32,
}

@group(0) @binding(0) var<storage, read> x_src: array<SCALAR>;
@group(0) @binding(1) var<storage, read> g_src: array<SCALAR>;
@group(0) @binding(2) var<storage, read_write> dst: array<SCALAR>;
@group(0) @binding(3) var<uniform> params: Params;

const SQRT_2_OVER_PI: f32 = 0.7978845608028654;
const GELU_COEF_A: f32 = 0.044715;

// `v` rounded to f16 and back: ggml's CPU reads GELU and quick GELU from f16 tables (input and
// result rounded to f16), which this mirrors.
fn to_f16(v: f32) -> f32 {
    return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
}

fn gelu(x: f32) -> f32 {
    // tanh saturates long before its argument reaches 15 (and some tanh lowerings overflow).
    let t = clamp(SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x), -15.0, 15.0);
    return 0.5 * x * (1.0 + tanh(t));
}

fn gelu_quick(x: f32) -> f32 {
    return x * (1.0 / (1.0 + exp(-1.702 * x)));
}

// erf by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7); WGSL has none.
fn erf_approx(v: f32) -> f32 {
    let s = sign(v);
    let x = abs(v);
    let t = 1.0 / (1.0 + 0.3275911 * x);
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
    return s * y;
}

fn unit(x: f32, g: f32) -> f32 {
#if OP == 0
    return select(0.0, x * g, x > 0.0);
#elif OP == 1
#if F16
    return to_f16(gelu(x)) * g;
#else
    if (x <= -10.0) {
        return 0.0;
    }
    if (x >= 10.0) {
        return x * g;
    }
    return to_f16(gelu(to_f16(x))) * g;
#endif
#elif OP == 2
    return x / (1.0 + exp(-x)) * g;
#elif OP == 3
    let xc = min(x, params.limit);
    let gc = clamp(g, -params.limit, params.limit);
    return xc / (1.0 + exp(params.alpha * -xc)) * (gc + 1.0);
#elif OP == 4
    return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752)) * g;
#else
    return to_f16(gelu_quick(to_f16(x))) * g;
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = params;
    let i = gid.y * p.row_stride + gid.x;
    if (i >= p.count) {
        return;
    }
    let i0 = i % p.n;
    let row = i / p.n;
    let i1 = row % p.ne1;
    let i2 = (row / p.ne1) % p.ne2;
    let i3 = row / (p.ne1 * p.ne2);
    let x = f32(x_src[p.x_start + i0 + i1 * p.x_nb1 + i2 * p.x_nb2 + i3 * p.x_nb3]);
    let g = f32(g_src[p.g_start + i0 + i1 * p.g_nb1 + i2 * p.g_nb2 + i3 * p.g_nb3]);
    dst[p.dst_start + i0 + i1 * p.dst_nb1 + i2 * p.dst_nb2 + i3 * p.dst_nb3] = SCALAR(unit(x, g));
}
