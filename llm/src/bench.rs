//! Prompt and generation speed measured as llama.cpp's `llama-bench` measures it, so the two
//! programs' figures stand side by side:
//!
//! - `pp N`: N random tokens evaluated from an empty cache (after `depth` untimed tokens) in
//!   micro-batches, the last token's logits read back; tokens/s = N / time.
//! - `tg N`: N single-token steps, each reading its logits back (llama.cpp copies every step's
//!   logits to the host); tokens/s = N / time.
//! - Each test runs once untimed first (llama-bench's warm-up), then `repetitions` times; the
//!   figure is the mean of the repetitions' tokens/s and its sample standard deviation.
//!
//! The host's part of a step (recording the graph into the stream) is timed apart from the wait
//! for the GPU, for `bench -v`.

use std::time::{Duration, Instant};

use ggml_dawn::GgmlType;

use crate::decoder::{Decoder, KvCache};
use crate::error::{LlmError, Result};
use crate::ops::Ops;
use crate::tokenizer::TokenId;

/// One test: prompt processing or generation, at a depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    /// `pp N`: N prompt tokens.
    Prompt(usize),
    /// `tg N`: N generated tokens.
    Generate(usize),
}

impl Test {
    /// Tokens the test evaluates.
    pub fn tokens(self) -> usize {
        match self {
            Test::Prompt(n) | Test::Generate(n) => n,
        }
    }

    /// llama-bench's name of the test: `pp512`, `tg128`, `pp512 @ d4096`.
    pub fn name(self, depth: usize) -> String {
        let base = match self {
            Test::Prompt(n) => format!("pp{n}"),
            Test::Generate(n) => format!("tg{n}"),
        };
        if depth > 0 { format!("{base} @ d{depth}") } else { base }
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub test: Test,
    /// Tokens in the cache before the timed ones (llama-bench's `-d`).
    pub depth: usize,
    pub repetitions: usize,
    /// Tokens per step of prompt processing (llama-bench's `-ub`, 512).
    pub batch: usize,
    pub cache_type: GgmlType,
    /// The random tokens' seed.
    pub seed: u64,
    /// After the timed repetitions, one more with the device timing the work by kernel or by
    /// submit ([`ggml_dawn::profile`]), where the backend can.
    pub profile: Option<ggml_dawn::profile::ProfileMode>,
}

/// One test's figures.
#[derive(Debug, Clone)]
pub struct BenchResult {
    pub test: Test,
    pub depth: usize,
    /// Tokens per second of each repetition.
    pub samples_ts: Vec<f64>,
    /// Host time recording the steps, per token, averaged over the repetitions.
    pub host_per_token: Duration,
    /// The recording thread's CPU time over the same steps, per token (below the wall time
    /// when the thread waits or is descheduled; where the platform has a thread clock).
    pub host_cpu_per_token: Option<Duration>,
    /// Steps (graph evaluations) per repetition.
    pub steps: usize,
    /// GPU dispatches per token, where the backend counts them.
    pub dispatches_per_token: Option<f64>,
    /// Device memory the backend held at the end of the test, where it counts it.
    pub device_bytes: Option<crate::ops::DeviceBytes>,
    /// The profiled repetition's device time per kernel (over its `test.tokens()` tokens).
    pub profile: Option<ggml_dawn::profile::Profile>,
}

impl BenchResult {
    /// Mean tokens/s over the repetitions.
    pub fn avg_ts(&self) -> f64 {
        self.samples_ts.iter().sum::<f64>() / self.samples_ts.len().max(1) as f64
    }

    /// Sample standard deviation of the tokens/s (0 for one repetition), as llama-bench's.
    pub fn stddev_ts(&self) -> f64 {
        let n = self.samples_ts.len();
        if n < 2 {
            return 0.0;
        }
        let mean = self.avg_ts();
        let var = self.samples_ts.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        var.sqrt()
    }
}

/// A small seeded generator for the random tokens (splitmix64): the figures must not depend on
/// the text, only on its length.
struct Tokens(u64);

impl Tokens {
    fn next(&mut self, n_vocab: usize) -> TokenId {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z % n_vocab as u64) as TokenId
    }

    fn take(&mut self, n: usize, n_vocab: usize) -> Vec<TokenId> {
        (0..n).map(|_| self.next(n_vocab)).collect()
    }
}

/// Host time recording, steps taken.
#[derive(Debug, Default)]
struct Tally {
    host: Duration,
    host_cpu: Option<Duration>,
    steps: usize,
}

/// Evaluates `tokens` at `n_past` in micro-batches of `batch`, reading back the last token's
/// logits (which waits for the work).
fn eval<O: Ops>(
    decoder: &Decoder<O>,
    cache: &mut KvCache<O::Tensor>,
    tokens: &[TokenId],
    n_past: usize,
    batch: usize,
    tally: &mut Tally,
) -> Result<()> {
    let mut past = n_past;
    for chunk in tokens.chunks(batch) {
        let (start, cpu) = (Instant::now(), thread_cpu_time());
        let logits = decoder.forward(cache, chunk, past, Some(&[chunk.len() - 1]))?;
        tally.host += start.elapsed();
        if let (Some(a), Some(b)) = (cpu, thread_cpu_time()) {
            *tally.host_cpu.get_or_insert(Duration::ZERO) += b.saturating_sub(a);
        }
        tally.steps += 1;
        decoder.ops().read_f32(&logits)?;
        past += chunk.len();
    }
    Ok(())
}

/// Runs one test: a warm-up, then `repetitions` timed runs, each on a cleared cache filled to
/// `depth` first.
pub fn run<O: Ops>(decoder: &Decoder<O>, options: &BenchOptions) -> Result<BenchResult> {
    let n = options.test.tokens();
    if n == 0 || options.repetitions == 0 || options.batch == 0 {
        return Err(LlmError::InvalidArgument(
            "nothing to measure (0 tokens, repetitions or batch)".into(),
        ));
    }
    let n_ctx = options.depth + n;
    let n_vocab = decoder.params().n_vocab;
    let mut cache = decoder.new_cache(n_ctx, options.cache_type)?;
    let mut tokens = Tokens(options.seed);
    let mut samples_ts = Vec::with_capacity(options.repetitions);
    let mut host = Duration::ZERO;
    let mut host_cpu: Option<Duration> = None;
    let mut steps = 0;
    let mut dispatches: Option<u64> = None;
    // Round 0 is the warm-up (its first steps compile the kernels).
    for round in 0..=options.repetitions {
        let mut untimed = Tally::default();
        if options.depth > 0 {
            let fill = tokens.take(options.depth, n_vocab);
            eval(decoder, &mut cache, &fill, 0, options.batch, &mut untimed)?;
        }
        let mut tally = Tally::default();
        let first_dispatch = decoder.ops().dispatches();
        let start = Instant::now();
        repetition(decoder, &mut cache, options, &mut tokens, &mut tally)?;
        let secs = start.elapsed().as_secs_f64();
        if round > 0 {
            samples_ts.push(n as f64 / secs);
            host += tally.host;
            if let Some(c) = tally.host_cpu {
                *host_cpu.get_or_insert(Duration::ZERO) += c;
            }
            steps = tally.steps;
            if let (Some(a), Some(b)) = (first_dispatch, decoder.ops().dispatches()) {
                *dispatches.get_or_insert(0) += b - a;
            }
        }
    }
    let mut profile = None;
    if let Some(mode) = options.profile {
        if options.depth > 0 {
            let fill = tokens.take(options.depth, n_vocab);
            eval(decoder, &mut cache, &fill, 0, options.batch, &mut Tally::default())?;
        }
        if decoder.ops().start_profile(mode)? {
            repetition(decoder, &mut cache, options, &mut tokens, &mut Tally::default())?;
            profile = decoder.ops().finish_profile()?;
        }
    }
    let timed_tokens = (n * options.repetitions) as u32;
    Ok(BenchResult {
        test: options.test,
        depth: options.depth,
        samples_ts,
        host_per_token: host / timed_tokens.max(1),
        host_cpu_per_token: host_cpu.map(|c| c / timed_tokens.max(1)),
        steps,
        dispatches_per_token: dispatches.map(|d| d as f64 / f64::from(timed_tokens.max(1))),
        device_bytes: decoder.ops().device_bytes(),
        profile,
    })
}

/// The calling thread's CPU time, where the platform has a per-thread clock.
fn thread_cpu_time() -> Option<Duration> {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec for the call; the clock id is a constant.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// One repetition of the test on a cache filled to `options.depth`.
fn repetition<O: Ops>(
    decoder: &Decoder<O>,
    cache: &mut KvCache<O::Tensor>,
    options: &BenchOptions,
    tokens: &mut Tokens,
    tally: &mut Tally,
) -> Result<()> {
    let n_vocab = decoder.params().n_vocab;
    match options.test {
        Test::Prompt(n) => {
            let prompt = tokens.take(n, n_vocab);
            eval(decoder, cache, &prompt, options.depth, options.batch, tally)
        }
        Test::Generate(n) => {
            let mut token = tokens.next(n_vocab);
            for i in 0..n {
                eval(decoder, cache, &[token], options.depth + i, 1, tally)?;
                token = tokens.next(n_vocab);
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_llama_bench() {
        assert_eq!(Test::Prompt(512).name(0), "pp512");
        assert_eq!(Test::Generate(128).name(4096), "tg128 @ d4096");
    }

    #[test]
    fn statistics_are_the_sample_ones() {
        let r = BenchResult {
            test: Test::Generate(1),
            depth: 0,
            samples_ts: vec![10.0, 12.0, 14.0],
            host_per_token: Duration::ZERO,
            host_cpu_per_token: None,
            steps: 1,
            dispatches_per_token: None,
            device_bytes: None,
            profile: None,
        };
        assert_eq!(r.avg_ts(), 12.0);
        assert!((r.stddev_ts() - 2.0).abs() < 1e-12);
    }

    #[test]
    fn random_tokens_stay_in_the_vocabulary_and_repeat_with_the_seed() {
        let a = Tokens(7).take(1000, 49152);
        assert!(a.iter().all(|&t| (t as usize) < 49152));
        assert_eq!(a, Tokens(7).take(1000, 49152));
        assert_ne!(a, Tokens(8).take(1000, 49152));
    }
}
