//! `dawn-llm`: llama-family GGUF models on Dawn, with llama.cpp's flag names.
//!
//! Bad input (a missing or corrupt file, an unsupported architecture, a bad flag) exits with
//! status 2 and one line on standard error.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use ggml_dawn_llm::synth::{self, ModelShape, WeightType};
use ggml_dawn_llm::{LlmError, Model, SamplerParams, Tokenizer};

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
    /// Generate text from a prompt (needs the GPU decoder ops: not yet implemented).
    Generate(GenerateArgs),
    /// Perplexity over a text file, as llama.cpp's `llama-perplexity` (not yet implemented).
    Perplexity(PerplexityArgs),
    /// Prompt and generation speed, as llama.cpp's `llama-bench` (not yet implemented).
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
    /// The weight type: f16, q8_0, q4_0 or q4_K_M.
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

#[derive(Debug, Args)]
struct GenerateArgs {
    #[arg(short = 'm', long = "model", value_name = "FNAME")]
    model: PathBuf,
    #[arg(short = 'p', long = "prompt")]
    prompt: String,
    /// Tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 128)]
    n_predict: usize,
    /// Context size; 0 takes the model's.
    #[arg(short = 'c', long = "ctx-size", default_value_t = 4096)]
    ctx_size: usize,
    #[command(flatten)]
    sampling: SamplingArgs,
}

#[derive(Debug, Args)]
struct PerplexityArgs {
    #[arg(short = 'm', long = "model", value_name = "FNAME")]
    model: PathBuf,
    /// The text file.
    #[arg(short = 'f', long = "file", value_name = "FNAME")]
    file: PathBuf,
    #[arg(short = 'c', long = "ctx-size", default_value_t = 512)]
    ctx_size: usize,
    /// Chunks to evaluate; -1 for all.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    chunks: i64,
}

#[derive(Debug, Args)]
struct BenchArgs {
    #[arg(short = 'm', long = "model", value_name = "FNAME")]
    model: PathBuf,
    /// Prompt tokens.
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    n_prompt: usize,
    /// Generated tokens.
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    n_gen: usize,
    /// Repetitions.
    #[arg(short = 'r', long = "repetitions", default_value_t = 5)]
    repetitions: usize,
}

/// What the commands that need the GPU decoder say for now.
const NOT_YET: &str = "needs the GPU decoder ops";

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
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
        Command::Generate(args) => {
            let params = SamplerParams {
                top_k: args.sampling.top_k,
                top_p: args.sampling.top_p,
                min_p: args.sampling.min_p,
                temp: args.sampling.temp,
                min_keep: 0,
                seed: args.sampling.seed as u64,
            };
            params.validate()?;
            if args.sampling.seed < -1 {
                return Err(LlmError::InvalidArgument(format!("seed {}", args.sampling.seed)));
            }
            let model = Model::open(&args.model)?;
            Tokenizer::from_metadata(model.metadata())?.encode(&args.prompt, true, true)?;
            let _ = (args.n_predict, args.ctx_size);
            Err(LlmError::NotYetImplemented(NOT_YET.into()))
        }
        Command::Perplexity(args) => {
            if args.ctx_size < 2 {
                return Err(LlmError::InvalidArgument(format!("context size {}", args.ctx_size)));
            }
            if args.chunks < -1 || args.chunks == 0 {
                return Err(LlmError::InvalidArgument(format!("--chunks {}", args.chunks)));
            }
            let model = Model::open(&args.model)?;
            std::fs::metadata(&args.file).map_err(|e| io_error(&args.file, e))?;
            Tokenizer::from_metadata(model.metadata())?;
            Err(LlmError::NotYetImplemented(NOT_YET.into()))
        }
        Command::Bench(args) => {
            if args.repetitions == 0 || args.n_prompt + args.n_gen == 0 {
                return Err(LlmError::InvalidArgument(
                    "nothing to measure (-r 0, or -p 0 -n 0)".into(),
                ));
            }
            Model::open(&args.model)?;
            Err(LlmError::NotYetImplemented(NOT_YET.into()))
        }
    }
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
            "dawn-llm", "generate", "-m", "m.gguf", "-p", "hi", "-n", "8", "--temp", "0", "-s", "-1",
        ])
        .unwrap();
        assert!(
            matches!(cli.command, Command::Generate(ref a) if a.n_predict == 8 && a.sampling.temp == 0.0 && a.sampling.seed == -1)
        );
        assert!(Cli::try_parse_from(["dawn-llm", "bench", "-m", "m.gguf", "-p", "x"]).is_err());
        assert!(Cli::try_parse_from(["dawn-llm", "perplexity", "-m", "m.gguf"]).is_err());
        assert!(Cli::try_parse_from(["dawn-llm", "tokenize", "-m", "m.gguf"]).is_err());
    }
}
