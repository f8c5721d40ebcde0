// ADD, SUB, MUL, DIV with ggml's broadcasting: dst[i] = a[i] op b[i mod b.ne], per dimension.
// One thread per unit of VEC elements along dimension 0 (VEC = 1, or 4 where the plan found
// every row contiguous and every start a multiple of 4 elements).
// Defines: OP (0 add, 1 sub, 2 mul, 3 div), A_F16, B_F16, DST_F16 (f16 instead of f32),
// VEC (1 or 4), IN_PLACE (dst is a: two bindings, dst read and written), WG_SIZE.
//
// Bytes touched (proven by the planner's checks in Rust, `ops/binary/mod.rs`): every unit the
// thread computes lies inside its tensor's extents, so a's reads stay within
// a_start + Σ (ne_i − 1)·a_nb_i + VEC, b's within b_start + Σ (b_ne_i − 1)·b_nb_i + VEC and
// dst's writes within dst_start + Σ (ne_i − 1)·dst_nb_i + VEC (all in units), which the
// bindings (each tensor's span) hold.
#if A_F16 || B_F16 || DST_F16
enable f16;
#endif

#ifndef VEC
#define VEC 1
#endif
#define WG_SIZE 256u

#if A_F16
#define A_SCALAR f16
#else
#define A_SCALAR f32
#endif
#if B_F16
#define B_SCALAR f16
#else
#define B_SCALAR f32
#endif
#if DST_F16
#define DST_SCALAR f16
#else
#define DST_SCALAR f32
#endif

#if VEC == 4
#define A_UNIT vec4<A_SCALAR>
#define B_UNIT vec4<B_SCALAR>
#define DST_UNIT vec4<DST_SCALAR>
#define F32_UNIT vec4<f32>
#else
#define A_UNIT A_SCALAR
#define B_UNIT B_SCALAR
#define DST_UNIT DST_SCALAR
#define F32_UNIT f32
#endif

struct Params {
    a_start: u32,   // units from each binding's start to element (0, 0, 0, 0)
    b_start: u32,
    dst_start: u32,
    count: u32,     // units of dst
    row_stride: u32, // threads per grid row (the grid may be split in 2-D)
    ne0: u32,       // dst's (= a's) extents, ne0 in units
    ne1: u32,
    ne2: u32,
    ne3: u32,
    a_nb0: u32,     // strides in units
    a_nb1: u32,
    a_nb2: u32,
    a_nb3: u32,
    b_ne0: u32,     // b's extents (each divides dst's), b_ne0 in units
    b_ne1: u32,
    b_ne2: u32,
    b_ne3: u32,
    b_nb0: u32,
    b_nb1: u32,
    b_nb2: u32,
    b_nb3: u32,
    dst_nb0: u32,
    dst_nb1: u32,
    dst_nb2: u32,
    dst_nb3: u32,
}

#if IN_PLACE
@group(0) @binding(0) var<storage, read> b: array<B_UNIT>;
@group(0) @binding(1) var<storage, read_write> dst: array<DST_UNIT>;
@group(0) @binding(2) var<uniform> params: Params;
#else
@group(0) @binding(0) var<storage, read> a: array<A_UNIT>;
@group(0) @binding(1) var<storage, read> b: array<B_UNIT>;
@group(0) @binding(2) var<storage, read_write> dst: array<DST_UNIT>;
@group(0) @binding(3) var<uniform> params: Params;
#endif

fn apply(x: F32_UNIT, y: F32_UNIT) -> F32_UNIT {
#if OP == 0
    return x + y;
#elif OP == 1
    return x - y;
#elif OP == 2
    return x * y;
#else
    return x / y;
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = params;
    let i = gid.y * p.row_stride + gid.x;
    if (i >= p.count) {
        return;
    }
    let i0 = i % p.ne0;
    let row = i / p.ne0;
    let i1 = row % p.ne1;
    let i2 = (row / p.ne1) % p.ne2;
    let i3 = row / (p.ne1 * p.ne2);
    let d = p.dst_start + i0 * p.dst_nb0 + i1 * p.dst_nb1 + i2 * p.dst_nb2 + i3 * p.dst_nb3;
    let bi = p.b_start + (i0 % p.b_ne0) * p.b_nb0 + (i1 % p.b_ne1) * p.b_nb1 + (i2 % p.b_ne2) * p.b_nb2
        + (i3 % p.b_ne3) * p.b_nb3;
#if IN_PLACE
    let x = F32_UNIT(dst[d]);
#else
    let x = F32_UNIT(a[p.a_start + i0 * p.a_nb0 + i1 * p.a_nb1 + i2 * p.a_nb2 + i3 * p.a_nb3]);
#endif
    dst[d] = DST_UNIT(apply(x, F32_UNIT(b[bi])));
}
