//! Facts about the host machine and small process helpers.

use std::ffi::OsStr;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

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

/// Installs a host package with apt when `binary` is missing (debootstrap, for instance).
pub fn ensure_host_tool(binary: &str, package: &str) -> Result<()> {
    if which(binary).is_some() || Path::new("/usr/sbin").join(binary).is_file() {
        return Ok(());
    }
    if which("apt-get").is_none() {
        bail!(
            "`{binary}` is missing and this host has no `apt-get` to install it: `cargo xtask env` \
             expects a Debian or Ubuntu host. Install `{package}` with your package manager, or run \
             the project in a Debian container"
        );
    }
    eprintln!("xtask: installing `{package}` on the host (apt-get)");
    let fix = "Fix the host's apt sources or network, then re-run `cargo xtask env`.";
    run_checked(Command::new("apt-get").args(["update", "-q"]), fix)?;
    run_checked(
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
    use super::*;

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
