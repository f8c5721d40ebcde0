//! `backend-ops`: the backend's command-line tool, modelled on ggml's `test-backend-ops`.

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use ggml_dawn::{ContextOptions, GpuContext, selfcheck};

#[derive(Debug, Parser)]
#[command(
    name = "backend-ops",
    version,
    about = "ggml operations on Dawn: device information and checks"
)]
struct Cli {
    #[command(flatten)]
    device: DeviceArgs,
    #[command(subcommand)]
    command: Command,
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
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The adapter, its features, limits and subgroup-matrix configs; then one checked compute pass.
    Info,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let options = ContextOptions {
        safe_mode: cli.device.safe_mode,
        no_subgroup_matrix: cli.device.no_subgroup_matrix,
        force_config: cli.device.config,
    };
    let result = match cli.command {
        Command::Info => info(options),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("backend-ops: {message}");
            ExitCode::FAILURE
        }
    }
}

fn info(options: ContextOptions) -> Result<(), String> {
    let ctx = GpuContext::new(options).map_err(|e| e.to_string())?;
    let caps = &ctx.capabilities;
    let info = &caps.info;
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
    let enabled = ctx.device.features();
    for feature in ctx.adapter.features() {
        let mark = if enabled.contains(&feature) { "enabled" } else { "" };
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
    let n = 1 << 20;
    let checked = selfcheck::saxpy(&ctx.device, n).map_err(|e| format!("the compute check failed: {e}"))?;
    println!("compute check:  y = 3x + y over {checked} elements, every element matches the CPU: OK");
    Ok(())
}
