// A column's RMS_NORM scale for the kernels that norm b as they quantize it (mul_mat_vec.wgsl
// with B_Q8_WG, mul_mat_quantize_b.wgsl), summing its squares as RMS_NORM's kernel sums them
// (rms_norm.wgsl with row_reduce.wgsl's row_sum): NORM_GROUP threads a column, in 16-byte
// units with NORM_VEC4, reduced with subgroup operations with NORM_SUBGROUPS, else by a tree;
// the workgroup's threads past the group add nothing. So the scale, and each value b takes,
// are RMS_NORM's to the bit.
//
// Needs: mul_mat_operands.wgsl with B_RMS_NORM (norm_x4, norm_x1, norm_col, the norm
// bindings), WG_SIZE >= NORM_GROUP.
#ifdef NORM_VEC4
alias NormV = vec4<f32>;
fn norm_hsum(v: NormV) -> f32 {
    return (v.x + v.y) + (v.z + v.w);
}
#else
alias NormV = f32;
fn norm_hsum(v: NormV) -> f32 {
    return v;
}
#endif
var<workgroup> norm_red: array<f32, WG_SIZE>;

// Unit u of the norm's input in the column at byte `row` (and, with B_NORM_RESIDUAL and
// `store`, stored to norm_sum).
fn norm_unit(row: u32, u: u32, store: bool) -> NormV {
#ifdef NORM_VEC4
    let v = norm_x4(row, 4u * u);
#ifdef B_NORM_RESIDUAL
    if (store) {
        let s = params.norm_sum_start + norm_col * params.norm_sum_nb1 + 4u * u;
        norm_sum[s] = v.x;
        norm_sum[s + 1u] = v.y;
        norm_sum[s + 2u] = v.z;
        norm_sum[s + 3u] = v.w;
    }
#endif
#else
    let v = norm_x1(row, u);
#ifdef B_NORM_RESIDUAL
    if (store) {
        norm_sum[params.norm_sum_start + norm_col * params.norm_sum_nb1 + u] = v;
    }
#endif
#endif
    return v;
}

// row_reduce.wgsl's row_sum for a group of the workgroup's first NORM_GROUP threads.
fn norm_row_sum(v: f32, lid: u32, sg_lane: u32, sg_size: u32) -> f32 {
#ifdef NORM_SUBGROUPS
    let s = subgroupAdd(v);
    workgroupBarrier();
    if (sg_lane == 0u) {
        norm_red[lid / sg_size] = s;
    }
    workgroupBarrier();
    var t = 0.0;
    for (var i = 0u; i < NORM_GROUP / sg_size; i += 1u) {
        t += norm_red[i];
    }
    return t;
#else
    workgroupBarrier();
    norm_red[lid] = v;
    workgroupBarrier();
    for (var s = NORM_GROUP / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            norm_red[lid] = norm_red[lid] + norm_red[lid + s];
        }
        workgroupBarrier();
    }
    return norm_red[0];
#endif
}

// 1/sqrt(mean(x²) + eps) of the column at byte `row` (`norm_col` set to its index), returned
// to every thread (every thread calls it); with `store`, the residual sum stored too.
fn norm_column_scale(row: u32, lid: u32, store: bool, sg_lane: u32, sg_size: u32) -> f32 {
#ifdef NORM_VEC4
    let units = params.k / 4u;
#else
    let units = params.k;
#endif
    var acc = NormV(0.0);
    if (lid < NORM_GROUP) {
        for (var u = lid; u < units; u += NORM_GROUP) {
            let v = norm_unit(row, u, store);
            acc += v * v;
        }
    }
    let sum = norm_row_sum(norm_hsum(acc), lid, sg_lane, sg_size);
    return 1.0 / sqrt(sum / f32(params.k) + params.norm_eps);
}
