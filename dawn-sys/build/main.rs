//! Finds or builds Dawn, links it, and generates the bindings.
//!
//! Order (the first that applies wins):
//! 1. Build from source with CMake: `DAWN_SOURCE_DIR`, or a populated `third_party/dawn`.
//!    Skipped when `DAWN_SYS_USE_INSTALLED` is set; required by the `build-from-source` feature.
//! 2. An installed Dawn under the prefix `DAWN_DIR`.
//! 3. The system's Dawn (Debian's `libwebgpu-dawn-dev`), under `CMAKE_PREFIX_PATH`, `/usr/local` or `/usr`.
//!
//! A source build lives in `OUT_DIR`, or in `DAWN_SYS_BUILD_DIR` when that is set (a folder kept
//! across `cargo clean` and shared by every target folder; CMake and Ninja rebuild only what
//! changed). `DAWN_SYS_TINT_CMD=1` also builds Tint's command-line tool there, with the MSL writer.
//!
//! With `DOCS_RS` set nothing is built or linked: the checked-in bindings are used.

mod bindings;
mod installed;
mod source;

use std::path::{Path, PathBuf};

/// Every environment variable this script reads; a change to any of them reruns it.
const ENV_VARS: &[&str] = &[
    "DAWN_SOURCE_DIR",
    "DAWN_DIR",
    "DAWN_SYS_USE_INSTALLED",
    "DAWN_SYS_FETCH_DEPENDENCIES",
    "DAWN_SYS_BUILD_DIR",
    "DAWN_SYS_TINT_CMD",
    "DAWN_SYS_UPDATE_BINDINGS",
    "CMAKE_PREFIX_PATH",
    "DOCS_RS",
];

/// Where Dawn's headers and library are, and how to link it.
#[derive(Debug)]
pub struct Dawn {
    /// Folder holding `webgpu/webgpu.h`.
    pub include_dir: PathBuf,
    /// Folder holding the library.
    pub lib_dir: PathBuf,
    /// Static archive (with its dependencies to link) or shared library.
    pub linkage: Linkage,
    /// Which of the three ways found it, for messages and `DEP_WEBGPU_DAWN_ORIGIN`.
    pub origin: &'static str,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Linkage {
    Shared,
    Static,
}

fn main() {
    for var in ENV_VARS {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build");
    println!("cargo:rerun-if-changed=cmake");

    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));

    if std::env::var_os("DOCS_RS").is_some() {
        bindings::use_pregenerated(&manifest_dir, &out_dir);
        return;
    }

    let dawn = match locate(&manifest_dir, &out_dir) {
        Ok(dawn) => dawn,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(1);
        }
    };
    // Which Dawn was found is worth a line only when asked: a warning on every build of every
    // crate above is noise. It is in the build script's output (`cargo build -vv`) and in
    // `DEP_WEBGPU_DAWN_ORIGIN` for dependent build scripts either way.
    let found = format!("webgpu-dawn-sys: using {} ({})", dawn.origin, dawn.lib_dir.display());
    if env_flag("DAWN_SYS_VERBOSE") {
        println!("cargo:warning={found}");
    } else {
        println!("{found}");
    }
    println!("cargo:rerun-if-env-changed=DAWN_SYS_VERBOSE");
    emit_link(&dawn);
    println!("cargo:include={}", dawn.include_dir.display());
    println!("cargo:lib_dir={}", dawn.lib_dir.display());
    println!("cargo:origin={}", dawn.origin);
    bindings::generate(&dawn, &manifest_dir, &out_dir);
}

fn env_flag(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Applies the documented order; returns the three-way message when nothing is found.
fn locate(manifest_dir: &Path, out_dir: &Path) -> Result<Dawn, String> {
    let force_source = std::env::var_os("CARGO_FEATURE_BUILD_FROM_SOURCE").is_some();
    let force_installed = env_flag("DAWN_SYS_USE_INSTALLED");
    if force_source && force_installed {
        return Err(
            "webgpu-dawn-sys: the `build-from-source` feature and DAWN_SYS_USE_INSTALLED \
                    contradict each other; drop one"
                .into(),
        );
    }

    let mut searched = Vec::new();
    if !force_installed {
        let bundled = manifest_dir.parent().unwrap_or(manifest_dir).join("third_party/dawn");
        let source_dir = match std::env::var_os("DAWN_SOURCE_DIR").filter(|v| !v.is_empty()) {
            Some(dir) => {
                let dir = PathBuf::from(dir);
                if !source::is_dawn_tree(&dir) {
                    return Err(format!(
                        "webgpu-dawn-sys: DAWN_SOURCE_DIR={} is not a Dawn source tree (no CMakeLists.txt \
                         and src/dawn there)",
                        dir.display()
                    ));
                }
                Some(dir)
            }
            None => {
                searched.push(format!(
                    "source tree {} (empty: the submodule is not populated)",
                    bundled.display()
                ));
                source::is_dawn_tree(&bundled).then_some(bundled)
            }
        };
        if let Some(dir) = source_dir {
            println!("cargo:rerun-if-changed={}", dir.join("CMakeLists.txt").display());
            println!("cargo:rerun-if-changed={}", dir.join("src/dawn/dawn.json").display());
            return source::build(&dir, manifest_dir, out_dir);
        }
    }
    if force_source {
        return Err(format!(
            "webgpu-dawn-sys: the `build-from-source` feature is on but there is no Dawn source: set \
             DAWN_SOURCE_DIR to a Dawn checkout, or populate third_party/dawn \
             (`git submodule update --init third_party/dawn`).\nSearched: {}",
            searched.join("; ")
        ));
    }

    if let Some(prefix) = std::env::var_os("DAWN_DIR").filter(|v| !v.is_empty()) {
        let prefix = PathBuf::from(prefix);
        return installed::in_prefix(&prefix, "DAWN_DIR").ok_or_else(|| {
            format!(
                "webgpu-dawn-sys: DAWN_DIR={} holds no Dawn: expected include/webgpu/webgpu.h and \
                 lib/libwebgpu_dawn.{{so,dylib,a}} (or lib64/, lib/<multiarch>/) under it",
                prefix.display()
            )
        });
    }
    searched.push("DAWN_DIR (not set)".into());

    let prefixes = installed::system_prefixes();
    if let Some(dawn) = prefixes
        .iter()
        .find_map(|p| installed::in_prefix(p, "the system's Dawn"))
    {
        return Ok(dawn);
    }
    searched.extend(prefixes.iter().map(|p| format!("prefix {}", p.display())));

    Err(format!(
        "\nwebgpu-dawn-sys: Dawn (Google's WebGPU implementation) was not found. Provide it in one of three ways:\n\
         \n  1. Build it from source: set DAWN_SOURCE_DIR to a Dawn checkout, or populate the submodule\n\
         \x20    (`git submodule update --init third_party/dawn`). About 15 minutes on 2 cores; needs cmake,\n\
         \x20    ninja, python3 and Dawn's dependencies (see third_party/README.md).\n\
         \n  2. Point at an installed Dawn: set DAWN_DIR to its install prefix (the folder holding\n\
         \x20    include/webgpu/webgpu.h and lib/libwebgpu_dawn.so or .a).\n\
         \n  3. Install the system's Dawn: on Debian sid, `apt install libwebgpu-dawn-dev`; or add its\n\
         \x20    prefix to CMAKE_PREFIX_PATH. In this repository `cargo xtask env` makes a root with it.\n\
         \nSearched: {}\n",
        searched.join("; ")
    ))
}

/// The `cargo:rustc-link-*` lines for the found Dawn.
fn emit_link(dawn: &Dawn) {
    println!("cargo:rustc-link-search=native={}", dawn.lib_dir.display());
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    match dawn.linkage {
        Linkage::Shared => println!("cargo:rustc-link-lib=dylib=webgpu_dawn"),
        Linkage::Static => {
            println!("cargo:rustc-link-lib=static=webgpu_dawn");
            source::emit_static_dependencies(&dawn.lib_dir, &target_os);
        }
    }
}
