//! Choosing the next token from logits with llama.cpp's default sampler chain: top-k, top-p,
//! min-p, temperature, then a draw from the distribution left (its `common_sampler` with the
//! penalties, DRY, typical-p, XTC and top-n-σ off, as they are by default). A temperature of 0
//! or less keeps only the largest logit, so sampling is greedy; a seed makes draws repeatable.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use crate::error::{LlmError, Result};
use crate::tokenizer::TokenId;

/// The sampler's settings, with llama.cpp's names and defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerParams {
    /// Keep the `top_k` largest logits; 0 or less keeps all.
    pub top_k: i32,
    /// Keep the smallest set of most likely tokens whose probabilities sum to at least `top_p`;
    /// 1 keeps all.
    pub top_p: f32,
    /// Keep tokens at least `min_p` times as likely as the most likely one; 0 keeps all.
    pub min_p: f32,
    /// Divide the logits by this; 0 or less: greedy.
    pub temp: f32,
    /// Each filter keeps at least this many tokens (llama.cpp's `min_keep`, 0 by default,
    /// which its filters treat as 1).
    pub min_keep: usize,
    /// The draws' seed.
    pub seed: u64,
}

impl Default for SamplerParams {
    fn default() -> SamplerParams {
        SamplerParams {
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            temp: 0.8,
            min_keep: 0,
            seed: 0,
        }
    }
}

impl SamplerParams {
    /// Greedy decoding: always the largest logit (the first of equal ones).
    pub fn greedy() -> SamplerParams {
        SamplerParams {
            temp: 0.0,
            ..SamplerParams::default()
        }
    }

    /// Refuses settings llama.cpp would not accept or that mean nothing.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(LlmError::InvalidArgument(what));
        if !(self.top_p.is_finite() && (0.0..=1.0).contains(&self.top_p)) {
            return bad(format!("top-p {} is not within 0..=1", self.top_p));
        }
        if !(self.min_p.is_finite() && (0.0..=1.0).contains(&self.min_p)) {
            return bad(format!("min-p {} is not within 0..=1", self.min_p));
        }
        if !self.temp.is_finite() {
            return bad(format!("temperature {} is not a number", self.temp));
        }
        Ok(())
    }
}

/// A candidate token: its id, logit and (once computed) probability.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub id: TokenId,
    pub logit: f32,
    pub p: f32,
}

/// The sampler chain with its random state.
#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplerParams,
    rng: Xoshiro256PlusPlus,
}

impl Sampler {
    /// A sampler with `params` (checked), its draws seeded from `params.seed`.
    pub fn new(params: SamplerParams) -> Result<Sampler> {
        params.validate()?;
        Ok(Sampler {
            params,
            rng: Xoshiro256PlusPlus::seed_from_u64(params.seed),
        })
    }

    /// The settings.
    pub fn params(&self) -> &SamplerParams {
        &self.params
    }

    /// The candidates the filters keep for `logits`, most likely first, with their
    /// probabilities after temperature (what the final draw chooses from).
    pub fn candidates(&self, logits: &[f32]) -> Vec<Candidate> {
        let p = &self.params;
        let min_keep = p.min_keep.max(1);
        let mut cur: Vec<Candidate> = logits
            .iter()
            .enumerate()
            .map(|(id, &logit)| Candidate {
                id: id as TokenId,
                logit,
                p: 0.0,
            })
            .collect();
        if cur.is_empty() {
            return cur;
        }
        // Sorted by logit, largest first; equal logits keep id order (a stable sort).
        cur.sort_by(|a, b| b.logit.total_cmp(&a.logit));

        // top-k
        if p.top_k > 0 {
            cur.truncate(p.top_k as usize);
        }
        // top-p: the shortest prefix whose probability reaches top_p.
        if p.top_p < 1.0 {
            softmax(&mut cur);
            let mut sum = 0.0f32;
            let mut keep = cur.len();
            for (i, c) in cur.iter().enumerate() {
                sum += c.p;
                if sum >= p.top_p && i + 1 >= min_keep {
                    keep = i + 1;
                    break;
                }
            }
            cur.truncate(keep);
        }
        // min-p: logits within ln(min_p) of the largest.
        if p.min_p > 0.0 {
            let min_logit = cur[0].logit + p.min_p.ln();
            let keep = cur
                .iter()
                .enumerate()
                .position(|(i, c)| i >= min_keep && c.logit < min_logit)
                .unwrap_or(cur.len())
                .max(1);
            cur.truncate(keep);
        }
        // temperature
        if p.temp <= 0.0 {
            cur.truncate(1);
        } else {
            for c in &mut cur {
                c.logit /= p.temp;
            }
        }
        softmax(&mut cur);
        cur
    }

    /// Samples the next token from `logits` (one per vocabulary entry).
    pub fn sample(&mut self, logits: &[f32]) -> Result<TokenId> {
        let cur = self.candidates(logits);
        if cur.is_empty() {
            return Err(LlmError::InvalidArgument("no logits to sample from".into()));
        }
        // One draw per token, even when one candidate is left, as llama.cpp keeps its RNG in step.
        let r: f64 = self.rng.random();
        let target = r * cur.iter().map(|c| f64::from(c.p)).sum::<f64>();
        let mut run = 0.0f64;
        for c in &cur {
            run += f64::from(c.p);
            if run >= target {
                return Ok(c.id);
            }
        }
        Ok(cur[cur.len() - 1].id)
    }
}

/// The index of the largest logit (the first of equal ones): greedy decoding's choice.
pub fn argmax(logits: &[f32]) -> Option<TokenId> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((i, l));
        }
    }
    best.map(|(i, _)| i as TokenId)
}

fn softmax(cur: &mut [Candidate]) {
    let max = cur.iter().map(|c| c.logit).fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for c in cur.iter_mut() {
        c.p = (c.logit - max).exp();
        sum += c.p;
    }
    for c in cur.iter_mut() {
        c.p /= sum;
    }
}
