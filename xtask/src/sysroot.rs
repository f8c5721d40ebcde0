//! The Debian sid root: where it lives, what it holds, and how it is made or brought up to date.
//!
//! A root is complete only once the stamp file is written, as the very last step; a root without
//! the stamp was left half-made by an interrupted run and is rebuilt from scratch, provided xtask
//! made its folder (see [`crate::owned`]): any other folder is refused, never deleted.
//!
//! Package signatures are always verified: debootstrap is given the host's Debian keyring and
//! forced to check, and apt in the root is told on its command line to refuse unsigned or insecure
//! repositories. Only the Release files' `Valid-Until` date is not checked.

use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::host;
use crate::owned;
use crate::sandbox;

/// Debian's Dawn, pinned: the version the project was verified against.
pub const DAWN_VERSION: &str = "0.0~git20260909.1a75cb7f-1";
/// The Dawn packages installed at exactly [`DAWN_VERSION`].
const DAWN_PACKAGES: &[&str] = &["libwebgpu-dawn-dev", "libwebgpu-dawn0", "dawn-tools"];

/// Everything else the root holds, installed by debootstrap in one go.
const PACKAGES: &[&str] = &[
    // Vulkan on the CPU (lavapipe) and diagnosis.
    "mesa-vulkan-drivers",
    "libvulkan1",
    "vulkan-tools",
    // What the NVIDIA Vulkan driver loads at run time; `cargo xtask bundle` ships them.
    "libgl1",
    "libgles2",
    "libegl1",
    "libopengl0",
    "libglx0",
    "libxext6",
    // Building Rust crates with C parts and bindgen.
    "ca-certificates",
    "gcc",
    "g++",
    "libc6-dev",
    "libclang-dev",
    "pkg-config",
    "cmake",
    "ninja-build",
    "python3",
    "git",
    // What a from-source Dawn build takes from Debian instead of fetching it.
    "libabsl-dev",
    "spirv-headers",
    "spirv-tools-dev",
    "spirv-tools-headers",
    "libvulkan-dev",
    "vulkan-utility-libraries-dev",
    "python3-jinja2",
    "python3-markupsafe",
    "libx11-dev",
    "libx11-xcb-dev",
    "libgbm-dev",
    // ggml-vulkan's shader compiler, for `cargo xtask upstream --llama` (its Vulkan headers and
    // SPIR-V headers are above).
    "glslc",
];

/// Written last: its presence means the root is complete; its content says what it was made from.
const STAMP: &str = "etc/dawn-compute/provisioned";
/// Package versions installed in the root, one `name<TAB>version` a line.
pub const MANIFEST: &str = "etc/dawn-compute/manifest.tsv";
/// apt inside the root must accept sid's Release files past their `Valid-Until` date.
const APT_VALID_UNTIL_CONF: &str = "etc/apt/apt.conf.d/90dawn-compute-valid-until";

/// The cache folder: `DAWN_COMPUTE_CACHE`, else `/var/cache/dawn-compute`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("DAWN_COMPUTE_CACHE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/dawn-compute"))
}

/// The root: `DAWN_COMPUTE_SYSROOT`, else `<cache>/sid-root`.
pub fn root_dir() -> PathBuf {
    std::env::var_os("DAWN_COMPUTE_SYSROOT")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("sid-root"))
}

/// What a root is made from; a change here updates an existing root.
fn spec() -> String {
    spec_of(DAWN_VERSION, PACKAGES.iter().copied())
}

fn spec_of<'a>(dawn: &str, packages: impl IntoIterator<Item = &'a str>) -> String {
    format!(
        "dawn={dawn}\npackages={}\n",
        packages.into_iter().collect::<Vec<_>>().join(",")
    )
}

/// The Dawn version and package list a stamp names, if it is one.
fn parse_spec(stamp: &str) -> Option<(&str, Vec<&str>)> {
    let mut lines = stamp.lines();
    let dawn = lines.next()?.strip_prefix("dawn=")?;
    let packages = lines.next()?.strip_prefix("packages=")?;
    let packages = packages.split(',').filter(|p| !p.is_empty()).collect();
    Some((dawn, packages))
}

/// Whether a root whose stamp says `made_from` already holds everything `wanted` asks for: the
/// same Dawn and every package of its list. A root made from a longer list serves a shorter one
/// as it is (apt never removes what leaves the list), so checkouts whose lists differ only by
/// additions share one root without updating it back and forth.
fn covers(made_from: &str, wanted: &str) -> bool {
    match (parse_spec(made_from), parse_spec(wanted)) {
        (Some((dawn, have)), Some((want_dawn, want))) => dawn == want_dawn && want.iter().all(|p| have.contains(p)),
        _ => false,
    }
}

/// The stamp written after updating a root made from `made_from` to `wanted`: `wanted`'s list,
/// then the packages only the older list had, which stay installed.
fn updated_spec(made_from: Option<&str>, wanted: &str) -> String {
    let Some((dawn, mut packages)) = parse_spec(wanted) else {
        return wanted.to_owned();
    };
    if let Some((_, older)) = made_from.and_then(parse_spec) {
        for package in older {
            if !packages.contains(&package) {
                packages.push(package);
            }
        }
    }
    spec_of(dawn, packages)
}

/// The root, if it is complete; otherwise an error saying how to make it.
pub fn existing() -> Result<PathBuf> {
    let root = root_dir();
    if !root.join(STAMP).is_file() {
        bail!(
            "the sid root at {} is not provisioned; run `cargo xtask env` first",
            root.display()
        );
    }
    Ok(root)
}

/// Refuses a root path that is relative, `/` or goes up with `..`: the root is created, chrooted
/// into and, when half-made, deleted.
pub fn check_root_path(root: &Path) -> Result<()> {
    let ups = root.components().any(|c| c == Component::ParentDir);
    if !root.is_absolute() || root.parent().is_none() || ups {
        bail!(
            "the sid root's path `{}` (DAWN_COMPUTE_SYSROOT or DAWN_COMPUTE_CACHE) must be absolute, \
             must not be `/` and must not contain `..`",
            root.display()
        );
    }
    Ok(())
}

/// Creates the root, or brings an existing one up to date. Idempotent; serialised by a lock.
pub fn provision() -> Result<PathBuf> {
    host::require_root("env")?;
    let root = root_dir();
    check_root_path(&root)?;
    let stamp = root.join(STAMP);
    if !stamp.is_file() {
        // A folder that xtask would refuse to replace is refused before anything is written
        // beside it (checked again under the lock).
        owned::check_fresh(&root, owned::Kind::SidRoot)?;
    }
    let cache = root.parent().map(Path::to_path_buf).unwrap_or_else(cache_dir);
    fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    let lock_path = cache.join(".sid-root.lock");
    let lock = host::open_own_file(&lock_path)?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;

    let made_from = fs::read_to_string(&stamp).ok();
    if made_from.is_some() && fs::symlink_metadata(root.join(owned::MARKER)).is_err() {
        // Only xtask writes the stamp: a root made before xtask marked its folders is xtask's.
        owned::mark(&root, owned::Kind::SidRoot)?;
    }
    if made_from.as_deref().is_some_and(|m| covers(m, &spec())) {
        eprintln!("xtask: sid root at {} is up to date", root.display());
        return Ok(root);
    }
    if made_from.is_none() {
        owned::check_fresh(&root, owned::Kind::SidRoot)?;
    }
    let log = host::Log::create(&cache.join("env.log"))?;
    eprintln!(
        "xtask: the long output of debootstrap and apt goes to {}; it is shown only when a step fails",
        log.path().display()
    );
    if made_from.is_some() {
        eprintln!(
            "xtask: sid root at {} was made from another package list; updating it",
            root.display()
        );
        let mirror = host::debian_mirror();
        log.phase(&format!("checking that {mirror} answers"), || {
            host::check_reachable(&mirror)
        })?;
        configure_apt(&root)?;
        log.phase("apt: installing the package list", || {
            apt_install(
                &root,
                &PACKAGES.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>(),
                &log,
            )
        })?;
    } else {
        bootstrap(&root, &log)?;
    }
    install_dawn(&root, &log)?;
    write_manifest(&root, &log)?;
    let stamp_text = updated_spec(made_from.as_deref(), &spec());
    fs::write(&stamp, stamp_text).with_context(|| format!("writing {}", stamp.display()))?;
    eprintln!("xtask: sid root ready at {}", root.display());
    Ok(root)
}

/// Refuses to go on if anything is mounted inside `root`, which is about to be deleted.
fn refuse_if_mounted(root: &Path) -> Result<()> {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let prefix = format!("{}/", root.display());
    if let Some(line) = mounts
        .lines()
        .find(|l| l.split(' ').nth(1).is_some_and(|m| m.starts_with(&prefix)))
    {
        bail!(
            "refusing to delete {}: something is mounted inside it ({line}); unmount it first",
            root.display()
        );
    }
    Ok(())
}

/// debootstrap's arguments: the keyring is always given and signature checking always forced, so
/// a missing keyring or `gpgv` is an error rather than an unverified root.
fn debootstrap_args(keyring: &Path, root: &Path, mirror: &str) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "--variant=minbase".into(),
        "--force-check-gpg".into(),
        format!("--keyring={}", keyring.display()).into(),
        format!("--include={}", PACKAGES.join(",")).into(),
        "sid".into(),
    ];
    args.push(root.into());
    args.push(mirror.into());
    args
}

/// Makes a fresh root with debootstrap, its packages verified against the host's Debian keyring.
fn bootstrap(root: &Path, log: &host::Log) -> Result<()> {
    let keyring = log.phase("host: debootstrap and Debian's archive keyring", || {
        host::ensure_host_tool("debootstrap", "debootstrap", log)?;
        host::ensure_debian_keyring(log)
    })?;
    let mirror = host::debian_mirror();
    log.phase(&format!("checking that {mirror} answers"), || {
        host::check_reachable(&mirror)
    })?;
    if fs::symlink_metadata(root).is_ok() {
        if owned::is_marked(root, owned::Kind::SidRoot) {
            eprintln!(
                "xtask: {} holds an incomplete root (an interrupted run?); removing it and starting again",
                root.display()
            );
        }
        refuse_if_mounted(root)?;
    }
    // Deletes the folder only if xtask made it; takes over an empty one; refuses anything else.
    owned::fresh_dir(root, owned::Kind::SidRoot)?;
    log.phase(
        &format!("debootstrap: Debian sid at {} (about 2 GB)", root.display()),
        || {
            log.run(
                Command::new("debootstrap").args(debootstrap_args(&keyring, root, &mirror)),
                "If it says a signature is invalid, update the host's `debian-archive-keyring` \
                 package; if a package failed to download, check the network or set \
                 DAWN_COMPUTE_MIRROR. Then re-run `cargo xtask env` (the half-made root is detected \
                 and rebuilt).",
            )
        },
    )?;
    configure_apt(root)
}

/// The root's apt configuration written by xtask: only the Release files' expiry is relaxed.
const APT_CONF: &str = "Acquire::Check-Valid-Until \"false\";\n";

/// apt inside the root: signatures stay verified; only the Release files' expiry check is relaxed.
fn configure_apt(root: &Path) -> Result<()> {
    eprintln!(
        "xtask: note: apt in the sid root ignores the Release files' `Valid-Until` date (the mirror's \
         sid copy may be past it); package signatures are still verified"
    );
    let conf = root.join(APT_VALID_UNTIL_CONF);
    fs::write(&conf, APT_CONF).with_context(|| format!("writing {}", conf.display()))
}

/// Options every apt-get run in the root gets. Given on the command line, they override whatever
/// the root's `apt.conf.d` says: unsigned, insecure or weakly signed repositories are refused.
const APT_SECURE_OPTIONS: &[&str] = &[
    "-o",
    "APT::Get::AllowUnauthenticated=false",
    "-o",
    "Acquire::AllowInsecureRepositories=false",
    "-o",
    "Acquire::AllowDowngradeToInsecureRepositories=false",
    "-o",
    "Acquire::AllowWeakRepositories=false",
];

/// An `apt-get` command line with [`APT_SECURE_OPTIONS`].
fn apt_get<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut command = vec!["apt-get"];
    command.extend(APT_SECURE_OPTIONS);
    command.extend(args);
    command
}

/// The first option in an apt sources file that switches signature checking off, if any
/// (`[trusted=yes]`, `allow-insecure=yes` and the like, in the one-line or the deb822 format).
fn insecure_source_option(text: &str) -> Option<String> {
    const OPTIONS: &[&str] = &["trusted", "allow-insecure", "allow-weak", "allow-downgrade-to-insecure"];
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        // deb822: `Trusted: yes`.
        if let Some(pair) = line.split_once(':').filter(|(k, _)| !k.contains([' ', '\t', '['])) {
            pairs.push(pair);
        }
        // One-line: `deb [trusted=yes arch=amd64] URI suite component`.
        if let Some((options, _)) = line.split_once('[').and_then(|(_, rest)| rest.split_once(']')) {
            pairs.extend(options.split_whitespace().filter_map(|w| w.split_once('=')));
        }
        for (name, value) in pairs {
            let name = name.trim().to_ascii_lowercase();
            let value = value.trim().to_ascii_lowercase();
            if OPTIONS.contains(&name.as_str()) && value != "no" && value != "false" {
                return Some(format!("{name}={value}"));
            }
        }
    }
    None
}

/// Fails if one of the root's apt sources switches signature checking off.
fn check_apt_sources(root: &Path) -> Result<()> {
    let mut files = vec![root.join("etc/apt/sources.list")];
    if let Ok(dir) = fs::read_dir(root.join("etc/apt/sources.list.d")) {
        files.extend(dir.flatten().map(|e| e.path()));
    }
    for file in files {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        if let Some(option) = insecure_source_option(&text) {
            bail!(
                "{} says `{option}`, which would let apt install packages whose signatures are not \
                 verified; `cargo xtask env` does not allow that. Remove the option, then re-run",
                file.display()
            );
        }
    }
    Ok(())
}

/// Runs apt-get inside the root (after `apt-get update`), output to the log.
fn apt_install(root: &Path, packages: &[String], log: &host::Log) -> Result<()> {
    let fix = "Fix the cause apt names (network, mirror, a package that no longer exists), then \
               re-run `cargo xtask env`.";
    check_apt_sources(root)?;
    let apt = |args: &[&str]| -> Result<()> {
        let mut command = sandbox::command_in_root(root, &apt_get(args))?;
        log.run(command.env("DEBIAN_FRONTEND", "noninteractive"), fix)
    };
    apt(&["update", "-q"])?;
    let mut install = vec!["install", "-y", "-q", "--no-install-recommends"];
    install.extend(packages.iter().map(String::as_str));
    apt(&install)?;
    apt(&["clean"])
}

/// Installs Debian's Dawn at the pinned version, or the newest with a loud warning if the mirror
/// no longer has it.
fn install_dawn(root: &Path, log: &host::Log) -> Result<()> {
    if installed_version(root, DAWN_PACKAGES[0])?.as_deref() == Some(DAWN_VERSION) {
        return Ok(());
    }
    let fix = "Check the mirror, then re-run `cargo xtask env`.";
    let available = log.phase(&format!("apt: looking for Dawn {DAWN_VERSION} on the mirror"), || {
        check_apt_sources(root)?;
        log.run(&mut sandbox::command_in_root(root, &apt_get(&["update", "-q"]))?, fix)?;
        sandbox::output_in_root(root, &["apt-cache", "madison", DAWN_PACKAGES[0]], fix)
    })?;
    let pinned = available
        .lines()
        .any(|l| l.split('|').nth(1).map(str::trim) == Some(DAWN_VERSION));
    let packages: Vec<String> = if pinned {
        DAWN_PACKAGES.iter().map(|p| format!("{p}={DAWN_VERSION}")).collect()
    } else {
        eprintln!("\n{}", "!".repeat(78));
        eprintln!(
            "WARNING: the mirror no longer has Dawn {DAWN_VERSION}, the version this project was \
             verified with.\nWARNING: installing the newest Dawn instead; bindings and behaviour may differ."
        );
        eprintln!("{}\n", "!".repeat(78));
        DAWN_PACKAGES.iter().map(|p| (*p).to_owned()).collect()
    };
    log.phase(&format!("apt: {}", packages.join(" ")), || {
        apt_install(root, &packages, log)
    })
}

/// The installed version of a package in the root, if any.
fn installed_version(root: &Path, package: &str) -> Result<Option<String>> {
    let status = root.join("var/lib/dpkg/status");
    let text = fs::read_to_string(&status).with_context(|| format!("reading {}", status.display()))?;
    for entry in text.split("\n\n") {
        let field = |name: &str| {
            entry
                .lines()
                .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
        };
        if field("Package:").as_deref() == Some(package) && field("Status:").is_some_and(|s| s.ends_with(" installed"))
        {
            return Ok(field("Version:"));
        }
    }
    Ok(None)
}

/// Records every installed package and its version, and prints the ones that matter most.
fn write_manifest(root: &Path, log: &host::Log) -> Result<()> {
    let manifest = root.join(MANIFEST);
    let listing = log.phase(&format!("package manifest: {}", manifest.display()), || {
        let listing = sandbox::output_in_root(
            root,
            &["dpkg-query", "-W", "-f", "${Package}\t${Version}\n"],
            "The root's package database looks damaged; delete the root and re-run `cargo xtask env`.",
        )?;
        if let Some(dir) = manifest.parent() {
            fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        fs::write(&manifest, &listing).with_context(|| format!("writing {}", manifest.display()))?;
        Ok(listing)
    })?;
    for line in listing.lines() {
        let name = line.split('\t').next().unwrap_or_default();
        if DAWN_PACKAGES.contains(&name) || ["mesa-vulkan-drivers", "libclang-dev", "libc6"].contains(&name) {
            eprintln!("xtask:   {}", line.replace('\t', " "));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::owned::TempDir;

    #[test]
    fn a_root_made_from_a_longer_list_serves_a_shorter_one() {
        let older = spec_of("1", ["gcc", "cmake"]);
        let longer = spec_of("1", ["gcc", "cmake", "glslc"]);
        assert!(covers(&longer, &older));
        assert!(covers(&older, &older));
        assert!(!covers(&older, &longer), "a new package updates the root");
        assert!(
            !covers(&spec_of("2", ["gcc", "cmake", "glslc"]), &older),
            "another Dawn updates it"
        );
        assert!(!covers("not a stamp", &older));
        assert!(!covers(&longer, "not a stamp"));
        assert!(covers(&spec(), &spec()));
    }

    #[test]
    fn an_update_keeps_the_packages_only_the_older_list_had_in_the_stamp() {
        let older = spec_of("1", ["gcc", "libold"]);
        let wanted = spec_of("2", ["gcc", "glslc"]);
        let written = updated_spec(Some(&older), &wanted);
        assert_eq!(written, spec_of("2", ["gcc", "glslc", "libold"]));
        assert!(covers(&written, &wanted) && covers(&written, &older.replace("dawn=1", "dawn=2")));
        assert_eq!(updated_spec(None, &wanted), wanted);
        assert_eq!(updated_spec(Some("garbage"), &wanted), wanted);
    }

    #[test]
    fn the_root_has_what_ggml_vulkan_needs() {
        for package in ["glslc", "libvulkan-dev", "spirv-headers"] {
            assert!(PACKAGES.contains(&package), "{package}");
        }
    }

    /// What would let debootstrap or apt install packages without verifying their signatures.
    const INSECURE: &[&str] = &[
        "--no-check-gpg",
        "--allow-unauthenticated",
        "--allow-insecure-repositories",
        "--allow-downgrades",
        "trusted=yes",
        "AllowUnauthenticated=true",
        "AllowUnauthenticated=1",
        "AllowInsecureRepositories=true",
        "AllowDowngradeToInsecureRepositories=true",
        "AllowWeakRepositories=true",
    ];

    fn assert_secure(args: &[String]) {
        for arg in args {
            for bad in INSECURE {
                assert!(!arg.contains(bad), "`{arg}` contains `{bad}`");
            }
        }
    }

    #[test]
    fn debootstrap_always_gets_the_keyring_and_forced_checking() {
        let keyring = Path::new(host::DEBIAN_KEYRING);
        let args: Vec<String> = debootstrap_args(keyring, Path::new("/var/cache/x/sid-root"), "http://m/debian")
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.contains(&"--keyring=/usr/share/keyrings/debian-archive-keyring.gpg".to_owned()));
        assert!(args.contains(&"--force-check-gpg".to_owned()));
        assert_secure(&args);
        assert_eq!(
            args[args.len() - 3..],
            ["sid", "/var/cache/x/sid-root", "http://m/debian"]
        );
    }

    #[test]
    fn apt_in_the_root_is_told_to_refuse_unverified_packages() {
        let args: Vec<String> = apt_get(&["install", "-y", "dawn-tools"])
            .into_iter()
            .map(str::to_owned)
            .collect();
        assert_eq!(args[0], "apt-get");
        assert_eq!(args[args.len() - 3..], ["install", "-y", "dawn-tools"]);
        assert_secure(&args);
        for forced in [
            "APT::Get::AllowUnauthenticated=false",
            "Acquire::AllowInsecureRepositories=false",
            "Acquire::AllowDowngradeToInsecureRepositories=false",
        ] {
            let at = args.iter().position(|a| a == forced).expect(forced);
            assert_eq!(args[at - 1], "-o");
        }
    }

    #[test]
    fn only_the_valid_until_check_is_relaxed() {
        let settings: Vec<&str> = APT_CONF.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(settings, ["Acquire::Check-Valid-Until \"false\";"]);
    }

    #[test]
    fn insecure_apt_sources_are_found() {
        assert_eq!(
            insecure_source_option("deb http://deb.debian.org/debian sid main\n"),
            None
        );
        assert_eq!(
            insecure_source_option("deb [arch=amd64 trusted=yes] http://m/debian sid main"),
            Some("trusted=yes".into())
        );
        assert_eq!(
            insecure_source_option("Types: deb\nURIs: http://m/debian\nSuites: sid\nTrusted: yes\n"),
            Some("trusted=yes".into())
        );
        assert_eq!(
            insecure_source_option("deb [ allow-insecure=yes ] http://m/debian sid main"),
            Some("allow-insecure=yes".into())
        );
        assert_eq!(
            insecure_source_option("deb [trusted=no] http://m/debian sid main"),
            None
        );
        assert_eq!(
            insecure_source_option("# deb [trusted=yes] http://m/debian sid main"),
            None
        );
    }

    #[test]
    fn a_root_whose_sources_trust_everything_is_refused() {
        let tmp = TempDir::new("sources");
        let root = tmp.path();
        fs::create_dir_all(root.join("etc/apt/sources.list.d")).unwrap();
        fs::write(
            root.join("etc/apt/sources.list"),
            "deb http://deb.debian.org/debian sid main\n",
        )
        .unwrap();
        check_apt_sources(root).unwrap();
        fs::write(
            root.join("etc/apt/sources.list.d/extra.list"),
            "deb [trusted=yes] http://evil.example/debian sid main\n",
        )
        .unwrap();
        let err = check_apt_sources(root).unwrap_err().to_string();
        assert!(err.contains("extra.list") && err.contains("trusted=yes"), "{err}");
    }

    #[test]
    fn dangerous_root_paths_are_refused() {
        for bad in ["/", "relative/root", "/var/cache/../../home", ""] {
            assert!(check_root_path(Path::new(bad)).is_err(), "{bad:?} accepted");
        }
        check_root_path(Path::new("/var/cache/dawn-compute/sid-root")).unwrap();
    }

    #[test]
    fn an_unmarked_half_made_root_is_not_deleted() {
        // A folder without the stamp and without xtask's marker: `bootstrap` would call this.
        let tmp = TempDir::new("root");
        let root = tmp.path().join("sid-root");
        fs::create_dir_all(root.join("home/user")).unwrap();
        fs::write(root.join("home/user/thesis.tex"), "years of work").unwrap();
        let err = owned::fresh_dir(&root, owned::Kind::SidRoot).unwrap_err().to_string();
        assert!(
            err.contains("refusing") && err.contains("DAWN_COMPUTE_SYSROOT"),
            "{err}"
        );
        assert!(root.join("home/user/thesis.tex").is_file());
    }
}
