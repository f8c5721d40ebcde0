//! Facts about the host machine and small process helpers.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// The mirror used when the host's apt sources name none.
const FALLBACK_MIRROR: &str = "http://deb.debian.org/debian";

/// Fails unless this process runs as root: debootstrap, chroot and mount need it.
pub fn require_root(what: &str) -> Result<()> {
    let uid = std::fs::metadata("/proc/self").context("reading /proc/self")?.uid();
    if uid != 0 {
        bail!(
            "`cargo xtask {what}` must run as root (it uses debootstrap, chroot and mount namespaces); \
             re-run it as root, for example `sudo -E cargo xtask {what}`"
        );
    }
    Ok(())
}

/// Finds an executable on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Runs a command with inherited stdio and fails with `fix` when it exits non-zero.
pub fn run_checked(command: &mut Command, fix: &str) -> Result<()> {
    let shown = describe(command);
    let status = command.status().with_context(|| format!("could not start `{shown}`"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status}); its own messages are above. {fix}");
    }
    Ok(())
}

/// Runs a command and returns its standard output, failing with `fix` when it exits non-zero.
pub fn output_checked(command: &mut Command, fix: &str) -> Result<String> {
    let shown = describe(command);
    let out = command.output().with_context(|| format!("could not start `{shown}`"))?;
    if !out.status.success() {
        bail!(
            "`{shown}` failed ({}):\n{}{}\n{fix}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(OsStr::to_string_lossy)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Opens, creating it when missing, a file of xtask's own (the lock, the log) without following
/// a symbolic link and without truncating it. Refuses anything but a regular file with a single
/// link owned by this user, so a link planted at `path` cannot make xtask, running as root, write
/// to or lock another file.
pub fn open_own_file(path: &Path) -> Result<File> {
    let opened = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(err) if err.raw_os_error() == Some(libc::ELOOP) => bail!(
            "refusing to open {}: it is a symbolic link, and xtask's own files never are (something \
             else put it there). Remove the link, then re-run",
            path.display()
        ),
        Err(err) => return Err(err).with_context(|| format!("opening {}", path.display())),
    };
    let meta = file.metadata().with_context(|| format!("reading {}", path.display()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let problem = if !meta.is_file() {
        Some("it is not a regular file".to_owned())
    } else if meta.nlink() != 1 {
        Some(format!(
            "it has {} hard links, so it is also another file",
            meta.nlink()
        ))
    } else if meta.uid() != euid {
        Some(format!("it belongs to user {}, not to this one ({euid})", meta.uid()))
    } else {
        None
    };
    if let Some(problem) = problem {
        bail!(
            "refusing to use {}: {problem}, and xtask's own files never are (something else put it \
             there). Remove it, then re-run",
            path.display()
        );
    }
    Ok(file)
}

/// Where the long output of the commands `cargo xtask env` runs goes (debootstrap's, apt's),
/// shown only when one fails; and the phases, one line each with its time.
#[derive(Debug)]
pub struct Log {
    path: PathBuf,
    file: File,
}

/// How many of a failed command's last lines of output its error shows.
const TAIL_LINES: usize = 40;

impl Log {
    /// Starts a new log at `path`, emptying the previous run's.
    pub fn create(path: &Path) -> Result<Log> {
        let file = open_own_file(path)?;
        file.set_len(0)
            .with_context(|| format!("emptying {}", path.display()))?;
        Ok(Log {
            path: path.to_owned(),
            file,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs one phase: prints its name, then how long it took, on one line.
    pub fn phase<T>(&self, what: &str, body: impl FnOnce() -> Result<T>) -> Result<T> {
        eprint!("xtask: {what} ... ");
        let _ = std::io::stderr().flush();
        let _ = writeln!(&self.file, "==== {what}");
        let start = Instant::now();
        let result = body();
        let secs = start.elapsed().as_secs_f64();
        match &result {
            Ok(_) => eprintln!("{secs:.1} s"),
            Err(_) => eprintln!("failed after {secs:.1} s"),
        }
        result
    }

    /// Runs a command with its output going to the log; when it exits non-zero, fails with its
    /// last lines of output, where the whole of it is, and `fix`.
    pub fn run(&self, command: &mut Command, fix: &str) -> Result<()> {
        let shown = describe(command);
        let _ = writeln!(&self.file, "== {shown}");
        let start = self
            .file
            .metadata()
            .with_context(|| format!("reading {}", self.path.display()))?
            .len();
        let out = self
            .file
            .try_clone()
            .with_context(|| format!("opening {}", self.path.display()))?;
        let err = out
            .try_clone()
            .with_context(|| format!("opening {}", self.path.display()))?;
        let status = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .status()
            .with_context(|| format!("could not start `{shown}`"))?;
        if !status.success() {
            let end = self.file.metadata().map(|m| m.len()).unwrap_or(start);
            let mut bytes = vec![0; usize::try_from(end.saturating_sub(start)).unwrap_or(0)];
            let read = self.file.read_at(&mut bytes, start).unwrap_or(0);
            bytes.truncate(read);
            bail!(
                "`{shown}` failed ({status}); its last lines:\n{}\nIts whole output is in {}. {fix}",
                tail(&String::from_utf8_lossy(&bytes), TAIL_LINES),
                self.path.display()
            );
        }
        Ok(())
    }
}

/// The last `n` lines of `text`, each indented.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Installs a host package with apt when `binary` is missing (debootstrap, for instance).
pub fn ensure_host_tool(binary: &str, package: &str, log: &Log) -> Result<()> {
    if which(binary).is_some() || Path::new("/usr/sbin").join(binary).is_file() {
        return Ok(());
    }
    install_host_package(package, &format!("`{binary}` is missing"), log)
}

/// Debian's archive keyring on the host: what debootstrap checks the sid root's packages against.
pub const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// The host's Debian archive keyring, installed with apt (`debian-archive-keyring`) when missing.
pub fn ensure_debian_keyring(log: &Log) -> Result<PathBuf> {
    let keyring = Path::new(DEBIAN_KEYRING);
    if !keyring.is_file() {
        install_host_package(
            "debian-archive-keyring",
            &format!("Debian's archive keyring ({DEBIAN_KEYRING}) is missing"),
            log,
        )?;
    }
    require_keyring(keyring)
}

/// Fails unless `keyring` is a non-empty file: the sid root is never built unverified.
pub fn require_keyring(keyring: &Path) -> Result<PathBuf> {
    if !std::fs::metadata(keyring).is_ok_and(|m| m.is_file() && m.len() > 0) {
        bail!(
            "Debian's archive keyring {} is missing or empty: without it the packages of the sid root \
             cannot be verified, and `cargo xtask env` does not build an unverified root. Install the \
             host's `debian-archive-keyring` package (`apt-get install debian-archive-keyring`), then \
             re-run `cargo xtask env`",
            keyring.display()
        );
    }
    Ok(keyring.to_owned())
}

fn install_host_package(package: &str, why: &str, log: &Log) -> Result<()> {
    if which("apt-get").is_none() {
        bail!(
            "{why} and this host has no `apt-get` to install it: `cargo xtask env` expects a Debian or \
             Ubuntu host. Install `{package}` with your package manager, or run the project in a Debian \
             container"
        );
    }
    eprint!("(installing `{package}` on the host with apt-get) ");
    let fix = "Fix the host's apt sources or network, then re-run `cargo xtask env`.";
    log.run(Command::new("apt-get").args(["update", "-q"]), fix)?;
    log.run(
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends", package])
            .env("DEBIAN_FRONTEND", "noninteractive"),
        fix,
    )
}

/// The Debian mirror: `DAWN_COMPUTE_MIRROR`, else the first Debian archive in the host's apt
/// sources (so a host behind a local mirror keeps using it), else Debian's redirector.
pub fn debian_mirror() -> String {
    if let Some(mirror) = std::env::var_os("DAWN_COMPUTE_MIRROR") {
        return mirror.to_string_lossy().trim_end_matches('/').to_owned();
    }
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut extra: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
        extra.sort();
        files.extend(
            extra
                .into_iter()
                .filter(|p| p.extension().is_some_and(|e| e == "list" || e == "sources")),
        );
    }
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        if let Some(uri) = text.lines().find_map(debian_archive_uri) {
            return uri;
        }
    }
    FALLBACK_MIRROR.to_owned()
}

/// Picks a Debian archive URI (not the security archive) out of one apt sources line, in either
/// the one-line (`deb URI suite`) or the deb822 (`URIs: URI`) format.
fn debian_archive_uri(line: &str) -> Option<String> {
    let line = line.trim();
    if line.starts_with('#') {
        return None;
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    let candidates: Vec<&str> = match words.first() {
        Some(&"URIs:") => words[1..].to_vec(),
        Some(&"deb") => words
            .iter()
            .skip(1)
            .filter(|w| !w.starts_with('['))
            .take(1)
            .copied()
            .collect(),
        _ => return None,
    };
    candidates
        .into_iter()
        .map(|uri| uri.trim_end_matches('/'))
        .find(|uri| uri.starts_with("http") && uri.ends_with("/debian"))
        .map(str::to_owned)
}

/// Fails with a clear message when the mirror (or the configured proxy) does not answer.
pub fn check_reachable(mirror: &str) -> Result<()> {
    let proxy = std::env::var("http_proxy")
        .or_else(|_| std::env::var("HTTP_PROXY"))
        .ok();
    let target = proxy.as_deref().filter(|p| !p.is_empty()).unwrap_or(mirror);
    let (host, port) =
        host_and_port(target).with_context(|| format!("cannot understand the mirror address `{target}`"))?;
    let reachable = (host.as_str(), port)
        .to_socket_addrs()
        .ok()
        .into_iter()
        .flatten()
        .any(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(10)).is_ok());
    if !reachable {
        bail!(
            "cannot reach Debian's package registry at {target}: the sid root is built from it. \
             Check the network (or http_proxy), or set DAWN_COMPUTE_MIRROR to a reachable Debian mirror"
        );
    }
    Ok(())
}

fn host_and_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let authority = authority.rsplit('@').next()?;
    let default_port = if scheme == "https" { 443 } else { 80 };
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => {
            Some((host.trim_matches(['[', ']']).to_owned(), port.parse().ok()?))
        }
        _ => Some((authority.to_owned(), default_port)),
    }
}

/// Quotes a string for a POSIX shell.
pub fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::owned::TempDir;

    #[test]
    fn a_symbolic_link_at_the_lock_path_is_refused_and_its_target_untouched() {
        let tmp = TempDir::new("lock-link");
        let victim = tmp.path().join("victim");
        fs::write(&victim, "important").unwrap();
        let lock = tmp.path().join(".sid-root.lock");
        std::os::unix::fs::symlink(&victim, &lock).unwrap();
        let err = open_own_file(&lock).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert_eq!(fs::read_to_string(&victim).unwrap(), "important");
        // A dangling link is refused too, and nothing is created where it points.
        let dangling = tmp.path().join("dangling.lock");
        std::os::unix::fs::symlink(tmp.path().join("nowhere"), &dangling).unwrap();
        assert!(open_own_file(&dangling).is_err());
        assert!(!tmp.path().join("nowhere").exists());
    }

    #[test]
    fn a_hard_link_at_the_lock_path_is_refused() {
        let tmp = TempDir::new("lock-hardlink");
        let victim = tmp.path().join("victim");
        fs::write(&victim, "important").unwrap();
        let lock = tmp.path().join(".sid-root.lock");
        fs::hard_link(&victim, &lock).unwrap();
        let err = open_own_file(&lock).unwrap_err().to_string();
        assert!(err.contains("hard links"), "{err}");
        assert_eq!(fs::read_to_string(&victim).unwrap(), "important");
    }

    #[test]
    fn a_folder_at_the_lock_path_is_refused() {
        let tmp = TempDir::new("lock-dir");
        assert!(open_own_file(tmp.path()).is_err());
    }

    #[test]
    fn the_lock_is_created_or_reused_without_truncating() {
        let tmp = TempDir::new("lock-ok");
        let lock = tmp.path().join(".sid-root.lock");
        let file = open_own_file(&lock).unwrap();
        file.lock().unwrap();
        drop(file);
        fs::write(&lock, "left by an earlier run").unwrap();
        let file = open_own_file(&lock).unwrap();
        file.lock().unwrap();
        assert_eq!(fs::read_to_string(&lock).unwrap(), "left by an earlier run");
    }

    #[test]
    fn a_missing_or_empty_keyring_is_an_error() {
        let tmp = TempDir::new("keyring");
        let missing = tmp.path().join("debian-archive-keyring.gpg");
        let err = require_keyring(&missing).unwrap_err().to_string();
        assert!(err.contains("debian-archive-keyring"), "{err}");
        assert!(err.contains("unverified"), "{err}");
        fs::write(&missing, "").unwrap();
        assert!(require_keyring(&missing).is_err());
        fs::write(&missing, "keys").unwrap();
        assert_eq!(require_keyring(&missing).unwrap(), missing);
    }

    #[test]
    fn the_log_keeps_output_and_shows_its_tail_on_failure() {
        let tmp = TempDir::new("log");
        let path = tmp.path().join("env.log");
        fs::write(&path, "an earlier run's output\n").unwrap();
        let log = Log::create(&path).unwrap();
        log.run(Command::new("sh").args(["-c", "echo quiet-success"]), "fix")
            .unwrap();
        let script = "for i in $(seq 1 100); do echo line$i; done; echo oops >&2; exit 3";
        let err = log
            .phase("failing", || {
                log.run(Command::new("sh").args(["-c", script]), "Do this.")
            })
            .unwrap_err()
            .to_string();
        assert!(err.contains("oops") && err.contains("line100"), "{err}");
        assert!(!err.contains("line60\n") && !err.contains("quiet-success"), "{err}");
        assert!(
            err.contains(&path.display().to_string()) && err.ends_with("Do this."),
            "{err}"
        );
        let text = fs::read_to_string(&path).unwrap();
        assert!(!text.contains("an earlier run"));
        assert!(text.contains("quiet-success") && text.contains("line1\n") && text.contains("==== failing"));
    }

    #[test]
    fn the_log_refuses_a_symbolic_link() {
        let tmp = TempDir::new("log-link");
        let victim = tmp.path().join("victim");
        fs::write(&victim, "important").unwrap();
        let path = tmp.path().join("env.log");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        assert!(Log::create(&path).is_err());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "important");
    }

    #[test]
    fn finds_archive_in_both_source_formats() {
        assert_eq!(
            debian_archive_uri("URIs: http://deb.debian.org/debian"),
            Some("http://deb.debian.org/debian".into())
        );
        assert_eq!(
            debian_archive_uri("deb [arch=amd64] http://mirror.example/debian/ bookworm main"),
            Some("http://mirror.example/debian".into())
        );
        assert_eq!(debian_archive_uri("URIs: http://deb.debian.org/debian-security"), None);
        assert_eq!(debian_archive_uri("# deb http://deb.debian.org/debian sid main"), None);
    }

    #[test]
    fn parses_host_and_port() {
        assert_eq!(
            host_and_port("http://deb.debian.org/debian"),
            Some(("deb.debian.org".into(), 80))
        );
        assert_eq!(
            host_and_port("https://m.example:8443/debian"),
            Some(("m.example".into(), 8443))
        );
        assert_eq!(host_and_port("http://user:pw@proxy:3128"), Some(("proxy".into(), 3128)));
        assert_eq!(host_and_port("no-scheme"), None);
    }

    #[test]
    fn quotes_for_the_shell() {
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
    }
}
