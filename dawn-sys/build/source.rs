//! Building Dawn from source with CMake: one static monolithic library, only the target
//! platform's backend, Tint with the WGSL reader and that backend's writer, nothing else.

use std::path::{Path, PathBuf};

use crate::{Dawn, Linkage};

/// Shared abseil libraries a static Dawn built against Debian's abseil needs at the final link
/// (Dawn's installed CMake targets do not list them).
const SYSTEM_ABSEIL: &[&str] = &[
    "absl_str_format_internal",
    "absl_strings",
    "absl_raw_hash_set",
    "absl_hash",
    "absl_throw_delegate",
    "absl_raw_logging_internal",
];

/// A folder is a Dawn checkout if it has the top-level CMake project and the Dawn sources.
pub fn is_dawn_tree(dir: &Path) -> bool {
    dir.join("CMakeLists.txt").is_file() && dir.join("src/dawn").is_dir()
}

/// Where the CMake build (`build/`) and the installed Dawn go: `DAWN_SYS_BUILD_DIR` when set (it
/// outlives `cargo clean` and is shared by every target folder), else `OUT_DIR/dawn`.
pub fn build_dir(out_dir: &Path) -> Result<PathBuf, String> {
    match std::env::var_os("DAWN_SYS_BUILD_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if !dir.is_absolute() {
                return Err(format!(
                    "webgpu-dawn-sys: DAWN_SYS_BUILD_DIR={} must be an absolute path",
                    dir.display()
                ));
            }
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("webgpu-dawn-sys: creating DAWN_SYS_BUILD_DIR={}: {e}", dir.display()))?;
            Ok(dir)
        }
        None => Ok(out_dir.join("dawn")),
    }
}

/// Configures, builds and installs Dawn into [`build_dir`]. The CMake build folder persists
/// there, so a rerun of this script only rebuilds what changed.
pub fn build(source_dir: &Path, manifest_dir: &Path, out_dir: &Path) -> Result<Dawn, String> {
    for tool in ["cmake", "python3"] {
        if which(tool).is_none() {
            return Err(format!(
                "webgpu-dawn-sys: building Dawn from {} needs `{tool}` on PATH; install it, or use an \
                 installed Dawn instead (DAWN_SYS_USE_INSTALLED=1 with DAWN_DIR or the system's Dawn)",
                source_dir.display()
            ));
        }
    }
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let fetch = crate::env_flag("DAWN_SYS_FETCH_DEPENDENCIES");
    // Tint's command-line tool with the MSL writer, for checking the shaders' Metal translation.
    let tint_cmd = crate::env_flag("DAWN_SYS_TINT_CMD");
    let dir = build_dir(out_dir)?;
    // Two builds may share DAWN_SYS_BUILD_DIR (two target folders, or cargo and `xtask
    // msl-check` at once): CMake and Ninja must not run twice in one folder, so the second
    // waits here until the first is done (the lock goes with this process).
    let lock_path = dir.join(".webgpu-dawn-sys.lock");
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| format!("webgpu-dawn-sys: creating {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("webgpu-dawn-sys: locking {}: {e}", lock_path.display()))?;
    println!(
        "cargo:warning=webgpu-dawn-sys: building Dawn from source in {} into {} (about 15 minutes on 2 cores, once)",
        source_dir.display(),
        dir.display()
    );

    let mut config = cmake::Config::new(source_dir);
    // Dawn in Release even for debug Rust builds: a debug Dawn is many times slower. (The cmake
    // crate's compiler flags do not depend on the cargo profile, so every profile shares a build.)
    config.profile("Release").out_dir(&dir);
    if which("ninja").is_some() {
        config.generator("Ninja");
    }
    let on_off = |b: bool| if b { "ON" } else { "OFF" };
    let linux = target_os == "linux";
    let macos = target_os == "macos";
    for (name, value) in [
        ("DAWN_FETCH_DEPENDENCIES", on_off(fetch)),
        ("DAWN_BUILD_MONOLITHIC_LIBRARY", "STATIC"),
        ("DAWN_ENABLE_INSTALL", "ON"),
        ("BUILD_SHARED_LIBS", "OFF"),
        ("DAWN_ENABLE_VULKAN", on_off(linux)),
        ("DAWN_ENABLE_METAL", on_off(macos)),
        ("DAWN_ENABLE_NULL", "ON"),
        ("DAWN_ENABLE_D3D11", "OFF"),
        ("DAWN_ENABLE_D3D12", "OFF"),
        ("DAWN_ENABLE_DESKTOP_GL", "OFF"),
        ("DAWN_ENABLE_OPENGLES", "OFF"),
        ("DAWN_ENABLE_WEBGPU_ON_WEBGPU", "OFF"),
        ("DAWN_ENABLE_SPIRV_VALIDATION", "OFF"),
        ("DAWN_USE_X11", "OFF"),
        ("DAWN_USE_WAYLAND", "OFF"),
        ("DAWN_USE_GLFW", "OFF"),
        ("DAWN_BUILD_SAMPLES", "OFF"),
        ("DAWN_BUILD_TESTS", "OFF"),
        ("DAWN_BUILD_BENCHMARKS", "OFF"),
        ("DAWN_BUILD_PROTOBUF", "OFF"),
        ("DAWN_ENABLE_FUZZERS", "OFF"),
        ("TINT_BUILD_TESTS", "OFF"),
        ("TINT_BUILD_BENCHMARKS", "OFF"),
        ("TINT_BUILD_FUZZERS", "OFF"),
        ("TINT_BUILD_CMD_TOOLS", on_off(tint_cmd)),
        ("TINT_BUILD_IR_BINARY", "OFF"),
        ("TINT_BUILD_WGSL_READER", "ON"),
        ("TINT_BUILD_WGSL_WRITER", "OFF"),
        ("TINT_BUILD_SPV_READER", "OFF"),
        ("TINT_BUILD_SPV_WRITER", on_off(linux)),
        ("TINT_BUILD_MSL_WRITER", on_off(macos || tint_cmd)),
        ("TINT_BUILD_GLSL_WRITER", "OFF"),
        ("TINT_BUILD_GLSL_VALIDATOR", "OFF"),
        ("TINT_BUILD_HLSL_WRITER", "OFF"),
    ] {
        config.define(name, value);
    }
    if !fetch {
        // Take abseil, SPIRV-Tools/Headers and the Vulkan headers from the system: Dawn skips a
        // bundled dependency whose target already exists, and this file defines those targets.
        config.define(
            "CMAKE_PROJECT_Dawn_INCLUDE",
            manifest_dir.join("cmake/system-dependencies.cmake"),
        );
        // Empty: the code generator then imports the system's jinja2 and markupsafe.
        config.define("DAWN_JINJA2_DIR", "");
        config.define("DAWN_MARKUPSAFE_DIR", "");
    }
    let prefix = config.build();

    let lib_dir = ["lib", "lib64"]
        .iter()
        .map(|d| prefix.join(d))
        .find(|d| d.join("libwebgpu_dawn.a").is_file())
        .ok_or_else(|| {
            format!(
                "webgpu-dawn-sys: Dawn built, but no libwebgpu_dawn.a under {}",
                prefix.display()
            )
        })?;
    Ok(Dawn {
        include_dir: prefix.join("include"),
        lib_dir,
        linkage: Linkage::Static,
        origin: "Dawn built from source",
    })
}

/// What a static `libwebgpu_dawn.a` needs besides itself.
pub fn emit_static_dependencies(lib_dir: &Path, target_os: &str) {
    // Abseil archives installed beside Dawn (a build that fetched its dependencies), otherwise
    // Debian's shared abseil. (Archive order matters to GNU ld only; builds that fetch their
    // dependencies are meant for macOS, whose linker resolves archives in any order.)
    let mut bundled_abseil: Vec<String> = std::fs::read_dir(lib_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| {
            n.strip_prefix("lib")
                .and_then(|n| n.strip_suffix(".a"))
                .map(str::to_owned)
        })
        .filter(|n| n.starts_with("absl_"))
        .collect();
    bundled_abseil.sort();
    if bundled_abseil.is_empty() {
        for lib in SYSTEM_ABSEIL {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    } else {
        for lib in &bundled_abseil {
            println!("cargo:rustc-link-lib=static={lib}");
        }
    }
    match target_os {
        "macos" | "ios" => {
            println!("cargo:rustc-link-lib=dylib=c++");
            for framework in [
                "Metal",
                "QuartzCore",
                "Foundation",
                "CoreFoundation",
                "CoreGraphics",
                "IOKit",
                "IOSurface",
                "AppKit",
            ] {
                println!("cargo:rustc-link-lib=framework={framework}");
            }
        }
        _ => {
            for lib in ["stdc++", "m", "dl", "pthread"] {
                println!("cargo:rustc-link-lib=dylib={lib}");
            }
        }
    }
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}
