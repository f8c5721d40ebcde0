//! Project automation, run as `cargo xtask <command>`.
//!
//! The project's GPU stack (Debian's Dawn, Mesa's lavapipe, libclang for bindgen) lives in a Debian
//! sid root kept outside the repository; these commands create it and run cargo inside it.

mod bundle;
mod host;
mod sandbox;
mod sysroot;

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
    /// Run a command inside the sid root, with this repository at the same path.
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
            let root = sysroot::existing()?;
            let command = if command.is_empty() {
                vec!["bash".into()]
            } else {
                command
            };
            Err(sandbox::exec_in_root(&root, &command))
        }
        Command::Test { args } => {
            let root = sysroot::provision()?;
            let mut command: Vec<OsString> = ["cargo", "test", "--workspace", "--locked"].map(OsString::from).into();
            command.extend(args);
            Err(sandbox::exec_in_root(&root, &command))
        }
        Command::Run { args } => {
            let root = sysroot::provision()?;
            let mut command: Vec<OsString> = [
                "cargo",
                "run",
                "--release",
                "--locked",
                "--package",
                "ggml-dawn",
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
            Err(sandbox::exec_in_root(&root, &command))
        }
        Command::Bundle(args) => {
            let root = sysroot::provision()?;
            bundle::bundle(&root, &args)
        }
    }
}
