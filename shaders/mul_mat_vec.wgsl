// MUL_MAT for few columns (n small): matrix times a handful of vectors, memory-bound.
//
// A workgroup computes ROWS rows of dst for all N_COLS columns of one batch. Its threads stride
// over k together: each step a thread takes one unit of every row (8 elements of a quantized
// block, dequantized in registers, see a_vec8; or a pair of f32/f16/bf16 elements, so that
// neighbouring threads read neighbouring words) and the matching b elements of every column,
// which it reuses for all ROWS rows. So every byte of a is read once, and b once per workgroup. The partial sums
// are reduced with subgroupAdd and a small workgroup array (or a workgroup-memory tree where the
// device has no subgroups).
//
// Defines: the operand defines of mul_mat_operands.wgsl; WG_SIZE, ROWS, N_COLS (= n);
// USE_SUBGROUPS and MAX_SUBGROUPS (WG_SIZE / the smallest subgroup size).
#ifdef USE_SUBGROUPS
enable subgroups;
#endif

#define WG_SIZE 256u
#define ROWS 4u
#define N_COLS 1u
#define MAX_SUBGROUPS 32u

#include "mul_mat_operands.wgsl"

const RN: u32 = ROWS * N_COLS;

#ifdef USE_SUBGROUPS
var<workgroup> partial: array<f32, MAX_SUBGROUPS * RN>;
#else
var<workgroup> partial: array<f32, WG_SIZE>;
#endif

fn write_out(tile: Tile, row0: u32, i: u32, value: f32) {
    let row = row0 + i / N_COLS;
    let col = i % N_COLS;
    if (row < params.m && col < params.n) {
        dst[tile.dst_base + col * params.m + row] = value;
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
#ifdef USE_SUBGROUPS
        @builtin(subgroup_invocation_id) sg_lane: u32,
        @builtin(subgroup_size) sg_size: u32,
#endif
) {
    let tile = tile_of(wid);
    if (!tile.valid) {
        return;
    }
    let p = params;
    let row0 = tile.tm * ROWS;
    var rows: array<u32, ROWS>;
    for (var r = 0u; r < ROWS; r += 1u) {
        rows[r] = tile.a_base + min(row0 + r, p.m - 1u) * p.a_nb1;
    }
    var cols: array<u32, N_COLS>;
    for (var j = 0u; j < N_COLS; j += 1u) {
        cols[j] = tile.b_base + min(j, p.n - 1u) * p.b_nb1;
    }
    var acc: array<f32, RN>;

#ifdef A_FLOAT
    let pairs = p.k / 2u;
    for (var q = lid; q < pairs; q += WG_SIZE) {
        let e = 2u * q;
        var bv: array<vec2<f32>, N_COLS>;
        for (var j = 0u; j < N_COLS; j += 1u) {
            bv[j] = b_pair(cols[j], e);
        }
        for (var r = 0u; r < ROWS; r += 1u) {
            let av = a_pair(rows[r], e);
            for (var j = 0u; j < N_COLS; j += 1u) {
                acc[r * N_COLS + j] += dot(av, bv[j]);
            }
        }
    }
    // An odd k leaves one element.
    if (lid == 0u && (p.k & 1u) != 0u) {
        let e = p.k - 1u;
        for (var r = 0u; r < ROWS; r += 1u) {
            let av = a_elem(rows[r], e);
            for (var j = 0u; j < N_COLS; j += 1u) {
                acc[r * N_COLS + j] += av * b_elem(cols[j], e);
            }
        }
    }
#else
    let per_block = a_block / 8u;
    let units = p.k / 8u;
    for (var q = lid; q < units; q += WG_SIZE) {
        let blk = q / per_block;
        let t = q % per_block;
        let e = blk * a_block + a_vec_pos(t);
        var bv: array<vec4<f32>, 2u * N_COLS>;
        for (var j = 0u; j < N_COLS; j += 1u) {
            bv[2u * j] = b_vec4(cols[j], e.x);
            bv[2u * j + 1u] = b_vec4(cols[j], e.y);
        }
        for (var r = 0u; r < ROWS; r += 1u) {
            let w = a_vec8(rows[r] + blk * a_block_bytes, t);
            for (var j = 0u; j < N_COLS; j += 1u) {
                acc[r * N_COLS + j] += dot(w[0], bv[2u * j]) + dot(w[1], bv[2u * j + 1u]);
            }
        }
    }
#endif

#ifdef USE_SUBGROUPS
    // Subgroups are taken to be consecutive runs of invocations, as on every Vulkan driver.
    let sg = lid / sg_size;
    for (var i = 0u; i < RN; i += 1u) {
        let s = subgroupAdd(acc[i]);
        if (sg_lane == 0u) {
            partial[sg * RN + i] = s;
        }
    }
    workgroupBarrier();
    if (lid < RN) {
        let count = (WG_SIZE + sg_size - 1u) / sg_size;
        var s = 0.0;
        for (var g = 0u; g < count; g += 1u) {
            s += partial[g * RN + lid];
        }
        write_out(tile, row0, lid, s);
    }
#else
    for (var i = 0u; i < RN; i += 1u) {
        partial[lid] = acc[i];
        workgroupBarrier();
        for (var stride = WG_SIZE / 2u; stride > 0u; stride /= 2u) {
            if (lid < stride) {
                partial[lid] += partial[lid + stride];
            }
            workgroupBarrier();
        }
        if (lid == 0u) {
            write_out(tile, row0, i, partial[0]);
        }
        workgroupBarrier();
    }
#endif
}
