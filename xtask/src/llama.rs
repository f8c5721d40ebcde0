//! `cargo xtask upstream --llama DIR`: llama.cpp's tools (`llama-bench`, `llama-perplexity`,
//! `llama-tokenize`, `llama-completion`, `llama-quantize`) and its `test-backend-ops`, with the
//! CPU, WebGPU and Vulkan backends, built in the sid root against the very Dawn this project
//! links and packed for `cargo xtask bundle`; with `--source-tarball`, only the part of the
//! checkout that a CUDA build of the benchmark tools needs, for `bench/llama-cuda.sh` on the GPU
//! machine.
//!
//! The build itself is [`crate::upstream`]'s, given [`project`].

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::host;
use crate::owned;
use crate::upstream::{self, Checkout, Edit, Project};

/// Where the user's llama.cpp checkout appears (read-only) inside the root.
pub const SOURCE_INSIDE: &str = "/opt/dawn-compute/llama";

/// The folder every packed file lies under, in the tarball and in the bundle.
pub const PACK_DIR: &str = "llama";

/// The programs built and packed.
pub const TOOLS: &[&str] = &[
    "llama-bench",
    "llama-perplexity",
    "llama-tokenize",
    "llama-completion",
    "llama-quantize",
    "test-backend-ops",
];

/// Files a llama.cpp checkout must have for this command, and what they are.
const REQUIRED: &[(&str, &str)] = &[
    ("CMakeLists.txt", "llama.cpp's top-level CMakeLists.txt"),
    ("ggml/CMakeLists.txt", "ggml's CMakeLists.txt"),
    ("ggml/src/ggml-webgpu/ggml-webgpu.cpp", "the WebGPU backend"),
    ("ggml/src/ggml-vulkan/ggml-vulkan.cpp", "the Vulkan backend"),
    ("tools/llama-bench/llama-bench.cpp", "llama-bench"),
    ("tests/test-backend-ops.cpp", "test-backend-ops"),
];

/// The edits llama.cpp's source may need against this Dawn: the adapter callback of ggml's. (Its
/// WebGPU backend asks for C++20 itself, so the tree's standard is left as it is.)
pub const EDITS: &[Edit] = &[Edit {
    file: "ggml/src/ggml-webgpu/ggml-webgpu.cpp",
    why: upstream::ADAPTER_CALLBACK_WHY,
    replacements: upstream::ADAPTER_CALLBACK,
}];

/// `<cache>/upstream-build/llama`: the edited copies, CMake's build folder, the packing stage.
pub fn work_dir() -> PathBuf {
    upstream::builds_dir().join("llama")
}

/// The packed tools' file name for revision `rev`.
pub fn tarball_name(rev: &str) -> String {
    format!("llama-{rev}-tools.tar.xz")
}

/// The file of `<cache>/upstream` naming the tools' tarball packed last.
pub const LATEST: &str = "latest-llama";

/// The tools' tarball `cargo xtask upstream --llama` packed last, if it is still there.
pub fn latest_tarball() -> Option<PathBuf> {
    upstream::latest_of(LATEST, "llama-")
}

/// The CMake configure command (run inside the root).
pub fn configure_command(build_dir: &Path) -> Vec<String> {
    upstream::cmake_configure(
        SOURCE_INSIDE,
        build_dir,
        &[
            "-DBUILD_SHARED_LIBS=ON",
            "-DGGML_CPU=ON",
            "-DGGML_WEBGPU=ON",
            "-DGGML_VULKAN=ON",
            // Portable x86-64 (AVX2, FMA, F16C) rather than this machine's CPU: the tools run on
            // another one.
            "-DGGML_NATIVE=OFF",
            "-DGGML_CCACHE=OFF",
            // No network: nothing to link that a bundle does not carry (OpenSSL).
            "-DLLAMA_OPENSSL=OFF",
            "-DLLAMA_BUILD_SERVER=OFF",
            // test-backend-ops is one of llama.cpp's tests.
            "-DLLAMA_BUILD_TESTS=ON",
            "-DLLAMA_BUILD_TOOLS=ON",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
        ],
    )
}

/// llama.cpp as [`upstream::build_project`] builds and packs it.
pub fn project() -> Project {
    Project {
        name: "llama.cpp",
        source_inside: SOURCE_INSIDE,
        work: work_dir(),
        kind: owned::Kind::LlamaBuild,
        edits: EDITS,
        configure: configure_command,
        programs: TOOLS,
        links: &["libwebgpu_dawn", "libggml-webgpu", "libggml-vulkan", "libggml-cpu"],
        pack_dir: PACK_DIR,
        tarball_name,
        latest: LATEST,
    }
}

/// The checkout's canonical path, or an error saying why `dir` is not a llama.cpp checkout with
/// the WebGPU and Vulkan backends and the tools.
pub fn check_checkout(dir: &Path) -> Result<PathBuf> {
    let shown = dir.display();
    let canonical = upstream::existing_folder(dir, "--llama", "https://github.com/ggml-org/llama.cpp")?;
    let missing = upstream::missing_files(&canonical, REQUIRED);
    if !missing.is_empty() {
        let hint = if canonical.join("vendor/llama.cpp/CMakeLists.txt").is_file() {
            format!(" It looks like llama-cpp-python; pass its `{shown}/vendor/llama.cpp`.")
        } else if canonical.join("src/ggml-webgpu").is_dir() {
            " It looks like ggml itself; pass it as `--ggml`.".to_owned()
        } else {
            String::new()
        };
        bail!(
            "`--llama {shown}` is not a llama.cpp checkout with the WebGPU and Vulkan backends: it \
             lacks {}. Pass a checkout of https://github.com/ggml-org/llama.cpp.{hint}",
            missing.join(", ")
        );
    }
    let cmake = std::fs::read_to_string(canonical.join("CMakeLists.txt")).unwrap_or_default();
    if !cmake.contains("project(\"llama.cpp\"") {
        bail!(
            "`--llama {shown}` is not a llama.cpp checkout: its CMakeLists.txt does not declare \
             `project(\"llama.cpp\" …)`"
        );
    }
    Ok(canonical)
}

// ---------------------------------------------------------------------------------------------
// The source for a CUDA build elsewhere

/// What a CUDA build of `llama-bench`, `llama-perplexity` and `test-backend-ops` reads from the
/// checkout (with `-DLLAMA_BUILD_TESTS=ON`, tests' sources are needed to configure), taken
/// whole. `tools/` and `ggml/src/` are taken in part; see [`source_paths`].
const SOURCE_WHOLE: &[&str] = &[
    "CMakeLists.txt",
    "LICENSE",
    "cmake",
    "include",
    "src",
    "common",
    "vendor",
    "licenses",
    "tests",
    "ggml/CMakeLists.txt",
    "ggml/cmake",
    "ggml/include",
];

/// Tools left out: the server and its web UI (most of `tools/`), which only
/// `LLAMA_BUILD_SERVER=ON` adds.
const TOOLS_LEFT_OUT: &[&str] = &["server", "ui"];

/// The ggml backends kept: the CPU one (always built) and CUDA's; the others' folders are added
/// only when their `GGML_<NAME>` option is on.
const BACKENDS_KEPT: &[&str] = &["ggml-cpu", "ggml-cuda"];

/// The paths (relative to the checkout, sorted) that the source tarball holds: [`SOURCE_WHOLE`],
/// every entry of `tools/` but [`TOOLS_LEFT_OUT`], and of `ggml/src/` its files and
/// [`BACKENDS_KEPT`]. Fails naming what the checkout lacks.
pub fn source_paths(dir: &Path) -> Result<Vec<String>> {
    let mut paths: Vec<String> = Vec::new();
    let required = SOURCE_WHOLE
        .iter()
        .map(|p| (*p).to_owned())
        .chain(BACKENDS_KEPT.iter().map(|b| format!("ggml/src/{b}")))
        .chain(["tools/CMakeLists.txt".to_owned()]);
    let missing: Vec<String> = required
        .filter(|p| std::fs::symlink_metadata(dir.join(p)).is_err())
        .collect();
    if !missing.is_empty() {
        bail!(
            "{} lacks what a CUDA build needs: {}",
            dir.display(),
            missing.join(", ")
        );
    }
    paths.extend(SOURCE_WHOLE.iter().map(|p| (*p).to_owned()));
    for name in entries(&dir.join("tools"))? {
        if !TOOLS_LEFT_OUT.contains(&name.as_str()) {
            paths.push(format!("tools/{name}"));
        }
    }
    let ggml_src = dir.join("ggml/src");
    for name in entries(&ggml_src)? {
        let is_dir = std::fs::symlink_metadata(ggml_src.join(&name)).is_ok_and(|m| m.is_dir());
        if !is_dir || BACKENDS_KEPT.contains(&name.as_str()) {
            paths.push(format!("ggml/src/{name}"));
        }
    }
    paths.sort();
    Ok(paths)
}

/// The names in folder `dir`.
fn entries(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    Ok(names)
}

/// The source tarball's file name for revision `rev`.
pub fn source_tarball_name(rev: &str) -> String {
    format!("llama-{rev}-source.tar.xz")
}

/// The file of `<cache>/upstream` naming the source tarball packed last.
pub const LATEST_SOURCE: &str = "latest-llama-source";

/// The source tarball `cargo xtask upstream --llama DIR --source-tarball` packed last.
pub fn latest_source_tarball() -> Option<PathBuf> {
    upstream::latest_of(LATEST_SOURCE, "llama-")
}

/// The folder the source tarball unpacks to.
pub const SOURCE_TOP: &str = "llama.cpp";

/// tar's arguments that pack `paths` of `dir` as `tarball`, each under [`SOURCE_TOP`]`/`,
/// reproducibly (sorted, owned by root) and without version-control files.
pub fn source_tar_args(dir: &Path, paths: &[String], tarball: &Path) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = [
        "--sort=name",
        "--owner=0",
        "--group=0",
        "--numeric-owner",
        "--exclude-vcs",
        "--exclude=__pycache__",
    ]
    .map(Into::into)
    .into();
    args.push(format!("--transform=s,^,{SOURCE_TOP}/,").into());
    args.push("-cJf".into());
    args.push(tarball.into());
    args.push("-C".into());
    args.push(dir.into());
    args.push("--".into());
    args.extend(paths.iter().map(Into::into));
    args
}

/// Packs the part of the checkout a CUDA build needs (see [`source_paths`]) as
/// `<cache>/upstream/llama-<rev>-source.tar.xz`, on this machine (no root needed).
pub fn pack_source(checkout: &Checkout) -> Result<PathBuf> {
    let paths = source_paths(&checkout.dir)?;
    let out = upstream::out_dir();
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let name = source_tarball_name(&checkout.rev);
    let tarball = out.join(&name);
    let partial = out.join(format!(".{name}.partial"));
    let mut tar = std::process::Command::new("tar");
    tar.args(source_tar_args(&checkout.dir, &paths, &partial));
    host::run_checked(
        &mut tar,
        "Packing llama.cpp's source failed (tar with xz on this machine).",
    )?;
    std::fs::rename(&partial, &tarball).with_context(|| format!("writing {}", tarball.display()))?;
    std::fs::write(out.join(LATEST_SOURCE), format!("{name}\n"))
        .with_context(|| format!("writing {}", out.join(LATEST_SOURCE).display()))?;
    let size = std::fs::metadata(&tarball).map(|m| m.len()).unwrap_or(0);
    println!(
        "xtask: packed llama.cpp {}'s source for a CUDA build ({} paths) into {} ({:.1} MB)",
        checkout.rev,
        paths.len(),
        tarball.display(),
        size as f64 / 1e6
    );
    println!("xtask: `cargo xtask bundle` now carries it; `bench/llama-cuda.sh` builds it on the GPU machine");
    Ok(tarball)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::owned::TempDir;
    use crate::upstream::{Linked, Outcome, edit_file_with, pack_layout};

    fn write(dir: &Path, file: &str, text: &str) {
        let path = dir.join(file);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn fake_checkout(dir: &Path) {
        for (file, _) in REQUIRED {
            write(dir, file, "");
        }
        write(
            dir,
            "CMakeLists.txt",
            "cmake_minimum_required(VERSION 3.14)\nproject(\"llama.cpp\" C CXX)\n",
        );
    }

    #[test]
    fn a_llama_cpp_checkout_is_accepted() {
        let tmp = TempDir::new("llama-ok");
        fake_checkout(tmp.path());
        assert_eq!(check_checkout(tmp.path()).unwrap(), tmp.path().canonicalize().unwrap());
    }

    #[test]
    fn what_is_not_a_llama_cpp_checkout_is_refused_with_what_it_lacks() {
        let tmp = TempDir::new("llama-bad");
        let err = format!("{:#}", check_checkout(&tmp.path().join("nowhere")).unwrap_err());
        assert!(err.contains("`--llama") && err.contains("no such folder"), "{err}");

        let no_vulkan = tmp.path().join("no-vulkan");
        fake_checkout(&no_vulkan);
        fs::remove_file(no_vulkan.join("ggml/src/ggml-vulkan/ggml-vulkan.cpp")).unwrap();
        let err = check_checkout(&no_vulkan).unwrap_err().to_string();
        assert!(err.contains("ggml-vulkan.cpp (the Vulkan backend)"), "{err}");
        assert!(!err.contains("llama-bench.cpp"), "{err}");

        let python = tmp.path().join("llama-cpp-python");
        fake_checkout(&python.join("vendor/llama.cpp"));
        let err = check_checkout(&python).unwrap_err().to_string();
        assert!(err.contains("vendor/llama.cpp"), "{err}");

        let ggml = tmp.path().join("ggml");
        write(&ggml, "src/ggml-webgpu/ggml-webgpu.cpp", "");
        let err = check_checkout(&ggml).unwrap_err().to_string();
        assert!(err.contains("`--ggml`"), "{err}");

        let other = tmp.path().join("other");
        fake_checkout(&other);
        write(&other, "CMakeLists.txt", "project(\"ggml\" C CXX)\n");
        let err = check_checkout(&other).unwrap_err().to_string();
        assert!(err.contains("does not declare"), "{err}");
    }

    #[test]
    fn cmake_builds_cpu_webgpu_and_vulkan_with_the_tests_and_tools_portably() {
        let command = configure_command(Path::new("/c/upstream-build/llama/build"));
        assert_eq!(
            command[..5],
            ["cmake", "-S", SOURCE_INSIDE, "-B", "/c/upstream-build/llama/build"]
        );
        for arg in [
            "-DGGML_CPU=ON",
            "-DGGML_WEBGPU=ON",
            "-DGGML_VULKAN=ON",
            "-DGGML_NATIVE=OFF",
            "-DLLAMA_BUILD_TESTS=ON",
            "-DLLAMA_BUILD_TOOLS=ON",
            "-DLLAMA_BUILD_SERVER=OFF",
            "-DLLAMA_OPENSSL=OFF",
            "-DBUILD_SHARED_LIBS=ON",
            "-DDawn_DIR=/usr/lib/x86_64-linux-gnu/cmake/Dawn",
        ] {
            assert!(command.iter().any(|a| a == arg), "{arg} missing from {command:?}");
        }
        assert!(!command.iter().any(|a| a.contains("CUDA")));
    }

    #[test]
    fn the_webgpu_edit_is_found_under_ggml_and_left_alone_where_upstream_made_it() {
        let old = "[&adapter](wgpu::RequestAdapterStatus status, wgpu::Adapter _adapter, const char * message) {\n";
        let file = "ggml/src/ggml-webgpu/ggml-webgpu.cpp";
        let (edited, outcomes) = edit_file_with(EDITS, file, old);
        assert!(edited.contains("wgpu::StringView message"), "{edited}");
        assert_eq!(outcomes[0].1, Outcome::Applied);
        let (again, outcomes) = edit_file_with(EDITS, file, &edited);
        assert_eq!(again, edited);
        assert_eq!(outcomes[0].1, Outcome::AlreadyThere);
        assert!(
            edit_file_with(EDITS, "CMakeLists.txt", "set(CMAKE_CXX_STANDARD 17)\n")
                .1
                .is_empty()
        );
    }

    const BIN: &str = "/c/upstream-build/llama/build/bin";

    fn tool_ldd(tool: &str) -> String {
        let common = if tool == "test-backend-ops" {
            String::new()
        } else {
            format!(
                "\tlibllama-common.so.0 => {BIN}/libllama-common.so.0 (0x1)\n\tlibllama.so.0 => {BIN}/libllama.so.0 (0x2)\n"
            )
        };
        format!(
            "\tlinux-vdso.so.1 (0x0)\n{common}\
             \tlibggml.so.0 => {BIN}/libggml.so.0 (0x3)\n\
             \tlibggml-base.so.0 => {BIN}/libggml-base.so.0 (0x4)\n\
             \tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x5)\n\
             \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x6)\n\
             \tlibggml-cpu.so.0 => {BIN}/libggml-cpu.so.0 (0x7)\n\
             \tlibggml-webgpu.so.0 => {BIN}/libggml-webgpu.so.0 (0x8)\n\
             \tlibggml-vulkan.so.0 => {BIN}/libggml-vulkan.so.0 (0x9)\n\
             \tlibgomp.so.1 => /lib/x86_64-linux-gnu/libgomp.so.1 (0xa)\n\
             \tlibwebgpu_dawn.so.0 => /lib/x86_64-linux-gnu/libwebgpu_dawn.so.0 (0xb)\n\
             \tlibvulkan.so.1 => /lib/x86_64-linux-gnu/libvulkan.so.1 (0xc)\n\
             \t/lib64/ld-linux-x86-64.so.2 (0xd)\n"
        )
    }

    /// Debian's Dawn opens the Vulkan loader at run time: `ldd` does not list it.
    const DAWN_LDD: &str = "\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x5)\n\
         \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x6)\n\
         \t/lib64/ld-linux-x86-64.so.2 (0xd)\n";

    #[test]
    fn the_pack_holds_every_tool_llama_cpps_libraries_and_openmp_under_llama() {
        let programs: Vec<String> = TOOLS.iter().map(|t| format!("{BIN}/{t}")).collect();
        let ldds: Vec<String> = TOOLS.iter().map(|t| tool_ldd(t)).collect();
        let linked: Vec<Linked> = programs
            .iter()
            .zip(&ldds)
            .map(|(program, ldd)| Linked { program, ldd })
            .collect();
        let entries = pack_layout(&linked, DAWN_LDD, project().links, PACK_DIR).unwrap();
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "llama/llama-bench",
                "llama/llama-perplexity",
                "llama/llama-tokenize",
                "llama/llama-completion",
                "llama/llama-quantize",
                "llama/test-backend-ops",
                "llama/libllama-common.so.0",
                "llama/libllama.so.0",
                "llama/libggml.so.0",
                "llama/libggml-base.so.0",
                "llama/libggml-cpu.so.0",
                "llama/libggml-webgpu.so.0",
                "llama/libggml-vulkan.so.0",
                "llama/libgomp.so.1",
            ]
        );
        // The bundle carries the Vulkan loader, which ggml-vulkan links and Dawn opens.
        assert!(!names.iter().any(|n| n.contains("libvulkan")));
        assert_eq!(entries[0].from, format!("{BIN}/llama-bench"));
        assert_eq!(entries[13].from, "/lib/x86_64-linux-gnu/libgomp.so.1");
    }

    #[test]
    fn the_pack_refuses_a_tool_built_without_the_vulkan_backend() {
        let program = format!("{BIN}/llama-bench");
        let ldd: String = tool_ldd("llama-bench")
            .lines()
            .filter(|l| !l.contains("libggml-vulkan"))
            .map(|l| format!("{l}\n"))
            .collect();
        let err = pack_layout(
            &[Linked {
                program: &program,
                ldd: &ldd,
            }],
            DAWN_LDD,
            project().links,
            PACK_DIR,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("llama-bench does not link libggml-vulkan"), "{err}");
    }

    #[test]
    fn the_tarballs_are_named_by_revision() {
        assert_eq!(tarball_name("0c1e570"), "llama-0c1e570-tools.tar.xz");
        assert_eq!(
            source_tarball_name("0c1e570-dirty"),
            "llama-0c1e570-dirty-source.tar.xz"
        );
    }

    /// A checkout with the folders a CUDA build reads and some it does not.
    fn fake_tree(dir: &Path) {
        fake_checkout(dir);
        for file in [
            "LICENSE",
            "cmake/common.cmake",
            "include/llama.h",
            "src/llama.cpp",
            "common/common.cpp",
            "vendor/nlohmann/json.hpp",
            "licenses/LICENSE-curl",
            "tests/CMakeLists.txt",
            "ggml/cmake/common.cmake",
            "ggml/include/ggml.h",
            "ggml/src/CMakeLists.txt",
            "ggml/src/ggml.c",
            "ggml/src/ggml-cpu/ggml-cpu.c",
            "ggml/src/ggml-cuda/ggml-cuda.cu",
            "ggml/src/ggml-metal/ggml-metal.m",
            "ggml/src/ggml-sycl/big.cpp",
            "tools/CMakeLists.txt",
            "tools/llama-bench/CMakeLists.txt",
            "tools/perplexity/CMakeLists.txt",
            "tools/server/server.cpp",
            "tools/ui/bundle.js",
            "docs/build.md",
            "models/ggml-vocab-llama.gguf",
            "examples/simple/simple.cpp",
        ] {
            write(dir, file, file);
        }
    }

    #[test]
    fn the_source_holds_what_a_cuda_build_reads_and_not_other_backends_or_the_server() {
        let tmp = TempDir::new("llama-source");
        fake_tree(tmp.path());
        let paths = source_paths(tmp.path()).unwrap();
        for kept in [
            "CMakeLists.txt",
            "cmake",
            "ggml/src/ggml-cpu",
            "ggml/src/ggml-cuda",
            "ggml/src/ggml.c",
            "ggml/src/CMakeLists.txt",
            "tools/llama-bench",
            "tools/perplexity",
            "tools/CMakeLists.txt",
            "tests",
            "vendor",
        ] {
            assert!(paths.iter().any(|p| p == kept), "{kept} missing from {paths:?}");
        }
        for left in [
            "ggml/src/ggml-metal",
            "ggml/src/ggml-sycl",
            "ggml/src/ggml-vulkan",
            "tools/server",
            "tools/ui",
            "docs",
            "models",
            "examples",
        ] {
            assert!(
                !paths.iter().any(|p| p == left || p.starts_with(&format!("{left}/"))),
                "{left} in {paths:?}"
            );
        }
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(paths, sorted);

        fs::remove_dir_all(tmp.path().join("ggml/src/ggml-cuda")).unwrap();
        let err = source_paths(tmp.path()).unwrap_err().to_string();
        assert!(
            err.contains("lacks what a CUDA build needs: ggml/src/ggml-cuda"),
            "{err}"
        );
    }

    #[test]
    fn the_source_tarball_unpacks_to_llama_cpp_with_only_those_paths() {
        if host::which("xz").is_none() {
            eprintln!("no xz on this machine; skipped");
            return;
        }
        let tmp = TempDir::new("llama-source-tar");
        let tree = tmp.path().join("tree");
        fake_tree(&tree);
        write(&tree, ".git", "gitdir: ../../.git/modules/vendor/llama.cpp\n");
        let paths = source_paths(&tree).unwrap();
        let tarball = tmp.path().join("source.tar.xz");
        let status = std::process::Command::new("tar")
            .args(source_tar_args(&tree, &paths, &tarball))
            .status()
            .unwrap();
        assert!(status.success());
        let listing = std::process::Command::new("tar")
            .arg("-tJf")
            .arg(&tarball)
            .output()
            .unwrap();
        let listing = String::from_utf8(listing.stdout).unwrap();
        let files: Vec<&str> = listing.lines().filter(|l| !l.ends_with('/')).collect();
        assert!(files.iter().all(|f| f.starts_with("llama.cpp/")), "{files:?}");
        for file in [
            "llama.cpp/CMakeLists.txt",
            "llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu",
            "llama.cpp/tools/llama-bench/CMakeLists.txt",
            "llama.cpp/vendor/nlohmann/json.hpp",
        ] {
            assert!(files.contains(&file), "{file} missing from {files:?}");
        }
        for left in ["ggml-metal", "tools/server", "tools/ui", "docs/", "models/", ".git"] {
            assert!(!files.iter().any(|f| f.contains(left)), "{left} in {files:?}");
        }
        // Packing twice gives the same bytes (sorted, no owners).
        let again = tmp.path().join("again.tar.xz");
        std::process::Command::new("tar")
            .args(source_tar_args(&tree, &paths, &again))
            .status()
            .unwrap();
        assert_eq!(fs::read(&tarball).unwrap(), fs::read(&again).unwrap());
    }
}
