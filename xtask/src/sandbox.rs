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

/// Where cargo puts what it builds inside the root: `DAWN_COMPUTE_TARGET_DIR`, else the host's
/// `CARGO_TARGET_DIR`, else `<cache>/target`. Outside the repository by default, so a fresh clone
/// on a warm machine builds fast, and apart from the host's `target/`, whose binaries link
/// against the host's older C library (a `CARGO_TARGET_DIR` shared with host builds mixes the
/// two: give the root a folder of its own).
pub fn target_dir() -> PathBuf {
    ["DAWN_COMPUTE_TARGET_DIR", "CARGO_TARGET_DIR"]
        .iter()
        .find_map(|name| env_path(name))
        .map(|dir| absolute(&dir))
        .unwrap_or_else(|| sysroot::cache_dir().join("target"))
}

/// `path` made absolute against the current folder (it is mounted at the same path inside).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// This project's repository (the one `xtask` was built from): mounted in the root beside the
/// current folder's, so that a crate of one's own elsewhere on the machine reaches the project's
/// crates by path.
pub fn project_dir() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().map_or_else(|| xtask.to_path_buf(), Path::to_path_buf)
}

/// A bind mount that one command gets on top of the usual ones: `source` (a folder or a file on
/// the host) appears at `inside` (an absolute path inside the root), read-only if asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub source: PathBuf,
    pub inside: PathBuf,
    pub read_only: bool,
}

/// What one command gets on top of the usual setup: bind mounts, paths of the root hidden
/// (an empty read-only tmpfs over a folder, `/dev/null` over a file), environment variables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extra {
    pub mounts: Vec<Mount>,
    /// Absolute paths inside the root; those that do not exist are skipped.
    pub hide: Vec<PathBuf>,
    pub env: Vec<(OsString, OsString)>,
}

/// Replaces this process with `command` running inside the root, with `extra`. Returns only on
/// failure.
pub fn exec_in_root_extra(root: &Path, command: &[OsString], extra: &Extra) -> anyhow::Error {
    match build_extra(root, command, extra) {
        Ok(mut cmd) => anyhow::Error::new(cmd.exec()).context("could not start `unshare`"),
        Err(err) => err,
    }
}

/// Runs `command` inside the root with `extra` and waits for it.
pub fn run_in_root_extra(root: &Path, command: &[OsString], extra: &Extra, fix: &str) -> Result<()> {
    host::run_checked(&mut build_extra(root, command, extra)?, fix)
}

/// Runs `command` inside the root and waits for it; `fix` tells the user what to do on failure.
pub fn run_in_root(root: &Path, command: &[&str], fix: &str) -> Result<()> {
    host::run_checked(&mut build(root, &to_os(command))?, fix)
}

/// The command that runs `command` inside the root, for the caller to run.
pub fn command_in_root(root: &Path, command: &[&str]) -> Result<Command> {
    build(root, &to_os(command))
}

/// Like [`run_in_root`], with `mounts` made (in their order) after the usual ones.
pub fn run_in_root_with(root: &Path, command: &[&str], mounts: &[Mount], fix: &str) -> Result<()> {
    host::run_checked(&mut build_with(root, &to_os(command), mounts)?, fix)
}

/// Like [`output_in_root`], with `mounts` made (in their order) after the usual ones.
pub fn output_in_root_with(root: &Path, command: &[&str], mounts: &[Mount], fix: &str) -> Result<String> {
    host::output_checked(&mut build_with(root, &to_os(command), mounts)?, fix)
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
    build_with(root, command, &[])
}

/// [`build`] with extra mounts.
fn build_with(root: &Path, command: &[OsString], mounts: &[Mount]) -> Result<Command> {
    build_extra(
        root,
        command,
        &Extra {
            mounts: mounts.to_vec(),
            ..Extra::default()
        },
    )
}

/// [`build`] with `extra`.
fn build_extra(root: &Path, command: &[OsString], extra: &Extra) -> Result<Command> {
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
    let project = project_dir();
    if !repo.starts_with(&project) && !project.starts_with(&repo) {
        binds.push(project);
    }
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
    // The model cache (`cargo xtask model`), read-only at the same path, when there is one: the
    // real-model tests look for it there.
    let models = crate::model::models_dir();
    let mut mounts: Vec<Mount> = Vec::new();
    if models.is_dir() {
        mounts.push(Mount {
            source: models.clone(),
            inside: models,
            read_only: true,
        });
    }
    mounts.extend(extra.mounts.iter().cloned());
    script += &extra_mounts(root, &mounts);
    script += &hide(root, &extra.hide);
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
    cmd.envs(extra.env.iter().map(|(k, v)| (k, v)));
    Ok(cmd)
}

/// The script lines that hide `paths` of the root: an empty read-only tmpfs over a folder,
/// `/dev/null` over anything else; a path missing from the root is skipped.
fn hide(root: &Path, paths: &[PathBuf]) -> String {
    let mut script = String::new();
    for path in paths {
        let at = root.join(path.strip_prefix("/").unwrap_or(path));
        let inside = sh_quote(&at.display().to_string());
        if at.is_dir() {
            script += &format!("mount -t tmpfs -o ro,mode=755 hidden {inside}\n");
        } else if at.symlink_metadata().is_ok() {
            script += &format!("mount --bind /dev/null {inside}\n");
        }
    }
    script
}

/// The script lines that make `mounts`: the mount point is created when missing (a folder for a
/// folder, an empty file for a file), and a read-only mount is remounted read-only.
fn extra_mounts(root: &Path, mounts: &[Mount]) -> String {
    let mut script = String::new();
    for mount in mounts {
        let outside = sh_quote(&mount.source.display().to_string());
        let inside = sh_quote(&format!("{}{}", root.display(), mount.inside.display()));
        if mount.source.is_dir() {
            script += &format!("mkdir -p {inside}\n");
        } else {
            script += &format!("[ -e {inside} ] || {{ mkdir -p \"$(dirname {inside})\"; : > {inside}; }}\n");
        }
        script += &format!("mount --bind {outside} {inside}\n");
        if mount.read_only {
            script += &format!("mount -o remount,bind,ro {inside}\n");
        }
    }
    script
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::owned::TempDir;

    #[test]
    fn hidden_folders_get_a_tmpfs_files_dev_null_and_missing_paths_nothing() {
        let tmp = TempDir::new("hide");
        let root = tmp.path();
        std::fs::create_dir_all(root.join("usr/include/webgpu")).unwrap();
        std::fs::create_dir_all(root.join("usr/lib")).unwrap();
        std::fs::write(root.join("usr/lib/libwebgpu_dawn.so.0"), "").unwrap();
        std::os::unix::fs::symlink("libwebgpu_dawn.so.0", root.join("usr/lib/libwebgpu_dawn.so")).unwrap();
        let script = hide(
            root,
            &[
                PathBuf::from("/usr/include/webgpu"),
                PathBuf::from("/usr/lib/libwebgpu_dawn.so.0"),
                PathBuf::from("/usr/lib/libwebgpu_dawn.so"),
                PathBuf::from("/usr/include/dawn"),
            ],
        );
        let r = root.display();
        assert_eq!(
            script,
            format!(
                "mount -t tmpfs -o ro,mode=755 hidden '{r}/usr/include/webgpu'\n\
                 mount --bind /dev/null '{r}/usr/lib/libwebgpu_dawn.so.0'\n\
                 mount --bind /dev/null '{r}/usr/lib/libwebgpu_dawn.so'\n"
            )
        );
    }

    #[test]
    fn extra_mounts_are_made_read_only_when_asked() {
        let tmp = TempDir::new("mounts");
        let script = extra_mounts(
            Path::new("/root"),
            &[Mount {
                source: tmp.path().to_path_buf(),
                inside: PathBuf::from("/opt/dawn-compute/dawn"),
                read_only: true,
            }],
        );
        let s = tmp.path().display();
        assert_eq!(
            script,
            format!(
                "mkdir -p '/root/opt/dawn-compute/dawn'\nmount --bind '{s}' '/root/opt/dawn-compute/dawn'\n\
                 mount -o remount,bind,ro '/root/opt/dawn-compute/dawn'\n"
            )
        );
    }
}
