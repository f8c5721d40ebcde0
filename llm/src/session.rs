//! A conversation with a [`Decoder`]: its KV cache and position, prompts evaluated in
//! micro-batches, and generation as an iterator of tokens.

use ggml_dawn::GgmlType;

use crate::decoder::{Decoder, KvCache};
use crate::error::{LlmError, Result};
use crate::ops::Ops;
use crate::sampling::Sampler;
use crate::tokenizer::TokenId;

/// Prompt tokens evaluated per step by default (llama.cpp's `n_ubatch`).
pub const DEFAULT_BATCH: usize = 512;

/// A KV cache and the position in it.
#[derive(Debug)]
pub struct Session<'d, O: Ops> {
    decoder: &'d Decoder<O>,
    cache: KvCache<O::Tensor>,
    n_past: usize,
    n_batch: usize,
}

impl<'d, O: Ops> Session<'d, O> {
    /// An empty session of `n_ctx` cells of `cache_type`.
    pub fn new(decoder: &'d Decoder<O>, n_ctx: usize, cache_type: GgmlType) -> Result<Session<'d, O>> {
        Ok(Session {
            cache: decoder.new_cache(n_ctx, cache_type)?,
            decoder,
            n_past: 0,
            n_batch: DEFAULT_BATCH,
        })
    }

    /// Tokens evaluated per step (at least 1).
    pub fn with_batch_size(mut self, n_batch: usize) -> Session<'d, O> {
        self.n_batch = n_batch.max(1);
        self
    }

    /// The context size.
    pub fn n_ctx(&self) -> usize {
        self.cache.n_ctx()
    }

    /// Tokens in the cache.
    pub fn n_past(&self) -> usize {
        self.n_past
    }

    /// Forgets every token (the cache's cells are overwritten as new ones come).
    pub fn clear(&mut self) {
        self.n_past = 0;
    }

    fn check_room(&self, n: usize) -> Result<()> {
        if n == 0 {
            return Err(LlmError::InvalidArgument("no tokens to evaluate".into()));
        }
        if self.n_past + n > self.n_ctx() {
            return Err(LlmError::ContextFull {
                needed: self.n_past + n,
                n_ctx: self.n_ctx(),
            });
        }
        Ok(())
    }

    /// Evaluates `tokens` after those already in the cache and returns the logits that follow
    /// the last one (`n_vocab` values).
    pub fn eval(&mut self, tokens: &[TokenId]) -> Result<Vec<f32>> {
        self.eval_from(tokens, tokens.len().saturating_sub(1))
    }

    /// Evaluates `tokens` and returns the logits after each of `tokens[first..]`, row by row.
    pub fn eval_from(&mut self, tokens: &[TokenId], first: usize) -> Result<Vec<f32>> {
        self.check_room(tokens.len())?;
        if first >= tokens.len() {
            return Err(LlmError::InvalidArgument(format!(
                "logits from token {first} of {}",
                tokens.len()
            )));
        }
        let mut logits = Vec::new();
        for (b, batch) in tokens.chunks(self.n_batch).enumerate() {
            let start = b * self.n_batch;
            let rows: Vec<usize> = (0..batch.len()).filter(|&i| start + i >= first).collect();
            if rows.is_empty() {
                // Nothing wanted from this batch but its cache writes: one row's logits, whose
                // argmax is read to run the work.
                let t = self
                    .decoder
                    .forward(&mut self.cache, batch, self.n_past, Some(&[batch.len() - 1]))?;
                self.decoder.ops().argmax(&t)?;
            } else {
                let t = self.decoder.forward(&mut self.cache, batch, self.n_past, Some(&rows))?;
                logits.extend(self.decoder.ops().read_f32(&t)?);
            }
            self.n_past += batch.len();
        }
        Ok(logits)
    }

    /// Evaluates `tokens` and returns the id of the largest logit after the last one, reading
    /// back only that id.
    pub fn eval_greedy(&mut self, tokens: &[TokenId]) -> Result<TokenId> {
        self.check_room(tokens.len())?;
        let split = tokens.len() - 1;
        if split > 0 {
            self.eval_from(&tokens[..split], split - 1)?;
        }
        let t = self
            .decoder
            .forward(&mut self.cache, &tokens[split..], self.n_past, None)?;
        self.n_past += 1;
        let ids = self.decoder.ops().argmax(&t)?;
        match ids.first() {
            Some(&id) if id >= 0 => Ok(id as TokenId),
            _ => Err(LlmError::Backend("argmax gave no token".into())),
        }
    }

    /// Generates up to `n` tokens after `prompt` with `sampler`; greedy samplers read back only
    /// the argmax. The iterator stops after `n` tokens or at the first error (a full context);
    /// stopping at an end-of-generation token is the caller's choice.
    pub fn generate<'s>(&'s mut self, prompt: &[TokenId], sampler: Sampler, n: usize) -> Generation<'s, 'd, O> {
        Generation {
            session: self,
            sampler,
            input: prompt.to_vec(),
            remaining: n,
        }
    }
}

/// The tokens a [`Session`] generates; each `next` evaluates the previous token (the prompt
/// first) and samples the next.
#[derive(Debug)]
pub struct Generation<'s, 'd, O: Ops> {
    session: &'s mut Session<'d, O>,
    sampler: Sampler,
    input: Vec<TokenId>,
    remaining: usize,
}

impl<O: Ops> Iterator for Generation<'_, '_, O> {
    type Item = Result<TokenId>;

    fn next(&mut self) -> Option<Result<TokenId>> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let next = if self.sampler.params().temp <= 0.0 {
            self.session.eval_greedy(&self.input)
        } else {
            self.session
                .eval(&self.input)
                .and_then(|logits| self.sampler.sample(&logits))
        };
        match next {
            Ok(id) => {
                self.input = vec![id];
                Some(Ok(id))
            }
            Err(e) => {
                self.remaining = 0;
                Some(Err(e))
            }
        }
    }
}
