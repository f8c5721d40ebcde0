//! Finding an installed Dawn: an install prefix, or the system's packages.

use std::path::{Path, PathBuf};

use crate::{Dawn, Linkage};

/// Prefixes searched for the system's Dawn: `CMAKE_PREFIX_PATH` first, then the usual ones.
pub fn system_prefixes() -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = std::env::var_os("CMAKE_PREFIX_PATH")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        prefixes.push("/opt/homebrew".into());
    }
    prefixes.push("/usr/local".into());
    prefixes.push("/usr".into());
    prefixes
}

/// Dawn under one prefix: `include/webgpu/webgpu.h` plus the library in one of the library
/// folders (a shared library is preferred over a static archive).
pub fn in_prefix(prefix: &Path, origin: &'static str) -> Option<Dawn> {
    let include_dir = prefix.join("include");
    if !include_dir.join("webgpu/webgpu.h").is_file() {
        return None;
    }
    let lib_dirs = library_dirs(prefix);
    let shared = ["libwebgpu_dawn.so", "libwebgpu_dawn.dylib"];
    for (names, linkage) in [
        (&shared[..], Linkage::Shared),
        (&["libwebgpu_dawn.a"][..], Linkage::Static),
    ] {
        if let Some(lib_dir) = lib_dirs.iter().find(|d| names.iter().any(|n| d.join(n).exists())) {
            return Some(Dawn {
                include_dir,
                lib_dir: lib_dir.clone(),
                linkage,
                origin,
            });
        }
    }
    None
}

/// `lib/<multiarch>`, `lib64` and `lib` under a prefix.
fn library_dirs(prefix: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(multiarch) = multiarch() {
        dirs.push(prefix.join("lib").join(multiarch));
    }
    dirs.push(prefix.join("lib64"));
    dirs.push(prefix.join("lib"));
    dirs
}

/// Debian's multiarch folder name for the target, e.g. `x86_64-linux-gnu`.
fn multiarch() -> Option<String> {
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").ok()?;
    let os = std::env::var("CARGO_CFG_TARGET_OS").ok()?;
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os != "linux" {
        return None;
    }
    let arch = match arch.as_str() {
        "x86" => "i386",
        other => other,
    };
    Some(format!("{arch}-linux-{env}"))
}
