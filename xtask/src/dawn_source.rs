//! `DAWN_SOURCE_DIR=DIR cargo xtask test|run|shell|msl-check`: Dawn built from a checkout anywhere
//! on the host instead of Debian's package.
//!
//! The checkout is mounted read-only at [`INSIDE`] in the root and `webgpu-dawn-sys` is told to build
//! from there (`DAWN_SOURCE_DIR`), into a CMake build folder under `<cache>/dawn-build/` named after
//! the checkout's path (`DAWN_SYS_BUILD_DIR`): it survives `cargo clean` and is shared by every target
//! folder and cargo profile, and CMake and Ninja rebuild only what changed in the checkout. The same
//! build makes Tint's command-line tool with the MSL writer (`DAWN_SYS_TINT_CMD`), for `msl-check`.
//! Debian's Dawn is hidden from the command, so whatever builds or runs there cannot pick it up.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::sandbox::{Extra, Mount};

/// Where the checkout appears inside the root.
pub const INSIDE: &str = "/opt/dawn-compute/dawn";

/// Debian's Dawn in the root (`libwebgpu-dawn-dev`, `libwebgpu-dawn0`): its header folders, CMake
/// package and libraries, hidden while a source build is used.
const SYSTEM_DAWN: &[&str] = &[
    "/usr/include/dawn",
    "/usr/include/webgpu",
    "/usr/include/webgpu_upstream",
    "/usr/lib/x86_64-linux-gnu/cmake/Dawn",
    "/usr/lib/x86_64-linux-gnu/libwebgpu_dawn.so",
    "/usr/lib/x86_64-linux-gnu/libwebgpu_dawn.so.0",
    "/usr/lib/x86_64-linux-gnu/libwebgpu_dawn.so.0.0",
    "/usr/lib/x86_64-linux-gnu/libdawn_glfw.a",
];

/// A Dawn checkout on the host and the build folder that belongs to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceDawn {
    /// The checkout, absolute and without symbolic links.
    pub checkout: PathBuf,
    /// The CMake build and install folder (`<cache>/dawn-build/<name>-<hash of the path>`).
    pub build_dir: PathBuf,
}

impl SourceDawn {
    /// From `DAWN_SOURCE_DIR` (unset or empty: `None`).
    pub fn from_env(cache: &Path) -> Result<Option<SourceDawn>> {
        match std::env::var_os("DAWN_SOURCE_DIR").filter(|v| !v.is_empty()) {
            Some(dir) => SourceDawn::new(Path::new(&dir), cache).map(Some),
            None => Ok(None),
        }
    }

    /// Checks that `dir` is a Dawn checkout and names its build folder under `cache`.
    pub fn new(dir: &Path, cache: &Path) -> Result<SourceDawn> {
        let checkout = dir
            .canonicalize()
            .with_context(|| format!("DAWN_SOURCE_DIR={}: no such folder", dir.display()))?;
        if !(checkout.join("CMakeLists.txt").is_file() && checkout.join("src/dawn").is_dir()) {
            bail!(
                "DAWN_SOURCE_DIR={} is not a Dawn checkout (no CMakeLists.txt and src/dawn there)",
                dir.display()
            );
        }
        if checkout == Path::new("/") {
            bail!("DAWN_SOURCE_DIR must not be /");
        }
        let build_dir = cache.join("dawn-build").join(build_key(&checkout));
        Ok(SourceDawn { checkout, build_dir })
    }

    /// The mounts, hidden paths and environment a command in the root gets.
    pub fn extra(&self) -> Extra {
        Extra {
            mounts: vec![
                Mount {
                    source: self.checkout.clone(),
                    inside: PathBuf::from(INSIDE),
                    read_only: true,
                },
                Mount {
                    source: self.build_dir.clone(),
                    inside: self.build_dir.clone(),
                    read_only: false,
                },
            ],
            hide: SYSTEM_DAWN.iter().map(PathBuf::from).collect(),
            env: vec![
                ("DAWN_SOURCE_DIR".into(), INSIDE.into()),
                ("DAWN_SYS_BUILD_DIR".into(), self.build_dir.clone().into_os_string()),
                ("DAWN_SYS_TINT_CMD".into(), "1".into()),
                // A value left on the host would win over the source build.
                ("DAWN_SYS_USE_INSTALLED".into(), OsString::new()),
                ("DAWN_DIR".into(), OsString::new()),
            ],
        }
    }

    /// Creates the build folder (the mount needs it).
    pub fn prepare(&self) -> Result<()> {
        std::fs::create_dir_all(&self.build_dir)
            .with_context(|| format!("creating the Dawn build folder {}", self.build_dir.display()))
    }

    /// Where Tint's command-line tool is once the build has made it.
    pub fn tint(&self) -> PathBuf {
        self.build_dir.join("build/tint")
    }
}

/// The build folder's name: the checkout's folder name (letters, digits, `-`, `_`, `.` kept) and
/// a hash of its whole path, so two checkouts never share a build.
pub fn build_key(checkout: &Path) -> String {
    let name: String = checkout
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let name = name.trim_start_matches('.');
    let name = if name.is_empty() { "dawn" } else { name };
    format!("{name}-{:016x}", fnv1a(checkout.as_os_str().as_encoded_bytes()))
}

/// FNV-1a, 64 bits: stable across Rust versions and machines (std's hashers are not).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::owned::TempDir;

    fn fake_checkout(tmp: &TempDir, name: &str) -> PathBuf {
        let dir = tmp.path().join(name);
        fs::create_dir_all(dir.join("src/dawn")).unwrap();
        fs::write(dir.join("CMakeLists.txt"), "").unwrap();
        dir
    }

    #[test]
    fn a_checkout_is_mounted_read_only_and_the_build_goes_to_the_cache() {
        let tmp = TempDir::new("dawn-source");
        let dir = fake_checkout(&tmp, "dawn src");
        let source = SourceDawn::new(&dir, Path::new("/var/cache/dc")).unwrap();
        assert_eq!(source.checkout, dir.canonicalize().unwrap());
        assert!(source.build_dir.starts_with("/var/cache/dc/dawn-build"));
        let key = source.build_dir.file_name().unwrap().to_str().unwrap();
        assert!(key.starts_with("dawn_src-"), "{key}");
        assert_eq!(source.tint(), source.build_dir.join("build/tint"));

        let extra = source.extra();
        assert_eq!(
            extra.mounts[0],
            Mount {
                source: source.checkout.clone(),
                inside: PathBuf::from(INSIDE),
                read_only: true
            }
        );
        assert_eq!(extra.mounts[1].source, source.build_dir);
        assert_eq!(extra.mounts[1].inside, source.build_dir);
        assert!(!extra.mounts[1].read_only);
        let env = |name: &str| {
            extra
                .env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("{name} not set"))
        };
        assert_eq!(env("DAWN_SOURCE_DIR"), INSIDE);
        assert_eq!(env("DAWN_SYS_BUILD_DIR"), source.build_dir.as_os_str());
        assert_eq!(env("DAWN_SYS_TINT_CMD"), "1");
        assert_eq!(env("DAWN_SYS_USE_INSTALLED"), "");
        assert_eq!(env("DAWN_DIR"), "");
        assert!(extra.hide.contains(&PathBuf::from("/usr/include/webgpu")));
        assert!(extra.hide.iter().any(|p| p.ends_with("libwebgpu_dawn.so.0")));
    }

    #[test]
    fn the_build_folder_depends_on_the_checkout_path_only() {
        let tmp = TempDir::new("dawn-source-key");
        let a = fake_checkout(&tmp, "a/dawn");
        let b = fake_checkout(&tmp, "b/dawn");
        let cache = Path::new("/c");
        let sa = SourceDawn::new(&a, cache).unwrap();
        assert_eq!(sa, SourceDawn::new(&a.join("src/.."), cache).unwrap());
        assert_ne!(sa.build_dir, SourceDawn::new(&b, cache).unwrap().build_dir);
        // Fixed values: the folder must not move between xtask builds.
        assert_eq!(
            build_key(Path::new("/x/dawn")),
            format!("dawn-{:016x}", fnv1a(b"/x/dawn"))
        );
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(build_key(Path::new("/")).split('-').next(), Some("dawn"));
        assert!(build_key(Path::new("/x/..hidden")).starts_with("hidden-"));
    }

    #[test]
    fn a_folder_that_is_not_a_dawn_checkout_is_refused() {
        let tmp = TempDir::new("dawn-source-bad");
        let err = SourceDawn::new(tmp.path(), Path::new("/c")).unwrap_err().to_string();
        assert!(err.contains("is not a Dawn checkout"), "{err}");
        let err = SourceDawn::new(&tmp.path().join("missing"), Path::new("/c"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no such folder"), "{err}");
    }
}
