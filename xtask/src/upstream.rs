//! `cargo xtask upstream`: upstream's own programs, built inside the sid root against the very
//! Dawn this project links, and packed for a GPU machine. Two projects: ggml (`--ggml DIR`: its
//! `test-backend-ops`, CPU and WebGPU backends) and llama.cpp (`--llama DIR`, see
//! [`crate::llama`]: its tools, CPU, WebGPU and Vulkan backends).
//!
//! The user's checkout is never written to: inside the root it is mounted read-only (at
//! [`SOURCE_INSIDE`] for ggml), and the few files that need an edit to compile against Debian's
//! Dawn are edited in copies under `<cache>/upstream-build/<project>/edited/`, each mounted over
//! its original for the build only. CMake and Ninja build out of tree in
//! `<cache>/upstream-build/<project>/build/`, which is kept, so a second run with nothing changed
//! does no work. The programs and the libraries they need are packed as
//! `<cache>/upstream/<project>-<rev>-….tar.xz` (everything under one folder, [`PACK_DIR`] for
//! ggml), which `cargo xtask bundle` then puts into the bundle.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{ArgGroup, Args};

use crate::bundle::{DRIVER_LIBRARIES, resolved_path};
use crate::host;
use crate::llama;
use crate::owned;
use crate::sandbox::{self, Mount};
use crate::sysroot;

/// Where the user's ggml checkout appears (read-only) inside the root.
pub const SOURCE_INSIDE: &str = "/opt/dawn-compute/ggml";

/// Dawn's CMake package in the root (Debian's `libwebgpu-dawn-dev`).
pub const DAWN_CMAKE_DIR: &str = "/usr/lib/x86_64-linux-gnu/cmake/Dawn";

/// The folder every packed file of ggml's program lies under.
pub const PACK_DIR: &str = "up";

/// The program built and packed.
const PROGRAM: &str = "test-backend-ops";

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("checkout").required(true).args(["ggml", "llama"])))]
pub struct UpstreamArgs {
    /// A checkout of upstream ggml (https://github.com/ggml-org/ggml), anywhere on this machine;
    /// it is only read, never changed.
    #[arg(long, value_name = "DIR")]
    pub ggml: Option<PathBuf>,
    /// A checkout of llama.cpp (https://github.com/ggml-org/llama.cpp, or the copy vendored in
    /// llama-cpp-python's source distribution), anywhere on this machine; it is only read.
    #[arg(long, value_name = "DIR")]
    pub llama: Option<PathBuf>,
    /// With `--llama`: only pack the part of the checkout that a CUDA build of llama-bench,
    /// llama-perplexity and test-backend-ops needs, as `<cache>/upstream/llama-<rev>-source.tar.xz`
    /// (for `bench/llama-cuda.sh` on the GPU machine); nothing is built.
    #[arg(long, requires = "llama", conflicts_with = "ggml")]
    pub source_tarball: bool,
    /// Parallel compile jobs (default: the number of CPUs).
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub jobs: Option<u32>,
}

/// A checkout that was checked: its canonical path and its revision.
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
    let (dir, work, kind) = match (&args.ggml, &args.llama) {
        (Some(ggml), _) => (check_checkout(ggml)?, work_dir(), owned::Kind::UpstreamBuild),
        (None, Some(llama)) => (
            llama::check_checkout(llama)?,
            llama::work_dir(),
            owned::Kind::LlamaBuild,
        ),
        (None, None) => bail!("pass `--ggml DIR` or `--llama DIR`"),
    };
    if !args.source_tarball {
        owned::check_fresh(&work, kind)?;
    }
    let rev = revision(&dir).unwrap_or_else(|| "unknown".to_owned());
    Ok(Checkout { dir, rev })
}

/// The checkout's canonical path, or an error saying why `dir` is not a ggml checkout with the
/// WebGPU backend and `test-backend-ops`.
pub fn check_checkout(dir: &Path) -> Result<PathBuf> {
    let shown = dir.display();
    let canonical = existing_folder(dir, "--ggml", "https://github.com/ggml-org/ggml")?;
    let missing = missing_files(&canonical, REQUIRED);
    if !missing.is_empty() {
        let llama = if canonical.join("ggml/CMakeLists.txt").is_file() {
            " It looks like llama.cpp, which carries ggml under ggml/ but builds test-backend-ops \
             from its own tree; pass it as `--llama` for llama.cpp's tools, or a checkout of ggml \
             itself as `--ggml`."
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

/// `dir`'s canonical path if it is a folder, else an error naming `flag` and what to pass.
pub fn existing_folder(dir: &Path, flag: &str, what: &str) -> Result<PathBuf> {
    let shown = dir.display();
    let meta = fs::metadata(dir).with_context(|| format!("`{flag} {shown}`: no such folder"))?;
    if !meta.is_dir() {
        bail!("`{flag} {shown}` is not a folder; pass a checkout of {what}");
    }
    dir.canonicalize().with_context(|| format!("resolving {shown}"))
}

/// The files of `required` that `dir` lacks, each with what it is.
pub fn missing_files(dir: &Path, required: &[(&str, &str)]) -> Vec<String> {
    required
        .iter()
        .filter(|(file, _)| !dir.join(file).is_file())
        .map(|(file, what)| format!("{file} ({what})"))
        .collect()
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
    // A folder inside some other repository is not a checkout of its own: git would answer for
    // the outer one.
    let top = git(&["rev-parse", "--show-toplevel"])?;
    if Path::new(&top).canonicalize().ok()? != dir.canonicalize().ok()? {
        return None;
    }
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

/// Why the WebGPU backend's adapter callback is edited.
pub const ADAPTER_CALLBACK_WHY: &str = "the adapter-request callback takes its message as `wgpu::StringView` \
     (this Dawn revision passes one, not a `const char *`), printed as the file's other callbacks \
     print theirs";

/// The adapter callback's edit, in ggml's `src/ggml-webgpu/ggml-webgpu.cpp` (llama.cpp carries
/// the same file under `ggml/`).
pub const ADAPTER_CALLBACK: &[(&str, &str)] = &[
    (
        "[&adapter](wgpu::RequestAdapterStatus status, wgpu::Adapter _adapter, const char * message)",
        "[&adapter](wgpu::RequestAdapterStatus status, wgpu::Adapter _adapter, wgpu::StringView message)",
    ),
    (
        r#"GGML_LOG_ERROR("ggml_webgpu: Failed to get an adapter: %s\n", message);"#,
        r#"GGML_LOG_ERROR("ggml_webgpu: Failed to get an adapter: %s\n", std::string(message).c_str());"#,
    ),
];

/// The edits, smallest first. Each is made only where its text is found.
pub const EDITS: &[Edit] = &[
    Edit {
        file: "CMakeLists.txt",
        why: "C++20 instead of C++17 (the C++ header of Debian's Dawn, webgpu_cpp.h, needs C++20)",
        replacements: &[("set(CMAKE_CXX_STANDARD 17)", "set(CMAKE_CXX_STANDARD 20)")],
    },
    Edit {
        file: "src/ggml-webgpu/ggml-webgpu.cpp",
        why: ADAPTER_CALLBACK_WHY,
        replacements: ADAPTER_CALLBACK,
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

/// Applies every edit of `edits` for `file` to `text`, in order: the edited text and each edit's
/// outcome.
pub fn edit_file_with<'e>(edits: &'e [Edit], file: &str, text: &str) -> (String, Vec<(&'e Edit, Outcome)>) {
    let mut out = text.to_owned();
    let mut outcomes = Vec::new();
    for edit in edits.iter().filter(|e| e.file == file) {
        let (edited, outcome) = apply_edit(edit, &out);
        out = edited;
        outcomes.push((edit, outcome));
    }
    (out, outcomes)
}

/// [`edit_file_with`] ggml's [`EDITS`].
#[cfg(test)]
pub fn edit_file(file: &str, text: &str) -> (String, Vec<(&'static Edit, Outcome)>) {
    edit_file_with(EDITS, file, text)
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

/// The distinct files `edits` touch, in order.
fn edited_files(edits: &[Edit]) -> Vec<&'static str> {
    let mut files: Vec<&'static str> = Vec::new();
    for edit in edits {
        if !files.contains(&edit.file) {
            files.push(edit.file);
        }
    }
    files
}

// ---------------------------------------------------------------------------------------------
// Building

/// `<cache>/upstream-build`: one folder per project below it.
pub fn builds_dir() -> PathBuf {
    sysroot::cache_dir().join("upstream-build")
}

/// `<cache>/upstream-build/ggml`: ggml's edited copies, CMake build folder and packing stage.
pub fn work_dir() -> PathBuf {
    builds_dir().join("ggml")
}

/// `<cache>/upstream`: the packed programs, and `latest` naming the last one packed.
pub fn out_dir() -> PathBuf {
    sysroot::cache_dir().join("upstream")
}

/// The CMake configure command (run inside the root).
pub fn configure_command(build_dir: &Path) -> Vec<String> {
    cmake_configure(
        SOURCE_INSIDE,
        build_dir,
        &[
            "-DBUILD_SHARED_LIBS=ON",
            "-DGGML_CPU=ON",
            "-DGGML_WEBGPU=ON",
            // Portable x86-64 (AVX2, FMA, F16C) rather than this machine's CPU: the program runs
            // on another one.
            "-DGGML_NATIVE=OFF",
            "-DGGML_BUILD_TESTS=ON",
            "-DGGML_BUILD_EXAMPLES=OFF",
            "-DGGML_CCACHE=OFF",
        ],
    )
}

/// `cmake -S source -B build -G Ninja -DCMAKE_BUILD_TYPE=Release OPTIONS… -DDawn_DIR=…`.
pub fn cmake_configure(source: &str, build_dir: &Path, options: &[&str]) -> Vec<String> {
    let mut command: Vec<String> = ["cmake", "-S", source, "-B"].map(String::from).into();
    command.push(build_dir.display().to_string());
    command.extend(["-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"].map(String::from));
    command.extend(options.iter().map(|o| (*o).to_owned()));
    command.push(format!("-DDawn_DIR={DAWN_CMAKE_DIR}"));
    command
}

/// One upstream project as this command builds and packs it.
pub struct Project {
    /// Its name in messages.
    pub name: &'static str,
    /// Where the checkout is mounted (read-only) inside the root.
    pub source_inside: &'static str,
    /// The build's own folder (edited copies, CMake's build folder, the packing stage).
    pub work: PathBuf,
    /// How that folder is marked.
    pub kind: owned::Kind,
    /// Edits to upstream's source, relative to the checkout.
    pub edits: &'static [Edit],
    /// CMake's configure command, given the build folder.
    pub configure: fn(&Path) -> Vec<String>,
    /// The programs built and packed (CMake targets, found in `bin/` of the build folder).
    pub programs: &'static [&'static str],
    /// Library name prefixes every program must link (checked with `ldd`).
    pub links: &'static [&'static str],
    /// The folder of the tarball every file lies under.
    pub pack_dir: &'static str,
    /// The tarball's file name for a revision.
    pub tarball_name: fn(&str) -> String,
    /// The file of [`out_dir`] that names the tarball packed last.
    pub latest: &'static str,
}

/// ggml's `test-backend-ops`.
pub fn ggml_project() -> Project {
    Project {
        name: "ggml",
        source_inside: SOURCE_INSIDE,
        work: work_dir(),
        kind: owned::Kind::UpstreamBuild,
        edits: EDITS,
        configure: configure_command,
        programs: &[PROGRAM],
        links: &["libwebgpu_dawn"],
        pack_dir: PACK_DIR,
        tarball_name,
        latest: "latest",
    }
}

/// Builds the project named by `args` in the root and packs it (or, with `--source-tarball`, packs
/// llama.cpp's source); returns the tarball's path.
pub fn build(root: &Path, args: &UpstreamArgs, checkout: &Checkout) -> Result<PathBuf> {
    if args.llama.is_some() && args.ggml.is_none() {
        if args.source_tarball {
            return llama::pack_source(checkout);
        }
        return build_project(root, &llama::project(), args.jobs, checkout);
    }
    build_project(root, &ggml_project(), args.jobs, checkout)
}

/// Builds `project`'s programs in the root and packs them; returns the tarball's path.
pub fn build_project(root: &Path, project: &Project, jobs: Option<u32>, checkout: &Checkout) -> Result<PathBuf> {
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
    // One build of a project at a time: two would share its build folder.
    let lock_path = cache.join(format!(".upstream-build-{}.lock", project.pack_dir));
    let lock = host::open_own_file(&lock_path)?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;

    println!(
        "xtask: upstream {} {} from {}",
        project.name,
        checkout.rev,
        checkout.dir.display()
    );
    let work = &project.work;

    // The edits, decided before the build folder is kept or started afresh.
    let mut edited = Vec::new();
    for file in edited_files(project.edits) {
        let path = checkout.dir.join(file);
        let original = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let (text, outcomes) = edit_file_with(project.edits, file, &original);
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
    let kept = owned::is_marked(work, project.kind) && fs::read_to_string(&record_path).is_ok_and(|r| r == record);
    if !kept {
        if owned::is_marked(work, project.kind) {
            println!(
                "xtask: {} was built from another checkout or other edits; starting it afresh",
                work.display()
            );
        }
        if let Some(parent) = work.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        owned::fresh_dir(work, project.kind)?;
        fs::write(&record_path, &record).with_context(|| format!("writing {}", record_path.display()))?;
    }

    let inside = Path::new(project.source_inside);
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
    let configure = (project.configure)(&build_dir);
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
            &format!(
                "CMake could not configure upstream {}; see its messages above.",
                project.name
            ),
        )?;
        fs::write(&stamp, configure.join("\n")).with_context(|| format!("writing {}", stamp.display()))?;
    }
    let jobs = jobs
        .map(|j| j as usize)
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
        .to_string();
    let build_str = build_dir.display().to_string();
    let mut command = vec!["cmake", "--build", &build_str, "--parallel", &jobs, "--target"];
    command.extend(project.programs.iter().copied());
    sandbox::run_in_root_with(
        root,
        &command,
        &mounts,
        &format!(
            "Upstream {} did not build against this Dawn; its compiler messages are above. An edit \
             this command makes may no longer match upstream's source (see the `xtask: … edit` lines).",
            project.name
        ),
    )?;
    println!(
        "xtask: upstream's {} built ({:.0} s)",
        project.programs.join(", "),
        started.elapsed().as_secs_f64()
    );

    pack(root, project, checkout, &build_dir, &mounts)
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

/// One program to pack: its path inside the root and what `ldd` says of it there.
pub struct Linked<'a> {
    pub program: &'a str,
    pub ldd: &'a str,
}

/// What goes into the tarball, decided from `ldd` of each program and of Dawn's library (all as
/// seen inside the root): each program as `<dir>/<name>`, and as `<dir>/<soname>` every library
/// one needs that a bundle does not carry: upstream's own, from the build folder, and any system
/// library outside Dawn's closure (a bundle carries Dawn and everything Dawn needs, since
/// `backend-ops` links Dawn, and [`DRIVER_LIBRARIES`], the Vulkan loader among them). The C
/// library's loader is the bundle's. Every program must link
/// each library named by a prefix in `links` (the backends it was built with).
pub fn pack_layout(programs: &[Linked], dawn_ldd: &str, links: &[&str], dir: &str) -> Result<Vec<PackEntry>> {
    let mut entries = Vec::new();
    let mut libraries = Vec::new();
    let mut carried: Vec<String> = dawn_ldd.lines().filter_map(ldd_entry).map(|(s, _)| s).collect();
    // The bundle also carries the libraries Dawn and the driver open at run time (the Vulkan
    // loader among them).
    carried.extend(DRIVER_LIBRARIES.iter().map(|l| (*l).to_owned()));
    for linked in programs {
        let program = linked.program;
        let missing: Vec<&str> = linked
            .ldd
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
        let needed: Vec<(String, String)> = linked.ldd.lines().filter_map(ldd_entry).collect();
        for prefix in links {
            if !needed.iter().any(|(soname, _)| soname.starts_with(prefix)) {
                if prefix.starts_with("libwebgpu_dawn") {
                    bail!("{program} does not link Dawn's {prefix}: it was not built with the WebGPU backend");
                }
                bail!("{program} does not link {prefix}: it was not built with that backend");
            }
        }
        if let Some((_, dawn_path)) = needed.iter().find(|(soname, _)| soname.starts_with("libwebgpu_dawn")) {
            carried.push(file_name(dawn_path));
        }
        entries.push(PackEntry {
            from: program.to_owned(),
            name: format!("{dir}/{}", file_name(program)),
        });
        for (soname, path) in needed {
            let name = format!("{dir}/{soname}");
            if !libraries.iter().any(|e: &PackEntry| e.name == name) {
                libraries.push(PackEntry { from: path, name });
            }
        }
    }
    libraries.retain(|e| {
        let soname = &e.name[dir.len() + 1..];
        !soname.starts_with("ld-linux") && !carried.iter().any(|c| c == soname)
    });
    entries.extend(libraries);
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

/// Packs the programs and their libraries as `<out>/<tarball>` unless that tarball already holds
/// exactly these files, and records it as the project's latest.
fn pack(root: &Path, project: &Project, checkout: &Checkout, build_dir: &Path, mounts: &[Mount]) -> Result<PathBuf> {
    let fix = "ldd could not read upstream's program; re-run `cargo xtask upstream`.";
    let programs: Vec<String> = project
        .programs
        .iter()
        .map(|p| build_dir.join("bin").join(p).display().to_string())
        .collect();
    let mut ldds = Vec::new();
    for program in &programs {
        ldds.push(sandbox::output_in_root_with(root, &["ldd", program], mounts, fix)?);
    }
    let dawn_path = ldds
        .iter()
        .flat_map(|ldd| ldd.lines().filter_map(ldd_entry))
        .find(|(soname, _)| soname.starts_with("libwebgpu_dawn"))
        .map(|(_, path)| path)
        .unwrap_or_default();
    let dawn_ldd = if dawn_path.is_empty() {
        String::new()
    } else {
        sandbox::output_in_root_with(root, &["ldd", &dawn_path], mounts, fix)?
    };
    let linked: Vec<Linked> = programs
        .iter()
        .zip(&ldds)
        .map(|(program, ldd)| Linked { program, ldd })
        .collect();
    let entries = pack_layout(&linked, &dawn_ldd, project.links, project.pack_dir)?;
    let work = &project.work;

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
    let name = (project.tarball_name)(&checkout.rev);
    let tarball = out.join(&name);
    let packed = work.join("packed");
    let unchanged = tarball.is_file()
        && fs::read_to_string(&packed).is_ok_and(|p| p == format!("{}\n{fingerprint}", tarball.display()));
    if !unchanged {
        let stage = work.join("pack");
        if stage.exists() {
            fs::remove_dir_all(&stage).with_context(|| format!("removing {}", stage.display()))?;
        }
        fs::create_dir_all(stage.join(project.pack_dir)).with_context(|| format!("creating {}", stage.display()))?;
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
        sandbox::run_in_root_with(root, &cp, mounts, "Copying upstream's programs and libraries failed.")?;

        let partial = out.join(format!(".{name}.partial"));
        let mut tar = Command::new("tar");
        tar.args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner", "-cJf"])
            .arg(&partial)
            .arg("-C")
            .arg(&stage)
            .arg(project.pack_dir);
        host::run_checked(
            &mut tar,
            "Packing upstream's programs failed (tar with xz on this machine).",
        )?;
        fs::rename(&partial, &tarball).with_context(|| format!("writing {}", tarball.display()))?;
        fs::write(&packed, format!("{}\n{fingerprint}", tarball.display()))
            .with_context(|| format!("writing {}", packed.display()))?;
    }
    write_if_changed(&out.join(project.latest), &format!("{name}\n"))?;
    let size = fs::metadata(&tarball).map(|m| m.len()).unwrap_or(0);
    println!(
        "xtask: {} upstream's {} ({} {}) with {} libraries {} {} ({:.1} MB)",
        if unchanged { "already packed" } else { "packed" },
        project.programs.join(", "),
        project.name,
        checkout.rev,
        entries.len() - project.programs.len(),
        if unchanged { "in" } else { "into" },
        tarball.display(),
        size as f64 / 1e6
    );
    println!("xtask: `cargo xtask bundle` now puts it into the bundle");
    Ok(tarball)
}

/// The tarball named by `latest` in [`out_dir`], if it is still there and is named
/// `<prefix>…tar.xz`.
pub fn latest_of(latest: &str, prefix: &str) -> Option<PathBuf> {
    let out = out_dir();
    let name = fs::read_to_string(out.join(latest)).ok()?;
    let name = name.trim();
    let ok = name.starts_with(prefix) && name.ends_with(".tar.xz") && !name.contains('/');
    let path = out.join(name);
    (ok && path.is_file()).then_some(path)
}

/// The tarball `cargo xtask upstream --ggml` packed last, if it is still there.
pub fn latest_tarball() -> Option<PathBuf> {
    latest_of("latest", "ggml-")
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
        for file in edited_files(EDITS) {
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
    fn ggml_and_llama_cpp_build_in_folders_of_their_own() {
        let (ggml, llama) = (ggml_project(), llama::project());
        assert_eq!(ggml.work, builds_dir().join("ggml"));
        assert_eq!(llama.work, builds_dir().join("llama"));
        // Starting one afresh deletes only its own folder, and a marker of one kind does not let
        // the other's be deleted.
        assert!(!ggml.work.starts_with(&llama.work) && !llama.work.starts_with(&ggml.work));
        assert_ne!(ggml.kind, llama.kind);
        assert_ne!(ggml.latest, llama.latest);
        assert_ne!(ggml.pack_dir, llama.pack_dir);
        assert_ne!(ggml.source_inside, llama.source_inside);
    }

    #[test]
    fn a_folder_inside_another_repository_has_no_revision_of_its_own() {
        let tmp = TempDir::new("upstream-rev");
        let git = |dir: &Path, args: &[&str]| {
            Command::new("git")
                .arg("-C")
                .arg(dir)
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "-c",
                    "commit.gpgsign=false",
                ])
                .args(args)
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        };
        let repo = tmp.path().join("repo");
        fs::create_dir_all(repo.join("inner")).unwrap();
        fs::write(repo.join("inner/file"), "one").unwrap();
        if !git(&repo, &["init", "-q"]) {
            eprintln!("no git on this machine; skipped");
            return;
        }
        assert!(git(&repo, &["add", "."]) && git(&repo, &["commit", "-qm", "one"]));
        let rev = revision(&repo).unwrap();
        assert!(rev.len() == 7 && is_rev(&rev), "{rev}");
        assert_eq!(revision(&repo.join("inner")), None);
        fs::write(repo.join("inner/file"), "two").unwrap();
        assert_eq!(revision(&repo).unwrap(), format!("{rev}-dirty"));
        assert_eq!(revision(tmp.path()), None);
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
        let ldd = program_ldd();
        let linked = [Linked {
            program: &program,
            ldd: &ldd,
        }];
        let entries = pack_layout(&linked, DAWN_LDD, &["libwebgpu_dawn"], PACK_DIR).unwrap();
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
        let layout = |ldd: &str| {
            pack_layout(
                &[Linked { program: &program, ldd }],
                DAWN_LDD,
                &["libwebgpu_dawn"],
                PACK_DIR,
            )
        };
        let err = layout(&broken).unwrap_err().to_string();
        assert!(err.contains("libggml-cpu.so.0 => not found"), "{err}");

        let no_dawn: String = program_ldd()
            .lines()
            .filter(|l| !l.contains("webgpu_dawn"))
            .map(|l| format!("{l}\n"))
            .collect();
        let err = layout(&no_dawn).unwrap_err().to_string();
        assert!(err.contains("does not link Dawn"), "{err}");
    }
}
