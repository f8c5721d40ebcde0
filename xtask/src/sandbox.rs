//! Running a command inside the sid root.
//!
//! Each command gets a private mount namespace (`unshare --mount`): the bind mounts it needs are
//! made inside that namespace and vanish with its last process, even when it is killed, and two
//! commands running at once never see each other's mounts.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::host::{self, sh_quote};
use crate::sysroot;

/// Where cargo puts what it builds inside the root: `DAWN_COMPUTE_TARGET_DIR`, else
/// `<cache>/target`. Outside the repository, so a fresh clone on a warm machine builds fast, and
/// apart from the host's `target/`, whose binaries link against the host's older C library.
pub fn target_dir() -> PathBuf {
    std::env::var_os("DAWN_COMPUTE_TARGET_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| sysroot::cache_dir().join("target"))
}

/// Replaces this process with `command` running inside the root. Returns only on failure.
pub fn exec_in_root(root: &Path, command: &[OsString]) -> anyhow::Error {
    match build(root, command) {
        Ok(mut cmd) => anyhow::Error::new(cmd.exec()).context("could not start `unshare`"),
        Err(err) => err,
    }
}

/// Runs `command` inside the root and waits for it; `fix` tells the user what to do on failure.
pub fn run_in_root(root: &Path, command: &[&str], fix: &str) -> Result<()> {
    host::run_checked(&mut build(root, &to_os(command))?, fix)
}

/// The command that runs `command` inside the root, for the caller to run.
pub fn command_in_root(root: &Path, command: &[&str]) -> Result<Command> {
    build(root, &to_os(command))
}

/// Runs `command` inside the root and returns what it printed.
pub fn output_in_root(root: &Path, command: &[&str], fix: &str) -> Result<String> {
    host::output_checked(&mut build(root, &to_os(command))?, fix)
}

fn to_os(command: &[&str]) -> Vec<OsString> {
    command.iter().map(OsString::from).collect()
}

/// The `unshare … sh -c SCRIPT` command that mounts what the root needs, then chroots and runs.
fn build(root: &Path, command: &[OsString]) -> Result<Command> {
    host::require_root("shell")?;
    let workdir = std::env::current_dir().context("reading the current directory")?;
    let repo = repository_root(&workdir);
    let home = home_dir();
    let rustup_home = env_path("RUSTUP_HOME").unwrap_or_else(|| home.join(".rustup"));
    let cargo_home = env_path("CARGO_HOME").unwrap_or_else(|| home.join(".cargo"));
    let target = target_dir();
    std::fs::create_dir_all(&target).with_context(|| format!("creating {}", target.display()))?;

    // Folders that appear inside the root at the same path as outside.
    let mut binds: Vec<PathBuf> = vec![repo.clone(), rustup_home.clone(), cargo_home.clone(), target.clone()];
    // The shared data folder that sits beside the repository, when there is one.
    if let Some(shared) = repo.parent().map(|p| p.join("shared")).filter(|p| p.is_dir()) {
        binds.push(shared);
    }
    binds.retain(|p| p.exists());

    let r = sh_quote(&root.display().to_string());
    let mut script = String::from("set -e\nmount --make-rprivate /\n");
    script += &format!("mount -t proc proc {r}/proc\n");
    script += &format!("mount --rbind /dev {r}/dev\n");
    script += &format!("mount --rbind /sys {r}/sys\n");
    script += &format!("mount -t tmpfs -o mode=1777 tmpfs {r}/tmp\n");
    for file in ["/etc/resolv.conf", "/etc/ssl/certs/ca-certificates.crt"] {
        if Path::new(file).is_file() {
            let inside = format!("{}{file}", root.display());
            let q = sh_quote(&inside);
            script += &format!("mkdir -p \"$(dirname {q})\"; [ -f {q} ] || : > {q}; mount --bind {file} {q}\n");
        }
    }
    for dir in &binds {
        let outside = sh_quote(&dir.display().to_string());
        let inside = sh_quote(&format!("{}{}", root.display(), dir.display()));
        script += &format!("mkdir -p {inside}; mount --rbind {outside} {inside}\n");
    }
    // `$1` is the working directory; the rest is the command.
    script += &format!("exec chroot {r} /bin/sh -c 'cd \"$1\" && shift && exec \"$@\"' sh \"$@\"\n");

    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
        .arg(script)
        .arg("sh")
        .arg(&workdir)
        .args(command);
    let mut path = OsString::from(cargo_home.join("bin"));
    path.push(":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    cmd.env("PATH", path)
        .env("HOME", &home)
        .env("RUSTUP_HOME", &rustup_home)
        .env("CARGO_HOME", &cargo_home)
        .env("CARGO_TARGET_DIR", &target)
        .env("DAWN_COMPUTE_IN_SYSROOT", "1")
        // Host library paths mean nothing inside the root.
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("PKG_CONFIG_PATH")
        .env_remove("LIBCLANG_PATH");
    Ok(cmd)
}

/// The top of the git work tree holding `dir` (the folder itself if it is in none).
fn repository_root(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| dir.to_path_buf())
}

fn home_dir() -> PathBuf {
    env_path("HOME").unwrap_or_else(|| PathBuf::from("/root"))
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}
