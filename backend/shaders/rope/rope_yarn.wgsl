// ggml's angle of a rotated pair, shared by ROPE's kernel (rope.wgsl) and the mat-vec that
// ropes its result rows (mul_mat_vec.wgsl with DST_ROPE), so the two compute the same bits.

// Pair k's angle from its position: ggml's running product `theta *= theta_scale`, k times
// in f32.
fn rope_theta(position: f32, k: u32, theta_scale: f32) -> f32 {
    var theta = position;
    for (var j = 0u; j < k; j++) {
        theta *= theta_scale;
    }
    return theta;
}

// ggml's rope_yarn for pair k: `extrap` is its angle divided by its frequency factor; returns
// cos and sin times the magnitude, after a two-constant reduction of the angle to [-pi, pi].
fn rope_yarn(extrap: f32, k: u32, freq_scale: f32, ext_factor: f32, attn_factor: f32, corr0: f32, corr1: f32,
             mscale_ext: f32) -> vec2<f32> {
    let interp = freq_scale * extrap;
    var t = interp;
    var mscale = attn_factor;
    if (ext_factor != 0.0) {
        let y = (f32(k) - corr0) / max(0.001, corr1 - corr0);
        let ramp = 1.0 - min(1.0, max(0.0, y));
        let mix = ramp * ext_factor;
        t = interp * (1.0 - mix) + extrap * mix;
        mscale *= mscale_ext;
    }
    // t − n·2π in two steps (6.28125 has 8 significant bits: n·C1 is exact).
    let n = round(t * 0.15915494);
    let r = (t - n * 6.28125) - n * 0.0019353071795864769;
    return vec2<f32>(cos(r), sin(r)) * mscale;
}
