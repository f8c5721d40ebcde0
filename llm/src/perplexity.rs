//! Perplexity and KL divergence as llama.cpp's `llama-perplexity` computes them: the text in
//! chunks of `n_ctx` tokens, each evaluated from an empty cache with its first token replaced by
//! BOS (when the vocabulary adds one), and the second half of each chunk scored (`n_ctx/2 … n_ctx-2`
//! predicting the next token). Its file of base log-probabilities (`--kl-divergence-base`) is
//! read and written in llama.cpp's binary format:
//!
//! `"_logits_"`, `n_ctx` i32, `n_vocab` i32, `n_chunk` i32, the `n_chunk·n_ctx` i32 tokens, then
//! per chunk `n_ctx − 1 − n_ctx/2` rows of `nv = 2⌈n_vocab/2⌉ + 4` u16: the row's scale and
//! minimum log-probability as two f32, then each token's log-probability quantized to 16 bits
//! over the 16 nats below the largest.

use std::io::{Read, Write};

use crate::error::{LlmError, Result};
use crate::tokenizer::TokenId;

const MAGIC: &[u8; 8] = b"_logits_";

/// u16 values per row of the base file.
pub fn row_len(n_vocab: usize) -> usize {
    2 * n_vocab.div_ceil(2) + 4
}

/// Rows scored per chunk.
pub fn scored_per_chunk(n_ctx: usize) -> usize {
    n_ctx - 1 - n_ctx / 2
}

/// The chunks of `tokens` llama.cpp evaluates: `min(chunks, len/n_ctx)` of `n_ctx` tokens;
/// an error when the text has fewer than `2·n_ctx` tokens (as llama.cpp refuses it).
pub fn chunk_count(n_tokens: usize, n_ctx: usize, max_chunks: Option<usize>) -> Result<usize> {
    if n_ctx < 4 {
        return Err(LlmError::InvalidArgument(format!("context size {n_ctx} (at least 4)")));
    }
    if n_tokens < 2 * n_ctx {
        return Err(LlmError::InvalidArgument(format!(
            "the text has {n_tokens} tokens; a context of {n_ctx} needs at least {}",
            2 * n_ctx
        )));
    }
    let all = n_tokens / n_ctx;
    Ok(max_chunks.map_or(all, |m| m.min(all)))
}

/// The tokens of chunk `i` as evaluated: BOS in place of the first when `bos` is given.
pub fn chunk_input(tokens: &[TokenId], n_ctx: usize, i: usize, bos: Option<TokenId>) -> Vec<TokenId> {
    let mut chunk = tokens[i * n_ctx..(i + 1) * n_ctx].to_vec();
    if let Some(b) = bos {
        chunk[0] = b;
    }
    chunk
}

/// `max + ln Σ e^(x − max)` over a row, with llama.cpp's f32 `expf` terms summed in f64.
fn log_sum_exp(logits: &[f32]) -> (f32, f32) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&x| f64::from((x - max).exp())).sum();
    (max, sum.ln() as f32)
}

/// The negative log-likelihood of `next` after a row of logits.
pub fn nll(logits: &[f32], next: TokenId) -> f64 {
    let (max, lse) = log_sum_exp(logits);
    f64::from(max) + f64::from(lse) - f64::from(logits[next as usize])
}

/// Running sums of the negative log-likelihoods.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Nll {
    pub sum: f64,
    pub sum2: f64,
    pub count: usize,
}

impl Nll {
    pub fn add(&mut self, v: f64) {
        self.sum += v;
        self.sum2 += v * v;
        self.count += 1;
    }

    /// Perplexity so far.
    pub fn ppl(&self) -> f64 {
        (self.sum / self.count as f64).exp()
    }

    /// llama.cpp's final estimate: the perplexity and its uncertainty (`None` when the variance
    /// is not positive).
    pub fn estimate(&self) -> (f64, Option<f64>) {
        let n = self.count as f64;
        let mean = self.sum / n;
        let var = self.sum2 / n - mean * mean;
        let ppl = mean.exp();
        (
            ppl,
            (var > 0.0 && self.count > 1).then(|| (var / (n - 1.0)).sqrt() * ppl),
        )
    }
}

/// One row of the base file from a row of logits (llama.cpp's `log_softmax` with its output).
pub fn quantize_row(logits: &[f32], out: &mut [u16]) {
    let (max, lse) = log_sum_exp(logits);
    let min = logits.iter().copied().fold(f32::INFINITY, f32::min).max(max - 16.0);
    let min_log_prob = min - max - lse;
    let scale = (max - min) / 65535.0;
    out[..2].copy_from_slice(&half_words(scale));
    out[2..4].copy_from_slice(&half_words(min_log_prob));
    let body = &mut out[4..];
    body.fill(0);
    if scale != 0.0 {
        let inv = 1.0 / scale;
        for (q, &x) in body.iter_mut().zip(logits) {
            if x > min {
                *q = nearest_int(inv * (x - min)) as u16;
            }
        }
    }
}

/// llama.cpp's `nearest_int`: round half to even through the float's mantissa.
fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12_582_912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

fn half_words(v: f32) -> [u16; 2] {
    let b = v.to_le_bytes();
    [u16::from_le_bytes([b[0], b[1]]), u16::from_le_bytes([b[2], b[3]])]
}

fn from_half_words(w: &[u16]) -> f32 {
    let (a, b) = (w[0].to_le_bytes(), w[1].to_le_bytes());
    f32::from_le_bytes([a[0], a[1], b[0], b[1]])
}

/// The header of a base file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseHeader {
    pub n_ctx: usize,
    pub n_vocab: usize,
    pub n_chunk: usize,
    /// The tokens the base run evaluated (`n_chunk·n_ctx`, before BOS replacement).
    pub tokens: Vec<TokenId>,
}

impl BaseHeader {
    pub fn write(&self, mut w: impl Write) -> Result<()> {
        w.write_all(MAGIC)?;
        for v in [self.n_ctx, self.n_vocab, self.n_chunk] {
            w.write_all(&(v as i32).to_le_bytes())?;
        }
        let end = self.n_chunk * self.n_ctx;
        for &t in &self.tokens[..end] {
            w.write_all(&(t as i32).to_le_bytes())?;
        }
        Ok(())
    }

    /// Reads a header; a file of another kind, or whose numbers make no sense, is an error.
    pub fn read(mut r: impl Read) -> Result<BaseHeader> {
        let bad = |what: &str| LlmError::InvalidArgument(format!("the base logits file: {what}"));
        let mut magic = [0u8; 8];
        r.read_exact(&mut magic).map_err(|_| bad("too short"))?;
        if &magic != MAGIC {
            return Err(bad(
                "does not start with `_logits_` (not a llama-perplexity logits file)",
            ));
        }
        let mut int = || -> Result<usize> {
            let mut b = [0u8; 4];
            r.read_exact(&mut b).map_err(|_| bad("too short"))?;
            usize::try_from(i32::from_le_bytes(b)).map_err(|_| bad("a negative count"))
        };
        let (n_ctx, n_vocab, n_chunk) = (int()?, int()?, int()?);
        if n_ctx < 4 || n_vocab == 0 || n_chunk == 0 || n_ctx.saturating_mul(n_chunk) > 1 << 28 {
            return Err(bad(&format!("n_ctx {n_ctx}, n_vocab {n_vocab}, {n_chunk} chunks")));
        }
        let mut bytes = vec![0u8; n_ctx * n_chunk * 4];
        r.read_exact(&mut bytes).map_err(|_| bad("the tokens are cut short"))?;
        let tokens = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(BaseHeader {
            n_ctx,
            n_vocab,
            n_chunk,
            tokens,
        })
    }
}

/// Reads one chunk's rows of the base file.
pub fn read_chunk(mut r: impl Read, n_ctx: usize, n_vocab: usize) -> Result<Vec<u16>> {
    let mut bytes = vec![0u8; scored_per_chunk(n_ctx) * row_len(n_vocab) * 2];
    r.read_exact(&mut bytes)
        .map_err(|_| LlmError::InvalidArgument("the base logits file is cut short".into()))?;
    Ok(bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect())
}

/// Writes one chunk's rows.
pub fn write_chunk(mut w: impl Write, rows: &[u16]) -> Result<()> {
    let bytes: Vec<u8> = rows.iter().flat_map(|v| v.to_le_bytes()).collect();
    w.write_all(&bytes)?;
    Ok(())
}

/// The sums llama.cpp's KL-divergence statistics come from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KlStats {
    pub nll: Nll,
    pub nll_base: Nll,
    pub sum_nll_nll_base: f64,
    pub sum_kld: f64,
    pub sum_kld2: f64,
    pub sum_p_diff: f64,
    pub sum_p_diff2: f64,
    pub sum_p_diff4: f64,
    pub max_p_diff: f32,
    pub n_same_top: usize,
    /// Every row's KL divergence, for the median and percentiles.
    pub kld_values: Vec<f32>,
}

impl KlStats {
    /// Adds one row: this model's logits against the base row, `next` the token that follows.
    pub fn add(&mut self, logits: &[f32], base: &[u16], next: TokenId) {
        let mut imax = 0;
        for (i, &x) in logits.iter().enumerate() {
            if x > logits[imax] {
                imax = i;
            }
        }
        let (max, lse) = log_sum_exp(logits);
        let scale = from_half_words(&base[..2]);
        let min_log_prob = from_half_words(&base[2..4]);
        let base = &base[4..];
        let tok = next as usize;
        let nll = max + lse - logits[tok];
        let nll_base = -(scale * f32::from(base[tok]) + min_log_prob);
        self.nll.add(f64::from(nll));
        self.nll_base.add(f64::from(nll_base));
        self.sum_nll_nll_base += f64::from(nll) * f64::from(nll_base);

        let top = max + lse;
        let mut kld = 0.0f64;
        let mut imax_base = 0;
        let mut p_log_base_max = 0.0f32;
        for (i, (&q, &x)) in base.iter().zip(logits).enumerate() {
            let p_log_base = scale * f32::from(q) + min_log_prob;
            if i == 0 || p_log_base > p_log_base_max {
                p_log_base_max = p_log_base;
                imax_base = i;
            }
            if p_log_base > -16.0 {
                let p_base = p_log_base.exp();
                kld += f64::from(p_base * (p_log_base - x + top));
            }
        }
        self.sum_kld += kld;
        self.sum_kld2 += kld * kld;
        self.kld_values.push(kld as f32);
        if imax == imax_base {
            self.n_same_top += 1;
        }
        let p_diff = (-nll).exp() - (-nll_base).exp();
        self.sum_p_diff += f64::from(p_diff);
        let d2 = f64::from(p_diff) * f64::from(p_diff);
        self.sum_p_diff2 += d2;
        self.sum_p_diff4 += d2 * d2;
        self.max_p_diff = self.max_p_diff.max(p_diff.abs());
    }

    pub fn count(&self) -> usize {
        self.nll.count
    }

    /// Mean KL divergence and its uncertainty.
    pub fn mean_kld(&self) -> (f64, f64) {
        mean_and_uncertainty(self.sum_kld, self.sum_kld2, self.count())
    }

    /// The fraction of rows whose most likely token is the base's.
    pub fn same_top(&self) -> f64 {
        self.n_same_top as f64 / self.count() as f64
    }

    /// llama.cpp's lines for a chunk: PPL, ln(PPL(Q)/PPL(base)), KLD, Δp RMS, same top p.
    pub fn chunk_line(&self, chunk: usize) -> String {
        let n = self.count();
        let (lp, lpu) = mean_and_uncertainty(self.nll.sum, self.nll.sum2, n);
        let (lb, lbu) = mean_and_uncertainty(self.nll_base.sum, self.nll_base.sum2, n);
        let cov = if n < 10 {
            0.0
        } else {
            (self.sum_nll_nll_base / n as f64 - (self.nll.sum / n as f64) * (self.nll_base.sum / n as f64))
                / (n as f64 - 1.0)
        };
        let ratio_unc = (lpu * lpu + lbu * lbu - 2.0 * cov).sqrt();
        let (kld, kldu) = self.mean_kld();
        let (mse, mseu) = mean_and_uncertainty(self.sum_p_diff2, self.sum_p_diff4, n);
        let rms = mse.sqrt();
        let top = self.same_top();
        let top_unc = (top * (1.0 - top) / (n as f64 - 1.0)).sqrt();
        format!(
            "{chunk:4}    {:9.4} ± {:9.4}    {:10.5} ± {:10.5}    {kld:10.5} ± {kldu:10.5}    {:6.3} ± {:6.3} %    {:6.3} ± {:6.3} %",
            lp.exp(),
            lp.exp() * lpu,
            lp - lb,
            ratio_unc,
            100.0 * rms,
            100.0 * 0.5 / rms * mseu,
            100.0 * top,
            100.0 * top_unc
        )
    }

    /// The final statistics, with llama.cpp's labels.
    pub fn summary(&self) -> String {
        let n = self.count();
        let (lp, lpu) = mean_and_uncertainty(self.nll.sum, self.nll.sum2, n);
        let (lb, lbu) = mean_and_uncertainty(self.nll_base.sum, self.nll_base.sum2, n);
        let (kld, kldu) = self.mean_kld();
        let mut sorted = self.kld_values.clone();
        sorted.sort_by(f32::total_cmp);
        let pct = |p: f64| sorted[((sorted.len() - 1) as f64 * p).round() as usize];
        let (mse, _) = mean_and_uncertainty(self.sum_p_diff2, self.sum_p_diff4, n);
        let top = self.same_top();
        [
            "====== Perplexity statistics ======".to_string(),
            format!(
                "Mean PPL(Q)                   : {:10.6} ± {:10.6}",
                lp.exp(),
                lp.exp() * lpu
            ),
            format!(
                "Mean PPL(base)                : {:10.6} ± {:10.6}",
                lb.exp(),
                lb.exp() * lbu
            ),
            format!("Mean ln(PPL(Q)/PPL(base))     : {:10.6}", lp - lb),
            String::new(),
            "====== KL divergence statistics ======".to_string(),
            format!("Mean    KLD: {kld:10.6} ± {kldu:10.6}"),
            format!("Maximum KLD: {:10.6}", sorted.last().copied().unwrap_or(0.0)),
            format!("99.0%   KLD: {:10.6}", pct(0.99)),
            format!("Median  KLD: {:10.6}", pct(0.5)),
            String::new(),
            "====== Token probability statistics ======".to_string(),
            format!("RMS Δp    : {:6.3} %", 100.0 * mse.sqrt()),
            format!("Maximum Δp: {:6.3}%", 100.0 * self.max_p_diff),
            format!(
                "Same top p: {:6.3} ± {:5.3} %",
                100.0 * top,
                100.0 * (top * (1.0 - top) / (n as f64 - 1.0)).sqrt()
            ),
        ]
        .join("\n")
    }
}

fn mean_and_uncertainty(sum: f64, sum2: f64, count: usize) -> (f64, f64) {
    if count < 1 {
        return (0.0, 0.0);
    }
    let f = sum / count as f64;
    let df = sum2 / count as f64 - f * f;
    let df = if df > 0.0 && count > 10 {
        (df / (count as f64 - 1.0)).sqrt()
    } else {
        0.0
    };
    (f, df)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_rows_round_trip_to_the_log_probabilities() {
        let logits: Vec<f32> = (0..101).map(|i| ((i * 37) % 101) as f32 * 0.13 - 4.0).collect();
        let mut row = vec![0u16; row_len(logits.len())];
        quantize_row(&logits, &mut row);
        let scale = from_half_words(&row[..2]);
        let min = from_half_words(&row[2..4]);
        let (max, lse) = log_sum_exp(&logits);
        for (i, &x) in logits.iter().enumerate() {
            let back = scale * f32::from(row[4 + i]) + min;
            assert!(
                (back - (x - max - lse)).abs() <= scale,
                "{i}: {back} vs {}",
                x - max - lse
            );
        }
        // The same logits against their own base row: no divergence, same top token.
        let mut stats = KlStats::default();
        stats.add(&logits, &row, 3);
        assert!(stats.sum_kld.abs() < 1e-4, "{}", stats.sum_kld);
        assert_eq!(stats.n_same_top, 1);
        assert!((stats.nll.sum - nll(&logits, 3)).abs() < 1e-3);
    }

    #[test]
    fn headers_round_trip_and_bad_files_are_refused() {
        let h = BaseHeader {
            n_ctx: 8,
            n_vocab: 5,
            n_chunk: 2,
            tokens: (0..16).collect(),
        };
        let mut bytes = Vec::new();
        h.write(&mut bytes).unwrap();
        assert_eq!(bytes.len(), 8 + 12 + 64);
        assert_eq!(BaseHeader::read(bytes.as_slice()).unwrap(), h);
        assert!(BaseHeader::read(&bytes[..30]).is_err());
        let mut wrong = bytes.clone();
        wrong[0] = b'x';
        assert!(BaseHeader::read(wrong.as_slice()).is_err());
    }

    #[test]
    fn chunks_are_llama_cpps() {
        assert!(chunk_count(255, 128, None).is_err());
        assert_eq!(chunk_count(300, 128, None).unwrap(), 2);
        assert_eq!(chunk_count(1000, 128, Some(3)).unwrap(), 3);
        assert_eq!(scored_per_chunk(128), 63);
        assert_eq!(row_len(49152), 49156);
        assert_eq!(chunk_input(&[5, 6, 7, 8, 9, 10], 3, 1, Some(1)), vec![1, 9, 10]);
        // Half-up at .5 goes to even, as the mantissa trick does.
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(3.5), 4);
    }
}
