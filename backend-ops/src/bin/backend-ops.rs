//! `backend-ops`: the backend's command-line tool, modelled on ggml's `test-backend-ops`, so
//! that results compare line by line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use ggml_dawn::tuning::{FLASH_ATTN_ENV, MUL_MAT_ENV, Overrides};
use ggml_dawn::{ContextOptions, GpuContext};
use ggml_dawn_bench::cases::Case;
use ggml_dawn_bench::compare::{self, Entry, Mode, Outcome, Row, upstream::UpstreamCommand};
use ggml_dawn_bench::golden::{self, Verdict};
use ggml_dawn_bench::harness::{self, Status};
use ggml_dawn_bench::progress::Progress;
use ggml_dawn_bench::suites::{self, Suite};
use ggml_dawn_bench::{case_lists, selfcheck};
use regex::Regex;
use serde_json::json;

#[derive(Debug, Parser)]
#[command(
    name = "backend-ops",
    version,
    about = "ggml operations on Dawn: tests, timings and golden checks"
)]
struct Cli {
    #[command(flatten)]
    device: DeviceArgs,
    /// Output format.
    #[arg(long, global = true, value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    /// One JSON object a line.
    Json,
}

#[derive(Debug, Args)]
struct DeviceArgs {
    /// Keep Dawn's validation and robustness on (slower; for debugging).
    #[arg(long, global = true)]
    safe_mode: bool,
    /// Ignore the adapter's subgroup matrices (exercises the fallback paths).
    #[arg(long, global = true)]
    no_subgroup_matrix: bool,
    /// Force a subgroup-matrix config, as MxNxK (for example 16x8x16).
    #[arg(long, global = true, value_parser = parse_config)]
    config: Option<(u32, u32, u32)>,
    /// Force a Dawn device toggle on (repeatable), e.g. `--toggle dump_shaders`. Of the toggles
    /// that remove WebGPU guarantees, only those the backend upholds are accepted (the ones it
    /// sets by default, and `disable_lazy_clear_for_mapped_at_creation_buffer`).
    #[arg(long = "toggle", global = true)]
    enable_toggles: Vec<String>,
    /// Force a Dawn device toggle off (repeatable), e.g. `--no-toggle skip_validation`. Of the
    /// toggles whose absence removes a WebGPU guarantee, only `lazy_clear_resource_on_first_use`
    /// is accepted.
    #[arg(long = "no-toggle", global = true)]
    disable_toggles: Vec<String>,
    /// Only an adapter of this Dawn backend (default: Dawn's choice). `null`, Dawn's Null
    /// backend, computes nothing: it is used only when named here, never as a GPU found.
    #[arg(long, global = true, value_enum)]
    dawn_backend: Option<DawnBackend>,
    /// The adapter to run on: its number in `info`'s list of adapters, or a part of its device
    /// name (default: Dawn's choice).
    #[arg(long, global = true)]
    adapter: Option<ggml_dawn::AdapterChoice>,
}

/// The Dawn backends `--dawn-backend` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DawnBackend {
    Vulkan,
    Metal,
    D3d12,
    D3d11,
    Opengl,
    Opengles,
    /// Dawn's Null backend: accepts every call, computes nothing (for testing the tool itself).
    Null,
}

impl DawnBackend {
    fn backend_type(self) -> dawn::BackendType {
        match self {
            DawnBackend::Vulkan => dawn::BackendType::Vulkan,
            DawnBackend::Metal => dawn::BackendType::Metal,
            DawnBackend::D3d12 => dawn::BackendType::D3D12,
            DawnBackend::D3d11 => dawn::BackendType::D3D11,
            DawnBackend::Opengl => dawn::BackendType::OpenGl,
            DawnBackend::Opengles => dawn::BackendType::OpenGles,
            DawnBackend::Null => dawn::BackendType::Null,
        }
    }
}

#[derive(Debug, Args)]
struct Selection {
    /// Only this op (MUL_MAT, FLASH_ATTN_EXT, or a decoder op: GET_ROWS, RMS_NORM, ROPE, …).
    #[arg(short = 'o', long = "op")]
    op: Option<String>,
    /// Only cases whose string matches this regular expression.
    #[arg(short = 'p', long = "pattern")]
    pattern: Option<String>,
    /// Run this case (upstream's case string; omitted parameters take upstream's defaults).
    /// Repeatable; replaces the default list.
    #[arg(long = "case")]
    cases: Vec<String>,
    /// Read cases from this file (one a line). Repeatable; replaces the default list.
    #[arg(long = "cases-file")]
    files: Vec<PathBuf>,
    /// Run this named suite's cases (`backend-ops suites` lists them); -o and -p narrow it.
    /// In perf, its time per case is the default of --min-time.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["cases", "files"])]
    suite: Option<String>,
    /// Also print the path and tiles chosen for each case.
    #[arg(short = 'v', long)]
    verbose: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The adapter, its features, limits and subgroup-matrix configs; then one checked compute pass.
    Info,
    /// Write every shader variant the planners produce for Apple GPUs (`ggml_dawn::variants`;
    /// 8x8x8 subgroup matrices with f16 and f32 results, and none) as WGSL files into a folder,
    /// with `index.tsv` (file, device, op, path, variant key); no GPU is used. `cargo xtask
    /// msl-check` translates them to MSL.
    Shaders {
        /// The folder (created; must be empty or absent).
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Run cases on the GPU and compare with the CPU reference (default: upstream's supported lists).
    Test {
        #[command(flatten)]
        selection: Selection,
        /// Seed of the random inputs.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Time cases as upstream does (default: upstream's perf cases).
    Perf {
        #[command(flatten)]
        selection: Selection,
        /// Keep repeating a case's graph for at least this many seconds (0 to 3600; default: the
        /// suite's, else 1).
        #[arg(long, value_parser = parse_min_time)]
        min_time: Option<f64>,
        /// Cap the repetitions of the op in one graph (1 to 8192; upstream: up to 8192).
        #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u64).range(1..=8192))]
        max_repeats: u64,
        /// Also time each case by the GPU's own clock (timestamps around each submit, as long
        /// again as the wall-clock timing): the kernel's time and GB/s whatever the host's pace.
        #[arg(long)]
        gpu_time: bool,
    },
    /// Check against ggml's results stored as GGUF files (files, or folders searched for .gguf).
    Golden {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Which cases this adapter runs (default: all of upstream's lists).
    Support {
        #[command(flatten)]
        selection: Selection,
    },
    /// Compare with upstream's test-backend-ops: run both on the same cases, alternating case by
    /// case (MODE and --upstream-bin), or read both programs' saved output (--upstream and --ours);
    /// or two saved runs of ours, before and after (--base and --ours).
    Compare(Box<CompareArgs>),
    /// The named benchmark suites (`perf --suite NAME`); with a NAME, that suite's cases, one a
    /// line (as --cases-file reads them).
    Suites { name: Option<String> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CompareMode {
    /// Timings; the table's ratio is upstream's time over ours (above 1: ours is faster).
    Perf,
    /// Correctness: each side's OK, FAIL, not supported or crash.
    Test,
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// What to run on both sides (with --upstream-bin). Default: perf.
    #[arg(value_enum)]
    mode: Option<CompareMode>,
    #[command(flatten)]
    selection: Selection,
    /// Upstream's test-backend-ops (or a wrapper such as run-upstream), run once per case.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["upstream", "ours", "base"])]
    upstream_bin: Option<PathBuf>,
    /// An argument for --upstream-bin before upstream's mode (repeatable), e.g. run-upstream's
    /// bundle folder.
    #[arg(long = "upstream-arg", value_name = "ARG", allow_hyphen_values = true)]
    upstream_args: Vec<String>,
    /// Kill upstream after this many seconds on one case (counted as a crash); 0: never.
    #[arg(long, default_value_t = 600.0, value_name = "S", value_parser = parse_timeout)]
    upstream_timeout: f64,
    /// Upstream's backend (its -b).
    #[arg(short = 'b', long, default_value = "WebGPU")]
    backend: String,
    /// Upstream's saved console output (`test-backend-ops perf …` or `test …`).
    #[arg(long, value_name = "FILE", requires = "ours")]
    upstream: Option<PathBuf>,
    /// Our saved `backend-ops --output json` output of the same mode (with --base: the run after).
    #[arg(long, value_name = "FILE")]
    ours: Option<PathBuf>,
    /// Our saved `backend-ops --output json perf` output of the run before, compared with --ours
    /// (the run after): ratio = before's time / after's.
    #[arg(long, value_name = "FILE", requires = "ours", conflicts_with_all = ["upstream", "plot"])]
    base: Option<PathBuf>,
    /// Also draw the ratios per op and type into this SVG file (perf).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Also write the rows as JSON lines (as `--output json` prints them) into this file, so
    /// that one run gives both the table and its data.
    #[arg(long, value_name = "FILE.jsonl")]
    save_json: Option<PathBuf>,
    /// The chart's title.
    #[arg(long, default_value = "upstream test-backend-ops time / backend-ops time")]
    title: String,
    /// Ours: keep repeating a case's graph for at least this many seconds (perf; 0 to 3600;
    /// default: the suite's, else 1).
    #[arg(long, value_parser = parse_min_time)]
    min_time: Option<f64>,
    /// Ours: cap the repetitions of the op in one graph (perf; 1 to 8192).
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u64).range(1..=8192))]
    max_repeats: u64,
    /// Ours: seed of the random inputs (test).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Seconds in `0..=max`: finite, not negative, not absurd (Duration::from_secs_f64 panics on
/// NaN, infinity and overflow).
fn parse_seconds(text: &str, max: f64) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !value.is_finite() || !(0.0..=max).contains(&value) {
        return Err(format!("`{text}` must be a number of seconds from 0 to {max}"));
    }
    Ok(value)
}

fn parse_min_time(text: &str) -> Result<f64, String> {
    parse_seconds(text, 3600.0)
}

fn parse_timeout(text: &str) -> Result<f64, String> {
    parse_seconds(text, 86400.0)
}

/// The largest `--cases-file` read (a case line is about 200 bytes).
const MAX_CASES_FILE: u64 = 16 << 20;

/// The largest saved output `compare --upstream/--ours` reads.
const MAX_SAVED_OUTPUT: u64 = 256 << 20;

/// Reads a text file given as `flag`: a regular file (not a FIFO or a device, which could block
/// or never end; refused before anything waits on them) of at most `max` bytes of UTF-8.
fn read_text(flag: &str, path: &std::path::Path, max: u64) -> Result<String, String> {
    let bytes = ggml_dawn_bench::input_file::read_bytes(path, max).map_err(|e| format!("{flag} {e}"))?;
    String::from_utf8(bytes).map_err(|_| format!("{flag} {}: not UTF-8 text", path.display()))
}

/// Runs one case's work, turning a panic into a failure so that the rest of the list goes on.
fn guarded<T>(work: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        format!("panic: {message}")
    })
}

fn parse_config(text: &str) -> Result<(u32, u32, u32), String> {
    let parts: Vec<&str> = text.split('x').collect();
    match parts.as_slice() {
        [m, n, k] => {
            let num = |s: &str| {
                s.parse::<u32>()
                    .map_err(|_| format!("`{s}` in `{text}` is not a number"))
            };
            Ok((num(m)?, num(n)?, num(k)?))
        }
        _ => Err(format!("`{text}` is not MxNxK (for example 16x8x16)")),
    }
}

/// The knobs of the tuning variables (unset: the defaults).
fn env_tuning() -> Result<Overrides, String> {
    Overrides::from_env()
}

/// Log lines of the library (a kernel's first compilation, with its time) on standard error:
/// with `-v` the library's `info` lines, else warnings only; `RUST_LOG` overrides both.
fn init_logging(command: &Command) {
    let verbose = match command {
        Command::Test { selection, .. } | Command::Perf { selection, .. } | Command::Support { selection } => {
            selection.verbose
        }
        _ => false,
    };
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| (if verbose { "ggml_dawn=info" } else { "warn" }).into());
    env_logger::Builder::new()
        .parse_filters(&filter)
        .format(|buf, record| {
            use std::io::Write;
            writeln!(buf, "{}: {}", record.target(), record.args())
        })
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.command);
    // Invalid knobs in the environment are malformed input, like a malformed case (`info`
    // runs no op, so it does not mind them).
    let tuning = match env_tuning() {
        Ok(t) => t,
        Err(_)
            if matches!(
                cli.command,
                Command::Info | Command::Shaders { .. } | Command::Suites { .. }
            ) =>
        {
            Overrides::none()
        }
        Err(e) => {
            eprintln!("backend-ops: {e}");
            return ExitCode::from(2);
        }
    };
    let options = ContextOptions {
        safe_mode: cli.device.safe_mode,
        no_subgroup_matrix: cli.device.no_subgroup_matrix,
        force_config: cli.device.config,
        enable_toggles: cli.device.enable_toggles,
        disable_toggles: cli.device.disable_toggles,
        tuning,
        backend: cli.device.dawn_backend.map(DawnBackend::backend_type),
        adapter: cli.device.adapter.clone(),
        ..ContextOptions::default()
    };
    if let Err(e) = options.check_toggles() {
        eprintln!("backend-ops: {e}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Info => info(options, cli.output).map(End::from),
        Command::Shaders { out } => write_shaders(&out).map(End::from),
        Command::Test { selection, seed } => {
            let verbose = selection.verbose;
            select(&selection, Default::Tests).and_then(|cases| test(options, &cases, seed, verbose, cli.output))
        }
        Command::Perf {
            selection,
            min_time,
            max_repeats,
            gpu_time,
        } => {
            let verbose = selection.verbose;
            min_time_of(min_time, &selection).and_then(|min_time| {
                select(&selection, Default::Perf).and_then(|cases| {
                    let timing = PerfTiming {
                        min_time,
                        max_repeats,
                        gpu_time,
                    };
                    perf(options, &cases, timing, verbose, cli.output)
                })
            })
        }
        Command::Golden { paths } => golden_files(options, &paths, cli.output).map(End::from),
        Command::Support { selection } => {
            select(&selection, Default::Everything).and_then(|cases| support(options, &cases, cli.output))
        }
        Command::Compare(args) => compare_cmd(options, &args, cli.output).map(End::from),
        Command::Suites { name } => list_suites(name.as_deref(), cli.output).map(End::from),
    };
    match result {
        Ok(End::Clean) => ExitCode::SUCCESS,
        Ok(End::Failed) => ExitCode::FAILURE,
        Ok(End::BadInput) => ExitCode::from(2),
        Err(message) => {
            eprintln!("backend-ops: {message}");
            ExitCode::from(2)
        }
    }
}

/// How a run ended: its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Every case passed (or was not supported): exit 0.
    Clean,
    /// A case failed: exit 1.
    Failed,
    /// A case was malformed, invalid or too large for the device (the others ran): exit 2,
    /// whether or not another failed.
    BadInput,
}

impl From<bool> for End {
    fn from(ok: bool) -> End {
        if ok { End::Clean } else { End::Failed }
    }
}

/// The cases a mode runs, and the case strings given that did not parse.
struct Selected {
    cases: Vec<Case>,
    /// The suite the cases came from (`--suite`).
    suite: Option<&'static str>,
    /// Whether the cases were given (`--case`, `--cases-file`) rather than a default list.
    given: bool,
    /// `(origin, spec, why)` of each given case string that did not parse.
    malformed: Vec<(String, String, String)>,
}

/// A case refused as bad input: where it came from, the case, and why.
struct Refused {
    origin: String,
    case: String,
    reason: String,
}

impl Selected {
    /// The malformed case strings, reported as refused.
    fn refused(&self) -> Vec<Refused> {
        self.malformed
            .iter()
            .map(|(origin, case, reason)| Refused {
                origin: origin.clone(),
                case: case.clone(),
                reason: reason.clone(),
            })
            .collect()
    }

    /// What `status` means for a case of this selection: a case too large for this device is
    /// bad input when it was given, and only not supported in a default list (upstream's lists
    /// do not know the device; upstream also skips what a device cannot hold).
    fn judge(&self, status: Status) -> Status {
        match status {
            Status::TooLarge { reason } if !self.given => Status::Unsupported { reason },
            other => other,
        }
    }
}

/// Prints a line for each malformed case string (text: `  SPEC: invalid (why)`, or a JSON
/// object), for a mode whose run goes on with the other cases.
fn print_malformed(mode: &str, selected: &Selected, output: Output) {
    for (_, spec, reason) in &selected.malformed {
        match output {
            Output::Text => println!("  {spec}: invalid ({reason})"),
            Output::Json => println!(
                "{}",
                json!({ "mode": mode, "case": spec, "status": "invalid", "reason": reason })
            ),
        }
    }
}

/// After a run: each case refused as bad input, on standard error with where it came from,
/// and how the run ends (exit 2 if any was refused).
fn finish(refused: &[Refused], total: usize, ok: bool) -> End {
    if refused.is_empty() {
        return End::from(ok);
    }
    for r in refused {
        eprintln!("backend-ops: {} `{}`: {}", r.origin, r.case, r.reason);
    }
    eprintln!(
        "backend-ops: {} of {total} cases malformed, invalid or too large for this device (the others ran); fix or drop them",
        refused.len()
    );
    End::BadInput
}

/// `shaders`: every Apple variant as `NNNNN.wgsl` in `out`, listed in `out/index.tsv`.
fn write_shaders(out: &std::path::Path) -> Result<bool, String> {
    use std::fmt::Write as _;
    if out.exists()
        && std::fs::read_dir(out)
            .map_err(|e| format!("{}: {e}", out.display()))?
            .next()
            .is_some()
    {
        return Err(format!("{} is not empty", out.display()));
    }
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let variants = ggml_dawn::variants::enumerate_apple();
    let mut index = String::from("file\tdevice\top\tpath\tvariant\n");
    for (i, (variant, (device, e))) in variants.iter().enumerate() {
        let wgsl = variant.render().map_err(|err| format!("{variant}: {err}"))?;
        let file = format!("{i:05}.wgsl");
        std::fs::write(out.join(&file), wgsl).map_err(|err| format!("writing {file}: {err}"))?;
        let _ = writeln!(index, "{file}\t{device}\t{}\t{}\t{variant}", e.op, e.path);
    }
    std::fs::write(out.join("index.tsv"), index).map_err(|err| format!("writing index.tsv: {err}"))?;
    println!("{} shader variants written to {}", variants.len(), out.display());
    Ok(true)
}

/// Which list a mode runs when no case is given.
#[derive(Debug, Clone, Copy)]
enum Default {
    Tests,
    Perf,
    Everything,
}

/// `-p`, compiled (none when not given).
fn case_pattern(selection: &Selection) -> Result<Option<Regex>, String> {
    selection
        .pattern
        .as_deref()
        .map(Regex::new)
        .transpose()
        .map_err(|e| format!("-p: {e}"))
}

/// The cases a mode runs: those given (`--case`, `--cases-file`), else the default list; then
/// `-o` and `-p`. A case string that does not parse ends nothing: it is kept in
/// [`Selected::malformed`] and the others run.
fn select(selection: &Selection, default: Default) -> Result<Selected, String> {
    let pattern = case_pattern(selection)?;
    if let Some(op) = &selection.op
        && !["MUL_MAT", "FLASH_ATTN_EXT"].contains(&op.as_str())
        && !ggml_dawn_bench::cases::decoder::OPS.contains(&op.as_str())
    {
        return Err(format!(
            "-o {op}: unknown op (known: MUL_MAT, FLASH_ATTN_EXT, {})",
            ggml_dawn_bench::cases::decoder::OPS.join(", ")
        ));
    }
    let mut cases: Vec<Case> = Vec::new();
    let mut malformed = Vec::new();
    let mut take = |origin: &str, spec: &str| match spec.parse::<Case>() {
        Ok(case) => cases.push(case),
        Err(e) => malformed.push((origin.to_owned(), spec.to_owned(), e.to_string())),
    };
    for spec in &selection.cases {
        take("--case", spec);
    }
    for file in &selection.files {
        let text = read_text("--cases-file", file, MAX_CASES_FILE)?;
        let origin = format!("--cases-file {}", file.display());
        for line in case_lists::list_lines(&text) {
            take(&origin, line);
        }
    }
    let given = !(selection.cases.is_empty() && selection.files.is_empty());
    if let Some(name) = &selection.suite {
        // A suite is this tool's own list, like the defaults: a case too large for the device
        // is not supported there, not bad input.
        cases = suites::find(name)
            .and_then(Suite::cases)
            .map_err(|e| format!("--suite: {e}"))?;
    } else if !given {
        cases = match default {
            Default::Tests => case_lists::test_cases().map_err(|e| e.to_string())?,
            Default::Perf => case_lists::perf_cases(),
            Default::Everything => {
                let mut all = Vec::new();
                for list in [
                    case_lists::MUL_MAT_SUPPORTED,
                    case_lists::MUL_MAT_UNSUPPORTED,
                    case_lists::FLASH_ATTN_SUPPORTED,
                    case_lists::FLASH_ATTN_UNSUPPORTED,
                ] {
                    all.extend(case_lists::parse_list(list).map_err(|e| e.to_string())?);
                }
                all.extend(case_lists::decoder_cases(true).map_err(|e| e.to_string())?);
                all
            }
        };
    }
    cases.retain(|c| {
        selection.op.as_deref().is_none_or(|op| c.op_name() == op)
            && pattern.as_ref().is_none_or(|p| p.is_match(&c.to_string()))
    });
    let suite = match &selection.suite {
        Some(name) => Some(suites::find(name).map_err(|e| format!("--suite: {e}"))?.name),
        None => None,
    };
    Ok(Selected {
        cases,
        suite,
        given,
        malformed,
    })
}

/// `perf`'s time per case: `--min-time` when given, else the suite's, else 1 s.
fn min_time_of(given: Option<f64>, selection: &Selection) -> Result<Duration, String> {
    let seconds = match (given, &selection.suite) {
        (Some(s), _) => s,
        (None, Some(name)) => suites::find(name).map_err(|e| format!("--suite: {e}"))?.min_time,
        (None, None) => 1.0,
    };
    Ok(Duration::from_secs_f64(seconds))
}

/// `suites`: every suite (name, time per case, number of cases, what it measures), or with a
/// name that suite's cases, one a line.
fn list_suites(name: Option<&str>, output: Output) -> Result<bool, String> {
    let chosen: Vec<&Suite> = match name {
        Some(name) => vec![suites::find(name).map_err(|e| e.to_string())?],
        None => suites::SUITES.iter().collect(),
    };
    for suite in chosen {
        let cases = suite.cases().map_err(|e| e.to_string())?;
        match (output, name) {
            (Output::Json, _) => println!(
                "{}",
                json!({ "mode": "suites", "suite": suite.name, "description": suite.description,
                        "min_time": suite.min_time,
                        "cases": cases.iter().map(|c| c.to_string()).collect::<Vec<_>>() })
            ),
            (Output::Text, Some(_)) => {
                for case in &cases {
                    println!("{case}");
                }
            }
            (Output::Text, None) => println!(
                "{:<16} {:>3} cases, --min-time {:<4} {}",
                suite.name,
                cases.len(),
                suite.min_time,
                suite.description
            ),
        }
    }
    Ok(true)
}

/// The first line of `--output json perf`: what the figures below were measured on and with,
/// so that saved runs can be checked for the same card and settings before they are compared.
fn header_line(ctx: &GpuContext, selected: &Selected, min_time: Duration) -> serde_json::Value {
    let info = &ctx.capabilities().info;
    let env = |name: &str| std::env::var(name).ok();
    json!({ "mode": "header", "command": "perf",
            "adapter": info.device, "adapter_description": info.description,
            "backend": format!("{:?}", info.backend), "adapter_type": format!("{:?}", info.adapter_type),
            "suite": selected.suite,
            "min_time": min_time.as_secs_f64(),
            "tuning": { MUL_MAT_ENV: env(MUL_MAT_ENV), FLASH_ATTN_ENV: env(FLASH_ATTN_ENV) } })
}

/// The context of a mode that runs cases. Dawn's Null backend is an error unless named
/// (`ContextError::NullBackend`, exit 2); a software adapter such as lavapipe is used, and
/// said to be the CPU, so that its timings are not read as a GPU's.
fn context(options: ContextOptions) -> Result<GpuContext, String> {
    let ctx = GpuContext::new(options).map_err(|e| match e {
        ggml_dawn::ContextError::NullBackend { .. } => format!("{e} (--dawn-backend null)"),
        e => e.to_string(),
    })?;
    let info = &ctx.capabilities().info;
    if info.is_software() {
        let what = if info.is_null_backend() {
            "Dawn's Null backend (named by --dawn-backend): it computes nothing".to_owned()
        } else {
            format!("a CPU implementation of {:?}, not a GPU", info.backend)
        };
        eprintln!("backend-ops: the adapter, {}, is {what}", info.device);
    }
    Ok(ctx)
}

fn test(options: ContextOptions, selected: &Selected, seed: u64, verbose: bool, output: Output) -> Result<End, String> {
    let cases = &selected.cases;
    let total = cases.len() + selected.malformed.len();
    print_malformed("test", selected, output);
    let mut refused = selected.refused();
    if cases.is_empty() && !refused.is_empty() {
        return Ok(finish(&refused, total, true));
    }
    let ctx = context(options)?;
    let (mut passed, mut failed, mut unsupported) = (0, 0, 0);
    let mut progress = Progress::new(cases.len(), output == Output::Text);
    let mut stopped = None;
    for (done, case) in cases.iter().enumerate() {
        let (status, plan) = guarded(|| harness::test_case_planned(&ctx, case, seed))
            .unwrap_or_else(|reason| (Status::Fail { reason }, None));
        let status = selected.judge(status);
        match &status {
            Status::Ok { .. } => passed += 1,
            Status::Fail { .. } => failed += 1,
            Status::Unsupported { .. } => unsupported += 1,
            Status::Invalid { reason } | Status::TooLarge { reason } => refused.push(Refused {
                origin: "case".into(),
                case: case.to_string(),
                reason: reason.clone(),
            }),
        }
        // The plan the op followed; one it would follow when it did not run.
        let path = (verbose && !status.is_bad_input()).then(|| plan.unwrap_or_else(|| harness::describe(&ctx, case)));
        match output {
            Output::Text => match &status {
                Status::Ok { nmse } if verbose => {
                    let path = path.as_deref().unwrap_or_default();
                    progress.println(format!("  {case}: OK (nmse={nmse:.3e}; {path})"))
                }
                Status::Fail { reason } if verbose => {
                    let path = path.as_deref().unwrap_or_default();
                    progress.println(format!("  {case}: FAIL ({reason}; {path})"))
                }
                Status::Ok { .. } => progress.println(format!("  {case}: OK")),
                Status::Fail { reason } => progress.println(format!("  {case}: FAIL ({reason})")),
                Status::Unsupported { reason } => progress.println(format!("  {case}: not supported ({reason})")),
                Status::Invalid { reason } => progress.println(format!("  {case}: invalid ({reason})")),
                Status::TooLarge { reason } => {
                    progress.println(format!("  {case}: invalid (too large for this device: {reason})"))
                }
            },
            Output::Json => {
                let (name, detail) = match &status {
                    Status::Ok { nmse } => ("ok", json!({ "nmse": nmse })),
                    Status::Fail { reason } => ("fail", json!({ "reason": reason })),
                    Status::Unsupported { reason } => ("unsupported", json!({ "reason": reason })),
                    Status::Invalid { reason } => ("invalid", json!({ "reason": reason })),
                    Status::TooLarge { reason } => ("invalid", json!({ "reason": reason, "too_large": true })),
                };
                let mut line = json!({ "mode": "test", "op": case.op_name(), "case": case.to_string(), "status": name, "detail": detail });
                if let Some(path) = path {
                    line["path"] = path.into();
                }
                println!("{line}");
            }
        }
        progress.advance(matches!(status, Status::Fail { .. }));
        if matches!(status, Status::Fail { .. })
            && let Some(why) = harness::device_unusable(&ctx)
        {
            stopped = Some((done + 1, why));
            break;
        }
    }
    progress.finish();
    if output == Output::Text {
        let invalid = if refused.is_empty() {
            String::new()
        } else {
            format!(", {} invalid", refused.len())
        };
        println!("{passed} passed, {failed} failed, {unsupported} not supported{invalid}");
    }
    report_stop("test", stopped, cases.len(), output);
    Ok(finish(&refused, total, failed == 0))
}

/// After a case that left the device lost or hung, the rest of a list is not run: says so (on
/// standard error, and as a JSON line under `--output json`).
fn report_stop(mode: &str, stopped: Option<(usize, String)>, total: usize, output: Output) {
    let Some((done, why)) = stopped else {
        return;
    };
    let not_run = total - done;
    eprintln!(
        "backend-ops: stopped after {done} of {total} cases, {not_run} not run: the device can take no more work ({why})"
    );
    if output == Output::Json {
        println!(
            "{}",
            json!({ "mode": mode, "status": "stopped", "reason": why, "run": done, "not_run": not_run })
        );
    }
}

/// Upstream's perf line: the case, padded, then runs, us/run, GFLOP/run and TFLOPS.
fn perf_line(case: &str, t: &harness::Timing) -> String {
    let mut width = (case.len() + 2).next_multiple_of(8);
    if width - (case.len() + 2) < 5 {
        width += 8;
    }
    let (flop, unit) = scaled(t.flops_per_run as f64);
    let (rate, rate_unit) = scaled(t.flops_per_run as f64 / (t.us_per_run * 1e-6));
    let line = format!(
        "  {:<width$}    {:>8} runs - {:>8.2} us/run - {:>6.2} {unit}FLOP/run - {:>6.2} {rate_unit}FLOPS",
        format!("{case}:"),
        t.runs,
        t.us_per_run,
        flop,
        rate,
        width = width - 2
    );
    if t.bytes_per_run > 0 && t.flops_per_run <= 1 {
        // Upstream's line of an op without FLOPs: bytes per run and their rate.
        format!(
            "  {:<width$}    {:>8} runs - {:>8.2} us/run - {:>8.2} kB/run - {:>8.2} GB/s",
            format!("{case}:"),
            t.runs,
            t.us_per_run,
            t.bytes_per_run as f64 / 1024.0,
            t.gbps(),
            width = width - 2
        )
    } else {
        line
    }
}

fn scaled(value: f64) -> (f64, &'static str) {
    for (scale, unit) in [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if value >= scale {
            return (value / scale, unit);
        }
    }
    (value, "")
}

/// The line of a case refused before it ran (not supported, invalid, too large), or `None` for
/// one that may run.
fn refusal_line(mode: &str, case: &Case, status: &Status, output: Output) -> Option<String> {
    let text = case.to_string();
    let (name, words, reason) = match status {
        Status::Unsupported { reason } => ("unsupported", "not supported", reason.clone()),
        Status::Invalid { reason } => ("invalid", "invalid", reason.clone()),
        Status::TooLarge { reason } => ("invalid", "invalid", format!("too large for this device: {reason}")),
        Status::Ok { .. } | Status::Fail { .. } => return None,
    };
    Some(match output {
        Output::Text => format!("  {text}: {words} ({reason})"),
        Output::Json => {
            json!({ "mode": mode, "op": case.op_name(), "case": text, "status": name, "reason": reason }).to_string()
        }
    })
}

/// How `perf` times each case.
struct PerfTiming {
    min_time: Duration,
    max_repeats: u64,
    /// Also by the GPU's timestamps ([`harness::perf_case`]'s `gpu_time`).
    gpu_time: bool,
}

fn perf(
    options: ContextOptions,
    selected: &Selected,
    timing: PerfTiming,
    verbose: bool,
    output: Output,
) -> Result<End, String> {
    let PerfTiming {
        min_time,
        max_repeats,
        gpu_time,
    } = timing;
    let cases = &selected.cases;
    let total = cases.len() + selected.malformed.len();
    print_malformed("perf", selected, output);
    let mut refused = selected.refused();
    if cases.is_empty() && !refused.is_empty() {
        return Ok(finish(&refused, total, true));
    }
    let ctx = context(options)?;
    if output == Output::Json {
        println!("{}", header_line(&ctx, selected, min_time));
    }
    let mut ok = true;
    let mut progress = Progress::new(cases.len(), output == Output::Text);
    let mut stopped = None;
    for (done, case) in cases.iter().enumerate() {
        let text = case.to_string();
        // Judged before anything is allocated: not supported, invalid or too large.
        if let Err(status) = harness::admit(&ctx, case) {
            let status = selected.judge(status);
            if let Some(line) = refusal_line("perf", case, &status, output) {
                match output {
                    Output::Text => progress.println(line),
                    Output::Json => println!("{line}"),
                }
            }
            if let Status::Invalid { reason } | Status::TooLarge { reason } = status {
                refused.push(Refused {
                    origin: "case".into(),
                    case: text,
                    reason,
                });
            }
            progress.advance(false);
            continue;
        }
        let timed = guarded(|| harness::perf_case(&ctx, case, min_time, max_repeats, gpu_time))
            .unwrap_or_else(|reason| Err(ggml_dawn::error::BackendError::InvalidOperands(reason)));
        let failed = matches!(&timed, Err(e) if !matches!(e, ggml_dawn::error::BackendError::Unsupported(_)));
        match timed {
            Ok(t) => match output {
                Output::Text => {
                    progress.println(perf_line(&text, &t));
                    match (t.gpu_us_per_run, t.gpu_gbps()) {
                        (Some(us), Some(gbps)) => progress.println(format!("      gpu {us:.2} us/run, {gbps:.2} GB/s")),
                        _ if gpu_time => progress.println("      gpu: the adapter has no timestamp queries"),
                        _ => {}
                    }
                    if verbose {
                        progress.println(format!("      host {:.2} us/run; {}", t.host_us_per_run, t.plan));
                    }
                }
                Output::Json => println!(
                    "{}",
                    json!({ "mode": "perf", "op": case.op_name(), "case": text, "runs": t.runs,
                            "us_per_run": t.us_per_run, "host_us_per_run": t.host_us_per_run,
                            "flops_per_run": t.flops_per_run, "tflops": t.tflops(),
                            "bytes_per_run": t.bytes_per_run, "gbps": t.gbps(),
                            "gpu_us_per_run": t.gpu_us_per_run, "gpu_gbps": t.gpu_gbps(),
                            "path": t.plan })
                ),
            },
            Err(ggml_dawn::error::BackendError::Unsupported(reason)) => match output {
                Output::Text => progress.println(format!("  {text}: not supported ({reason})")),
                Output::Json => println!(
                    "{}",
                    json!({ "mode": "perf", "case": text, "status": "unsupported", "reason": reason })
                ),
            },
            Err(e) => {
                ok = false;
                match output {
                    Output::Text => progress.println(format!("  {text}: FAIL ({e})")),
                    Output::Json => println!(
                        "{}",
                        json!({ "mode": "perf", "case": text, "status": "fail", "reason": e.to_string() })
                    ),
                }
            }
        }
        progress.advance(failed);
        if failed && let Some(why) = harness::device_unusable(&ctx) {
            stopped = Some((done + 1, why));
            break;
        }
    }
    progress.finish();
    let clean = stopped.is_none();
    report_stop("perf", stopped, cases.len(), output);
    Ok(finish(&refused, total, ok && clean))
}

fn golden_files(options: ContextOptions, paths: &[PathBuf], output: Output) -> Result<bool, String> {
    let files = golden::collect(paths).map_err(|e| e.to_string())?;
    if files.is_empty() {
        return Err("no .gguf files found".into());
    }
    let ctx = context(options)?;
    let (mut passed, mut failed, mut unsupported) = (0, 0, 0);
    for file in &files {
        let outcome = guarded(|| golden::check_file(&ctx, file)).unwrap_or_else(|reason| golden::Outcome {
            path: file.clone(),
            op: String::new(),
            case: file.display().to_string(),
            verdict: Verdict::Fail(reason),
        });
        let (name, detail) = match &outcome.verdict {
            Verdict::Pass(d) => {
                passed += 1;
                ("OK", d)
            }
            Verdict::Fail(d) => {
                failed += 1;
                ("FAIL", d)
            }
            Verdict::Unsupported(d) => {
                unsupported += 1;
                ("not supported", d)
            }
        };
        match output {
            Output::Text => println!("  {}: {name} ({detail})", outcome.case),
            Output::Json => println!(
                "{}",
                json!({ "mode": "golden", "file": file.display().to_string(), "op": outcome.op, "case": outcome.case,
                        "status": name, "detail": detail })
            ),
        }
    }
    if output == Output::Text {
        println!("{passed} passed, {failed} failed, {unsupported} not supported");
    }
    Ok(failed == 0)
}

fn support(options: ContextOptions, selected: &Selected, output: Output) -> Result<End, String> {
    let cases = &selected.cases;
    let total = cases.len() + selected.malformed.len();
    print_malformed("support", selected, output);
    let mut refused = selected.refused();
    if cases.is_empty() && !refused.is_empty() {
        return Ok(finish(&refused, total, true));
    }
    let ctx = context(options)?;
    let (mut yes, mut no) = (0, 0);
    for case in cases {
        if let Err(status) = harness::admit(&ctx, case).map_err(|s| selected.judge(s))
            && let Status::Invalid { reason } | Status::TooLarge { reason } = &status
        {
            if let Some(line) = refusal_line("support", case, &status, output) {
                println!("{line}");
            }
            refused.push(Refused {
                origin: "case".into(),
                case: case.to_string(),
                reason: reason.clone(),
            });
            continue;
        }
        let verdict = harness::supports(&ctx, case);
        match &verdict {
            Ok(()) => yes += 1,
            Err(_) => no += 1,
        }
        match output {
            Output::Text => match &verdict {
                Ok(()) => println!("  {case}: supported"),
                Err(reason) => println!("  {case}: not supported ({reason})"),
            },
            Output::Json => println!(
                "{}",
                json!({ "mode": "support", "op": case.op_name(), "case": case.to_string(), "supported": verdict.is_ok(),
                        "reason": verdict.err() })
            ),
        }
    }
    if output == Output::Text {
        let invalid = if refused.is_empty() {
            String::new()
        } else {
            format!(", {} invalid", refused.len())
        };
        println!("{yes} supported, {no} not supported{invalid}");
    }
    Ok(finish(&refused, total, true))
}

fn info(options: ContextOptions, output: Output) -> Result<bool, String> {
    let ctx = context(options)?;
    let caps = ctx.capabilities();
    let info = &caps.info;
    if output == Output::Json {
        let n = 1 << 20;
        let check = selfcheck::on_context(&ctx, n).map_err(|e| e.to_string());
        let configs: Vec<_> = info
            .subgroup_matrix_configs
            .iter()
            .map(|c| json!({ "m": c.m, "n": c.n, "k": c.k, "component": c.component.to_string(), "result": c.result.to_string() }))
            .collect();
        let limits: serde_json::Map<String, serde_json::Value> = caps
            .limits
            .entries()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), json!(v)))
            .collect();
        let enabled = &caps.features;
        let features: Vec<_> = caps
            .adapter_features
            .iter()
            .map(|f| json!({ "name": f.to_string(), "enabled": enabled.contains(f) }))
            .collect();
        println!(
            "{}",
            json!({
                "mode": "info",
                "adapter": { "device": info.device, "description": info.description, "vendor": info.vendor,
                             "architecture": info.architecture, "vendor_id": info.vendor_id, "device_id": info.device_id,
                             "backend": format!("{:?}", info.backend), "adapter_type": format!("{:?}", info.adapter_type),
                             "subgroup_min_size": info.subgroup_min_size, "subgroup_max_size": info.subgroup_max_size },
                "features": features,
                "limits": limits,
                "subgroup_matrix_configs": configs,
                "subgroup_matrix_used": caps.subgroup_matrix.map(|c| c.to_string()),
                "device_class": format!("{:?}", ctx.facts().class),
                "mul_mat_tuning": ctx.tuning().mul_mat.to_string(),
                "compute_check": match &check { Ok(n) => json!({ "ok": true, "elements": n }), Err(e) => json!({ "ok": false, "error": e }) },
            })
        );
        return check.map(|_| true);
    }
    if let Ok(all) = ggml_dawn::adapters() {
        println!("adapters (--adapter N or a part of the name):");
        for (i, a) in all.iter().enumerate() {
            let mark = if a.device == info.device && a.backend == info.backend {
                "  <- used"
            } else {
                ""
            };
            println!("  #{i} {} ({:?}, {:?}){mark}", a.device, a.backend, a.adapter_type);
        }
    }
    println!("adapter:        {} ({})", info.device, info.description);
    println!(
        "vendor:         {} / {} (vendor {:#06x}, device {:#06x})",
        info.vendor, info.architecture, info.vendor_id, info.device_id
    );
    println!("backend:        {:?}, {:?}", info.backend, info.adapter_type);
    println!(
        "subgroup size:  {}..={}",
        info.subgroup_min_size, info.subgroup_max_size
    );
    println!("features:");
    let enabled = &caps.features;
    for feature in &caps.adapter_features {
        let mark = if enabled.contains(feature) { "enabled" } else { "" };
        println!("  {:<52} {mark}", feature.to_string());
    }
    println!("limits:");
    for (name, value) in caps.limits.entries() {
        println!("  {name:<48} {value}");
    }
    println!("subgroup-matrix configs (M x N x K component -> result):");
    if info.subgroup_matrix_configs.is_empty() {
        println!("  none");
    }
    for config in &info.subgroup_matrix_configs {
        let mark = if caps.subgroup_matrix == Some(*config) {
            "  <- used"
        } else {
            ""
        };
        println!("  {config}{mark}");
    }
    println!("device class:   {:?} (its tuning profile)", ctx.facts().class);
    println!("MUL_MAT tuning: {}", ctx.tuning().mul_mat);
    let n = 1 << 20;
    let checked = selfcheck::on_context(&ctx, n).map_err(|e| format!("the compute check failed: {e}"))?;
    println!("compute check:  y = 3x + y over {checked} elements, every element matches the CPU: OK");
    Ok(true)
}

fn compare_cmd(options: ContextOptions, args: &CompareArgs, output: Output) -> Result<bool, String> {
    if let Some(plot) = &args.plot {
        compare::plot::check_target(plot).map_err(|e| format!("--plot {e}"))?;
    }
    if let Some(base) = &args.base {
        return before_after(args, base, output);
    }
    let (rows, mode) = match (&args.upstream, &args.ours, &args.upstream_bin) {
        (Some(up), Some(ours), _) => {
            let up_path = up;
            let report = compare::upstream::parse(&read_text("--upstream", up, MAX_SAVED_OUTPUT)?)
                .map_err(|e| format!("--upstream {}: {e}", up.display()))?;
            for line in &report.unrecognised {
                eprintln!(
                    "backend-ops: {}: a result this tool does not read: {line}",
                    up.display()
                );
            }
            let ours_path = ours;
            let ours = compare::parse_ours(&read_text("--ours", ours, MAX_SAVED_OUTPUT)?)
                .map_err(|e| format!("--ours {}: {e}", ours_path.display()))?;
            // A file with no result in it is the wrong file, not a comparison of nothing.
            if report.entries.is_empty() {
                return Err(format!(
                    "no cases in --upstream {} (no `OP(…): result` line of test-backend-ops)",
                    up.display()
                ));
            }
            if ours.is_empty() {
                return Err(format!(
                    "no cases in --ours {} (no perf or test line of `backend-ops --output json`)",
                    ours_path.display()
                ));
            }
            // Output of several backends (no -b): keep the one -b names, when it is there.
            let mut up = report.entries;
            if up.iter().any(|e| e.backend.as_deref() == Some(args.backend.as_str())) {
                up.retain(|e| e.backend.as_deref() == Some(args.backend.as_str()));
            }
            let mut rows = compare::match_entries(&ours, &up);
            filter_rows(&mut rows, &args.selection)?;
            if rows.is_empty() {
                return Err(format!(
                    "no cases in --upstream {} or --ours {} match the selection (-o, -p, --case)",
                    up_path.display(),
                    ours_path.display()
                ));
            }
            let mode = match args.mode {
                Some(CompareMode::Perf) => Mode::Perf,
                Some(CompareMode::Test) => Mode::Test,
                None => compare::mode_of(&rows),
            };
            (rows, mode)
        }
        (None, None, Some(bin)) => {
            let mode = match args.mode.unwrap_or(CompareMode::Perf) {
                CompareMode::Perf => Mode::Perf,
                CompareMode::Test => Mode::Test,
            };
            let default = match mode {
                Mode::Perf => Default::Perf,
                Mode::Test => Default::Tests,
            };
            let selected = select(&args.selection, default)?;
            // Both programs run the same case strings: one that does not parse ends the
            // comparison before it starts.
            if let Some((origin, spec, reason)) = selected.malformed.first() {
                return Err(format!("{origin} `{spec}`: {reason}"));
            }
            let cases = selected.cases;
            if cases.is_empty() {
                return Err("no cases to compare: the selection (-o, -p, --case, --cases-file) leaves none".into());
            }
            let upstream = UpstreamCommand {
                program: bin.clone(),
                pre_args: args.upstream_args.clone(),
                backend: Some(args.backend.clone()),
                extra_args: Vec::new(),
                timeout: (args.upstream_timeout > 0.0).then(|| Duration::from_secs_f64(args.upstream_timeout)),
            };
            (compare_live(options, args, mode, &cases, &upstream)?, mode)
        }
        _ => {
            return Err(
                "compare needs --upstream-bin PATH (run both), --upstream FILE and --ours FILE (saved output), or --base FILE and --ours FILE (two saved runs of ours)"
                    .into(),
            );
        }
    };
    match output {
        Output::Text => print!("{}", compare::render_table(&rows, mode)),
        Output::Json => print!("{}", compare::render_json(&rows)),
    }
    if let Some(file) = &args.save_json {
        std::fs::write(file, compare::render_json(&rows))
            .map_err(|e| format!("--save-json {}: {e}", file.display()))?;
    }
    if let Some(plot) = &args.plot {
        compare::plot::plot_svg(&rows, plot, &args.title).map_err(|e| e.to_string())?;
        eprintln!("backend-ops: wrote {}", plot.display());
    }
    Ok(!rows
        .iter()
        .any(|r| matches!(r.ours, Outcome::Fail(_) | Outcome::Crash(_))))
}

/// Keeps the rows the selection names (-o, -p, --case, --suite), for saved output.
fn filter_rows(rows: &mut Vec<Row>, selection: &Selection) -> Result<(), String> {
    let keep = row_filter(selection)?;
    rows.retain(|r| keep(&r.case));
    Ok(())
}

/// Whether a normalised case string is one the selection names (-o, -p, --case, --suite).
fn row_filter(selection: &Selection) -> Result<impl Fn(&str) -> bool, String> {
    let pattern = case_pattern(selection)?;
    let mut cases: Vec<String> = selection.cases.iter().map(|c| compare::normalise_case(c)).collect();
    if let Some(name) = &selection.suite {
        let suite = suites::find(name)
            .and_then(Suite::cases)
            .map_err(|e| format!("--suite: {e}"))?;
        cases.extend(suite.iter().map(|c| c.to_string()));
    }
    let op = selection.op.clone();
    Ok(move |case: &str| {
        op.as_deref().is_none_or(|op| compare::op_of(case) == op)
            && pattern.as_ref().is_none_or(|p| p.is_match(case))
            && (cases.is_empty() || cases.iter().any(|c| c == case))
    })
}

/// `compare --base BEFORE --ours AFTER`: two saved `--output json perf` runs of ours, case by
/// case. Ends with exit 0 whatever the figures; unreadable files or no timing in either are
/// errors (exit 2).
fn before_after(args: &CompareArgs, base: &std::path::Path, output: Output) -> Result<bool, String> {
    use compare::before_after as ba;
    let after_path = args.ours.as_deref().ok_or("--base needs --ours FILE (the run after)")?;
    let before = ba::parse_run(&read_text("--base", base, MAX_SAVED_OUTPUT)?)
        .map_err(|e| format!("--base {}: {e}", base.display()))?;
    let after = ba::parse_run(&read_text("--ours", after_path, MAX_SAVED_OUTPUT)?)
        .map_err(|e| format!("--ours {}: {e}", after_path.display()))?;
    for (flag, path, run) in [("--base", base, &before), ("--ours", after_path, &after)] {
        if !run.entries.iter().any(|e| e.outcome.us_per_run().is_some()) {
            return Err(format!(
                "{flag} {}: no perf result (expected `backend-ops --output json perf` output)",
                path.display()
            ));
        }
    }
    if let (Some(b), Some(a)) = (&before.adapter, &after.adapter)
        && a != b
    {
        eprintln!(
            "backend-ops: the runs come from different adapters (before: {b}; after: {a}); their ratios compare cards, not builds"
        );
    }
    let keep = row_filter(&args.selection)?;
    let mut changes = ba::pair(&before.entries, &after.entries);
    changes.retain(|c| keep(&c.case));
    match output {
        Output::Text => print!("{}", ba::render_table(&changes)),
        Output::Json => print!("{}", ba::render_json(&changes)),
    }
    if let Some(file) = &args.save_json {
        std::fs::write(file, ba::render_json(&changes)).map_err(|e| format!("--save-json {}: {e}", file.display()))?;
    }
    Ok(true)
}

/// Runs upstream, then ours, on each case in turn; reports each pair on stderr as it comes.
fn compare_live(
    options: ContextOptions,
    args: &CompareArgs,
    mode: Mode,
    cases: &[Case],
    upstream: &UpstreamCommand,
) -> Result<Vec<Row>, String> {
    let min_time = min_time_of(args.min_time, &args.selection)?;
    let ctx = context(options)?;
    let mut rows = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let text = case.to_string();
        let up = upstream.run_case(mode, &text)?;
        let ours = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_ours(&ctx, case, mode, args, min_time)
        }))
        .unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Entry::new(&text, Outcome::Crash(format!("panic: {message}")))
        });
        let row = compare::match_entries(std::slice::from_ref(&ours), std::slice::from_ref(&up)).remove(0);
        let ratio = row.ratio().map_or_else(String::new, |x| format!(", ratio {x:.2}"));
        eprintln!(
            "[{}/{}] {}: upstream {}, ours {}{ratio}",
            i + 1,
            cases.len(),
            compare::short_case(&text),
            row.upstream.cell(),
            row.ours.cell()
        );
        rows.push(row);
    }
    Ok(rows)
}

fn run_ours(ctx: &GpuContext, case: &Case, mode: Mode, args: &CompareArgs, min_time: Duration) -> Entry {
    let text = case.to_string();
    let outcome = match mode {
        Mode::Perf => match harness::perf_case(ctx, case, min_time, args.max_repeats, false) {
            Ok(t) => Outcome::Timed {
                runs: t.runs,
                us_per_run: t.us_per_run,
            },
            Err(ggml_dawn::error::BackendError::Unsupported(reason)) => Outcome::Unsupported(reason),
            Err(e) => Outcome::Fail(e.to_string()),
        },
        Mode::Test => match harness::test_case(ctx, case, args.seed) {
            Status::Ok { .. } => Outcome::Ok,
            Status::Fail { reason } => Outcome::Fail(reason),
            // Upstream, too, skips what the device cannot hold.
            Status::Unsupported { reason } | Status::TooLarge { reason } => Outcome::Unsupported(reason),
            Status::Invalid { reason } => Outcome::Fail(format!("invalid: {reason}")),
        },
    };
    let mut entry = Entry::new(&text, outcome);
    if !matches!(entry.outcome, Outcome::Unsupported(_)) {
        entry.path = Some(harness::describe(ctx, case));
    }
    entry
}
