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

use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::capture::{self, Cap};
use super::{BadLine, Entry, Mode, Outcome};

/// Bytes kept of a result line past its case string (a timing or a failure's message).
const MAX_RESULT_TAIL: usize = 64 << 10;

/// Bytes kept of upstream's result lines for one case (normally one line, a few per backend).
const MAX_KEPT_STDOUT: usize = 4 << 20;

/// What is kept of upstream's error output: its last lines, for the crash message.
const STDERR_TAIL: Cap = Cap {
    max_line: 4 << 10,
    max_total: 256 << 10,
};

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

/// Finds `OP(…):` in a line: the start of the op name, and the byte just past the `:`. Of several,
/// the one whose `(` comes first.
///
/// One pass, linear in the line's length however its parentheses nest or fail to close: each `(`
/// is pushed on a stack with where its op name starts (if one is right before it), and popped by
/// its matching `)`. The stack holds 4 bytes per unclosed `(`; a line of 4 GiB or more is read as
/// holding no case.
fn find_case(line: &str) -> Option<(usize, usize)> {
    const NO_NAME: u32 = u32::MAX;
    let bytes = line.as_bytes();
    if u32::try_from(bytes.len()).is_err() {
        return None;
    }
    let is_name = |b: u8| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_';
    let mut open: Vec<u32> = Vec::new();
    let mut best: Option<(usize, usize)> = None; // (the name's start, past the `:`)
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'(' => {
                // The op name: upper-case letters, digits and `_`, right before the `(`, starting
                // with a letter. The walk back stops at the previous `(`, so each byte is walked
                // over at most once.
                let mut start = i;
                while start > 0 && is_name(bytes[start - 1]) {
                    start -= 1;
                }
                let named = start < i
                    && bytes[start].is_ascii_uppercase()
                    && (start == 0 || !bytes[start - 1].is_ascii_alphanumeric());
                open.push(if named { start as u32 } else { NO_NAME });
            }
            b')' => {
                let Some(start) = open.pop() else { continue };
                // Names do not overlap, so the first `(` is the one whose name starts first.
                if start != NO_NAME
                    && bytes.get(i + 1) == Some(&b':')
                    && best.is_none_or(|(first, _)| (start as usize) < first)
                {
                    best = Some((start as usize, i + 2));
                }
            }
            _ => {}
        }
    }
    best
}

/// Reads one line's result: `None` when the line holds no case; an error for a timing that is
/// not a finite positive number.
fn parse_line(line: &str) -> Option<Result<(String, Outcome), LineError>> {
    let (start, after) = find_case(line)?;
    let case = &line[start..after - 1];
    let before = line[..start].trim();
    let rest = line[after..].trim();
    let outcome = if rest.is_empty() {
        Outcome::Crash("output ends in the case's line".into())
    } else if let Some(timed) = parse_timing(rest) {
        match timed {
            Ok(timed) => timed,
            Err(reason) => return Some(Err(LineError::BadTiming(reason))),
        }
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
        return Some(Err(LineError::Unrecognised));
    };
    Some(Ok((case.to_owned(), outcome)))
}

/// Why a line with a case was not read as a result.
enum LineError {
    /// No result this parser knows.
    Unrecognised,
    /// A timing that is not a finite positive number (the reason).
    BadTiming(String),
}

/// `N runs - X us/run - …`: `None` when the text is not a timing; an error when its numbers are
/// not a count and a finite positive time.
fn parse_timing(rest: &str) -> Option<Result<Outcome, String>> {
    let (runs, rest) = rest.split_once(" runs - ")?;
    let us = rest.trim_start().split_once(" us/run")?.0.trim();
    let Ok(runs) = runs.trim().parse() else {
        return Some(Err(format!("`{}` is not a number of runs", super::clip(runs.trim()))));
    };
    Some(
        super::check_us_per_run(us.parse().unwrap_or(f64::NAN), us)
            .map(|us_per_run| Outcome::Timed { runs, us_per_run }),
    )
}

/// Reads upstream's console output of `perf` or `test` (colour codes and all). Results are
/// tagged with the backend whose `Backend i/n: NAME` heading they came under. A timing that is
/// not a finite positive number is an error naming its line: a ratio of it means nothing.
pub fn parse(text: &str) -> Result<UpstreamReport, BadLine> {
    let text = strip_ansi(text);
    let mut report = UpstreamReport::default();
    let mut backend: Option<String> = None;
    for (index, line) in text.lines().enumerate() {
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
            Some(Err(LineError::BadTiming(reason))) => {
                return Err(BadLine::new(index + 1, line, reason));
            }
            Some(Err(LineError::Unrecognised)) => {
                let (start, after) = find_case(line).unwrap_or((0, 0));
                let case = line.get(start..after.saturating_sub(1)).unwrap_or("");
                let mut entry = Entry::new(case, Outcome::Fail(line[after..].trim().to_owned()));
                entry.backend = backend.clone();
                report.entries.push(entry);
                report.unrecognised.push(line.to_owned());
            }
        }
    }
    Ok(report)
}

/// What goes inside a case string's parentheses (upstream's `vars()`, which its `-p` searches).
pub fn vars(case: &str) -> &str {
    let body = case.split_once('(').map_or("", |(_, b)| b);
    body.strip_suffix(')').unwrap_or(body)
}

/// A regular expression (ECMAScript, as upstream's `std::regex` reads it) that matches exactly
/// `vars`: anchored, with every special character escaped, and followed only by fields at zero
/// (newer upstreams print fields such as `src_overlap=0` that the case lists predate; their
/// zero is the case as the lists mean it).
pub fn exact_pattern(vars: &str) -> String {
    let mut out = String::with_capacity(vars.len() + 32);
    out.push('^');
    for c in vars.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out.push_str("(,[a-z_0-9]+=0)*$");
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
        // Both pipes are drained while the process runs, so that neither can fill and block it;
        // of what they carry, only what `interpret` reads is kept, within a cap.
        let op = format!("{}(", super::op_of(case));
        let result_lines = Cap {
            max_line: case.len() + MAX_RESULT_TAIL,
            max_total: MAX_KEPT_STDOUT,
        };
        let stdout = child.stdout.take().map(|pipe| {
            std::thread::spawn(move || {
                capture::keep_lines(BufReader::new(pipe), result_lines, |line| {
                    let line = strip_ansi(line);
                    line.contains(&op) || line.contains("Backend ") || line.contains("backends passed")
                })
            })
        });
        let stderr = child
            .stderr
            .take()
            .map(|pipe| std::thread::spawn(move || capture::keep_lines(BufReader::new(pipe), STDERR_TAIL, |_| true)));
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
        let joined =
            |drain: Option<std::thread::JoinHandle<String>>| drain.and_then(|d| d.join().ok()).unwrap_or_default();
        let (stdout, stderr) = (joined(stdout), joined(stderr));
        let mut entry = interpret(case, &stdout, &stderr, &status)
            .map_err(|e| format!("{} on {case}: {}: `{}`", self.program.display(), e.reason, e.text))?;
        if timed_out {
            let limit = self.timeout.unwrap_or_default().as_secs_f64();
            entry.outcome = Outcome::Crash(format!("killed after {limit} s without finishing"));
        }
        Ok(entry)
    }
}

/// Upstream's result for `case` from one run's output and exit status; an error for a timing
/// that is not a finite positive number.
pub fn interpret(case: &str, stdout: &str, stderr: &str, status: &std::process::ExitStatus) -> Result<Entry, BadLine> {
    let report = parse(stdout)?;
    let found = report
        .entries
        .iter()
        .find(|e| e.case == case && e.backend.as_deref() != Some("CPU"))
        .or_else(|| report.entries.iter().find(|e| e.case == case))
        .cloned();
    let died = !status.success() && status.code() != Some(1);
    Ok(match found {
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
    })
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
