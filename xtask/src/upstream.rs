//! `cargo xtask upstream --ggml DIR`: upstream ggml's `test-backend-ops` (CPU and WebGPU
//! backends), built inside the sid root against the very Dawn this project links, and packed for a
//! GPU machine.
//!
//! The user's checkout is never written to: inside the root it is mounted read-only at
//! [`SOURCE_INSIDE`], and the few files that need an edit to compile against Debian's Dawn are
//! edited in copies under `<cache>/upstream-build/edited/`, each mounted over its original for the
//! build only. CMake and Ninja build out of tree in `<cache>/upstream-build/build/`, which is kept,
//! so a second run with nothing changed does no work. The program and the ggml libraries it needs
//! are packed as `<cache>/upstream/ggml-<rev>-webgpu-test-backend-ops.tar.xz` (everything under
//! `up/`), which `cargo xtask bundle` then puts into the bundle.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::bundle::resolved_path;
use crate::host;
use crate::owned;
use crate::sandbox::{self, Mount};
use crate::sysroot;

/// Where the user's ggml checkout appears (read-only) inside the root.
pub const SOURCE_INSIDE: &str = "/opt/dawn-compute/ggml";

/// Dawn's CMake package in the root (Debian's `libwebgpu-dawn-dev`).
const DAWN_CMAKE_DIR: &str = "/usr/lib/x86_64-linux-gnu/cmake/Dawn";

/// The folder every packed file lies under.
pub const PACK_DIR: &str = "up";

/// The program built and packed.
const PROGRAM: &str = "test-backend-ops";

#[derive(Debug, Args)]
pub struct UpstreamArgs {
    /// A checkout of upstream ggml (https://github.com/ggml-org/ggml), anywhere on this machine;
    /// it is only read, never changed.
    #[arg(long, value_name = "DIR")]
    pub ggml: PathBuf,
    /// Parallel compile jobs (default: the number of CPUs).
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub jobs: Option<u32>,
}

/// A ggml checkout that was checked: its canonical path and its revision.
#[derive(Debug)]
pub struct Checkout {
    pub dir: PathBuf,
    /// The short commit, with `-dirty` when tracked files differ from it; `unknown` outside git.
    pub rev: String,
}

/// Files a ggml checkout must have for this command, and what they are.
const REQUIRED: &[(&str, &str)] = &[
    ("CMakeLists.txt", "ggml's top-level CMakeLists.txt"),
    ("src/ggml-webgpu/CMakeLists.txt", "the WebGPU backend's CMakeLists.txt"),
    ("src/ggml-webgpu/ggml-webgpu.cpp", "the WebGPU backend"),
    ("tests/test-backend-ops.cpp", "test-backend-ops"),
];

/// Checks what can be checked before the root is touched: the checkout, and that the build folder
/// is one xtask may use.
pub fn check(args: &UpstreamArgs) -> Result<Checkout> {
    let dir = check_checkout(&args.ggml)?;
    owned::check_fresh(&work_dir(), owned::Kind::UpstreamBuild)?;
    let rev = revision(&dir).unwrap_or_else(|| "unknown".to_owned());
    Ok(Checkout { dir, rev })
}

/// The checkout's canonical path, or an error saying why `dir` is not a ggml checkout with the
/// WebGPU backend and `test-backend-ops`.
pub fn check_checkout(dir: &Path) -> Result<PathBuf> {
    let shown = dir.display();
    let meta = fs::metadata(dir).with_context(|| format!("`--ggml {shown}`: no such folder"))?;
    if !meta.is_dir() {
        bail!("`--ggml {shown}` is not a folder; pass a checkout of https://github.com/ggml-org/ggml");
    }
    let canonical = dir.canonicalize().with_context(|| format!("resolving {shown}"))?;
    let missing: Vec<String> = REQUIRED
        .iter()
        .filter(|(file, _)| !canonical.join(file).is_file())
        .map(|(file, what)| format!("{file} ({what})"))
        .collect();
    if !missing.is_empty() {
        let llama = if canonical.join("ggml/CMakeLists.txt").is_file() {
            " It looks like llama.cpp, which carries ggml under ggml/ but builds test-backend-ops \
             from its own tree; pass a checkout of ggml itself."
        } else {
            ""
        };
        bail!(
            "`--ggml {shown}` is not a ggml checkout with the WebGPU backend: it lacks {}. Pass a \
             checkout of https://github.com/ggml-org/ggml (`git clone https://github.com/ggml-org/ggml`).{llama}",
            missing.join(", ")
        );
    }
    let cmake = fs::read_to_string(canonical.join("CMakeLists.txt")).unwrap_or_default();
    if !cmake.contains("project(\"ggml\"") {
        bail!(
            "`--ggml {shown}` is not a ggml checkout: its CMakeLists.txt does not declare \
             `project(\"ggml\" …)`. Pass a checkout of https://github.com/ggml-org/ggml"
        );
    }
    Ok(canonical)
}

/// The checkout's short commit (`-dirty` when tracked files were changed), if it is a git work
/// tree and git is there to ask.
fn revision(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| {
        // Only read; a checkout of another user is fine (git would otherwise refuse it).
        Command::new("git")
            .arg("-c")
            .arg("safe.directory=*")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let rev = git(&["rev-parse", "--short=7", "HEAD"]).filter(|r| is_rev(r))?;
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{rev}-dirty") } else { rev })
}

fn is_rev(text: &str) -> bool {
    !text.is_empty() && text.len() <= 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The packed program's file name for revision `rev`.
pub fn tarball_name(rev: &str) -> String {
    format!("ggml-{rev}-webgpu-test-backend-ops.tar.xz")
}

// ---------------------------------------------------------------------------------------------
// Edits to upstream's source

/// One edit that upstream's source needs to compile against the Dawn revision Debian packages.
#[derive(Debug)]
pub struct Edit {
    /// The file, relative to the checkout.
    pub file: &'static str,
    /// Why it is needed.
    pub why: &'static str,
    /// Exact text replaced, and its replacement.
    pub replacements: &'static [(&'static str, &'static str)],
}

/// The edits, smallest first. Each is made only where its text is found.
pub const EDITS: &[Edit] = &[
    Edit {
        file: "CMakeLists.txt",
        why: "C++20 instead of C++17 (the C++ header of Debian's Dawn, webgpu_cpp.h, needs C++20)",
        replacements: &[("set(CMAKE_CXX_STANDARD 17)", "set(CMAKE_CXX_STANDARD 20)")],
    },
    Edit {
        file: "src/ggml-webgpu/ggml-webgpu.cpp",
        why: "the adapter-request callback takes its message as `wgpu::StringView` (this Dawn revision \
              passes one, not a `const char *`), printed as the file's other callbacks print theirs",
        replacements: &[
            (
                "[&adapter](wgpu::RequestAdapterStatus status, wgpu::Adapter _adapter, const char * message)",
                "[&adapter](wgpu::RequestAdapterStatus status, wgpu::Adapter _adapter, wgpu::StringView message)",
            ),
            (
                r#"GGML_LOG_ERROR("ggml_webgpu: Failed to get an adapter: %s\n", message);"#,
                r#"GGML_LOG_ERROR("ggml_webgpu: Failed to get an adapter: %s\n", std::string(message).c_str());"#,
            ),
        ],
    },
];

/// What applying an edit did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The text was found and replaced.
    Applied,
    /// The replacement is already there (the text was edited before, or upstream made the change).
    AlreadyThere,
    /// Neither the text nor its replacement is there: upstream changed this code; nothing to do.
    NotNeeded,
}

/// Applies `edit` to `text`: the edited text and what was done.
pub fn apply_edit(edit: &Edit, text: &str) -> (String, Outcome) {
    let mut out = text.to_owned();
    let (mut applied, mut there) = (false, false);
    for (from, to) in edit.replacements {
        if out.contains(from) {
            out = out.replace(from, to);
            applied = true;
        } else if out.contains(to) {
            there = true;
        }
    }
    let outcome = if applied {
        Outcome::Applied
    } else if there {
        Outcome::AlreadyThere
    } else {
        Outcome::NotNeeded
    };
    (out, outcome)
}

/// Applies every edit of `file` to `text`, in order: the edited text and each edit's outcome.
pub fn edit_file(file: &str, text: &str) -> (String, Vec<(&'static Edit, Outcome)>) {
    let mut out = text.to_owned();
    let mut outcomes = Vec::new();
    for edit in EDITS.iter().filter(|e| e.file == file) {
        let (edited, outcome) = apply_edit(edit, &out);
        out = edited;
        outcomes.push((edit, outcome));
    }
    (out, outcomes)
}

/// The line printed for one edit's outcome.
pub fn report(edit: &Edit, outcome: Outcome) -> String {
    match outcome {
        Outcome::Applied => format!(
            "xtask: edited upstream's {} (in a copy; the checkout is unchanged): {}",
            edit.file, edit.why
        ),
        Outcome::AlreadyThere => format!(
            "xtask: upstream's {} already has the edit, nothing to change: {}",
            edit.file, edit.why
        ),
        Outcome::NotNeeded => format!(
            "xtask: no edit needed in upstream's {} (the code it changes is not there): {}",
            edit.file, edit.why
        ),
    }
}

/// The distinct files [`EDITS`] touch, in order.
fn edited_files() -> Vec<&'static str> {
    let mut files: Vec<&'static str> = Vec::new();
    for edit in EDITS {
        if !files.contains(&edit.file) {
            files.push(edit.file);
        }
    }
    files
}

// ---------------------------------------------------------------------------------------------
// Building

/// `<cache>/upstream-build`: the edited copies, the CMake build folder, the packing stage.
pub fn work_dir() -> PathBuf {
    sysroot::cache_dir().join("upstream-build")
}

/// `<cache>/upstream`: the packed programs, and `latest` naming the last one packed.
pub fn out_dir() -> PathBuf {
    sysroot::cache_dir().join("upstream")
}

/// The CMake configure command (run inside the root).
pub fn configure_command(build_dir: &Path) -> Vec<String> {
    let mut command: Vec<String> = ["cmake", "-S", SOURCE_INSIDE, "-B"].map(String::from).into();
    command.push(build_dir.display().to_string());
    command.extend(
        [
            "-G",
            "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DBUILD_SHARED_LIBS=ON",
            "-DGGML_CPU=ON",
            "-DGGML_WEBGPU=ON",
            // Portable x86-64 (AVX2, FMA, F16C) rather than this machine's CPU: the program runs
            // on another one.
            "-DGGML_NATIVE=OFF",
            "-DGGML_BUILD_TESTS=ON",
            "-DGGML_BUILD_EXAMPLES=OFF",
            "-DGGML_CCACHE=OFF",
        ]
        .map(String::from),
    );
    command.push(format!("-DDawn_DIR={DAWN_CMAKE_DIR}"));
    command
}

/// Builds upstream's `test-backend-ops` in the root and packs it; returns the tarball's path.
pub fn build(root: &Path, args: &UpstreamArgs, checkout: &Checkout) -> Result<PathBuf> {
    if !root
        .join(DAWN_CMAKE_DIR.trim_start_matches('/'))
        .join("DawnConfig.cmake")
        .is_file()
    {
        bail!(
            "the sid root at {} has no Dawn CMake package under {DAWN_CMAKE_DIR}; re-run `cargo xtask env`",
            root.display()
        );
    }
    let cache = sysroot::cache_dir();
    fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    // One build at a time: two would share the build folder.
    let lock_path = cache.join(".upstream-build.lock");
    let lock = host::open_own_file(&lock_path)?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;

    println!("xtask: upstream ggml {} from {}", checkout.rev, checkout.dir.display());
    let work = work_dir();

    // The edits, decided before the build folder is kept or started afresh.
    let mut edited = Vec::new();
    for file in edited_files() {
        let path = checkout.dir.join(file);
        let original = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let (text, outcomes) = edit_file(file, &original);
        for (edit, outcome) in outcomes {
            println!("{}", report(edit, outcome));
        }
        if text != original {
            edited.push((file, text));
        }
    }

    // What the build folder was made from: a different checkout, or another set of files mounted
    // over it, starts it afresh (Ninja judges by times, which another source does not order).
    let record = format!(
        "source={}\nedited={}\n",
        checkout.dir.display(),
        edited.iter().map(|(f, _)| *f).collect::<Vec<_>>().join(",")
    );
    let record_path = work.join("source");
    let kept = owned::is_marked(&work, owned::Kind::UpstreamBuild)
        && fs::read_to_string(&record_path).is_ok_and(|r| r == record);
    if !kept {
        if owned::is_marked(&work, owned::Kind::UpstreamBuild) {
            println!(
                "xtask: {} was built from another checkout or other edits; starting it afresh",
                work.display()
            );
        }
        owned::fresh_dir(&work, owned::Kind::UpstreamBuild)?;
        fs::write(&record_path, &record).with_context(|| format!("writing {}", record_path.display()))?;
    }

    let inside = Path::new(SOURCE_INSIDE);
    let mut mounts = vec![Mount {
        source: checkout.dir.clone(),
        inside: inside.to_owned(),
        read_only: true,
    }];
    for (file, text) in &edited {
        let copy = work.join("edited").join(file);
        write_if_changed(&copy, text)?;
        mounts.push(Mount {
            source: copy,
            inside: inside.join(file),
            read_only: true,
        });
    }
    mounts.push(Mount {
        source: work.clone(),
        inside: work.clone(),
        read_only: false,
    });

    let build_dir = work.join("build");
    let configure = configure_command(&build_dir);
    let stamp = work.join("configured");
    let configured =
        build_dir.join("build.ninja").is_file() && fs::read_to_string(&stamp).is_ok_and(|s| s == configure.join("\n"));
    let started = Instant::now();
    if !configured {
        let _ = fs::remove_file(&stamp);
        let command: Vec<&str> = configure.iter().map(String::as_str).collect();
        sandbox::run_in_root_with(
            root,
            &command,
            &mounts,
            "CMake could not configure upstream ggml; see its messages above.",
        )?;
        fs::write(&stamp, configure.join("\n")).with_context(|| format!("writing {}", stamp.display()))?;
    }
    let jobs = args
        .jobs
        .map(|j| j as usize)
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
        .to_string();
    let build_str = build_dir.display().to_string();
    sandbox::run_in_root_with(
        root,
        &["cmake", "--build", &build_str, "--target", PROGRAM, "--parallel", &jobs],
        &mounts,
        "Upstream ggml did not build against this Dawn; its compiler messages are above. An edit \
         this command makes may no longer match upstream's source (see the `xtask: … edit` lines).",
    )?;
    println!(
        "xtask: upstream's {PROGRAM} is built ({:.0} s)",
        started.elapsed().as_secs_f64()
    );

    pack(root, checkout, &work, &build_dir, &mounts)
}

/// Writes `text` to `path` unless it already holds exactly that, so that its time (what Ninja
/// judges by) changes only with its content.
fn write_if_changed(path: &Path, text: &str) -> Result<()> {
    if fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// Packing

/// One file of the tarball: where it is inside the root, and its name in the tarball.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackEntry {
    pub from: String,
    pub name: String,
}

/// What goes into the tarball, decided from `ldd` of the program and of Dawn's library (both as
/// seen inside the root): the program as `up/test-backend-ops`, and as `up/<soname>` every library
/// it needs that a bundle does not carry: ggml's own, from the build folder, and any system
/// library outside Dawn's closure (a bundle carries Dawn and everything Dawn needs, since
/// `backend-ops` links Dawn). The C library's loader is the bundle's.
pub fn pack_layout(program: &str, program_ldd: &str, dawn_ldd: &str) -> Result<Vec<PackEntry>> {
    let missing: Vec<&str> = program_ldd
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("=> not found"))
        .collect();
    if !missing.is_empty() {
        bail!(
            "{program} needs libraries the root does not have: {}",
            missing.join("; ")
        );
    }
    let dawn = program_ldd
        .lines()
        .filter_map(ldd_entry)
        .find(|(soname, _)| soname.starts_with("libwebgpu_dawn"));
    let Some((_, dawn_path)) = dawn else {
        bail!("{program} does not link Dawn's libwebgpu_dawn: it was not built with the WebGPU backend");
    };
    let mut carried: Vec<String> = dawn_ldd.lines().filter_map(ldd_entry).map(|(s, _)| s).collect();
    carried.push(file_name(&dawn_path));

    let mut entries = vec![PackEntry {
        from: program.to_owned(),
        name: format!("{PACK_DIR}/{PROGRAM}"),
    }];
    for (soname, path) in program_ldd.lines().filter_map(ldd_entry) {
        let loader = soname.starts_with("ld-linux");
        if loader || carried.contains(&soname) {
            continue;
        }
        let name = format!("{PACK_DIR}/{soname}");
        if !entries.iter().any(|e| e.name == name) {
            entries.push(PackEntry { from: path, name });
        }
    }
    Ok(entries)
}

/// `(soname, resolved path)` of one `ldd` line; the loader's own line gives its file name.
fn ldd_entry(line: &str) -> Option<(String, String)> {
    let path = resolved_path(line)?;
    let soname = match line.trim().split_once("=>") {
        Some((left, _)) => left.trim().to_owned(),
        None => file_name(&path),
    };
    Some((soname, path))
}

fn file_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_owned()
}

/// Packs the program and its libraries as `<out>/ggml-<rev>-webgpu-test-backend-ops.tar.xz`
/// unless that tarball already holds exactly these files, and records it as the latest.
fn pack(root: &Path, checkout: &Checkout, work: &Path, build_dir: &Path, mounts: &[Mount]) -> Result<PathBuf> {
    let program = build_dir.join("bin").join(PROGRAM).display().to_string();
    let fix = "ldd could not read upstream's program; re-run `cargo xtask upstream`.";
    let program_ldd = sandbox::output_in_root_with(root, &["ldd", &program], mounts, fix)?;
    let dawn_path = program_ldd
        .lines()
        .filter_map(ldd_entry)
        .find(|(soname, _)| soname.starts_with("libwebgpu_dawn"))
        .map(|(_, path)| path)
        .unwrap_or_default();
    let dawn_ldd = if dawn_path.is_empty() {
        String::new()
    } else {
        sandbox::output_in_root_with(root, &["ldd", &dawn_path], mounts, fix)?
    };
    let entries = pack_layout(&program, &program_ldd, &dawn_ldd)?;

    // What the tarball would hold: each file's name, size and time, as seen inside the root.
    let mut stat: Vec<&str> = vec!["stat", "-L", "--format", "%s %Y"];
    stat.extend(entries.iter().map(|e| e.from.as_str()));
    let stats = sandbox::output_in_root_with(root, &stat, mounts, fix)?;
    let fingerprint: String = entries
        .iter()
        .zip(stats.lines())
        .map(|(e, s)| format!("{} {} {s}\n", e.name, e.from))
        .collect();

    let out = out_dir();
    fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let tarball = out.join(tarball_name(&checkout.rev));
    let packed = work.join("packed");
    let unchanged = tarball.is_file()
        && fs::read_to_string(&packed).is_ok_and(|p| p == format!("{}\n{fingerprint}", tarball.display()));
    if !unchanged {
        let stage = work.join("pack");
        if stage.exists() {
            fs::remove_dir_all(&stage).with_context(|| format!("removing {}", stage.display()))?;
        }
        fs::create_dir_all(stage.join(PACK_DIR)).with_context(|| format!("creating {}", stage.display()))?;
        // Copied inside the root, where `cp -L` resolves the root's own symbolic links.
        let mut cp: Vec<String> = [
            "sh",
            "-c",
            "set -e; while [ $# -gt 1 ]; do cp -L \"$1\" \"$2\"; shift 2; done",
            "sh",
        ]
        .map(String::from)
        .into();
        for entry in &entries {
            cp.push(entry.from.clone());
            cp.push(stage.join(&entry.name).display().to_string());
        }
        let cp: Vec<&str> = cp.iter().map(String::as_str).collect();
        sandbox::run_in_root_with(root, &cp, mounts, "Copying upstream's program and libraries failed.")?;

        let partial = out.join(format!(".{}.partial", tarball_name(&checkout.rev)));
        let mut tar = Command::new("tar");
        tar.args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner", "-cJf"])
            .arg(&partial)
            .arg("-C")
            .arg(&stage)
            .arg(PACK_DIR);
        host::run_checked(
            &mut tar,
            "Packing upstream's program failed (tar with xz on this machine).",
        )?;
        fs::rename(&partial, &tarball).with_context(|| format!("writing {}", tarball.display()))?;
        fs::write(&packed, format!("{}\n{fingerprint}", tarball.display()))
            .with_context(|| format!("writing {}", packed.display()))?;
    }
    let latest = out.join("latest");
    write_if_changed(&latest, &format!("{}\n", tarball_name(&checkout.rev)))?;
    println!(
        "xtask: {} upstream's {PROGRAM} (ggml {}) with {} libraries {} {}",
        if unchanged { "already packed" } else { "packed" },
        checkout.rev,
        entries.len() - 1,
        if unchanged { "in" } else { "into" },
        tarball.display()
    );
    println!("xtask: `cargo xtask bundle` now puts it into the bundle, run there as `gpu-bundle/run-upstream ARGS`");
    Ok(tarball)
}

/// The tarball `cargo xtask upstream` packed last, if it is still there.
pub fn latest_tarball() -> Option<PathBuf> {
    let out = out_dir();
    let name = fs::read_to_string(out.join("latest")).ok()?;
    let name = name.trim();
    let ok = name.starts_with("ggml-") && name.ends_with(".tar.xz") && !name.contains('/');
    let path = out.join(name);
    (ok && path.is_file()).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::owned::TempDir;

    /// What d99724f has at the two places the edits touch.
    const CMAKE_SAMPLE: &str = "set(CMAKE_C_STANDARD 11)\nset(CMAKE_C_STANDARD_REQUIRED true)\n\n\
                                set(CMAKE_CXX_STANDARD 17)\nset(CMAKE_CXX_STANDARD_REQUIRED true)\n";
    const WEBGPU_SAMPLE: &str = r#"    instance.WaitAny(instance.RequestAdapter(
                         &options, wgpu::CallbackMode::AllowSpontaneous,
                         [&adapter](wgpu::RequestAdapterStatus status, wgpu::Adapter _adapter, const char * message) {
                             if (status != wgpu::RequestAdapterStatus::Success) {
                                 GGML_LOG_ERROR("ggml_webgpu: Failed to get an adapter: %s\n", message);
                                 return;
                             }
                             adapter = std::move(_adapter);
                         }),
                     UINT64_MAX);
"#;

    #[test]
    fn the_cmake_edit_asks_for_cpp20_and_says_so() {
        let (text, outcomes) = edit_file("CMakeLists.txt", CMAKE_SAMPLE);
        assert!(text.contains("set(CMAKE_CXX_STANDARD 20)\n"), "{text}");
        assert!(!text.contains("CMAKE_CXX_STANDARD 17"));
        assert!(text.contains("set(CMAKE_C_STANDARD 11)"), "C's standard is left alone");
        assert_eq!(outcomes.len(), 1);
        assert_eq!(outcomes[0].1, Outcome::Applied);
        let line = report(outcomes[0].0, outcomes[0].1);
        assert!(
            line.contains("edited upstream's CMakeLists.txt") && line.contains("C++20"),
            "{line}"
        );
    }

    #[test]
    fn the_webgpu_edit_takes_the_message_as_a_string_view() {
        let (text, outcomes) = edit_file("src/ggml-webgpu/ggml-webgpu.cpp", WEBGPU_SAMPLE);
        assert!(
            text.contains("wgpu::Adapter _adapter, wgpu::StringView message) {"),
            "{text}"
        );
        assert!(
            text.contains(r#"Failed to get an adapter: %s\n", std::string(message).c_str());"#),
            "{text}"
        );
        assert!(!text.contains("const char * message"));
        assert_eq!(text.lines().count(), WEBGPU_SAMPLE.lines().count());
        assert_eq!(outcomes.len(), 1);
        assert_eq!(outcomes[0].1, Outcome::Applied);
        assert!(report(outcomes[0].0, outcomes[0].1).contains("wgpu::StringView"));
    }

    #[test]
    fn applying_the_edits_twice_changes_nothing_the_second_time() {
        for (file, sample) in [
            ("CMakeLists.txt", CMAKE_SAMPLE),
            ("src/ggml-webgpu/ggml-webgpu.cpp", WEBGPU_SAMPLE),
        ] {
            let (once, _) = edit_file(file, sample);
            let (twice, outcomes) = edit_file(file, &once);
            assert_eq!(once, twice, "{file}");
            assert!(outcomes.iter().all(|(_, o)| *o == Outcome::AlreadyThere), "{file}");
            let line = report(outcomes[0].0, outcomes[0].1);
            assert!(line.contains("already has the edit"), "{line}");
        }
    }

    #[test]
    fn code_without_the_patterns_is_left_alone_and_reported_as_needing_nothing() {
        for file in edited_files() {
            let text = "cmake_minimum_required(VERSION 3.14)\nset(CMAKE_CXX_STANDARD 23)\n";
            let (out, outcomes) = edit_file(file, text);
            assert_eq!(out, text);
            assert!(!outcomes.is_empty());
            for (edit, outcome) in outcomes {
                assert_eq!(outcome, Outcome::NotNeeded);
                assert!(report(edit, outcome).contains("no edit needed"));
            }
        }
        // A file no edit names.
        let (out, outcomes) = edit_file("tests/test-backend-ops.cpp", CMAKE_SAMPLE);
        assert_eq!(out, CMAKE_SAMPLE);
        assert!(outcomes.is_empty());
    }

    #[test]
    fn every_edit_changes_its_text_and_its_replacement_does_not_contain_it() {
        for edit in EDITS {
            for (from, to) in edit.replacements {
                assert_ne!(from, to);
                assert!(!to.contains(from), "{from}");
            }
        }
    }

    fn fake_checkout(dir: &Path, files: &[&str]) {
        for file in files {
            let path = dir.join(file);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            let text = if *file == "CMakeLists.txt" {
                "cmake_minimum_required(VERSION 3.14)\nproject(\"ggml\" C CXX ASM)\n"
            } else {
                ""
            };
            fs::write(path, text).unwrap();
        }
    }

    #[test]
    fn a_ggml_checkout_is_accepted() {
        let tmp = TempDir::new("ggml-ok");
        let all: Vec<&str> = REQUIRED.iter().map(|(f, _)| *f).collect();
        fake_checkout(tmp.path(), &all);
        assert_eq!(check_checkout(tmp.path()).unwrap(), tmp.path().canonicalize().unwrap());
    }

    #[test]
    fn a_folder_that_is_not_a_ggml_checkout_is_refused_with_what_it_lacks() {
        let tmp = TempDir::new("ggml-bad");
        let missing = tmp.path().join("nowhere");
        let err = format!("{:#}", check_checkout(&missing).unwrap_err());
        assert!(err.contains("no such folder"), "{err}");

        let file = tmp.path().join("file");
        fs::write(&file, "").unwrap();
        let err = check_checkout(&file).unwrap_err().to_string();
        assert!(err.contains("is not a folder"), "{err}");

        let empty = tmp.path().join("empty");
        fs::create_dir(&empty).unwrap();
        let err = check_checkout(&empty).unwrap_err().to_string();
        assert!(err.contains("is not a ggml checkout"), "{err}");
        assert!(
            err.contains("tests/test-backend-ops.cpp") && err.contains("ggml-webgpu.cpp"),
            "{err}"
        );
        assert!(err.contains("github.com/ggml-org/ggml"), "{err}");

        let no_webgpu = tmp.path().join("old-ggml");
        fake_checkout(&no_webgpu, &["CMakeLists.txt", "tests/test-backend-ops.cpp"]);
        let err = check_checkout(&no_webgpu).unwrap_err().to_string();
        assert!(
            err.contains("the WebGPU backend") && !err.contains("test-backend-ops.cpp"),
            "{err}"
        );

        let llama = tmp.path().join("llama.cpp");
        fake_checkout(&llama, &["ggml/CMakeLists.txt", "tests/test-backend-ops.cpp"]);
        let err = check_checkout(&llama).unwrap_err().to_string();
        assert!(err.contains("llama.cpp"), "{err}");

        let other = tmp.path().join("other");
        let all: Vec<&str> = REQUIRED.iter().map(|(f, _)| *f).collect();
        fake_checkout(&other, &all);
        fs::write(other.join("CMakeLists.txt"), "project(\"other\")\n").unwrap();
        let err = check_checkout(&other).unwrap_err().to_string();
        assert!(err.contains("does not declare"), "{err}");
    }

    #[test]
    fn the_tarball_is_named_by_revision() {
        assert_eq!(tarball_name("d99724f"), "ggml-d99724f-webgpu-test-backend-ops.tar.xz");
        assert!(is_rev("d99724f") && !is_rev("") && !is_rev("HEAD") && !is_rev("../x"));
    }

    #[test]
    fn cmake_builds_webgpu_and_cpu_with_tests_portably_against_debians_dawn() {
        let command = configure_command(Path::new("/c/upstream-build/build"));
        let has = |arg: &str| command.iter().any(|a| a == arg);
        assert_eq!(command[..4], ["cmake", "-S", SOURCE_INSIDE, "-B"]);
        assert_eq!(command[4], "/c/upstream-build/build");
        for arg in [
            "Ninja",
            "-DGGML_WEBGPU=ON",
            "-DGGML_CPU=ON",
            "-DGGML_BUILD_TESTS=ON",
            "-DGGML_NATIVE=OFF",
            "-DDawn_DIR=/usr/lib/x86_64-linux-gnu/cmake/Dawn",
        ] {
            assert!(has(arg), "{arg} missing from {command:?}");
        }
    }

    const BUILD: &str = "/var/cache/dawn-compute/upstream-build/build/bin";

    fn program_ldd() -> String {
        format!(
            "\tlinux-vdso.so.1 (0x00007ffd)\n\
             \tlibggml.so.0 => {BUILD}/libggml.so.0 (0x7f01)\n\
             \tlibggml-base.so.0 => {BUILD}/libggml-base.so.0 (0x7f02)\n\
             \tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x7f03)\n\
             \tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x7f04)\n\
             \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x7f05)\n\
             \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x7f06)\n\
             \tlibggml-cpu.so.0 => {BUILD}/libggml-cpu.so.0 (0x7f07)\n\
             \tlibggml-webgpu.so.0 => {BUILD}/libggml-webgpu.so.0 (0x7f08)\n\
             \tlibgomp.so.1 => /lib/x86_64-linux-gnu/libgomp.so.1 (0x7f09)\n\
             \tlibwebgpu_dawn.so.0 => /lib/x86_64-linux-gnu/libwebgpu_dawn.so.0 (0x7f0a)\n\
             \t/lib64/ld-linux-x86-64.so.2 (0x7f0b)\n\
             \tlibvulkan.so.1 => /lib/x86_64-linux-gnu/libvulkan.so.1 (0x7f0c)\n"
        )
    }

    const DAWN_LDD: &str = "\tlinux-vdso.so.1 (0x00007ffd)\n\
         \tlibvulkan.so.1 => /lib/x86_64-linux-gnu/libvulkan.so.1 (0x7f0c)\n\
         \tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x7f03)\n\
         \tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x7f04)\n\
         \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x7f05)\n\
         \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x7f06)\n\
         \t/lib64/ld-linux-x86-64.so.2 (0x7f0b)\n";

    #[test]
    fn the_pack_holds_the_program_ggmls_libraries_and_what_dawn_does_not_bring() {
        let program = format!("{BUILD}/test-backend-ops");
        let entries = pack_layout(&program, &program_ldd(), DAWN_LDD).unwrap();
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "up/test-backend-ops",
                "up/libggml.so.0",
                "up/libggml-base.so.0",
                "up/libggml-cpu.so.0",
                "up/libggml-webgpu.so.0",
                "up/libgomp.so.1",
            ]
        );
        assert_eq!(entries[0].from, program);
        assert_eq!(entries[1].from, format!("{BUILD}/libggml.so.0"));
        assert_eq!(entries[5].from, "/lib/x86_64-linux-gnu/libgomp.so.1");
        assert!(
            entries
                .iter()
                .all(|e| e.name.starts_with("up/") && !e.name[3..].contains('/'))
        );
    }

    #[test]
    fn the_pack_refuses_a_program_with_missing_libraries_or_without_dawn() {
        let program = format!("{BUILD}/test-backend-ops");
        let broken = program_ldd().replace(&format!("{BUILD}/libggml-cpu.so.0 (0x7f07)"), "not found");
        let err = pack_layout(&program, &broken, DAWN_LDD).unwrap_err().to_string();
        assert!(err.contains("libggml-cpu.so.0 => not found"), "{err}");

        let no_dawn: String = program_ldd()
            .lines()
            .filter(|l| !l.contains("webgpu_dawn"))
            .map(|l| format!("{l}\n"))
            .collect();
        let err = pack_layout(&program, &no_dawn, DAWN_LDD).unwrap_err().to_string();
        assert!(err.contains("does not link Dawn"), "{err}");
    }
}
