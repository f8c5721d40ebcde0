// Reductions over the group of GROUP_SIZE consecutive threads that share one row, in a
// workgroup of WG_SIZE threads (ROWS_PER_WG groups). Every thread of the workgroup must call
// them, the same number of times (they hold barriers), whether or not its row exists.
//
// With USE_SUBGROUPS (the planner's choice: a group holds whole subgroups), a subgroup
// operation then one partial per subgroup in `red`; else a tree in `red`. Subgroups are taken to
// be consecutive runs of invocations, as on every Vulkan and Metal driver.

// The includer enables `subgroups` (with USE_SUBGROUPS) before it includes this file.

var<workgroup> red: array<u32, WG_SIZE>;

struct Lane {
    lid: u32,
    sg_lane: u32,
    sg_size: u32,
}

#ifdef USE_SUBGROUPS
// The partials of this thread's group after each subgroup wrote its own.
fn group_first_partial(l: Lane) -> u32 {
    return (l.lid / GROUP_SIZE) * (GROUP_SIZE / l.sg_size);
}

fn row_sum(v: f32, l: Lane) -> f32 {
    let s = subgroupAdd(v);
    workgroupBarrier();
    if (l.sg_lane == 0u) {
        red[l.lid / l.sg_size] = bitcast<u32>(s);
    }
    workgroupBarrier();
    let first = group_first_partial(l);
    var t = 0.0;
    for (var i = 0u; i < GROUP_SIZE / l.sg_size; i += 1u) {
        t += bitcast<f32>(red[first + i]);
    }
    return t;
}

fn row_max(v: f32, l: Lane) -> f32 {
    let s = subgroupMax(v);
    workgroupBarrier();
    if (l.sg_lane == 0u) {
        red[l.lid / l.sg_size] = bitcast<u32>(s);
    }
    workgroupBarrier();
    let first = group_first_partial(l);
    var t = bitcast<f32>(red[first]);
    for (var i = 1u; i < GROUP_SIZE / l.sg_size; i += 1u) {
        t = max(t, bitcast<f32>(red[first + i]));
    }
    return t;
}

fn row_max_u32(v: u32, l: Lane) -> u32 {
    let s = subgroupMax(v);
    workgroupBarrier();
    if (l.sg_lane == 0u) {
        red[l.lid / l.sg_size] = s;
    }
    workgroupBarrier();
    let first = group_first_partial(l);
    var t = red[first];
    for (var i = 1u; i < GROUP_SIZE / l.sg_size; i += 1u) {
        t = max(t, red[first + i]);
    }
    return t;
}
#else
fn row_sum(v: f32, l: Lane) -> f32 {
    let lane = l.lid % GROUP_SIZE;
    workgroupBarrier();
    red[l.lid] = bitcast<u32>(v);
    workgroupBarrier();
    for (var s = GROUP_SIZE / 2u; s > 0u; s = s / 2u) {
        if (lane < s) {
            red[l.lid] = bitcast<u32>(bitcast<f32>(red[l.lid]) + bitcast<f32>(red[l.lid + s]));
        }
        workgroupBarrier();
    }
    return bitcast<f32>(red[l.lid - lane]);
}

fn row_max(v: f32, l: Lane) -> f32 {
    let lane = l.lid % GROUP_SIZE;
    workgroupBarrier();
    red[l.lid] = bitcast<u32>(v);
    workgroupBarrier();
    for (var s = GROUP_SIZE / 2u; s > 0u; s = s / 2u) {
        if (lane < s) {
            red[l.lid] = bitcast<u32>(max(bitcast<f32>(red[l.lid]), bitcast<f32>(red[l.lid + s])));
        }
        workgroupBarrier();
    }
    return bitcast<f32>(red[l.lid - lane]);
}

fn row_max_u32(v: u32, l: Lane) -> u32 {
    let lane = l.lid % GROUP_SIZE;
    workgroupBarrier();
    red[l.lid] = v;
    workgroupBarrier();
    for (var s = GROUP_SIZE / 2u; s > 0u; s = s / 2u) {
        if (lane < s) {
            red[l.lid] = max(red[l.lid], red[l.lid + s]);
        }
        workgroupBarrier();
    }
    return red[l.lid - lane];
}
#endif

// The row of this thread's group, and its lane in the group.
fn row_of(wid: vec3<u32>, groups_x: u32, lid: u32) -> u32 {
    return (wid.y * groups_x + wid.x) * (WG_SIZE / GROUP_SIZE) + lid / GROUP_SIZE;
}
