// Staging the tiles of the mat-mat kernels: per K step, TM rows of a and TN rows of b (TK
// elements each) go from global memory through registers into workgroup memory, zero-filled
// past m, n and k. `fetch_*` issues the reads (and dequantizes), `put_*` stores, so that a
// kernel can compute on one buffer while the next step's reads are in flight.
//
// The includer defines the consts TM, TN, TK, WG_SIZE and the functions
//   store_a(buf: u32, row: u32, kk: u32, v: f32)   (row < TM, kk < TK)
//   store_b(buf: u32, col: u32, kk: u32, v: f32)   (col < TN)
// Consecutive threads take consecutive units of a row (a pair of float elements, so that a
// warp reads consecutive words, or 8 elements of a quantized block), then the next row.
//
// Bytes touched: rows of a below m and columns of b below n, elements below k (whole blocks),
// as mul_mat_operands.wgsl states; the rest of a tile is zero-filled, not read.

#ifdef A_FLOAT
const A_UNIT: u32 = 2u;
#else
const A_UNIT: u32 = 8u;
#endif
const A_UNITS_PER_ROW: u32 = TK / A_UNIT;
const A_UNITS: u32 = TM * A_UNITS_PER_ROW;
const A_PER_THREAD: u32 = (A_UNITS + WG_SIZE - 1u) / WG_SIZE;
const B_UNITS_PER_ROW: u32 = TK / 2u;
const B_UNITS: u32 = TN * B_UNITS_PER_ROW;
const B_PER_THREAD: u32 = (B_UNITS + WG_SIZE - 1u) / WG_SIZE;

#ifdef A_FLOAT
alias AFetch = array<vec2<f32>, A_PER_THREAD>;
#else
alias AFetch = array<array<vec4<f32>, 2>, A_PER_THREAD>;
#endif
alias BFetch = array<vec2<f32>, B_PER_THREAD>;

fn fetch_a(tile: Tile, m0: u32, k0: u32, lid: u32) -> AFetch {
    let p = params;
    var out: AFetch;
    for (var t = 0u; t < A_PER_THREAD; t += 1u) {
        let u = lid + t * WG_SIZE;
        let gm = m0 + u / A_UNITS_PER_ROW;
        let e = k0 + (u % A_UNITS_PER_ROW) * A_UNIT;
        let row = tile.a_base + min(gm, p.m - 1u) * p.a_nb1;
        if (u < A_UNITS && gm < p.m && e < p.k) {
#ifdef A_FLOAT
            if (e + 1u < p.k) {
                out[t] = a_pair(row, e);
            } else {
                out[t] = vec2<f32>(a_elem(row, e), 0.0);
            }
#else
            out[t] = a_unit8(row, e);
#endif
        }
    }
    return out;
}

fn put_a(v: AFetch, lid: u32, buf: u32) {
    for (var t = 0u; t < A_PER_THREAD; t += 1u) {
        let u = lid + t * WG_SIZE;
        if (u < A_UNITS) {
            let row = u / A_UNITS_PER_ROW;
            let kk = (u % A_UNITS_PER_ROW) * A_UNIT;
#ifdef A_FLOAT
            store_a(buf, row, kk, v[t].x);
            store_a(buf, row, kk + 1u, v[t].y);
#else
            for (var i = 0u; i < 4u; i += 1u) {
                store_a(buf, row, kk + i, v[t][0][i]);
                store_a(buf, row, kk + 4u + i, v[t][1][i]);
            }
#endif
        }
    }
}

fn fetch_b(tile: Tile, n0: u32, k0: u32, lid: u32) -> BFetch {
    let p = params;
    var out: BFetch;
    for (var t = 0u; t < B_PER_THREAD; t += 1u) {
        let u = lid + t * WG_SIZE;
        let gn = n0 + u / B_UNITS_PER_ROW;
        let e = k0 + (u % B_UNITS_PER_ROW) * 2u;
        let row = tile.b_base + min(gn, p.n - 1u) * p.b_nb1;
        if (u < B_UNITS && gn < p.n && e < p.k) {
            if (e + 1u < p.k) {
                out[t] = b_pair(row, e);
            } else {
                out[t] = vec2<f32>(b_elem(row, e), 0.0);
            }
        }
    }
    return out;
}

fn put_b(v: BFetch, lid: u32, buf: u32) {
    for (var t = 0u; t < B_PER_THREAD; t += 1u) {
        let u = lid + t * WG_SIZE;
        if (u < B_UNITS) {
            let col = u / B_UNITS_PER_ROW;
            let kk = (u % B_UNITS_PER_ROW) * 2u;
            store_b(buf, col, kk, v[t].x);
            store_b(buf, col, kk + 1u, v[t].y);
        }
    }
}
