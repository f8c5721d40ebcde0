//! Comparing this backend with upstream ggml's `test-backend-ops`, case by case.
//!
//! - [`upstream`]: upstream's text output (`test-backend-ops perf …` or `test …`, colour codes
//!   and all) read into [`Entry`]s, and running upstream on one case at a time.
//! - [`parse_ours`]: `backend-ops --output json` lines read into [`Entry`]s.
//! - [`match_entries`] pairs both sides by case string into [`Row`]s; [`render_table`] prints
//!   them, [`plot::plot_svg`] draws the ratios.
//!
//! Case strings are compared normalised ([`normalise_case`]): parsed as a [`Case`] and printed back
//! (every field, upstream's order and number format), so `--case` specs with fields left out match
//! upstream's full strings.

pub mod before_after;
pub mod capture;
pub mod plot;
pub mod upstream;

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::cases::Case;

/// What kind of results are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Timings (`perf`).
    Perf,
    /// Correctness against the CPU (`test`).
    Test,
}

impl Mode {
    /// The mode's name as both programs take it on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Perf => "perf",
            Mode::Test => "test",
        }
    }
}

/// What one program reported for one case.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Timed: `runs` runs at `us_per_run` microseconds each.
    Timed { runs: u64, us_per_run: f64 },
    /// The test agrees with the CPU.
    Ok,
    /// The test disagrees or failed to run; what the program said, if anything.
    Fail(String),
    /// The program does not support the case; its reason or backend, if given.
    Unsupported(String),
    /// The program died on this case (or its output stops in the middle of the case's line).
    Crash(String),
    /// The program reported nothing for this case (not in its list, or filtered out).
    Missing,
}

impl Outcome {
    /// Microseconds per run, for a timed outcome.
    pub fn us_per_run(&self) -> Option<f64> {
        match self {
            Outcome::Timed { us_per_run, .. } => Some(*us_per_run),
            _ => None,
        }
    }

    /// A short word or phrase for a table cell.
    pub fn cell(&self) -> String {
        match self {
            Outcome::Timed { us_per_run, .. } => format!("{us_per_run:.2}"),
            Outcome::Ok => "OK".into(),
            Outcome::Fail(d) if d.is_empty() => "FAIL".into(),
            Outcome::Fail(d) => format!("FAIL ({d})"),
            Outcome::Unsupported(_) => "not supported".into(),
            Outcome::Crash(d) if d.is_empty() => "crash".into(),
            Outcome::Crash(d) => format!("crash ({d})"),
            Outcome::Missing => "—".into(),
        }
    }

    /// A one-word name for JSON output.
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Timed { .. } => "timed",
            Outcome::Ok => "ok",
            Outcome::Fail(_) => "fail",
            Outcome::Unsupported(_) => "unsupported",
            Outcome::Crash(_) => "crash",
            Outcome::Missing => "missing",
        }
    }
}

/// One program's result for one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The case string, normalised ([`normalise_case`]).
    pub case: String,
    /// The op name (`MUL_MAT`, …), as the case string starts.
    pub op: String,
    pub outcome: Outcome,
    /// The path the backend took (ours only, when it says).
    pub path: Option<String>,
    /// The backend that produced it (upstream: the `Backend i/n: NAME` heading it came under).
    pub backend: Option<String>,
}

impl Entry {
    /// An entry for `case` (any spelling [`normalise_case`] takes).
    pub fn new(case: &str, outcome: Outcome) -> Entry {
        let case = normalise_case(case);
        let op = op_of(&case).to_owned();
        Entry {
            case,
            op,
            outcome,
            path: None,
            backend: None,
        }
    }
}

/// The op name a case string starts with (everything before the first `(`).
pub fn op_of(case: &str) -> &str {
    case.split_once('(').map_or(case, |(op, _)| op).trim()
}

/// A case string in one canonical spelling: parsed as a [`Case`] and printed back, when it parses
/// (fields in upstream's order, defaults filled in, numbers as upstream prints them); otherwise
/// (an op this crate does not know) the text without white space.
pub fn normalise_case(text: &str) -> String {
    let mut compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    loop {
        match compact.parse::<Case>() {
            Ok(case) => return case.to_string(),
            // A field the case lists predate, at zero (newer upstreams print `src_overlap=0`
            // and the like): the case as the lists mean it, so it goes.
            Err(crate::cases::CaseError::UnknownField { field, .. }) => {
                let (op, fields) = split_fields(&compact);
                let zero = format!("{field}=0");
                if !fields.contains(&zero.as_str()) {
                    return compact;
                }
                let kept: Vec<&str> = fields.into_iter().filter(|f| *f != zero).collect();
                compact = format!("{op}({})", kept.join(","));
            }
            Err(_) => return compact,
        }
    }
}

/// The case string with every field that is at its default left out, as `--case` takes it:
/// `MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336)`. Strings that do not parse come back
/// as they are.
pub fn short_case(text: &str) -> String {
    let Ok(full) = text.parse::<Case>() else {
        return text.to_owned();
    };
    let (op, fields) = split_fields(text);
    let mut kept: Vec<&str> = fields.clone();
    for field in &fields {
        let without: Vec<&str> = kept.iter().copied().filter(|f| f != field).collect();
        let candidate = format!("{op}({})", without.join(","));
        if candidate.parse::<Case>().is_ok_and(|c| c == full) {
            kept = without;
        }
    }
    format!("{op}({})", kept.join(","))
}

/// The fields whose values differ between the cases of `cases` that share an op, per case:
/// what tells the cases of one op apart (`type_a=q4_0,n=512`).
pub fn distinguishing_fields(cases: &[&str]) -> Vec<String> {
    let split: Vec<(&str, Vec<&str>)> = cases.iter().map(|c| split_fields(c)).collect();
    let mut values: HashMap<(&str, &str), Vec<&str>> = HashMap::new();
    for (op, fields) in &split {
        for field in fields {
            let (name, value) = field.split_once('=').unwrap_or((field, ""));
            let seen = values.entry((op, name)).or_default();
            if !seen.contains(&value) {
                seen.push(value);
            }
        }
    }
    split
        .iter()
        .map(|(op, fields)| {
            let differing: Vec<&str> = fields
                .iter()
                .copied()
                .filter(|f| {
                    let name = f.split_once('=').map_or(*f, |(n, _)| n);
                    values.get(&(*op, name)).is_some_and(|v| v.len() > 1)
                })
                .collect();
            differing.join(",")
        })
        .collect()
}

/// `OP(a=1,b=[1,2])` → (`OP`, [`a=1`, `b=[1,2]`]): splits on the commas outside brackets.
fn split_fields(case: &str) -> (&str, Vec<&str>) {
    let Some((op, rest)) = case.split_once('(') else {
        return (case, Vec::new());
    };
    let body = rest.strip_suffix(')').unwrap_or(rest);
    let mut fields = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, ch) in body.char_indices() {
        match ch {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                fields.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < body.len() {
        fields.push(&body[start..]);
    }
    (op, fields)
}

/// The element types that name a case's group in tables and charts: `type_a` for MUL_MAT,
/// `type_K` (and `type_V` when it differs) for FLASH_ATTN_EXT.
pub fn type_label(case: &str) -> String {
    match case.parse::<Case>() {
        Ok(Case::MulMat(c)) => c.type_a.name().to_owned(),
        Ok(Case::FlashAttnExt(c)) if c.type_k == c.type_v => c.type_k.name().to_owned(),
        Ok(Case::FlashAttnExt(c)) => format!("{}/{}", c.type_k.name(), c.type_v.name()),
        Ok(Case::Decoder(_)) | Err(_) => {
            let (_, fields) = split_fields(case);
            fields
                .iter()
                .find_map(|f| f.strip_prefix("type_a=").or_else(|| f.strip_prefix("type=")))
                .unwrap_or("")
                .to_owned()
        }
    }
}

/// A line of a program's output that cannot be compared: which line (from 1), what it says
/// (clipped), and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {reason}: `{text}`")]
pub struct BadLine {
    pub line: usize,
    pub text: String,
    pub reason: String,
}

impl BadLine {
    pub fn new(line: usize, text: &str, reason: impl Into<String>) -> BadLine {
        BadLine {
            line,
            text: clip(text.trim()),
            reason: reason.into(),
        }
    }
}

/// `text`, cut to 200 characters for a message.
pub(crate) fn clip(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A time per run as read (`us` is its text): a finite positive number of microseconds, large
/// enough that ratios of it stay finite (a subnormal such as `1e-310` is refused too).
pub(crate) fn check_us_per_run(value: f64, text: &str) -> Result<f64, String> {
    if value.is_normal() && value > 0.0 {
        Ok(value)
    } else {
        Err(format!(
            "the time per run `{}` is not a finite positive number of microseconds",
            clip(text)
        ))
    }
}

/// Reads `backend-ops --output json` output (one object a line; other lines are skipped): the
/// `perf` and `test` results, in order. A time per run that is not a finite positive number is
/// an error naming its line.
pub fn parse_ours(text: &str) -> Result<Vec<Entry>, BadLine> {
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let Ok(serde_json::Value::Object(obj)) = serde_json::from_str::<serde_json::Value>(line.trim()) else {
            continue;
        };
        let str_of = |key: &str| obj.get(key).and_then(|v| v.as_str()).unwrap_or("").to_owned();
        let (mode, case) = (str_of("mode"), str_of("case"));
        if case.is_empty() || !(mode == "perf" || mode == "test") {
            continue;
        }
        let reason = || {
            let detail = obj.get("detail").and_then(|d| d.get("reason")).and_then(|r| r.as_str());
            detail.map(str::to_owned).unwrap_or_else(|| str_of("reason"))
        };
        let outcome = if let Some(us) = obj.get("us_per_run").and_then(|v| v.as_f64()) {
            let text = obj.get("us_per_run").map(|v| v.to_string()).unwrap_or_default();
            let us_per_run = check_us_per_run(us, &text).map_err(|why| BadLine::new(index + 1, line, why))?;
            Outcome::Timed {
                runs: obj.get("runs").and_then(|v| v.as_u64()).unwrap_or(0),
                us_per_run,
            }
        } else {
            match str_of("status").as_str() {
                "ok" => Outcome::Ok,
                "fail" => Outcome::Fail(reason()),
                "unsupported" => Outcome::Unsupported(reason()),
                "crash" => Outcome::Crash(reason()),
                _ => continue,
            }
        };
        let mut entry = Entry::new(&case, outcome);
        entry.path = obj.get("path").and_then(|v| v.as_str()).map(str::to_owned);
        entries.push(entry);
    }
    Ok(entries)
}

/// One case with both programs' results.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The normalised case string.
    pub case: String,
    pub op: String,
    pub ours: Outcome,
    /// The path ours took, when it said.
    pub path: Option<String>,
    pub upstream: Outcome,
}

impl Row {
    /// Upstream's time over ours: above 1, ours is faster. Only when both were timed, with
    /// finite positive times whose ratio is a finite positive number (what a log axis and a
    /// geometric mean can take).
    pub fn ratio(&self) -> Option<f64> {
        match (self.ours.us_per_run(), self.upstream.us_per_run()) {
            (Some(ours), Some(up)) if ours > 0.0 && up > 0.0 => Some(up / ours).filter(|r| r.is_normal()),
            _ => None,
        }
    }
}

/// Pairs both sides' results by normalised case string: ours in order, then cases only upstream
/// has. A case reported twice on one side keeps its first result.
pub fn match_entries(ours: &[Entry], upstream: &[Entry]) -> Vec<Row> {
    let mut up_by_case: HashMap<&str, &Entry> = HashMap::new();
    for e in upstream {
        up_by_case.entry(e.case.as_str()).or_insert(e);
    }
    let mut rows: Vec<Row> = Vec::new();
    let mut seen: HashMap<&str, ()> = HashMap::new();
    for e in ours {
        if seen.insert(e.case.as_str(), ()).is_some() {
            continue;
        }
        rows.push(Row {
            case: e.case.clone(),
            op: e.op.clone(),
            ours: e.outcome.clone(),
            path: e.path.clone(),
            upstream: up_by_case
                .get(e.case.as_str())
                .map_or(Outcome::Missing, |u| u.outcome.clone()),
        });
    }
    for e in upstream {
        if seen.insert(e.case.as_str(), ()).is_some() {
            continue;
        }
        rows.push(Row {
            case: e.case.clone(),
            op: e.op.clone(),
            ours: Outcome::Missing,
            path: None,
            upstream: e.outcome.clone(),
        });
    }
    rows
}

/// The mode the rows hold: perf if any side was timed, else test.
pub fn mode_of(rows: &[Row]) -> Mode {
    let timed = rows
        .iter()
        .any(|r| r.ours.us_per_run().is_some() || r.upstream.us_per_run().is_some());
    if timed { Mode::Perf } else { Mode::Test }
}

/// Geometric mean of the ratios of the rows timed on both sides, and how many there are.
pub fn geometric_mean_ratio(rows: &[Row]) -> Option<(f64, usize)> {
    let logs: Vec<f64> = rows.iter().filter_map(Row::ratio).map(f64::ln).collect();
    (!logs.is_empty()).then(|| ((logs.iter().sum::<f64>() / logs.len() as f64).exp(), logs.len()))
}

/// The rows as a Markdown table (padded, so it also reads as plain text), then a summary line.
/// Cases are printed short ([`short_case`]).
pub fn render_table(rows: &[Row], mode: Mode) -> String {
    let mut out = String::new();
    let header: Vec<&str> = match mode {
        Mode::Perf => vec![
            "case",
            "ours us/run",
            "upstream us/run",
            "ratio (upstream/ours, >1: ours faster)",
            "path (ours)",
        ],
        Mode::Test => vec!["case", "ours", "upstream", "path (ours)"],
    };
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let path = r.path.clone().unwrap_or_default();
            match mode {
                Mode::Perf => vec![
                    short_case(&r.case),
                    r.ours.cell(),
                    r.upstream.cell(),
                    r.ratio().map_or_else(|| "—".into(), |x| format!("{x:.2}")),
                    path,
                ],
                Mode::Test => vec![short_case(&r.case), r.ours.cell(), r.upstream.cell(), path],
            }
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &body {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // Numbers are right-aligned; the case, statuses and paths left-aligned.
    let right = |col: usize| mode == Mode::Perf && (1..=3).contains(&col);
    let line = |cells: &[String], out: &mut String| {
        out.push('|');
        for (col, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = w - cell.chars().count();
            if right(col) {
                let _ = write!(out, " {}{cell} |", " ".repeat(pad));
            } else {
                let _ = write!(out, " {cell}{} |", " ".repeat(pad));
            }
        }
        out.push('\n');
    };
    line(&header.iter().map(|h| h.to_string()).collect::<Vec<_>>(), &mut out);
    out.push('|');
    for (col, w) in widths.iter().enumerate() {
        let dashes = "-".repeat(*w);
        if right(col) {
            let _ = write!(out, " {}: |", &dashes[1..]);
        } else {
            let _ = write!(out, " {dashes} |");
        }
    }
    out.push('\n');
    for row in &body {
        line(row, &mut out);
    }
    out.push('\n');
    if rows
        .iter()
        .any(|r| r.ours == Outcome::Missing || r.upstream == Outcome::Missing)
    {
        out.push_str("—: that program reported nothing for the case (not in its list, or not run)\n");
    }
    out.push_str(&summary(rows, mode));
    out.push('\n');
    out
}

/// One line: how many cases, and the geometric mean ratio (perf) or the verdicts (test).
pub fn summary(rows: &[Row], mode: Mode) -> String {
    match mode {
        Mode::Perf => {
            let faster = rows.iter().filter(|r| r.ratio().is_some_and(|x| x > 1.0)).count();
            match geometric_mean_ratio(rows) {
                Some((mean, n)) => format!(
                    "{} cases, {n} timed by both: ours faster in {faster}, slower in {}; geometric mean ratio {mean:.2} (upstream time / ours)",
                    rows.len(),
                    n - faster
                ),
                None => format!("{} cases, none timed by both", rows.len()),
            }
        }
        Mode::Test => {
            fn count(outcomes: &[&Outcome], f: fn(&Outcome) -> bool) -> usize {
                outcomes.iter().filter(|o| f(o)).count()
            }
            let ours: Vec<&Outcome> = rows.iter().map(|r| &r.ours).collect();
            let up: Vec<&Outcome> = rows.iter().map(|r| &r.upstream).collect();
            let ok = |o: &Outcome| matches!(o, Outcome::Ok);
            let fail = |o: &Outcome| matches!(o, Outcome::Fail(_));
            let unsup = |o: &Outcome| matches!(o, Outcome::Unsupported(_));
            let crash = |o: &Outcome| matches!(o, Outcome::Crash(_));
            format!(
                "{} cases; ours: {} OK, {} FAIL, {} not supported, {} crashed; upstream: {} OK, {} FAIL, {} not supported, {} crashed",
                rows.len(),
                count(&ours, ok),
                count(&ours, fail),
                count(&ours, unsup),
                count(&ours, crash),
                count(&up, ok),
                count(&up, fail),
                count(&up, unsup),
                count(&up, crash),
            )
        }
    }
}

/// The rows as JSON objects, one a line (`--output json`).
pub fn render_json(rows: &[Row]) -> String {
    let mut out = String::new();
    for r in rows {
        let side = |o: &Outcome| {
            let mut v = serde_json::json!({ "status": o.status() });
            match o {
                Outcome::Timed { runs, us_per_run } => {
                    v["us_per_run"] = (*us_per_run).into();
                    v["runs"] = (*runs).into();
                }
                Outcome::Fail(d) | Outcome::Unsupported(d) | Outcome::Crash(d) if !d.is_empty() => {
                    v["reason"] = d.clone().into();
                }
                _ => {}
            }
            v
        };
        let obj = serde_json::json!({
            "mode": "compare",
            "op": r.op,
            "case": r.case,
            "ours": side(&r.ours),
            "upstream": side(&r.upstream),
            "ratio": r.ratio(),
            "path": r.path,
        });
        out.push_str(&obj.to_string());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
