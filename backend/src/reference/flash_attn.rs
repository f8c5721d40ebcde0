//! FLASH_ATTN_EXT on the CPU: ggml's fused attention, `softmax(q·kᵀ·scale + slope·mask) · v`
//! with grouped-query heads, logit softcap, ALiBi and attention sinks.

use super::{Result, dot, matrix, parallel_map, row, shape_error};
use crate::tensor::HostTensor;

const OP: &str = "FLASH_ATTN_EXT";

/// ggml's FLASH_ATTN_EXT, with the semantics checked against ggml's own results
/// (`/work/shared/golden/README.md`). Shapes, as ggml's:
///
/// - `q` `[d_k, n_q, n_heads, n_seq]`, `k` `[d_k, n_kv, n_kv_heads, n_seq_k]`,
///   `v` `[d_v, n_kv, n_v_heads, n_seq_v]`; query head `h` reads KV head `h / (n_heads/n_kv_heads)`
///   (GQA), and sequence `i3` reads `i3 / (n_seq/n_seq_k)` (K.ne3 = Q.ne3 in practice);
/// - `mask` (optional) `[≥ n_kv, ≥ n_q, m2, m3]`: query row `i1` of head `h`, sequence `i3` adds
///   `slope · mask[j, i1, h % m2, i3 % m3]` to score `j`;
/// - `sinks` (optional) `[≥ n_heads]` f32: one logit per head that joins the softmax's max and
///   denominator but has no value row.
///
/// Per query row: `s_j = q·k_j · scale`, or `cap · tanh(q·k_j · scale/cap)` when `logit_softcap`
/// (= cap) is not 0; then `s_j += slope · mask_j`, where the ALiBi slope is 1 when `max_bias` is 0,
/// else `m0^(h+1)` for `h < n2` and `m1^(2(h−n2)+1)` otherwise, with `n2 = 2^⌊log2 n_heads⌋`,
/// `m0 = 2^(−max_bias/n2)`, `m1 = 2^(−max_bias/2/n2)`. A score whose masked term is −∞ drops out.
/// `out = Σ_j e^(s_j−M) v_j / (Σ_j e^(s_j−M) + e^(sink−M))` with `M` the max over the scores and
/// the sink. A row with every score masked out and no sink gives zeros, as ggml's CPU does
/// (it multiplies by `S == 0 ? 0 : 1/S`) and as the WebGPU shaders do (`0 if l = 0`); with a sink
/// it gives zeros too (only the sink is left, and it has no value).
///
/// Everything is computed in f64 from the f32 values of the inputs (no rounding of Q to f16, which
/// ggml's CPU does for f16 K). The result is contiguous f32 `[d_v, n_heads, n_q, n_seq]`: ggml's
/// permuted output, `d_v` fastest, then heads, then query rows.
#[allow(clippy::too_many_arguments)] // ggml's own argument list.
pub fn flash_attn_ext(
    q: &HostTensor,
    k: &HostTensor,
    v: &HostTensor,
    mask: Option<&HostTensor>,
    sinks: Option<&HostTensor>,
    scale: f32,
    max_bias: f32,
    logit_softcap: f32,
) -> Result<Vec<f32>> {
    let [d_k, n_q, n_heads, n_seq] = q.layout.ne;
    let [d_kk, n_kv, k_heads, k_seq] = k.layout.ne;
    let [d_v, n_kv_v, v_heads, v_seq] = v.layout.ne;
    if d_k != d_kk {
        return shape_error(OP, format!("q has head size {d_k}, k {d_kk}"));
    }
    if n_kv != n_kv_v {
        return shape_error(OP, format!("k has {n_kv} KV rows, v {n_kv_v}"));
    }
    let divides = |part: usize, whole: usize| part > 0 && whole.is_multiple_of(part);
    if !(divides(k_heads, n_heads) && divides(v_heads, n_heads)) {
        return shape_error(
            OP,
            format!("{n_heads} query heads are not a multiple of k's {k_heads} or v's {v_heads} heads"),
        );
    }
    if !(divides(k_seq, n_seq) && divides(v_seq, n_seq)) {
        return shape_error(
            OP,
            format!("q's ne3 = {n_seq} is not a multiple of k's {k_seq} or v's {v_seq}"),
        );
    }
    if let Some(m) = mask {
        let [m0, m1, m2, m3] = m.layout.ne;
        if m0 < n_kv || m1 < n_q || !divides(m2, n_heads) || !divides(m3, n_seq) {
            return shape_error(
                OP,
                format!(
                    "mask {:?} does not cover [{n_kv}, {n_q}] and broadcast over [{n_heads}, {n_seq}]",
                    m.layout.ne
                ),
            );
        }
    }
    let sinks = match sinks {
        Some(s) => {
            let values = s.to_f32().map_err(|source| super::ReferenceError::Format {
                op: OP,
                tensor: "sinks",
                source,
            })?;
            if values.len() < n_heads {
                return shape_error(OP, format!("{} sinks for {n_heads} heads", values.len()));
            }
            Some(values)
        }
        None => None,
    };
    let len = d_v * n_heads * n_q * n_seq;
    if len == 0 {
        return Ok(Vec::new());
    }

    let cap = f64::from(logit_softcap);
    let scale = f64::from(scale);
    let slope = alibi_slopes(n_heads, max_bias);
    // One task per (sequence, head): n_q output rows of d_v values.
    let blocks = parallel_map(n_seq * n_heads, |task| {
        let (h, i3) = (task % n_heads, task / n_heads);
        let keys = matrix(OP, "k", k, h / (n_heads / k_heads), i3 / (n_seq / k_seq))?;
        let values = matrix(OP, "v", v, h / (n_heads / v_heads), i3 / (n_seq / v_seq))?;
        let sink = sinks.as_ref().map(|s| f64::from(s[h]));
        let mut out = vec![0.0f32; n_q * d_v];
        let mut scores = vec![f64::NEG_INFINITY; n_kv];
        for i1 in 0..n_q {
            let q_row = row(OP, "q", q, i1, h, i3)?;
            let mask_row = match mask {
                Some(m) => Some(row(OP, "mask", m, i1, h % m.layout.ne[2], i3 % m.layout.ne[3])?),
                None => None,
            };
            for (j, s) in scores.iter_mut().enumerate() {
                let bias = mask_row.as_ref().map_or(0.0, |m| slope[h] * f64::from(m[j]));
                *s = if bias == f64::NEG_INFINITY {
                    f64::NEG_INFINITY
                } else {
                    let qk = dot(&q_row, &keys[j * d_k..(j + 1) * d_k]);
                    let logit = if cap != 0.0 {
                        cap * (qk * scale / cap).tanh()
                    } else {
                        qk * scale
                    };
                    logit + bias
                };
            }
            let max = scores.iter().copied().chain(sink).fold(f64::NEG_INFINITY, f64::max);
            if max == f64::NEG_INFINITY {
                continue; // Every score masked out and no sink: zeros.
            }
            let mut acc = vec![0.0f64; d_v];
            let mut sum = sink.map_or(0.0, |s| (s - max).exp());
            for (j, &s) in scores.iter().enumerate() {
                if s == f64::NEG_INFINITY {
                    continue;
                }
                let p = (s - max).exp();
                sum += p;
                for (a, &x) in acc.iter_mut().zip(&values[j * d_v..(j + 1) * d_v]) {
                    *a += p * f64::from(x);
                }
            }
            let inv = if sum == 0.0 { 0.0 } else { 1.0 / sum };
            for (o, a) in out[i1 * d_v..(i1 + 1) * d_v].iter_mut().zip(&acc) {
                *o = (a * inv) as f32;
            }
        }
        Ok(out)
    })?;

    // dst[d, h, i1, i3] from block (i3, h), row i1.
    let mut dst = vec![0.0f32; len];
    for (task, block) in blocks.iter().enumerate() {
        let (h, i3) = (task % n_heads, task / n_heads);
        for i1 in 0..n_q {
            let at = ((i3 * n_q + i1) * n_heads + h) * d_v;
            dst[at..at + d_v].copy_from_slice(&block[i1 * d_v..(i1 + 1) * d_v]);
        }
    }
    Ok(dst)
}

/// ALiBi slope of each head (all 1 when `max_bias` is not positive), as ggml computes them.
pub(crate) fn alibi_slopes(n_heads: usize, max_bias: f32) -> Vec<f64> {
    if max_bias <= 0.0 || n_heads == 0 {
        return vec![1.0; n_heads];
    }
    let n2 = 1usize << n_heads.ilog2();
    let max_bias = f64::from(max_bias);
    let m0 = 2f64.powf(-max_bias / n2 as f64);
    let m1 = 2f64.powf(-(max_bias / 2.0) / n2 as f64);
    (0..n_heads)
        .map(|h| {
            if h < n2 {
                m0.powi(h as i32 + 1)
            } else {
                m1.powi(2 * (h - n2) as i32 + 1)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ggml_type::GgmlType;
    use crate::reference::ReferenceError;

    fn f32_tensor(ne: [usize; 4], values: &[f32]) -> HostTensor {
        HostTensor::from_f32(GgmlType::F32, ne, values).unwrap()
    }

    fn close(got: &[f32], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((f64::from(*g) - w).abs() < 1e-6, "got {got:?}, want {want:?}");
        }
    }

    /// q = [1, 0]; keys [1, 0], [0, 1], [-1, 0] give scores 1, 0, -1 (scale 1), so
    /// p = (e, 1, 1/e) / (e + 1 + 1/e) = (0.665241, 0.244728, 0.090031).
    fn one_query() -> (HostTensor, HostTensor, HostTensor) {
        let q = f32_tensor([2, 1, 1, 1], &[1.0, 0.0]);
        let k = f32_tensor([2, 3, 1, 1], &[1.0, 0.0, 0.0, 1.0, -1.0, 0.0]);
        let v = f32_tensor([2, 3, 1, 1], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
        (q, k, v)
    }

    #[test]
    fn one_query_softmax() {
        let (q, k, v) = one_query();
        let out = flash_attn_ext(&q, &k, &v, None, None, 1.0, 0.0, 0.0).unwrap();
        close(
            &out,
            &[0.665_240_955_7 + 0.090_030_573_2, 0.244_728_471_1 + 0.090_030_573_2],
        );
        // scale 2: scores 2, 0, -2.
        let out = flash_attn_ext(&q, &k, &v, None, None, 2.0, 0.0, 0.0).unwrap();
        let e = [2f64.exp(), 1.0, (-2f64).exp()];
        let s: f64 = e.iter().sum();
        close(&out, &[(e[0] + e[2]) / s, (e[1] + e[2]) / s]);
    }

    #[test]
    fn sink_joins_max_and_denominator_only() {
        let (q, k, v) = one_query();
        let sinks = f32_tensor([1, 1, 1, 1], &[3.0]);
        let out = flash_attn_ext(&q, &k, &v, None, Some(&sinks), 1.0, 0.0, 0.0).unwrap();
        let e = [1f64.exp(), 1.0, (-1f64).exp()];
        let s = e.iter().sum::<f64>() + 3f64.exp();
        close(&out, &[(e[0] + e[2]) / s, (e[1] + e[2]) / s]);
    }

    #[test]
    fn mask_adds_and_removes() {
        let (q, k, v) = one_query();
        let inf = f32::NEG_INFINITY;
        // Masking key 0 out leaves scores 0, -1 (+0.5 on key 2).
        let mask = HostTensor::from_f32(GgmlType::F16, [3, 1, 1, 1], &[inf, 0.0, 0.5]).unwrap();
        let out = flash_attn_ext(&q, &k, &v, Some(&mask), None, 1.0, 0.0, 0.0).unwrap();
        let e = [1.0, (-0.5f64).exp()];
        let s: f64 = e.iter().sum();
        close(&out, &[e[1] / s, (e[0] + e[1]) / s]);
        // All masked: zeros, with or without a sink.
        let all = HostTensor::from_f32(GgmlType::F16, [3, 1, 1, 1], &[inf; 3]).unwrap();
        let out = flash_attn_ext(&q, &k, &v, Some(&all), None, 1.0, 0.0, 0.0).unwrap();
        assert_eq!(out, vec![0.0, 0.0]);
        let sinks = f32_tensor([1, 1, 1, 1], &[0.5]);
        let out = flash_attn_ext(&q, &k, &v, Some(&all), Some(&sinks), 1.0, 0.0, 0.0).unwrap();
        assert_eq!(out, vec![0.0, 0.0]);
    }

    #[test]
    fn softcap_squashes_scores() {
        let (q, k, v) = one_query();
        // scale 4, cap 2: s = 2·tanh(4·qk/2) for qk = 1, 0, -1.
        let out = flash_attn_ext(&q, &k, &v, None, None, 4.0, 0.0, 2.0).unwrap();
        let t = 2.0 * 2f64.tanh();
        let e = [t.exp(), 1.0, (-t).exp()];
        let s: f64 = e.iter().sum();
        close(&out, &[(e[0] + e[2]) / s, (e[1] + e[2]) / s]);
    }

    #[test]
    fn alibi_slopes_follow_ggml() {
        // 3 heads: n2 = 2, m0 = 2^-4, m1 = 2^-2.
        let s = alibi_slopes(3, 8.0);
        assert_eq!(s, vec![1.0 / 16.0, 1.0 / 256.0, 1.0 / 4.0]);
        assert_eq!(alibi_slopes(4, 0.0), vec![1.0; 4]);
        // A 3-head attention over one key pair: head h's scores are 0 + slope_h · mask.
        let q = f32_tensor([1, 1, 3, 1], &[0.0; 3]);
        let k = f32_tensor([1, 2, 1, 1], &[0.0; 2]);
        let v = f32_tensor([1, 2, 1, 1], &[1.0, 0.0]);
        let mask = HostTensor::from_f32(GgmlType::F16, [2, 1, 1, 1], &[4.0, 0.0]).unwrap();
        let out = flash_attn_ext(&q, &k, &v, Some(&mask), None, 1.0, 8.0, 0.0).unwrap();
        let want: Vec<f64> = s.iter().map(|sl| (4.0 * sl).exp() / ((4.0 * sl).exp() + 1.0)).collect();
        close(&out, &want);
    }

    #[test]
    fn shape_errors_are_values() {
        let (q, k, v) = one_query();
        let bad_v = f32_tensor([2, 2, 1, 1], &[0.0; 4]);
        assert!(matches!(
            flash_attn_ext(&q, &k, &bad_v, None, None, 1.0, 0.0, 0.0),
            Err(ReferenceError::Shape { .. })
        ));
        let short_mask = HostTensor::from_f32(GgmlType::F16, [2, 1, 1, 1], &[0.0; 2]).unwrap();
        assert!(matches!(
            flash_attn_ext(&q, &k, &v, Some(&short_mask), None, 1.0, 0.0, 0.0),
            Err(ReferenceError::Shape { .. })
        ));
        let q3 = f32_tensor([2, 1, 3, 1], &[0.0; 6]);
        let k2 = f32_tensor([2, 3, 2, 1], &[0.0; 12]);
        assert!(matches!(
            flash_attn_ext(&q3, &k2, &k2, None, None, 1.0, 0.0, 0.0),
            Err(ReferenceError::Shape { .. })
        ));
    }
}
