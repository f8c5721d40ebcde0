//! `dawn-llm`: llama-family GGUF models on Dawn, with llama.cpp's flag names.
//!
//! Bad input (a missing or corrupt file, an unsupported architecture, a bad flag) exits with
//! status 2 and one line on standard error.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use ggml_dawn::GgmlType;
use ggml_dawn_llm::bench::{self, Test};
use ggml_dawn_llm::session::{self, Session};
use ggml_dawn_llm::synth::{self, ModelShape, WeightType};
use ggml_dawn_llm::{
    CpuOps, Decoder, GpuOps, LlmError, Model, Ops, Sampler, SamplerParams, TokenId, Tokenizer, perplexity as ppl,
};

#[derive(Debug, Parser)]
#[command(name = "dawn-llm", version, about = "llama-family GGUF models on Dawn (WebGPU)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the tokens of a text, as llama.cpp's `llama-tokenize`.
    Tokenize(TokenizeArgs),
    /// Write a model with seeded random weights in a real model's shape.
    Synth(SynthArgs),
    /// Generate text from a prompt, as llama.cpp's `llama-simple` (greedy at --temp 0).
    Generate(GenerateArgs),
    /// Perplexity or KL divergence over a text file, as llama.cpp's `llama-perplexity`.
    Perplexity(PerplexityArgs),
    /// Prompt and generation speed, as llama.cpp's `llama-bench` measures them.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
struct TokenizeArgs {
    /// The model (only its vocabulary is read).
    #[arg(short = 'm', long = "model", value_name = "FNAME")]
    model: PathBuf,
    /// The text.
    #[arg(
        short = 'p',
        long = "prompt",
        value_name = "PROMPT",
        required_unless_present = "file"
    )]
    prompt: Option<String>,
    /// Read the text from a file, byte for byte.
    #[arg(short = 'f', long = "file", value_name = "FNAME", conflicts_with = "prompt")]
    file: Option<PathBuf>,
    /// Print only the ids, as a list: [1, 2, 3].
    #[arg(long)]
    ids: bool,
    /// Do not add BOS even where the model wants it.
    #[arg(long = "no-bos")]
    no_bos: bool,
    /// Do not turn control tokens spelled in the text into those tokens.
    #[arg(long = "no-parse-special")]
    no_parse_special: bool,
    /// Take \n, \t, \\ … in the text literally.
    #[arg(long = "no-escape")]
    no_escape: bool,
    /// Print the number of tokens.
    #[arg(long = "show-count")]
    show_count: bool,
}

#[derive(Debug, Args)]
struct SynthArgs {
    /// The shape to copy: smollm2-135m, llama-3-8b or qwen2-0.5b.
    #[arg(long, value_name = "NAME")]
    like: String,
    /// The weight type: f16, q8_0, q4_0, q4_1 or q4_K_M.
    #[arg(long = "type", value_name = "TYPE")]
    ty: String,
    /// The file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// The weights' seed.
    #[arg(short = 's', long, default_value_t = 42)]
    seed: u64,
}

/// Sampling flags, with llama.cpp's names and defaults.
#[derive(Debug, Args)]
struct SamplingArgs {
    #[arg(long, default_value_t = 0.8)]
    temp: f32,
    #[arg(long = "top-k", default_value_t = 40)]
    top_k: i32,
    #[arg(long = "top-p", default_value_t = 0.95)]
    top_p: f32,
    #[arg(long = "min-p", default_value_t = 0.05)]
    min_p: f32,
    /// The seed; -1 picks one.
    #[arg(short = 's', long, default_value_t = -1, allow_negative_numbers = true)]
    seed: i64,
}

/// Where the decoder runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BackendChoice {
    /// The CPU reference ops (slow; the oracle the GPU is checked against).
    Cpu,
    /// The GPU through Dawn.
    Gpu,
}

/// Flags every command that runs the model takes.
#[derive(Debug, Args)]
struct RunArgs {
    #[arg(short = 'm', long = "model", value_name = "FNAME")]
    model: PathBuf,
    /// Where the decoder runs.
    #[arg(long, value_enum, default_value_t = BackendChoice::Gpu)]
    backend: BackendChoice,
    /// The KV cache's type: f16, f32, q8_0 or q4_0.
    #[arg(long = "cache-type", value_name = "TYPE", default_value = "f16")]
    cache_type: String,
    /// Tokens evaluated per step.
    #[arg(short = 'b', long = "batch-size", default_value_t = session::DEFAULT_BATCH)]
    batch_size: usize,
}

/// What `generate` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OutputFormat {
    /// The prompt and the generated text, streamed.
    Text,
    /// One line: `{"prompt": [ids], "generated": [ids], "text": "…"}`.
    Json,
}

#[derive(Debug, Args)]
struct GenerateArgs {
    #[command(flatten)]
    run: RunArgs,
    #[arg(short = 'p', long = "prompt")]
    prompt: String,
    /// Tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 128)]
    n_predict: usize,
    /// Context size; 0 takes the model's.
    #[arg(short = 'c', long = "ctx-size", default_value_t = 4096)]
    ctx_size: usize,
    #[arg(short = 'o', long = "output-format", value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
    #[command(flatten)]
    sampling: SamplingArgs,
}

#[derive(Debug, Args)]
struct PerplexityArgs {
    #[command(flatten)]
    run: RunArgs,
    /// The text file (not needed with --kl-divergence: the base file holds the tokens).
    #[arg(
        short = 'f',
        long = "file",
        value_name = "FNAME",
        required_unless_present = "kl_divergence"
    )]
    file: Option<PathBuf>,
    #[arg(short = 'c', long = "ctx-size", default_value_t = 512)]
    ctx_size: usize,
    /// Chunks to evaluate; -1 for all.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    chunks: i64,
    /// Write the base log-probabilities to this file (llama-perplexity's format); with
    /// --kl-divergence, read them from it.
    #[arg(long = "kl-divergence-base", value_name = "FNAME")]
    kl_divergence_base: Option<PathBuf>,
    /// Compare with the base file's log-probabilities: KL divergence, same top token.
    #[arg(long = "kl-divergence", requires = "kl_divergence_base")]
    kl_divergence: bool,
}

#[derive(Debug, Args)]
struct BenchArgs {
    #[arg(short = 'm', long = "model", value_name = "FNAME")]
    model: PathBuf,
    /// Prompt tokens, comma-separated for several tests (0 for none).
    #[arg(short = 'p', long = "n-prompt", value_delimiter = ',', default_value = "512")]
    n_prompt: Vec<usize>,
    /// Generated tokens, comma-separated for several tests (0 for none).
    #[arg(short = 'n', long = "n-gen", value_delimiter = ',', default_value = "128")]
    n_gen: Vec<usize>,
    /// Tokens already in the cache, comma-separated for several depths.
    #[arg(short = 'd', long = "n-depth", value_delimiter = ',', default_value = "0")]
    depth: Vec<usize>,
    /// Repetitions.
    #[arg(short = 'r', long = "repetitions", default_value_t = 5)]
    repetitions: usize,
    /// Prompt tokens per step.
    #[arg(long = "ubatch-size", visible_alias = "ub", default_value_t = session::DEFAULT_BATCH)]
    ubatch: usize,
    /// The KV cache's type: f16, f32, q8_0 or q4_0.
    #[arg(
        long = "cache-type",
        visible_alias = "ctk",
        value_name = "TYPE",
        default_value = "f16"
    )]
    cache_type: String,
    /// Where the decoder runs.
    #[arg(long, value_enum, default_value_t = BackendChoice::Gpu)]
    backend: BackendChoice,
    /// The table (md) or llama-bench's JSON fields, one array (json) or one object a line (jsonl).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = BenchFormat::Md)]
    output: BenchFormat,
    /// Also print the host's time per token and the steps per test.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// After each test's repetitions, one more with the GPU timing the work (timestamp queries):
    /// `kernels` (the default) by kernel, each dispatch in a pass of its own; `submits` each
    /// submit's pass as it runs, whose spans add up to the GPU's time a token. Printed to stderr
    /// (md) or under `profile` (json).
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "kernels")]
    profile: Option<ProfileArg>,
    /// Dispatches the GPU gets in the first submit of a step and in a submit at most
    /// (`FIRST,MAX`; the backend's default when absent).
    #[arg(long = "submit-dispatches", value_name = "FIRST,MAX")]
    submit_dispatches: Option<String>,
}

/// What `bench --profile` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ProfileArg {
    Kernels,
    Submits,
}

impl From<ProfileArg> for ggml_dawn::profile::ProfileMode {
    fn from(arg: ProfileArg) -> Self {
        match arg {
            ProfileArg::Kernels => ggml_dawn::profile::ProfileMode::Kernels,
            ProfileArg::Submits => ggml_dawn::profile::ProfileMode::Submits,
        }
    }
}

/// What `bench` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BenchFormat {
    Md,
    Json,
    Jsonl,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(LlmError::Interrupted) => {
            eprintln!("interrupted");
            ExitCode::from(130)
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<(), LlmError> {
    match cli.command {
        Command::Tokenize(args) => tokenize(args),
        Command::Synth(args) => synth(args),
        Command::Generate(args) => generate(args),
        Command::Perplexity(args) => perplexity(args),
        Command::Bench(args) => bench(args),
    }
}

/// Set by SIGINT: the running command stops at its next token or chunk.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Makes Ctrl-C stop the command at its next step rather than kill it mid-write.
fn catch_interrupt() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe, and it is a
    // plain `extern "C" fn(c_int)` as `signal` expects.
    unsafe {
        libc::signal(libc::SIGINT, on_interrupt as *const () as libc::sighandler_t);
    }
}

fn check_interrupt() -> Result<(), LlmError> {
    if INTERRUPTED.load(Ordering::Relaxed) {
        Err(LlmError::Interrupted)
    } else {
        Ok(())
    }
}

fn cache_type(name: &str) -> Result<GgmlType, LlmError> {
    match name {
        "f16" => Ok(GgmlType::F16),
        "f32" => Ok(GgmlType::F32),
        "q8_0" => Ok(GgmlType::Q8_0),
        "q4_0" => Ok(GgmlType::Q4_0),
        other => Err(LlmError::InvalidArgument(format!(
            "cache type `{other}` (f16, f32, q8_0 or q4_0)"
        ))),
    }
}

/// The model and its tokenizer, checked.
fn open(run: &RunArgs) -> Result<(Model, Tokenizer), LlmError> {
    cache_type(&run.cache_type)?;
    if run.batch_size == 0 {
        return Err(LlmError::InvalidArgument("batch size 0".into()));
    }
    let model = Model::open(&run.model)?;
    let tokenizer = Tokenizer::from_metadata(model.metadata())?;
    Ok((model, tokenizer))
}

/// `FIRST,MAX` as a submit policy.
fn submit_policy(text: &str) -> Result<ggml_dawn::exec::SubmitPolicy, LlmError> {
    let bad = || LlmError::InvalidArgument(format!("--submit-dispatches {text}: FIRST,MAX (two counts)"));
    let (first, max) = text.split_once(',').ok_or_else(bad)?;
    let policy = ggml_dawn::exec::SubmitPolicy {
        first: first.trim().parse().map_err(|_| bad())?,
        max: max.trim().parse().map_err(|_| bad())?,
    };
    policy.check().map_err(|e| LlmError::InvalidArgument(e.to_string()))?;
    Ok(policy)
}

/// A GPU context for the decoder.
fn gpu_ops(model: &Model) -> Result<GpuOps, LlmError> {
    gpu_ops_with(gpu_options(model))
}

/// The context options for `model`: the backend's, with the decode step's submit policy
/// (`ggml_dawn_llm::gpu::SUBMIT_POLICIES`).
fn gpu_options(model: &Model) -> ggml_dawn::ContextOptions {
    let layer_bytes = model.weight_bytes() as u64 / model.config.n_layer.max(1) as u64;
    ggml_dawn::ContextOptions {
        submit: ggml_dawn_llm::gpu::submit_policy(layer_bytes),
        ..Default::default()
    }
}

/// A GPU context for the decoder, made with `options` and the tuning overrides of the
/// environment (`GGML_DAWN_MUL_MAT`, `GGML_DAWN_FA`, as `backend-ops` reads them).
fn gpu_ops_with(mut options: ggml_dawn::ContextOptions) -> Result<GpuOps, LlmError> {
    options.tuning = ggml_dawn::tuning::Overrides::from_env().map_err(LlmError::InvalidArgument)?;
    let ctx = ggml_dawn::GpuContext::new(options).map_err(|e| LlmError::Backend(e.to_string()))?;
    let ops = GpuOps::new(ctx);
    match std::env::var(FUSION_ENV).as_deref() {
        Err(_) => Ok(ops),
        Ok("on") => Ok(ops.with_fusion(true)),
        Ok("off") => Ok(ops.with_fusion(false)),
        Ok(other) => Err(LlmError::InvalidArgument(format!("{FUSION_ENV}={other}: on or off"))),
    }
}

/// `on` or `off`: the steps the backend can fuse run fused or as separate ops (the same
/// results), beside the default per class of device (`gpu::fuses_by_default`).
const FUSION_ENV: &str = "DAWN_LLM_FUSION";

fn generate(args: GenerateArgs) -> Result<(), LlmError> {
    let params = SamplerParams {
        top_k: args.sampling.top_k,
        top_p: args.sampling.top_p,
        min_p: args.sampling.min_p,
        temp: args.sampling.temp,
        min_keep: 0,
        seed: match args.sampling.seed {
            -1 => rand_seed(),
            s if s < -1 => return Err(LlmError::InvalidArgument(format!("seed {s}"))),
            s => s as u64,
        },
    };
    params.validate()?;
    let (model, tokenizer) = open(&args.run)?;
    let prompt = tokenizer.encode(&args.prompt, true, true)?;
    let n_ctx = if args.ctx_size == 0 {
        model.config.n_ctx_train
    } else {
        args.ctx_size
    };
    if prompt.is_empty() {
        return Err(LlmError::InvalidArgument("the prompt has no tokens".into()));
    }
    if prompt.len() >= n_ctx {
        return Err(LlmError::InvalidArgument(format!(
            "the prompt has {} tokens, more than the context of {n_ctx} leaves room for; raise -c",
            prompt.len()
        )));
    }
    catch_interrupt();
    let sampler = Sampler::new(params)?;
    match args.run.backend {
        BackendChoice::Cpu => {
            let decoder = Decoder::load(&model, CpuOps)?;
            run_generate(&decoder, &tokenizer, &prompt, n_ctx, &args, sampler)
        }
        BackendChoice::Gpu => {
            let decoder = Decoder::load(&model, gpu_ops(&model)?)?;
            run_generate(&decoder, &tokenizer, &prompt, n_ctx, &args, sampler)
        }
    }
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn run_generate<O: Ops>(
    decoder: &Decoder<O>,
    tokenizer: &Tokenizer,
    prompt: &[TokenId],
    n_ctx: usize,
    args: &GenerateArgs,
    sampler: Sampler,
) -> Result<(), LlmError> {
    let mut session =
        Session::new(decoder, n_ctx, cache_type(&args.run.cache_type)?)?.with_batch_size(args.run.batch_size);
    let mut out = std::io::stdout().lock();
    let text = args.output == OutputFormat::Text;
    if text {
        for &id in prompt {
            out.write_all(&tokenizer.token_to_piece(id, true))?;
        }
        out.flush()?;
    }
    // Stop where the context ends, as llama.cpp's examples do.
    let n = args.n_predict.min(n_ctx - prompt.len());
    let start = Instant::now();
    let mut generated = Vec::new();
    let mut bytes = Vec::new();
    let mut interrupted = false;
    for next in session.generate(prompt, sampler, n) {
        let id = next?;
        if tokenizer.is_end_of_generation(id) {
            break;
        }
        generated.push(id);
        let piece = tokenizer.token_to_piece(id, true);
        if text {
            out.write_all(&piece)?;
            out.flush()?;
        }
        bytes.extend(piece);
        if check_interrupt().is_err() {
            interrupted = true;
            break;
        }
    }
    if text {
        writeln!(out)?;
    } else {
        // The keys in the documented order (a serde_json map would sort them).
        let json = |v: serde_json::Value| v.to_string();
        let line = format!(
            "{{\"prompt\": {}, \"generated\": {}, \"text\": {}}}",
            json(serde_json::json!(prompt)),
            json(serde_json::json!(generated)),
            json(serde_json::json!(String::from_utf8_lossy(&bytes)))
        );
        writeln!(out, "{line}")?;
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "generate: {} tokens in {secs:.2} s, {:.2} t/s ({})",
        generated.len(),
        generated.len() as f64 / secs,
        decoder.ops().name()
    );
    if interrupted {
        Err(LlmError::Interrupted)
    } else {
        Ok(())
    }
}

fn bench(args: BenchArgs) -> Result<(), LlmError> {
    let tests: Vec<Test> = args
        .n_prompt
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| Test::Prompt(n))
        .chain(args.n_gen.iter().filter(|&&n| n > 0).map(|&n| Test::Generate(n)))
        .collect();
    if args.repetitions == 0 || tests.is_empty() {
        return Err(LlmError::InvalidArgument(
            "nothing to measure (-r 0, or -p 0 -n 0)".into(),
        ));
    }
    if args.ubatch == 0 {
        return Err(LlmError::InvalidArgument("batch size 0".into()));
    }
    let cache_type = cache_type(&args.cache_type)?;
    let model = Model::open(&args.model)?;
    catch_interrupt();
    match args.backend {
        BackendChoice::Cpu => run_bench(&Decoder::load(&model, CpuOps)?, &model, &args, &tests, cache_type),
        BackendChoice::Gpu => {
            let mut options = gpu_options(&model);
            if let Some(text) = &args.submit_dispatches {
                options.submit = submit_policy(text)?;
            }
            run_bench(
                &Decoder::load(&model, gpu_ops_with(options)?)?,
                &model,
                &args,
                &tests,
                cache_type,
            )
        }
    }
}

/// A profiled repetition as a table: device time per token by kernel, the busiest first.
fn profile_table(test: &str, p: &ggml_dawn::profile::Profile, tokens: usize) -> String {
    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / tokens.max(1) as f64;
    if p.kernels.is_empty() {
        return format!(
            "profile {test}: GPU {:.1} us a token over {:.1} submits (each submit's pass, begin to end)\n",
            per(p.span),
            p.submits as f64 / tokens.max(1) as f64,
        );
    }
    let mut s = format!(
        "profile {test}: GPU {:.1} us a token in kernels, {:.1} us from each submit's first kernel to its last ({:.1} dispatches, {:.1} submits a token)\n| kernel | dispatches/token | us/token | share |\n| --- | ---: | ---: | ---: |\n",
        per(p.busy()),
        per(p.span),
        p.dispatches() as f64 / tokens.max(1) as f64,
        p.submits as f64 / tokens.max(1) as f64,
    );
    let busy = p.busy().as_secs_f64().max(f64::MIN_POSITIVE);
    let mut rows: Vec<_> = p.kernels.iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1.time));
    for (name, k) in rows {
        s += &format!(
            "| {name} | {:.1} | {:.1} | {:.1}% |\n",
            k.dispatches as f64 / tokens.max(1) as f64,
            per(k.time),
            100.0 * k.time.as_secs_f64() / busy
        );
    }
    s
}

/// A profiled repetition in JSON: per token, by kernel.
fn profile_json(p: &ggml_dawn::profile::Profile, tokens: usize) -> serde_json::Value {
    let n = tokens.max(1) as f64;
    let kernels: serde_json::Map<String, serde_json::Value> = p
        .kernels
        .iter()
        .map(|(name, k)| {
            (
                name.to_string(),
                serde_json::json!({
                    "dispatches_per_token": k.dispatches as f64 / n,
                    "us_per_token": k.time.as_secs_f64() * 1e6 / n,
                }),
            )
        })
        .collect();
    serde_json::json!({
        "busy_us_per_token": p.busy().as_secs_f64() * 1e6 / n,
        "span_us_per_token": p.span.as_secs_f64() * 1e6 / n,
        "submits_per_token": p.submits as f64 / n,
        "kernels": kernels,
    })
}

fn run_bench<O: Ops>(
    decoder: &Decoder<O>,
    model: &Model,
    args: &BenchArgs,
    tests: &[Test],
    cache_type: GgmlType,
) -> Result<(), LlmError> {
    let size = model.weight_bytes();
    let params: usize = model.tensors().iter().map(|t| t.ne.iter().product::<usize>()).sum();
    let name = format!(
        "{} {} {}",
        model.config.architecture.name(),
        human_params(params),
        model.file_type_name()
    );
    let backend = decoder.ops().name();
    let mut out = std::io::stdout().lock();
    if args.output == BenchFormat::Md {
        writeln!(out, "| model | size | params | backend | type_k | test | t/s |")?;
        writeln!(out, "| --- | ---: | ---: | --- | --- | ---: | ---: |")?;
    }
    let mut json = Vec::new();
    for &depth in &args.depth {
        for &test in tests {
            check_interrupt()?;
            let options = bench::BenchOptions {
                test,
                depth,
                repetitions: args.repetitions,
                batch: args.ubatch,
                cache_type,
                seed: 1234,
                profile: args.profile.map(Into::into),
            };
            let r = bench::run(decoder, &options)?;
            let host_us = r.host_per_token.as_secs_f64() * 1e6;
            match args.output {
                BenchFormat::Md => {
                    writeln!(
                        out,
                        "| {name} | {:.2} MiB | {:.2} M | {backend} | {} | {} | {:.2} ± {:.2} |",
                        size as f64 / (1024.0 * 1024.0),
                        params as f64 / 1e6,
                        cache_type,
                        test.name(depth),
                        r.avg_ts(),
                        r.stddev_ts()
                    )?;
                    if let Some(p) = &r.profile {
                        eprint!("{}", profile_table(&test.name(depth), p, test.tokens()));
                    }
                    if args.verbose {
                        eprintln!(
                            "bench: {}: host {host_us:.1} us a token recording{}, {} steps a repetition{}",
                            test.name(depth),
                            r.host_cpu_per_token
                                .map(|c| format!(" ({:.1} us of it on the CPU)", c.as_secs_f64() * 1e6))
                                .unwrap_or_default(),
                            r.steps,
                            r.dispatches_per_token
                                .map(|d| format!(", {d:.1} dispatches a token"))
                                .unwrap_or_default()
                        );
                        if let Some(m) = r.device_bytes {
                            let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
                            eprintln!(
                                "bench: {}: device memory {:.0} MiB: weights and activations {:.0} (weights {:.0}), KV cache {:.0}, scratch {:.0}",
                                test.name(depth),
                                mib(m.pool + m.zeroed + m.scratch),
                                mib(m.pool),
                                mib(size as u64),
                                mib(m.zeroed),
                                mib(m.scratch)
                            );
                        }
                    }
                }
                BenchFormat::Json | BenchFormat::Jsonl => {
                    let (n_prompt, n_gen) = match test {
                        Test::Prompt(n) => (n, 0),
                        Test::Generate(n) => (0, n),
                    };
                    let v = serde_json::json!({
                        "version": env!("CARGO_PKG_VERSION"),
                        "model_filename": model.path().display().to_string(),
                        "model_type": name,
                        "model_size": size,
                        "model_n_params": params,
                        "backends": "Dawn",
                        "gpu_info": backend,
                        "n_ubatch": args.ubatch,
                        "type_k": cache_type.to_string(),
                        "type_v": cache_type.to_string(),
                        "n_prompt": n_prompt,
                        "n_gen": n_gen,
                        "n_depth": depth,
                        "avg_ts": r.avg_ts(),
                        "stddev_ts": r.stddev_ts(),
                        "samples_ts": r.samples_ts,
                        "host_us_per_token": host_us,
                        "host_cpu_us_per_token": r.host_cpu_per_token.map(|c| c.as_secs_f64() * 1e6),
                        "steps": r.steps,
                        "dispatches_per_token": r.dispatches_per_token,
                        "device_bytes": r.device_bytes.map(|m| serde_json::json!({
                            "pool": m.pool, "kv_cache": m.zeroed, "scratch": m.scratch,
                        })),
                        "profile": r.profile.as_ref().map(|p| profile_json(p, test.tokens())),
                    });
                    if args.output == BenchFormat::Jsonl {
                        writeln!(out, "{v}")?;
                    } else {
                        json.push(v);
                    }
                }
            }
            out.flush()?;
        }
    }
    if args.output == BenchFormat::Json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&json).map_err(|e| LlmError::Backend(e.to_string()))?
        )?;
    }
    Ok(())
}

/// llama-bench's parameter count in its model column: `135M`, `8B`.
fn human_params(n: usize) -> String {
    if n >= 1_000_000_000 {
        format!("{:.0}B", n as f64 / 1e9)
    } else {
        format!("{:.0}M", n as f64 / 1e6)
    }
}

fn perplexity(args: PerplexityArgs) -> Result<(), LlmError> {
    let max_chunks = match args.chunks {
        -1 => None,
        c if c > 0 => Some(c as usize),
        c => return Err(LlmError::InvalidArgument(format!("--chunks {c}"))),
    };
    let (model, tokenizer) = open(&args.run)?;
    catch_interrupt();
    match args.run.backend {
        BackendChoice::Cpu => run_perplexity(&Decoder::load(&model, CpuOps)?, &tokenizer, &args, max_chunks),
        BackendChoice::Gpu => run_perplexity(&Decoder::load(&model, gpu_ops(&model)?)?, &tokenizer, &args, max_chunks),
    }
}

fn run_perplexity<O: Ops>(
    decoder: &Decoder<O>,
    tokenizer: &Tokenizer,
    args: &PerplexityArgs,
    max_chunks: Option<usize>,
) -> Result<(), LlmError> {
    if args.kl_divergence {
        let base = args.kl_divergence_base.as_deref().unwrap_or(Path::new(""));
        return run_kl_divergence(decoder, tokenizer, base, max_chunks, &args.run);
    }
    let path = args.file.as_deref().unwrap_or(Path::new(""));
    let raw = std::fs::read(path).map_err(|e| io_error(path, e))?;
    let mut text =
        String::from_utf8(raw).map_err(|_| LlmError::InvalidArgument(format!("{}: not UTF-8", path.display())))?;
    // llama.cpp's -f drops one trailing newline.
    if text.ends_with('\n') {
        text.pop();
    }
    // llama-perplexity tokenizes with BOS and without parsing special tokens.
    let tokens = tokenizer.encode(&text, true, false)?;
    let n_ctx = args.ctx_size;
    let n_chunk = ppl::chunk_count(tokens.len(), n_ctx, max_chunks)?;
    let mut base = match &args.kl_divergence_base {
        Some(p) => {
            let mut w = BufWriter::new(File::create(p).map_err(|e| io_error(p, e))?);
            ppl::BaseHeader {
                n_ctx,
                n_vocab: decoder.params().n_vocab,
                n_chunk,
                tokens: tokens.clone(),
            }
            .write(&mut w)?;
            Some(w)
        }
        None => None,
    };
    eprintln!(
        "perplexity: {} tokens, {n_chunk} chunks of {n_ctx}, {} backend",
        tokens.len(),
        decoder.ops().name()
    );
    let bar = progress(n_chunk);
    let mut session =
        Session::new(decoder, n_ctx, cache_type(&args.run.cache_type)?)?.with_batch_size(args.run.batch_size);
    let bos = tokenizer.adds_bos().then_some(tokenizer.special().bos).flatten();
    let first = n_ctx / 2;
    let n_vocab = decoder.params().n_vocab;
    let mut nll = ppl::Nll::default();
    let mut line = String::new();
    for i in 0..n_chunk {
        check_interrupt()?;
        session.clear();
        let input = ppl::chunk_input(&tokens, n_ctx, i, bos);
        let logits = session.eval_from(&input, first)?;
        let chunk = &tokens[i * n_ctx..(i + 1) * n_ctx];
        let scored = ppl::scored_per_chunk(n_ctx);
        let mut rows = vec![0u16; scored * ppl::row_len(n_vocab)];
        for (r, row) in logits.chunks_exact(n_vocab).take(scored).enumerate() {
            nll.add(ppl::nll(row, chunk[first + r + 1]));
            if base.is_some() {
                let len = ppl::row_len(n_vocab);
                ppl::quantize_row(row, &mut rows[r * len..(r + 1) * len]);
            }
        }
        if let Some(w) = base.as_mut() {
            ppl::write_chunk(w, &rows)?;
        }
        line.push_str(&format!("[{}]{:.4},", i + 1, nll.ppl()));
        bar.inc(1);
    }
    bar.finish_and_clear();
    if let Some(mut w) = base {
        w.flush()?;
    }
    println!("{line}");
    match nll.estimate() {
        (ppl, Some(err)) => println!("Final estimate: PPL = {ppl:.4} +/- {err:.5}"),
        (ppl, None) => println!("Final estimate: PPL = {ppl:.4} (no uncertainty: the variance is not positive)"),
    }
    Ok(())
}

fn progress(n: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(n as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} chunks, {elapsed} (eta {eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

fn run_kl_divergence<O: Ops>(
    decoder: &Decoder<O>,
    tokenizer: &Tokenizer,
    base_path: &Path,
    max_chunks: Option<usize>,
    run: &RunArgs,
) -> Result<(), LlmError> {
    let mut r = BufReader::new(File::open(base_path).map_err(|e| io_error(base_path, e))?);
    let header = ppl::BaseHeader::read(&mut r)?;
    let n_vocab = decoder.params().n_vocab;
    if header.n_vocab != n_vocab {
        return Err(LlmError::InvalidArgument(format!(
            "the base file's vocabulary of {} is not the model's {n_vocab}",
            header.n_vocab
        )));
    }
    if let Some(&bad) = header.tokens.iter().find(|&&t| t as usize >= n_vocab) {
        return Err(LlmError::InvalidArgument(format!(
            "the base file holds token {bad}, outside the vocabulary"
        )));
    }
    let n_ctx = header.n_ctx;
    let n_chunk = max_chunks.map_or(header.n_chunk, |m| m.min(header.n_chunk));
    let mut session = Session::new(decoder, n_ctx, cache_type(&run.cache_type)?)?.with_batch_size(run.batch_size);
    let bos = tokenizer.adds_bos().then_some(tokenizer.special().bos).flatten();
    let first = n_ctx / 2;
    let len = ppl::row_len(n_vocab);
    let mut stats = ppl::KlStats::default();
    eprintln!(
        "kl-divergence: {n_chunk} chunks of {n_ctx}, {} backend",
        decoder.ops().name()
    );
    println!(
        "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p"
    );
    for i in 0..n_chunk {
        check_interrupt()?;
        let rows = ppl::read_chunk(&mut r, n_ctx, n_vocab)?;
        session.clear();
        let input = ppl::chunk_input(&header.tokens, n_ctx, i, bos);
        let logits = session.eval_from(&input, first)?;
        let chunk = &header.tokens[i * n_ctx..(i + 1) * n_ctx];
        for (k, row) in logits
            .chunks_exact(n_vocab)
            .take(ppl::scored_per_chunk(n_ctx))
            .enumerate()
        {
            stats.add(row, &rows[k * len..(k + 1) * len], chunk[first + k + 1]);
        }
        println!("{}", stats.chunk_line(i + 1));
    }
    println!();
    println!("{}", stats.summary());
    Ok(())
}

fn io_error(path: &Path, err: std::io::Error) -> LlmError {
    LlmError::Io(std::io::Error::new(err.kind(), format!("{}: {err}", path.display())))
}

fn tokenize(args: TokenizeArgs) -> Result<(), LlmError> {
    let tokenizer = Tokenizer::from_gguf(&args.model)?;
    let raw = match (&args.prompt, &args.file) {
        (_, Some(path)) => std::fs::read(path).map_err(|e| io_error(path, e))?,
        (Some(p), None) => p.clone().into_bytes(),
        (None, None) => return Err(LlmError::InvalidArgument("give -p or -f".into())),
    };
    let bytes = if args.no_escape { raw } else { process_escapes(&raw) };
    let text = String::from_utf8(bytes).map_err(|_| LlmError::InvalidArgument("the text is not UTF-8".into()))?;
    // llama-tokenize passes `add_special` = the model wants BOS and --no-bos is absent; EOS
    // follows the same switch.
    let add_special = tokenizer.adds_bos() && !args.no_bos;
    let ids = tokenizer.encode(&text, add_special, !args.no_parse_special)?;
    let mut out = std::io::stdout().lock();
    if args.ids {
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        writeln!(out, "[{}]", list.join(", "))?;
    } else {
        for &id in &ids {
            let piece = tokenizer.token_to_piece(id, true);
            writeln!(out, "{id:6} -> '{}'", String::from_utf8_lossy(&piece))?;
        }
    }
    if args.show_count {
        writeln!(out, "Total number of tokens: {}", ids.len())?;
    }
    Ok(())
}

fn synth(args: SynthArgs) -> Result<(), LlmError> {
    let shape = ModelShape::like(&args.like)?;
    let wtype: WeightType = args.ty.parse()?;
    let partial = args.output.with_extension("gguf.partial");
    let file = File::create(&partial).map_err(|e| io_error(&partial, e))?;
    let start = Instant::now();
    let mut last_tenth = 0;
    let result = synth::write_model(
        &shape,
        wtype,
        args.seed,
        BufWriter::with_capacity(8 << 20, file),
        |done, total| {
            let tenth = done * 10 / total;
            if tenth > last_tenth {
                last_tenth = tenth;
                eprintln!("synth: {done}/{total} tensors ({:.1} s)", start.elapsed().as_secs_f64());
            }
        },
    );
    let written = match result {
        Ok(w) => w,
        Err(err) => {
            let _ = std::fs::remove_file(&partial);
            return Err(err);
        }
    };
    std::fs::rename(&partial, &args.output).map_err(|e| io_error(&args.output, e))?;
    println!(
        "{}: synthetic {} ({wtype}), {} tensors, {:.1} MB, seed {}, {:.1} s",
        args.output.display(),
        shape.name,
        written.tensors,
        written.bytes as f64 / 1e6,
        args.seed,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// llama.cpp's escapes: `\n \r \t \' \" \\` and `\xHH`; any other backslash stays.
fn process_escapes(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'\\' && i + 1 < input.len() {
            i += 1;
            match input[i] {
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'\'' => out.push(b'\''),
                b'"' => out.push(b'"'),
                b'\\' => out.push(b'\\'),
                b'x' if i + 2 < input.len() && input[i + 1].is_ascii_hexdigit() && input[i + 2].is_ascii_hexdigit() => {
                    let hex = std::str::from_utf8(&input[i + 1..i + 3]).unwrap_or("00");
                    out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                    i += 2;
                }
                other => {
                    out.push(b'\\');
                    out.push(other);
                }
            }
        } else {
            out.push(input[i]);
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_llama_cpps() {
        assert_eq!(process_escapes(br"a\nb\tc\\d\x41\q"), b"a\nb\tc\\dA\\q");
        // `\x` needs two hex digits after it (and, as in llama.cpp, a byte after those).
        assert_eq!(process_escapes(br"\x4"), br"\x4");
        assert_eq!(process_escapes(b"end\\"), b"end\\");
    }

    #[test]
    fn the_skeletons_parse_llama_cpp_flags() {
        let cli = Cli::try_parse_from([
            "dawn-llm", "generate", "-m", "m.gguf", "-p", "hi", "-n", "8", "--temp", "0", "-s", "-1", "-o", "json",
        ])
        .unwrap();
        assert!(
            matches!(cli.command, Command::Generate(ref a) if a.n_predict == 8 && a.output == OutputFormat::Json && a.sampling.temp == 0.0 && a.sampling.seed == -1)
        );
        assert!(Cli::try_parse_from(["dawn-llm", "bench", "-m", "m.gguf", "-p", "x"]).is_err());
        assert!(Cli::try_parse_from(["dawn-llm", "perplexity", "-m", "m.gguf"]).is_err());
        assert!(Cli::try_parse_from(["dawn-llm", "tokenize", "-m", "m.gguf"]).is_err());
    }
}
