//! Two saved runs of this tool side by side: `backend-ops compare --base BEFORE --ours AFTER`,
//! both `--output json` output of `perf` (a bundle before a change and after it, or the
//! defaults and a tuning setting).
//!
//! A case timed more than once in one file (runs alternated over rounds and appended) counts
//! with the median of its times, so that one disturbed round does not decide the ratio.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{Entry, Outcome, Row, geometric_mean_ratio, short_case};

/// One saved run: its results and the adapter its header line names (`--output json perf`
/// prints one first; older output has none).
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub entries: Vec<Entry>,
    pub adapter: Option<String>,
}

/// Reads `backend-ops --output json perf` output: the results ([`super::parse_ours`]) and the
/// adapter of its header line. A timing that is not a finite positive number is an error naming
/// its line.
pub fn parse_run(text: &str) -> Result<Run, super::BadLine> {
    let adapter = text.lines().find_map(|line| {
        let value: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
        (value.get("mode")?.as_str()? == "header")
            .then(|| value.get("adapter")?.as_str().map(str::to_owned))
            .flatten()
    });
    Ok(Run {
        entries: super::parse_ours(text)?,
        adapter,
    })
}

/// One entry per case: a case timed several times keeps the median of its times (the mean of
/// the middle two for an even count) and the path of its first timing; a case never timed keeps
/// its first outcome. Order: each case's first appearance.
pub fn merge_repeats(entries: &[Entry]) -> Vec<Entry> {
    let mut order: Vec<&str> = Vec::new();
    let mut by_case: HashMap<&str, Vec<&Entry>> = HashMap::new();
    for e in entries {
        let seen = by_case.entry(e.case.as_str()).or_default();
        if seen.is_empty() {
            order.push(e.case.as_str());
        }
        seen.push(e);
    }
    order
        .into_iter()
        .map(|case| {
            let all = &by_case[case];
            let timed: Vec<&Entry> = all
                .iter()
                .copied()
                .filter(|e| e.outcome.us_per_run().is_some())
                .collect();
            let Some(first) = timed.first() else {
                return all[0].clone();
            };
            let mut times: Vec<f64> = timed.iter().filter_map(|e| e.outcome.us_per_run()).collect();
            times.sort_by(f64::total_cmp);
            let mid = times.len() / 2;
            let median = if times.len() % 2 == 1 {
                times[mid]
            } else {
                (times[mid - 1] + times[mid]) / 2.0
            };
            let runs = timed
                .iter()
                .map(|e| match e.outcome {
                    Outcome::Timed { runs, .. } => runs,
                    _ => 0,
                })
                .sum();
            let mut merged = (*first).clone();
            merged.outcome = Outcome::Timed {
                runs,
                us_per_run: median,
            };
            merged
        })
        .collect()
}

/// One case of both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub case: String,
    pub after: Outcome,
    pub before: Outcome,
    pub path_after: Option<String>,
    pub path_before: Option<String>,
}

impl Change {
    /// Before's time over after's: above 1, after is faster. Only when both were timed.
    pub fn ratio(&self) -> Option<f64> {
        self.as_row().ratio()
    }

    /// Whether both runs name a path and the paths differ.
    pub fn path_changed(&self) -> bool {
        matches!((&self.path_before, &self.path_after), (Some(b), Some(a)) if a != b)
    }

    /// The pair as a [`Row`] of the upstream comparison (after as ours, before as upstream), whose
    /// ratio is the same quotient.
    fn as_row(&self) -> Row {
        Row {
            case: self.case.clone(),
            op: super::op_of(&self.case).to_owned(),
            ours: self.after.clone(),
            path: self.path_after.clone(),
            upstream: self.before.clone(),
        }
    }
}

/// Pairs both runs by case (repeats merged, [`merge_repeats`]): after's cases in order, then
/// the cases only before has.
pub fn pair(before: &[Entry], after: &[Entry]) -> Vec<Change> {
    let before = merge_repeats(before);
    let after = merge_repeats(after);
    let rows = super::match_entries(&after, &before);
    let before_path: HashMap<&str, Option<&String>> =
        before.iter().map(|e| (e.case.as_str(), e.path.as_ref())).collect();
    rows.into_iter()
        .map(|r| Change {
            path_before: before_path.get(r.case.as_str()).copied().flatten().cloned(),
            case: r.case,
            after: r.ours,
            before: r.upstream,
            path_after: r.path,
        })
        .collect()
}

/// Geometric mean of the ratios of the cases timed in both runs, and how many there are.
pub fn geometric_mean(changes: &[Change]) -> Option<(f64, usize)> {
    let rows: Vec<Row> = changes.iter().map(Change::as_row).collect();
    geometric_mean_ratio(&rows)
}

/// The pairs as a Markdown table (padded, so it also reads as plain text): case, after,
/// before, ratio and after's path (`*`: before took another path); then the summary line.
pub fn render_table(changes: &[Change]) -> String {
    let header = [
        "case",
        "after us/run",
        "before us/run",
        "ratio (before/after, >1: after faster)",
        "path (after)",
    ];
    let body: Vec<[String; 5]> = changes
        .iter()
        .map(|c| {
            let mark = if c.path_changed() { "* " } else { "" };
            [
                short_case(&c.case),
                c.after.cell(),
                c.before.cell(),
                c.ratio().map_or_else(|| "—".into(), |x| format!("{x:.3}")),
                format!("{mark}{}", c.path_after.clone().unwrap_or_default()),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &body {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let numeric = |col: usize| (1..=3).contains(&col);
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        out.push('|');
        for (col, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - cell.chars().count());
            if numeric(col) {
                let _ = write!(out, " {pad}{cell} |");
            } else {
                let _ = write!(out, " {cell}{pad} |");
            }
        }
        out.push('\n');
    };
    line(&header.map(String::from));
    let rule: Vec<String> = widths
        .iter()
        .enumerate()
        .map(|(col, w)| {
            if numeric(col) {
                format!("{}:", "-".repeat(w - 1))
            } else {
                "-".repeat(*w)
            }
        })
        .collect();
    line(&rule);
    for row in &body {
        line(row);
    }
    out.push('\n');
    if changes.iter().any(Change::path_changed) {
        out.push_str("*: the run before took another path\n");
    }
    if changes
        .iter()
        .any(|c| c.after == Outcome::Missing || c.before == Outcome::Missing)
    {
        out.push_str("—: that run reported nothing for the case\n");
    }
    out.push_str(&summary(changes));
    out.push('\n');
    out
}

/// One line: how many cases, how many faster after, and the geometric mean ratio.
pub fn summary(changes: &[Change]) -> String {
    let faster = changes.iter().filter(|c| c.ratio().is_some_and(|x| x > 1.0)).count();
    match geometric_mean(changes) {
        Some((mean, n)) => format!(
            "{} cases, {n} timed in both runs: after faster in {faster}, slower in {}; geometric mean ratio {mean:.3} (before / after)",
            changes.len(),
            n - faster
        ),
        None => format!("{} cases, none timed in both runs", changes.len()),
    }
}

/// The pairs as JSON objects, one a line (`--output json`).
pub fn render_json(changes: &[Change]) -> String {
    let mut out = String::new();
    for c in changes {
        let side = |o: &Outcome, path: &Option<String>| {
            let mut v = serde_json::json!({ "status": o.status(), "path": path });
            if let Outcome::Timed { runs, us_per_run } = o {
                v["us_per_run"] = (*us_per_run).into();
                v["runs"] = (*runs).into();
            }
            v
        };
        let line = serde_json::json!({
            "mode": "before-after",
            "op": super::op_of(&c.case),
            "case": c.case,
            "after": side(&c.after, &c.path_after),
            "before": side(&c.before, &c.path_before),
            "ratio": c.ratio(),
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q4: &str = "MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336)";
    const F16: &str = "MUL_MAT(type_a=f16,type_b=f32,m=4096,n=1,k=14336)";
    const FA: &str = "FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1)";

    /// A perf line as `backend-ops --output json perf` prints it.
    fn timed(case: &str, us: f64, path: &str) -> String {
        let full = case.parse::<crate::cases::Case>().unwrap().to_string();
        serde_json::json!({ "mode": "perf", "op": super::super::op_of(case), "case": full, "runs": 1000,
                            "us_per_run": us, "host_us_per_run": 1.0, "flops_per_run": 1, "tflops": 0.1,
                            "path": path })
        .to_string()
    }

    fn header(adapter: &str) -> String {
        serde_json::json!({ "mode": "header", "command": "perf", "adapter": adapter }).to_string()
    }

    #[test]
    fn ratios_are_before_over_after_with_their_geometric_mean() {
        let before = [
            header("NVIDIA H100"),
            timed(Q4, 20.0, "mat-vec"),
            timed(F16, 40.0, "mat-vec"),
        ]
        .join("\n");
        let after = [
            header("NVIDIA H100"),
            timed(F16, 50.0, "mat-vec"),
            timed(Q4, 10.0, "mat-vec"),
        ]
        .join("\n");
        let (before, after) = (parse_run(&before).unwrap(), parse_run(&after).unwrap());
        assert_eq!(before.adapter.as_deref(), Some("NVIDIA H100"));
        let changes = pair(&before.entries, &after.entries);
        assert_eq!(changes.len(), 2);
        // After's order.
        assert!(changes[0].case.starts_with("MUL_MAT(type_a=f16,"));
        assert_eq!(changes[0].ratio(), Some(40.0 / 50.0));
        assert_eq!(changes[1].ratio(), Some(2.0));
        let (mean, n) = geometric_mean(&changes).unwrap();
        assert_eq!(n, 2);
        assert!((mean - (0.8f64 * 2.0).sqrt()).abs() < 1e-12, "{mean}");
        let table = render_table(&changes);
        assert!(
            table.contains("| MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336) |"),
            "{table}"
        );
        assert!(
            table.contains("10.00 |") && table.contains("20.00 |") && table.contains("2.000 |"),
            "{table}"
        );
        assert!(
            table.contains("2 cases, 2 timed in both runs: after faster in 1, slower in 1; geometric mean ratio 1.265"),
            "{table}"
        );
    }

    #[test]
    fn repeats_count_with_their_median_and_missing_cases_show() {
        let before = [
            timed(Q4, 20.0, "a"),
            timed(FA, 30.0, "split"),
            timed(Q4, 24.0, "a"),
            timed(Q4, 100.0, "a"),
        ]
        .join("\n");
        let after = [timed(Q4, 10.0, "b"), timed(Q4, 14.0, "b")].join("\n");
        let changes = pair(
            &parse_run(&before).unwrap().entries,
            &parse_run(&after).unwrap().entries,
        );
        assert_eq!(changes.len(), 2);
        // Before: the median of 20, 24, 100; after: the mean of its two.
        assert_eq!(changes[0].before.us_per_run(), Some(24.0));
        assert_eq!(changes[0].after.us_per_run(), Some(12.0));
        assert_eq!(changes[0].ratio(), Some(2.0));
        assert!(changes[0].path_changed());
        // Only before timed the attention case.
        assert_eq!(changes[1].after, Outcome::Missing);
        assert_eq!(changes[1].ratio(), None);
        let table = render_table(&changes);
        assert!(table.contains("| * b "), "{table}");
        assert!(table.contains("2 cases, 1 timed in both runs"), "{table}");
        let json: Vec<serde_json::Value> = render_json(&changes)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(json[0]["ratio"], 2.0);
        assert_eq!(json[0]["before"]["path"], "a");
        assert_eq!(json[1]["after"]["status"], "missing");
    }

    #[test]
    fn lines_that_are_not_results_are_skipped() {
        let text = format!(
            "not json\n{}\n{{\"mode\":\"perf\",\"status\":\"stopped\"}}\n{}\n",
            header("llvmpipe"),
            timed(F16, 5.0, "p")
        );
        let run = parse_run(&text).unwrap();
        assert_eq!(run.adapter.as_deref(), Some("llvmpipe"));
        assert_eq!(run.entries.len(), 1);
        assert_eq!(summary(&pair(&[], &[])), "0 cases, none timed in both runs");
    }
}
