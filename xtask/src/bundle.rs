//! A self-contained folder that runs a program built in the sid root on another Linux machine:
//! the program, sid's dynamic loader and every shared library it needs, and a launcher script.
//!
//! Sid's Dawn needs a newer C library than most machines have; running the program through the
//! bundled `ld-linux-x86-64.so.2` with `--library-path` sidesteps the system's one entirely.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::host;
use crate::llama;
use crate::owned;
use crate::sandbox;
use crate::upstream;

/// Libraries the NVIDIA Vulkan driver loads at run time (glvnd and X11), and the Vulkan loader
/// (which Dawn opens at run time), which `ldd` of our program cannot see.
pub const DRIVER_LIBRARIES: &[&str] = &[
    "libGLdispatch.so.0",
    "libGLX.so.0",
    "libEGL.so.1",
    "libOpenGL.so.0",
    "libGL.so.1",
    "libGLESv2.so.2",
    "libX11.so.6",
    "libXext.so.6",
    "libxcb.so.1",
    "libXau.so.6",
    "libXdmcp.so.6",
    "libbsd.so.0",
    "libmd.so.0",
    "libvulkan.so.1",
];

#[derive(Debug, Args)]
pub struct BundleArgs {
    /// Package holding the binary.
    #[arg(long, default_value = "ggml-dawn-bench")]
    package: String,
    /// Binary to bundle.
    #[arg(long, default_value = "backend-ops")]
    bin: String,
    /// Output folder: created, or replaced if an earlier `cargo xtask bundle` made it; an existing
    /// folder with other files in it is refused.
    #[arg(long, default_value = "gpu-bundle")]
    out: PathBuf,
    /// Leave out upstream's programs, which are otherwise included when `cargo xtask upstream`
    /// has packed them: ggml's `test-backend-ops` (as `up/` and the `run-upstream` launcher),
    /// llama.cpp's tools (as `llama/` and the `run-llama` launcher) and llama.cpp's source for a
    /// CUDA build (`llama-<rev>-source.tar.xz`).
    #[arg(long)]
    no_upstream: bool,
    /// Also bundle `backend-ops` (package ggml-dawn-bench) beside the binary, launched by
    /// `run-ops`: one folder then carries `dawn-llm`, `backend-ops` and upstream's programs
    /// (what `bench/llm-compare.sh`, `bench/rows.sh` and `bench/anchors.sh` use together).
    #[arg(long)]
    with_backend_ops: bool,
}

/// The package and binary `--with-backend-ops` adds, and its launcher.
const OPS: (&str, &str, &str) = ("ggml-dawn-bench", "backend-ops", "run-ops");

/// Fails on a `--bin` that is not a plain file name: it names a folder under the target folder.
fn check_bin_name(bin: &str) -> Result<()> {
    if bin.is_empty() || bin == "." || bin == ".." || bin.contains(['/', '\0']) {
        bail!("`--bin {bin}` is not a binary's name (a plain file name, no `/`)");
    }
    Ok(())
}

/// Where `bundle` gathers the program and its libraries first: a folder of the build folder.
fn staging_dir(bin: &str) -> PathBuf {
    sandbox::target_dir().join("bundle").join(bin)
}

/// Checks what can be checked before the build: the binary's name, the output folder and the
/// staging folder.
pub fn check(args: &BundleArgs) -> Result<()> {
    check_bin_name(&args.bin)?;
    check_folders(args, &staging_dir(&args.bin))
}

/// Refuses an output or staging folder that `bundle` would not be allowed to replace.
fn check_folders(args: &BundleArgs, staging: &Path) -> Result<()> {
    owned::check_fresh(staging, owned::Kind::BundleStaging)?;
    if made_by_older_xtask(&args.out, &args.bin) {
        return Ok(());
    }
    owned::check_fresh(&args.out, owned::Kind::Bundle)
}

/// Makes `dir` a fresh bundle folder (see [`owned::fresh_dir`]), also replacing one that an
/// xtask from before the markers made.
fn fresh_bundle_dir(dir: &Path, bin: &str) -> Result<()> {
    if made_by_older_xtask(dir, bin) {
        owned::mark(dir, owned::Kind::Bundle)?;
    }
    owned::fresh_dir(dir, owned::Kind::Bundle)
}

/// Whether `dir` is a bundle that an xtask from before the markers made: a real folder with no
/// marker and nothing but regular files, among them the binary, sid's loader and exactly the
/// launcher xtask writes. (The staging folder has no such exception: it is replaced only when it
/// holds the marker, since without the launcher nothing tells an old one from other files.)
fn made_by_older_xtask(dir: &Path, bin: &str) -> bool {
    if !fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    let mut names = Vec::new();
    for entry in entries {
        let Ok(entry) = entry else {
            return false;
        };
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            return false;
        }
        names.push(entry.file_name());
    }
    let has = |name: &str| names.iter().any(|n| n == name);
    !has(owned::MARKER)
        && has(bin)
        && has("ld-linux-x86-64.so.2")
        && fs::read_to_string(dir.join("run")).is_ok_and(|text| text == launcher_script(bin))
}

pub fn bundle(root: &Path, args: &BundleArgs) -> Result<()> {
    check(args)?;
    let also_ops = args.with_backend_ops && args.bin != OPS.1;
    let mut build = vec![
        "cargo",
        "build",
        "--release",
        "--locked",
        "--package",
        &args.package,
        "--bin",
        &args.bin,
    ];
    if also_ops {
        build.extend(["--package", OPS.0, "--bin", OPS.1]);
    }
    sandbox::run_in_root(root, &build, "Fix the build error above.")?;
    let binaries: Vec<String> = std::iter::once(args.bin.as_str())
        .chain(also_ops.then_some(OPS.1))
        .map(|bin| sandbox::target_dir().join("release").join(bin).display().to_string())
        .collect();

    // Gather inside the root, where `cp -L` resolves the root's own symbolic links (its loader
    // link points at an absolute path that, seen from the host, is the host's loader).
    let mut libraries: Vec<String> = Vec::new();
    for inside in &binaries {
        let ldd = sandbox::output_in_root(root, &["ldd", inside], "ldd could not read the program.")?;
        for library in ldd.lines().filter_map(resolved_path) {
            if !libraries.contains(&library) {
                libraries.push(library);
            }
        }
    }
    libraries.extend(
        DRIVER_LIBRARIES
            .iter()
            .map(|name| format!("/usr/lib/x86_64-linux-gnu/{name}")),
    );
    let staging = staging_dir(&args.bin);
    owned::fresh_dir(&staging, owned::Kind::BundleStaging)?;
    let staging_str = staging.display().to_string();
    let mut cp = vec!["cp", "-L", "--target-directory", &staging_str];
    cp.extend(binaries.iter().map(String::as_str));
    cp.extend(libraries.iter().map(String::as_str));
    sandbox::run_in_root(
        root,
        &cp,
        "A library is missing from the sid root; re-run `cargo xtask env`.",
    )?;

    fresh_bundle_dir(&args.out, &args.bin)?;
    for entry in fs::read_dir(&staging)? {
        let entry = entry?;
        if entry.file_name() != owned::MARKER {
            copy(&entry.path(), &args.out.join(entry.file_name()))?;
        }
    }

    let launcher = args.out.join("run");
    fs::write(&launcher, launcher_script(&args.bin)).with_context(|| format!("writing {}", launcher.display()))?;
    fs::set_permissions(&launcher, fs::Permissions::from_mode(0o755))?;
    if also_ops {
        let ops = args.out.join(OPS.2);
        fs::write(&ops, launcher_script(OPS.1)).with_context(|| format!("writing {}", ops.display()))?;
        fs::set_permissions(&ops, fs::Permissions::from_mode(0o755))?;
        eprintln!("xtask: added {} as `{}/{} ARGS`", OPS.1, args.out.display(), OPS.2);
    }
    eprintln!(
        "xtask: bundled {} with {} libraries into {}; run it there as `{}/run ARGS`",
        args.bin,
        libraries.len(),
        args.out.display(),
        args.out.display()
    );
    if args.no_upstream {
        return Ok(());
    }
    match upstream::latest_tarball() {
        Some(tarball) => add_pack(
            &args.out,
            &tarball,
            upstream::PACK_DIR,
            "run-upstream",
            &upstream_launcher_script(),
        )?,
        None => eprintln!(
            "xtask: no upstream test-backend-ops in the bundle (`cargo xtask upstream --ggml DIR` builds one)"
        ),
    }
    match llama::latest_tarball() {
        Some(tarball) => add_pack(
            &args.out,
            &tarball,
            llama::PACK_DIR,
            "run-llama",
            &llama_launcher_script(),
        )?,
        None => eprintln!("xtask: no llama.cpp tools in the bundle (`cargo xtask upstream --llama DIR` builds them)"),
    }
    if let Some(source) = llama::latest_source_tarball() {
        let name = source.file_name().unwrap_or_default();
        copy(&source, &args.out.join(name))?;
        eprintln!(
            "xtask: added llama.cpp's source for a CUDA build as {}; build it there with `bash bench/llama-cuda.sh`",
            args.out.join(name).display()
        );
    }
    Ok(())
}

/// Unpacks a tarball `cargo xtask upstream` packed (its folder `dir`) into the bundle and writes
/// its launcher beside `run`.
fn add_pack(out: &Path, tarball: &Path, dir: &str, launcher_name: &str, launcher_text: &str) -> Result<()> {
    let mut tar = Command::new("tar");
    tar.arg("-xJf").arg(tarball).arg("-C").arg(out).arg(dir);
    host::run_checked(
        &mut tar,
        "Unpacking upstream's programs failed; re-run `cargo xtask upstream`.",
    )?;
    let launcher = out.join(launcher_name);
    fs::write(&launcher, launcher_text).with_context(|| format!("writing {}", launcher.display()))?;
    fs::set_permissions(&launcher, fs::Permissions::from_mode(0o755))?;
    eprintln!(
        "xtask: added {} as {}/{dir}/; run it there as `{}/{launcher_name} ARGS`",
        tarball.display(),
        out.display(),
        out.display()
    );
    Ok(())
}

/// The resolved path on one `ldd` line (`libfoo.so => /usr/lib/.../libfoo.so (0x…)`, or the
/// loader's own `/lib64/ld-linux-x86-64.so.2 (0x…)`).
pub fn resolved_path(line: &str) -> Option<String> {
    let line = line.trim();
    let path = match line.split_once("=>") {
        Some((_, right)) => right.split_whitespace().next()?,
        None => line.split_whitespace().next()?,
    };
    path.starts_with('/').then(|| path.to_owned())
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to).with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// Every launcher's start: its folder, and the NVIDIA Vulkan driver when the machine has one where
/// GPU containers mount it (unless `VK_DRIVER_FILES` already names a driver).
const LAUNCHER_PRELUDE: &str = r#"here=$(cd "$(dirname "$0")" && pwd)
nvidia=/usr/local/nvidia
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nvidia/share/vulkan/icd.d/nvidia_icd.json" ]; then
    export VK_DRIVER_FILES="$nvidia/share/vulkan/icd.d/nvidia_icd.json"
fi
"#;

fn launcher_script(bin: &str) -> String {
    format!(
        r#"#!/bin/sh
# Runs {bin} with the C library and Dawn bundled beside it, whatever the machine's own are.
{LAUNCHER_PRELUDE}exec "$here/ld-linux-x86-64.so.2" --library-path "$here:$nvidia/lib64:$nvidia/lib" "$here/{bin}" "$@"
"#
    )
}

/// The launcher of upstream's `test-backend-ops` (`up/`): the bundle's loader and libraries, with
/// ggml's own (and any it needs that the bundle lacks) first.
fn upstream_launcher_script() -> String {
    let up = upstream::PACK_DIR;
    format!(
        r#"#!/bin/sh
# Runs upstream ggml's test-backend-ops ({up}/, built by `cargo xtask upstream`) with the C library
# and Dawn bundled beside it, whatever the machine's own are.
{LAUNCHER_PRELUDE}exec "$here/ld-linux-x86-64.so.2" --library-path "$here/{up}:$here:$nvidia/lib64:$nvidia/lib" "$here/{up}/test-backend-ops" "$@"
"#
    )
}

/// The launcher of llama.cpp's tools (`llama/`): `run-llama TOOL ARGS…` runs `llama/TOOL` through
/// the bundle's loader and libraries, llama.cpp's own first, with the NVIDIA driver as `run`
/// picks it (for the Vulkan and WebGPU backends).
fn llama_launcher_script() -> String {
    let dir = llama::PACK_DIR;
    format!(
        r#"#!/bin/sh
# Runs one of llama.cpp's tools ({dir}/, built by `cargo xtask upstream --llama`) with the C
# library and Dawn bundled beside it, whatever the machine's own are: run-llama TOOL ARGS...
{LAUNCHER_PRELUDE}tools=$(cd "$here/{dir}" && for f in *; do case "$f" in lib*) ;; *) printf '%s ' "$f" ;; esac; done)
tool=${{1:-}}
case "$tool" in
    "" | */* | lib* | .*) tool= ;;
esac
if [ -z "$tool" ] || [ ! -f "$here/{dir}/$tool" ]; then
    echo "usage: $0 TOOL ARGS... (TOOL: one of $tools)" >&2
    exit 2
fi
shift
exec "$here/ld-linux-x86-64.so.2" --library-path "$here/{dir}:$here:$nvidia/lib64:$nvidia/lib" "$here/{dir}/$tool" "$@"
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::owned::TempDir;

    /// [`check`] with a staging folder that does not exist (the real one lies in the build
    /// folder of this machine, which the tests leave alone).
    fn check_here(args: &BundleArgs) -> Result<()> {
        check_bin_name(&args.bin)?;
        check_folders(args, Path::new("/nonexistent/dawn-compute-bundle-staging"))
    }

    fn args(out: &Path, bin: &str) -> BundleArgs {
        BundleArgs {
            package: "ggml-dawn-bench".into(),
            bin: bin.into(),
            out: out.to_owned(),
            no_upstream: false,
            with_backend_ops: false,
        }
    }

    #[test]
    fn refuses_a_non_empty_out_folder_it_did_not_make() {
        let tmp = TempDir::new("bundle-out");
        let out = tmp.path().join("out");
        fs::create_dir(&out).unwrap();
        fs::write(out.join("notes"), "mine").unwrap();
        let err = check_here(&args(&out, "backend-ops")).unwrap_err().to_string();
        assert!(err.contains("refusing") && err.contains("--out"), "{err}");
        assert!(owned::fresh_dir(&out, owned::Kind::Bundle).is_err());
        assert_eq!(fs::read_to_string(out.join("notes")).unwrap(), "mine");
    }

    #[test]
    fn accepts_a_missing_an_empty_or_its_own_out_folder() {
        let tmp = TempDir::new("bundle-ok");
        let out = tmp.path().join("out");
        check_here(&args(&out, "backend-ops")).unwrap();
        fs::create_dir(&out).unwrap();
        check_here(&args(&out, "backend-ops")).unwrap();
        owned::fresh_dir(&out, owned::Kind::Bundle).unwrap();
        fs::write(out.join("backend-ops"), "old build").unwrap();
        check_here(&args(&out, "backend-ops")).unwrap();
        owned::fresh_dir(&out, owned::Kind::Bundle).unwrap();
        assert!(!out.join("backend-ops").exists());
    }

    #[test]
    fn refuses_the_sid_root_as_out_folder() {
        let tmp = TempDir::new("bundle-root");
        let root = tmp.path().join("sid-root");
        owned::fresh_dir(&root, owned::Kind::SidRoot).unwrap();
        fs::create_dir(root.join("usr")).unwrap();
        assert!(check_here(&args(&root, "backend-ops")).is_err());
        assert!(root.join("usr").is_dir());
    }

    /// What `bundle` made before it marked its folders.
    fn older_bundle(dir: &Path, launcher: &str) {
        fs::create_dir(dir).unwrap();
        for name in ["backend-ops", "ld-linux-x86-64.so.2", "libc.so.6"] {
            fs::write(dir.join(name), "elf").unwrap();
        }
        fs::write(dir.join("run"), launcher).unwrap();
    }

    #[test]
    fn replaces_a_bundle_an_older_xtask_made() {
        let tmp = TempDir::new("bundle-older");
        let out = tmp.path().join("gpu-bundle");
        older_bundle(&out, &launcher_script("backend-ops"));
        check_folders(&args(&out, "backend-ops"), &tmp.path().join("staging")).unwrap();
        fresh_bundle_dir(&out, "backend-ops").unwrap();
        assert!(!out.join("libc.so.6").exists());
        assert!(owned::is_marked(&out, owned::Kind::Bundle));
    }

    /// The staging folder is replaced only when it holds the marker `bundle` wrote when it made
    /// it: a folder there with other files, even ones that look like a program and its loader,
    /// is refused before the build and left as it is.
    #[test]
    fn refuses_an_unmarked_staging_folder() {
        let tmp = TempDir::new("bundle-staging");
        let out = tmp.path().join("gpu-bundle");
        let staging = tmp.path().join("staging");
        older_bundle(&staging, "");
        fs::remove_file(staging.join("run")).unwrap();
        let err = check_folders(&args(&out, "backend-ops"), &staging)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("refusing") && err.contains("staging") && err.contains("DAWN_COMPUTE_TARGET_DIR"),
            "{err}"
        );
        assert!(owned::fresh_dir(&staging, owned::Kind::BundleStaging).is_err());
        assert!(staging.join("libc.so.6").exists() && staging.join("backend-ops").exists());
        // Once marked (as `bundle` marks the folder it creates), it is replaced.
        owned::mark(&staging, owned::Kind::BundleStaging).unwrap();
        check_folders(&args(&out, "backend-ops"), &staging).unwrap();
        owned::fresh_dir(&staging, owned::Kind::BundleStaging).unwrap();
        assert!(!staging.join("libc.so.6").exists());
        // A missing or empty one is made and marked.
        let fresh = tmp.path().join("fresh");
        check_folders(&args(&out, "backend-ops"), &fresh).unwrap();
        owned::fresh_dir(&fresh, owned::Kind::BundleStaging).unwrap();
        assert!(owned::is_marked(&fresh, owned::Kind::BundleStaging));
    }

    #[test]
    fn what_only_resembles_an_older_bundle_is_refused() {
        let tmp = TempDir::new("bundle-resembles");
        let edited = tmp.path().join("edited");
        older_bundle(&edited, "#!/bin/sh\necho my own launcher\n");
        assert!(check_here(&args(&edited, "backend-ops")).is_err());
        assert!(fresh_bundle_dir(&edited, "backend-ops").is_err());
        assert!(edited.join("libc.so.6").exists());

        let with_folder = tmp.path().join("with-folder");
        older_bundle(&with_folder, &launcher_script("backend-ops"));
        fs::create_dir(with_folder.join("results")).unwrap();
        assert!(check_here(&args(&with_folder, "backend-ops")).is_err());
        assert!(fresh_bundle_dir(&with_folder, "backend-ops").is_err());
        assert!(with_folder.join("results").is_dir());
    }

    #[test]
    fn refuses_a_bin_that_is_a_path() {
        let out = Path::new("/nonexistent/out");
        for bad in ["", ".", "..", "../..", "a/b"] {
            assert!(check_here(&args(out, bad)).is_err(), "{bad:?} accepted");
        }
        check_here(&args(out, "backend-ops")).unwrap();
    }

    #[test]
    fn the_upstream_launcher_runs_up_through_the_bundles_loader() {
        let script = upstream_launcher_script();
        assert!(script.starts_with("#!/bin/sh\n"));
        assert!(
            script.contains(r#"exec "$here/ld-linux-x86-64.so.2" --library-path "$here/up:$here:"#),
            "{script}"
        );
        assert!(script.contains(r#""$here/up/test-backend-ops" "$@""#), "{script}");
    }

    #[test]
    fn every_launcher_picks_the_nvidia_driver_as_run_does() {
        let run = launcher_script("backend-ops");
        assert!(run.contains(LAUNCHER_PRELUDE));
        assert!(run.contains(r#"export VK_DRIVER_FILES="$nvidia/share/vulkan/icd.d/nvidia_icd.json""#));
        for script in [upstream_launcher_script(), llama_launcher_script()] {
            assert!(script.starts_with("#!/bin/sh\n# Runs "), "{script}");
            assert!(script.contains(LAUNCHER_PRELUDE), "{script}");
        }
    }

    #[test]
    fn the_llama_launcher_runs_a_tool_of_llama_through_the_bundles_loader() {
        let script = llama_launcher_script();
        assert!(
            script.contains(
                r#"exec "$here/ld-linux-x86-64.so.2" --library-path "$here/llama:$here:$nvidia/lib64:$nvidia/lib" "$here/llama/$tool" "$@""#
            ),
            "{script}"
        );
    }

    /// A bundle whose loader only prints what it was given, to run `run-llama` on this machine.
    fn fake_llama_bundle(dir: &Path) {
        fs::create_dir_all(dir.join("llama")).unwrap();
        let loader = dir.join("ld-linux-x86-64.so.2");
        fs::write(&loader, "#!/bin/sh\necho \"$@\"\n").unwrap();
        fs::set_permissions(&loader, fs::Permissions::from_mode(0o755)).unwrap();
        for name in ["llama-bench", "llama-perplexity", "libllama.so.0", "libgomp.so.1"] {
            fs::write(dir.join("llama").join(name), "elf").unwrap();
        }
        let launcher = dir.join("run-llama");
        fs::write(&launcher, llama_launcher_script()).unwrap();
        fs::set_permissions(&launcher, fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn run_llama(dir: &Path, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(dir.join("run-llama"))
            .args(args)
            .env_remove("VK_DRIVER_FILES")
            .output()
            .unwrap();
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        (out.status.code().unwrap_or(-1), text(out.stdout), text(out.stderr))
    }

    #[test]
    fn run_llama_passes_the_tool_and_its_arguments_and_refuses_anything_else() {
        let tmp = TempDir::new("bundle-llama");
        let dir = tmp.path().canonicalize().unwrap().join("gpu-bundle");
        fake_llama_bundle(&dir);
        let here = dir.display();

        let (code, out, err) = run_llama(&dir, &["llama-bench", "-m", "model file.gguf", "-p", "64"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.starts_with(&format!("--library-path {here}/llama:{here}:/usr/local/nvidia/lib64:")),
            "{out}"
        );
        assert!(
            out.trim_end()
                .ends_with(&format!("{here}/llama/llama-bench -m model file.gguf -p 64")),
            "{out}"
        );

        for bad in [&[][..], &["llama-server"], &["../run-llama"], &["libllama.so.0"], &[""]] {
            let (code, out, err) = run_llama(&dir, bad);
            assert_eq!(code, 2, "{bad:?}: {out}");
            assert!(out.is_empty(), "{bad:?} ran: {out}");
            assert!(
                err.contains("usage:") && err.contains("llama-bench llama-perplexity") && !err.contains("libgomp"),
                "{bad:?}: {err}"
            );
        }
    }

    #[test]
    fn a_pack_is_unpacked_into_the_bundle_with_its_launcher() {
        if host::which("xz").is_none() {
            eprintln!("no xz on this machine; skipped");
            return;
        }
        let tmp = TempDir::new("bundle-pack");
        let stage = tmp.path().join("stage");
        fs::create_dir_all(stage.join("llama")).unwrap();
        fs::write(stage.join("llama/llama-bench"), "elf").unwrap();
        fs::write(stage.join("stray"), "not packed under llama/").unwrap();
        let tarball = tmp.path().join("llama-0c1e570-tools.tar.xz");
        let packed = Command::new("tar")
            .arg("-cJf")
            .arg(&tarball)
            .arg("-C")
            .arg(&stage)
            .args(["llama", "stray"])
            .status()
            .unwrap();
        assert!(packed.success());
        let out = tmp.path().join("gpu-bundle");
        fs::create_dir(&out).unwrap();
        add_pack(&out, &tarball, llama::PACK_DIR, "run-llama", &llama_launcher_script()).unwrap();
        assert_eq!(fs::read_to_string(out.join("llama/llama-bench")).unwrap(), "elf");
        assert!(!out.join("stray").exists(), "only the pack's folder is unpacked");
        assert_eq!(
            fs::read_to_string(out.join("run-llama")).unwrap(),
            llama_launcher_script()
        );
        let mode = fs::metadata(out.join("run-llama")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);

        let err = add_pack(&out, &tmp.path().join("missing.tar.xz"), "llama", "run-llama", "")
            .unwrap_err()
            .to_string();
        assert!(err.contains("re-run `cargo xtask upstream`"), "{err}");
    }

    #[test]
    fn reads_ldd_lines() {
        assert_eq!(
            resolved_path("\tlibwebgpu_dawn.so.0 => /lib/x86_64-linux-gnu/libwebgpu_dawn.so.0 (0x7f)"),
            Some("/lib/x86_64-linux-gnu/libwebgpu_dawn.so.0".into())
        );
        assert_eq!(
            resolved_path("\t/lib64/ld-linux-x86-64.so.2 (0x7f)"),
            Some("/lib64/ld-linux-x86-64.so.2".into())
        );
        assert_eq!(resolved_path("\tlinux-vdso.so.1 (0x7ffd)"), None);
    }
}
