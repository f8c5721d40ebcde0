//! Folders that xtask made, and only those, may be deleted or replaced.
//!
//! Every folder xtask creates and may later delete (the sid root, a bundle, the bundle's staging
//! folder) gets a marker file, [`MARKER`], when it is created, naming what kind of folder it is.
//! A folder is deleted only when it holds the marker of the expected kind, so a variable or option
//! pointing at `/`, a home folder or anything else xtask did not make is refused, never deleted,
//! and a bundle's `--out` pointed at the sid root is refused too.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};

/// The marker file's name, inside the folder it marks.
pub const MARKER: &str = ".dawn-compute-xtask";

/// What a marked folder is; a marker of one kind does not allow deleting a folder as another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The Debian sid root (`DAWN_COMPUTE_SYSROOT`).
    SidRoot,
    /// The output of `cargo xtask bundle` (`--out`).
    Bundle,
    /// Where `cargo xtask bundle` gathers files first (under `DAWN_COMPUTE_TARGET_DIR`).
    BundleStaging,
    /// Where `cargo xtask upstream` builds upstream ggml (`<cache>/upstream-build`).
    UpstreamBuild,
    /// Where `cargo xtask upstream --llama` builds llama.cpp (`<cache>/upstream-build/llama`).
    LlamaBuild,
    /// Where `cargo xtask msl-check` writes the shaders and their MSL (`<cache>/msl-check`).
    MslCheck,
}

impl Kind {
    /// The marker's first line.
    fn tag(self) -> &'static str {
        match self {
            Kind::SidRoot => "sid-root",
            Kind::Bundle => "bundle",
            Kind::BundleStaging => "bundle-staging",
            Kind::UpstreamBuild => "upstream-build",
            Kind::LlamaBuild => "upstream-llama-build",
            Kind::MslCheck => "msl-check",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::SidRoot => "sid root",
            Kind::Bundle => "bundle",
            Kind::BundleStaging => "bundle staging folder",
            Kind::UpstreamBuild => "build folder of upstream ggml",
            Kind::LlamaBuild => "build folder of llama.cpp",
            Kind::MslCheck => "folder of the MSL check",
        }
    }

    /// What the user can change instead of deleting the folder by hand.
    fn elsewhere(self) -> &'static str {
        match self {
            Kind::SidRoot => "set DAWN_COMPUTE_SYSROOT to a folder that does not exist yet",
            Kind::Bundle => "pass `--out` a folder that does not exist yet or is empty",
            Kind::BundleStaging => "set DAWN_COMPUTE_TARGET_DIR to a folder of its own",
            Kind::UpstreamBuild | Kind::LlamaBuild | Kind::MslCheck => "set DAWN_COMPUTE_CACHE to a folder of its own",
        }
    }
}

fn marker_text(kind: Kind) -> String {
    format!(
        "{}\nThis folder was made by `cargo xtask` (dawn-compute), which may delete or replace it.\n",
        kind.tag()
    )
}

/// Whether `dir` is a real folder (not a symbolic link) holding the marker of `kind`.
pub fn is_marked(dir: &Path, kind: Kind) -> bool {
    let is_dir = fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
    let marker = dir.join(MARKER);
    let is_file = fs::symlink_metadata(&marker).is_ok_and(|m| m.is_file());
    is_dir && is_file && fs::read_to_string(&marker).is_ok_and(|text| text.lines().next() == Some(kind.tag()))
}

/// Marks `dir` as made by xtask. Fails if a marker (of any kind) is already there.
pub fn mark(dir: &Path, kind: Kind) -> Result<()> {
    let marker = dir.join(MARKER);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&marker)
        .with_context(|| format!("creating {}", marker.display()))?;
    file.write_all(marker_text(kind).as_bytes())
        .with_context(|| format!("writing {}", marker.display()))
}

/// Deletes `dir` and everything in it, only if xtask made it as `kind`.
pub fn remove(dir: &Path, kind: Kind) -> Result<()> {
    if !is_marked(dir, kind) {
        bail!(
            "refusing to delete {}: it has no `{MARKER}` file saying that `cargo xtask` made it as a {}, \
             so it may be something else. If it is safe to delete, delete it yourself; or {}",
            dir.display(),
            kind.describe(),
            kind.elsewhere()
        );
    }
    fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))
}

/// Fails if [`fresh_dir`] would refuse `dir`; changes nothing. For checking an output folder
/// before a long build rather than after it.
pub fn check_fresh(dir: &Path, kind: Kind) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err).with_context(|| format!("reading {}", dir.display())),
        Ok(meta) if !meta.is_dir() => bail!(
            "refusing to use {} as a {}: it exists and is not a folder (a file or a symbolic link); {}",
            dir.display(),
            kind.describe(),
            kind.elsewhere()
        ),
        Ok(_) if is_empty_dir(dir)? || is_marked(dir, kind) => Ok(()),
        Ok(_) => bail!(
            "refusing to replace {}: it is not empty and has no `{MARKER}` file saying that `cargo xtask` \
             made it as a {}, so it may hold something else. If it is safe to delete, delete it \
             yourself; or {}",
            dir.display(),
            kind.describe(),
            kind.elsewhere()
        ),
    }
}

/// Makes `dir` an empty folder marked as `kind`: creates it (and its parents) when missing, takes
/// it over when it is an empty folder, deletes and recreates it when xtask made it as `kind`, and
/// refuses anything else (a folder with files xtask did not make, a file, a symbolic link).
pub fn fresh_dir(dir: &Path, kind: Kind) -> Result<()> {
    check_fresh(dir, kind)?;
    if fs::symlink_metadata(dir).is_err() {
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::create_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
    } else if !is_empty_dir(dir)? {
        remove(dir, kind)?;
        fs::create_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    mark(dir, kind)
}

fn is_empty_dir(dir: &Path) -> Result<bool> {
    Ok(fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .next()
        .is_none())
}

/// A fresh, empty folder under the system's temporary folder, removed when dropped (for tests).
#[cfg(test)]
#[derive(Debug)]
pub struct TempDir(std::path::PathBuf);

#[cfg(test)]
impl TempDir {
    pub fn new(name: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("xtask-test-{}-{name}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("creating a temporary folder");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

#[cfg(test)]
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_to_delete_a_folder_without_the_marker() {
        let tmp = TempDir::new("unmarked");
        let dir = tmp.path().join("home");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("precious"), "keep me").unwrap();
        let err = remove(&dir, Kind::SidRoot).unwrap_err().to_string();
        assert!(err.contains("refusing to delete"), "{err}");
        assert!(err.contains(MARKER), "{err}");
        assert_eq!(fs::read_to_string(dir.join("precious")).unwrap(), "keep me");
    }

    #[test]
    fn deletes_a_folder_with_the_marker() {
        let tmp = TempDir::new("marked");
        let dir = tmp.path().join("root");
        fresh_dir(&dir, Kind::SidRoot).unwrap();
        fs::create_dir_all(dir.join("usr/bin")).unwrap();
        fs::write(dir.join("usr/bin/sh"), "x").unwrap();
        remove(&dir, Kind::SidRoot).unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn a_marker_of_another_kind_does_not_count() {
        let tmp = TempDir::new("kind");
        let dir = tmp.path().join("root");
        fresh_dir(&dir, Kind::SidRoot).unwrap();
        assert!(remove(&dir, Kind::Bundle).is_err());
        assert!(fresh_dir(&dir, Kind::Bundle).is_err());
        assert!(dir.join(MARKER).is_file());
    }

    #[test]
    fn a_marker_that_is_a_symbolic_link_does_not_count() {
        let tmp = TempDir::new("link");
        let elsewhere = tmp.path().join("elsewhere");
        fs::write(&elsewhere, marker_text(Kind::SidRoot)).unwrap();
        let dir = tmp.path().join("dir");
        fs::create_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join(MARKER)).unwrap();
        assert!(remove(&dir, Kind::SidRoot).is_err());
        assert!(dir.exists());
    }

    #[test]
    fn a_symbolic_link_to_a_marked_folder_is_not_followed() {
        let tmp = TempDir::new("dirlink");
        let real = tmp.path().join("real");
        fresh_dir(&real, Kind::Bundle).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(remove(&link, Kind::Bundle).is_err());
        assert!(fresh_dir(&link, Kind::Bundle).is_err());
        assert!(real.join(MARKER).is_file());
    }

    #[test]
    fn fresh_dir_refuses_a_non_empty_folder_it_did_not_make() {
        let tmp = TempDir::new("fresh");
        let dir = tmp.path().join("out");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("notes.txt"), "mine").unwrap();
        let err = fresh_dir(&dir, Kind::Bundle).unwrap_err().to_string();
        assert!(err.contains("refusing to replace"), "{err}");
        assert_eq!(fs::read_to_string(dir.join("notes.txt")).unwrap(), "mine");
        assert!(!dir.join(MARKER).exists());
    }

    #[test]
    fn fresh_dir_refuses_a_file() {
        let tmp = TempDir::new("file");
        let file = tmp.path().join("out");
        fs::write(&file, "mine").unwrap();
        assert!(fresh_dir(&file, Kind::Bundle).is_err());
        assert_eq!(fs::read_to_string(&file).unwrap(), "mine");
    }

    #[test]
    fn fresh_dir_creates_takes_over_empty_and_replaces_its_own() {
        let tmp = TempDir::new("cycle");
        let dir = tmp.path().join("a/b/out");
        fresh_dir(&dir, Kind::Bundle).unwrap();
        assert!(is_marked(&dir, Kind::Bundle));
        fs::write(dir.join("old"), "").unwrap();
        fresh_dir(&dir, Kind::Bundle).unwrap();
        assert!(is_marked(&dir, Kind::Bundle));
        assert!(!dir.join("old").exists());

        let empty = tmp.path().join("empty");
        fs::create_dir(&empty).unwrap();
        fresh_dir(&empty, Kind::Bundle).unwrap();
        assert!(is_marked(&empty, Kind::Bundle));
    }
}
