//! The Debian sid root: where it lives, what it holds, and how it is made or brought up to date.
//!
//! A root is complete only once the stamp file is written, as the very last step; a root without
//! the stamp was left half-made by an interrupted run and is rebuilt from scratch.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::host;
use crate::sandbox;

/// Debian's Dawn, pinned: the version the project was verified against.
pub const DAWN_VERSION: &str = "0.0~git20260909.1a75cb7f-1";
/// The Dawn packages installed at exactly [`DAWN_VERSION`].
const DAWN_PACKAGES: &[&str] = &["libwebgpu-dawn-dev", "libwebgpu-dawn0", "dawn-tools"];

/// Everything else the root holds, installed by debootstrap in one go.
const PACKAGES: &[&str] = &[
    // Vulkan on the CPU (lavapipe) and diagnosis.
    "mesa-vulkan-drivers",
    "libvulkan1",
    "vulkan-tools",
    // What the NVIDIA Vulkan driver loads at run time; `cargo xtask bundle` ships them.
    "libgl1",
    "libgles2",
    "libegl1",
    "libopengl0",
    "libglx0",
    "libxext6",
    // Building Rust crates with C parts and bindgen.
    "ca-certificates",
    "gcc",
    "g++",
    "libc6-dev",
    "libclang-dev",
    "pkg-config",
    "cmake",
    "ninja-build",
    "python3",
    "git",
    // What a from-source Dawn build takes from Debian instead of fetching it.
    "libabsl-dev",
    "spirv-headers",
    "spirv-tools-dev",
    "spirv-tools-headers",
    "libvulkan-dev",
    "vulkan-utility-libraries-dev",
    "python3-jinja2",
    "python3-markupsafe",
    "libx11-dev",
    "libx11-xcb-dev",
    "libgbm-dev",
];

/// Written last: its presence means the root is complete; its content says what it was made from.
const STAMP: &str = "etc/dawn-compute/provisioned";
/// Package versions installed in the root, one `name<TAB>version` a line.
pub const MANIFEST: &str = "etc/dawn-compute/manifest.tsv";
/// apt inside the root must accept sid's Release files past their `Valid-Until` date.
const APT_VALID_UNTIL_CONF: &str = "etc/apt/apt.conf.d/90dawn-compute-valid-until";

/// The cache folder: `DAWN_COMPUTE_CACHE`, else `/var/cache/dawn-compute`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("DAWN_COMPUTE_CACHE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/dawn-compute"))
}

/// The root: `DAWN_COMPUTE_SYSROOT`, else `<cache>/sid-root`.
pub fn root_dir() -> PathBuf {
    std::env::var_os("DAWN_COMPUTE_SYSROOT")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("sid-root"))
}

/// What a root is made from; a change here updates an existing root.
fn spec() -> String {
    format!("dawn={DAWN_VERSION}\npackages={}\n", PACKAGES.join(","))
}

/// The root, if it is complete; otherwise an error saying how to make it.
pub fn existing() -> Result<PathBuf> {
    let root = root_dir();
    if !root.join(STAMP).is_file() {
        bail!(
            "the sid root at {} is not provisioned; run `cargo xtask env` first",
            root.display()
        );
    }
    Ok(root)
}

/// Creates the root, or brings an existing one up to date. Idempotent; serialised by a lock.
pub fn provision() -> Result<PathBuf> {
    host::require_root("env")?;
    let root = root_dir();
    let cache = root.parent().map(Path::to_path_buf).unwrap_or_else(cache_dir);
    fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    let lock_path = cache.join(".sid-root.lock");
    let lock = File::create(&lock_path).with_context(|| format!("creating {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;

    let stamp = root.join(STAMP);
    match fs::read_to_string(&stamp) {
        Ok(made_from) if made_from == spec() => {
            eprintln!("xtask: sid root at {} is up to date", root.display());
            return Ok(root);
        }
        Ok(_) => {
            eprintln!(
                "xtask: sid root at {} was made from another package list; updating it",
                root.display()
            );
            let mirror = host::debian_mirror();
            host::check_reachable(&mirror)?;
            install_packages(&root, PACKAGES)?;
        }
        Err(_) => {
            if root.exists() {
                eprintln!(
                    "xtask: {} holds an incomplete root (an interrupted run?); removing it and starting again",
                    root.display()
                );
                remove_root(&root)?;
            }
            bootstrap(&root)?;
        }
    }
    install_dawn(&root)?;
    write_manifest(&root)?;
    fs::write(&stamp, spec()).with_context(|| format!("writing {}", stamp.display()))?;
    eprintln!("xtask: sid root ready at {}", root.display());
    Ok(root)
}

/// Removes a half-made root, refusing if anything is still mounted inside it.
fn remove_root(root: &Path) -> Result<()> {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let prefix = format!("{}/", root.display());
    if let Some(line) = mounts
        .lines()
        .find(|l| l.split(' ').nth(1).is_some_and(|m| m.starts_with(&prefix)))
    {
        bail!(
            "refusing to delete {}: something is mounted inside it ({line}); unmount it first",
            root.display()
        );
    }
    fs::remove_dir_all(root).with_context(|| format!("removing {}", root.display()))
}

/// Makes a fresh root with debootstrap (signatures checked against the host's Debian keyring).
fn bootstrap(root: &Path) -> Result<()> {
    host::ensure_host_tool("debootstrap", "debootstrap")?;
    let mirror = host::debian_mirror();
    host::check_reachable(&mirror)?;
    eprintln!(
        "xtask: creating a Debian sid root at {} from {mirror} (about 2 GB, a minute or two)",
        root.display()
    );
    let mut debootstrap = Command::new("debootstrap");
    debootstrap
        .arg("--variant=minbase")
        .arg(format!("--include={}", PACKAGES.join(",")));
    let keyring = Path::new("/usr/share/keyrings/debian-archive-keyring.gpg");
    if keyring.is_file() {
        debootstrap.arg(format!("--keyring={}", keyring.display()));
    }
    debootstrap.arg("sid").arg(root).arg(&mirror);
    host::run_checked(
        &mut debootstrap,
        "If it says a signature is invalid, update the host's `debian-archive-keyring` package; if a \
         package failed to download, check the network or set DAWN_COMPUTE_MIRROR. Then re-run \
         `cargo xtask env` (the half-made root is detected and rebuilt).",
    )?;
    configure_apt(root)
}

/// apt inside the root: signatures stay verified; only the Release files' expiry check is relaxed.
fn configure_apt(root: &Path) -> Result<()> {
    eprintln!(
        "xtask: note: apt in the sid root ignores the Release files' `Valid-Until` date \
         (package signatures are still verified)"
    );
    let conf = root.join(APT_VALID_UNTIL_CONF);
    fs::write(&conf, "Acquire::Check-Valid-Until \"false\";\n").with_context(|| format!("writing {}", conf.display()))
}

/// Runs apt-get inside the root (after `apt-get update`).
fn apt_install(root: &Path, packages: &[String]) -> Result<()> {
    let fix = "Fix the cause apt names above (network, mirror, a package that no longer exists), then \
               re-run `cargo xtask env`.";
    sandbox::run_in_root(root, &["apt-get", "update", "-q"], fix)?;
    let mut args = vec!["apt-get", "install", "-y", "-q", "--no-install-recommends"];
    args.extend(packages.iter().map(String::as_str));
    sandbox::run_in_root(root, &args, fix)?;
    sandbox::run_in_root(root, &["apt-get", "clean"], fix)
}

fn install_packages(root: &Path, packages: &[&str]) -> Result<()> {
    configure_apt(root)?;
    apt_install(root, &packages.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>())
}

/// Installs Debian's Dawn at the pinned version, or the newest with a loud warning if the mirror
/// no longer has it.
fn install_dawn(root: &Path) -> Result<()> {
    if installed_version(root, DAWN_PACKAGES[0])?.as_deref() == Some(DAWN_VERSION) {
        return Ok(());
    }
    let fix = "Check the mirror, then re-run `cargo xtask env`.";
    sandbox::run_in_root(root, &["apt-get", "update", "-q"], fix)?;
    let available = sandbox::output_in_root(root, &["apt-cache", "madison", DAWN_PACKAGES[0]], fix)?;
    let pinned = available
        .lines()
        .any(|l| l.split('|').nth(1).map(str::trim) == Some(DAWN_VERSION));
    let packages: Vec<String> = if pinned {
        DAWN_PACKAGES.iter().map(|p| format!("{p}={DAWN_VERSION}")).collect()
    } else {
        eprintln!("\n{}", "!".repeat(78));
        eprintln!(
            "WARNING: the mirror no longer has Dawn {DAWN_VERSION}, the version this project was \
             verified with.\nWARNING: installing the newest Dawn instead; bindings and behaviour may differ."
        );
        eprintln!("{}\n", "!".repeat(78));
        DAWN_PACKAGES.iter().map(|p| (*p).to_owned()).collect()
    };
    apt_install(root, &packages)
}

/// The installed version of a package in the root, if any.
fn installed_version(root: &Path, package: &str) -> Result<Option<String>> {
    let status = root.join("var/lib/dpkg/status");
    let text = fs::read_to_string(&status).with_context(|| format!("reading {}", status.display()))?;
    for entry in text.split("\n\n") {
        let field = |name: &str| {
            entry
                .lines()
                .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
        };
        if field("Package:").as_deref() == Some(package) && field("Status:").is_some_and(|s| s.ends_with(" installed"))
        {
            return Ok(field("Version:"));
        }
    }
    Ok(None)
}

/// Records every installed package and its version, and prints the ones that matter most.
fn write_manifest(root: &Path) -> Result<()> {
    let listing = sandbox::output_in_root(
        root,
        &["dpkg-query", "-W", "-f", "${Package}\t${Version}\n"],
        "The root's package database looks damaged; delete the root and re-run `cargo xtask env`.",
    )?;
    let manifest = root.join(MANIFEST);
    if let Some(dir) = manifest.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    fs::write(&manifest, &listing).with_context(|| format!("writing {}", manifest.display()))?;
    eprintln!("xtask: package manifest written to {}", manifest.display());
    for line in listing.lines() {
        let name = line.split('\t').next().unwrap_or_default();
        if DAWN_PACKAGES.contains(&name) || ["mesa-vulkan-drivers", "libclang-dev", "libc6"].contains(&name) {
            eprintln!("xtask:   {}", line.replace('\t', " "));
        }
    }
    Ok(())
}
