// MUL_MAT of an f16 a by a few columns of b on subgroup matrices (Path::VecMma): a memory-bound
// mat-vec whose arithmetic is one multiply-accumulate per K step of SG_M rows × SG_N columns.
// The float mat-vec re-reads each column of b from cache for every row it multiplies; here one
// right matrix of b serves SG_M rows.
//
// A workgroup owns ROWS = FRAG_M · SG_M rows of one dst matrix and all its columns (n <= SG_N),
// and walks k in rounds of SPLIT · UNROLL K steps (SG_K elements each): in a round, subgroup s
// multiplies the round's s-th run of UNROLL steps, so the SPLIT subgroups split k between them
// and their partial results meet in workgroup memory at the end. Every round the whole
// workgroup stages the round's piece of a (ROWS rows × SPLIT · UNROLL · SG_K halves, each row
// one contiguous run read as 16-byte words) and of b (n columns, converted to f16) into
// workgroup memory, the loads of the round DEPTH rounds on issued before this round's
// multiplies (DEPTH register sets, taking turns). (Left
// matrices loaded straight from a's binding measured 2x slower than the float mat-vec on an
// H100: the driver reads them in small pieces.)
//
// Staging units are 16-byte words of 8 halves, the offsets and strides of the matrix loads
// count them. Each run of UNROLL steps (CH words a row) is padded by one word, so the 8 rows a
// matrix load reads at once fall in different banks. Rows past m, columns past n and K steps
// past k are staged as zeros, without loads.
//
// Defines: the operand defines of mul_mat_operands.wgsl (A_VEC4 from the plan), SG_M, SG_N, SG_K
// (the config, f32 results; SG_K a multiple of 8), SPLIT, FRAG_M, UNROLL, DEPTH, WG_SIZE (SPLIT · the
// largest subgroup size; where subgroups come out smaller, the extra ones only stage and sum).
diagnostic(off, chromium.subgroup_matrix_uniformity);
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;

#define SG_M 8u
#define SG_N 8u
#define SG_K 8u
#define SPLIT 4u
#define FRAG_M 1u
#define UNROLL 4u
#define DEPTH 1u
#define WG_SIZE 128u

#include "mul_mat_operands.wgsl"

alias Left = subgroup_matrix_left<f16, SG_K, SG_M>;
alias Right = subgroup_matrix_right<f16, SG_N, SG_K>;
alias Result = subgroup_matrix_result<f32, SG_N, SG_M>;

#define ROWS (FRAG_M * SG_M)
// Words of one subgroup's run along a row (or a column of b), and the padded stride.
#define CH (UNROLL * SG_K / 8u)
#define LDS (CH + 1u)
// Words of a round along a row: every subgroup's run, adjacent in memory.
#define ROUND_WORDS (SPLIT * CH)
#define A_UNITS (ROWS * ROUND_WORDS)
#define B_UNITS (SG_N * ROUND_WORDS)
#define A_PER_THREAD ((A_UNITS + WG_SIZE - 1u) / WG_SIZE)
#define B_PER_THREAD ((B_UNITS + WG_SIZE - 1u) / WG_SIZE)

const A_SUB: u32 = ROWS * LDS;
const B_SUB: u32 = SG_N * LDS;
const B_OFF: u32 = SPLIT * A_SUB;
const FRAG_ELEMS: u32 = SG_M * SG_N;

var<workgroup> stage: array<vec4<u32>, SPLIT * (A_SUB + B_SUB)>;
// Each computing subgroup's FRAG_M results, column-major SG_M x SG_N, one after another.
var<workgroup> partial: array<f32, SPLIT * FRAG_M * FRAG_ELEMS>;

// Unit i of a round: row (or column) i / ROUND_WORDS, word i % ROUND_WORDS of the round, which
// lies in subgroup (i % ROUND_WORDS) / CH's run; its place in that subgroup's staging.
fn stage_slot(i: u32, sub_words: u32) -> u32 {
    let w = i % ROUND_WORDS;
    return (w / CH) * sub_words + (i / ROUND_WORDS) * LDS + w % CH;
}

// Unit i of round r of a (zero past m or k).
fn fetch_a(tile: Tile, row0: u32, r: u32, i: u32) -> vec4<u32> {
    let p = params;
    let row = row0 + i / ROUND_WORDS;
    let w = r * ROUND_WORDS + i % ROUND_WORDS;
    if (i >= A_UNITS || row >= p.m || w >= p.k / 8u) {
        return vec4<u32>(0u);
    }
    return a4[(tile.a_base + row * p.a_nb1) / 16u + w];
}

// Unit i of round r of b as halves (zero past k; columns past n are never read).
fn fetch_b(tile: Tile, r: u32, i: u32) -> vec4<u32> {
    let p = params;
    let col = i / ROUND_WORDS;
    let e = 8u * (r * ROUND_WORDS + i % ROUND_WORDS);
    if (i >= B_UNITS || col >= p.n || e >= p.k) {
        return vec4<u32>(0u);
    }
    let row = tile.b_base + col * p.b_nb1;
    let lo = b_vec4(row, e);
    let hi = b_vec4(row, e + 4u);
    return vec4<u32>(pack2x16float(lo.xy), pack2x16float(lo.zw), pack2x16float(hi.xy), pack2x16float(hi.zw));
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_size) sg_size: u32) {
    let tile = tile_of(wid);
    if (!tile.valid) {
        return;
    }
    let p = params;
    let row0 = tile.tm * ROWS;
    // Subgroups are taken to be consecutive runs of invocations, as on every Vulkan driver.
    let sg = lid / sg_size;
    let rounds = (p.k / SG_K + SPLIT * UNROLL - 1u) / (SPLIT * UNROLL);
#for I in 0..FRAG_M
    var acc_##I = Result();
#endfor
#for PH in 0..DEPTH
#for T in 0..A_PER_THREAD
    var ra_##PH##_##T = fetch_a(tile, row0, PH##u, lid + T##u * WG_SIZE);
#endfor
#for T in 0..B_PER_THREAD
    var rb_##PH##_##T = fetch_b(tile, PH##u, lid + T##u * WG_SIZE);
#endfor
#endfor
    for (var r = 0u; r < rounds; r += DEPTH) {
#for PH in 0..DEPTH
        if (r + PH##u < rounds) {
#for T in 0..A_PER_THREAD
            if (lid + T##u * WG_SIZE < A_UNITS) {
                stage[stage_slot(lid + T##u * WG_SIZE, A_SUB)] = ra_##PH##_##T;
            }
#endfor
#for T in 0..B_PER_THREAD
            if (lid + T##u * WG_SIZE < B_UNITS) {
                stage[B_OFF + stage_slot(lid + T##u * WG_SIZE, B_SUB)] = rb_##PH##_##T;
            }
#endfor
            workgroupBarrier();
            let next = r + PH##u + DEPTH;
            if (next < rounds) {
#for T in 0..A_PER_THREAD
                ra_##PH##_##T = fetch_a(tile, row0, next, lid + T##u * WG_SIZE);
#endfor
#for T in 0..B_PER_THREAD
                rb_##PH##_##T = fetch_b(tile, next, lid + T##u * WG_SIZE);
#endfor
            }
            if (sg < SPLIT) {
#for U in 0..UNROLL
                {
                    let right = subgroupMatrixLoad<Right, col_major>(&stage, B_OFF + sg * B_SUB + U##u * (SG_K / 8u), LDS);
#for I in 0..FRAG_M
                    acc_##I = subgroupMatrixMultiplyAccumulate(
                        subgroupMatrixLoad<Left, row_major>(&stage, sg * A_SUB + I##u * SG_M * LDS + U##u * (SG_K / 8u), LDS),
                        right, acc_##I);
#endfor
                }
#endfor
            }
            workgroupBarrier();
        }
#endfor
    }
    if (sg < SPLIT) {
#for I in 0..FRAG_M
        subgroupMatrixStore<col_major>(&partial, (sg * FRAG_M + I##u) * FRAG_ELEMS, acc_##I, SG_M);
#endfor
    }
    workgroupBarrier();
    // Element e of the FRAG_M results: result e / FRAG_ELEMS, column-major within it.
    for (var e = lid; e < FRAG_M * FRAG_ELEMS; e += WG_SIZE) {
        let col = (e % FRAG_ELEMS) / SG_M;
        let row = row0 + (e / FRAG_ELEMS) * SG_M + e % SG_M;
        if (col < p.n && row < p.m) {
            var sum = 0.0;
            for (var j = 0u; j < SPLIT; j += 1u) {
                sum += partial[j * FRAG_M * FRAG_ELEMS + e];
            }
            dst[tile.dst_base + col * p.m + row] = sum;
        }
    }
}
