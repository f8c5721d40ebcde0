//! ROPE on the CPU: ggml's rotary position embedding, in its normal, NeoX and multi-section
//! (M-RoPE, interleaved M-RoPE, vision) layouts, with frequency factors and YaRN's scaling.
//!
//! The angles and products are computed in f32 in ggml's CPU order (the running
//! `theta *= theta_scale`, `cosf`/`sinf`, the YaRN ramp with C's `MIN`/`MAX`), so the reference
//! agrees with ggml's CPU to the rounding of each product.

use std::fmt;

use super::elements::{finite, index, round_to};
use super::{Result, row, shape_error};
use crate::ggml_type::GgmlType;
use crate::tensor::HostTensor;

const OP: &str = "ROPE";

/// How ROPE pairs the rotated elements (ggml's `GGML_ROPE_TYPE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RopeMode {
    /// Adjacent pairs `(2i, 2i+1)` (`0`).
    Normal,
    /// Halves: `(i, i + n_dims/2)` (`2`, GPT-NeoX).
    Neox,
    /// NeoX pairs with up to four position sections (`8`, Qwen2-VL's M-RoPE).
    Mrope,
    /// Like M-RoPE with each section's angle restarting from its base; pairs `(i, i + n_dims)`
    /// over the whole row, `n_dims = ne0/2` (`24`).
    Vision,
    /// M-RoPE with the sections interleaved (`40`, Qwen3-VL).
    Imrope,
}

impl RopeMode {
    /// The mode of ggml's `mode` number.
    pub fn from_ggml(mode: i32) -> Option<RopeMode> {
        Some(match mode {
            0 => RopeMode::Normal,
            2 => RopeMode::Neox,
            8 => RopeMode::Mrope,
            24 => RopeMode::Vision,
            40 => RopeMode::Imrope,
            _ => return None,
        })
    }

    /// ggml's `mode` number.
    pub fn ggml(self) -> i32 {
        match self {
            RopeMode::Normal => 0,
            RopeMode::Neox => 2,
            RopeMode::Mrope => 8,
            RopeMode::Vision => 24,
            RopeMode::Imrope => 40,
        }
    }

    /// Whether positions come in four sections (`4·ne2` of them).
    pub fn is_multi(self) -> bool {
        matches!(self, RopeMode::Mrope | RopeMode::Vision | RopeMode::Imrope)
    }
}

impl fmt::Display for RopeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.ggml())
    }
}

/// The parameters of ROPE (those of ggml's `ggml_rope_ext` / `ggml_rope_multi`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeParams {
    /// Rotated elements per row (even).
    pub n_dims: usize,
    pub mode: RopeMode,
    /// The context length the model was trained on (YaRN's correction range).
    pub n_ctx_orig: i32,
    pub freq_base: f32,
    pub freq_scale: f32,
    /// YaRN's extrapolation mix (0: none).
    pub ext_factor: f32,
    /// Scales cos and sin (YaRN's magnitude).
    pub attn_factor: f32,
    pub beta_fast: f32,
    pub beta_slow: f32,
    /// Pairs per position section (multi-section modes only).
    pub sections: [usize; 4],
    /// First rotated element (ggml's `ggml_rope_set_offset`; even, not for vision).
    pub n_offs: usize,
}

impl RopeParams {
    /// ggml's `ggml_rope` defaults: base 10000, no scaling, no YaRN, attention factor 1.
    pub fn new(n_dims: usize, mode: RopeMode) -> RopeParams {
        RopeParams {
            n_dims,
            mode,
            n_ctx_orig: 0,
            freq_base: 10000.0,
            freq_scale: 1.0,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 0.0,
            beta_slow: 0.0,
            sections: [0; 4],
            n_offs: 0,
        }
    }

    fn check(&self, ne0: usize) -> Result<()> {
        for (name, v) in [
            ("freq_base", self.freq_base),
            ("freq_scale", self.freq_scale),
            ("ext_factor", self.ext_factor),
            ("attn_factor", self.attn_factor),
            ("beta_fast", self.beta_fast),
            ("beta_slow", self.beta_slow),
        ] {
            finite(OP, name, v)?;
        }
        if self.freq_base <= 0.0 || self.freq_scale <= 0.0 {
            return shape_error(OP, "freq_base and freq_scale must be positive");
        }
        let n_dims = self.n_dims;
        if n_dims == 0 || !n_dims.is_multiple_of(2) || !self.n_offs.is_multiple_of(2) {
            return shape_error(
                OP,
                format!(
                    "n_dims = {n_dims} and n_offs = {} must be even, n_dims > 0",
                    self.n_offs
                ),
            );
        }
        if n_dims.checked_add(self.n_offs).is_none_or(|end| end > ne0) {
            return shape_error(
                OP,
                format!("n_offs + n_dims = {} + {n_dims} exceed the row of {ne0}", self.n_offs),
            );
        }
        if self.mode.is_multi() {
            let total: usize = self.sections.iter().sum();
            if self.sections[..3].iter().all(|&s| s == 0) || total > ne0 {
                return shape_error(OP, format!("sections {:?} do not fit rows of {ne0}", self.sections));
            }
        }
        if self.mode == RopeMode::Vision && (n_dims * 2 != ne0 || self.n_offs != 0) {
            return shape_error(
                OP,
                format!("vision needs n_dims = ne0/2 ({ne0}/2) and n_offs = 0, not {n_dims}"),
            );
        }
        Ok(())
    }
}

// C's MAX and MIN, NaN handling included.
fn c_max(a: f32, b: f32) -> f32 {
    if a > b { a } else { b }
}
fn c_min(a: f32, b: f32) -> f32 {
    if a < b { a } else { b }
}

/// YaRN's correction range `[start, end]` in rotated dims (`ggml_rope_yarn_corr_dims`).
fn yarn_corr_dims(n_dims: usize, n_ctx_orig: i32, freq_base: f32, beta_fast: f32, beta_slow: f32) -> [f32; 2] {
    let corr_dim = |n_rot: f32| {
        n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln() / (2.0 * freq_base.ln())
    };
    let start = corr_dim(beta_fast).floor();
    let end = corr_dim(beta_slow).ceil();
    [c_max(0.0, start), c_min((n_dims - 1) as f32, end)]
}

/// cos and sin of one pair's angle, scaled, as ggml's `rope_yarn`.
fn yarn(theta_extrap: f32, p: &RopeParams, corr: [f32; 2], i0: usize) -> (f32, f32) {
    let theta_interp = p.freq_scale * theta_extrap;
    let mut theta = theta_interp;
    let mut mscale = p.attn_factor;
    if p.ext_factor != 0.0 {
        let y = ((i0 / 2) as f32 - corr[0]) / c_max(0.001, corr[1] - corr[0]);
        let ramp = 1.0 - c_min(1.0, c_max(0.0, y));
        let mix = ramp * p.ext_factor;
        theta = theta_interp * (1.0 - mix) + theta_extrap * mix;
        mscale *= 1.0 + 0.1 * (1.0 / p.freq_scale).ln();
    }
    (theta.cos() * mscale, theta.sin() * mscale)
}

/// cos and sin for pairs `0, 2, …, n − 2` of a row at positions `pos` (one, or four sections).
fn angle_cache(p: &RopeParams, pos: [f32; 4], ff: Option<&[f32]>, corr: [f32; 2], n: usize) -> Vec<(f32, f32)> {
    let theta_scale = p.freq_base.powf(-2.0 / p.n_dims as f32);
    let s = p.sections;
    let (sec_w, sect_dims) = (s[0] + s[1], s.iter().sum::<usize>());
    let sec_e = s[2] + sec_w;
    let mut theta = pos;
    let mut out = Vec::with_capacity(n / 2);
    for i0 in (0..n).step_by(2) {
        let base = if p.mode.is_multi() {
            let sector = (i0 / 2) % sect_dims;
            if p.mode == RopeMode::Vision {
                // Each section's angle restarts at its position (the first section that starts
                // here, as ggml's else-if chain).
                if let Some(k) = [0, s[0], sec_w, sec_e].iter().position(|&start| sector == start) {
                    theta[k] = pos[k];
                }
            }
            let section = if p.mode == RopeMode::Imrope {
                if sector % 3 == 1 && sector < 3 * s[1] {
                    1
                } else if sector % 3 == 2 && sector < 3 * s[2] {
                    2
                } else if sector % 3 == 0 && sector < 3 * s[0] {
                    0
                } else {
                    3
                }
            } else if sector >= s[0] && sector < sec_w {
                1
            } else if sector >= sec_w && sector < sec_w + s[2] {
                2
            } else if sector >= sec_w + s[2] {
                3
            } else {
                0
            };
            theta[section]
        } else {
            theta[0]
        };
        let factor = ff.map_or(1.0, |f| f[i0 / 2]);
        out.push(yarn(base / factor, p, corr, i0));
        for t in &mut theta {
            *t *= theta_scale;
        }
    }
    out
}

/// ggml's ROPE (forward) of `x` (f32 or f16 `[ne0, heads, tokens, seqs]`, rows of any layout) at
/// the i32 positions `pos` (`tokens` of them, or `4·tokens` for the multi-section modes: section
/// `k` of token `t` at `pos[t + k·tokens]`), with optional f32 frequency factors (one per
/// rotated pair, dividing that pair's angle).
///
/// Pair `i` (of `n_dims/2`) turns by `θ_i = pos · base^(−2i/n_dims) / ff_i`, scaled by YaRN as
/// ggml's `rope_yarn`: `x0' = x0·cos − x1·sin`, `x1' = x0·sin + x1·cos`, both times the attention
/// factor. The pairs are `(j, j+1)` for [`RopeMode::Normal`] and `(j, j + n_dims/2)` otherwise
/// (`(j, j + n_dims)` over the whole row for vision), starting `n_offs` elements in; the other
/// elements are copied. Rounded to `x`'s type; the result is contiguous with `x`'s extents.
pub fn rope(
    x: &HostTensor,
    pos: &HostTensor,
    freq_factors: Option<&HostTensor>,
    params: &RopeParams,
) -> Result<Vec<f32>> {
    let ty = x.layout.ty;
    if !matches!(ty, GgmlType::F32 | GgmlType::F16) {
        return shape_error(OP, format!("x must be f32 or f16, not {ty}"));
    }
    let [ne0, ne1, ne2, ne3] = x.layout.ne;
    params.check(ne0)?;
    if pos.layout.ty != GgmlType::I32 {
        return shape_error(OP, format!("pos must be i32, not {}", pos.layout.ty));
    }
    let sections = if params.mode.is_multi() { 4 } else { 1 };
    let needed = ne2.saturating_mul(sections);
    if pos.layout.ne[1..] != [1, 1, 1] || pos.layout.ne[0] < needed {
        return shape_error(
            OP,
            format!("pos {:?} is not a vector of {needed} positions", pos.layout.ne),
        );
    }
    // Pairs whose angles are computed: the rotated ones.
    let n = if params.mode == RopeMode::Vision {
        ne0
    } else {
        params.n_dims
    };
    let ff = match freq_factors {
        Some(f) => {
            if f.layout.ty != GgmlType::F32 {
                return shape_error(OP, format!("freq_factors must be f32, not {}", f.layout.ty));
            }
            let v = row(OP, "freq_factors", f, 0, 0, 0)?;
            if v.len() < n / 2 {
                return shape_error(OP, format!("{} freq_factors for {} rotated pairs", v.len(), n / 2));
            }
            Some(v)
        }
        None => None,
    };
    let corr = yarn_corr_dims(
        params.n_dims,
        params.n_ctx_orig,
        params.freq_base,
        params.beta_fast,
        params.beta_slow,
    );
    let mut out = Vec::with_capacity(x.layout.elements());
    for i3 in 0..ne3 {
        for i2 in 0..ne2 {
            let mut p = [0.0f32; 4];
            for (k, slot) in p.iter_mut().enumerate().take(sections) {
                *slot = index(OP, "pos", pos, [i2 + k * ne2, 0, 0, 0])? as f32;
            }
            let cache = angle_cache(params, p, ff.as_deref(), corr, n);
            for i1 in 0..ne1 {
                let src = row(OP, "x", x, i1, i2, i3)?;
                let mut dst = src.clone();
                let (scale, offset) = match params.mode {
                    RopeMode::Normal => (1, 1),
                    RopeMode::Vision => (2, params.n_dims),
                    _ => (2, params.n_dims / 2),
                };
                let base = params.n_offs;
                for (k, &(cos, sin)) in cache.iter().enumerate() {
                    let ic = base + 2 * k / scale;
                    let (x0, x1) = (src[ic], src[ic + offset]);
                    dst[ic] = x0 * cos - x1 * sin;
                    dst[ic + offset] = x0 * sin + x1 * cos;
                }
                out.extend(dst.into_iter().map(|v| round_to(ty, v)));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::ReferenceError;

    fn f32_tensor(ne: [usize; 4], values: &[f32]) -> HostTensor {
        HostTensor::from_f32(GgmlType::F32, ne, values).unwrap()
    }

    fn positions(values: &[i32]) -> HostTensor {
        HostTensor {
            layout: crate::tensor::Layout::contiguous(GgmlType::I32, [values.len(), 1, 1, 1]).unwrap(),
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    fn close(got: &[f32], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((f64::from(*g) - w).abs() < 1e-5, "got {got:?}, want {want:?}");
        }
    }

    /// The angle of pair `i` at position `p` for base 10000 over `n_dims`.
    fn angle(p: f64, i: usize, n_dims: usize) -> f64 {
        p * 10000f64.powf(-2.0 * i as f64 / n_dims as f64)
    }

    #[test]
    fn normal_and_neox_pairings() {
        // One row of 4 ones at position 3, all 4 dims rotated.
        let x = f32_tensor([4, 1, 1, 1], &[1.0; 4]);
        let pos = positions(&[3]);
        let (a0, a1) = (angle(3.0, 0, 4), angle(3.0, 1, 4));
        let rot = |a: f64| [a.cos() - a.sin(), a.sin() + a.cos()];
        let normal = rope(&x, &pos, None, &RopeParams::new(4, RopeMode::Normal)).unwrap();
        close(&normal, &[rot(a0)[0], rot(a0)[1], rot(a1)[0], rot(a1)[1]]);
        // NeoX pairs (0, 2) and (1, 3).
        let neox = rope(&x, &pos, None, &RopeParams::new(4, RopeMode::Neox)).unwrap();
        close(&neox, &[rot(a0)[0], rot(a1)[0], rot(a0)[1], rot(a1)[1]]);
        // Position 0 leaves everything in place.
        let still = rope(&x, &positions(&[0]), None, &RopeParams::new(4, RopeMode::Neox)).unwrap();
        close(&still, &[1.0; 4]);
    }

    #[test]
    fn partial_rotation_offsets_factors_and_attn_factor() {
        // 6 elements, 2 rotated starting at element 2; the rest copied.
        let x = f32_tensor([6, 1, 1, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let pos = positions(&[1]);
        let mut p = RopeParams::new(2, RopeMode::Normal);
        p.n_offs = 2;
        p.attn_factor = 2.0;
        let ff = f32_tensor([1, 1, 1, 1], &[0.5]);
        let out = rope(&x, &pos, Some(&ff), &p).unwrap();
        // θ = 1 / 0.5 = 2; cos and sin scaled by 2.
        let (c, s) = (2.0 * 2f64.cos(), 2.0 * 2f64.sin());
        close(&out, &[1.0, 2.0, 3.0 * c - 4.0 * s, 3.0 * s + 4.0 * c, 5.0, 6.0]);
    }

    #[test]
    fn yarn_mixes_interpolation_and_extrapolation() {
        // n_dims 4, freq_scale 0.25, ext_factor 1, n_ctx_orig 0 (as upstream's cases): the
        // correction range is [0, −∞), so the ramp is 1 for pair 0 (pure extrapolation) and 0
        // for pair 1 (pure interpolation); both scaled by 1 + 0.1·ln 4.
        let x = f32_tensor([4, 1, 1, 1], &[1.0, 0.0, 1.0, 0.0]);
        let mut p = RopeParams::new(4, RopeMode::Normal);
        p.freq_scale = 0.25;
        p.ext_factor = 1.0;
        p.beta_fast = 1.0;
        p.beta_slow = 1.0;
        let out = rope(&x, &positions(&[5]), None, &p).unwrap();
        let m = 1.0 + 0.1 * 4f64.ln();
        let (t0, t1) = (angle(5.0, 0, 4), 0.25 * angle(5.0, 1, 4));
        close(&out, &[m * t0.cos(), m * t0.sin(), m * t1.cos(), m * t1.sin()]);
    }

    #[test]
    fn sections_take_their_positions() {
        // M-RoPE, n_dims 8 (4 pairs), sections [2, 1, 1, 0]: pairs 0-1 use position t, pair 2
        // h, pair 3 w; each at its own frequency index. One token: positions t, h, w, e.
        let x = f32_tensor([8, 1, 1, 1], &[1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
        let pos = positions(&[1, 2, 3, 4]);
        let mut p = RopeParams::new(8, RopeMode::Mrope);
        p.sections = [2, 1, 1, 0];
        let out = rope(&x, &pos, None, &p).unwrap();
        let angles = [angle(1.0, 0, 8), angle(1.0, 1, 8), angle(2.0, 2, 8), angle(3.0, 3, 8)];
        let mut want: Vec<f64> = angles.iter().map(|a| a.cos()).collect();
        want.extend(angles.iter().map(|a| a.sin()));
        close(&out, &want);
        // Interleaved: pair k takes section k mod 3 (t, h, w, t).
        p.mode = RopeMode::Imrope;
        p.sections = [2, 1, 1, 0];
        let out = rope(&x, &pos, None, &p).unwrap();
        let angles = [angle(1.0, 0, 8), angle(2.0, 1, 8), angle(3.0, 2, 8), angle(1.0, 3, 8)];
        let mut want: Vec<f64> = angles.iter().map(|a| a.cos()).collect();
        want.extend(angles.iter().map(|a| a.sin()));
        close(&out, &want);
    }

    #[test]
    fn vision_restarts_each_section() {
        // ne0 8, n_dims 4, sections [1, 1, 0, 0]: pair 0 at position t with frequency index 0,
        // pair 1 at h restarting at index 0; pairs (j, j + 4) over the row.
        let x = f32_tensor([8, 1, 1, 1], &[1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
        let mut p = RopeParams::new(4, RopeMode::Vision);
        p.sections = [1, 1, 0, 0];
        let out = rope(&x, &positions(&[2, 3, 0, 0]), None, &p).unwrap();
        // The sectors repeat every 2 pairs, and each restarts its angle: pairs 2, 3 as 0, 1.
        let a = [angle(2.0, 0, 4), angle(3.0, 0, 4), angle(2.0, 0, 4), angle(3.0, 0, 4)];
        let mut want: Vec<f64> = a.iter().map(|v| v.cos()).collect();
        want.extend(a.iter().map(|v| v.sin()));
        close(&out, &want);
    }

    #[test]
    fn f16_results_are_rounded_and_bad_parameters_refused() {
        let x = HostTensor::from_f32(GgmlType::F16, [2, 1, 1, 1], &[1.0, 0.0]).unwrap();
        let out = rope(&x, &positions(&[1]), None, &RopeParams::new(2, RopeMode::Normal)).unwrap();
        assert_eq!(out[0], half::f16::from_f32(1f32.cos()).to_f32());
        let y = f32_tensor([4, 1, 1, 1], &[0.0; 4]);
        let pos = positions(&[0]);
        let bad = |p: RopeParams| matches!(rope(&y, &pos, None, &p), Err(ReferenceError::Shape { .. }));
        assert!(bad(RopeParams::new(3, RopeMode::Normal)));
        assert!(bad(RopeParams::new(6, RopeMode::Normal)));
        assert!(bad(RopeParams {
            freq_base: f32::NAN,
            ..RopeParams::new(4, RopeMode::Normal)
        }));
        assert!(bad(RopeParams {
            ext_factor: f32::INFINITY,
            ..RopeParams::new(4, RopeMode::Normal)
        }));
        assert!(bad(RopeParams {
            n_offs: 2,
            ..RopeParams::new(4, RopeMode::Normal)
        }));
        assert!(bad(RopeParams::new(4, RopeMode::Mrope))); // no sections
        // Too few positions for the multi-section modes, and too few factors.
        let mut m = RopeParams::new(4, RopeMode::Mrope);
        m.sections = [1, 1, 0, 0];
        assert!(bad(m));
        let ff = f32_tensor([1, 1, 1, 1], &[1.0]);
        assert!(rope(&y, &pos, Some(&ff), &RopeParams::new(4, RopeMode::Normal)).is_err());
        assert_eq!(RopeMode::from_ggml(24), Some(RopeMode::Vision));
        assert_eq!(RopeMode::from_ggml(1), None);
    }
}
