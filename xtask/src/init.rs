//! `cargo xtask init DIR`: a crate of one's own, anywhere on the machine, that uses `ggml-dawn`
//! by path and runs in the sid root with `cargo xtask shell` from its own folder.
//!
//! The crates are not published, so the new crate depends on this checkout by path. Its
//! `.cargo/config.toml` defines `cargo xtask` as this checkout's xtask (`--manifest-path`), and
//! `shell` mounts both the crate's folder and this checkout in the root, so the path dependency
//! resolves there too. The checkout's `Cargo.lock` is copied in, so the crate builds with the
//! versions the project tests (and, on a machine that built the project, without downloads).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The arguments of `cargo xtask init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The crate's folder: created if missing; an existing crate (a `Cargo.toml` there) only gets
    /// the `cargo xtask` alias, and the dependency line to add is printed.
    pub dir: PathBuf,
}

/// What `init` wrote, for the message it prints.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A new crate with an example program.
    NewCrate,
    /// An existing crate: only the alias was added.
    AliasOnly,
}

/// The alias file's text: `cargo xtask` as this checkout's xtask.
pub fn alias_config(project: &Path) -> String {
    format!(
        "# `cargo xtask …` runs dawn-compute's xtask (at {project}) from this folder: `cargo xtask\n\
         # shell -- cargo run --release` builds and runs this crate in its sid root.\n\
         [alias]\n\
         xtask = \"run --quiet --manifest-path {manifest} --package xtask --\"\n",
        project = project.display(),
        manifest = project.join("Cargo.toml").display(),
    )
}

/// The dependency line for `ggml-dawn` from this checkout.
pub fn dependency_line(project: &Path) -> String {
    format!("ggml-dawn = {{ path = \"{}\" }}", project.join("backend").display())
}

/// A new crate's manifest (its own workspace, so it may sit inside another one's folder).
fn manifest(name: &str, project: &Path) -> String {
    format!(
        "[package]\n\
         name = \"{name}\"\n\
         version = \"0.1.0\"\n\
         edition = \"2024\"\n\
         \n\
         [dependencies]\n\
         {dependency}\n\
         \n\
         # A workspace of its own, whatever folder it sits in.\n\
         [workspace]\n",
        dependency = dependency_line(project),
    )
}

/// The example program of a new crate: a q4_0 matrix times a few vectors on the GPU, checked
/// against the CPU reference.
const EXAMPLE: &str = r#"//! A q4_0 weight matrix times a few vectors on the GPU, checked against the CPU reference.

use ggml_dawn::reference::{self, metric};
use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = GpuContext::new(ContextOptions::default())?;
    println!("adapter: {}", ctx.capabilities().info.device);
    // ggml's shape order: innermost first. Weights are [k inputs, m outputs], vectors [k, n].
    let (k, m, n) = (256, 64, 4);
    let values = |count: usize, seed: usize| -> Vec<f32> {
        (0..count).map(|i| (((i * 7 + seed) % 23) as f32 - 11.0) / 16.0).collect()
    };
    let w_host = HostTensor::from_f32(GgmlType::Q4_0, [k, m, 1, 1], &values(k * m, 1))?;
    let x_host = HostTensor::from_f32(GgmlType::F32, [k, n, 1, 1], &values(k * n, 2))?;
    let (w, x) = (ctx.upload(&w_host)?, ctx.upload(&x_host)?);
    let y = ctx.mul_mat(&w, &x)?; // [m, n] f32, recorded
    let got = ctx.read_f32(&y)?; // runs what was recorded, reads back
    let nmse = metric::nmse(&reference::mul_mat(&w_host, &x_host)?, &got);
    println!("y = w x: {m}x{n} values, NMSE against the CPU reference {nmse:.2e}");
    if nmse >= metric::MUL_MAT_MAX_NMSE {
        return Err(format!("NMSE {nmse} over {}", metric::MUL_MAT_MAX_NMSE).into());
    }
    println!("ok");
    Ok(())
}
"#;

/// A package name from a folder name: lower case, `-` for anything but letters and digits.
fn package_name(dir: &Path) -> Result<String> {
    let raw = dir
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{} has no folder name to name the crate after", dir.display()))?;
    let name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_matches('-').to_owned();
    match name.chars().next() {
        Some(c) if c.is_ascii_alphabetic() => Ok(name),
        _ => bail!("cannot name a crate after the folder `{raw}`: start it with a letter"),
    }
}

/// Writes the crate (or only the alias) into `dir`, for the project checkout `project`.
pub fn init(dir: &Path, project: &Path) -> Result<Outcome> {
    let dir = std::path::absolute(dir).with_context(|| format!("resolving {}", dir.display()))?;
    let config_dir = dir.join(".cargo");
    let config = config_dir.join("config.toml");
    if config.exists() {
        bail!(
            "{} exists; add these lines to it yourself:\n{}",
            config.display(),
            alias_config(project)
        );
    }
    let outcome = if dir.join("Cargo.toml").exists() {
        Outcome::AliasOnly
    } else {
        if dir.exists() && fs::read_dir(&dir)?.next().is_some() {
            bail!(
                "{} is not empty and holds no Cargo.toml: give a new or empty folder, or a crate's",
                dir.display()
            );
        }
        let name = package_name(&dir)?;
        fs::create_dir_all(dir.join("src")).with_context(|| format!("creating {}", dir.display()))?;
        fs::write(dir.join("Cargo.toml"), manifest(&name, project))?;
        fs::write(dir.join("src/main.rs"), EXAMPLE)?;
        fs::write(dir.join(".gitignore"), "/target\n")?;
        let lock = project.join("Cargo.lock");
        if lock.is_file() {
            fs::copy(&lock, dir.join("Cargo.lock")).with_context(|| format!("copying {}", lock.display()))?;
        }
        Outcome::NewCrate
    };
    fs::create_dir_all(&config_dir)?;
    fs::write(&config, alias_config(project))?;
    Ok(outcome)
}

/// The message `init` prints: what to run next.
pub fn next_steps(dir: &Path, project: &Path, outcome: &Outcome) -> String {
    let run = format!("cd {} && cargo xtask shell -- cargo run --release", dir.display());
    match outcome {
        Outcome::NewCrate => format!("a crate using ggml-dawn is at {}; run it with\n  {run}", dir.display()),
        Outcome::AliasOnly => format!(
            "`cargo xtask` now works in {}; add to its [dependencies]\n  {}\nthen\n  {run}",
            dir.display(),
            dependency_line(project)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::owned::TempDir;

    #[test]
    fn a_new_crate_depends_on_the_checkout_by_path_and_aliases_its_xtask() {
        let tmp = TempDir::new("init");
        let project = Path::new("/opt/dawn compute");
        let dir = tmp.path().join("My_App");
        assert_eq!(init(&dir, project).unwrap(), Outcome::NewCrate);
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("name = \"my-app\""), "{manifest}");
        assert!(
            manifest.contains("ggml-dawn = { path = \"/opt/dawn compute/backend\" }"),
            "{manifest}"
        );
        assert!(manifest.contains("[workspace]"), "{manifest}");
        let config = fs::read_to_string(dir.join(".cargo/config.toml")).unwrap();
        assert!(
            config.contains("--manifest-path /opt/dawn compute/Cargo.toml --package xtask"),
            "{config}"
        );
        assert!(
            fs::read_to_string(dir.join("src/main.rs"))
                .unwrap()
                .contains("GpuContext::new")
        );
        // A second run refuses to overwrite the alias file.
        let err = init(&dir, project).unwrap_err().to_string();
        assert!(err.contains("config.toml exists"), "{err}");
    }

    #[test]
    fn an_existing_crate_only_gets_the_alias_and_other_folders_are_refused() {
        let tmp = TempDir::new("init-existing");
        let project = Path::new("/opt/dawn");
        let existing = tmp.path().join("existing");
        fs::create_dir_all(&existing).unwrap();
        fs::write(existing.join("Cargo.toml"), "[package]\nname = \"existing\"\n").unwrap();
        assert_eq!(init(&existing, project).unwrap(), Outcome::AliasOnly);
        assert_eq!(
            fs::read_to_string(existing.join("Cargo.toml")).unwrap(),
            "[package]\nname = \"existing\"\n"
        );
        assert!(existing.join(".cargo/config.toml").is_file());
        let steps = next_steps(&existing, project, &Outcome::AliasOnly);
        assert!(
            steps.contains("ggml-dawn = { path = \"/opt/dawn/backend\" }"),
            "{steps}"
        );

        let other = tmp.path().join("notes");
        fs::create_dir_all(&other).unwrap();
        fs::write(other.join("todo.txt"), "x").unwrap();
        let err = init(&other, project).unwrap_err().to_string();
        assert!(err.contains("not empty"), "{err}");
        assert!(package_name(Path::new("/x/9lives")).is_err());
    }
}
