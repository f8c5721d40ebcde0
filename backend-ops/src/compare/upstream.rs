//! Upstream's `test-backend-ops`: reading its console output, and running it on one case.
//!
//! Result lines, as it prints them (ANSI colour codes removed first):
//!
//! ```text
//!   MUL_MAT(type_a=q4_0,…):        31524 runs -    32.42 us/run - 117.44 MFLOP/run -   3.62 TFLOPS
//!   FLASH_ATTN_EXT(hsk=256,…): not supported
//!   MUL_MAT(type_a=q4_0,…): OK
//!   MUL_MAT(type_a=q4_0,…): [MUL_MAT] NMSE = 0.012 > 0.0005 FAIL
//!   [MUL_MAT] NMSE = 0.012 > 0.0005   MUL_MAT(type_a=q4_0,…): FAIL
//!   MUL_MAT(type_a=q4_0,…): not supported [WebGPU]
//! ```
//!
//! (Releases differ in whether a failure's message comes before or after the case.) A line that
//! stops right after `OP(…): ` is a case the program died in.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Entry, Mode, Outcome};

/// Upstream's output, read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpstreamReport {
    /// One entry per result line, in order.
    pub entries: Vec<Entry>,
    /// Lines that hold a case string but no result this parser knows (kept as a failure too).
    pub unrecognised: Vec<String>,
}

/// Removes ANSI escape sequences (`ESC [ … letter`) from `text`.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// Finds `OP(…):` in a line: the start of the op name, and the byte just past the `:`.
fn find_case(line: &str) -> Option<(usize, usize)> {
    let bytes = line.as_bytes();
    let mut search = 0;
    while let Some(rel) = line[search..].find('(') {
        let open = search + rel;
        search = open + 1;
        // The op name: upper-case letters, digits and `_`, right before the `(`, starting with a letter.
        let mut start = open;
        while start > 0
            && (bytes[start - 1].is_ascii_uppercase() || bytes[start - 1].is_ascii_digit() || bytes[start - 1] == b'_')
        {
            start -= 1;
        }
        if start == open
            || !bytes[start].is_ascii_uppercase()
            || (start > 0 && bytes[start - 1].is_ascii_alphanumeric())
        {
            continue;
        }
        // The matching `)`, then `:`.
        let mut depth = 0i32;
        let mut close = None;
        for (i, &b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        if let Some(close) = close
            && bytes.get(close + 1) == Some(&b':')
        {
            return Some((start, close + 2));
        }
    }
    None
}

/// Reads one line's result: `None` when the line holds no case.
fn parse_line(line: &str) -> Option<Result<(String, Outcome), String>> {
    let (start, after) = find_case(line)?;
    let case = &line[start..after - 1];
    let before = line[..start].trim();
    let rest = line[after..].trim();
    let outcome = if rest.is_empty() {
        Outcome::Crash("output ends in the case's line".into())
    } else if let Some(timed) = parse_timing(rest) {
        timed
    } else if let Some(detail) = rest.strip_prefix("not supported") {
        Outcome::Unsupported(detail.trim().trim_start_matches('[').trim_end_matches(']').to_owned())
    } else if rest == "OK" || rest.ends_with(" OK") {
        Outcome::Ok
    } else if rest == "FAIL" || rest.ends_with(" FAIL") || rest.contains("FAIL") {
        let mut detail = rest.trim_end_matches("FAIL").trim().to_owned();
        if !before.is_empty() {
            detail = if detail.is_empty() {
                before.to_owned()
            } else {
                format!("{before} {detail}")
            };
        }
        Outcome::Fail(detail)
    } else {
        return Some(Err(line.to_owned()));
    };
    Some(Ok((case.to_owned(), outcome)))
}

/// `N runs - X us/run - …`.
fn parse_timing(rest: &str) -> Option<Outcome> {
    let (runs, rest) = rest.split_once(" runs - ")?;
    let us = rest.trim_start().split_once(" us/run")?.0;
    Some(Outcome::Timed {
        runs: runs.trim().parse().ok()?,
        us_per_run: us.trim().parse().ok()?,
    })
}

/// Reads upstream's console output of `perf` or `test` (colour codes and all). Results are
/// tagged with the backend whose `Backend i/n: NAME` heading they came under.
pub fn parse(text: &str) -> UpstreamReport {
    let text = strip_ansi(text);
    let mut report = UpstreamReport::default();
    let mut backend: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("Backend ")
            && let Some((counter, name)) = rest.split_once(": ")
            && counter.contains('/')
            && counter.chars().all(|c| c.is_ascii_digit() || c == '/')
        {
            backend = Some(name.trim().to_owned());
            continue;
        }
        match parse_line(line) {
            None => {}
            Some(Ok((case, outcome))) => {
                let mut entry = Entry::new(&case, outcome);
                entry.backend = backend.clone();
                report.entries.push(entry);
            }
            Some(Err(line)) => {
                let (start, after) = find_case(&line).unwrap_or((0, 0));
                let case = line.get(start..after.saturating_sub(1)).unwrap_or("");
                let mut entry = Entry::new(case, Outcome::Fail(line[after..].trim().to_owned()));
                entry.backend = backend.clone();
                report.entries.push(entry);
                report.unrecognised.push(line);
            }
        }
    }
    report
}

/// What goes inside a case string's parentheses (upstream's `vars()`, which its `-p` searches).
pub fn vars(case: &str) -> &str {
    let body = case.split_once('(').map_or("", |(_, b)| b);
    body.strip_suffix(')').unwrap_or(body)
}

/// A regular expression (ECMAScript, as upstream's `std::regex` reads it) that matches exactly
/// `vars`: anchored, with every special character escaped.
pub fn exact_pattern(vars: &str) -> String {
    let mut out = String::with_capacity(vars.len() + 16);
    out.push('^');
    for c in vars.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('$');
    out
}

/// How to run upstream's `test-backend-ops`: `program [pre_args…] MODE -o OP -p PATTERN [-b
/// BACKEND] [extra_args…]`.
#[derive(Debug, Clone)]
pub struct UpstreamCommand {
    /// The program: `test-backend-ops`, or a wrapper such as `run-upstream`.
    pub program: PathBuf,
    /// Arguments before the mode (a wrapper's own, e.g. `run-upstream`'s bundle folder).
    pub pre_args: Vec<String>,
    /// Upstream's `-b`: which backend to run (e.g. `WebGPU`); all when `None`.
    pub backend: Option<String>,
    /// Arguments after the selection.
    pub extra_args: Vec<String>,
    /// How long one case may take before the process is killed and counted as a crash.
    pub timeout: Option<Duration>,
}

impl UpstreamCommand {
    /// The arguments that run exactly `case` (a normalised case string) in `mode`.
    pub fn args(&self, mode: Mode, case: &str) -> Vec<String> {
        let mut args = self.pre_args.clone();
        args.push(mode.name().into());
        args.extend(["-o".into(), super::op_of(case).to_owned()]);
        args.extend(["-p".into(), exact_pattern(vars(case))]);
        if let Some(b) = &self.backend {
            args.extend(["-b".into(), b.clone()]);
        }
        args.extend(self.extra_args.iter().cloned());
        args
    }

    /// Runs upstream on one case and reads its result. A process that dies without reporting the
    /// case gives [`Outcome::Crash`] (with its exit status and last line of error output); one
    /// that exits cleanly without the case gives [`Outcome::Missing`]. Only failing to start the
    /// program is an error.
    pub fn run_case(&self, mode: Mode, case: &str) -> Result<Entry, String> {
        let mut child = Command::new(&self.program)
            .args(self.args(mode, case))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.program.display()))?;
        // Both pipes are drained while the process runs, so that neither can fill and block it.
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_end(&mut bytes);
                }
                String::from_utf8_lossy(&bytes).into_owned()
            })
        };
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let start = Instant::now();
        let mut timed_out = false;
        let status = loop {
            match child.try_wait().map_err(|e| e.to_string())? {
                Some(status) => break status,
                None if self.timeout.is_some_and(|t| start.elapsed() > t) => {
                    timed_out = true;
                    let _ = child.kill();
                    break child.wait().map_err(|e| e.to_string())?;
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let stdout = stdout.join().unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        let mut entry = interpret(case, &stdout, &stderr, &status);
        if timed_out {
            let limit = self.timeout.unwrap_or_default().as_secs_f64();
            entry.outcome = Outcome::Crash(format!("killed after {limit} s without finishing"));
        }
        Ok(entry)
    }
}

/// Upstream's result for `case` from one run's output and exit status.
pub fn interpret(case: &str, stdout: &str, stderr: &str, status: &std::process::ExitStatus) -> Entry {
    let report = parse(stdout);
    let found = report
        .entries
        .iter()
        .find(|e| e.case == case && e.backend.as_deref() != Some("CPU"))
        .or_else(|| report.entries.iter().find(|e| e.case == case))
        .cloned();
    let died = !status.success() && status.code() != Some(1);
    match found {
        Some(mut entry) => {
            if let Outcome::Crash(_) = entry.outcome {
                entry.outcome = Outcome::Crash(exit_detail(status, stderr));
            }
            entry
        }
        None if died || (!status.success() && !stdout.contains("backends passed")) => {
            Entry::new(case, Outcome::Crash(exit_detail(status, stderr)))
        }
        None => Entry::new(case, Outcome::Missing),
    }
}

/// `signal 6: …ggml-webgpu.cpp:491: ggml_webgpu: Queue wait timed out after 30000 ms` — how a
/// process ended, with its last line of error output that is not a backtrace frame.
fn exit_detail(status: &std::process::ExitStatus, stderr: &str) -> String {
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(status);
    #[cfg(not(unix))]
    let signal: Option<i32> = None;
    let how = match (signal, status.code()) {
        (Some(sig), _) => format!("signal {sig}"),
        (None, Some(code)) => format!("exit {code}"),
        (None, None) => "killed".to_owned(),
    };
    // The last line that is not a frame of the backtrace ggml prints after its message.
    let frame = |l: &str| l.contains("(+0x") || l.contains(") [0x") || l.starts_with("bash:");
    let last = strip_ansi(stderr)
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !frame(l))
        .map(|l| l.chars().take(200).collect::<String>());
    match last {
        Some(l) => format!("{how}: {l}"),
        None => how,
    }
}
